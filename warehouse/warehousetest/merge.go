package warehousetest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/warehouse"
)

var mergeScenarios = []scenario{
	{"UpdatesAndInserts", testMergeUpdatesAndInserts},
	{"CompositeKey", testMergeCompositeKey},
	{"TwiceIsIdempotent", testMergeIdempotent},
	{"NullKeyMatchesNullKey", testMergeNullKey},
	{"DuplicateKeyInQueryChangesNothing", testMergeDuplicateKey},
	{"ColumnsMatchedByName", testMergeColumnsByName},
	{"FailingQueryChangesNothing", testMergeFailingQuery},
}

// usersTable creates wt.users (id BIGINT, name TEXT, score BIGINT) holding
// (1, 'a', 10) and (2, 'b', 20).
func (f *fixture) usersTable() warehouse.Table {
	f.t.Helper()
	tbl := f.table("users")
	f.createAs(tbl, `SELECT CAST(id AS BIGINT) AS id, `+f.cast("name", "TEXT")+` AS name, CAST(score AS BIGINT) AS score
		FROM (VALUES (1, 'a', 10), (2, 'b', 20)) AS v(id, name, score)`)
	return tbl
}

func (f *fixture) merge(tbl warehouse.Table, key []string, query string) int64 {
	f.t.Helper()
	n, err := f.e.MergeByKey(f.ctx, warehouse.MergeParams{Table: tbl, Key: key, Query: query})
	require.NoError(f.t, err)
	return n
}

// Scenario: an INCREMENTAL_BY_UNIQUE_KEY run brings a changed user 2 and a
// new user 3; user 2 is updated in place (one row), 3 is inserted, 1 is
// untouched.
func testMergeUpdatesAndInserts(t *testing.T, f *fixture) {
	tbl := f.usersTable()
	n := f.merge(tbl, []string{"id"}, "SELECT id, name, score FROM (VALUES (2, 'B', 21), (3, 'c', 30)) AS v(id, name, score)")
	require.Equal(t, int64(2), n)
	require.Equal(t, [][]any{row(1, "a", 10), row(2, "B", 21), row(3, "c", 30)}, f.rowsOf(tbl, "id, name, score", "id"))
}

// Scenario: a key of two columns: (eu, 1) is updated, (eu, 2) inserted,
// and (us, 1), which shares one key column with (eu, 1), is untouched.
func testMergeCompositeKey(t *testing.T, f *fixture) {
	tbl := f.table("regional")
	f.createAs(tbl, `SELECT `+f.cast("region", "TEXT")+` AS region, CAST(id AS BIGINT) AS id, `+f.cast("v", "TEXT")+` AS v
		FROM (VALUES ('eu', 1, 'a'), ('us', 1, 'b')) AS s(region, id, v)`)
	n := f.merge(tbl, []string{"region", "id"}, "SELECT region, id, v FROM (VALUES ('eu', 1, 'A'), ('eu', 2, 'c')) AS s(region, id, v)")
	require.Equal(t, int64(2), n)
	require.Equal(t, [][]any{row("eu", 1, "A"), row("eu", 2, "c"), row("us", 1, "b")}, f.rowsOf(tbl, "region, id, v", "region, id"))
}

// Scenario: the scheduler retries a merge after a crash; the second run
// leaves the table exactly as the first did.
func testMergeIdempotent(t *testing.T, f *fixture) {
	tbl := f.usersTable()
	q := "SELECT id, name, score FROM (VALUES (2, 'B', 21), (3, 'c', 30)) AS v(id, name, score)"
	f.merge(tbl, []string{"id"}, q)
	first := f.rowsOf(tbl, "id, name, score", "id")
	require.Equal(t, int64(2), f.merge(tbl, []string{"id"}, q))
	require.Equal(t, first, f.rowsOf(tbl, "id, name, score", "id"))
}

// Scenario: a row arrives with a NULL key, twice; the second replaces the
// first instead of piling up beside it.
func testMergeNullKey(t *testing.T, f *fixture) {
	tbl := f.table("nullable")
	f.createAs(tbl, `SELECT `+f.cast("k", "TEXT")+` AS k, CAST(v AS BIGINT) AS v FROM (VALUES ('a', 1)) AS s(k, v)`)
	for _, q := range []string{
		"SELECT " + f.cast("NULL", "TEXT") + " AS k, 2 AS v",
		"SELECT " + f.cast("NULL", "TEXT") + " AS k, 3 AS v",
	} {
		require.Equal(t, int64(1), f.merge(tbl, []string{"k"}, q))
	}
	require.Equal(t, [][]any{row("a", 1), row(nil, 3)}, f.rowsOf(tbl, "k, v", "v"))
}

// Scenario: a model's query returns user 2 twice with different values;
// picking either would be arbitrary, so the merge fails and the table is
// unchanged.
func testMergeDuplicateKey(t *testing.T, f *fixture) {
	tbl := f.usersTable()
	before := f.rowsOf(tbl, "id, name, score", "id")
	_, err := f.e.MergeByKey(f.ctx, warehouse.MergeParams{Table: tbl, Key: []string{"id"},
		Query: "SELECT id, name, score FROM (VALUES (2, 'x', 1), (2, 'y', 2), (3, 'z', 3)) AS v(id, name, score)"})
	requireEngineError(t, err, tbl)
	require.Equal(t, before, f.rowsOf(tbl, "id, name, score", "id"))
}

// Scenario: the query lists its columns in another order than the table
// and adds a helper column; columns are matched by name.
func testMergeColumnsByName(t *testing.T, f *fixture) {
	tbl := f.usersTable()
	f.merge(tbl, []string{"id"}, "SELECT score, 'helper' AS helper, name, id FROM (VALUES (2, 'B', 21)) AS v(id, name, score)")
	require.Equal(t, [][]any{row(1, "a", 10), row(2, "B", 21)}, f.rowsOf(tbl, "id, name, score", "id"))
}

// Scenario: the merge's query fails halfway; nothing of it lands.
func testMergeFailingQuery(t *testing.T, f *fixture) {
	tbl := f.usersTable()
	before := f.rowsOf(tbl, "id, name, score", "id")
	_, err := f.e.MergeByKey(f.ctx, warehouse.MergeParams{Table: tbl, Key: []string{"id"},
		Query: `SELECT CAST(CASE WHEN g = 9000 THEN 'oops' ELSE CAST(g AS VARCHAR) END AS BIGINT) AS id,
		` + f.cast("'n'", "TEXT") + ` AS name, CAST(g AS BIGINT) AS score FROM ` + f.series(1, 10000)})
	we := requireEngineError(t, err, tbl)
	require.NotEmpty(t, we.SQL)
	require.Equal(t, before, f.rowsOf(tbl, "id, name, score", "id"))

	_, err = f.e.MergeByKey(f.ctx, warehouse.MergeParams{Table: tbl, Key: []string{"no_such_key"},
		Query: "SELECT id, name, score FROM (VALUES (2, 'B', 21)) AS v(id, name, score)"})
	requireEngineError(t, err, tbl)
	require.Equal(t, before, f.rowsOf(tbl, "id, name, score", "id"))
}
