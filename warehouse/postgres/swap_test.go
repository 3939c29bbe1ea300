package postgres_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/warehouse"
)

// servedState is what readers of the swapped table and its views can see,
// plus the grants and comments they carry.
func servedState(t *testing.T, b *bundle) [][]any {
	t.Helper()
	return b.rows(t, `SELECT c.relname, c.relkind::text, coalesce(c.relacl::text, ''), coalesce(obj_description(c.oid, 'pg_class'), ''),
	                         coalesce(col_description(c.oid, 1), '')
	                  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
	                  WHERE n.nspname IN ('s', 's__dev') AND c.relkind IN ('r', 'v', 'm')
	                  ORDER BY n.nspname, c.relname`)
}

func TestReplaceTableKeepsViewsServing(t *testing.T) {
	t.Parallel()
	// Scenario: a FULL model's physical table is served through prod's
	// view, a dev environment's view reads prod's view, and analysts were
	// granted SELECT on the views. The scheduler rebuilds the table. Views
	// bind to table OIDs in PostgreSQL, so a plain DROP would fail and a
	// CASCADE would take prod's view away until the next promotion (a gap
	// served). After the swap every view serves the new rows, with its
	// grants and comments.
	b := setup(t)
	require.NoError(t, b.e.CreateSchema(b.ctx, "s__dev"))
	b.exec(t, `CREATE TABLE s.phys AS SELECT 1 AS id, 'old' AS name`)
	b.exec(t, `COMMENT ON TABLE s.phys IS 'the physical table'`)
	b.exec(t, `COMMENT ON COLUMN s.phys.id IS 'the id'`)
	b.exec(t, `GRANT SELECT ON s.phys TO PUBLIC`)
	b.exec(t, `CREATE VIEW s.prod WITH (security_barrier = true) AS SELECT id, name FROM s.phys`)
	b.exec(t, `COMMENT ON VIEW s.prod IS 'it''s prod'`)
	b.exec(t, `GRANT SELECT ON s.prod TO PUBLIC`)
	b.exec(t, `CREATE VIEW s__dev.prod AS SELECT id AS ident FROM s.prod`)
	before := servedState(t, b)

	err := b.e.ReplaceTable(b.ctx, warehouse.ReplaceTableParams{Table: tbl("phys"),
		Query: `SELECT g AS id, 'new' AS name, true AS added FROM generate_series(1, 3) g`})
	require.NoError(t, err)

	require.Equal(t, [][]any{{int64(1), "new"}, {int64(2), "new"}, {int64(3), "new"}}, b.rows(t, `SELECT * FROM s.prod ORDER BY id`))
	require.Equal(t, [][]any{{int64(1)}, {int64(2)}, {int64(3)}}, b.rows(t, `SELECT * FROM s__dev.prod ORDER BY 1`))
	require.Equal(t, before, servedState(t, b), "grants, comments and kinds survive the swap")
	require.Equal(t, []any{"security_barrier=true"}, b.scalar(t, `SELECT reloptions FROM pg_class WHERE oid = 's.prod'::regclass`))
	require.Zero(t, b.tmpTables(t))
}

func TestReplaceTableFailureLeavesOldTableServing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.exec(t, `CREATE TABLE s.t AS SELECT 1 AS id, 'old' AS name`)
	b.exec(t, `CREATE VIEW s.v AS SELECT id, name FROM s.t`)
	b.exec(t, `CREATE TABLE s.victim (x int)`)
	cases := []struct {
		name     string
		scenario string
		query    string
		is       error
		code     string
	}{
		{
			name:     "query fails at run time",
			scenario: "the rebuild query divides by zero half-way: the old table keeps serving, intact, and no temporary table is left behind",
			query:    `SELECT g AS id, (1 / (g - 50))::text AS name FROM generate_series(1, 100) g`,
			code:     "22012",
		},
		{
			name:     "view no longer fits",
			scenario: "the new table lacks a column a serving view reads: re-creating the view fails, so the swap does",
			query:    `SELECT 2 AS id`,
			code:     "42703",
		},
		{
			name:     "second statement",
			scenario: "the query tries to close the subquery and run a second statement: the server refuses and runs nothing",
			query:    `SELECT 2 AS id, 'x' AS name) AS q; DROP TABLE s.victim; SELECT * FROM (SELECT 1`,
			code:     "42601",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// Scenario: see tc.scenario.
			err := b.e.ReplaceTable(b.ctx, warehouse.ReplaceTableParams{Table: tbl("t"), Query: tc.query})
			we := requireWarehouseError(t, err, "replace table")
			require.Equal(t, "s.t", we.Object)
			require.NotEmpty(t, we.SQL)
			require.Equal(t, tc.code, pgCode(err), "%v", err)
			require.Equal(t, [][]any{{int64(1), "old"}}, b.rows(t, `SELECT * FROM s.v`))
			require.True(t, b.exists(t, tbl("victim")))
			require.Zero(t, b.tmpTables(t))
		})
	}
}

func TestReplaceTableRefusesWhatItCannotRebuild(t *testing.T) {
	t.Parallel()
	// Scenario: a materialized view reads the table. The engine cannot
	// re-create it without re-running it, so the swap refuses up front
	// and the table, the view and the materialized view stay as they were.
	b := setup(t)
	b.exec(t, `CREATE TABLE s.t AS SELECT 1 AS id`)
	b.exec(t, `CREATE VIEW s.v AS SELECT id FROM s.t`)
	b.exec(t, `CREATE MATERIALIZED VIEW s.m AS SELECT id FROM s.v`)
	before := servedState(t, b)
	err := b.e.ReplaceTable(b.ctx, warehouse.ReplaceTableParams{Table: tbl("t"), Query: `SELECT 2 AS id`})
	requireWarehouseError(t, err, "replace table")
	require.ErrorIs(t, err, warehouse.ErrDependentObject)
	require.Equal(t, before, servedState(t, b))
	require.Equal(t, [][]any{{int64(1)}}, b.rows(t, `SELECT * FROM s.v`))
	require.Zero(t, b.tmpTables(t))

	// A view where a table is expected is refused too.
	err = b.e.ReplaceTable(b.ctx, warehouse.ReplaceTableParams{Table: tbl("v"), Query: `SELECT 2 AS id`})
	require.ErrorIs(t, err, warehouse.ErrNotATable)
}

func TestReplaceTableCreatesMissingTable(t *testing.T) {
	t.Parallel()
	b := setup(t)
	require.NoError(t, b.e.ReplaceTable(b.ctx, warehouse.ReplaceTableParams{Table: tbl("t"), Query: `SELECT 1 AS id`}))
	require.Equal(t, [][]any{{int64(1)}}, b.rows(t, `SELECT * FROM s.t`))
	require.Zero(t, b.tmpTables(t))
}

func TestCreateOrReplaceViewColumnChanges(t *testing.T) {
	t.Parallel()
	// Scenario: a view loses a column and retypes another, which
	// PostgreSQL's CREATE OR REPLACE VIEW refuses. The engine swaps a new
	// view in instead: a view built on it is rebuilt, grants and comments
	// are kept, and readers never see the name missing.
	b := setup(t)
	require.NoError(t, b.e.CreateSchema(b.ctx, "s__dev"))
	b.exec(t, `CREATE TABLE s.t AS SELECT 1 AS id, 'x' AS name, 2.5 AS score`)
	view := warehouse.ViewParams{View: tbl("v"), Query: `SELECT id, name, score FROM s.t`}
	require.NoError(t, b.e.CreateOrReplaceView(b.ctx, view))
	b.exec(t, `GRANT SELECT ON s.v TO PUBLIC`)
	b.exec(t, `COMMENT ON VIEW s.v IS 'served'`)
	b.exec(t, `CREATE VIEW s__dev.v AS SELECT id FROM s.v`)
	oid := b.scalar(t, `SELECT 's.v'::regclass::oid`)

	// Same columns, another body: replaced in place, same identity.
	view.Query = `SELECT id, name, score FROM s.t WHERE id > 0`
	require.NoError(t, b.e.CreateOrReplaceView(b.ctx, view))
	require.Equal(t, oid, b.scalar(t, `SELECT 's.v'::regclass::oid`))

	before := servedState(t, b)
	view.Query = `SELECT id::text AS id, name FROM s.t`
	require.NoError(t, b.e.CreateOrReplaceView(b.ctx, view))
	cols, err := b.e.Columns(b.ctx, tbl("v"))
	require.NoError(t, err)
	require.Equal(t, []warehouse.Column{{Name: "id", Type: "text"}, {Name: "name", Type: "text"}}, cols)
	require.Equal(t, [][]any{{"1"}}, b.rows(t, `SELECT * FROM s__dev.v`))
	require.Equal(t, before, servedState(t, b))
	require.Zero(t, b.tmpTables(t))

	// A view that is really a table is refused, not dropped.
	err = b.e.CreateOrReplaceView(b.ctx, warehouse.ViewParams{View: tbl("t"), Query: `SELECT 1 AS id`})
	requireWarehouseError(t, err, "create or replace view")
	require.Equal(t, "42809", pgCode(err))
	require.Equal(t, [][]any{{int64(1), "x"}}, b.rows(t, `SELECT id, name FROM s.t`))
}

// waitForLockWaiters returns once n sessions wait for a lock on relation.
// It polls the server instead of sleeping.
func waitForLockWaiters(t *testing.T, b *bundle, relation string, n int64) {
	t.Helper()
	for {
		got := b.scalar(t, `SELECT count(*) FROM pg_locks WHERE relation = $1::regclass AND NOT granted`, relation)
		if got.(int64) >= n {
			return
		}
		require.NoError(t, b.ctx.Err())
	}
}

func TestReplaceTableDoesNotUndoConcurrentPromotion(t *testing.T) {
	t.Parallel()
	// Scenario: prod's view reads physical table v1. A promotion re-points
	// it to v2 while the scheduler rebuilds v1. The rebuild must not
	// re-create prod's view from a definition it read before the
	// promotion committed, or prod would silently go back to v1.
	//
	// The interleaving is forced with a reader holding prod's view: the
	// promotion queues for the view first, the rebuild second; when the
	// reader lets go, the promotion commits, then the rebuild goes on.
	b := setup(t)
	b.exec(t, `CREATE TABLE s.v1 AS SELECT 'v1' AS version`)
	b.exec(t, `CREATE TABLE s.v2 AS SELECT 'v2' AS version`)
	require.NoError(t, b.e.CreateOrReplaceView(b.ctx, warehouse.ViewParams{View: tbl("prod"), Query: `SELECT version FROM s.v1`}))

	reader, err := b.e.Pool().Begin(b.ctx)
	require.NoError(t, err)
	defer func() { _ = reader.Rollback(b.ctx) }()
	_, err = reader.Exec(b.ctx, `SELECT * FROM s.prod`)
	require.NoError(t, err)

	promoted := make(chan error, 1)
	go func() {
		promoted <- b.e.CreateOrReplaceView(b.ctx, warehouse.ViewParams{View: tbl("prod"), Query: `SELECT version FROM s.v2`})
	}()
	waitForLockWaiters(t, b, "s.prod", 1)
	rebuilt := make(chan error, 1)
	go func() {
		rebuilt <- b.e.ReplaceTable(b.ctx, warehouse.ReplaceTableParams{Table: tbl("v1"), Query: `SELECT 'v1 rebuilt' AS version`})
	}()
	waitForLockWaiters(t, b, "s.prod", 2)
	require.NoError(t, reader.Commit(b.ctx))
	require.NoError(t, <-promoted)
	require.NoError(t, <-rebuilt)

	require.Equal(t, [][]any{{"v2"}}, b.rows(t, `SELECT version FROM s.prod`), "the promotion stands")
	require.Equal(t, [][]any{{"v1 rebuilt"}}, b.rows(t, `SELECT version FROM s.v1`))
}
