package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/state/sqlite"
)

// edit replaces old by new in the project file rel, which must contain it.
func edit(t *testing.T, dir, rel, old, new string) {
	t.Helper()
	file := filepath.Join(dir, rel)
	src, err := os.ReadFile(file)
	require.NoError(t, err)
	require.Contains(t, string(src), old)
	require.NoError(t, os.WriteFile(file, []byte(strings.Replace(string(src), old, new, 1)), 0o644))
}

// Scenario: on the example project, each mistake that used to surface
// only while applying (or at the next run) stops `plan --auto-apply` at
// once: exit 1, one line naming the file, line and column (no SQL, no
// second copy), and nothing written: no warehouse file (plan checks on a
// scratch engine) and no plan, environment or snapshot in state.
func TestPlanChecksModelsBeforeWriting(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, file, old, new, want string
	}{
		{"time_column not an output column", "models/daily_revenue.sql", "time_column day", "time_column dy",
			"gapless: models/daily_revenue.sql:3:47: model demo.daily_revenue: time_column dy is not a column of its query " +
				"(its columns: day, customer_id, segment, events, revenue); did you mean day?"},
		{"a string time column without a format", "models/daily_revenue.sql", "date_trunc('day', e.event_ts) AS day",
			"strftime(e.event_ts, '%Y-%m-%d') AS day",
			"gapless: models/daily_revenue.sql:3:47: model demo.daily_revenue: time column day is VARCHAR, text that gapless cannot " +
				"compare with an interval's bounds as time: give its format as in SQLMesh, time_column (day, '%Y-%m-%d'), " +
				"or make it a DATE or TIMESTAMP in the query"},
		{"no start", "gapless.yaml", "  start: '2024-01-01'\n", "",
			"gapless: models/events.sql:2:1: model demo.events has no start, and none of the models it reads has one: " +
				"set start in its MODEL header (start '2024-01-01') or model_defaults.start in gapless.yaml"},
		{"an unknown column", "models/daily_revenue.sql", "sum(e.amount)", "sum(e.amout)",
			`gapless: models/daily_revenue.sql:14:9: model demo.daily_revenue: unknown column amout in its query (Candidate bindings: "amount")`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := initProject(t)
			edit(t, dir, c.file, c.old, c.new)
			r := run(t, dir, "plan", "--auto-apply", "--execution-time", t0)
			require.Equal(t, ExitFailure, r.code, r.stdout)
			require.Equal(t, c.want+"\n", r.stderr)
			require.Empty(t, r.stdout, "no plan is printed")

			require.NoFileExists(t, filepath.Join(dir, "warehouse.duckdb"))
			require.Equal(t, "[]\n", mustRun(t, dir, "environments", "--json"))
			st, err := sqlite.Open(t.Context(), filepath.Join(dir, ".gapless", "state.db"))
			require.NoError(t, err)
			defer st.Close()
			plans, err := st.ListPlans(t.Context(), state.PlanFilter{})
			require.NoError(t, err)
			require.Empty(t, plans)
		})
	}
}

// Scenario: the same check on PostgreSQL, where the plan describes the
// models against the warehouse itself (in a transaction it rolls back):
// an unknown column is one line at its place in the file, with the
// server's hint, and no physical schema is left in the warehouse.
func TestPostgresPlanChecksModelsBeforeWriting(t *testing.T) {
	t.Parallel()
	dir := pgProject(t)
	edit(t, dir, "models/daily.sql", "sum(e.amount)", "sum(e.amout)")
	r := run(t, dir, "plan", "--auto-apply", "--execution-time", t0)
	require.Equal(t, ExitFailure, r.code, r.stdout)
	require.Equal(t, `gapless: models/daily.sql:7:87: model shop.daily: unknown column amout in its query `+
		`(Perhaps you meant to reference the column "e.amount".)`+"\n", r.stderr)
	res := queryRows(t, dir, "SELECT count(*) FROM information_schema.schemata WHERE schema_name LIKE 'gapless%'")
	require.Equal(t, [][]any{{float64(0)}}, res.Rows)
	require.Equal(t, "[]\n", mustRun(t, dir, "environments", "--json"))
}
