package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/snapshot"
)

// addBiggest adds a column to daily_revenue, which groups BY ALL: breaking
// for gapless, though no child reads the new column.
func addBiggest(t *testing.T, dir string) {
	editModel(t, dir, "daily_revenue.sql", "sum(e.amount) AS revenue", "sum(e.amount) AS revenue,\n  max(e.amount) AS biggest")
}

// planJSON runs `plan --json` and decodes its summary.
func planJSON(t *testing.T, dir string, args ...string) planSummary {
	t.Helper()
	var s planSummary
	require.NoError(t, json.Unmarshal([]byte(mustRun(t, dir, append([]string{"plan", "--json"}, args...)...)), &s))
	return s
}

func changeOf(t *testing.T, s planSummary, name string) map[string]any {
	t.Helper()
	for _, c := range s.Changes {
		if c.Name == name {
			b, err := json.Marshal(c)
			require.NoError(t, err)
			var m map[string]any
			require.NoError(t, json.Unmarshal(b, &m))
			return m
		}
	}
	require.Failf(t, "no change", "%s is not among the plan's changes", name)
	return nil
}

// Scenario: a user edits three models of the deployed example: a column
// added to daily_revenue (which groups BY ALL), a new owner on
// customer_totals, a new description on events. The plan says, for each
// model, its category and why, and shows the header diff of the two header
// changes next to the query diff; `plan --json` carries the same.
func TestPlanExplainsItsChanges(t *testing.T) {
	t.Parallel()
	dir := initProject(t)
	mustRun(t, dir, "plan", "--auto-apply", "--execution-time", t0)
	addBiggest(t, dir)
	editModel(t, dir, "customer_totals.sql", "description 'Lifetime revenue per customer'",
		"description 'Lifetime revenue per customer',\n  owner 'finance'")
	editModel(t, dir, "events.sql", "description 'Synthetic events, twelve per hour'", "description 'Synthetic events'")

	out := mustRun(t, dir, "plan", "dev", "--execution-time", t0)
	require.Contains(t, out, "~ demo.daily_revenue  breaking: adds column biggest under GROUP BY ALL, where gapless counts every added column as breaking\n")
	require.Contains(t, out, "~ demo.customer_totals  indirect-breaking: reads demo.daily_revenue, which changes breakingly; owner changed too\n")
	require.Contains(t, out, "~ demo.top_customers  indirect-breaking: reads demo.customer_totals, which is indirectly breaking\n")
	require.Contains(t, out, "~ demo.events  metadata-only: only description changed\n")
	require.Contains(t, out, "      --- demo.customer_totals header (current)\n")
	require.Contains(t, out, "      -  owner 'data-eng',\n      +  owner 'finance',\n")
	require.Contains(t, out, "      -  description 'Synthetic events, twelve per hour',\n      +  description 'Synthetic events',\n")
	require.Contains(t, out, "      +  max(e.amount) AS biggest\n", "the query diff is still there")
	require.NotContains(t, out, "demo.daily_revenue header", "daily_revenue's header did not change")

	s := planJSON(t, dir, "dev", "--execution-time", t0)
	dr := changeOf(t, s, "demo.daily_revenue")
	require.Equal(t, "breaking", dr["category"])
	require.Equal(t, "adds column biggest under GROUP BY ALL, where gapless counts every added column as breaking", dr["reason"])
	ct := changeOf(t, s, "demo.customer_totals")
	require.Contains(t, ct["header_diff"], "+  owner 'finance',")
	require.Equal(t, "reads demo.daily_revenue, which changes breakingly; owner changed too", ct["reason"])
}

// Scenario: the user overrides gapless's category. Adding a column under
// GROUP BY ALL is breaking for gapless, but no child reads it: the user
// chooses non-breaking, saves the plan and applies it. The children keep
// prod's tables, nothing downstream is backfilled, and the choice is in the
// saved plan. Choices that are unsafe, for a model the plan does not
// change, or for no model at all are refused with the reason.
func TestPlanCategoryChoice(t *testing.T) {
	t.Parallel()
	dir := initProject(t)
	mustRun(t, dir, "plan", "--auto-apply", "--execution-time", t0)
	prod := statusOf(t, dir, "--execution-time", t0)
	addBiggest(t, dir)

	out := mustRun(t, dir, "plan", "dev", "--category", "demo.daily_revenue=non-breaking", "--out", "plan.json", "--execution-time", t0)
	require.Contains(t, out, "~ demo.daily_revenue  non-breaking: chosen with --category, over breaking (adds column biggest under GROUP BY ALL, where gapless counts every added column as breaking); no child reads a column it removes or changes\n")
	require.Contains(t, out, "~ demo.customer_totals  indirect-non-breaking: reads demo.daily_revenue, which changes non-breakingly\n")
	require.NotContains(t, out, "whole table", "customer_totals and top_customers keep prod's tables")
	saved, err := os.ReadFile(filepath.Join(dir, "plan.json"))
	require.NoError(t, err)
	require.Contains(t, string(saved), `"demo.daily_revenue": "non-breaking"`)

	mustRun(t, dir, "apply", "plan.json")
	dev := statusOf(t, dir, "dev", "--execution-time", t0)
	require.NotEqual(t, prod["demo.daily_revenue"].Version, dev["demo.daily_revenue"].Version)
	require.Equal(t, prod["demo.customer_totals"].Version, dev["demo.customer_totals"].Version)
	require.Equal(t, prod["demo.top_customers"].Version, dev["demo.top_customers"].Version)
	res := queryRows(t, dir, "SELECT max(biggest)::DOUBLE FROM demo__dev.daily_revenue")
	require.Equal(t, 9.0, res.Rows[0][0])

	s := planJSON(t, dir, "--category", "demo.daily_revenue=non-breaking", "--execution-time", t0)
	dr := changeOf(t, s, "demo.daily_revenue")
	require.Equal(t, string(snapshot.ChooseNonBreaking), dr["chosen"])
	require.Equal(t, "breaking", dr["auto_category"])

	// revenue itself changes now, and customer_totals reads it.
	editModel(t, dir, "daily_revenue.sql", "sum(e.amount) AS revenue", "sum(e.amount) * 2 AS revenue")
	for _, tc := range []struct {
		arg, want string
		code      int
	}{
		{"demo.daily_revenue=non-breaking", "gapless: --category demo.daily_revenue=non-breaking refused: demo.customer_totals reads column revenue, which this change alters (column revenue changes; adds column biggest)\n", ExitFailure},
		{"demo.daily_revenue=forward-only", "gapless: --category demo.daily_revenue=forward-only refused: the change adds column biggest, which the existing table does not have; choose breaking or non-breaking to rebuild it\n", ExitFailure},
		{"demo.daily_revenu=breaking", "gapless: --category demo.daily_revenu=breaking refused: no such model; did you mean demo.daily_revenue?\n", ExitFailure},
		{"demo.events=breaking", "gapless: --category demo.events=breaking refused: demo.events is not changed by this plan\n", ExitFailure},
		{"demo.customer_totals=non-breaking", "gapless: --category demo.customer_totals=non-breaking refused: demo.customer_totals changes only through its parents (reads demo.daily_revenue, which changes breakingly); choose a category for the parent\n", ExitFailure},
		{"demo.daily_revenue=metadata-only", `gapless: --category demo.daily_revenue=metadata-only: unknown category "metadata-only": choose breaking, non-breaking or forward-only` + "\n", ExitUsage},
		{"demo.daily_revenue", `gapless: --category "demo.daily_revenue": write MODEL=CATEGORY, e.g. --category demo.daily_revenue=non-breaking` + "\n", ExitUsage},
	} {
		r := run(t, dir, "plan", "--category", tc.arg, "--execution-time", t0)
		require.Equal(t, tc.code, r.code, tc.arg)
		require.Equal(t, tc.want, r.stderr, tc.arg)
		require.Empty(t, r.stdout, tc.arg)
	}
	r := run(t, dir, "plan", "--category", "demo.daily_revenue=breaking", "--category", "demo.daily_revenue=non-breaking", "--execution-time", t0)
	require.Equal(t, ExitUsage, r.code)
	require.Contains(t, r.stderr, "--category: demo.daily_revenue is given both breaking and non-breaking")
}

// Scenario: the tour's flow. A change is built in dev, then planned for
// prod. The versions are dev's: prod's plan lists no backfill for them but
// says whose tables it reuses, and applying it computes nothing. A change to
// the hourly events model that dev built a day of is planned for prod after
// the scheduler moved prod five hours on: only those five hours are listed.
func TestPlanProdReusesWhatDevBuilt(t *testing.T) {
	t.Parallel()
	dir := initProject(t)
	mustRun(t, dir, "plan", "--auto-apply", "--execution-time", t0)
	addBiggest(t, dir)
	mustRun(t, dir, "plan", "dev", "--auto-apply", "--execution-time", t0)
	dev := statusOf(t, dir, "dev", "--execution-time", t0)

	out := mustRun(t, dir, "plan", "prod", "--execution-time", t0)
	for _, name := range []string{"demo.daily_revenue", "demo.customer_totals", "demo.top_customers"} {
		require.Regexp(t, `\n  `+name+` +`+dev[name].Version+`  reuses the table dev built; nothing to compute\n`, out)
	}
	require.NotContains(t, out, "whole table")
	require.NotContains(t, out, "intervals in")
	s := planJSON(t, dir, "prod", "--execution-time", t0)
	require.Empty(t, s.Backfills)
	require.Len(t, s.Reuses, 3)
	require.Equal(t, reuseRow{Name: "demo.daily_revenue", Version: dev["demo.daily_revenue"].Version,
		Covered: []string{"[2024-01-01T00:00:00Z, 2024-01-02T00:00:00Z)"}, Complete: true, BuiltBy: []string{"dev"}}, s.Reuses[0])

	applied := mustRun(t, dir, "plan", "prod", "--auto-apply", "--execution-time", t0)
	require.NotContains(t, applied, "Backfilled:", "nothing is computed again")
	require.Equal(t, dev["demo.customer_totals"].Version, statusOf(t, dir, "--execution-time", t0)["demo.customer_totals"].Version)

	// events gains a column in dev (non-breaking: its children keep their
	// tables); prod's scheduler then runs five more hours.
	editModel(t, dir, "events.sql", "AS amount\n", "AS amount,\n  1 AS one\n")
	mustRun(t, dir, "plan", "dev", "--auto-apply", "--execution-time", t0)
	mustRun(t, dir, "run", "--execution-time", t1)
	out = mustRun(t, dir, "plan", "prod", "--execution-time", t1)
	require.Contains(t, out, "~ demo.events  non-breaking: adds column one, which no child reads\n")
	require.Regexp(t, `\n  demo.events +[0-9a-f]+  5 intervals in \[2024-01-02T00:00:00Z, 2024-01-02T05:00:00Z\) `+
		`\(reuses the table dev built for \[2024-01-01T00:00:00Z, 2024-01-02T00:00:00Z\)\)\n`, out)
}
