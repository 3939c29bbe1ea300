package sqlparse_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/sqlparse"
)

func tableNames(q *sqlparse.Query) []string {
	out := []string{}
	for _, t := range q.Tables {
		out = append(out, t.String())
	}
	return out
}

func functionNames(q *sqlparse.Query) []string {
	out := []string{}
	for _, f := range q.TableFunctions {
		out = append(out, f.Name)
	}
	return out
}

func filePaths(q *sqlparse.Query) []string {
	out := []string{}
	for _, f := range q.Files {
		out = append(out, f.Path)
	}
	return out
}

type tablesCase struct {
	name   string
	sql    string
	tables []string
	funcs  []string
	files  []string
}

// tablesCases is shared by TestParseTables and TestCanonicalKeepsTables.
var tablesCases = []tablesCase{
	{name: "simple FROM", sql: "SELECT a FROM t", tables: []string{"t"}},
	{name: "FROM-first shorthand", sql: "FROM t", tables: []string{"t"}},
	{name: "trailing semicolon", sql: "SELECT a FROM t;", tables: []string{"t"}},
	{name: "schema-qualified", sql: "SELECT * FROM raw.events", tables: []string{"raw.events"}},
	{name: "catalog-qualified", sql: "SELECT * FROM wh.raw.events", tables: []string{"wh.raw.events"}},
	{name: "quoted identifiers are lower-cased", sql: `SELECT * FROM "Schema"."T"`, tables: []string{"schema.t"}},
	{name: "mixed case", sql: "SELECT * FROM Sales.Orders", tables: []string{"sales.orders"}},
	{
		name:   "joins",
		sql:    "SELECT * FROM a JOIN b ON a.id = b.id LEFT JOIN s.c USING (id) CROSS JOIN d FULL OUTER JOIN e ON true",
		tables: []string{"a", "b", "d", "e", "s.c"},
	},
	{name: "duplicates collapse", sql: "SELECT * FROM t JOIN t AS t2 ON t.id = t2.id", tables: []string{"t"}},
	{name: "subquery in FROM", sql: "SELECT * FROM (SELECT * FROM inner_t) x", tables: []string{"inner_t"}},
	{name: "subquery in WHERE", sql: "SELECT * FROM t WHERE a > (SELECT max(a) FROM u)", tables: []string{"t", "u"}},
	{name: "subquery in SELECT", sql: "SELECT (SELECT count(*) FROM u WHERE u.id = t.id) AS n FROM t", tables: []string{"t", "u"}},
	{name: "IN subquery", sql: "SELECT * FROM t WHERE id IN (SELECT id FROM u)", tables: []string{"t", "u"}},
	{name: "NOT IN subquery", sql: "SELECT * FROM t WHERE id NOT IN (SELECT id FROM u)", tables: []string{"t", "u"}},
	{name: "EXISTS", sql: "SELECT * FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.id = t.id)", tables: []string{"t", "u"}},
	{name: "NOT EXISTS", sql: "SELECT * FROM t WHERE NOT EXISTS (SELECT 1 FROM u WHERE u.id = t.id)", tables: []string{"t", "u"}},
	{name: "ANY subquery", sql: "SELECT * FROM t WHERE a = ANY (SELECT a FROM u)", tables: []string{"t", "u"}},
	{name: "subquery in JOIN condition", sql: "SELECT * FROM t JOIN u ON u.id IN (SELECT id FROM w)", tables: []string{"t", "u", "w"}},
	{
		name:   "subqueries in HAVING, ORDER BY and CASE",
		sql:    "SELECT a, CASE WHEN a > 0 THEN (SELECT 1 FROM c LIMIT 1) END AS x, count(*) FROM t GROUP BY a HAVING count(*) > (SELECT min(n) FROM h) ORDER BY (SELECT 1 FROM o LIMIT 1)",
		tables: []string{"c", "h", "o", "t"},
	},
	{name: "LATERAL", sql: "SELECT * FROM t, LATERAL (SELECT * FROM u WHERE u.id = t.id) l", tables: []string{"t", "u"}},
	{name: "UNION", sql: "SELECT a FROM t UNION SELECT a FROM u", tables: []string{"t", "u"}},
	{name: "UNION ALL BY NAME", sql: "SELECT a FROM t UNION ALL BY NAME SELECT a FROM u", tables: []string{"t", "u"}},
	{name: "INTERSECT and EXCEPT", sql: "SELECT a FROM t INTERSECT SELECT a FROM u EXCEPT SELECT a FROM w", tables: []string{"t", "u", "w"}},
	{name: "CTE", sql: "WITH x AS (SELECT * FROM src) SELECT * FROM x", tables: []string{"src"}},
	{name: "CTE chain", sql: "WITH a AS (SELECT * FROM src), b AS (SELECT * FROM a) SELECT * FROM b", tables: []string{"src"}},
	{
		name:   "nested CTEs",
		sql:    "WITH a AS (WITH b AS (SELECT * FROM src) SELECT * FROM b) SELECT * FROM a",
		tables: []string{"src"},
	},
	{
		name:   "nested CTE name is not visible outside its WITH",
		sql:    "WITH a AS (WITH b AS (SELECT * FROM src) SELECT * FROM b) SELECT * FROM a JOIN b ON true",
		tables: []string{"b", "src"},
	},
	{
		name:   "CTE shadows a real table name",
		sql:    "WITH orders AS (SELECT * FROM raw.orders WHERE NOT deleted) SELECT * FROM orders",
		tables: []string{"raw.orders"},
	},
	{
		name:   "same name outside the CTE scope is a real table",
		sql:    "SELECT * FROM (WITH x AS (SELECT 1 AS id) SELECT * FROM x) s JOIN x ON x.id = s.id",
		tables: []string{"x"},
	},
	{
		name:   "CTE body does not see itself without RECURSIVE",
		sql:    "WITH t AS (SELECT * FROM t WHERE ok) SELECT * FROM t",
		tables: []string{"t"},
	},
	{
		name:   "CTE does not see a later CTE",
		sql:    "WITH a AS (SELECT * FROM b), b AS (SELECT 1) SELECT * FROM a",
		tables: []string{"b"},
	},
	{name: "qualified name is never a CTE", sql: "WITH t AS (SELECT 1) SELECT * FROM t, s.t", tables: []string{"s.t"}},
	{name: "CTE names match case-insensitively", sql: "WITH Foo AS (SELECT 1) SELECT * FROM FOO", tables: []string{}},
	{
		name:   "CTE on a set operation covers both sides",
		sql:    "WITH x AS (SELECT * FROM src) SELECT * FROM x UNION ALL SELECT * FROM x",
		tables: []string{"src"},
	},
	{
		name:   "CTE in a subquery expression",
		sql:    "SELECT * FROM t WHERE id IN (WITH k AS (SELECT id FROM keys) SELECT id FROM k)",
		tables: []string{"keys", "t"},
	},
	{
		name:   "recursive CTE",
		sql:    "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 10) SELECT * FROM r",
		tables: []string{},
	},
	{
		name: "recursive CTE over a table",
		sql: `WITH RECURSIVE tree AS (
			SELECT id, parent FROM nodes WHERE parent IS NULL
			UNION ALL
			SELECT n.id, n.parent FROM nodes n JOIN tree ON n.parent = tree.id
		) SELECT * FROM tree`,
		tables: []string{"nodes"},
	},
	{name: "VALUES", sql: "VALUES (1, 'a'), (2, 'b')", tables: []string{}},
	{name: "VALUES joined to a table", sql: "SELECT * FROM (VALUES (1), (2)) v(x) JOIN t ON t.x = v.x", tables: []string{"t"}},
	{name: "no FROM", sql: "SELECT 1 AS one", tables: []string{}},
	{
		name:   "table function is not a table",
		sql:    "SELECT * FROM read_csv('data.csv') d JOIN t USING (id)",
		tables: []string{"t"},
		funcs:  []string{"read_csv"},
	},
	{
		name:   "table function argument subquery",
		sql:    "SELECT * FROM unnest((SELECT list(x) FROM src))",
		tables: []string{"src"},
		funcs:  []string{"unnest"},
	},
	{name: "range", sql: "SELECT * FROM range(10) r, generate_series(1, 3) g", tables: []string{}, funcs: []string{"generate_series", "range"}},
	{name: "file literal", sql: "SELECT * FROM 'data/events.parquet'", tables: []string{}, files: []string{"data/events.parquet"}},
	{name: "PIVOT in FROM", sql: "SELECT * FROM t PIVOT (sum(v) FOR k IN ('a', 'b'))", tables: []string{"t"}},
	{name: "PIVOT statement with IN list", sql: "PIVOT t ON k IN ('a', 'b') USING sum(v)", tables: []string{"t"}},
	{
		name:   "macro placeholder self-reference",
		sql:    "SELECT * FROM __gapless_macro_this_model WHERE ts < __gapless_macro_start_ts UNION ALL SELECT * FROM src WHERE ts >= __gapless_macro_start_ts",
		tables: []string{"src"},
	},
	{
		name:   "qualified macro placeholder",
		sql:    "SELECT * FROM db.__gapless_macro_this_model JOIN src USING (id)",
		tables: []string{"src"},
	},
}

func TestParseTables(t *testing.T) {
	t.Parallel()
	for _, tc := range tablesCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			q, err := shared.Parse(context.Background(), tc.sql)
			require.NoError(t, err)
			require.Equal(t, tc.tables, tableNames(q))
			require.Equal(t, nonNil(tc.funcs), functionNames(q))
			require.Equal(t, nonNil(tc.files), filePaths(q))
		})
	}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// Scenario: a model file reports an unknown table; the message must point
// at the first place the table is written, in the text that was parsed.
func TestParseOffsets(t *testing.T) {
	t.Parallel()
	src := "SELECT '€😀' AS x\nFROM Raw.Events e\nJOIN raw.events f ON true\nJOIN \"Users\" u ON true\nJOIN read_csv('x.csv') c ON true\nJOIN 'y.parquet' p ON true"
	q, err := shared.Parse(context.Background(), src)
	require.NoError(t, err)
	require.Len(t, q.Tables, 2)
	require.Equal(t, sqlparse.TableRef{Name: "users", Offset: strings.Index(src, `"Users"`)}, q.Tables[0])
	require.Equal(t, sqlparse.TableRef{Schema: "raw", Name: "events", Offset: strings.Index(src, "Raw.Events")}, q.Tables[1])
	require.Equal(t, []sqlparse.FunctionRef{{Name: "read_csv", Offset: strings.Index(src, "read_csv")}}, q.TableFunctions)
	require.Equal(t, []sqlparse.FileRef{{Path: "y.parquet", Offset: strings.Index(src, "'y.parquet'")}}, q.Files)
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		sql  string
		is   error // sentinel, or nil for *SyntaxError
		// at is the text the syntax error's offset must point at
		// ("" means end of input); ignored for sentinels.
		at string
	}{
		{name: "misspelt keyword", sql: "SELEC a FROM t", at: "SELEC a FROM t"},
		{name: "bad token mid-query", sql: "SELECT a FROM t WHERE a = = 1", at: "= 1"},
		{name: "unterminated query", sql: "SELECT a FROM t WHERE", at: ""},
		{name: "bad token after multibyte text", sql: "SELECT 'é€😀' AS x FROM t WHERE WHERE", at: "WHERE"},
		{name: "multibyte text at end of input", sql: "SELECT 'é€😀' AS x FROM t WHERE", at: ""},
		{name: "multiple statements", sql: "SELECT 1; SELECT 2", is: sqlparse.ErrMultipleStatements},
		{name: "query then DDL", sql: "SELECT 1; CREATE TABLE t (a INT)", is: sqlparse.ErrNotAQuery},
		{name: "INSERT", sql: "INSERT INTO t VALUES (1)", is: sqlparse.ErrNotAQuery},
		{name: "CREATE TABLE AS", sql: "CREATE TABLE t AS SELECT 1", is: sqlparse.ErrNotAQuery},
		{name: "PRAGMA", sql: "PRAGMA version", is: sqlparse.ErrNotAQuery},
		{name: "EXPLAIN", sql: "EXPLAIN SELECT 1", is: sqlparse.ErrNotAQuery},
		{name: "DESCRIBE", sql: "DESCRIBE t", is: sqlparse.ErrNotAQuery},
		{name: "SHOW", sql: "SHOW TABLES", is: sqlparse.ErrNotAQuery},
		{name: "SUMMARIZE", sql: "SUMMARIZE t", is: sqlparse.ErrNotAQuery},
		{name: "PIVOT without IN list", sql: "PIVOT t ON k USING sum(v)", is: sqlparse.ErrNotAQuery},
		{name: "empty", sql: "", is: sqlparse.ErrEmpty},
		{name: "whitespace", sql: " \n\t ", is: sqlparse.ErrEmpty},
		{name: "comment only", sql: "-- nothing here\n/* nor here */", is: sqlparse.ErrEmpty},
		{name: "infinite literal", sql: "SELECT 1e999999 AS x", is: sqlparse.ErrUnsupported},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			q, err := shared.Parse(context.Background(), tc.sql)
			require.Error(t, err)
			require.Nil(t, q)
			if tc.is != nil {
				require.ErrorIs(t, err, tc.is)
				var syn *sqlparse.SyntaxError
				require.False(t, errors.As(err, &syn), "sentinel errors are not syntax errors: %v", err)
				return
			}
			var syn *sqlparse.SyntaxError
			require.ErrorAs(t, err, &syn)
			require.NotEmpty(t, syn.Message)
			if tc.at == "" {
				require.Equal(t, len(tc.sql), syn.Offset)
			} else {
				require.Equal(t, strings.LastIndex(tc.sql, tc.at), syn.Offset, "error: %v", err)
			}
		})
	}
}

// Scenario: input that DuckDB would read as something else (a C string cut
// at NUL, bytes that are not text) is refused before DuckDB sees it, so no
// dependency after the bad byte can go missing.
func TestParseRejectsBadText(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		sql    string
		offset int
	}{
		"NUL byte":     {sql: "SELECT * FROM a\x00 JOIN b ON true", offset: 15},
		"invalid UTF8": {sql: "SELECT 'ok', '\xff' FROM t", offset: 14},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := shared.Parse(context.Background(), tc.sql)
			var syn *sqlparse.SyntaxError
			require.ErrorAs(t, err, &syn)
			require.Equal(t, tc.offset, syn.Offset)
		})
	}
}

func TestSyntaxErrorPosition(t *testing.T) {
	t.Parallel()
	src := "SELECT a,\n       b\nFROM t\nWHERE é = = 1"
	_, err := shared.Parse(context.Background(), src)
	var syn *sqlparse.SyntaxError
	require.ErrorAs(t, err, &syn)
	line, col := syn.Position(src)
	require.Equal(t, 4, line)
	require.Equal(t, 11, col) // the second '=', counting é as one column
	require.Contains(t, syn.Error(), "syntax error")

	line, col = (&sqlparse.SyntaxError{Offset: -1}).Position(src)
	require.Zero(t, line)
	require.Zero(t, col)
}

func TestCanonical(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	canon := func(sql string) string {
		t.Helper()
		q, err := shared.Parse(ctx, sql)
		require.NoError(t, err)
		return q.Canonical
	}
	require.Equal(t, canon("SELECT a FROM t"), canon("select a  from t -- c"))
	require.Equal(t, canon("SELECT a FROM t WHERE b > 1"), canon("/* header */\nselect\n\ta\nFROM   t\nwhere b>1;"))
	require.Equal(t, "SELECT a FROM t", canon("select a  from t -- c"))
	require.NotEqual(t, canon("SELECT a FROM t"), canon("SELECT b FROM t"))
	require.NotEqual(t, canon("SELECT a FROM t"), canon("SELECT a FROM t WHERE true"))
	require.NotEqual(t, canon("SELECT 'x' AS a FROM t"), canon("SELECT 'X' AS a FROM t"), "string literals keep their case")
	require.NotEqual(t, canon("SELECT 1.0 AS a"), canon("SELECT 1.00 AS a"), "decimal scale is kept")
}

// Scenario: the canonical text is what fingerprints hash; parsing it again
// must find the same dependencies, or a fingerprint could hide one.
func TestCanonicalKeepsTables(t *testing.T) {
	t.Parallel()
	for _, tc := range tablesCases {
		if len(tc.files) > 0 {
			continue // the canonical form quotes file literals as identifiers
		}
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			q, err := shared.Parse(context.Background(), tc.sql)
			require.NoError(t, err)
			again, err := shared.Parse(context.Background(), q.Canonical)
			require.NoError(t, err, "canonical: %s", q.Canonical)
			require.Equal(t, tableNames(q), tableNames(again), "canonical: %s", q.Canonical)
		})
	}
}

func TestProjections(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q, err := shared.Parse(ctx, "SELECT a, t.b, c + 1 AS d, count(*), 'lit' FROM t GROUP BY ALL")
	require.NoError(t, err)
	names := []string{}
	for _, p := range q.Projections {
		names = append(names, p.Name)
		require.NotEmpty(t, p.Canonical)
		require.NotContains(t, p.Canonical, "query_location")
	}
	require.Equal(t, []string{"a", "b", "d", "", ""}, names)
	require.False(t, q.Star)
	require.False(t, q.SetOperation)

	// The same expression compares equal whatever its layout or alias.
	other, err := shared.Parse(ctx, "select C+1 as renamed from t")
	require.NoError(t, err)
	spaced, err := shared.Parse(ctx, "select c  +  1 as e from t")
	require.NoError(t, err)
	require.Equal(t, q.Projections[2].Canonical, spaced.Projections[0].Canonical)
	require.NotEqual(t, q.Projections[2].Canonical, other.Projections[0].Canonical, "identifier case is kept")

	star, err := shared.Parse(ctx, "SELECT t.*, x FROM t")
	require.NoError(t, err)
	require.True(t, star.Star)
	require.Equal(t, "x", star.Projections[1].Name)

	union, err := shared.Parse(ctx, "SELECT a AS first FROM t UNION ALL SELECT b AS second FROM u")
	require.NoError(t, err)
	require.True(t, union.SetOperation)
	require.Len(t, union.Projections, 1)
	require.Equal(t, "first", union.Projections[0].Name)
}

// Scenario: PostgreSQL models go through the same parser; their usual
// idioms must parse and yield their tables.
func TestPostgresDialect(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		sql    string
		tables []string
	}{
		{name: ":: casts", sql: "SELECT id::text, amount::numeric(12, 2), '2024-01-01'::date FROM public.orders", tables: []string{"public.orders"}},
		{name: "ILIKE", sql: "SELECT * FROM users WHERE email ILIKE '%@example.com'", tables: []string{"users"}},
		{name: "DATE_TRUNC", sql: "SELECT DATE_TRUNC('day', ts) AS day, count(*) FROM events GROUP BY 1", tables: []string{"events"}},
		{name: "INTERVAL", sql: "SELECT * FROM events WHERE ts > now() - INTERVAL '1 day'", tables: []string{"events"}},
		{name: "COALESCE and NULLIF", sql: "SELECT COALESCE(a, b, 0), NULLIF(c, '') FROM t", tables: []string{"t"}},
		{
			name:   "window functions",
			sql:    "SELECT id, row_number() OVER (PARTITION BY user_id ORDER BY ts DESC) AS rn, sum(amount) OVER (ORDER BY ts ROWS BETWEEN 6 PRECEDING AND CURRENT ROW) FROM payments",
			tables: []string{"payments"},
		},
		{
			name:   "LATERAL join",
			sql:    "SELECT u.id, l.ts FROM users u LEFT JOIN LATERAL (SELECT ts FROM logins WHERE logins.user_id = u.id ORDER BY ts DESC LIMIT 1) l ON true",
			tables: []string{"logins", "users"},
		},
		{name: "DISTINCT ON", sql: "SELECT DISTINCT ON (user_id) user_id, ts FROM logins ORDER BY user_id, ts DESC", tables: []string{"logins"}},
		{name: "FILTER clause", sql: "SELECT count(*) FILTER (WHERE ok) FROM checks", tables: []string{"checks"}},
		{name: "dollar quoting", sql: "SELECT $$it's$$ AS s FROM t", tables: []string{"t"}},
		{name: "ANY(ARRAY[...])", sql: "SELECT * FROM t WHERE status = ANY(ARRAY['a', 'b'])", tables: []string{"t"}},
		{name: "jsonb operators", sql: "SELECT payload->>'kind' AS kind FROM raw.webhooks WHERE payload->'meta' IS NOT NULL", tables: []string{"raw.webhooks"}},
		{name: "EXTRACT", sql: "SELECT EXTRACT(EPOCH FROM ts) FROM events", tables: []string{"events"}},
		{name: "generate_series in FROM", sql: "SELECT d FROM generate_series('2024-01-01'::date, '2024-02-01'::date, INTERVAL '1 day') AS g(d) LEFT JOIN t ON t.day = g.d", tables: []string{"t"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			q, err := shared.Parse(context.Background(), tc.sql)
			require.NoError(t, err)
			require.Equal(t, tc.tables, tableNames(q))
		})
	}
}

// Scenario: a plan parses many models at once; a shared Parser must give
// every goroutine the same answer.
func TestParseConcurrent(t *testing.T) {
	t.Parallel()
	const workers, perWorker = 8, 25
	src := "WITH x AS (SELECT * FROM src) SELECT a, b FROM x JOIN dim USING (id) WHERE a IN (SELECT a FROM allow)"
	want, err := shared.Parse(context.Background(), src)
	require.NoError(t, err)

	var wg sync.WaitGroup
	errs := make(chan error, workers*perWorker)
	results := make(chan *sqlparse.Query, workers*perWorker)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range perWorker {
				q, err := shared.Parse(context.Background(), src)
				if err != nil {
					errs <- err
					continue
				}
				results <- q
			}
		}()
	}
	wg.Wait()
	close(errs)
	close(results)
	for err := range errs {
		require.NoError(t, err)
	}
	n := 0
	for q := range results {
		require.Equal(t, want, q)
		n++
	}
	require.Equal(t, workers*perWorker, n)
}

func TestParseCanceledContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := shared.Parse(ctx, "SELECT 1")
	require.ErrorIs(t, err, context.Canceled)
}

func TestParseAfterClose(t *testing.T) {
	t.Parallel()
	p, err := sqlparse.Open()
	require.NoError(t, err)
	require.NoError(t, p.Close())
	_, err = p.Parse(context.Background(), "SELECT 1")
	require.Error(t, err)
}

// benchModel is a realistic incremental model: CTEs, joins, a window, a
// subquery filter and macro placeholders.
const benchModel = `
WITH sessions AS (
  SELECT user_id, session_id, min(ts) AS started_at, max(ts) AS ended_at, count(*) AS events
  FROM raw.events
  WHERE ts >= __gapless_macro_start_ts AND ts < __gapless_macro_end_ts
  GROUP BY user_id, session_id
), enriched AS (
  SELECT s.*, u.country, u.plan,
         row_number() OVER (PARTITION BY s.user_id ORDER BY s.started_at) AS session_number
  FROM sessions s
  JOIN dim.users u ON u.id = s.user_id
  LEFT JOIN dim.plans p ON p.name = u.plan
)
SELECT user_id, session_id, started_at, ended_at, events, country, plan, session_number,
       date_trunc('day', started_at) AS day,
       CASE WHEN events > 100 THEN 'heavy' WHEN events > 10 THEN 'normal' ELSE 'light' END AS bucket
FROM enriched
WHERE user_id NOT IN (SELECT user_id FROM ops.blocked_users)
  AND started_at::date BETWEEN DATE '2020-01-01' AND DATE '2100-01-01'
`

func BenchmarkParse(b *testing.B) {
	ctx := context.Background()
	for b.Loop() {
		if _, err := shared.Parse(ctx, benchModel); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseParallel(b *testing.B) {
	ctx := context.Background()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := shared.Parse(ctx, benchModel); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// Scenario: a generated or malicious model nests without bound. DuckDB's
// parser must refuse it with an error instead of exhausting the stack.
func TestParseDeepNesting(t *testing.T) {
	t.Parallel()
	for _, n := range []int{100, 100_000} {
		for name, src := range map[string]string{
			"parentheses": "SELECT " + strings.Repeat("(", n) + "1" + strings.Repeat(")", n),
			"subqueries":  strings.Repeat("SELECT * FROM (", n) + "SELECT * FROM t" + strings.Repeat(")", n),
			"operators":   "SELECT 1" + strings.Repeat(" + 1", n),
		} {
			q, err := shared.Parse(context.Background(), src)
			if n == 100 {
				require.NoError(t, err, name)
				continue
			}
			require.Nil(t, q, name)
			var syn *sqlparse.SyntaxError
			require.ErrorAs(t, err, &syn, name)
		}
	}
}
