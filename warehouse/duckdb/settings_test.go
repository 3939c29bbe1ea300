package duckdb_test

import (
	"errors"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/warehouse"
	"github.com/gapless-dev/gapless/warehouse/duckdb"
)

// setting is current_setting(name) as DuckDB reports it.
func setting(t *testing.T, e *duckdb.Engine, name string) any {
	t.Helper()
	res, err := e.Query(t.Context(), "SELECT current_setting($1)", name)
	require.NoError(t, err)
	require.Len(t, res.Rows, 1)
	return res.Rows[0][0]
}

// Scenario: a project on a small machine bounds DuckDB's memory and
// threads. Every connection of the engine's pool runs with them, on a file
// and in memory; an engine opened without them keeps DuckDB's defaults.
func TestSettingsReachDuckDB(t *testing.T) {
	t.Parallel()
	for _, path := range []string{"", filepath.Join(t.TempDir(), "warehouse.duckdb")} {
		e, err := duckdb.Open(t.Context(), path, duckdb.Options{MemoryLimit: "256MiB", Threads: 1})
		require.NoError(t, err)
		var wg sync.WaitGroup
		for range 4 { // several connections at once
			wg.Go(func() {
				require.Equal(t, "256.0 MiB", setting(t, e, "memory_limit"))
				require.EqualValues(t, 1, setting(t, e, "threads"))
			})
		}
		wg.Wait()
		require.NoError(t, e.Close())
	}
	e, err := duckdb.Open(t.Context(), "", duckdb.Options{})
	require.NoError(t, err)
	defer func() { require.NoError(t, e.Close()) }()
	require.NotEqual(t, "256.0 MiB", setting(t, e, "memory_limit"))
}

// Scenario: a memory limit DuckDB cannot read, or a negative thread count,
// fails Open with an error naming the setting, and leaves the file free
// for the next Open.
func TestBadSettingFailsOpenNamingIt(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "warehouse.duckdb")
	for _, c := range []struct {
		opts duckdb.Options
		name string
	}{
		{duckdb.Options{MemoryLimit: "2 potatoes"}, "memory_limit"},
		{duckdb.Options{MemoryLimit: "1GB'; SET threads = '1"}, "memory_limit"},
		{duckdb.Options{Threads: -1}, "threads"},
	} {
		_, err := duckdb.Open(t.Context(), path, c.opts)
		require.Error(t, err)
		require.ErrorIs(t, err, warehouse.ErrInvalidArgument)
		require.Contains(t, err.Error(), c.name)
		var we *warehouse.Error
		require.True(t, errors.As(err, &we))
		require.Equal(t, "open", we.Op)
	}
	e, err := duckdb.Open(t.Context(), path, duckdb.Options{LockWait: -1})
	require.NoError(t, err)
	require.NoError(t, e.Close())
}
