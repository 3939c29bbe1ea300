package sqlparse_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/sqlparse"
)

func TestRewriteTables(t *testing.T) {
	t.Parallel()
	physical := map[string]string{
		"demo.events": `"gapless__demo"."demo__events__v2"`,
		"demo.users":  `"gapless__demo"."demo__users__v1"`,
	}
	replace := func(r sqlparse.TableRef) (string, bool) {
		s, ok := physical[r.String()]
		return s, ok
	}
	cases := []struct{ in, want string }{
		{
			"SELECT * FROM demo.events AS e JOIN demo.users u ON e.uid = u.id",
			`SELECT * FROM "gapless__demo"."demo__events__v2" AS e JOIN "gapless__demo"."demo__users__v1" u ON e.uid = u.id`,
		},
		{ // quoted, spaced, mixed case; every occurrence, CTE names untouched
			`WITH events AS (SELECT * FROM "Demo" . "Events") SELECT * FROM events, DEMO.events -- demo.events`,
			`WITH events AS (SELECT * FROM "gapless__demo"."demo__events__v2") SELECT * FROM events, "gapless__demo"."demo__events__v2" -- demo.events`,
		},
		{ // references in subqueries; other tables left as written
			"SELECT (SELECT max(ts) FROM demo.events) AS m FROM raw.src WHERE id IN (SELECT id FROM demo.users)",
			`SELECT (SELECT max(ts) FROM "gapless__demo"."demo__events__v2") AS m FROM raw.src WHERE id IN (SELECT id FROM "gapless__demo"."demo__users__v1")`,
		},
	}
	for _, tc := range cases {
		q, err := shared.Parse(context.Background(), tc.in)
		require.NoError(t, err)
		got, err := sqlparse.RewriteTables(tc.in, q.Occurrences, replace)
		require.NoError(t, err, tc.in)
		require.Equal(t, tc.want, got)
		// the result still parses and reads exactly the replacement tables
		q2, err := shared.Parse(context.Background(), got)
		require.NoError(t, err)
		for _, r := range q2.Tables {
			require.NotEqual(t, "demo", r.Schema, "a demo.* reference survived in %s", got)
		}
	}
}

func TestRewriteTablesRefusesAMismatch(t *testing.T) {
	t.Parallel()
	src := "SELECT * FROM demo.events"
	_, err := sqlparse.RewriteTables(src, []sqlparse.TableRef{{Schema: "demo", Name: "users", Offset: 14}}, func(sqlparse.TableRef) (string, bool) { return "x", true })
	require.ErrorIs(t, err, sqlparse.ErrRewrite)
	_, err = sqlparse.RewriteTables(src, []sqlparse.TableRef{{Schema: "demo", Name: "events", Offset: -1}}, func(sqlparse.TableRef) (string, bool) { return "x", true })
	require.ErrorIs(t, err, sqlparse.ErrRewrite)
}
