package macro_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/macro"
)

// docsEnv is the environment of SQLMesh's documentation examples: global
// variables, the documented @DEF functions, and the tables foo and bar.
func docsEnv(t *testing.T) *macro.Env {
	t.Helper()
	env := &macro.Env{Variables: map[string]any{
		"int_var": int64(1), "float_var": 2.0, "bool_var": true, "str_var": "cat", "list_var": []any{int64(1), int64(2), int64(3)},
	}}
	env, err := env.WithDefs("macros/docs.sql", 1, 1, `
@DEF(rank_to_int, x -> case when left(x, 1) = 'A' then 1 when left(x, 1) = 'B' then 2 end);
@DEF(pythag, (x,y) -> sqrt(pow(x, 2) + pow(y, 2)));
@DEF(area, r -> pi() * r * r);
@DEF(container_volume, (r, h) -> @area(@r) * h);
@DEF(size, 1);
`)
	require.NoError(t, err)
	env.Columns = func(table string) ([]macro.Column, error) {
		switch table {
		case "foo":
			return []macro.Column{{Name: "a", Type: "TEXT"}, {Name: "b", Type: "TEXT"}, {Name: "c", Type: "TEXT"}, {Name: "d", Type: "INT"}}, nil
		case "bar":
			return []macro.Column{{Name: "a", Type: "INT"}, {Name: "b", Type: "INT"}, {Name: "c", Type: "TEXT"}}, nil
		case "untyped":
			return []macro.Column{{Name: "x"}, {Name: "y"}}, nil
		}
		return nil, fmt.Errorf("no table %s", table)
	}
	return env
}

func render(t *testing.T, sql string, env *macro.Env) string {
	t.Helper()
	v := day
	v.Env = env
	out, err := macro.Render(sql, v, "duckdb")
	require.NoError(t, err, sql)
	return out
}

func TestOperators_AsDocumented(t *testing.T) {
	t.Parallel()
	env := docsEnv(t)
	tests := []struct{ name, sql, want string }{
		{"EACH identity", "SELECT @EACH([4, 5, 6], number -> number) FROM table", "SELECT 4, 5, 6 FROM table"},
		{"EACH literal and identifier", "SELECT @EACH(['4','5','6'], x -> CASE WHEN favorite_number = x THEN 1 ELSE 0 END as column_@x) FROM table",
			"SELECT CASE WHEN favorite_number = '4' THEN 1 ELSE 0 END as column_4, CASE WHEN favorite_number = '5' THEN 1 ELSE 0 END as column_5, CASE WHEN favorite_number = '6' THEN 1 ELSE 0 END as column_6 FROM table"},
		{"EACH braces inside an identifier", "SELECT @EACH([a, b], x -> 1 AS my_@{x}_col)", "SELECT 1 AS my_a_col, 1 AS my_b_col"},
		{"EACH over arguments", "SELECT @EACH(a, b, x -> x * 2)", "SELECT a * 2, b * 2"},
		{"IF true", "SELECT col1, @IF(1 > 0, sensitive_col) FROM table", "SELECT col1, sensitive_col FROM table"},
		{"IF false with else", "SELECT col1, @IF(1 > 2, sensitive_col, nonsensitive_col) FROM table", "SELECT col1, nonsensitive_col FROM table"},
		{"IF false without else takes its comma", "SELECT col1, @IF(1 > 2, sensitive_col), c FROM table", "SELECT col1 , c FROM table"},
		{"IF conditions", "SELECT @IF('a' = 'a' AND 'a' != 'b' AND 0 < 1 AND 1 >= 1 AND 2 BETWEEN 1 AND 3 AND 'a' IN ('a', 'b'), yes, no)", "SELECT yes"},
		{"IF string against number", "SELECT @IF('a' = 1, a, b)", "SELECT b"},
		{"IF NOT, OR, NULL", "SELECT @IF(NOT (1 = 2) OR NULL, y, n), @IF(NULL, y, n), @IF(NULL IS NULL, y, n)", "SELECT y, n, y"},
		{"EVAL with @DEF", "@DEF(x, 1);\nSELECT @EVAL(5 + @x) as my_six FROM table", "\nSELECT 6 as my_six FROM table"},
		{"EVAL arithmetic", "SELECT @EVAL(7 / 2), @EVAL(2 * (3 + 1)), @EVAL('a' || 'b')", "SELECT 3.5, 8, 'ab'"},
		{"FILTER then REDUCE", "SELECT @REDUCE(@FILTER([1,2,3], x -> x > 1), (x, y) -> x + y)", "SELECT 2 + 3"},
		{"EVAL of REDUCE", "SELECT @EVAL(@REDUCE(@FILTER([1, 2, 3], x -> x > 1), (x, y) -> x + y))", "SELECT 5"},
		{"REDUCE of EACH", "SELECT my_column FROM table WHERE @REDUCE(@EACH([col1, col2, col3], x -> x = 1), (x, y) -> x AND y)",
			"SELECT my_column FROM table WHERE col1 = 1 AND col2 = 1 AND col3 = 1"},
		{"STAR", "SELECT @STAR(foo, bar, [c], 'baz_', '_qux') FROM foo AS bar",
			`SELECT CAST("bar"."a" AS TEXT) AS "baz_a_qux", CAST("bar"."b" AS TEXT) AS "baz_b_qux", CAST("bar"."d" AS INT) AS "baz_d_qux" FROM foo AS bar`},
		{"STAR with keywords", "SELECT @STAR(foo, bar, exclude := [c, d], 'ab_pre_'), @STAR(foo, bar, exclude := [a, b, c], 'd_pre_'), my_column FROM foo AS bar",
			`SELECT CAST("bar"."a" AS TEXT) AS "ab_pre_a", CAST("bar"."b" AS TEXT) AS "ab_pre_b", CAST("bar"."d" AS INT) AS "d_pre_d", my_column FROM foo AS bar`},
		{"STAR untyped, unquoted", "SELECT @STAR(untyped, quote_identifiers := FALSE) FROM untyped", "SELECT untyped.x AS x, untyped.y AS y FROM untyped"},
		{"GENERATE_SURROGATE_KEY", "SELECT @GENERATE_SURROGATE_KEY(a, b, c) AS col FROM foo",
			"SELECT MD5(CONCAT(COALESCE(CAST(a AS TEXT), '_sqlmesh_surrogate_key_null_'), '|', COALESCE(CAST(b AS TEXT), '_sqlmesh_surrogate_key_null_'), '|', COALESCE(CAST(c AS TEXT), '_sqlmesh_surrogate_key_null_'))) AS col FROM foo"},
		{"GENERATE_SURROGATE_KEY SHA256", "SELECT @GENERATE_SURROGATE_KEY(a, hash_function := 'SHA256')",
			"SELECT SHA256(CONCAT(COALESCE(CAST(a AS TEXT), '_sqlmesh_surrogate_key_null_')))"},
		{"SAFE_ADD", "SELECT @SAFE_ADD(a, b, c) FROM foo",
			"SELECT CASE WHEN a IS NULL AND b IS NULL AND c IS NULL THEN NULL ELSE COALESCE(a, 0) + COALESCE(b, 0) + COALESCE(c, 0) END FROM foo"},
		{"SAFE_SUB", "SELECT @SAFE_SUB(a, b, c) FROM foo",
			"SELECT CASE WHEN a IS NULL AND b IS NULL AND c IS NULL THEN NULL ELSE COALESCE(a, 0) - COALESCE(b, 0) - COALESCE(c, 0) END FROM foo"},
		{"SAFE_DIV", "SELECT @SAFE_DIV(a, b), @SAFE_DIV(a + 1, b) FROM foo", "SELECT (a / NULLIF(b, 0)), ((a + 1) / NULLIF(b, 0)) FROM foo"},
		{"UNION distinct", "@UNION('distinct', foo, bar)", "SELECT CAST(c AS TEXT) AS c FROM foo UNION SELECT CAST(c AS TEXT) AS c FROM bar"},
		{"UNION all by default", "@UNION(foo, bar)", "SELECT CAST(c AS TEXT) AS c FROM foo UNION ALL SELECT CAST(c AS TEXT) AS c FROM bar"},
		{"UNION condition false", "@UNION(1 > 2, 'all', foo, bar)", "SELECT CAST(c AS TEXT) AS c FROM foo"},
		{"UNION condition true", "@UNION(1 > 0, 'all', foo, bar)", "SELECT CAST(c AS TEXT) AS c FROM foo UNION ALL SELECT CAST(c AS TEXT) AS c FROM bar"},
		{"HAVERSINE_DISTANCE", "SELECT @HAVERSINE_DISTANCE(driver_y, driver_x, passenger_y, passenger_x, 'mi') AS dist FROM rides",
			"SELECT 7922 * ASIN(SQRT((POWER(SIN(RADIANS((passenger_y - driver_y) / 2)), 2)) + (COS(RADIANS(driver_y)) * COS(RADIANS(passenger_y)) * POWER(SIN(RADIANS((passenger_x - driver_x) / 2)), 2)))) * 1.0 AS dist FROM rides"},
		{"HAVERSINE_DISTANCE km", "SELECT @HAVERSINE_DISTANCE(a, b, c, d, 'km')",
			"SELECT 7922 * ASIN(SQRT((POWER(SIN(RADIANS((c - a) / 2)), 2)) + (COS(RADIANS(a)) * COS(RADIANS(c)) * POWER(SIN(RADIANS((d - b) / 2)), 2)))) * 1.60934"},
		{"PIVOT", "SELECT date_day, @PIVOT(status, ['cancelled', 'completed']) FROM rides GROUP BY 1",
			`SELECT date_day, SUM(CASE WHEN status = 'cancelled' THEN 1 ELSE 0 END) AS "cancelled", SUM(CASE WHEN status = 'completed' THEN 1 ELSE 0 END) AS "completed" FROM rides GROUP BY 1`},
		{"PIVOT options", "SELECT @PIVOT(a, ['v'], then_value := tv, suffix := '_sfx', quote := FALSE)", "SELECT SUM(CASE WHEN a = 'v' THEN tv ELSE 0 END) AS v_sfx"},
		{"PIVOT distinct, cmp, agg", "SELECT @PIVOT(s, [1], agg := 'MAX', cmp := '>', distinct := TRUE, prefix := 'p_')",
			`SELECT MAX(DISTINCT CASE WHEN s > 1 THEN 1 ELSE 0 END) AS "p_1"`},
		{"DEDUPLICATE", "with raw_data as (\n@deduplicate(my_table, [id, cast(event_date as date)], ['event_date DESC', 'status ASC'])\n)\nselect * from raw_data",
			"with raw_data as (\nSELECT * FROM my_table QUALIFY ROW_NUMBER() OVER (PARTITION BY id, cast(event_date as date) ORDER BY event_date DESC, status ASC) = 1\n)\nselect * from raw_data"},
		{"DATE_SPINE", "WITH d AS (@date_spine('day', '2024-01-01', '2024-01-16')) SELECT * FROM d",
			"WITH d AS (SELECT CAST(_exploded.date_day AS DATE) AS date_day FROM GENERATE_SERIES(CAST('2024-01-01' AS DATE), CAST('2024-01-16' AS DATE), INTERVAL '1 day') AS _exploded(date_day)) SELECT * FROM d"},
		{"DATE_SPINE quarter", "@DATE_SPINE('quarter', '2024-01-01', '2024-12-31')",
			"SELECT CAST(_exploded.date_quarter AS DATE) AS date_quarter FROM GENERATE_SERIES(CAST('2024-01-01' AS DATE), CAST('2024-12-31' AS DATE), INTERVAL '3 month') AS _exploded(date_quarter)"},
		{"AND drops NULL", "SELECT @AND(TRUE, NULL), @AND(), @OR(TRUE, NULL), @OR(a = 1, b = 2)", "SELECT TRUE, TRUE, TRUE, (a = 1) OR (b = 2)"},
		{"VAR and globals", "SELECT * FROM t WHERE x = @VAR('int_var') AND y = @VAR('missing_var', 0) AND z = @str_var AND @{str_var} = @INT_VAR AND f = @float_var AND b = @bool_var AND n = @VAR('nope')",
			"SELECT * FROM t WHERE x = 1 AND y = 0 AND z = 'cat' AND cat = 1 AND f = 2.0 AND b = TRUE AND n = NULL"},
		{"list variable", "SELECT @EACH(@list_var, x -> x + 1), @list_var", "SELECT 1 + 1, 2 + 1, 3 + 1, 1, 2, 3"},
		{"DEF variable", "SELECT item_id FROM t WHERE item_size > @size", "SELECT item_id FROM t WHERE item_size > 1"},
		{"DEF function, one parameter", "SELECT @rank_to_int(cust_rank_1) as r",
			"SELECT case when left(cust_rank_1, 1) = 'A' then 1 when left(cust_rank_1, 1) = 'B' then 2 end as r"},
		{"DEF function, two parameters", "SELECT sideA, sideB, @pythag(sideA, sideB) AS sideC FROM some.triangle",
			"SELECT sideA, sideB, sqrt(pow(sideA, 2) + pow(sideB, 2)) AS sideC FROM some.triangle"},
		{"DEF functions nested", "SELECT container_id, @container_volume((cont_di / 2), cont_hi) AS volume",
			"SELECT container_id, pi() * (cont_di / 2) * (cont_di / 2) * cont_hi AS volume"},
		{"DEF in the query shadows the library", "@DEF(size, 5);\n@DEF(twice, v -> v * 2);\nSELECT @twice(@size)", "\n\nSELECT 5 * 2"},
		{"SQL", "SELECT @SQL('@{str_var}_col'), @EACH([a, b], x -> @SQL('@x + 1'))", "SELECT cat_col, a + 1, b + 1"},
		{"WHERE true", "SELECT * FROM all_cities\n@WHERE(True) city_name = 'Toronto'\nORDER BY 1", "SELECT * FROM all_cities\nWHERE city_name = 'Toronto'\nORDER BY 1"},
		{"WHERE false drops the clause", "SELECT * FROM all_cities\n@WHERE(@size > 2) city_name = 'Toronto'\nORDER BY 1", "SELECT * FROM all_cities\n\nORDER BY 1"},
		{"JOIN false drops the join", "select * FROM all_cities LEFT OUTER @JOIN(false) country ON city.country = country.name WHERE x", "select * FROM all_cities WHERE x"},
		{"JOIN true", "select * FROM c LEFT OUTER @JOIN(True) country ON c.k = country.k", "select * FROM c LEFT OUTER JOIN country ON c.k = country.k"},
		{"GROUP_BY, HAVING, ORDER_BY, LIMIT, WITH", "@WITH(True) x AS (SELECT 1) SELECT a FROM x @GROUP_BY(1 = 1) a @HAVING(1 = 2) count(*) > 1 @ORDER_BY(TRUE) a @LIMIT(FALSE) 10",
			"WITH x AS (SELECT 1) SELECT a FROM x GROUP BY a ORDER BY a "},
		{"IF on the interval", "SELECT @IF(@start_ds > '2023-12-31', new, old), @IF(@end_date < DATE '2024-01-01', new, old) FROM t", "SELECT new, old FROM t"},
		{"RESOLVE_TEMPLATE", "SELECT @RESOLVE_TEMPLATE('s3://w/@{schema_name}/@{table_name}'), * FROM @resolve_template('@{schema_name}.@{table_name}$properties', mode := 'table')",
			`SELECT 's3://w/gapless__s/s__t__abc123', * FROM "gapless__s"."s__t__abc123$properties"`},
		{"literals and comments pass through", "SELECT '@nope', \"@nope\" -- @nope\n, @EACH([1], x -> x /* @nope */)", "SELECT '@nope', \"@nope\" -- @nope\n, 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, render(t, tt.sql, env))
		})
	}
}

func TestExpand_LeavesTheIntervalToRender(t *testing.T) {
	t.Parallel()
	// Scenario: a model is expanded once, when the project loads: its @DEF
	// functions and variables disappear, the time variables and an @IF
	// that reads them stay, and Render of the expansion (with no library)
	// gives what Render of the original gives. Lines are kept.
	env := docsEnv(t)
	sql := "@DEF(cutoff, '2023-12-31');\nSELECT @pythag(a, b) AS c,\n  @IF(@start_ds > @cutoff, @EACH([x, y], v -> v + @size), old)\nFROM t WHERE ds BETWEEN @start_ds AND @end_ds"
	exp, m, err := macro.Expand(sql, env, "duckdb")
	require.NoError(t, err)
	require.Equal(t, "\nSELECT sqrt(pow(a, 2) + pow(b, 2)) AS c,\n  @IF(@start_ds > '2023-12-31', [x + 1, y + 1], old)\nFROM t WHERE ds BETWEEN @start_ds AND @end_ds", exp)
	require.Equal(t, strings.Count(sql, "\n"), strings.Count(exp, "\n"))
	require.Equal(t, strings.Index(sql, "FROM t"), m.Original(strings.Index(exp, "FROM t")))
	require.Equal(t, strings.Index(sql, "@pythag"), m.Original(strings.Index(exp, "sqrt")))
	require.Equal(t, render(t, sql, env), render(t, exp, nil))
	require.Equal(t, "\nSELECT sqrt(pow(a, 2) + pow(b, 2)) AS c,\n  x + 1, y + 1\nFROM t WHERE ds BETWEEN '2024-01-01' AND '2024-01-01'", render(t, exp, nil))

	sql = "SELECT @IF(@start_ds > '2023-12-31', @pythag(a, b), old) AS c FROM t"
	exp, _, err = macro.Expand(sql, env, "duckdb")
	require.NoError(t, err)
	require.Equal(t, "SELECT @IF(@start_ds > '2023-12-31', sqrt(pow(a, 2) + pow(b, 2)), old) AS c FROM t", exp)
	require.Equal(t, render(t, sql, env), render(t, exp, nil))
	require.Equal(t, "SELECT sqrt(pow(a, 2) + pow(b, 2)) AS c FROM t", render(t, exp, nil))

	// Without columns, @STAR waits for Render, which reads them then.
	noCols := *env
	noCols.Columns = nil
	exp, _, err = macro.Expand("SELECT @STAR(foo, f, exclude := [a, b]) FROM foo AS f", &noCols, "duckdb")
	require.NoError(t, err)
	require.Equal(t, "SELECT @STAR(foo, f, exclude := [a, b]) FROM foo AS f", exp)
	require.Equal(t, `SELECT CAST("f"."c" AS TEXT) AS "c", CAST("f"."d" AS INT) AS "d" FROM foo AS f`, render(t, exp, &macro.Env{Columns: env.Columns}))
	_, err = macro.Render(exp, day, "duckdb")
	require.ErrorContains(t, err, "byte 7: @STAR needs the columns of foo, which are not known here")
}

func TestForParseEnv_MacrosBecomeParseableSQL(t *testing.T) {
	t.Parallel()
	// Scenario: dependency extraction sees the tables a macro names: a
	// @UNION whose columns are unknown is a union of SELECT * over the same
	// table names, at their place in the original text.
	env := docsEnv(t)
	env.Columns = nil
	sql := "WITH u AS (@UNION('all', raw.a, raw.b))\nSELECT @STAR(raw.a, u), @pythag(x, y) FROM u WHERE ds >= @start_ds AND @IF(@start_ds > '2000-01-01', TRUE, k = 1)"
	out, m, err := macro.ForParseEnv(sql, env)
	require.NoError(t, err)
	require.Equal(t, "WITH u AS (SELECT * FROM raw.a UNION ALL SELECT * FROM raw.b)\nSELECT \"u\".*, sqrt(pow(x, 2) + pow(y, 2)) FROM u WHERE ds >= __gapless_macro_start_ds AND k = 1", out)
	require.Equal(t, strings.Index(sql, "raw.b"), m.Original(strings.Index(out, "raw.b")))
	require.Equal(t, strings.Index(sql, "k = 1"), m.Original(strings.Index(out, "k = 1")))
	require.Equal(t, len(sql), m.Original(len(out)))
}

func TestErrors_Macros(t *testing.T) {
	t.Parallel()
	env := docsEnv(t)
	lib, err := (&macro.Env{}).WithDefs("macros/a.sql", 1, 1, "@DEF(f, (a, b) -> a + b);")
	require.NoError(t, err)
	env.Library = lib.Library
	tests := []struct {
		name, sql string
		code      macro.Code
		off       int
		msg       string
	}{
		{"unknown macro with suggestion", "SELECT @EACHH([1], x -> x)", macro.CodeUnknownMacro, 7, "unknown macro @eachh: did you mean @each?"},
		{"unknown user macro with suggestion", "SELECT @g(1, 2), @ff(1, 2)", macro.CodeUnknownMacro, 7, "unknown macro @g: did you mean @f?"},
		{"unknown macro, no suggestion", "SELECT @completely_unknown(1)", macro.CodeUnknownMacro, 7,
			"unknown macro @completely_unknown (it is neither a built-in operator nor defined with @DEF; a Python macro must be rewritten as @DEF(completely_unknown, (arg1, arg2) -> <SQL expression>); in macros/*.sql)"},
		{"user function arity", "SELECT\n  @f(1, 2, 3)", macro.CodeArity, 9, "@f takes 2 arguments, got 3 (defined in macros/a.sql:1 as @DEF(f, (a, b) -> ...))"},
		{"built-in arity", "SELECT @SAFE_DIV(a, b, c)", macro.CodeArity, 7, "@SAFE_DIV takes 2 arguments, got 3"},
		{"IF arity", "SELECT @IF(TRUE)", macro.CodeArity, 7, "@IF takes 2 to 3 arguments, got 1"},
		{"unbalanced call", "SELECT @EACH([1, 2], x -> x FROM t", macro.CodeUnbalanced, 7, "unbalanced call: @EACH( is never closed"},
		{"wrongly closed call", "SELECT @EACH([1, 2), x -> x)", macro.CodeUnbalanced, 7, "unbalanced call: @EACH( is never closed"},
		{"DEF as a variable", "SELECT @DEF", macro.CodeMisuse, 7,
			"@DEF defines a macro variable or function, it is not a value: write @DEF(name, value); or @DEF(name, (a, b) -> expression); as a statement before the query (or in macros/*.sql), then use @name"},
		{"DEF inside the query", "SELECT @DEF(x, 1)", macro.CodeMisuse, 7,
			"@DEF(...) defines a macro variable or function and must be a statement of its own before the query, ending with ';' (or be in macros/*.sql)"},
		{"function used as a variable", "SELECT @f", macro.CodeMisuse, 7, "@f is a macro function (defined with @DEF in macros/a.sql:1), not a variable: call it as @f(a, b)"},
		{"variable called", "SELECT @str_var(1)", macro.CodeMisuse, 7, "@str_var is a macro variable, not a function: write @str_var without arguments"},
		{"built-in used as a variable", "SELECT @EACH", macro.CodeMisuse, 7, "@EACH is a built-in macro function, not a variable: call it as @EACH(...)"},
		{"lambda arity", "SELECT @REDUCE([1, 2], x -> x)", macro.CodeArity, 7, "@REDUCE's lambda takes 2 parameters, got 1"},
		{"condition on a column", "SELECT @IF(col > 1, a)", macro.CodeEval, 7,
			"cannot evaluate the condition: col is a column or keyword, not a value (conditions are evaluated before the query runs: use literals, macro variables, comparisons, AND, OR, NOT, BETWEEN, IN)"},
		{"recursion", "@DEF(loop, x -> @loop(x));\nSELECT @loop(1)", macro.CodeRecursion, 34, "macro expansion nests more than 64 deep (does a @DEF function call itself?)"},
		{"VAR needs a quoted name", "SELECT @VAR(int_var)", macro.CodeSyntax, 7, "@VAR's first argument must be the variable's name in single quotes, as in @VAR('my_var'), got int_var"},
		{"unknown keyword", "SELECT @STAR(foo, nope := 1) FROM foo", macro.CodeSyntax, 7, "@STAR has no argument nope (arguments: relation, alias, exclude, prefix, suffix, quote_identifiers, except_)"},
		{"unknown variable suggests user names", "SELECT @str_vr", macro.CodeUnknownVariable, 7, "unknown macro variable @str_vr: did you mean @str_var?"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			v := day
			v.Env = env
			_, err := macro.Render(tt.sql, v, "duckdb")
			var me *macro.Error
			require.True(t, errors.As(err, &me), "%v", err)
			require.Equal(t, tt.code, me.Code, me.Msg)
			require.Equal(t, tt.off, me.Offset)
			require.Equal(t, tt.msg, me.Msg)
			// Loading (Expand, ForParseEnv) reports the same problem.
			_, _, err = macro.ForParseEnv(tt.sql, env)
			require.True(t, errors.As(err, &me), "%v", err)
			require.Equal(t, tt.code, me.Code)
		})
	}
}

func TestLoadDir_LibraryAndPythonMacros(t *testing.T) {
	t.Parallel()
	// Scenario: a project's macros/ folder holds SQL macro files (one or
	// more @DEF statements each) and a Python macro, which is refused
	// naming the macro, the file and the line, and the SQL form to use.
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "macros", "sub"), 0o755))
	write := func(name, body string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "macros", name), []byte(body), 0o644))
	}
	write("money.sql", "-- money helpers\n@DEF(cents_to_dollars, c -> round(c / 100.0, 2));\n@DEF(currency, 'USD');\n")
	write("sub/keys.sql", "@DEF(key, (a, b) -> a || '-' || b);")
	write("__init__.py", "")
	lib, err := macro.LoadDir(dir)
	require.NoError(t, err)
	require.Equal(t, []string{"cents_to_dollars", "currency", "key"}, lib.Names())
	d, ok := lib.Lookup("KEY")
	require.True(t, ok)
	require.Equal(t, "macros/sub/keys.sql:1", d.Where())
	require.Equal(t, "SELECT round(amount / 100.0, 2) || ' ' || 'USD', k1 || '-' || k2",
		render(t, "SELECT @cents_to_dollars(amount) || ' ' || @currency, @key(k1, k2)", &macro.Env{Library: lib}))

	write("bad.sql", "@DEF(ok, 1);\n\nSELECT 1;\n")
	write("py_macros.py", "from sqlmesh import macro\n\n@macro()\ndef add_one(evaluator, column):\n    return f\"{column} + 1\"\n")
	lib, err = macro.LoadDir(dir)
	var le *macro.LibraryErrors
	require.True(t, errors.As(err, &le))
	require.Len(t, le.Errs, 2)
	require.EqualError(t, le.Errs[0], "macros/bad.sql:3:1: only @DEF(name, value); statements may be here (found SELECT 1)")
	require.EqualError(t, le.Errs[1], "macros/py_macros.py:4:1: @add_one is a Python macro: gapless cannot run Python macros; write it as a SQL macro function, @DEF(add_one, (arg1, arg2) -> <SQL expression>); in a macros/*.sql file")
	// A call to it names the file too.
	_, err = macro.Render("SELECT @add_one(x)", macro.Vars{Env: &macro.Env{Library: lib}}, "duckdb")
	var me *macro.Error
	require.True(t, errors.As(err, &me))
	require.Equal(t, macro.CodePython, me.Code)
	require.Contains(t, me.Msg, "@add_one is a Python macro (macros/py_macros.py:4)")

	// A bad @DEF in a model's pre-statement is located in the model file.
	_, err = (&macro.Env{}).WithDefs("models/m.sql", 5, 1, "@DEF(x);")
	require.EqualError(t, err, "models/m.sql:5:1: @DEF takes 2 arguments (a name and a value or a lambda), got 1")
	_, err = (&macro.Env{}).WithDefs("models/m.sql", 5, 1, "\n  @DEF(each, 1);")
	require.EqualError(t, err, "models/m.sql:6:3: @DEF(each, ...) redefines the built-in macro @EACH: choose another name")
}

func TestVariableValue(t *testing.T) {
	t.Parallel()
	v, err := macro.VariableValue([]any{uint64(1), "a", true, 2.5})
	require.NoError(t, err)
	require.Equal(t, []any{int64(1), "a", true, 2.5}, v)
	_, err = macro.VariableValue(map[string]any{"k": 1})
	require.EqualError(t, err, "a map[string]interface {} is not supported (values are strings, numbers, booleans or lists of them)")
	_, err = macro.VariableValue([]any{[]any{1}})
	require.EqualError(t, err, "a list inside a list is not supported")
}
