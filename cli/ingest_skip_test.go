package cli

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// Scenario: a landed source gets b.csv, whose id is not a number, and
// c.csv behind it: `ingest --once` fails naming b.csv (exit 1) and
// applies nothing. The operator removes b.csv; the next `ingest --once`
// skips its batch, says so, and applies c.csv: raw.events holds a.csv's
// and c.csv's rows.
func TestIngestSkipsARemovedBadFile(t *testing.T) {
	t.Parallel()
	dir := initProject(t)
	addSource(t, dir)
	mustRun(t, dir, "plan", "--auto-apply", "--execution-time", t0)
	landing := filepath.Join(dir, "landing", "events")
	require.NoError(t, os.MkdirAll(landing, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(landing, "a.csv"), []byte("id,ts,amount\n1,2024-01-01 00:10:00,1.5\n"), 0o644))
	mustRun(t, dir, "ingest", "--once")

	require.NoError(t, os.WriteFile(filepath.Join(landing, "b.csv"), []byte("id,ts,amount\nnot-an-id,2024-01-01 00:20:00,2\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(landing, "c.csv"), []byte("id,ts,amount\n3,2024-01-01 01:10:00,3\n"), 0o644))
	r := run(t, dir, "ingest", "--once")
	require.Equal(t, ExitFailure, r.code)
	require.Contains(t, r.stderr, "b.csv")
	require.Equal(t, float64(1), count(t, dir, "raw.events"))

	require.NoError(t, os.Remove(filepath.Join(landing, "b.csv")))
	out := mustRun(t, dir, "ingest", "--once")
	require.Contains(t, out, "raw.events: 0 staged, 1 applied, 1 skipped (its file was removed)")
	require.Equal(t, float64(2), count(t, dir, "raw.events"))
}
