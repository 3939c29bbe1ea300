package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/internal/pgtest"
)

// pgProject copies testdata/pgproject (postgres-dialect models: a seed, an
// hourly incremental model, a daily rollup, a FULL model and a VIEW) into a
// fresh folder whose gapless.yaml points the warehouse and the state at one
// fresh PostgreSQL database.
func pgProject(t *testing.T) string {
	t.Helper()
	url := pgtest.NewDatabase(t)
	dir := t.TempDir()
	src := filepath.Join("testdata", "pgproject")
	require.NoError(t, os.CopyFS(dir, os.DirFS(src)))
	yaml := "warehouse: " + url + "\nstate: " + url + "\nmodel_defaults:\n  dialect: postgres\n  start: '2024-01-01'\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "gapless.yaml"), []byte(yaml), 0o644))
	return dir
}

// Scenario: the same story as the embedded default, on PostgreSQL for both
// state and compute: deploy prod, run, check intervals and rows; then a
// breaking change in dev that reuses prod's upstream table, invalidated and
// swept by the janitor (--snapshot-ttl 0: its tables at once).
func TestPostgresPlanRunStatusJanitor(t *testing.T) {
	t.Parallel()
	dir := pgProject(t)

	out := mustRun(t, dir, "plan", "--auto-apply", "--execution-time", t0)
	require.Contains(t, out, "24 intervals in [2024-01-01T00:00:00Z, 2024-01-02T00:00:00Z)")
	require.Equal(t, float64(24*4), count(t, dir, "shop.events"))

	st := checkRunCatchesUp(t, dir)

	file := filepath.Join(dir, "models", "daily.sql")
	src, err := os.ReadFile(file)
	require.NoError(t, err)
	edited := strings.Replace(string(src), "sum(e.amount) AS revenue", "sum(e.amount) AS revenue, max(e.amount) AS biggest", 1)
	require.NoError(t, os.WriteFile(file, []byte(edited), 0o644))
	mustRun(t, dir, "plan", "dev", "--auto-apply", "--execution-time", t1)
	dev := statusOf(t, dir, "dev", "--execution-time", t1)
	require.Equal(t, st["shop.events"].Version, dev["shop.events"].Version)
	require.Equal(t, float64(2), count(t, dir, "shop__dev.daily"))

	mustRun(t, dir, "invalidate", "dev", "--execution-time", t1)
	var rep janitorReport
	require.NoError(t, json.Unmarshal([]byte(mustRun(t, dir, "janitor", "--json", "--snapshot-ttl", "0", "--execution-time", t1)), &rep))
	require.Equal(t, []string{"dev"}, rep.Environments)
	require.Contains(t, rep.Tables, "gapless__shop.shop__daily__"+dev["shop.daily"].Version)
	require.Equal(t, float64(29*4), count(t, dir, "shop.events"))

	require.Contains(t, mustRun(t, dir, "migrate"), "is at schema version")
}

// checkRunCatchesUp checks the shop project deployed at t0: at t1 five
// hours of shop.events are missing; gapless run at t1 covers them, records
// the run, and the tables hold the rows of 29 hours. It returns prod's
// status after the run.
func checkRunCatchesUp(t *testing.T, dir string) map[string]statusRow {
	t.Helper()
	st := statusOf(t, dir, "--execution-time", t1)
	require.Equal(t, []string{"[2024-01-02T00:00:00Z, 2024-01-02T05:00:00Z)"}, st["shop.events"].Missing)

	mustRun(t, dir, "run", "--execution-time", t1)
	st = statusOf(t, dir, "--execution-time", t1)
	require.Equal(t, []string{"[2024-01-01T00:00:00Z, 2024-01-02T05:00:00Z)"}, st["shop.events"].Covered)
	require.Empty(t, st["shop.events"].Missing)
	require.Equal(t, testNow, st["shop.events"].LastRunAt)
	require.Equal(t, "[2024-01-02T00:00:00Z, 2024-01-02T05:00:00Z)", st["shop.events"].LastRunRange)
	require.Equal(t, float64(29*4), count(t, dir, "shop.events"))
	require.Equal(t, float64(2), count(t, dir, "shop.totals"))
	return st
}
