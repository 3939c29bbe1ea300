package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// macroProject writes a small project whose models use SQLMesh macros:
// configuration variables, a shared macros/*.sql library, @DEF statements
// before a query, built-in operators, and an @IF on the interval.
func macroProject(t *testing.T, files map[string]string) string {
	t.Helper()
	base := map[string]string{
		"gapless.yaml": `warehouse: duckdb://warehouse.duckdb
state: sqlite://.gapless/state.db
model_defaults:
  dialect: duckdb
  start: '2024-01-01'
variables:
  min_amount: 10
  regions: [eu, us]
  currency: EUR
`,
		"macros/money.sql": "-- shared money helpers\n@DEF(to_units, c -> round(c / 100.0, 2));\n@DEF(big_cents, 1000);\n",
		"models/raw_orders.sql": `MODEL (name shop.raw_orders, kind FULL);
SELECT * FROM (VALUES
  (1, 'eu', 500, TIMESTAMP '2024-01-01 10:00:00'),
  (2, 'us', 2500, TIMESTAMP '2024-01-01 11:00:00'),
  (3, 'eu', 5, TIMESTAMP '2024-01-02 09:00:00'),
  (4, 'ap', 1200, TIMESTAMP '2024-01-02 12:00:00')
) AS t(id, region, cents, ts)
`,
		"models/orders.sql": `MODEL (
  name shop.orders,
  kind FULL
);

@DEF(size_of, (c, limit) -> CASE WHEN c >= limit THEN 'big' ELSE 'small' END);
@DEF(label, (r, c) -> upper(r) || '-' || @size_of(c, @big_cents));

SELECT
  id,
  @to_units(cents) AS amount,
  @label(region, cents) AS label,
  @EACH(@regions, r -> CASE WHEN region = r THEN 1 ELSE 0 END AS is_@r),
  @VAR('currency') AS currency,
  @SAFE_DIV(cents, id - 1) AS per_prior,
  @GENERATE_SURROGATE_KEY(id, region) AS sk
FROM shop.raw_orders
WHERE cents >= @min_amount
`,
		"models/daily.sql": `MODEL (
  name shop.daily,
  kind INCREMENTAL_BY_TIME_RANGE (time_column day, batch_size 1),
  cron '@daily'
);

SELECT
  date_trunc('day', ts) AS day,
  count(*) AS orders,
  @IF(@start_ds >= '2024-01-02', 'second', 'first') AS which_day
FROM shop.raw_orders
WHERE ts BETWEEN @start_ts AND @end_ts
GROUP BY 1
`,
	}
	return writeFiles(t, overlay(base, files))
}

// Scenario: a SQLMesh project whose models use @DEF functions (in the model
// and in macros/*.sql), configuration variables, @EACH, @VAR, @SAFE_DIV,
// @GENERATE_SURROGATE_KEY and an @IF decided per interval loads, plans and
// deploys on DuckDB, and serves the rows the macros mean.
func TestMacros_ProjectDeploysWithTheRowsTheMacrosMean(t *testing.T) {
	t.Parallel()
	dir := macroProject(t, nil)
	mustRun(t, dir, "plan", "--auto-apply", "--execution-time", "2024-01-03T00:30:00Z")

	res := queryRows(t, dir, "SELECT id, amount, label, is_eu, is_us, currency, per_prior, sk = md5(CAST(id AS TEXT) || '|' || region) FROM shop.orders JOIN shop.raw_orders USING (id) ORDER BY id")
	require.Equal(t, [][]any{
		{float64(1), 5.0, "EU-small", float64(1), float64(0), "EUR", nil, true},
		{float64(2), 25.0, "US-big", float64(0), float64(1), "EUR", 2500.0, true},
		{float64(4), 12.0, "AP-big", float64(0), float64(0), "EUR", 400.0, true},
	}, res.Rows)

	// The @IF on @start_ds is decided per batch (one day each).
	res = queryRows(t, dir, "SELECT CAST(day AS VARCHAR), orders, which_day FROM shop.daily ORDER BY day")
	require.Equal(t, [][]any{
		{"2024-01-01 00:00:00", float64(2), "first"},
		{"2024-01-02 00:00:00", float64(2), "second"},
	}, res.Rows)

	// Changing a shared macro changes the models that use it: the plan
	// rebuilds shop.orders and leaves shop.daily alone.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "macros", "money.sql"),
		[]byte("@DEF(to_units, c -> round(c / 100.0, 1));\n@DEF(big_cents, 2000);\n"), 0o644))
	out := mustRun(t, dir, "plan", "--execution-time", "2024-01-03T00:30:00Z")
	require.Contains(t, out, "shop.orders")
	require.NotContains(t, out, "shop.daily")

	// The branch of the @IF that loading did not take still counts: a
	// change to it is a change of shop.daily.
	daily := filepath.Join(dir, "models", "daily.sql")
	src, err := os.ReadFile(daily)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(daily, []byte(strings.Replace(string(src), "'second'", "'later'", 1)), 0o644))
	out = mustRun(t, dir, "plan", "--execution-time", "2024-01-03T00:30:00Z")
	require.Contains(t, out, "shop.daily")
}

// Scenario: bad macros are refused when the project loads, each with the
// file, line and column, and a message naming the macro.
func TestMacros_BadInputNamesFileAndLine(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"unknown macro", map[string]string{"models/orders.sql": "MODEL (name shop.orders, kind FULL);\n\nSELECT\n  @to_unit(cents) AS a\nFROM shop.raw_orders\n"},
			"models/orders.sql:4:3: unknown macro @to_unit: did you mean @to_units?"},
		{"wrong arity", map[string]string{"models/orders.sql": "MODEL (name shop.orders, kind FULL);\n\nSELECT @to_units(cents, 2) AS a FROM shop.raw_orders\n"},
			"models/orders.sql:3:8: @to_units takes 1 argument, got 2 (defined in macros/money.sql:2 as @DEF(to_units, (c) -> ...))"},
		{"unbalanced call", map[string]string{"models/orders.sql": "MODEL (name shop.orders, kind FULL);\n\nSELECT @EACH([a, b], x -> x\nFROM shop.raw_orders\n"},
			"models/orders.sql:3:8: unbalanced call: @EACH( is never closed"},
		{"DEF used as a variable", map[string]string{"models/orders.sql": "MODEL (name shop.orders, kind FULL);\nSELECT @def AS a FROM shop.raw_orders\n"},
			"models/orders.sql:2:8: @DEF defines a macro variable or function, it is not a value"},
		{"Python macro", map[string]string{"macros/helpers.py": "from sqlmesh import macro\n\n\n@macro()\ndef add_one(evaluator, column):\n    return f\"{column} + 1\"\n"},
			"macros/helpers.py:5:1: @add_one is a Python macro: gapless cannot run Python macros; write it as a SQL macro function, @DEF(add_one, (arg1, arg2) -> <SQL expression>); in a macros/*.sql file"},
		{"bad macro file", map[string]string{"macros/money.sql": "@DEF(to_units, c -> c);\n@DEF(broken);\n"},
			"macros/money.sql:2:1: @DEF takes 2 arguments (a name and a value or a lambda), got 1"},
		{"bad @DEF before the query", map[string]string{"models/orders.sql": "MODEL (name shop.orders, kind FULL);\n\n@DEF(limit_cents);\nSELECT 1 AS a\n"},
			"models/orders.sql:3:1: @DEF takes 2 arguments (a name and a value or a lambda), got 1"},
		{"SQL error inside an expansion", map[string]string{"models/orders.sql": "MODEL (name shop.orders, kind FULL);\n\nSELECT id,\n  @EACH([a, b], x -> x +) AS broken\nFROM shop.raw_orders\n"},
			"models/orders.sql:4:3: SQL syntax error"},
		{"bad variables", map[string]string{"gapless.yaml": "model_defaults:\n  start: '2024-01-01'\nvariables:\n  ok: 1\n  nested:\n    a: 1\n"},
			"gapless.yaml:5:3: variables: nested: a map[string]interface {} is not supported (values are strings, numbers, booleans or lists of them)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := macroProject(t, tt.files)
			r := run(t, dir, "models")
			require.Equal(t, ExitFailure, r.code, r.stdout)
			require.Contains(t, r.stderr, tt.want)
			require.NotContains(t, r.stderr, "panic")
		})
	}
}
