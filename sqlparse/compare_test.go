package sqlparse_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/sqlparse"
)

// Scenario: a model's query changes and the plan must say why the change is
// breaking or not, and which output columns it touches, so that an operator's
// category choice can be checked against what the children read.
func TestCompare(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, old, new string
		want           sqlparse.Comparison
	}{
		{name: "appended", old: "SELECT a FROM t", new: "SELECT a, b FROM t",
			want: sqlparse.Comparison{Additive: true, Reason: "adds column b", Added: []string{"b"}}},
		{name: "two appended", old: "SELECT a FROM t", new: "SELECT a, b, c + 1 AS c1 FROM t",
			want: sqlparse.Comparison{Additive: true, Reason: "adds columns b and c1", Added: []string{"b", "c1"}}},
		{name: "edited projection", old: "SELECT a, sum(x) AS revenue FROM t GROUP BY ALL", new: "SELECT a, sum(x * 2) AS revenue FROM t GROUP BY ALL",
			want: sqlparse.Comparison{Reason: "column revenue changes", Changed: []string{"revenue"}}},
		{name: "removed", old: "SELECT a, b FROM t", new: "SELECT a FROM t",
			want: sqlparse.Comparison{Reason: "column b is removed", Removed: []string{"b"}}},
		{name: "renamed", old: "SELECT a AS x FROM t", new: "SELECT a AS y FROM t",
			want: sqlparse.Comparison{Reason: "column x is renamed to y", Removed: []string{"x"}, Added: []string{"y"}}},
		{name: "removed and added", old: "SELECT a, b FROM t", new: "SELECT a, c FROM t",
			want: sqlparse.Comparison{Reason: "column b is removed; adds column c", Removed: []string{"b"}, Added: []string{"c"}}},
		{name: "reordered", old: "SELECT a, b FROM t", new: "SELECT b, a FROM t",
			want: sqlparse.Comparison{Reason: "columns are reordered"}},
		{name: "reordered under a positional GROUP BY", old: "SELECT a, b, count(*) AS n FROM t GROUP BY 1, 2", new: "SELECT b, a, count(*) AS n FROM t GROUP BY 1, 2",
			want: sqlparse.Comparison{AllChanged: true, Reason: "columns are reordered, and GROUP BY, ORDER BY or DISTINCT ON refers to them by position"}},
		{name: "WHERE", old: "SELECT a FROM t WHERE b > 0", new: "SELECT a FROM t WHERE b > 1",
			want: sqlparse.Comparison{AllChanged: true, Reason: "the WHERE clause changes"}},
		{name: "FROM and WHERE", old: "SELECT a FROM t WHERE b > 0", new: "SELECT a, c FROM u WHERE b > 1",
			want: sqlparse.Comparison{AllChanged: true, Reason: "the FROM and WHERE clauses change"}},
		{name: "CTE, ORDER BY and LIMIT", old: "SELECT a FROM t ORDER BY a LIMIT 5", new: "WITH u AS (SELECT 1) SELECT a FROM t ORDER BY a DESC LIMIT 6",
			want: sqlparse.Comparison{AllChanged: true, Reason: "the WITH, ORDER BY and LIMIT clauses change"}},
		{name: "non-aggregate under GROUP BY ALL", old: "SELECT a, sum(x) AS s FROM t GROUP BY ALL", new: "SELECT a, sum(x) AS s, b FROM t GROUP BY ALL",
			want: sqlparse.Comparison{AllChanged: true, Added: []string{"b"}, Reason: "adds column b under GROUP BY ALL, which then also groups by it"}},
		{name: "aggregate under GROUP BY ALL", old: "SELECT a, sum(x) AS s FROM t GROUP BY ALL", new: "SELECT a, sum(x) AS s, max(x) AS biggest FROM t GROUP BY ALL",
			want: sqlparse.Comparison{Added: []string{"biggest"}, Reason: "adds column biggest under GROUP BY ALL, where gapless counts every added column as breaking"}},
		{name: "under SELECT DISTINCT", old: "SELECT DISTINCT a FROM t", new: "SELECT DISTINCT a, b FROM t",
			want: sqlparse.Comparison{AllChanged: true, Added: []string{"b"}, Reason: "adds column b under SELECT DISTINCT, which changes which rows are distinct"}},
		{name: "set-returning", old: "SELECT a FROM t", new: "SELECT a, unnest(tags) AS tag FROM t",
			want: sqlparse.Comparison{AllChanged: true, Added: []string{"tag"}, Reason: "column tag calls a set-returning function, which changes the rows"}},
		{name: "aggregate collapses rows", old: "SELECT a FROM t", new: "SELECT a, count(*) AS n FROM t",
			want: sqlparse.Comparison{AllChanged: true, Added: []string{"n"}, Reason: "column n aggregates a query that did not, which collapses its rows"}},
		{name: "unknown function", old: "SELECT a FROM t", new: "SELECT a, my_udf(b) AS u FROM t",
			want: sqlparse.Comparison{AllChanged: true, Added: []string{"u"}, Reason: "column u calls a function gapless cannot classify (it may aggregate or return sets)"}},
		{name: "captured reference", old: "SELECT a FROM t WHERE b > 0", new: "SELECT a, 1 AS b FROM t WHERE b > 0",
			want: sqlparse.Comparison{AllChanged: true, Added: []string{"b"}, Reason: "column b takes a name the query already refers to, which changes what that reference reads"}},
		{name: "inserted before a positional ORDER BY", old: "SELECT a, b FROM t ORDER BY 2 LIMIT 3", new: "SELECT a, c, b FROM t ORDER BY 2 LIMIT 3",
			want: sqlparse.Comparison{AllChanged: true, Added: []string{"c"}, Reason: "adds column c before the end of the select list, which GROUP BY, ORDER BY or DISTINCT ON refers to by position"}},
		{name: "becomes a UNION", old: "SELECT a FROM t", new: "SELECT a FROM t UNION ALL SELECT a FROM u",
			want: sqlparse.Comparison{AllChanged: true, Reason: "the query is no longer a plain SELECT (a UNION, INTERSECT, EXCEPT or VALUES)"}},
		{name: "unnamed column changes", old: "SELECT a, b + 1 FROM t", new: "SELECT a, b + 2 FROM t",
			want: sqlparse.Comparison{AllChanged: true, Added: []string{""}, Reason: "a column without a name changes; adds an unnamed column"}},
	}
	ctx := context.Background()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			oldQ, err := shared.Parse(ctx, tc.old)
			require.NoError(t, err)
			newQ, err := shared.Parse(ctx, tc.new)
			require.NoError(t, err)
			got := sqlparse.Compare(oldQ, newQ)
			require.Equal(t, tc.want, got)
			require.Equal(t, sqlparse.AdditiveOnly(oldQ, newQ), got.Additive)
		})
	}
}

// Scenario: Compare never calls an additive change anything that affects a
// column, and never calls a change that touches a column additive, on
// every case AdditiveOnly is tested with.
func TestCompareAgreesWithAdditiveOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pairs := [][2]string{
		{"SELECT a, b FROM t", "SELECT a, x, b FROM t"},
		{"SELECT * FROM t", "SELECT *, 1 AS one FROM t"},
		{"SELECT a, sum(x) FROM t GROUP BY a", "SELECT a, sum(x), max(y) AS my FROM t GROUP BY a"},
		{"SELECT a, b FROM t ORDER BY 2", "SELECT a, b, c FROM t ORDER BY 2"},
		{"SELECT a FROM t WHERE b > 0", "SELECT a, b FROM t WHERE b > 0"},
		{"SELECT a, b + 1 AS b1 FROM t", "SELECT a, b + 2 AS b1, c FROM t"},
		{"SELECT a, b FROM t", "SELECT b, a, c FROM t"},
		{"WITH x AS (SELECT a FROM t) SELECT a FROM x", "WITH x AS (SELECT a, b FROM t) SELECT a FROM x"},
		{"SELECT a FROM t", "SELECT DISTINCT a, b FROM t"},
		{"VALUES (1)", "VALUES (1, 2)"},
	}
	for _, p := range pairs {
		oldQ, err := shared.Parse(ctx, p[0])
		require.NoError(t, err)
		newQ, err := shared.Parse(ctx, p[1])
		require.NoError(t, err)
		c := sqlparse.Compare(oldQ, newQ)
		require.Equal(t, sqlparse.AdditiveOnly(oldQ, newQ), c.Additive, p)
		require.NotEmpty(t, c.Reason, p)
		if c.Additive {
			require.False(t, c.AllChanged, p)
			require.Empty(t, c.Removed, p)
			require.Empty(t, c.Changed, p)
			require.NotEmpty(t, c.Added, p)
		}
	}
	require.Equal(t, sqlparse.Comparison{AllChanged: true, Reason: "the query changes"}, sqlparse.Compare(nil, nil))
}

// Scenario: which columns a child query may read from its parents, for
// "adds column x, which no child reads" and for refusing a non-breaking
// choice when a child reads a column the change alters.
func TestReads(t *testing.T) {
	t.Parallel()
	cases := []struct {
		sql  string
		want sqlparse.Reads
	}{
		{"SELECT c.id, sum(d.revenue) AS r FROM demo.d AS d JOIN demo.c AS c ON c.id = d.customer_id WHERE d.day > '2024-01-01' GROUP BY 1",
			sqlparse.Reads{Columns: []string{"c", "customer_id", "d", "day", "id", "revenue"}}},
		{"SELECT count(*) AS n FROM demo.d", sqlparse.Reads{Columns: []string{}}},
		{"SELECT x FROM demo.d JOIN demo.e USING (Customer_ID)", sqlparse.Reads{Columns: []string{"customer_id", "x"}}},
		{"WITH t AS (SELECT revenue FROM demo.d) SELECT (SELECT max(revenue) FROM t) AS m", sqlparse.Reads{Columns: []string{"revenue"}}},
		{"SELECT * FROM demo.d", sqlparse.Reads{Columns: []string{}, All: true}},
		{"SELECT d.* EXCLUDE (x) FROM demo.d AS d", sqlparse.Reads{Columns: []string{}, All: true}},
		{"SELECT a FROM demo.d NATURAL JOIN demo.e", sqlparse.Reads{Columns: []string{"a"}, All: true}},
		{"SELECT p FROM demo.d AS d(p, q)", sqlparse.Reads{Columns: []string{"p"}, All: true}},
	}
	ctx := context.Background()
	for _, tc := range cases {
		q, err := shared.Parse(ctx, tc.sql)
		require.NoError(t, err)
		require.Equal(t, tc.want, q.Reads(), tc.sql)
	}
	q, err := shared.Parse(ctx, "SELECT a FROM t")
	require.NoError(t, err)
	require.True(t, q.Reads().Has("A"))
	require.False(t, q.Reads().Has("b"))
	require.True(t, (&sqlparse.Query{}).Reads().All, "a Query not built by Parse may read anything")
}
