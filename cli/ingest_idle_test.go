package cli

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// Scenario: a source has landed; another process then holds the DuckDB
// warehouse file. `ingest --once` with nothing new decides from the state
// store that the source is idle and succeeds without waiting for the file;
// once a new file arrives the pass needs the warehouse and reports the
// lock (exit 1); when the other process lets go, the next pass lands it.
func TestIdleIngestDoesNotWaitForTheWarehouse(t *testing.T) {
	t.Parallel()
	dir := initProject(t)
	addSource(t, dir)
	mustRun(t, dir, "plan", "--auto-apply", "--execution-time", t0)
	landing := filepath.Join(dir, "landing", "events")
	require.NoError(t, os.MkdirAll(landing, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(landing, "a.csv"), []byte("id,ts,amount\n1,2024-01-01 00:10:00,1.5\n"), 0o644))
	mustRun(t, dir, "ingest", "--once")

	release := startHolder(t, filepath.Join(dir, "warehouse.duckdb"))
	out := mustRun(t, dir, "ingest", "--once", "--lock-wait", "0s")
	require.Equal(t, "raw.events: 0 staged, 0 applied, nothing new\n", out)

	require.NoError(t, os.WriteFile(filepath.Join(landing, "b.csv"), []byte("id,ts,amount\n2,2024-01-01 01:10:00,2\n"), 0o644))
	r := run(t, dir, "ingest", "--once", "--lock-wait", "0s")
	require.Equal(t, ExitFailure, r.code)
	require.Contains(t, r.stderr, "is in use by another process")

	release()
	out = mustRun(t, dir, "ingest", "--once")
	require.Equal(t, "raw.events: 0 staged, 1 applied, complete through 2024-01-01T01:00:00Z\n", out)
	require.Equal(t, float64(2), count(t, dir, "raw.events"))
}
