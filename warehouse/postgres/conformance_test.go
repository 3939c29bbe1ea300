package postgres_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/internal/pgtest"
	"github.com/gapless-dev/gapless/warehouse"
	"github.com/gapless-dev/gapless/warehouse/postgres"
	"github.com/gapless-dev/gapless/warehouse/warehousetest"
)

// TestConformance runs the engine conformance suite, each scenario on a
// database of its own.
func TestConformance(t *testing.T) {
	t.Parallel()
	warehousetest.Run(t, func(t *testing.T) warehouse.Engine {
		e, err := postgres.Open(t.Context(), pgtest.NewDatabase(t))
		require.NoError(t, err)
		return e
	})
}

func BenchmarkConformance(b *testing.B) {
	warehousetest.RunBenchmarks(b, func(b *testing.B) warehouse.Engine {
		e, err := postgres.Open(b.Context(), pgtest.NewDatabase(b))
		require.NoError(b, err)
		return e
	})
}
