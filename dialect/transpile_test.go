package dialect_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/dialect"
	"github.com/gapless-dev/gapless/model"
)

// TestTranspile_Rewrites pins every rewrite: the query as a source dialect
// writes it, and as the engine must read it.
func TestTranspile_Rewrites(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, from, to, in, want string
	}{
		// Identifiers and strings.
		{"backquoted BigQuery path", "bigquery", "duckdb", "SELECT a FROM `proj.ds.t`", `SELECT a FROM "proj"."ds"."t"`},
		{"backquoted Spark name keeps its dot", "spark", "duckdb", "SELECT `a.b` FROM t", `SELECT "a.b" FROM t`},
		{"backquote folded on PostgreSQL", "mysql", "postgres", "SELECT `Amount` FROM t", `SELECT "amount" FROM t`},
		{"Snowflake double quotes kept", "snowflake", "postgres", `SELECT "Amount" FROM t`, `SELECT "Amount" FROM t`},
		{"Snowflake upper-case name folded on PostgreSQL", "snowflake", "postgres", `SELECT "ID" FROM t`, `SELECT "id" FROM t`},
		{"Snowflake upper-case name kept on DuckDB", "snowflake", "duckdb", `SELECT "ID" FROM t`, `SELECT "ID" FROM t`},
		{"T-SQL brackets", "tsql", "duckdb", "SELECT [order id] FROM [dbo].[t]", `SELECT "order id" FROM "dbo"."t"`},
		{"double-quoted string", "bigquery", "duckdb", `SELECT "it's" AS s`, `SELECT 'it''s' AS s`},
		{"backslash escapes", "snowflake", "duckdb", `SELECT 'a\'b\\c' AS s`, `SELECT 'a''b\c' AS s`},
		{"newline escape keeps lines", "bigquery", "duckdb", `SELECT 'a\nb' AS s`, `SELECT ('a' || chr(10) || 'b') AS s`},
		{"raw string", "bigquery", "duckdb", `SELECT r'\d+' AS s`, `SELECT '\d+' AS s`},
		{"triple-quoted string", "bigquery", "duckdb", "SELECT '''it's\nhere''' AS s", "SELECT 'it''s\nhere' AS s"},
		{"dollar string", "snowflake", "duckdb", "SELECT $$it's$$ AS s", `SELECT 'it''s' AS s`},
		{"hash comment", "bigquery", "duckdb", "SELECT 1 # one\n", "SELECT 1 -- one\n"},
		{"strings and comments are not rewritten", "bigquery", "duckdb", "SELECT 'IFNULL(a, b)' -- SAFE_CAST(x)\n", "SELECT 'IFNULL(a, b)' -- SAFE_CAST(x)\n"},
		// Star modifiers.
		{"* EXCEPT", "bigquery", "duckdb", "SELECT * EXCEPT (a, `b`) FROM t", `SELECT * EXCLUDE (a, "b") FROM t`},
		{"t.* EXCEPT", "databricks", "duckdb", "SELECT t.* EXCEPT (a) FROM t", `SELECT t.* EXCLUDE (a) FROM t`},
		{"* EXCLUDE", "snowflake", "duckdb", "SELECT * EXCLUDE (a) FROM t", `SELECT * EXCLUDE (a) FROM t`},
		{"* REPLACE", "bigquery", "duckdb", "SELECT * REPLACE (a + 1 AS a) FROM t", `SELECT * REPLACE (a + 1 AS a) FROM t`},
		{"a product is not a star", "bigquery", "postgres", "SELECT price * REPLACE(q, 'x', '') FROM t", "SELECT price * REPLACE(q, 'x', '') FROM t"},
		{"set EXCEPT untouched", "bigquery", "duckdb", "SELECT * FROM a EXCEPT DISTINCT SELECT * FROM b", "SELECT * FROM a EXCEPT DISTINCT SELECT * FROM b"},
		// Casts and types.
		{"SAFE_CAST", "bigquery", "duckdb", "SELECT SAFE_CAST(x AS INT64)", "SELECT TRY_CAST(x AS BIGINT)"},
		{"SAFE_CAST on Trino", "bigquery", "trino", "SELECT SAFE_CAST(x AS BYTES)", "SELECT TRY_CAST(x AS VARBINARY)"},
		{"BigQuery types", "bigquery", "duckdb",
			"SELECT CAST(a AS FLOAT64), CAST(b AS STRING), CAST(c AS BOOL), CAST(d AS NUMERIC), CAST(e AS NUMERIC(10, 2)), CAST(f AS DATETIME), CAST(g AS TIMESTAMP), CAST(h AS BYTES)",
			"SELECT CAST(a AS DOUBLE), CAST(b AS VARCHAR), CAST(c AS BOOLEAN), CAST(d AS DECIMAL(38, 9)), CAST(e AS DECIMAL(10, 2)), CAST(f AS TIMESTAMP), CAST(g AS TIMESTAMPTZ), CAST(h AS BLOB)"},
		{"BigQuery types on PostgreSQL", "bigquery", "postgres", "SELECT CAST(a AS FLOAT64), CAST(b AS BYTES)", "SELECT CAST(a AS DOUBLE PRECISION), CAST(b AS BYTEA)"},
		{"Snowflake TRY_CAST and NUMBER", "snowflake", "duckdb", "SELECT TRY_CAST(s AS NUMBER(10,2)), CAST(n AS NUMBER), CAST(f AS FLOAT)", "SELECT TRY_CAST(s AS DECIMAL(10, 2)), CAST(n AS DECIMAL(38, 0)), CAST(f AS DOUBLE)"},
		{":: cast type", "snowflake", "duckdb", "SELECT x::STRING, y::timestamp_ntz FROM t", "SELECT x::VARCHAR, y::TIMESTAMP FROM t"},
		{"Spark FLOAT is single precision", "spark", "postgres", "SELECT CAST(a AS FLOAT), CAST(b AS STRING)", "SELECT CAST(a AS REAL), CAST(b AS VARCHAR)"},
		{"MySQL SIGNED", "mysql", "duckdb", "SELECT CAST(a AS SIGNED)", "SELECT CAST(a AS BIGINT)"},
		// Functions.
		{"IFF", "snowflake", "duckdb", "SELECT IFF(a > 1, 'x', 'y')", "SELECT CASE WHEN (a > 1) THEN  'x' ELSE  'y' END"},
		{"IF", "bigquery", "postgres", "SELECT IF(ok, 1, 0)", "SELECT CASE WHEN ok THEN  1 ELSE  0 END"},
		{"NVL IFNULL", "snowflake", "duckdb", "SELECT NVL(a, 0), IFNULL(b, 1)", "SELECT COALESCE(a,  0), COALESCE(b,  1)"},
		{"NVL on Spark", "spark", "trino", "SELECT nvl(a, 0)", "SELECT COALESCE(a,  0)"},
		{"NVL on Redshift", "redshift", "duckdb", "SELECT NVL(a, 0)", "SELECT COALESCE(a,  0)"},
		{"truncating division kept on PostgreSQL", "redshift", "postgres", "SELECT a / b FROM t", "SELECT a / b FROM t"},
		{"exact division kept on DuckDB", "snowflake", "duckdb", "SELECT a / b FROM t", "SELECT a / b FROM t"},
		{"NVL2", "snowflake", "duckdb", "SELECT NVL2(a, 1, 2)", "SELECT CASE WHEN a IS NOT NULL THEN  1 ELSE  2 END"},
		{"ISNULL with two arguments", "tsql", "duckdb", "SELECT ISNULL(a, 0)", "SELECT COALESCE(a,  0)"},
		{"ZEROIFNULL NULLIFZERO", "snowflake", "duckdb", "SELECT ZEROIFNULL(a), NULLIFZERO(b)", "SELECT COALESCE(a, 0), NULLIF(b, 0)"},
		{"DIV0 keeps lines", "snowflake", "duckdb", "SELECT DIV0(a,\n b)", "SELECT CASE WHEN \n b = 0 AND a IS NOT NULL THEN 0 ELSE a /   b END"},
		{"SAFE_DIVIDE", "bigquery", "duckdb", "SELECT SAFE_DIVIDE(a, b + 1)", "SELECT CASE WHEN ( b + 1) = 0 THEN NULL ELSE a / ( b + 1) END"},
		{"CONCAT propagates NULL", "bigquery", "postgres", "SELECT CONCAT(a, '-', b)", "SELECT (a ||  '-' ||  b)"},
		{"CURRENT_DATE()", "bigquery", "duckdb", "SELECT CURRENT_DATE(), CURRENT_TIMESTAMP()", "SELECT CURRENT_DATE, CURRENT_TIMESTAMP"},
		{"BigQuery DATE_TRUNC", "bigquery", "duckdb", "SELECT DATE_TRUNC(d, MONTH), TIMESTAMP_TRUNC(ts, ISOWEEK)", "SELECT CAST(date_trunc('month', d) AS DATE), date_trunc('week', ts)"},
		{"Snowflake DATE_TRUNC", "snowflake", "postgres", "SELECT DATE_TRUNC(month, d), DATE_TRUNC('DAY', ts)", "SELECT date_trunc('month',  d), date_trunc('day',  ts)"},
		{"Spark date_format", "spark", "duckdb", "SELECT date_format(ts, 'yyyy-MM-dd HH:mm:ss')", "SELECT strftime(ts, '%Y-%m-%d %H:%M:%S')"},
		{"Spark date_format on PostgreSQL", "spark", "postgres", "SELECT date_format(ts, 'yyyy-MM')", "SELECT to_char(ts, 'YYYY-MM')"},
		{"Spark date_format on Trino", "hive", "trino", "SELECT date_format(ts, 'HH:mm')", "SELECT date_format(ts, '%H:%i')"},
		{"BigQuery FORMAT_DATE", "bigquery", "duckdb", "SELECT FORMAT_DATE('%F', d)", "SELECT strftime( d, '%Y-%m-%d')"},
		{"hex digest", "bigquery", "duckdb", "SELECT TO_HEX(MD5(CONCAT(a, b))), TO_HEX(SHA256(c))", "SELECT md5((a ||  b)), sha256(c)"},
		{"REGEXP_CONTAINS", "bigquery", "duckdb", "SELECT REGEXP_CONTAINS(s, r'^a')", "SELECT regexp_matches(s,  '^a')"},
		{"nested rewrites", "snowflake", "duckdb", "SELECT IFF(NVL(a, 0) > 0, TRY_CAST(b AS STRING), 'n')", "SELECT CASE WHEN (COALESCE(a,  0) > 0) THEN  TRY_CAST(b AS VARCHAR) ELSE  'n' END"},
		{"QUALIFY kept on DuckDB", "snowflake", "duckdb", "SELECT a FROM t QUALIFY row_number() OVER (PARTITION BY a) = 1", "SELECT a FROM t QUALIFY row_number() OVER (PARTITION BY a) = 1"},
		{"macros kept", "bigquery", "duckdb", "SELECT @IF(@start_ds > '2024', IFNULL(a, 1), 2) FROM t WHERE d >= @start_ds", "SELECT @IF(@start_ds > '2024', COALESCE(a,  1), 2) FROM t WHERE d >= @start_ds"},
		{"qualified function untouched", "bigquery", "duckdb", "SELECT udf.IF(a, b, c)", "SELECT udf.IF(a, b, c)"},
		{"array literal", "bigquery", "duckdb", "SELECT [1, 2] AS xs", "SELECT [1, 2] AS xs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, _, err := dialect.Transpile(tt.in, tt.from, tt.to)
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
			require.Equal(t, strings.Count(tt.in, "\n"), strings.Count(got, "\n"), "lines kept")
		})
	}
}

// TestTranspile_Refusals pins what is refused: the construct, the dialects
// and the offset of the construct in the written text.
func TestTranspile_Refusals(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, from, to, in, construct, msg string
		at                                 string // the text the offset points at
	}{
		{"Snowflake variant path", "snowflake", "duckdb", "SELECT v:name FROM t", ":", "variant", ":name"},
		{"BigQuery STRUCT type", "bigquery", "duckdb", "SELECT CAST(x AS STRUCT<a INT64>)", "STRUCT<", "parameterized", "STRUCT<"},
		{"BigQuery typed array", "bigquery", "duckdb", "SELECT ARRAY<INT64>[1]", "ARRAY<...>", "typed", "ARRAY<"},
		{"PIVOT", "snowflake", "duckdb", "SELECT * FROM t PIVOT (sum(x) FOR k IN ('a'))", "PIVOT", "CASE", "PIVOT"},
		{"* EXCEPT on PostgreSQL", "bigquery", "postgres", "SELECT * EXCEPT (a) FROM t", "* EXCEPT", "list the columns", "EXCEPT"},
		{"SAFE_CAST on PostgreSQL", "bigquery", "postgres", "SELECT SAFE_CAST(x AS INT64)", "SAFE_CAST", "NULL", "SAFE_CAST"},
		{"QUALIFY on Trino", "snowflake", "trino", "SELECT a FROM t QUALIFY x = 1", "QUALIFY", "outer query", "QUALIFY"},
		{"ILIKE on Trino", "snowflake", "trino", "SELECT a FROM t WHERE a ILIKE 'x%'", "ILIKE", "lower", "ILIKE"},
		{":: on Trino", "snowflake", "trino", "SELECT a::INT FROM t", "::", "CAST", "::"},
		{"division on PostgreSQL", "bigquery", "postgres", "SELECT a / b FROM t", "/", "truncates on postgres", "/ b"},
		{"truncating division on DuckDB", "redshift", "duckdb", "SELECT a / b FROM t", "/", "gives the exact quotient on duckdb", "/ b"},
		{"division of an unknown dialect", "druid", "trino", "SELECT a / b FROM t", "/", "not known", "/ b"},
		{"BigQuery WEEK", "bigquery", "duckdb", "SELECT DATE_TRUNC(d, WEEK)", "WEEK", "Sunday", "WEEK)"},
		{"BigQuery bare MD5", "bigquery", "duckdb", "SELECT MD5(a)", "MD5(...)", "BYTES", "MD5"},
		{"BigQuery TO_HEX of bytes", "bigquery", "duckdb", "SELECT TO_HEX(b)", "TO_HEX(...)", "upper case", "TO_HEX"},
		{"BigQuery DATE_DIFF", "bigquery", "duckdb", "SELECT DATE_DIFF(a, b, DAY)", "DATE_DIFF(...)", "arguments", "DATE_DIFF"},
		{"BigQuery subscript", "bigquery", "duckdb", "SELECT xs[OFFSET(0)] FROM t", "[", "from 0", "[OFFSET"},
		{"Spark LATERAL VIEW", "spark", "duckdb", "SELECT x FROM t LATERAL VIEW explode(xs) e AS x", "LATERAL VIEW", "LATERAL VIEW", "LATERAL"},
		{"EXTRACT DAYOFWEEK", "bigquery", "duckdb", "SELECT EXTRACT(DAYOFWEEK FROM d)", "EXTRACT(DAYOFWEEK", "weekdays", "DAYOFWEEK"},
		{"Snowflake DATEADD", "snowflake", "duckdb", "SELECT DATEADD(day, 1, d)", "DATEADD(...)", "DATE stays a DATE", "DATEADD"},
		{"MySQL ||", "mysql", "duckdb", "SELECT a || b", "||", "OR", "|| b"},
		{"bytes literal", "bigquery", "duckdb", "SELECT b'abc'", "b'abc'", "bytes", "b'abc'"},
		{"unknown escape", "bigquery", "duckdb", `SELECT 'a\x41'`, `'a\x41'`, "escape", `'a\x41'`},
		{"unterminated string", "bigquery", "duckdb", "SELECT 'abc", "'abc", "unterminated", "'abc"},
		{"T-SQL TOP", "tsql", "duckdb", "SELECT TOP 10 a FROM t", "TOP", "LIMIT", "TOP"},
		{"Spark date_format field", "spark", "duckdb", "SELECT date_format(ts, 'EEE')", "'EEE'", "format", "'EEE'"},
		{"cast FORMAT clause", "bigquery", "duckdb", "SELECT CAST(d AS STRING FORMAT 'YYYY')", "FORMAT", "clause", "FORMAT"},
		{"BIGNUMERIC", "bigquery", "duckdb", "SELECT CAST(x AS BIGNUMERIC)", "BIGNUMERIC", "no equivalent", "BIGNUMERIC"},
		{"VARIANT", "snowflake", "duckdb", "SELECT x::VARIANT", "VARIANT", "no equivalent", "VARIANT"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, _, err := dialect.Transpile(tt.in, tt.from, tt.to)
			var de *dialect.Error
			require.True(t, errors.As(err, &de), "want a *dialect.Error, got %v", err)
			require.Equal(t, tt.construct, de.Construct)
			require.Equal(t, tt.from, de.From)
			require.Equal(t, tt.to, de.To)
			require.Contains(t, de.Error(), tt.msg)
			require.True(t, strings.HasPrefix(tt.in[de.Offset:], tt.at), "offset %d points at %q", de.Offset, tt.in[de.Offset:])
		})
	}
}

// TestTranspile_EngineDialectsRunAsWritten: a query in an engine dialect
// is never rewritten, whatever the engine.
func TestTranspile_EngineDialectsRunAsWritten(t *testing.T) {
	t.Parallel()
	const q = "SELECT `x`, \"y\", IFNULL(a, b) :: STRING FROM t QUALIFY 1"
	for _, from := range []string{"duckdb", "postgres", "trino"} {
		for _, to := range []string{"duckdb", "postgres", "trino"} {
			got, m, err := dialect.Transpile(q, from, to)
			require.NoError(t, err)
			require.Equal(t, q, got)
			require.Equal(t, 7, m.Original(7))
		}
	}
}

// TestTranspile_MapperPointsIntoTheWrittenText: an offset of the rewritten
// query maps back to the same token of the written one.
func TestTranspile_MapperPointsIntoTheWrittenText(t *testing.T) {
	t.Parallel()
	in := "SELECT SAFE_CAST(x AS INT64),\n  `proj.ds.t`.y\nFROM `proj.ds.t` WHERE zz = 1"
	out, m, err := dialect.Transpile(in, "bigquery", "duckdb")
	require.NoError(t, err)
	for _, tok := range []string{"zz", "WHERE", "FROM", "x AS"} {
		require.Equal(t, strings.Index(in, tok), m.Original(strings.Index(out, tok)), tok)
	}
	require.Equal(t, strings.Index(in, "`proj.ds.t`"), m.Original(strings.Index(out, `"proj"."ds"."t"`)))
}

// TestNames_EveryModelDialectIsKnown: the dialects a model may declare are
// the ones this package rewrites from, and sqlglot's usual names are among
// them.
func TestNames_EveryModelDialectIsKnown(t *testing.T) {
	t.Parallel()
	for _, d := range model.Dialects {
		require.True(t, dialect.Known(string(d)), d)
	}
	for _, n := range []string{"bigquery", "snowflake", "spark", "databricks", "hive", "mysql", "redshift", "athena", "presto", "tsql", "clickhouse", "sqlite", "duckdb", "postgres", "trino"} {
		_, err := model.ParseDialect(strings.ToUpper(n))
		require.NoError(t, err, n)
	}
	_, err := model.ParseDialect("snowflak")
	require.ErrorContains(t, err, "did you mean snowflake?")
	_, err = model.ParseDialect("snowflake,normalization_strategy=case_sensitive")
	require.ErrorContains(t, err, "dialect settings")
}

// TestCanonical_IgnoresLayoutNotText: the fingerprinted text of a
// foreign-dialect query ignores comments, white space and keyword case, and
// sees every other change.
func TestCanonical_IgnoresLayoutNotText(t *testing.T) {
	t.Parallel()
	a := dialect.Canonical("select a,  b -- note\nfrom `t` # x\n", "bigquery")
	require.Equal(t, a, dialect.Canonical("SELECT a, b FROM `t`", "bigquery"))
	require.NotEqual(t, a, dialect.Canonical("SELECT a, b FROM `u`", "bigquery"))
	require.NotEqual(t, a, dialect.Canonical("SELECT a, 'b' FROM `t`", "bigquery"))
}
