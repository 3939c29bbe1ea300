package cli

import (
	"testing"

	"github.com/stretchr/testify/require"
)

const physicalGapless = "warehouse: duckdb://warehouse.duckdb\nstate: sqlite://.gapless/state.db\nmodel_defaults:\n  start: '2024-01-01'\n"

// Scenario: as SQLMesh documents comments, a FULL model's description
// becomes its table's comment and the comments on the lines of its final
// SELECT's columns its column comments; a second model's
// column_descriptions win over its inline comments. Both are on the
// physical tables after the first deploy and still there after a run
// rebuilds them. partitioned_by is not applicable on DuckDB: the plan says
// so and the deploy warns, naming the model, and builds the table anyway.
func TestCommentsReachThePhysicalTables(t *testing.T) {
	t.Parallel()
	dir := writeFiles(t, map[string]string{
		"gapless.yaml": physicalGapless,
		"models/customers.sql": `MODEL (
  name shop.customers,
  kind FULL,
  description 'Customers; one row each',
  partitioned_by region
);
SELECT
  1 AS id, -- the customer's key
  'eu' AS region /* where they live */
`,
		"models/totals.sql": `MODEL (
  name shop.totals,
  kind FULL,
  column_descriptions (n = 'how many customers')
);
SELECT count(*) AS n -- ignored: column_descriptions is set
FROM shop.customers
`,
	})
	r := run(t, dir, "plan", "--auto-apply", "--execution-time", "2024-01-03")
	require.Equal(t, ExitOK, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
	require.Contains(t, r.stdout, "Not applied on duckdb:\n  shop.customers: partitioned_by (region) is not applied on DuckDB", "the plan says so")
	require.Contains(t, r.stderr, "partitioned_by (region) is not applied on DuckDB", "the deploy warns")

	check := func(when string) {
		t.Helper()
		tables := queryRows(t, dir, "SELECT table_name, comment FROM duckdb_tables() WHERE schema_name LIKE 'gapless__shop%' ORDER BY table_name")
		require.Len(t, tables.Rows, 2, when)
		require.Equal(t, "Customers; one row each", tables.Rows[0][1], when)
		cols := queryRows(t, dir, "SELECT table_name, column_name, comment FROM duckdb_columns() WHERE schema_name LIKE 'gapless__shop%' AND comment IS NOT NULL ORDER BY table_name, column_name")
		require.Len(t, cols.Rows, 3, when)
		require.Equal(t, []any{"id", "the customer's key"}, cols.Rows[0][1:], when)
		require.Equal(t, []any{"region", "where they live"}, cols.Rows[1][1:], when)
		require.Equal(t, []any{"n", "how many customers"}, cols.Rows[2][1:], when)
	}
	check("after the first deploy")
	r = run(t, dir, "run", "--execution-time", "2024-01-05")
	require.Equal(t, ExitOK, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
	check("after a run rebuilt the tables")
}

// Scenario: a column description names a column the query lacks, and
// another project sets a physical property on DuckDB, which has none:
// plan refuses each, naming the file and line, the model and the column or
// property, before anything is built.
func TestPhysicalAttributesAreCheckedAtPlan(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct{ header, want string }{
		"missing column": {"column_descriptions (id = 'key', nme = 'name')",
			"models/m.sql:4:36: model shop.m: column_descriptions describes nme, which is not a column of its query (its columns: id, name); did you mean name?"},
		"property on DuckDB": {"physical_properties (fillfactor = 70)",
			"models/m.sql:4:24: model shop.m: physical property fillfactor: DuckDB tables have no table properties"},
	} {
		dir := writeFiles(t, map[string]string{
			"gapless.yaml": physicalGapless,
			"models/m.sql": "MODEL (\n  name shop.m,\n  kind FULL,\n  " + tc.header + "\n);\nSELECT 1 AS id, 'a' AS name\n",
		})
		r := run(t, dir, "plan", "--auto-apply", "--execution-time", "2024-01-03")
		require.Equal(t, ExitFailure, r.code, "%s: stdout: %s\nstderr: %s", name, r.stdout, r.stderr)
		require.Contains(t, r.stderr, tc.want, name)
	}
}

// Scenario: as SQLMesh registers comments on the environment's views too,
// prod's view of a described model carries its description and column
// descriptions; a new description alone is a metadata-only change: the
// apply rebuilds nothing (same version, same table) and renews the comments
// on both the physical table and the view.
func TestCommentsReachTheViewsAndFollowAMetadataChange(t *testing.T) {
	t.Parallel()
	dir := writeFiles(t, map[string]string{
		"gapless.yaml": physicalGapless,
		"models/customers.sql": `MODEL (
  name shop.customers,
  kind FULL,
  description 'Customers',
  column_descriptions (id = 'the key')
);
SELECT 1 AS id
`,
	})
	r := run(t, dir, "plan", "--auto-apply", "--execution-time", "2024-01-03")
	require.Equal(t, ExitOK, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
	comments := func(when, want, wantCol string) string {
		t.Helper()
		views := queryRows(t, dir, "SELECT comment FROM duckdb_views() WHERE schema_name = 'shop' AND view_name = 'customers'")
		require.Equal(t, [][]any{{want}}, views.Rows, when)
		cols := queryRows(t, dir, "SELECT comment FROM duckdb_columns() WHERE schema_name = 'shop' AND table_name = 'customers' AND column_name = 'id'")
		require.Equal(t, [][]any{{wantCol}}, cols.Rows, when)
		tables := queryRows(t, dir, "SELECT schema_name || '.' || table_name, comment FROM duckdb_tables() WHERE schema_name LIKE 'gapless__shop%'")
		require.Len(t, tables.Rows, 1, when)
		require.Equal(t, want, tables.Rows[0][1], when)
		return tables.Rows[0][0].(string)
	}
	table := comments("after the first deploy", "Customers", "the key")

	editModel(t, dir, "customers.sql", "description 'Customers'", "description 'Customers, one row each'")
	r = run(t, dir, "plan", "--auto-apply", "--execution-time", "2024-01-04")
	require.Equal(t, ExitOK, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
	require.Contains(t, r.stdout, "metadata-only")
	require.Equal(t, table, comments("after the metadata-only change", "Customers, one row each", "the key"), "the same table, not rebuilt")
}
