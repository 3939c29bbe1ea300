package postgres_test

import (
	"testing"

	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/state/postgres"
	"github.com/gapless-dev/gapless/state/statetest"
)

// newConformanceStore opens a store on a fresh migrated database of its own; the
// suite closes the store, and pgtest drops the database after that.
func newConformanceStore(t *testing.T) state.Store {
	t.Helper()
	s, err := postgres.Open(t.Context(), migratedDatabase(t))
	if err != nil {
		t.Fatalf("opening the PostgreSQL store: %v", err)
	}
	return s
}

func TestConformance(t *testing.T) {
	t.Parallel()
	statetest.Run(t, newConformanceStore)
}

func BenchmarkStore(b *testing.B) {
	statetest.RunBenchmarks(b, func(b *testing.B) state.Store {
		b.Helper()
		s, err := postgres.Open(b.Context(), migratedDatabase(b))
		if err != nil {
			b.Fatalf("opening the PostgreSQL store: %v", err)
		}
		return s
	})
}
