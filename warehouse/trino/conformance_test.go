package trino_test

import (
	"testing"

	"github.com/gapless-dev/gapless/warehouse"
	"github.com/gapless-dev/gapless/warehouse/warehousetest"
)

// TestConformance runs the engine conformance suite, each scenario on a
// catalog of its own.
func TestConformance(t *testing.T) {
	t.Parallel()
	warehousetest.Run(t, func(t *testing.T) warehouse.Engine { return newEngine(t) })
}

func BenchmarkConformance(b *testing.B) {
	warehousetest.RunBenchmarks(b, func(b *testing.B) warehouse.Engine { return newEngine(b) })
}
