package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/state"
)

const flagsT0 = "2024-01-03"

// deployedWithChange is the example project deployed to prod at flagsT0,
// then demo.daily_revenue changed breakingly (a new column), so that
// demo.customer_totals and demo.top_customers change indirectly.
func deployedWithChange(t *testing.T) string {
	t.Helper()
	dir := initProject(t)
	mustRun(t, dir, "plan", "--auto-apply", "--execution-time", flagsT0)
	path := filepath.Join(dir, "models", "daily_revenue.sql")
	src, err := os.ReadFile(path)
	require.NoError(t, err)
	changed := strings.Replace(string(src), "count(*) AS events,", "count(*) AS events, 1 AS one,", 1)
	require.NotEqual(t, string(src), changed)
	require.NoError(t, os.WriteFile(path, []byte(changed), 0o644))
	return dir
}

// Scenario: `plan dev --explain` on a deployed project with one breaking
// change says, step by step, what applying would do (the new versions and
// their physical tables with the category and its reason, the intervals to
// compute, the promotion and its check, each view repointed) and changes
// nothing: the warehouse has the same objects and state the same plans and
// events, and dev still does not exist. --explain with --out is a usage
// error.
func TestPlanExplainChangesNothing(t *testing.T) {
	t.Parallel()
	dir := deployedWithChange(t)
	objects, records := warehouseObjects(t, dir), stateRecords(t, dir)
	envs := mustRun(t, dir, "environments", "--json", "--execution-time", flagsT0)

	out := mustRun(t, dir, "plan", "dev", "--explain", "--auto-apply", "--execution-time", flagsT0)
	require.Contains(t, out, "Explained plan ")
	require.Regexp(t, `demo\.daily_revenue +gapless__demo\.demo__daily_revenue__\w+ +new version \w+ +\(breaking: `, out)
	require.Regexp(t, `3\. Backfill[^\n]*\n +demo\.daily_revenue +\w+ +compute 2 intervals in \[2024-01-01T00:00:00Z, 2024-01-03T00:00:00Z\)`, out)
	require.Regexp(t, `demo__dev\.daily_revenue +-> gapless__demo\.demo__daily_revenue__`, out)
	require.Contains(t, out, "nothing applied, state and warehouse untouched")
	require.NotContains(t, out, "Applied plan")

	require.Equal(t, objects, warehouseObjects(t, dir))
	require.Equal(t, records, stateRecords(t, dir))
	require.Equal(t, envs, mustRun(t, dir, "environments", "--json", "--execution-time", flagsT0))

	r := run(t, dir, "plan", "dev", "--explain", "--out", filepath.Join(t.TempDir(), "p.json"), "--execution-time", flagsT0)
	require.Equal(t, ExitUsage, r.code, r.stderr)
	require.Contains(t, r.stderr, "--explain")
}

// Scenario: `plan dev --backfill-model demo.customer_totals` backfills that
// model and what it reads (the changed demo.daily_revenue), as SQLMesh does;
// demo.top_customers, changed too but not selected, is neither backfilled
// nor promoted: dev keeps serving prod's complete version of it. The
// plan says so, and after applying dev's top_customers has prod's rows
// while dev's daily_revenue has the new column. prod refuses the flag
// (exit 2), as SQLMesh does.
func TestPlanBackfillModelPromotesOnlyWhatItBackfills(t *testing.T) {
	t.Parallel()
	dir := deployedWithChange(t)
	r := run(t, dir, "plan", "--backfill-model", "demo.customer_totals", "--execution-time", flagsT0)
	require.Equal(t, ExitUsage, r.code, r.stderr)
	require.Contains(t, r.stderr, "only for development environments")

	r = run(t, dir, "plan", "dev", "--backfill-model", "demo.no_such", "--execution-time", flagsT0)
	require.Equal(t, ExitFailure, r.code, r.stderr)
	require.Contains(t, r.stderr, "--backfill-model: model demo.no_such: no such model")

	var sum planSummary
	require.NoError(t, json.Unmarshal([]byte(mustRun(t, dir, "plan", "dev", "--json", "--backfill-model", "demo.customer_totals",
		"--execution-time", flagsT0)), &sum))
	var backfilled []string
	for _, b := range sum.Backfills {
		backfilled = append(backfilled, b.Name)
	}
	require.ElementsMatch(t, []string{"demo.daily_revenue", "demo.customer_totals"}, backfilled)
	require.Equal(t, []string{"demo.top_customers"}, sum.NotBackfilled)

	out := mustRun(t, dir, "plan", "dev", "--backfill-model", "demo.customer_totals", "--auto-apply", "--execution-time", flagsT0)
	require.Contains(t, out, "Not backfilled (--backfill-model), left for a later plan and not promoted: demo.top_customers")
	require.Contains(t, out, "Applied plan")
	require.Equal(t, queryRows(t, dir, "SELECT * FROM demo.top_customers ORDER BY ALL").Rows,
		queryRows(t, dir, "SELECT * FROM demo__dev.top_customers ORDER BY ALL").Rows, "dev serves prod's top_customers")
	require.Equal(t, []any{float64(1)}, queryRows(t, dir, "SELECT DISTINCT one FROM demo__dev.daily_revenue").Rows[0])
}

// Scenario: `plan dev --empty-backfill` records every missing interval as
// computed without computing any: the plan names each range "WITHOUT
// rows", the apply promotes dev (the intervals are covered), dev's new
// daily_revenue is empty while prod's is not, and the history has one
// empty_backfill event per model, naming the plan, the version and the
// ranges. With --skip-backfill it is a usage error.
func TestPlanEmptyBackfillIsRecordedAndNamed(t *testing.T) {
	t.Parallel()
	dir := deployedWithChange(t)
	r := run(t, dir, "plan", "dev", "--empty-backfill", "--skip-backfill", "--execution-time", flagsT0)
	require.Equal(t, ExitUsage, r.code, r.stderr)

	out := mustRun(t, dir, "plan", "dev", "--empty-backfill", "--auto-apply", "--execution-time", flagsT0)
	require.Contains(t, out, "Empty backfill (--empty-backfill): recorded as computed WITHOUT computing them")
	require.Regexp(t, `demo\.daily_revenue +\w+ +2 intervals in \[2024-01-01T00:00:00Z, 2024-01-03T00:00:00Z\)`, out)
	require.Contains(t, out, "Applied plan")
	require.Equal(t, []any{float64(0)}, queryRows(t, dir, "SELECT count(*) FROM demo__dev.daily_revenue").Rows[0])
	require.NotEqual(t, []any{float64(0)}, queryRows(t, dir, "SELECT count(*) FROM demo.daily_revenue").Rows[0])

	st := openState(t, dir)
	evs, err := st.ListEvents(t.Context(), state.EventFilter{Kinds: []string{state.EventEmptyBackfill}})
	require.NoError(t, err)
	models := map[string]string{}
	for _, e := range evs {
		require.Equal(t, "dev", e.Environment)
		require.NotEmpty(t, e.PlanID)
		models[e.Model] = string(e.Data)
	}
	require.Len(t, models, 3)
	require.Contains(t, models["demo.daily_revenue"], `"ranges":["[2024-01-01T00:00:00Z, 2024-01-03T00:00:00Z)"]`)
	require.Contains(t, models, "demo.top_customers")
}

// Scenario: --include-unmodified, which SQLMesh needs for a development
// environment to have a view of every model, is accepted: gapless's dev
// environments always have one, and the plan says so. dev serves the
// unchanged demo.customers through its own view after the apply.
func TestPlanIncludeUnmodifiedIsWhatGaplessDoes(t *testing.T) {
	t.Parallel()
	dir := deployedWithChange(t)
	out := mustRun(t, dir, "plan", "dev", "--include-unmodified", "--auto-apply", "--execution-time", flagsT0)
	require.Contains(t, out, "--include-unmodified: dev has a view for every model it serves; gapless always does this.")
	require.Equal(t, queryRows(t, dir, "SELECT count(*) FROM demo.customers").Rows,
		queryRows(t, dir, "SELECT count(*) FROM demo__dev.customers").Rows)
}
