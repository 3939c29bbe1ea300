package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/state/sqlite"
	"github.com/gapless-dev/gapless/tablediff"
)

// tableDiffJSON is `gapless table_diff --json`.
type tableDiffJSON struct {
	Model string `json:"model"`
	tablediff.Result
}

// devChangedProject is the example project deployed to prod at t0, then
// changed (customer 2's revenue doubled, customer 5 left out, a column
// biggest added to demo.daily_revenue) and deployed to dev at t0.
func devChangedProject(t *testing.T) string {
	t.Helper()
	dir := initProject(t)
	mustRun(t, dir, "plan", "--auto-apply", "--execution-time", t0)
	edit(t, dir, "models/daily_revenue.sql", "  sum(e.amount) AS revenue",
		"  sum(CASE WHEN e.customer_id = 2 THEN e.amount * 2 ELSE e.amount END) AS revenue, max(e.amount) AS biggest")
	edit(t, dir, "models/daily_revenue.sql", "WHERE e.event_ts", "WHERE e.customer_id <> 5 AND e.event_ts")
	mustRun(t, dir, "plan", "dev", "--auto-apply", "--execution-time", t0)
	return dir
}

// Scenario: a SQLMesh user compares prod with dev after changing
// demo.daily_revenue, as `sqlmesh table_diff prod:dev MODEL` does. The
// rows are joined on the model's grain (day, customer_id): 3 rows match
// fully, customer 2's row differs in revenue (267 in prod, 534 in dev),
// customer 5's row is only in prod; dev added the column biggest. The
// text report has the schema tree, the counts with SQLMesh's percentages,
// the column match rates and, with --show-sample, the sample rows; --json
// has the same numbers. Mistakes are named: an environment that does not
// exist, a model an environment does not serve (with the close name), a
// model without grain and no --on (exit 2), keys that repeat (with the
// count), and a first argument that is not ENV1:ENV2 (exit 2).
func TestTableDiffComparesProdWithDev(t *testing.T) {
	t.Parallel()
	dir := devChangedProject(t)

	out := mustRun(t, dir, "table_diff", "prod:dev", "demo.daily_revenue", "--show-sample")
	for _, want := range []string{
		"Schema Diff Between 'PROD' and 'DEV' environments for model 'demo.daily_revenue':",
		"└── Added Columns:\n    └── biggest (DOUBLE)",
		"Row Counts (joined on day, customer_id):",
		"├──  FULL MATCH: 3 rows (66.67%)",
		"├──  PARTIAL MATCH: 1 row (22.22%)",
		"├──  PROD ONLY: 1 row (11.11%)",
		"└──  DEV ONLY: 0 rows (0.00%)",
		"COMMON ROWS sample data differences:",
		"PROD ONLY sample rows:",
		"DEV ONLY sample rows:\n  (none)",
	} {
		require.Contains(t, out, want)
	}
	require.Regexp(t, `revenue +75\.0 +3 +4`, out)
	require.Regexp(t, `events +100\.0 +4 +4`, out)
	require.Regexp(t, `day +customer_id +PROD__revenue +DEV__revenue\n2024-01-01T00:00:00Z +2 +267 +534\n`, out)
	require.Regexp(t, `2024-01-01T00:00:00Z +5 +startup +58 +261\n`, out)

	without := mustRun(t, dir, "table_diff", "prod:dev", "demo.daily_revenue")
	require.NotContains(t, without, "sample", "the sample is shown only with --show-sample")

	var rep tableDiffJSON
	require.NoError(t, json.Unmarshal([]byte(mustRun(t, dir, "table_diff", "prod:dev", "demo.daily_revenue", "--json")), &rep))
	require.Equal(t, "demo.daily_revenue", rep.Model)
	require.Equal(t, "demo__dev", rep.Target.Table.Schema)
	r := rep.Rows
	require.Equal(t, [6]int64{5, 4, 4, 3, 1, 0}, [6]int64{r.SourceCount, r.TargetCount, r.Joined, r.FullMatch, r.SourceOnly, r.TargetOnly})
	require.Len(t, r.Sample.Differing.Rows, 1)
	require.Equal(t, []any{"2024-01-01T00:00:00Z", float64(2), float64(267), float64(534)}, r.Sample.Differing.Rows[0])

	// --on, --where and --skip-columns: revenue left out, every joined row matches.
	require.NoError(t, json.Unmarshal([]byte(mustRun(t, dir, "table_diff", "prod:dev", "demo.daily_revenue",
		"--on", "customer_id", "--where", "customer_id < 5", "--skip-columns", "revenue,biggest", "--json")), &rep))
	require.Equal(t, [3]int64{4, 4, 4}, [3]int64{rep.Rows.SourceCount, rep.Rows.Joined, rep.Rows.FullMatch})
	require.True(t, rep.Schema.Match())

	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"prod:staging", "demo.daily_revenue"}, ExitFailure, "environment staging does not exist; create it with: gapless plan staging"},
		{[]string{"prod:dev", "demo.daily_revenu"}, ExitFailure, "model demo.daily_revenu: environment prod does not serve it; did you mean demo.daily_revenue?"},
		{[]string{"prod:dev", "demo.customer_totals"}, ExitUsage, "model demo.customer_totals has no grain"},
		{[]string{"prod:dev", "demo.daily_revenue", "--on", "segment"}, ExitFailure,
			"the keys (segment) are not unique in prod (demo.daily_revenue): 2 key values appear more than once, in 4 rows"},
		{[]string{"prod:dev", "demo.daily_revenue", "--on", "nope"}, ExitFailure, "key nope: prod (demo.daily_revenue) has no such column"},
		{[]string{"prod", "demo.daily_revenue"}, ExitUsage, "the first argument is two environments as ENV1:ENV2"},
		{[]string{"prod:Dev", "demo.daily_revenue"}, ExitUsage, "bad environment name"},
		{[]string{"prod:dev", "demo.daily_revenue", "--limit", "-1"}, ExitUsage, "--limit must be 0 or more"},
	} {
		res := run(t, dir, append([]string{"table_diff"}, c.args...)...)
		require.Equal(t, c.code, res.code, "%v: %s", c.args, res.stderr)
		require.Contains(t, res.stderr, c.msg, c.args)
	}
	// Two tables named directly, as SQLMesh's table_diff SOURCE:TARGET without a model.
	rep = tableDiffJSON{}
	require.NoError(t, json.Unmarshal([]byte(mustRun(t, dir, "table_diff", "demo.daily_revenue:demo__dev.daily_revenue",
		"--on", "day,customer_id", "--json")), &rep))
	require.Empty(t, rep.Model)
	require.Equal(t, [3]int64{5, 4, 3}, [3]int64{rep.Rows.SourceCount, rep.Rows.Joined, rep.Rows.FullMatch})
	out = mustRun(t, dir, "table_diff", "demo.daily_revenue:demo__dev.daily_revenue", "--on", "day", "--on", "customer_id")
	require.Contains(t, out, "Schema Diff Between 'SOURCE' (demo.daily_revenue) and 'TARGET' (demo__dev.daily_revenue):")
	require.Contains(t, out, "├──  SOURCE ONLY: 1 row (11.11%)")
	res := run(t, dir, "table_diff", "demo.daily_revenue:demo__dev.daily_revenue")
	require.Equal(t, ExitUsage, res.code)
	require.Contains(t, res.stderr, "comparing two tables needs the columns that identify a row: give --on")
	// --skip-grain-check compares on repeating keys anyway.
	mustRun(t, dir, "table_diff", "prod:dev", "demo.daily_revenue", "--on", "segment", "--skip-grain-check")

	// A model without grain diffs with --on.
	require.NoError(t, json.Unmarshal([]byte(mustRun(t, dir, "table_diff", "prod:dev", "demo.customer_totals", "--on", "customer_id", "--json")), &rep))
	require.Equal(t, [3]int64{5, 5, 3}, [3]int64{rep.Rows.SourceCount, rep.Rows.Joined, rep.Rows.FullMatch})
}

// Scenario: table_diff on PostgreSQL (warehouse and state), where shop.daily
// has no grain: without --on it is refused with exit 2; with --on day,
// customer_id it compares prod with a dev whose revenue is doubled for
// customer 2: 1 row matches, 1 differs, in SQL quoted and rounded as
// PostgreSQL needs.
func TestTableDiffOnPostgres(t *testing.T) {
	t.Parallel()
	dir := pgProject(t)
	mustRun(t, dir, "plan", "--auto-apply", "--execution-time", t0)
	edit(t, dir, "models/daily.sql", "sum(e.amount) AS revenue",
		"sum(CASE WHEN e.customer_id = 2 THEN e.amount * 2 ELSE e.amount END) AS revenue")
	mustRun(t, dir, "plan", "dev", "--auto-apply", "--execution-time", t0)

	res := run(t, dir, "table_diff", "prod:dev", "shop.daily")
	require.Equal(t, ExitUsage, res.code, res.stderr)
	require.Contains(t, res.stderr, "model shop.daily has no grain")

	var rep tableDiffJSON
	require.NoError(t, json.Unmarshal([]byte(mustRun(t, dir, "table_diff", "prod:dev", "shop.daily", "--on", "day,customer_id", "--json")), &rep))
	r := rep.Rows
	require.Equal(t, [5]int64{2, 2, 2, 1, 1}, [5]int64{r.SourceCount, r.TargetCount, r.Joined, r.FullMatch, r.PartialMatch})
	require.Equal(t, "shop__dev", rep.Target.Table.Schema)
	require.Equal(t, []string{"day", "customer_id", "PROD__revenue", "DEV__revenue"}, r.Sample.Differing.Columns)
	require.Len(t, r.Sample.Differing.Rows, 1)
	require.Equal(t, float64(2), r.Sample.Differing.Rows[0][1])

	out := mustRun(t, dir, "table_diff", "prod:dev", "shop.daily", "--on", "day", "--on", "customer_id")
	require.Contains(t, out, "└── Schemas match")
	require.Contains(t, out, "├──  FULL MATCH: 1 row (50.00%)")
	require.Regexp(t, `revenue +50\.0 +1 +2`, out)
}

// Scenario: `gapless dag` on the example project. As text it lists every
// model parents first with the models it reads; --file g.dot writes
// Graphviz DOT with exactly the project's five edges; --file g.html writes
// one self-contained page (inline SVG, nothing loaded from the network)
// naming every model; --select +demo.customer_totals keeps the model and
// its upstream only. A selector matching nothing, an unknown extension and
// the file given twice are named errors.
func TestDagAsTextDOTAndHTML(t *testing.T) {
	t.Parallel()
	dir := initProject(t)
	models := []string{"demo.customers", "demo.events", "demo.daily_revenue", "demo.customer_totals", "demo.top_customers"}

	out := mustRun(t, dir, "dag")
	require.Contains(t, out, "5 models, 5 edges")
	require.Contains(t, out, "demo.daily_revenue (INCREMENTAL_BY_TIME_RANGE)\n  <- demo.customers\n  <- demo.events\n")
	require.Contains(t, out, "demo.top_customers (VIEW)\n  <- demo.customer_totals\n")
	last := -1
	for _, m := range models {
		i := strings.Index(out, m+" (")
		require.Greater(t, i, last, "%s is listed after its parents", m)
		last = i
	}

	dot := filepath.Join(dir, "g.dot")
	require.Contains(t, mustRun(t, dir, "dag", "--file", dot), "Wrote the DAG of 5 models (5 edges) to "+dot)
	b, err := os.ReadFile(dot)
	require.NoError(t, err)
	edges := regexp.MustCompile(`(?m)^  "([^"]+)" -> "([^"]+)";$`).FindAllStringSubmatch(string(b), -1)
	var got []string
	for _, e := range edges {
		got = append(got, e[1]+" -> "+e[2])
	}
	require.ElementsMatch(t, []string{
		"demo.customers -> demo.daily_revenue", "demo.events -> demo.daily_revenue",
		"demo.customers -> demo.customer_totals", "demo.daily_revenue -> demo.customer_totals",
		"demo.customer_totals -> demo.top_customers",
	}, got)
	require.True(t, strings.HasPrefix(string(b), "digraph gapless {"))

	// The file as SQLMesh's positional FILE argument, relative to the working directory.
	mustRun(t, dir, "dag", "g.html")
	b, err = os.ReadFile(filepath.Join(dir, "g.html"))
	require.NoError(t, err)
	page := string(b)
	require.Contains(t, page, "<svg")
	for _, m := range models {
		require.Contains(t, page, "<title>"+m+"</title>")
		require.Contains(t, page, "<tr><td>"+m+"</td>")
	}
	require.Equal(t, 5, strings.Count(page, `<path class="edge"`))
	for _, remote := range []string{"http://", "https://", "<script", "<link", "@import", "//cdn"} {
		require.NotContains(t, page, remote, "the page loads nothing")
	}

	out = mustRun(t, dir, "dag", "--select", "+demo.customer_totals")
	require.Contains(t, out, "4 models, 4 edges")
	require.NotContains(t, out, "demo.top_customers")
	out = mustRun(t, dir, "dag", "--select", "demo.events+")
	require.Contains(t, out, "4 models, 3 edges")
	require.NotContains(t, out, "demo.customers (SEED)")
	out = mustRun(t, dir, "dag", "--select", "demo.c*")
	require.Contains(t, out, "2 models, 1 edge")

	res := run(t, dir, "dag", "--select", "demo.event")
	require.Equal(t, ExitFailure, res.code)
	require.Contains(t, res.stderr, "--select demo.event: no model matches it")
	require.Contains(t, res.stderr, "did you mean demo.events?")
	res = run(t, dir, "dag", "--file", "g.png")
	require.Equal(t, ExitUsage, res.code)
	require.Contains(t, res.stderr, "the file must end in .html (a page) or .dot (Graphviz)")
	res = run(t, dir, "dag", "a.dot", "--file", "b.dot")
	require.Equal(t, ExitUsage, res.code)
}

// infoJSON runs `gapless info --json` in dir and decodes it.
func infoJSON(t *testing.T, dir string, code int) infoReport {
	t.Helper()
	res := run(t, dir, "info", "--json")
	require.Equal(t, code, res.code, res.stderr)
	var rep infoReport
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &rep))
	return rep
}

// Scenario: `gapless info` on the example project: with its source before
// any deploy (the models by kind, the source, both backends answering, no
// environment yet), and without it after the first deploy (prod serving
// its five models). A warehouse that does
// not answer is reported (the rest still printed) and info exits 1.
func TestInfoReportsModelsBackendsAndEnvironments(t *testing.T) {
	t.Parallel()
	dir := initProjectWithSource(t)

	out := mustRun(t, dir, "info")
	require.Contains(t, out, "Models: 6 (1 FULL, 3 INCREMENTAL_BY_TIME_RANGE, 1 SEED, 1 VIEW)")
	require.Contains(t, out, "Sources: 1 (raw.orders)")
	require.Regexp(t, `Warehouse: duckdb://\S+warehouse\.duckdb: connection succeeded`, out)
	require.Regexp(t, `State store: sqlite://\S+state\.db: connection succeeded`, out)
	require.Contains(t, out, "Environments: none yet")

	deployed := initProject(t)
	mustRun(t, deployed, "plan", "--auto-apply", "--execution-time", t0)
	rep := infoJSON(t, deployed, ExitOK)
	require.Equal(t, 5, rep.Models)
	require.Equal(t, map[string]int{"FULL": 1, "INCREMENTAL_BY_TIME_RANGE": 2, "SEED": 1, "VIEW": 1}, rep.Kinds)
	require.Empty(t, rep.Sources)
	require.True(t, rep.Warehouse.OK)
	require.True(t, rep.State.OK)
	require.Equal(t, []infoEnvironment{{Name: "prod", Models: 5, Generation: 1}}, rep.Environments)

	bad := initProject(t)
	edit(t, bad, "gapless.yaml", "warehouse: duckdb://warehouse.duckdb", "warehouse: postgres://nobody:secret@127.0.0.1:1/none?connect_timeout=2")
	res := run(t, bad, "info")
	require.Equal(t, ExitFailure, res.code)
	require.Contains(t, res.stdout, "Models: 5")
	require.Regexp(t, `Warehouse: postgres://nobody:x+@127\.0\.0\.1:1/none\S*: connection failed`, res.stdout)
	require.Contains(t, res.stdout, "State store: sqlite://")
	require.Contains(t, res.stderr, "info: connection failed: warehouse")
	require.NotContains(t, res.stdout+res.stderr, "secret", "the password is not shown")
	rep = infoJSON(t, bad, ExitFailure)
	require.False(t, rep.Warehouse.OK)
	require.NotEmpty(t, rep.Warehouse.Error)
	require.True(t, rep.State.OK)
}

// warehouseObjects lists every table and view of the warehouse with its row
// count where it is a table: what evaluate must leave as it is.
func warehouseObjects(t *testing.T, dir string) []string {
	t.Helper()
	res := queryRows(t, dir, "SELECT table_schema || '.' || table_name || ' ' || table_type FROM information_schema.tables ORDER BY 1")
	var out []string
	for _, row := range res.Rows {
		out = append(out, row[0].(string))
	}
	return out
}

// stateRecords counts the plans and history events of dir's state store.
func stateRecords(t *testing.T, dir string) [2]int {
	t.Helper()
	st, err := sqlite.Open(t.Context(), filepath.Join(dir, ".gapless", "state.db"))
	require.NoError(t, err)
	defer func() { require.NoError(t, st.Close()) }()
	plans, err := st.ListPlans(t.Context(), state.PlanFilter{})
	require.NoError(t, err)
	events, err := st.ListEvents(t.Context(), state.EventFilter{})
	require.NoError(t, err)
	return [2]int{len(plans), len(events)}
}

// Scenario: `gapless evaluate` computes a model's rows for a range and
// prints them, writing nothing. On the deployed example project, with
// demo.daily_revenue changed since (a new version, whose table does not
// exist): evaluating it for 2024-01-01 prints the 4 rows of the changed
// query, and demo.events for one hour its 12 rows (--limit 3: 3 rows; --json
// with the rendered SQL). Afterwards the warehouse has the same tables and
// views and prod's status and the environments are unchanged: no table,
// no interval, no plan. A SEED, an unknown model and bad ranges are named
// errors.
func TestEvaluateComputesWithoutWriting(t *testing.T) {
	t.Parallel()
	dir := initProject(t)
	mustRun(t, dir, "plan", "--auto-apply", "--execution-time", t0)
	edit(t, dir, "models/daily_revenue.sql", "WHERE e.event_ts", "WHERE e.customer_id <> 5 AND e.event_ts")

	objects := warehouseObjects(t, dir)
	status := mustRun(t, dir, "status", "--json", "--execution-time", t0)
	envs := mustRun(t, dir, "environments", "--json", "--execution-time", t0)
	records := stateRecords(t, dir)
	require.NotZero(t, records[0])

	out := mustRun(t, dir, "evaluate", "demo.daily_revenue", "--start", "2024-01-01", "--end", "2024-01-02", "--execution-time", t0)
	require.Contains(t, out, "(4 rows)")
	require.Regexp(t, `day +customer_id +segment +events +revenue\n`, out)
	require.NotContains(t, out, "startup", "customer 5 is left out by the changed query")

	out = mustRun(t, dir, "evaluate", "demo.events", "--start", "2024-01-01", "--end", "2024-01-01T01:00:00Z", "--execution-time", t0)
	require.Contains(t, out, "(12 rows)")
	var ev evaluateResult
	require.NoError(t, json.Unmarshal([]byte(mustRun(t, dir, "evaluate", "demo.events", "--start", "2024-01-01",
		"--end", "2024-01-01T01:00:00Z", "--limit", "3", "--json", "--execution-time", t0)), &ev))
	require.Len(t, ev.Rows, 3)
	require.Equal(t, []string{"event_id", "event_ts", "customer_id", "amount"}, ev.Columns)
	require.Equal(t, "2024-01-01T00:00:00Z", ev.Rows[0][1])
	require.Contains(t, ev.SQL, "TIMESTAMP '2024-01-01 00:00:00'")

	// Without a range: the newest interval due at the execution time.
	require.NoError(t, json.Unmarshal([]byte(mustRun(t, dir, "evaluate", "demo.events", "--json", "--execution-time", t0)), &ev))
	require.Equal(t, "2024-01-01T23:00:00Z", ev.Start)
	require.Len(t, ev.Rows, 12)

	require.Equal(t, objects, warehouseObjects(t, dir), "evaluate created or dropped nothing")
	require.Equal(t, status, mustRun(t, dir, "status", "--json", "--execution-time", t0))
	require.Equal(t, envs, mustRun(t, dir, "environments", "--json", "--execution-time", t0))
	require.Equal(t, records, stateRecords(t, dir), "no plan and no event recorded")

	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"demo.customers", "--execution-time", t0}, ExitFailure, "model demo.customers is SEED: it has no query to render"},
		{[]string{"demo.event", "--execution-time", t0}, ExitFailure, "did you mean demo.events?"},
		{[]string{"demo.events", "--start", "2024-01-02"}, ExitUsage, "give both --start and --end, or neither"},
		{[]string{"demo.events", "--start", "2024-01-02", "--end", "2024-01-01"}, ExitUsage, "is not before --end"},
		{[]string{"demo.events", "--limit", "0"}, ExitUsage, "--limit must be 1 or more"},
	} {
		res := run(t, dir, append([]string{"evaluate"}, c.args...)...)
		require.Equal(t, c.code, res.code, "%v: %s", c.args, res.stderr)
		require.Contains(t, res.stderr, c.msg, c.args)
	}
}
