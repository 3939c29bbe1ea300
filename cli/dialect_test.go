package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/internal/pgtest"
)

// dialectProject writes a project on an embedded DuckDB whose models are
// written in BigQuery's and Snowflake's dialects, over a DuckDB model.
func dialectProject(t *testing.T, files map[string]string) string {
	t.Helper()
	base := map[string]string{
		"gapless.yaml": "warehouse: duckdb://warehouse.duckdb\nstate: sqlite://.gapless/state.db\nmodel_defaults:\n  start: '2024-01-01'\n",
		"models/raw_orders.sql": `MODEL (name shop.raw_orders, kind FULL, dialect duckdb);
SELECT * FROM (VALUES
  (1, 'eu', 500, 2, NULL, '12.5', TIMESTAMP '2024-01-01 10:00:00'),
  (2, 'us', 2500, 0, 3, 'n/a', TIMESTAMP '2024-01-01 11:00:00'),
  (3, 'eu', 0, 1, 1, NULL, TIMESTAMP '2024-01-02 09:00:00'),
  (4, 'ap', 1200, 4, NULL, '7', TIMESTAMP '2024-02-02 12:00:00')
) AS t(id, region, cents, qty, discount, note, ts)
`,
		"models/bq_orders.sql": "MODEL (\n  name shop.bq_orders,\n  kind FULL,\n  dialect bigquery\n);\n\n" +
			"SELECT * EXCEPT (cents, note, discount, qty),\n" +
			"  SAFE_CAST(cents AS FLOAT64) / 100 AS amount,\n" +
			"  SAFE_CAST(note AS NUMERIC) AS note_num,\n" +
			"  IF(region = \"eu\", 'EU', UPPER(region)) AS region_label,\n" +
			"  DATE_TRUNC(CAST(ts AS DATE), MONTH) AS month,\n" +
			"  CONCAT(region, '-', note) AS tag,\n" +
			"  FORMAT_DATE('%Y/%m', CAST(ts AS DATE)) AS ym\n" +
			"FROM `shop.raw_orders`\n" +
			"WHERE cents > 0 # paid orders only\n",
		"models/sf_orders.sql": `MODEL (
  name shop.sf_orders,
  kind INCREMENTAL_BY_TIME_RANGE (time_column day),
  dialect snowflake
);

SELECT
  ts::DATE AS day,
  id,
  IFF(cents >= 1000, 'big', 'small') AS size,
  ZEROIFNULL(discount) AS discount,
  DIV0(cents, qty) AS per_item,
  NVL(note, 'none') AS note,
  TRY_CAST(note AS NUMBER(10, 2)) AS note_num
FROM shop.raw_orders
WHERE ts::DATE BETWEEN @start_ds AND @end_ds
QUALIFY row_number() OVER (PARTITION BY id ORDER BY ts) = 1
`,
	}
	return writeFiles(t, overlay(base, files))
}

// Scenario: a SQLMesh project whose models are written in BigQuery's and
// Snowflake's dialects (backquoted paths, * EXCEPT, SAFE_CAST, IF, typed
// casts, DATE_TRUNC, CONCAT, FORMAT_DATE, # comments; ::, IFF,
// ZEROIFNULL, DIV0, NVL, TRY_CAST, QUALIFY) deploys on DuckDB with
// `gapless plan --auto-apply` and serves the rows each dialect means; a
// change to a comment of the written text rebuilds nothing.
func TestDialects_BigQueryAndSnowflakeModelsRunOnDuckDB(t *testing.T) {
	t.Parallel()
	dir := dialectProject(t, nil)
	mustRun(t, dir, "plan", "--auto-apply", "--execution-time", "2024-02-03T00:30:00Z")

	res := queryRows(t, dir, "SELECT id, region, amount, CAST(note_num AS VARCHAR), region_label, CAST(month AS VARCHAR), tag, ym FROM shop.bq_orders ORDER BY id")
	require.Equal(t, [][]any{
		{float64(1), "eu", 5.0, "12.500000000", "EU", "2024-01-01", "eu-12.5", "2024/01"},
		{float64(2), "us", 25.0, nil, "US", "2024-01-01", "us-n/a", "2024/01"},
		{float64(4), "ap", 12.0, "7.000000000", "AP", "2024-02-01", "ap-7", "2024/02"},
	}, res.Rows)

	res = queryRows(t, dir, "SELECT CAST(day AS VARCHAR), id, size, discount, per_item, note, CAST(note_num AS VARCHAR) FROM shop.sf_orders ORDER BY id")
	require.Equal(t, [][]any{
		{"2024-01-01", float64(1), "small", float64(0), 250.0, "12.5", "12.50"},
		{"2024-01-01", float64(2), "big", float64(3), 0.0, "n/a", nil},
		{"2024-01-02", float64(3), "small", float64(1), 0.0, "none", nil},
		{"2024-02-02", float64(4), "big", float64(0), 300.0, "7", "7.00"},
	}, res.Rows)

	// The fingerprint covers the text as written: a comment, a line break
	// or keyword case changes nothing; a changed literal does.
	bq := filepath.Join(dir, "models", "bq_orders.sql")
	src, err := os.ReadFile(bq)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(bq, []byte(strings.Replace(string(src), "# paid orders only", "-- only the orders paid for\n", 1)), 0o644))
	out := mustRun(t, dir, "plan", "--execution-time", "2024-02-03T00:30:00Z")
	require.NotContains(t, out, "shop.bq_orders")
	require.NoError(t, os.WriteFile(bq, []byte(strings.Replace(string(src), `"eu"`, `"ap"`, 1)), 0o644))
	out = mustRun(t, dir, "plan", "--execution-time", "2024-02-03T00:30:00Z")
	require.Contains(t, out, "shop.bq_orders")
}

// Scenario: what cannot be carried over to the engine is refused when the
// project loads, naming the file and line of the construct, the construct,
// the model's dialect and the engine; an unknown dialect name gets a
// suggestion.
func TestDialects_RefusalsNameFileLineConstructAndDialects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		files map[string]string
		want  []string
	}{
		{"Snowflake variant path", map[string]string{"models/sf_orders.sql": "MODEL (name shop.sf_orders, kind FULL, dialect snowflake);\n\nSELECT\n  id,\n  payload:customer.name AS customer\nFROM shop.raw_orders\n"},
			[]string{"models/sf_orders.sql:5:10: model shop.sf_orders cannot be carried over to the duckdb engine: : (dialect snowflake, engine duckdb): variant and JSON path access"}},
		{"BigQuery STRUCT type", map[string]string{"models/bq_orders.sql": "MODEL (name shop.bq_orders, kind FULL, dialect bigquery);\nSELECT\n  CAST(NULL AS STRUCT<a INT64>) AS s\nFROM `shop.raw_orders`\n"},
			[]string{"models/bq_orders.sql:3:16: ", "STRUCT<", "dialect bigquery, engine duckdb"}},
		{"PIVOT", map[string]string{"models/bq_orders.sql": "MODEL (name shop.bq_orders, kind FULL, dialect bigquery);\nSELECT * FROM `shop.raw_orders`\n  PIVOT (sum(cents) FOR region IN ('eu', 'us'))\n"},
			[]string{"models/bq_orders.sql:3:3: ", "PIVOT (dialect bigquery, engine duckdb)"}},
		{"error after a rewrite points at the written line", map[string]string{"models/bq_orders.sql": "MODEL (name shop.bq_orders, kind FULL, dialect bigquery);\nSELECT SAFE_CAST(cents AS INT64) AS a,\n  `region` AS b,\n  FROM FROM `shop.raw_orders`\n"},
			[]string{"models/bq_orders.sql:4:"}},
		{"unknown dialect", map[string]string{"models/bq_orders.sql": "MODEL (name shop.bq_orders, kind FULL, dialect bigqeury);\nSELECT 1 AS a\n"},
			[]string{"models/bq_orders.sql:1:", `unknown dialect "bigqeury": did you mean bigquery?`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := dialectProject(t, tt.files)
			r := run(t, dir, "models")
			require.Equal(t, ExitFailure, r.code, r.stdout)
			for _, w := range tt.want {
				require.Contains(t, r.stderr, w)
			}
			require.NotContains(t, r.stderr, "panic")
		})
	}
}

// Scenario: on a PostgreSQL warehouse, where quoted names keep their case
// and types are spelled otherwise, a BigQuery model's backquoted
// mixed-case names name the folded columns, FLOAT64 becomes DOUBLE
// PRECISION, IF a CASE and CONCAT ||, and it serves the rows BigQuery
// would; SAFE_CAST, which PostgreSQL cannot carry over, is refused naming
// the file, line, dialect and engine.
func TestDialects_BigQueryModelOnPostgres(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDatabase(t)
	dir := dialectProject(t, map[string]string{
		"gapless.yaml":          "warehouse: " + url + "\nstate: " + url + "\nmodel_defaults:\n  start: '2024-01-01'\n",
		"models/raw_orders.sql": "MODEL (name shop.raw_orders, kind FULL, dialect postgres);\nSELECT * FROM (VALUES (1, 'eu', 500, NULL), (2, 'us', 2500, 'x')) AS t(id, region, cents, note)\n",
		"models/bq_orders.sql": "MODEL (name shop.bq_orders, kind FULL, dialect bigquery);\n" +
			"SELECT `ID` AS id, CAST(`Cents` AS FLOAT64) AS cents_f, IF(region = \"eu\", 'EU', 'other') AS zone, CONCAT(region, '-', note) AS tag\n" +
			"FROM `shop.raw_orders`\n",
		"models/sf_orders.sql": "",
	})
	mustRun(t, dir, "plan", "--auto-apply", "--execution-time", "2024-01-02T00:30:00Z")
	res := queryRows(t, dir, "SELECT id, cents_f, zone, tag, pg_typeof(cents_f)::text FROM shop.bq_orders ORDER BY id")
	require.Equal(t, [][]any{
		{float64(1), 500.0, "EU", nil, "double precision"},
		{float64(2), 2500.0, "other", "us-x", "double precision"},
	}, res.Rows)

	require.NoError(t, os.WriteFile(filepath.Join(dir, "models", "bq_orders.sql"),
		[]byte("MODEL (name shop.bq_orders, kind FULL, dialect bigquery);\nSELECT\n  SAFE_CAST(note AS INT64) AS n\nFROM `shop.raw_orders`\n"), 0o644))
	r := run(t, dir, "plan", "--execution-time", "2024-01-02T00:30:00Z")
	require.Equal(t, ExitFailure, r.code, r.stdout)
	require.Contains(t, r.stderr, "models/bq_orders.sql:3:3: model shop.bq_orders cannot be carried over to the postgres engine: SAFE_CAST (dialect bigquery, engine postgres)")
}
