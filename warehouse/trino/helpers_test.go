package trino_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/warehouse"
	"github.com/gapless-dev/gapless/warehouse/trino"
)

// newEngine opens an engine on a fresh catalog of its own, closed when t
// ends.
func newEngine(t testing.TB) *trino.Engine {
	t.Helper()
	start := time.Now()
	url := pooledCatalog(t)
	if d := time.Since(start); d > 2*time.Second {
		t.Logf("taking a test catalog took %v", d)
	}
	e, err := trino.Open(t.Context(), url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.Close() })
	return e
}

// query runs sql on e and returns its rows, failing t on error.
func query(t testing.TB, e warehouse.Engine, sql string, args ...any) [][]any {
	t.Helper()
	res, err := e.Query(t.Context(), sql, args...)
	require.NoError(t, err, sql)
	return res.Rows
}

// ts returns 2024-01-01 at hour:minute UTC.
func ts(hour, minute int) time.Time { return time.Date(2024, 1, 1, hour, minute, 0, 0, time.UTC) }

// table names wt.<name>.
func table(name string) warehouse.Table { return warehouse.Table{Schema: "wt", Name: name} }
