package postgres_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/warehouse"
)

func TestMergeByKeyCompositeKey(t *testing.T) {
	t.Parallel()
	// Scenario: an INCREMENTAL_BY_UNIQUE_KEY model keyed on (tenant, id),
	// with no constraint on the table. A batch updates one row, inserts
	// another, and leaves the rest alone; re-applying the batch changes
	// nothing more.
	b := setup(t)
	b.exec(t, `CREATE TABLE s.t (tenant text, id int, amount numeric(10,2))`)
	b.exec(t, `INSERT INTO s.t VALUES ('a', 1, 10), ('a', 2, 20), ('b', 1, 30)`)
	// Columns in another order, plus one the target does not have.
	q := `SELECT 21.5 AS amount, 2 AS id, 'a' AS tenant, 'extra' AS ignored
	      UNION ALL SELECT 40, 1, 'c', 'extra'`
	for range 2 {
		n, err := b.e.MergeByKey(b.ctx, warehouse.MergeParams{Table: tbl("t"), Key: []string{"tenant", "id"}, Query: q})
		require.NoError(t, err)
		require.EqualValues(t, 2, n)
		require.Equal(t, [][]any{
			{"a", int64(1), "10.00"}, {"a", int64(2), "21.50"}, {"b", int64(1), "30.00"}, {"c", int64(1), "40.00"},
		}, b.rows(t, `SELECT tenant, id, amount FROM s.t ORDER BY tenant, id`))
	}
}

func TestMergeByKeyRefusesBadKeys(t *testing.T) {
	t.Parallel()
	// Scenario: a batch that holds one key twice (two NULLs count as one
	// key) would leave the target with a key that is no longer unique. The
	// merge fails and changes nothing; so do calls that make no sense.
	b := setup(t)
	b.exec(t, `CREATE TABLE s.t (k int, v text)`)
	b.exec(t, `INSERT INTO s.t VALUES (1, 'old')`)
	b.exec(t, `CREATE VIEW s.v AS SELECT * FROM s.t`)
	cases := []struct {
		name string
		p    warehouse.MergeParams
		is   error
	}{
		{"duplicate NULL key", warehouse.MergeParams{Table: tbl("t"), Key: []string{"k"}, Query: `SELECT NULL::int AS k, 'new' AS v UNION ALL SELECT NULL, 'x'`}, warehouse.ErrDuplicateKey},
		{"duplicate key", warehouse.MergeParams{Table: tbl("t"), Key: []string{"k"}, Query: `SELECT 1 AS k, 'new' AS v UNION ALL SELECT 1, 'x'`}, warehouse.ErrDuplicateKey},
		{"no key", warehouse.MergeParams{Table: tbl("t"), Query: `SELECT 1 AS k, 'new' AS v`}, warehouse.ErrInvalidArgument},
		{"key twice", warehouse.MergeParams{Table: tbl("t"), Key: []string{"k", "k"}, Query: `SELECT 1 AS k, 'new' AS v`}, warehouse.ErrInvalidArgument},
		{"unknown key", warehouse.MergeParams{Table: tbl("t"), Key: []string{"nope"}, Query: `SELECT 1 AS k, 'new' AS v`}, warehouse.ErrInvalidArgument},
		{"view", warehouse.MergeParams{Table: tbl("v"), Key: []string{"k"}, Query: `SELECT 1 AS k, 'new' AS v`}, warehouse.ErrNotATable},
		{"missing table", warehouse.MergeParams{Table: tbl("nope"), Key: []string{"k"}, Query: `SELECT 1 AS k, 'new' AS v`}, warehouse.ErrNotFound},
	}
	for _, tc := range cases {
		_, err := b.e.MergeByKey(b.ctx, tc.p)
		requireWarehouseError(t, err, "merge by key")
		require.ErrorIs(t, err, tc.is, tc.name)
	}
	require.Equal(t, [][]any{{int64(1), "old"}}, b.rows(t, `SELECT k, v FROM s.t`))
	// The transaction-local source table is gone, so the next merge works.
	n, err := b.e.MergeByKey(b.ctx, warehouse.MergeParams{Table: tbl("t"), Key: []string{"k"}, Query: `SELECT 1 AS k, 'new' AS v`})
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	require.Equal(t, [][]any{{int64(1), "new"}}, b.rows(t, `SELECT k, v FROM s.t`))
}

func TestMergeByKeyNullSafe(t *testing.T) {
	t.Parallel()
	// Scenario: a key column is NULL in some rows (a composite key with an
	// optional part). Keys compare NULL-safely, so re-merging those rows
	// replaces them instead of adding copies, whichever parts are NULL.
	b := setup(t)
	b.exec(t, `CREATE TABLE s.t (a int, b text, v int)`)
	q := `SELECT * FROM (VALUES (1, 'x', %[1]d), (1, NULL, %[1]d), (NULL, 'x', %[1]d), (NULL, NULL, %[1]d)) AS q(a, b, v)`
	for i := range 3 {
		n, err := b.e.MergeByKey(b.ctx, warehouse.MergeParams{Table: tbl("t"), Key: []string{"a", "b"}, Query: fmt.Sprintf(q, i)})
		require.NoError(t, err)
		require.EqualValues(t, 4, n)
		require.Equal(t, [][]any{
			{int64(1), "x", int64(i)}, {int64(1), nil, int64(i)}, {nil, "x", int64(i)}, {nil, nil, int64(i)},
		}, b.rows(t, `SELECT a, b, v FROM s.t ORDER BY a NULLS LAST, b NULLS LAST`))
	}
}

func TestMergeByKeyConcurrentMergesKeepOneRowPerKey(t *testing.T) {
	t.Parallel()
	// Scenario: more workers than work. Eight merges of overlapping keys
	// race on a table with no unique constraint. Without the engine's
	// table lock, two merges could each miss the other's insert of a new
	// key; with it, each key ends up exactly once.
	b := setup(t)
	b.exec(t, `CREATE TABLE s.t (k int, v int)`)
	const workers = 8
	start := make(chan struct{})
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			<-start
			_, err := b.e.MergeByKey(b.ctx, warehouse.MergeParams{Table: tbl("t"), Key: []string{"k"},
				Query: fmt.Sprintf(`SELECT g AS k, %d AS v FROM generate_series(1, 500) AS s(g)`, w)})
			errs <- err
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.EqualValues(t, 500, b.scalar(t, `SELECT count(*) FROM s.t`))
	require.EqualValues(t, 500, b.scalar(t, `SELECT count(DISTINCT k) FROM s.t`))
	require.EqualValues(t, 1, b.scalar(t, `SELECT count(DISTINCT v) FROM s.t`), "one merge's batch, whole")
}
