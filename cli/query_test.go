package cli

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// queryCase is one backend of the query scenarios: a deployed project and
// the statements only its engine knows.
type queryCase struct {
	name    string
	deploy  func(t *testing.T) string // returns the project folder, deployed at t0
	model   string                    // an hourly incremental model
	rows    float64                   // its rows after the deploy
	reads   []string                  // engine-specific reads that must run
	refused func(phys, dir string) []string
}

var queryCases = []queryCase{
	{
		name: "duckdb",
		deploy: func(t *testing.T) string {
			dir := initProject(t)
			mustRun(t, dir, "plan", "--auto-apply", "--execution-time", t0)
			return dir
		},
		model: "demo.events", rows: 24 * 12,
		reads: []string{"DESCRIBE demo.events", "SHOW ALL TABLES", "SUMMARIZE demo.events", "FROM demo.events LIMIT 1"},
		refused: func(phys, dir string) []string {
			return []string{
				"ATTACH '" + filepath.Join(dir, "other.duckdb") + "' AS other",
				"COPY " + phys + " TO '" + filepath.Join(dir, "copied.csv") + "'",
				"INSTALL httpfs",
				"PRAGMA enable_profiling",
				"CALL pragma_version()",
			}
		},
	},
	{
		name: "postgres",
		deploy: func(t *testing.T) string {
			dir := pgProject(t)
			mustRun(t, dir, "plan", "--auto-apply", "--execution-time", t0)
			return dir
		},
		model: "shop.events", rows: 24 * 4,
		reads: []string{"SHOW search_path", "TABLE shop.events"},
		refused: func(phys, dir string) []string {
			return []string{
				"WITH gone AS (DELETE FROM " + phys + " RETURNING 1) SELECT count(*) FROM gone",
				"COPY " + phys + " TO PROGRAM 'true'",
				"SELECT * INTO shop.copied FROM " + phys,
				"DELETE FROM shop.events", // a served view PostgreSQL would write through
			}
		},
	},
}

// Scenario: `gapless query` cannot break the promise. prod is deployed;
// DELETE, UPDATE, INSERT, CREATE TABLE, DROP TABLE, DROP VIEW, a
// CTE-wrapped DELETE, a read followed by a DROP in one string, and the
// engine's own writes (ATTACH, COPY, ...) against the model's physical
// table or its view are each refused with exit 2, a message that says
// nothing ran and names --allow-writes, and the model still has all its
// rows and no gap. Reads run: SELECT, WITH ... SELECT, EXPLAIN and the
// engine's DESCRIBE/SHOW-style reads. On both warehouse engines.
func TestQueryIsReadOnlyByDefault(t *testing.T) {
	t.Parallel()
	for _, c := range queryCases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := c.deploy(t)
			phys := physicalTable(t, dir, c.model)
			schema, _, _ := strings.Cut(c.model, ".")
			refused := append([]string{
				"DELETE FROM " + phys,
				"UPDATE " + phys + " SET amount = 0",
				"INSERT INTO " + phys + " SELECT * FROM " + phys,
				"CREATE TABLE " + schema + ".mine AS SELECT 1 AS x",
				"CREATE TABLE " + phys + "_copy AS SELECT * FROM " + phys,
				"DROP TABLE " + phys,
				"DROP VIEW " + c.model,
				"WITH x AS (SELECT 1) DELETE FROM " + phys,
				"SELECT 1; DROP TABLE " + phys,
				"SELECT count(*) FROM " + c.model + "; DELETE FROM " + phys,
				"TRUNCATE " + phys,
			}, c.refused(phys, dir)...)
			for _, sql := range refused {
				r := run(t, dir, "query", sql)
				require.Equal(t, ExitUsage, r.code, "%s\n%s", sql, r.stderr)
				require.Contains(t, r.stderr, "gapless: query: refused: ", sql)
				require.Contains(t, r.stderr, "nothing ran and nothing changed", sql)
				require.Contains(t, r.stderr, "--allow-writes", sql)
				require.Empty(t, r.stdout, sql)
			}
			require.Equal(t, c.rows, count(t, dir, phys))
			require.Equal(t, c.rows, count(t, dir, c.model))
			st := statusOf(t, dir, "--execution-time", t0)
			require.Empty(t, st[c.model].Missing)
			require.Equal(t, []string{"[2024-01-01T00:00:00Z, 2024-01-02T00:00:00Z)"}, st[c.model].Covered)
			require.NoFileExists(t, filepath.Join(dir, "other.duckdb"))
			require.NoFileExists(t, filepath.Join(dir, "copied.csv"))
			tables := queryRows(t, dir, "SELECT table_schema || '.' || table_name FROM information_schema.tables WHERE table_schema NOT IN ('pg_catalog', 'information_schema') AND (table_name IN ('mine', 'copied') OR right(table_name, 5) = '_copy')")
			require.Empty(t, tables.Rows, "a refused CREATE created a table")

			for _, sql := range append([]string{
				"SELECT count(*) FROM " + c.model,
				"WITH h AS (SELECT * FROM " + phys + ") SELECT count(*) FROM h",
				"EXPLAIN SELECT * FROM " + c.model,
			}, c.reads...) {
				r := run(t, dir, "query", sql)
				require.Equal(t, ExitOK, r.code, "%s\n%s", sql, r.stderr)
				require.Regexp(t, `\(\d+ rows?\)\n`, r.stdout, sql)
			}
		})
	}
}

// Scenario: writing by hand takes --allow-writes. A statement into a
// schema of the user's own runs and warns that gapless does not record
// it. One that names the physical schema (gapless__*) is refused even
// with --allow-writes (exit 2, naming --allow-physical-writes, nothing
// deleted); with --allow-physical-writes too it runs, with a warning that
// status does not see the change. --allow-physical-writes alone is a usage
// error. On both warehouse engines.
func TestQueryAllowWrites(t *testing.T) {
	t.Parallel()
	for _, c := range queryCases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := c.deploy(t)
			phys := physicalTable(t, dir, c.model)

			r := run(t, dir, "query", "--allow-writes", "CREATE SCHEMA scratch")
			require.Equal(t, ExitOK, r.code, r.stderr)
			require.Contains(t, r.stderr, "gapless does not record what it changes")
			r = run(t, dir, "query", "--allow-writes", "CREATE TABLE scratch.notes AS SELECT 1 AS x")
			require.Equal(t, ExitOK, r.code, r.stderr)
			require.Equal(t, float64(1), count(t, dir, "scratch.notes"))

			del := "DELETE FROM " + phys + " WHERE event_ts < TIMESTAMP '2024-01-01 01:00:00'"
			r = run(t, dir, "query", "--allow-writes", del)
			require.Equal(t, ExitUsage, r.code, r.stderr)
			require.Contains(t, r.stderr, "names gapless's physical schemas (gapless__*)")
			require.Contains(t, r.stderr, "--allow-physical-writes")
			require.Contains(t, r.stderr, "Nothing ran")
			require.Equal(t, c.rows, count(t, dir, phys))

			r = run(t, dir, "query", "--allow-physical-writes", del)
			require.Equal(t, ExitUsage, r.code, r.stderr)
			require.Contains(t, r.stderr, "--allow-physical-writes needs --allow-writes")
			require.Equal(t, c.rows, count(t, dir, phys))

			r = run(t, dir, "query", "--allow-writes", "--allow-physical-writes", del)
			require.Equal(t, ExitOK, r.code, r.stderr)
			require.Contains(t, r.stderr, "writing into gapless's physical tables; status and plans do not see this change")
			require.Less(t, count(t, dir, phys), c.rows, "the allowed DELETE deleted nothing")
		})
	}
}

// physicalTable is the physical table prod serves model from.
func physicalTable(t *testing.T, dir, model string) string {
	t.Helper()
	st := statusOf(t, dir, "--execution-time", t0)
	m, ok := st[model]
	require.True(t, ok, "prod serves no %s", model)
	schema, table, _ := strings.Cut(model, ".")
	return "gapless__" + schema + "." + schema + "__" + table + "__" + m.Version
}
