package trino

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	trinoclient "github.com/trinodb/trino-go-client/trino"

	"github.com/gapless-dev/gapless/warehouse"
)

// Scenario: gapless.yaml names the warehouse as a trino:// URL; each form
// becomes the client's server, user, catalog and options, and each
// mistake is an error that names the URL without its password.
func TestParseURL(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		url  string
		want Config
		err  string // a substring of the error, "" for none
	}{
		{url: "trino://gapless@127.0.0.1:8080/iceberg",
			want: Config{Server: "http://127.0.0.1:8080", User: "gapless", Catalog: "iceberg", Source: "gapless"}},
		{url: "trino://gapless@trino.internal/lake",
			want: Config{Server: "http://trino.internal:8080", User: "gapless", Catalog: "lake", Source: "gapless"}},
		{url: "trino://ann:s3cret@trino.example.com/lake?secure=true&source=ci&schema=analytics",
			want: Config{Server: "https://trino.example.com:443", User: "ann", Password: "s3cret", Catalog: "lake", Schema: "analytics", Source: "ci"}},
		{url: "trino://ann@[::1]:8443/lake/?secure=1",
			want: Config{Server: "https://[::1]:8443", User: "ann", Catalog: "lake", Source: "gapless"}},
		{url: "trino://ann:s3cret@host:8080/lake", err: "has a password but talks plain http: add ?secure=true"},
		{url: "trino://ann:s3cret@host:8080/lake?secure=false", err: "has a password but talks plain http"},
		{url: "trino://ann@host:8080", err: "names no catalog"},
		{url: "trino://ann@host:8080/", err: "names no catalog"},
		{url: "trino://ann@host:8080/lake/analytics", err: "exactly one catalog name"},
		{url: "trino://host:8080/lake", err: "names no user"},
		{url: "trino://ann@/lake", err: "names no host"},
		{url: "postgres://ann@host/lake", err: "must start with trino://"},
		{url: "trino://ann@host/lake?secure=maybe", err: `secure="maybe" is not true or false`},
		{url: "trino://ann@host/lake?catalog=x", err: `unknown parameter "catalog"`},
		{url: "trino://ann@host:99999/lake", err: `port "99999" is not a port number`},
		{url: "trino://ann:s3cret@host:8080/lake/x", err: "exactly one catalog name"},
	} {
		got, err := ParseURL(c.url)
		if c.err != "" {
			require.Error(t, err, c.url)
			require.Contains(t, err.Error(), c.err, c.url)
			require.NotContains(t, err.Error(), "s3cret", "the error shows the password")
			continue
		}
		require.NoError(t, err, c.url)
		got.Redacted = ""
		require.Equal(t, c.want, got, c.url)
	}
	_, err := ParseURL("trino://ann:s3cret@host:8080/lake\x7f%zz")
	require.Error(t, err)
	require.NotContains(t, err.Error(), "s3cret")
}

// Scenario: the driver configuration gapless builds from a URL keeps the
// password for https only, sets the client name, and reads timestamps in
// UTC.
func TestClientConfig(t *testing.T) {
	t.Parallel()
	c, err := ParseURL("trino://ann:s3cret@host/lake?secure=true&schema=s")
	require.NoError(t, err)
	cfg := c.clientConfig(nil)
	require.Equal(t, "https://ann:s3cret@host:443", cfg.ServerURI)
	require.Equal(t, "lake", cfg.Catalog)
	require.Equal(t, "s", cfg.Schema)
	require.Equal(t, "gapless", cfg.Source)
	require.Equal(t, "UTC", cfg.TimeZone)
	require.True(t, cfg.DisableExplicitPrepare)
}

// Scenario: names Trino's Iceberg catalog cannot hold faithfully are
// refused before any SQL, with the reason; legal strange names pass.
func TestCheckIdent(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"données", "表", "select", "MixedCase", "with space", "a.b", "x-y", "t}x", "t~x", " lead", strings.Repeat("a", 128)} {
		require.NoError(t, checkIdent(kindTable, ok), "%q", ok)
	}
	for _, c := range []struct {
		k    kind
		name string
		why  string
	}{
		{kindTable, "", "empty"},
		{kindColumn, "a\x00b", "NUL"},
		{kindSchema, "bad\xff", "UTF-8"},
		{kindColumn, "İx", "'İ' or 'Σ'"},
		{kindTable, "ΟΔΟΣ", "'İ' or 'Σ'"},
		{kindTable, `evil"; DROP TABLE "canary"."x"; --`, `'"'`},
		{kindSchema, "it's", `'\''`},
		{kindView, `"`, `'"'`},
		{kindTable, `back\slash`, `'\\'`},
		{kindTable, "$1", "reserves"},
		{kindView, "t@v", "reserves"},
		{kindSchema, "a/b", "'/'"},
		{kindSchema, "a%b", "'%'"},
		{kindTable, "tab\tname", "control character"},
		{kindSchema, "..", "folder"},
		{kindTable, strings.Repeat("a", 129), "at most 128 characters"},
		{kindTable, strings.Repeat("表", 75), "222 bytes"},
	} {
		err := checkIdent(c.k, c.name)
		require.ErrorIs(t, err, warehouse.ErrInvalidIdentifier, "%s %q", c.k, c.name)
		require.Contains(t, err.Error(), c.why, "%s %q", c.k, c.name)
	}
	// Columns may hold what the metastore escapes and what Iceberg
	// reserves in table names.
	for _, ok := range []string{`evil"; DROP TABLE "canary"."x"; --`, "it's", `"`, `back\slash`, "$1", "a/b", "tab\tname"} {
		require.NoError(t, checkIdent(kindColumn, ok), "%q", ok)
	}
	require.NoError(t, checkIdent(kindSchema, "$1"), "a schema may be named $1")
}

// Scenario: a model declares column types in the spellings of other
// engines; each becomes Trino's, and a type written to end the statement
// is refused.
func TestNormalizeType(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"TEXT":                           "varchar",
		"STRING":                         "varchar",
		"TIMESTAMP":                      "timestamp(6)",
		"timestamp without time zone":    "timestamp(6)",
		"TIMESTAMPTZ":                    "timestamp(6) with time zone",
		"TIMESTAMP WITH TIME ZONE":       "timestamp(6) with time zone",
		"timestamp(3)  with time zone":   "timestamp(3) with time zone",
		"TIMESTAMP(3) WITHOUT TIME ZONE": "timestamp(3)",
		"DOUBLE PRECISION":               "double",
		"INT":                            "integer",
		"INTEGER":                        "integer",
		"BIGINT":                         "bigint",
		"NUMERIC(12, 2)":                 "decimal(12,2)",
		"decimal(12,2)":                  "decimal(12,2)",
		"BOOL":                           "boolean",
		"character varying(10)":          "varchar(10)",
		"varchar":                        "varchar",
		"array(varchar)":                 "array(varchar)",
		`row(x integer, "Y z" varchar)`:  `row(x integer,"Y z" varchar)`,
		"timestamp(6)":                   "timestamp(6)",
	} {
		got, err := normalizeType(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, bad := range []string{"", "  ", `BIGINT); DROP TABLE "canary"."x"; --`, "BIGINT /* comment", "BIGINT -- x", "varchar(10", "a, b", "BIGINT 'x'", `"unterminated`, "bigint;"} {
		_, err := normalizeType(bad)
		require.ErrorIs(t, err, warehouse.ErrInvalidType, "%q", bad)
	}
}

// Scenario: model files end their query with semicolons and comments; the
// lexer cuts exactly those, and leaves semicolons and comment markers
// inside strings and quoted names alone.
func TestTrimQuery(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"SELECT 1":                        "SELECT 1",
		"SELECT 1;":                       "SELECT 1",
		"SELECT 1 ; ; \n":                 "SELECT 1",
		"SELECT 1 -- done":                "SELECT 1",
		"SELECT 1; -- done\n":             "SELECT 1",
		"SELECT 1 /* a ; */":              "SELECT 1",
		"SELECT ';' AS x;":                "SELECT ';' AS x",
		`SELECT 1 AS "a;--b";`:            `SELECT 1 AS "a;--b"`,
		"SELECT 'it''s -- no' AS x -- c":  "SELECT 'it''s -- no' AS x",
		"SELECT 1 /* /* */ ;":             "SELECT 1",
		"SELECT 'unterminated; -- x":      "SELECT 'unterminated; -- x",
		"SELECT 1; DROP TABLE x":          "SELECT 1; DROP TABLE x",
		"SELECT U&'\\0041;' AS u; -- end": "SELECT U&'\\0041;' AS u",
	} {
		got, err := trimQuery(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, empty := range []string{"", " ;; ", "-- only a comment", "/* c */ ;"} {
		_, err := trimQuery(empty)
		require.ErrorIs(t, err, warehouse.ErrInvalidArgument, "%q", empty)
	}
}

// Scenario: SQL written for the other engines binds $1-style parameters;
// they become ?, with the arguments reordered and repeated to match, and a
// $ inside a string or a quoted name stays.
func TestRewriteParams(t *testing.T) {
	t.Parallel()
	q, args, err := rewriteParams(`SELECT '$1', "$2" FROM t WHERE a = $2 AND b = $1 AND c = $2`, []any{"one", "two"})
	require.NoError(t, err)
	require.Equal(t, `SELECT '$1', "$2" FROM t WHERE a = ? AND b = ? AND c = ?`, q)
	require.Equal(t, []any{"two", "one", "two"}, args)

	q, args, err = rewriteParams("SELECT ? + ?", []any{1, 2})
	require.NoError(t, err)
	require.Equal(t, "SELECT ? + ?", q)
	require.Equal(t, []any{1, 2}, args)

	_, _, err = rewriteParams("SELECT $3", []any{1})
	require.ErrorIs(t, err, warehouse.ErrInvalidArgument)
}

// Scenario: `gapless query` refuses, before Trino sees them, statements
// that are not one read, including those Trino would run inside a
// read-only transaction (SET SESSION, USE, PREPARE, COMMIT, DROP CATALOG).
func TestCheckRead(t *testing.T) {
	t.Parallel()
	for _, read := range []string{
		"SELECT 1",
		"  /* c */ (SELECT 1)",
		"((VALUES 1))",
		"WITH x AS (SELECT 1) SELECT * FROM x",
		"WITH RECURSIVE t(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM t WHERE n < 3) SELECT * FROM t",
		"WITH a AS (SELECT 1), b (x) AS (SELECT 2) (SELECT * FROM a)",
		"VALUES (1, 'a')",
		"TABLE wt.t",
		"SHOW TABLES",
		"SHOW CREATE TABLE wt.t",
		"DESCRIBE wt.t",
		"EXPLAIN SELECT 1",
		"EXPLAIN (TYPE VALIDATE) SELECT 1",
		"EXPLAIN ANALYZE SELECT 1",
		"EXPLAIN ANALYZE VERBOSE SELECT 1",
		"EXPLAIN DELETE FROM t",
		"SELECT 1;",
	} {
		require.NoError(t, checkRead(read), read)
	}
	for _, write := range []string{
		"DELETE FROM t",
		"INSERT INTO t VALUES 1",
		"UPDATE t SET a = 1",
		"MERGE INTO t USING s ON true WHEN MATCHED THEN DELETE",
		"CREATE TABLE t AS SELECT 1 x",
		"DROP TABLE t",
		"ALTER TABLE t ADD COLUMN x bigint",
		"TRUNCATE TABLE t",
		"WITH x AS (SELECT 1 AS one) DELETE FROM t",
		"  /* a comment */ (WITH x AS (SELECT 1) SELECT * FROM x); DROP TABLE t",
		"SELECT 1; DROP TABLE t",
		"EXPLAIN ANALYZE DELETE FROM t",
		"EXPLAIN ANALYZE VERBOSE INSERT INTO t VALUES 1",
		"SET SESSION query_max_run_time = '1h'",
		"RESET SESSION query_max_run_time",
		"USE other.s",
		"PREPARE p FROM SELECT 1",
		"EXECUTE p",
		"EXECUTE IMMEDIATE 'DELETE FROM t'",
		"DEALLOCATE PREPARE p",
		"START TRANSACTION",
		"COMMIT",
		"ROLLBACK",
		"CALL system.runtime.kill_query('x')",
		"DROP CATALOG iceberg",
		"CREATE CATALOG x USING memory",
		"GRANT SELECT ON t TO ROLE r",
		"COMMENT ON TABLE t IS 'x'",
		"ANALYZE t",
		"REFRESH MATERIALIZED VIEW v",
		"SET ROLE admin",
		"COPY t TO '/tmp/x'",
		"42",
		"",
	} {
		err := checkRead(write)
		require.ErrorIs(t, err, warehouse.ErrNotARead, "%q", write)
	}
}

// Scenario: a batch of views defers the check of a query that reads a
// view earlier in the batch; the test is by identifier, not by substring.
func TestMentions(t *testing.T) {
	t.Parallel()
	require.True(t, mentions(`SELECT id FROM "wt"."m000"`, "m000"))
	require.True(t, mentions(`SELECT id FROM wt.M000`, "m000"))
	require.True(t, mentions(`SELECT id FROM "wt"."With ""Quote"""`, `with "quote"`))
	require.False(t, mentions(`SELECT id, no_such_column FROM "wt"."t__v1_next"`, "a"))
	require.False(t, mentions(`SELECT 'm000' AS x`, "m000"))
}

// Scenario: the values a seed writes are rendered as the text their
// column's type reads back (hex for varbinary); a value the engine cannot
// render is an error naming its type.
func TestValueText(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		v    any
		typ  string
		want any
	}{
		{nil, "bigint", nil},
		{"O'Reilly", "varchar", "O'Reilly"},
		{int64(-7), "bigint", "-7"},
		{uint8(7), "integer", "7"},
		{1.5, "double", "1.5"},
		{1e10, "double", "1e+10"},
		{1e10, "decimal(12,2)", "10000000000"},
		{math.Inf(-1), "double", "-Infinity"},
		{true, "boolean", "true"},
		{[]byte{0, 1}, "varbinary", "0001"},
		{"ab", "varbinary", "6162"},
		{time.Date(2024, 1, 2, 3, 4, 5, 600, time.FixedZone("x", 3600)), "timestamp(6)", "2024-01-02 02:04:05.0000006"},
		{time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC), "timestamp(6) with time zone", "2024-01-02 03:04:05 UTC"},
		{time.Date(2024, 1, 2, 0, 0, 0, 0, time.UTC), "date", "2024-01-02"},
	} {
		got, err := valueText(c.v, c.typ)
		require.NoError(t, err, "%v", c.v)
		require.Equal(t, c.want, got, "%v %s", c.v, c.typ)
	}
	_, err := valueText(struct{}{}, "varchar")
	require.Error(t, err)
	_, err = valueText("bad\xff", "varchar")
	require.Error(t, err)
}

// Scenario: a commit refused by a concurrent writer (the messages Trino
// 476 gave two racing MERGEs) is retried; a create that found the table
// there, a syntax error and a plain error are not.
func TestIsCommitConflict(t *testing.T) {
	t.Parallel()
	server := func(name, msg string) error {
		return &trinoclient.ErrQueryFailed{StatusCode: 200, Reason: &trinoclient.ErrTrino{ErrorName: name, Message: msg}}
	}
	require.True(t, isCommitConflict(serverError(server("ICEBERG_COMMIT_ERROR",
		`Failed to commit the transaction during write: Found new conflicting delete files that can apply to records matching (ref(name="ts") >= 1704088800000000)`))))
	require.True(t, isCommitConflict(server("ICEBERG_COMMIT_ERROR", "Failed to commit during write: Found new conflicting delete files")))
	require.False(t, isCommitConflict(server("ICEBERG_COMMIT_ERROR", "Failed to create table s.vw: Table already exists: 's.vw'")))
	require.False(t, isCommitConflict(server("SYNTAX_ERROR", "line 1:1: mismatched input")))
	require.False(t, isCommitConflict(errors.New("ICEBERG_COMMIT_ERROR")))
}
