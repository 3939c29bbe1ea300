package sqlparse_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/sqlparse"
)

// Scenario: a model's query changes and the planner must decide whether
// downstream models need a backfill. Only added projections that cannot
// change any existing column or the row set are non-breaking.
func TestAdditiveOnly(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		old, new string
		want     bool
	}{
		// Additions SQLMesh and gapless both accept.
		{name: "column appended", old: "SELECT a, b FROM t", new: "SELECT a, b, c FROM t", want: true},
		{name: "expression appended", old: "SELECT a, b FROM t", new: "SELECT a, b, b * 2 AS b2 FROM t", want: true},
		{name: "several appended", old: "SELECT a FROM t", new: "SELECT a, b, upper(c) AS uc FROM t", want: true},
		{name: "added in the middle", old: "SELECT a, b FROM t", new: "SELECT a, x, b FROM t", want: true},
		{name: "added first", old: "SELECT a, b FROM t", new: "SELECT x, a, b FROM t", want: true},
		{name: "formatting differs too", old: "select a from t where b>0", new: "SELECT a,\n  c -- new\nFROM t\nWHERE b > 0", want: true},
		{name: "added to a star query", old: "SELECT * FROM t", new: "SELECT *, 1 AS one FROM t", want: true},
		{name: "window function", old: "SELECT a FROM t", new: "SELECT a, row_number() OVER (ORDER BY a) AS rn FROM t", want: true},
		{name: "scalar subquery with an aggregate", old: "SELECT a FROM t", new: "SELECT a, (SELECT max(y) FROM u) AS m FROM t", want: true},
		{name: "scalar macro", old: "SELECT a FROM t", new: "SELECT a, nullif(b, 0) AS nb FROM t", want: true},
		{name: "Postgres scalar idioms", old: "SELECT id FROM t", new: "SELECT id, DATE_TRUNC('day', ts)::date AS day, COALESCE(x, 0) AS x0, name ILIKE 'a%' AS is_a FROM t", want: true},
		{name: "aggregate in a grouped query", old: "SELECT a, sum(x) FROM t GROUP BY a", new: "SELECT a, sum(x), max(y) AS my FROM t GROUP BY a", want: true},
		{name: "aggregate in an aggregate query", old: "SELECT count(*) AS n FROM t", new: "SELECT count(*) AS n, sum(x) AS s FROM t", want: true},
		{name: "appended with positional ORDER BY", old: "SELECT a, b FROM t ORDER BY 2", new: "SELECT a, b, c FROM t ORDER BY 2", want: true},
		{name: "appended with positional GROUP BY", old: "SELECT a, sum(x) FROM t GROUP BY 1", new: "SELECT a, sum(x), max(y) FROM t GROUP BY 1", want: true},
		{name: "appended with DISTINCT ON", old: "SELECT DISTINCT ON (k) k, v FROM t ORDER BY k, ts DESC", new: "SELECT DISTINCT ON (k) k, v, ts FROM t ORDER BY k, ts DESC", want: true},
		{name: "appended with ORDER BY ALL", old: "SELECT a, b FROM t ORDER BY ALL LIMIT 3", new: "SELECT a, b, c FROM t ORDER BY ALL LIMIT 3", want: true},
		{name: "fresh alias beside an ORDER BY", old: "SELECT a FROM t ORDER BY b LIMIT 5", new: "SELECT a, -b AS nb FROM t ORDER BY b LIMIT 5", want: true},
		{name: "pass-through column also used in WHERE", old: "SELECT a FROM t WHERE b > 0", new: "SELECT a, b FROM t WHERE b > 0", want: true},
		{name: "pass-through qualified column", old: "SELECT t.a FROM t WHERE b > 0", new: "SELECT t.a, t.b FROM t WHERE b > 0", want: true},

		// Not additive.
		{name: "identical", old: "SELECT a FROM t", new: "SELECT a FROM t", want: false},
		{name: "identical up to formatting", old: "SELECT a FROM t", new: "select  a\nfrom t -- same", want: false},
		{name: "changed WHERE", old: "SELECT a FROM t WHERE b > 0", new: "SELECT a, c FROM t WHERE b > 1", want: false},
		{name: "changed FROM", old: "SELECT a FROM t", new: "SELECT a, c FROM u", want: false},
		{name: "changed LIMIT", old: "SELECT a FROM t LIMIT 5", new: "SELECT a, c FROM t LIMIT 6", want: false},
		{name: "changed existing expression", old: "SELECT a, b + 1 AS b1 FROM t", new: "SELECT a, b + 2 AS b1, c FROM t", want: false},
		{name: "changed existing expression only", old: "SELECT a, b + 1 AS b1 FROM t", new: "SELECT a, b + 2 AS b1 FROM t", want: false},
		{name: "renamed", old: "SELECT a AS x FROM t", new: "SELECT a AS y, c FROM t", want: false},
		{name: "reordered", old: "SELECT a, b FROM t", new: "SELECT b, a FROM t", want: false},
		{name: "reordered and added", old: "SELECT a, b FROM t", new: "SELECT b, a, c FROM t", want: false},
		{name: "removed", old: "SELECT a, b FROM t", new: "SELECT a FROM t", want: false},
		{name: "removed and added", old: "SELECT a, b FROM t", new: "SELECT a, c FROM t", want: false},
		{name: "added CTE", old: "SELECT a FROM t", new: "WITH x AS (SELECT 1) SELECT a, b FROM t", want: false},
		{name: "projection added inside a CTE", old: "WITH x AS (SELECT a FROM t) SELECT a FROM x", new: "WITH x AS (SELECT a, b FROM t) SELECT a FROM x", want: false},
		{name: "added DISTINCT", old: "SELECT a FROM t", new: "SELECT DISTINCT a, b FROM t", want: false},
		{name: "SELECT DISTINCT", old: "SELECT DISTINCT a FROM t", new: "SELECT DISTINCT a, b FROM t", want: false},
		{name: "GROUP BY ALL", old: "SELECT a, sum(x) FROM t GROUP BY ALL", new: "SELECT a, sum(x), b FROM t GROUP BY ALL", want: false},
		{name: "aggregate turns rows into one", old: "SELECT a FROM t", new: "SELECT a, count(*) AS n FROM t", want: false},
		{name: "aggregate macro turns rows into one", old: "SELECT a FROM t", new: "SELECT a, json_group_array(b) AS bs FROM t", want: false},
		{name: "unnest multiplies rows", old: "SELECT a FROM t", new: "SELECT a, unnest(tags) AS tag FROM t", want: false},
		{name: "generate_series may multiply rows", old: "SELECT a FROM t", new: "SELECT a, generate_series(1, 3) AS g FROM t", want: false},
		{name: "unknown function", old: "SELECT a FROM t", new: "SELECT a, my_udf(b) AS u FROM t", want: false},
		{name: "user-schema function", old: "SELECT a FROM t", new: "SELECT a, util.lower(b) AS u FROM t", want: false},
		{name: "inserted before a positional ORDER BY", old: "SELECT a, b FROM t ORDER BY 2 LIMIT 3", new: "SELECT a, c, b FROM t ORDER BY 2 LIMIT 3", want: false},
		{name: "inserted before a positional GROUP BY", old: "SELECT a, b, sum(x) FROM t GROUP BY 1, 2", new: "SELECT c, a, b, sum(x) FROM t GROUP BY 1, 2", want: false},
		{name: "inserted before ORDER BY ALL", old: "SELECT a, b FROM t ORDER BY ALL LIMIT 3", new: "SELECT c, a, b FROM t ORDER BY ALL LIMIT 3", want: false},
		{name: "new alias captures a WHERE reference", old: "SELECT a FROM t WHERE b > 0", new: "SELECT a, 1 AS b FROM t WHERE b > 0", want: false},
		{name: "new alias captures an ORDER BY reference", old: "SELECT a FROM t ORDER BY b LIMIT 5", new: "SELECT a, -b AS b FROM t ORDER BY b LIMIT 5", want: false},
		{name: "renaming pass-through captures a reference", old: "SELECT a FROM t WHERE b > 0", new: "SELECT a, c AS b FROM t WHERE b > 0", want: false},
		{name: "set operation", old: "SELECT a FROM t UNION ALL SELECT a FROM u", new: "SELECT a, b FROM t UNION ALL SELECT a, b FROM u", want: false},
		{name: "VALUES", old: "VALUES (1)", new: "VALUES (1, 2)", want: false},
	}
	ctx := context.Background()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			oldQ, err := shared.Parse(ctx, tc.old)
			require.NoError(t, err)
			newQ, err := shared.Parse(ctx, tc.new)
			require.NoError(t, err)
			require.Equal(t, tc.want, sqlparse.AdditiveOnly(oldQ, newQ))
			if tc.want {
				require.False(t, sqlparse.AdditiveOnly(newQ, oldQ), "removing what was added is breaking")
			}
		})
	}
}

func TestAdditiveOnlyNil(t *testing.T) {
	t.Parallel()
	q, err := shared.Parse(context.Background(), "SELECT a FROM t")
	require.NoError(t, err)
	require.False(t, sqlparse.AdditiveOnly(nil, q))
	require.False(t, sqlparse.AdditiveOnly(q, nil))
	require.False(t, sqlparse.AdditiveOnly(nil, nil))
	require.False(t, sqlparse.AdditiveOnly(&sqlparse.Query{}, q), "a Query not built by Parse is never additive")
}

// Scenario: everyday scalar expressions added to a model stay
// non-breaking; the function catalog must know them.
func TestAdditiveOnlyEverydayScalars(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	oldQ, err := shared.Parse(ctx, "SELECT id FROM t")
	require.NoError(t, err)
	for _, expr := range []string{
		"now()", "current_timestamp", "current_date", "concat(a, b)", "a || b", "regexp_replace(a, 'x', 'y')",
		"md5(a)", "extract(year FROM ts)", "strftime(ts, '%Y')", "round(x, 2)", "abs(x)", "CASE WHEN a THEN 1 ELSE 0 END",
		"a LIKE 'x%'", "a NOT ILIKE 'x%'", "[1, 2]", "{'k': 1}", "list_transform(l, v -> v + 1)", "x IN (1, 2)",
		"greatest(a, b)", "coalesce(a, b)", "lower(trim(a))", "length(a)", "split_part(a, ',', 1)", "try_cast(a AS INT)",
		"a::timestamptz AT TIME ZONE 'UTC'", "date_diff('day', a, b)", "a IS DISTINCT FROM b", "payload->>'kind'",
	} {
		newQ, err := shared.Parse(ctx, "SELECT id, "+expr+" AS added_col FROM t")
		require.NoError(t, err, expr)
		require.True(t, sqlparse.AdditiveOnly(oldQ, newQ), expr)
	}
}
