package trino_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/internal/trinotest"
	"github.com/gapless-dev/gapless/warehouse"
	"github.com/gapless-dev/gapless/warehouse/trino"
	"github.com/gapless-dev/gapless/warehouse/warehousetest"
)

// TestConformance runs the engine conformance suite, each scenario on a
// test catalog of its own.
//
// The suite first opens one engine with Run's own t, only to ask what it
// declares: that one is opened on the cluster's system catalog, not on a
// test catalog, because a test catalog taken with Run's t would stay lent
// until every scenario ended, while a scenario may be waiting for exactly
// that catalog (trinotest waits on one chosen by the test's name when all
// are lent): the run would never end.
func TestConformance(t *testing.T) {
	t.Parallel()
	warehousetest.Run(t, func(t *testing.T) warehouse.Engine {
		if !strings.Contains(t.Name(), "/") {
			trinotest.Require(t)
			e, err := trino.Open(t.Context(), trinotest.ServerURL()+"/system")
			require.NoError(t, err)
			return e
		}
		return newEngine(t)
	})
}

func BenchmarkConformance(b *testing.B) {
	warehousetest.RunBenchmarks(b, func(b *testing.B) warehouse.Engine { return newEngine(b) })
}
