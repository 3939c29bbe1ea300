package cli

import (
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/ingest"
	"github.com/gapless-dev/gapless/internal/pgtest"
	"github.com/gapless-dev/gapless/internal/trinotest"
)

// trinoYAML is the gapless.yaml of a project whose warehouse is the Trino
// catalog at warehouseURL, whose state is a fresh PostgreSQL database, and
// whose models are written in Trino's dialect.
func trinoYAML(t *testing.T, warehouseURL string) string {
	t.Helper()
	return "warehouse: " + warehouseURL + "\nstate: " + pgtest.NewDatabase(t) +
		"\nmodel_defaults:\n  dialect: trino\n  start: '2024-01-01'\n"
}

// trinoSource returns a client name (X-Trino-Source) no other test uses,
// to find this test's queries in system.runtime.queries.
func trinoSource(t *testing.T) string {
	t.Helper()
	var b [6]byte
	_, err := rand.Read(b[:])
	require.NoError(t, err)
	return "gapless-test-" + hex.EncodeToString(b[:])
}

// trinoProject copies testdata/trinoproject (the models of pgproject in
// Trino's dialect) into a fresh folder whose gapless.yaml points the
// warehouse at an empty Trino test catalog, its queries carrying source, and the
// state at a fresh PostgreSQL database. It returns the folder and the
// catalog's name.
func trinoProject(t *testing.T, source string) (dir, catalog string) {
	t.Helper()
	catalogURL := trinotest.NewCatalog(t)
	dir = t.TempDir()
	require.NoError(t, os.CopyFS(dir, os.DirFS(filepath.Join("testdata", "trinoproject"))))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "gapless.yaml"), []byte(trinoYAML(t, catalogURL+"?source="+source)), 0o644))
	return dir, catalogURL[strings.LastIndex(catalogURL, "/")+1:]
}

// viewsHow is how promotion changes an environment's views on Trino,
// which cannot change several in one transaction; viewsLine is how plan
// says it.
const (
	viewsHow = "one view at a time: every view is checked first, then repointed one by one in a fixed order; " +
		"readers may briefly see some views new and others old"
	viewsLine = "Views on trino: " + viewsHow + ".\n"
)

// Scenario: the PostgreSQL story on a Trino warehouse (an empty Iceberg
// catalog of the coordinator-and-worker cluster) with PostgreSQL state:
// the first deploy of prod (a seed, an hourly incremental model in batches
// of 24, a daily rollup, a FULL model, a VIEW) says how views change on
// Trino (one at a time, not atomically; plan --json says so too) and
// serves every row; status shows the hours due at t1 and run
// computes them; after rows of shop.events are deleted by hand from its
// table, a restatement of shop.events recomputes it and its downstream in
// place, every row back once; a breaking change in dev reuses
// prod's upstream table; invalidating dev and running the janitor removes
// dev's table, leaving prod's rows.
func TestTrinoPlanRunRestateStatusJanitor(t *testing.T) {
	t.Parallel()
	dir, _ := trinoProject(t, trinoSource(t))

	out := mustRun(t, dir, "plan", "--auto-apply", "--execution-time", t0)
	require.Contains(t, out, "24 intervals in [2024-01-01T00:00:00Z, 2024-01-02T00:00:00Z)")
	require.Contains(t, out, "\n"+viewsLine)
	require.Equal(t, float64(24*4), count(t, dir, "shop.events"))
	require.Equal(t, float64(2), count(t, dir, "shop.customers"))
	require.Equal(t, float64(2), count(t, dir, "shop.daily"))
	res := queryRows(t, dir, "SELECT name, revenue FROM shop.top")
	require.Len(t, res.Rows, 1)

	st := checkRunCatchesUp(t, dir)

	// Six hours of shop.events' rows are deleted by hand from its table; a
	// restatement recomputes every covered hour of it and of its
	// downstream, in place (the same versions): the rows are back, each
	// once, and the MERGE that replaced each batch reports the rows it
	// inserted, not those it deleted too.
	events := "gapless__shop.shop__events__" + st["shop.events"].Version
	mustRun(t, dir, "query", "--allow-writes", "--allow-physical-writes",
		"DELETE FROM "+events+" WHERE event_ts < TIMESTAMP '2024-01-01 06:00:00'")
	require.Equal(t, float64(29*4-6*4), count(t, dir, "shop.events"))
	var sum planSummary
	require.NoError(t, json.Unmarshal([]byte(mustRun(t, dir, "plan", "--json", "--restate-model", "shop.events", "--execution-time", t1)), &sum))
	buckets := map[string]int{}
	for _, b := range sum.Backfills {
		buckets[b.Name] = b.Buckets
	}
	require.Equal(t, 29, buckets["shop.events"], "every covered hour of shop.events is restated")
	require.Contains(t, buckets, "shop.daily")
	out = mustRun(t, dir, "plan", "--auto-apply", "--restate-model", "shop.events", "--execution-time", t1)
	require.Regexp(t, `shop\.events \w+: 2 batches, 116 rows`, out)
	restated := statusOf(t, dir, "--execution-time", t1)
	require.Equal(t, st["shop.events"].Version, restated["shop.events"].Version)
	require.Equal(t, st["shop.events"].Covered, restated["shop.events"].Covered)
	require.Equal(t, float64(29*4), count(t, dir, "shop.events"))
	require.Equal(t, float64(29*4), count(t, dir, "(SELECT DISTINCT event_ts FROM shop.events) AS d"), "each quarter hour once")
	res = queryRows(t, dir, "SELECT CAST(sum(events) AS double precision) FROM shop.daily")
	require.Equal(t, [][]any{{float64(24 * 4)}}, res.Rows, "the rollup of Jan 1 counts each of its events once")

	file := filepath.Join(dir, "models", "daily.sql")
	src, err := os.ReadFile(file)
	require.NoError(t, err)
	edited := strings.Replace(string(src), "sum(e.amount) AS revenue", "sum(e.amount) AS revenue, max(e.amount) AS biggest", 1)
	require.NoError(t, os.WriteFile(file, []byte(edited), 0o644))
	var devPlan planSummary
	require.NoError(t, json.Unmarshal([]byte(mustRun(t, dir, "plan", "dev", "--json", "--execution-time", t1)), &devPlan))
	require.Equal(t, viewPromotion{Engine: "trino", Atomic: false, How: viewsHow}, devPlan.Views)
	require.NotEmpty(t, devPlan.Backfills)
	for _, b := range devPlan.Backfills {
		require.NotEqual(t, "shop.events", b.Name, "dev computes nothing of shop.events: it reuses prod's table")
	}
	mustRun(t, dir, "plan", "dev", "--auto-apply", "--execution-time", t1)
	dev := statusOf(t, dir, "dev", "--execution-time", t1)
	require.Equal(t, st["shop.events"].Version, dev["shop.events"].Version, "dev reuses prod's shop.events")
	require.NotEqual(t, st["shop.daily"].Version, dev["shop.daily"].Version)
	require.Equal(t, float64(2), count(t, dir, "shop__dev.daily"))
	res = queryRows(t, dir, "SELECT CAST(max(biggest) AS double precision) FROM shop__dev.daily")
	require.Equal(t, [][]any{{1.5}}, res.Rows)

	mustRun(t, dir, "invalidate", "dev", "--execution-time", t1)
	var rep janitorReport
	require.NoError(t, json.Unmarshal([]byte(mustRun(t, dir, "janitor", "--json", "--snapshot-ttl", "0", "--execution-time", t1)), &rep))
	require.Equal(t, []string{"dev"}, rep.Environments)
	require.Contains(t, rep.Tables, "gapless__shop.shop__daily__"+dev["shop.daily"].Version)
	r := run(t, dir, "query", "SELECT * FROM shop__dev.daily")
	require.Equal(t, ExitFailure, r.code, "dev's views are gone")
	require.Equal(t, float64(29*4), count(t, dir, "shop.events"))
	require.Equal(t, float64(2), count(t, dir, "shop.daily"))
}

// Scenario: on DuckDB and PostgreSQL, which change an environment's views
// all in one transaction, plan prints no line about how views change (the
// Trino story above asserts the line there) and plan --json says they
// change atomically.
func TestPlanSaysViewsChangeAtomicallyOnDuckDBAndPostgres(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		backend storyBackend
	}{
		{"duckdb", embeddedBackend},
		{"postgres", postgresBackend},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := storyProject(t, tc.backend, "")
			out := mustRunAt(t, dir, storyDeploy, "plan")
			require.Contains(t, out, "s.hits")
			require.NotContains(t, out, "Views on")
			require.NotContains(t, out, "one view at a time")
			var sum planSummary
			require.NoError(t, json.Unmarshal([]byte(mustRunAt(t, dir, storyDeploy, "plan", "--json")), &sum))
			require.Equal(t, viewPromotion{Engine: tc.name, Atomic: true, How: "atomic: every view of the environment changes in one transaction"}, sum.Views)
		})
	}
}

// Scenario: the work is distributed. The cluster has two active nodes, a
// coordinator that schedules no task on itself and a worker. A first
// deploy of the story project (an hourly parent and child) on a fresh
// catalog, its queries carrying a source no other test uses, backfills
// both models with MERGE or INSERT statements: each finished, and each
// read, computed and wrote its rows in tasks on the worker; the
// coordinator ran at most the root stage of each (the Iceberg commit).
func TestTrinoBackfillRunsOnTheWorker(t *testing.T) {
	t.Parallel()
	source := trinoSource(t)
	dir := storyProject(t, func(t *testing.T) (string, string) {
		return trinoYAML(t, trinotest.NewCatalog(t)+"?source="+source), "trino"
	}, "")
	out := mustRunAt(t, dir, storyDeploy, "plan", "--auto-apply")
	require.Contains(t, out, "Applied plan")
	n, total := childRows(t, dir)
	require.Equal(t, 24.0, n)
	require.Equal(t, 24*4.0, total)

	admin := trinotest.Admin(t)
	var coordinator, worker []string
	eachRow(t, admin, "SELECT node_id, coordinator FROM system.runtime.nodes WHERE state = 'active'", func(rows *sql.Rows) {
		var id string
		var isCoordinator bool
		require.NoError(t, rows.Scan(&id, &isCoordinator))
		if isCoordinator {
			coordinator = append(coordinator, id)
		} else {
			worker = append(worker, id)
		}
	})
	require.Len(t, coordinator, 1, "one active coordinator")
	require.Len(t, worker, 1, "one active worker")

	// The backfill's writes, by their text: a MERGE or an INSERT, after
	// the engine's optional tag comment.
	write := regexp.MustCompile(`(?is)^\s*(/\*.*?\*/\s*)?(MERGE|INSERT)\b`)
	var writes []string
	all := 0
	eachRow(t, admin, "SELECT query_id, state, query FROM system.runtime.queries WHERE source = '"+source+"'", func(rows *sql.Rows) {
		var id, st, text string
		require.NoError(t, rows.Scan(&id, &st, &text))
		all++
		if write.MatchString(text) {
			require.Equal(t, "FINISHED", st, "%s: %s", id, text)
			writes = append(writes, id)
		}
	})
	require.GreaterOrEqual(t, len(writes), 2, "a write per model at least, among the deploy's %d queries", all)

	// Each write's tasks: those that read, computed and wrote the rows
	// ran on the worker; the coordinator runs at most the root stage (.0),
	// which commits the Iceberg snapshot.
	onWorker := map[string]int64{} // input rows processed on the worker, by query
	tasks := map[string][]string{} // "stage@node", by query
	eachRow(t, admin, "SELECT query_id, stage_id, node_id, processed_input_rows FROM system.runtime.tasks WHERE query_id IN ('"+
		strings.Join(writes, "', '")+"')", func(rows *sql.Rows) {
		var query, stage, node string
		var in int64
		require.NoError(t, rows.Scan(&query, &stage, &node, &in))
		tasks[query] = append(tasks[query], stage+"@"+node)
		switch node {
		case worker[0]:
			onWorker[query] += in
		case coordinator[0]:
			require.Equal(t, query+".0", stage, "write %s ran a task of a stage other than the root on the coordinator", query)
		default:
			require.Fail(t, "a task on an unknown node", "%s@%s", stage, node)
		}
	})
	for _, id := range writes {
		require.Positive(t, onWorker[id], "write %s processed no row on the worker: %v", id, tasks[id])
	}
	t.Logf("%d writes among %d queries; tasks by query and node: %v", len(writes), all, tasks)
}

// Scenario: gapless ingest on a Trino warehouse refuses, since the Trino
// engine cannot land a source exactly once (no transaction holds the
// fence check, the rows and the marker together): with a file waiting in
// the landing folder, ingest --once exits 1 naming the engine and what to
// do instead. The scheduler daemon (which lands sources before each tick)
// refuses the same way before its first tick and names --ingest=false.
// Neither writes anything: the catalog's schemas and tables are those it
// had before, and state holds no source, no staged batch, nothing applied.
func TestTrinoIngestRefuses(t *testing.T) {
	t.Parallel()
	dir, catalog := trinoProject(t, trinoSource(t))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "sources"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "sources", "events.yaml"), []byte(`name: raw.events
connector: files
files:
  path: landing/events/*.csv
  settle: 0s
apply: append
time_column: ts
start: '2024-01-01'
watermark: {lateness: 10m}
columns: {id: BIGINT, ts: TIMESTAMP, amount: DOUBLE}
`), 0o644))
	landing := filepath.Join(dir, "landing", "events")
	require.NoError(t, os.MkdirAll(landing, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(landing, "a.csv"), []byte("id,ts,amount\n1,2024-01-01 00:10:00,1.5\n"), 0o644))

	admin := trinotest.Admin(t)
	before := catalogObjects(t, admin, catalog)
	r := run(t, dir, "ingest", "--once")
	require.Equal(t, ExitFailure, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
	require.Contains(t, r.stderr, "cannot land sources: the trino engine does not declare exactly-once ingestion")
	require.Contains(t, r.stderr, "land sources into a DuckDB or PostgreSQL warehouse")
	require.NotContains(t, r.stderr, "goroutine")

	// The scheduler daemon, which lands the project's sources before each
	// tick's runs, refuses before its first tick, and names the way to
	// run the models alone.
	r = run(t, dir, "scheduler", "--once", "--execution-time", "2024-01-01T02:00:00Z")
	require.Equal(t, ExitFailure, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
	require.Contains(t, r.stderr, "cannot land sources: the trino engine does not declare exactly-once ingestion")
	require.Contains(t, r.stderr, "run the scheduler with --ingest=false")
	require.NotContains(t, r.stderr, "goroutine")

	require.Equal(t, before, catalogObjects(t, admin, catalog), "the refused ingest changed the catalog")
	t.Logf("the catalog's schemas and tables, before and after: %v", before)
	// Refused before the pass: nothing in state, not even the source's
	// registration or a staged batch.
	var rows []ingest.Summary
	require.NoError(t, json.Unmarshal([]byte(mustRun(t, dir, "sources", "--json")), &rows))
	require.Empty(t, rows, "the refused ingest wrote to state")
}

// catalogObjects lists the schemas of a Trino catalog, and each schema's
// tables and views as "schema.name", sorted.
func catalogObjects(t *testing.T, admin *sql.DB, catalog string) []string {
	t.Helper()
	var out []string
	eachRow(t, admin, "SELECT coalesce(s.schema_name || '.' || t.table_name, s.schema_name) "+
		"FROM "+catalog+".information_schema.schemata AS s LEFT JOIN "+catalog+".information_schema.tables AS t ON t.table_schema = s.schema_name "+
		"WHERE s.schema_name <> 'information_schema' ORDER BY 1", func(rows *sql.Rows) {
		var name string
		require.NoError(t, rows.Scan(&name))
		out = append(out, name)
	})
	return out
}

// eachRow runs query on db and calls scan on each row of its result.
func eachRow(t *testing.T, db *sql.DB, query string, scan func(*sql.Rows)) {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), query)
	require.NoError(t, err)
	defer rows.Close()
	for rows.Next() {
		scan(rows)
	}
	require.NoError(t, rows.Err())
}
