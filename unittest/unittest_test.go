package unittest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/project"
	"github.com/gapless-dev/gapless/sqlparse"
	"github.com/gapless-dev/gapless/warehouse/duckdb"
)

var sqlParser *sqlparse.Parser

func TestMain(m *testing.M) {
	var err error
	sqlParser, err = sqlparse.Open()
	if err != nil {
		panic(err)
	}
	code := m.Run()
	if err := sqlParser.Close(); err != nil {
		panic(err)
	}
	os.Exit(code)
}

// sqlmeshInit is the project `sqlmesh init duckdb` writes, as gapless
// reads it: a seed, an incremental model over it, and a full model.
var sqlmeshInit = map[string]string{
	"gapless.yaml":        "warehouse: duckdb://warehouse.duckdb\nstate: sqlite://.gapless/state.db\nmodel_defaults:\n  dialect: duckdb\n  start: '2020-01-01'\n",
	"seeds/seed_data.csv": "id,item_id,event_date\n1,2,2020-01-01\n2,1,2020-01-01\n3,3,2020-01-03\n4,1,2020-01-04\n5,1,2020-01-05\n6,1,2020-01-06\n7,1,2020-01-07\n",
	"models/seed_model.sql": `MODEL (
  name sqlmesh_example.seed_model,
  kind SEED (path '../seeds/seed_data.csv'),
  columns (id INTEGER, item_id INTEGER, event_date DATE),
  grain (id, event_date)
);
`,
	"models/incremental_model.sql": `MODEL (
  name sqlmesh_example.incremental_model,
  kind INCREMENTAL_BY_TIME_RANGE (time_column event_date),
  start '2020-01-01',
  cron '@daily',
  grain (id, event_date)
);

SELECT id, item_id, event_date
FROM sqlmesh_example.seed_model
WHERE event_date BETWEEN @start_date AND @end_date
`,
	"models/full_model.sql": `MODEL (
  name sqlmesh_example.full_model,
  kind FULL,
  cron '@daily',
  grain item_id
);

WITH filtered_orders_cte AS (
  SELECT id, item_id
  FROM sqlmesh_example.incremental_model
  WHERE item_id < 3
)
SELECT item_id, COUNT(DISTINCT id) AS num_orders
FROM filtered_orders_cte
GROUP BY item_id
`,
}

// writeProject lays out files in a new project folder, with extra files
// added or replacing the base ones.
func writeProject(t *testing.T, base map[string]string, extra map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for _, files := range []map[string]string{base, extra} {
		for rel, body := range files {
			path := filepath.Join(dir, rel)
			require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
			require.NoError(t, os.WriteFile(path, []byte(body), 0o644))
		}
	}
	return dir
}

func loadProject(t *testing.T, dir string) *project.Project {
	t.Helper()
	pr, _, err := project.Load(context.Background(), dir, sqlParser)
	require.NoError(t, err)
	return pr
}

var fixedNow = time.Date(2024, 3, 1, 10, 30, 0, 0, time.UTC)

// runYAML writes tests/test_x.yaml into a copy of the init project (with
// extra files) and runs every test of the project.
func runYAML(t *testing.T, extra map[string]string, testYAML string) Report {
	t.Helper()
	files := map[string]string{"tests/test_x.yaml": testYAML}
	for k, v := range extra {
		files[k] = v
	}
	dir := writeProject(t, sqlmeshInit, files)
	tests, err := Load(dir)
	require.NoError(t, err)
	require.NotEmpty(t, tests)
	return Run(context.Background(), loadProject(t, dir), tests, Options{Now: fixedNow})
}

func requireOK(t *testing.T, rep Report) {
	t.Helper()
	var b strings.Builder
	require.NoError(t, rep.Write(&b))
	require.True(t, rep.OK(), b.String())
}

// Scenario: the test SQLMesh's documentation opens with passes: three rows
// of the upstream, two aggregated rows expected, in another order than the
// query returns them.
func TestScenarioDocumentedFullModelTestPasses(t *testing.T) {
	t.Parallel()
	rep := runYAML(t, nil, `
test_example_full_model:
  model: sqlmesh_example.full_model
  inputs:
    sqlmesh_example.incremental_model:
      rows:
      - id: 1
        item_id: 1
      - id: 2
        item_id: 1
      - id: 3
        item_id: 2
  outputs:
    query:
      rows:
      - item_id: 2
        num_orders: 1
      - item_id: 1
        num_orders: 2
`)
	requireOK(t, rep)
	require.Len(t, rep.Results, 1)
	require.Equal(t, Passed, rep.Results[0].Status)
}

// Scenario: a test whose expected rows are wrong fails, and the report
// names the test, its file and line, and shows for the same key the
// differing column, plus the missing and unexpected rows.
func TestScenarioFailingTestShowsTheDiff(t *testing.T) {
	t.Parallel()
	rep := runYAML(t, nil, `
test_wrong:
  model: sqlmesh_example.full_model
  inputs:
    sqlmesh_example.incremental_model:
      - {id: 1, item_id: 1}
      - {id: 2, item_id: 1}
      - {id: 3, item_id: 2}
      - {id: 4, item_id: 0}
  outputs:
    query:
      - {item_id: 1, num_orders: 3}
      - {item_id: 2, num_orders: 1}
      - {item_id: 5, num_orders: 1}
`)
	require.False(t, rep.OK())
	res := rep.Results[0]
	require.Equal(t, Failed, res.Status)
	require.Len(t, res.Mismatches, 1)
	mm := res.Mismatches[0]
	require.Equal(t, "query", mm.Output)
	require.Equal(t, 11, mm.Line)
	require.Equal(t, []Changed{{Key: "item_id=1", Columns: []ColumnDiff{{Column: "num_orders", Expected: "3", Actual: "2"}}}}, mm.Changed)
	require.Equal(t, [][]string{{"5", "1"}}, mm.Missing)
	require.Equal(t, [][]string{{"0", "1"}}, mm.Unexpected)

	var b strings.Builder
	require.NoError(t, rep.Write(&b))
	out := b.String()
	require.Contains(t, out, "FAIL: test_wrong (tests/test_x.yaml:2), model sqlmesh_example.full_model")
	require.Contains(t, out, "tests/test_x.yaml:11: query: data mismatch")
	require.Regexp(t, `item_id=1:\n\s+num_orders\s+expected 3\s+actual 2`, out)
	require.Regexp(t, `Missing rows \(expected, not returned\):\n\s+item_id\s+num_orders\n\s+5\s+1`, out)
	require.Regexp(t, `Unexpected rows \(returned, not expected\):\n\s+item_id\s+num_orders\n\s+0\s+1`, out)
	require.Contains(t, out, "FAILED (failures=1)")
}

// Scenario: a CTE is tested by itself (before the aggregation), beside the
// query; a wrong CTE expectation fails naming the CTE.
func TestScenarioCTEsAreTestedByThemselves(t *testing.T) {
	t.Parallel()
	body := `
test_ctes:
  model: sqlmesh_example.full_model
  inputs:
    sqlmesh_example.incremental_model:
        rows:
        - id: 1
          item_id: 1
        - id: 2
          item_id: 1
        - id: 3
          item_id: 3
  outputs:
    ctes:
      filtered_orders_cte:
        rows:
          - id: 1
            item_id: 1
          - id: %s
            item_id: 1
    query:
      rows:
      - item_id: 1
        num_orders: 2
`
	requireOK(t, runYAML(t, nil, strings.Replace(body, "%s", "2", 1)))
	rep := runYAML(t, nil, strings.Replace(body, "%s", "7", 1))
	res := rep.Results[0]
	require.Equal(t, Failed, res.Status, "%v", res.Err)
	require.Len(t, res.Mismatches, 1)
	require.Equal(t, "CTE filtered_orders_cte", res.Mismatches[0].Output)
	// No grain for a CTE: the rows are paired by the columns they share.
	require.Equal(t, []Changed{{Key: "item_id=1", Columns: []ColumnDiff{{Column: "id", Expected: "7", Actual: "2"}}}}, res.Mismatches[0].Changed)
	require.Empty(t, res.Mismatches[0].Missing)
}

// Scenario: with partial: true only the columns given are compared; without
// it, an omitted column is NULL and so fails against a value.
func TestScenarioPartialComparesOnlyTheGivenColumns(t *testing.T) {
	t.Parallel()
	body := `
test_partial:
  model: sqlmesh_example.full_model
  inputs:
    sqlmesh_example.incremental_model:
      - {id: 1, item_id: 1}
      - {id: 2, item_id: 2}
  outputs:
    %s
    query:
      - {item_id: 1}
      - {item_id: 2}
`
	requireOK(t, runYAML(t, nil, strings.Replace(body, "%s", "partial: true", 1)))
	rep := runYAML(t, nil, strings.Replace(body, "%s", "", 1))
	res := rep.Results[0]
	require.Equal(t, Failed, res.Status, "%v", res.Err)
	require.Equal(t, "expected NULL", "expected "+res.Mismatches[0].Changed[0].Columns[0].Expected)
}

// Scenario: an incremental model's test sets start and end (dates, end
// inclusive as in SQLMesh), so @start_date and @end_date filter the
// input; the expected dates are written as YAML dates and as strings.
func TestScenarioVarsDriveAnIncrementalModel(t *testing.T) {
	t.Parallel()
	rep := runYAML(t, nil, `
test_incremental_model:
  model: sqlmesh_example.incremental_model
  inputs:
    sqlmesh_example.seed_model:
    - {id: 1, item_id: 2, event_date: 2020-01-01}
    - {id: 2, item_id: 1, event_date: 2020-01-01}
    - {id: 3, item_id: 3, event_date: 2020-01-03}
    - {id: 4, item_id: 1, event_date: 2020-01-05}
  outputs:
    query:
    - {id: 1, item_id: 2, event_date: 2020-01-01}
    - {id: 2, item_id: 1, event_date: '2020-01-01'}
    - {id: 3, item_id: 3, event_date: "2020-01-03 00:00:00"}
  vars:
    start: '2020-01-01'
    end: '2020-01-04'
`)
	requireOK(t, rep)
}

// Scenario: inputs and expected rows given as CSV text, as SQLMesh allows
// with format: csv.
func TestScenarioCSVInputs(t *testing.T) {
	t.Parallel()
	rep := runYAML(t, nil, `
test_csv:
  model: sqlmesh_example.full_model
  inputs:
    sqlmesh_example.incremental_model:
      format: csv
      rows: |
        id,item_id
        1,1
        2,1
        3,2
  outputs:
    query:
      format: csv
      rows: |
        item_id,num_orders
        1,2
        2,1
`)
	requireOK(t, rep)
}

func TestLoadErrorsNameFileAndLine(t *testing.T) {
	t.Parallel()
	dir := writeProject(t, sqlmeshInit, map[string]string{
		"tests/test_bad.yaml": "test_a:\n  model: sqlmesh_example.full_model\n  outputs:\n    query:\n      - {item_id: 1\n",
	})
	_, err := Load(dir)
	require.Error(t, err)
	var e *Error
	require.True(t, errors.As(err, &e), "%v", err)
	require.Equal(t, filepath.Join("tests", "test_bad.yaml"), e.File)
	require.Contains(t, err.Error(), "tests/test_bad.yaml:")
	require.Contains(t, err.Error(), "YAML syntax error")
}

// errorOf runs one test that cannot run and returns its error text.
func errorOf(t *testing.T, extra map[string]string, testYAML string) string {
	t.Helper()
	rep := runYAML(t, extra, testYAML)
	require.Len(t, rep.Results, 1)
	res := rep.Results[0]
	require.Equal(t, Errored, res.Status, "%+v", res.Mismatches)
	var e *Error
	require.True(t, errors.As(res.Err, &e), "%v", res.Err)
	require.Equal(t, filepath.Join("tests", "test_x.yaml"), e.File)
	return res.Err.Error()
}

// Scenario: bad input in a test file gets an error naming the file, the
// line, the test and what is wrong, with the closest known name.
func TestBadInputGetsNamedErrors(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, yaml string
		want       []string
	}{
		{"unknown model", `
test_unknown:
  model: sqlmesh_example.ful_model
  outputs:
    query: []
`, []string{
			"tests/test_x.yaml:2: test test_unknown: model sqlmesh_example.ful_model: no such model",
			"did you mean sqlmesh_example.full_model?",
		}},
		// seed_model declares id, item_id, event_date.
		{"input column the upstream does not have", `
test_cols:
  model: sqlmesh_example.incremental_model
  inputs:
    sqlmesh_example.seed_model:
      - {id: 1, item: 2, event_date: 2020-01-01}
  outputs:
    query: []
`, []string{
			"tests/test_x.yaml:6: test test_cols: input sqlmesh_example.seed_model: unknown column(s) item",
			"has columns id, item_id, event_date; did you mean item_id?",
		}},
		// incremental_model declares nothing: its columns come from its query.
		{"input column of an upstream known from its query", `
test_cols:
  model: sqlmesh_example.full_model
  inputs:
    sqlmesh_example.incremental_model:
      - {id: 1, itemid: 2}
  outputs:
    query: []
`, []string{
			"unknown column(s) itemid: sqlmesh_example.incremental_model has columns id, item_id, event_date",
		}},
		{"missing input", `
test_missing:
  model: sqlmesh_example.full_model
  outputs:
    query: []
`, []string{
			"missing input sqlmesh_example.incremental_model, which model sqlmesh_example.full_model reads",
		}},
		{"output column the query does not produce", `
test_out:
  model: sqlmesh_example.full_model
  inputs:
    sqlmesh_example.incremental_model: [{id: 1, item_id: 1}]
  outputs:
    query:
      - {item_id: 1, orders: 1}
`, []string{
			"tests/test_x.yaml:7: test test_out: query of model sqlmesh_example.full_model: expected column orders is not a column the query returns (columns: item_id, num_orders)",
		}},
		{"unknown CTE", `
test_cte:
  model: sqlmesh_example.full_model
  inputs:
    sqlmesh_example.incremental_model: [{id: 1, item_id: 1}]
  outputs:
    ctes:
      filtered_orders:
        - {id: 1}
`, []string{
			"tests/test_x.yaml:8: test test_cte: no CTE named filtered_orders in model sqlmesh_example.full_model (CTEs: filtered_orders_cte); did you mean filtered_orders_cte?",
		}},
		{"value of the wrong type", `
test_type:
  model: sqlmesh_example.incremental_model
  inputs:
    sqlmesh_example.seed_model:
      - {id: 1, item_id: 1, event_date: 2020-01-01}
      - {id: two, item_id: 1, event_date: 2020-01-01}
  outputs:
    query: []
`, []string{
			"tests/test_x.yaml:7: test test_type: input sqlmesh_example.seed_model: the row cannot be stored as columns (id INTEGER, item_id INTEGER, event_date DATE)",
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			msg := errorOf(t, nil, c.yaml)
			for _, w := range c.want {
				require.Contains(t, msg, w)
			}
		})
	}
}

func TestLoadRefusesMalformedTests(t *testing.T) {
	t.Parallel()
	dir := writeProject(t, sqlmeshInit, map[string]string{
		"tests/test_a.yaml": "test_no_outputs:\n  model: sqlmesh_example.full_model\n" +
			"test_bad_key:\n  model: m.m\n  output:\n    query: []\n" +
			"test_both:\n  model: m.m\n  outputs:\n    query:\n      rows: []\n      query: SELECT 1\n",
		"tests/test_b.yml":       "test_nested:\n  model: m.m\n  outputs: {query: []}\n",
		"tests/other.yaml":       "not: [a test file, as SQLMesh reads only test*.yaml]\n",
		"tests/sub/test_ok.yaml": "test_nested:\n  model: m.m\n  outputs: {query: []}\n",
	})
	_, err := Load(dir)
	require.Error(t, err)
	msg := err.Error()
	require.Contains(t, msg, "tests/test_a.yaml:1: test test_no_outputs: incomplete test: missing outputs")
	require.Contains(t, msg, `tests/test_a.yaml:5: test test_bad_key: unknown test attribute "output"`)
	require.Contains(t, msg, "tests/test_a.yaml:10: test test_both: query: cannot set both query and rows")
	require.Contains(t, msg, "tests/test_b.yml:1: test test_nested: a test of this name is already defined at tests/sub/test_ok.yaml:1")
	require.NotContains(t, msg, "other.yaml")
}

// Scenario: a query with ORDER BY is compared row by row in order; the
// same rows in another order fail, naming the rows.
func TestScenarioOrderByComparesInOrder(t *testing.T) {
	t.Parallel()
	extra := map[string]string{"models/ranked.sql": `MODEL (name sqlmesh_example.ranked, kind FULL);
SELECT item_id, num_orders FROM sqlmesh_example.full_model ORDER BY num_orders DESC
`}
	body := `
test_ranked:
  model: sqlmesh_example.ranked
  inputs:
    sqlmesh_example.full_model:
      - {item_id: 1, num_orders: 5}
      - {item_id: 2, num_orders: 9}
  outputs:
    query:
      - {item_id: %s, num_orders: %s}
      - {item_id: %s, num_orders: %s}
`
	good := fill(body, "2", "9", "1", "5")
	requireOK(t, runYAML(t, extra, good))
	rep := runYAML(t, extra, fill(body, "1", "5", "2", "9"))
	res := rep.Results[0]
	require.Equal(t, Failed, res.Status, "%v", res.Err)
	mm := res.Mismatches[0]
	require.True(t, mm.Ordered)
	require.Equal(t, "row 1", mm.Changed[0].Key)
	require.Equal(t, []ColumnDiff{{"item_id", "1", "2"}, {"num_orders", "5", "9"}}, mm.Changed[0].Columns)
}

func fill(s string, vals ...string) string {
	for _, v := range vals {
		s = strings.Replace(s, "%s", v, 1)
	}
	return s
}

// Scenario: execution_time freezes CURRENT_TIMESTAMP and CURRENT_DATE, and
// sets @execution_ds, as SQLMesh documents ("Freezing time"); a zone in
// the execution time is converted to UTC.
func TestScenarioExecutionTimeFreezesTheClock(t *testing.T) {
	t.Parallel()
	extra := map[string]string{"models/colors.sql": `MODEL (name sqlmesh_example.colors, kind FULL);
SELECT 'Yellow' AS color, CURRENT_TIMESTAMP AS created_at, current_date AS today, @execution_ds AS ds, now() AS n
`}
	requireOK(t, runYAML(t, extra, `
test_colors:
  model: sqlmesh_example.colors
  outputs:
    query:
      - color: "Yellow"
        created_at: "2023-01-01 10:05:03"
        today: 2023-01-01
        ds: '2023-01-01'
        n: 2023-01-01 10:05:03
  vars:
    execution_time: "2023-01-01 12:05:03+02:00"
`))
}

// Scenario: an input given as a SQL query, and a model that reads itself
// through @this_model without an input gets an empty table, as SQLMesh
// does.
func TestScenarioQueryInputAndSelfRead(t *testing.T) {
	t.Parallel()
	extra := map[string]string{"models/running.sql": `MODEL (
  name sqlmesh_example.running,
  kind INCREMENTAL_BY_TIME_RANGE (time_column event_date),
  columns (item_id INTEGER, event_date DATE, total BIGINT)
);
SELECT s.item_id, s.event_date, count(*) + coalesce(max(p.total), 0) AS total
FROM sqlmesh_example.seed_model AS s
LEFT JOIN @this_model AS p ON p.item_id = s.item_id
WHERE s.event_date BETWEEN @start_ds AND @end_ds
GROUP BY ALL
`}
	requireOK(t, runYAML(t, extra, `
test_running:
  model: sqlmesh_example.running
  inputs:
    sqlmesh_example.seed_model:
      query: |
        SELECT 1 AS id, 7 AS item_id, DATE '2020-01-02' AS event_date
        UNION ALL SELECT 2, 7, DATE '2020-01-02'
  outputs:
    query:
      - {item_id: 7, event_date: 2020-01-02, total: 2}
  vars:
    start: 2020-01-02
    end: 2020-01-02
`))
}

// Scenario: types of an input without known columns are inferred from the
// values (a YAML date is a DATE), and expected numbers are compared as the
// query's type (2 equals 2.0, 0.1 + 0.2 equals 0.3).
func TestScenarioInferredTypesAndNumericCoercion(t *testing.T) {
	t.Parallel()
	extra := map[string]string{
		"models/ext.sql": "MODEL (name raw.ext, kind EXTERNAL, columns (x DOUBLE));\n",
		"models/sums.sql": `MODEL (name sqlmesh_example.sums, kind FULL);
WITH t AS (SELECT * FROM raw.ext)
SELECT sum(x) AS total, count(*)::DOUBLE AS n, date_trunc('month', DATE '2020-01-15') AS m FROM t
`}
	requireOK(t, runYAML(t, extra, `
test_sums:
  model: sqlmesh_example.sums
  inputs:
    raw.ext:
      - {x: 0.1}
      - {x: 0.2}
  outputs:
    query:
      - {total: 0.3, n: 2, m: 2020-01-01}
`))
}

// Scenario: create_test as SQLMesh documents it: rows taken from the
// warehouse by a read-only query become the input, the model's rows on
// them the expected output; the written test then passes. Running it again
// is refused unless --overwrite, and the file's other tests are kept.
func TestScenarioCreateWritesATestThatPasses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := writeProject(t, sqlmeshInit, map[string]string{
		"tests/test_incremental_model.yaml": "# kept\ntest_other:\n  model: sqlmesh_example.full_model\n  inputs:\n    sqlmesh_example.incremental_model: [{id: 1, item_id: 1}]\n  outputs:\n    query: [{item_id: 1, num_orders: 1}]\n",
	})
	pr := loadProject(t, dir)
	e, err := duckdb.Open(ctx, filepath.Join(t.TempDir(), "warehouse.duckdb"), duckdb.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, e.Close()) })
	_, err = e.Query(ctx, "CREATE SCHEMA sqlmesh_example")
	require.NoError(t, err)
	_, err = e.Query(ctx, `CREATE TABLE sqlmesh_example.seed_model AS
		SELECT * FROM (VALUES (1, 2, DATE '2020-01-01'), (2, 1, DATE '2020-01-01'), (3, 3, DATE '2020-01-03'), (4, 1, DATE '2020-01-09'))
		AS v(id, item_id, event_date)`)
	require.NoError(t, err)
	before, err := e.Query(ctx, "SELECT count(*) FROM sqlmesh_example.seed_model")
	require.NoError(t, err)

	opts := CreateOptions{
		Model:   "sqlmesh_example.incremental_model",
		Queries: []InputQuery{{Table: "sqlmesh_example.seed_model", SQL: "SELECT * FROM sqlmesh_example.seed_model WHERE event_date BETWEEN '2020-01-01' AND '2020-01-04' ORDER BY id LIMIT 3"}},
		Vars:    []Var{{Name: "start", Value: "2020-01-01"}, {Name: "end", Value: "2020-01-04"}},
		Now:     fixedNow,
	}
	rel, err := Create(ctx, pr, e, opts)
	require.NoError(t, err)
	require.Equal(t, filepath.Join("tests", "test_incremental_model.yaml"), rel)
	text, err := os.ReadFile(filepath.Join(dir, rel))
	require.NoError(t, err)
	require.Contains(t, string(text), "# kept\ntest_other:")
	require.Contains(t, string(text), `test_incremental_model:
  model: sqlmesh_example.incremental_model
  inputs:
    sqlmesh_example.seed_model:
    - id: 1
      item_id: 2
      event_date: 2020-01-01`)
	require.Contains(t, string(text), "vars:\n    start: \"2020-01-01\"\n    end: \"2020-01-04\"")

	tests, err := Load(dir)
	require.NoError(t, err)
	require.Len(t, tests, 2)
	require.Len(t, tests[1].Outputs[0].Rows, 3)
	requireOK(t, Run(ctx, pr, tests, Options{Now: fixedNow}))

	_, err = Create(ctx, pr, e, opts)
	require.ErrorIs(t, err, ErrTestExists)
	opts.Overwrite = true
	opts.Queries[0].SQL = "SELECT * FROM sqlmesh_example.seed_model WHERE id = 3"
	_, err = Create(ctx, pr, e, opts)
	require.NoError(t, err)
	tests, err = Load(dir)
	require.NoError(t, err)
	require.Len(t, tests, 2)
	require.Equal(t, "test_incremental_model", tests[1].Name)
	require.Len(t, tests[1].Outputs[0].Rows, 1)
	requireOK(t, Run(ctx, pr, tests, Options{Now: fixedNow}))

	// Only reads ran on the warehouse.
	after, err := e.Query(ctx, "SELECT count(*) FROM sqlmesh_example.seed_model")
	require.NoError(t, err)
	require.Equal(t, before.Rows, after.Rows)
	_, err = Create(ctx, pr, e, CreateOptions{Model: "sqlmesh_example.full_model", Name: "test_w",
		Queries: []InputQuery{{Table: "sqlmesh_example.incremental_model", SQL: "DELETE FROM sqlmesh_example.seed_model"}}})
	require.Error(t, err)
	require.Contains(t, err.Error(), "--query sqlmesh_example.incremental_model")
	after, err = e.Query(ctx, "SELECT count(*) FROM sqlmesh_example.seed_model")
	require.NoError(t, err)
	require.Equal(t, before.Rows, after.Rows)
}

// Scenario: a test's vars other than the time ones are macro variables,
// overriding the configuration's variables (@VAR and @name), as in
// SQLMesh.
func TestScenarioUserVarsOverrideTheConfiguration(t *testing.T) {
	t.Parallel()
	extra := map[string]string{
		"gapless.yaml": sqlmeshInit["gapless.yaml"] + "variables:\n  min_item: 100\n  max_id: 0\n",
		"models/big_items.sql": `MODEL (name sqlmesh_example.big_items, kind FULL);
SELECT id, item_id FROM sqlmesh_example.incremental_model WHERE item_id >= @VAR('min_item') AND id <= @max_id
`}
	body := `
test_vars:
  model: sqlmesh_example.big_items
  inputs:
    sqlmesh_example.incremental_model:
      - {id: 1, item_id: 1}
      - {id: 2, item_id: 5}
      - {id: 3, item_id: 7}
  outputs:
    query:
      - {id: 2, item_id: 5}
  vars:
    min_item: 2
    max_id: 2
`
	requireOK(t, runYAML(t, extra, body))
}

// Scenario: a model in the PostgreSQL dialect runs on the test's DuckDB
// as written (DuckDB reads PostgreSQL's casts and functions used here);
// its macros render as for PostgreSQL.
func TestScenarioPostgresDialectModel(t *testing.T) {
	t.Parallel()
	extra := map[string]string{"models/pg.sql": `MODEL (name sqlmesh_example.pg, kind FULL, dialect postgres);
SELECT id::text AS id_text, date_trunc('month', event_date)::date AS month, @start_ds::date AS since
FROM sqlmesh_example.seed_model
WHERE event_date >= @start_ds::date
`}
	requireOK(t, runYAML(t, extra, `
test_pg:
  model: sqlmesh_example.pg
  inputs:
    sqlmesh_example.seed_model:
      - {id: 1, item_id: 1, event_date: 2020-01-05}
      - {id: 2, item_id: 1, event_date: 2019-12-31}
  outputs:
    query:
      - {id_text: "1", month: 2020-01-01, since: 2020-01-01}
  vars:
    start: 2020-01-01
`))
}

// Scenario: expected rows from a SQL query, inputs from a CSV file (path,
// with format: csv) and from a YAML file, as SQLMesh allows.
func TestScenarioQueryOutputsAndDataFiles(t *testing.T) {
	t.Parallel()
	extra := map[string]string{
		"tests/data/orders.csv": "id,item_id\n1,1\n2,1\n3,2\n",
		"tests/data/rows.yaml":  "rows:\n  - {id: 1, item_id: 2, event_date: 2020-01-01}\n",
	}
	requireOK(t, runYAML(t, extra, `
test_files:
  model: sqlmesh_example.full_model
  inputs:
    sqlmesh_example.incremental_model:
      format: csv
      path: tests/data/orders.csv
  outputs:
    query:
      query: SELECT 1 AS item_id, 2 AS num_orders UNION ALL SELECT 2, 1
test_yaml_file:
  model: sqlmesh_example.incremental_model
  inputs:
    sqlmesh_example.seed_model:
      path: tests/data/rows.yaml
  outputs:
    query:
      - {id: 1, item_id: 2, event_date: 2020-01-01}
  vars: {start: 2020-01-01, end: 2020-01-01}
`))
}

// Scenario: a column of a type DuckDB cannot create from its name (an
// ENUM) is compared as text.
func TestScenarioEnumColumnComparedAsText(t *testing.T) {
	t.Parallel()
	extra := map[string]string{"models/moods.sql": `MODEL (name sqlmesh_example.moods, kind FULL);
SELECT id, CAST(CASE WHEN item_id = 1 THEN 'happy' ELSE 'sad' END AS ENUM('happy', 'sad')) AS mood
FROM sqlmesh_example.incremental_model
`}
	requireOK(t, runYAML(t, extra, `
test_moods:
  model: sqlmesh_example.moods
  inputs:
    sqlmesh_example.incremental_model: [{id: 1, item_id: 1}, {id: 2, item_id: 2}]
  outputs:
    query: [{id: 1, mood: happy}, {id: 2, mood: sad}]
`))
}

// Scenario: a model written in BigQuery's dialect (backquoted names,
// SAFE_CAST, IFNULL, INT64) is tested as SQLMesh tests it: the test runs its
// query carried over to DuckDB, where tests run.
func TestScenarioForeignDialectModel(t *testing.T) {
	t.Parallel()
	extra := map[string]string{"models/bq.sql": `MODEL (name sqlmesh_example.bq, kind FULL, dialect bigquery);
SELECT item_id, IFNULL(SAFE_CAST(num_orders AS INT64), 0) AS n, ` + "`item_id`" + ` * 2 AS twice FROM ` + "`sqlmesh_example.full_model`" + `
`}
	requireOK(t, runYAML(t, extra, `
test_bq:
  model: sqlmesh_example.bq
  inputs:
    sqlmesh_example.full_model:
      - {item_id: 1, num_orders: 5}
      - {item_id: 2, num_orders: null}
  outputs:
    query:
      - {item_id: 1, n: 5, twice: 2}
      - {item_id: 2, n: 0, twice: 4}
`))
}
