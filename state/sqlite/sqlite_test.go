package sqlite_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/state/sqlite"
	"github.com/gapless-dev/gapless/state/statetest"
)

// openTemp opens a store on a fresh file under a temporary project folder,
// in its .gapless directory (which Open creates).
func openTemp(t testing.TB) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(t.Context(), sqlite.DefaultPath(t.TempDir()))
	require.NoError(t, err)
	return st
}

func TestConformance(t *testing.T) {
	t.Parallel()
	statetest.Run(t, func(t *testing.T) state.Store { return openTemp(t) })
}

func BenchmarkStore(b *testing.B) {
	statetest.RunBenchmarks(b, func(b *testing.B) state.Store {
		st, err := sqlite.Open(b.Context(), filepath.Join(b.TempDir(), "state.db"))
		require.NoError(b, err)
		return st
	})
}

// BenchmarkRunModelStateCalls is the state work of a scheduler run per
// model (statetest's RunModelStateCalls) with interval records and leases
// unsynced (sync=normal, the default) and synced (sync=full), in one run.
func BenchmarkRunModelStateCalls(b *testing.B) {
	for _, sync := range []sqlite.Sync{sqlite.SyncNormal, sqlite.SyncFull} {
		b.Run("sync="+sync.String(), func(b *testing.B) {
			statetest.BenchRunModel(b, func(b *testing.B) state.Store {
				st, err := sqlite.Open(b.Context(), filepath.Join(b.TempDir(), "state.db"), sqlite.WithSync(sync))
				require.NoError(b, err)
				return st
			})
		})
	}
}
