package duckdb

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/warehouse"
)

func hour(h int) time.Time { return time.Date(2024, 1, 1, h, 0, 0, 0, time.UTC) }

// done is a context that is already cancelled: a lock call with it succeeds
// only if the lock is free at once.
func done(t *testing.T) context.Context {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	return ctx
}

// Scenario: two backfill batches of one table, for hours 0-1 and 1-2, hold
// their ranges together; a third batch for hour 0-2 overlaps both and waits
// until both let go. Another table's batch for the same hours never waits.
func TestWriteLockRangesOfOneTable(t *testing.T) {
	t.Parallel()
	l := newWriteLock()
	a := warehouse.Table{Schema: "s", Name: "a"}
	r1, err := l.lockRange(done(t), a, hour(0), hour(1))
	require.NoError(t, err)
	r2, err := l.lockRange(done(t), a, hour(1), hour(2))
	require.NoError(t, err, "a disjoint range of the same table must not wait")
	other, err := l.lockRange(done(t), warehouse.Table{Schema: "S", Name: "B"}, hour(0), hour(2))
	require.NoError(t, err, "another table must not wait")
	_, err = l.lockRange(done(t), warehouse.Table{Schema: "S", Name: "A"}, hour(0), hour(2))
	require.ErrorIs(t, err, context.Canceled, "an overlapping range of the same table (names fold like DuckDB's) must wait")
	require.ErrorContains(t, err, "waiting for the database's write lock")

	blocked := make(chan string, 4)
	l.onBlock = func(what string) { blocked <- what }
	got := make(chan error, 1)
	go func() {
		release, err := l.lockRange(t.Context(), a, hour(0), hour(2))
		if err == nil {
			release()
		}
		got <- err
	}()
	require.Equal(t, "range of s.a", <-blocked)
	r1()
	require.Equal(t, "range of s.a", <-blocked, "one of the two overlapping ranges is still held")
	r2()
	require.NoError(t, <-got)
	r2() // releasing twice is harmless
	other()
	require.Empty(t, l.spans)
}

// Scenario: a DDL statement (exclusive) arrives while a batch holds a
// range: it waits for the batch, and batches that arrive after it wait for
// it, even on ranges nobody holds, so a stream of batches cannot starve
// it. When it gives up, the batches it held back go at once.
func TestWriteLockExclusiveIsNotStarved(t *testing.T) {
	t.Parallel()
	l := newWriteLock()
	tb := warehouse.Table{Schema: "s", Name: "t"}
	held, err := l.lockRange(done(t), tb, hour(0), hour(1))
	require.NoError(t, err)
	require.ErrorIs(t, l.lockExclusive(done(t)), context.Canceled, "an exclusive write must wait for a range write")
	later, err := l.lockRange(done(t), tb, hour(5), hour(6))
	require.NoError(t, err, "an exclusive writer that gave up must not hold back range writes")

	blocked := make(chan string, 4)
	l.onBlock = func(what string) { blocked <- what }
	excl := make(chan error, 1)
	go func() { excl <- l.lockExclusive(t.Context()) }()
	require.Equal(t, "exclusive", <-blocked)
	l.onBlock = nil
	_, err = l.lockRange(done(t), tb, hour(7), hour(8))
	require.ErrorIs(t, err, context.Canceled, "a range write must not overtake a waiting exclusive write")
	held()
	select {
	case err := <-excl:
		t.Fatalf("the exclusive write took the lock while hour 5-6 was held: %v", err)
	default:
	}
	later()
	require.NoError(t, <-excl)
	_, err = l.lockRange(done(t), tb, hour(7), hour(8))
	require.ErrorIs(t, err, context.Canceled, "a range write must wait for an exclusive write")
	l.unlockExclusive()
	release, err := l.lockRange(done(t), tb, hour(7), hour(8))
	require.NoError(t, err)
	release()
}

// Scenario: while a batch for hour 0-1 of a table is being written, a batch
// for hour 1-2 of the same table commits (it does not wait), and a batch
// for hour 0-1 again waits; both batches' rows end up in the table once.
func TestInsertIntervalsOfDisjointRangesRunTogether(t *testing.T) {
	t.Parallel()
	e, err := Open(t.Context(), "", Options{})
	require.NoError(t, err)
	defer func() { require.NoError(t, e.Close()) }()
	tb := warehouse.Table{Schema: "s", Name: "events"}
	require.NoError(t, e.CreateSchema(t.Context(), "s"))
	require.NoError(t, e.CreateTable(t.Context(), warehouse.CreateTableParams{Table: tb, Columns: []warehouse.Column{
		{Name: "ts", Type: "TIMESTAMP"}, {Name: "id", Type: "BIGINT"},
	}}))
	q := "SELECT TIMESTAMP '2024-01-01 00:00:00' + g * INTERVAL '1 minute' AS ts, g AS id FROM generate_series(0, 119) AS s(g)"
	held, err := e.shared.wl.lockRange(t.Context(), tb, hour(0), hour(1))
	require.NoError(t, err)
	n, err := e.InsertInterval(done(t), warehouse.InsertIntervalParams{Table: tb, TimeColumn: "ts", Start: hour(1), End: hour(2), Query: q})
	require.Error(t, err, "a cancelled context fails the statement itself")
	require.NotContains(t, err.Error(), "write lock", "but not the wait: hour 1-2 is free")
	require.Zero(t, n)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	n, err = e.InsertInterval(ctx, warehouse.InsertIntervalParams{Table: tb, TimeColumn: "ts", Start: hour(1), End: hour(2), Query: q})
	require.NoError(t, err)
	require.Equal(t, int64(60), n)
	_, err = e.InsertInterval(done(t), warehouse.InsertIntervalParams{Table: tb, TimeColumn: "ts", Start: hour(0), End: hour(1), Query: q})
	require.ErrorContains(t, err, "write lock", "hour 0-1 is held")
	held()
	n, err = e.InsertInterval(ctx, warehouse.InsertIntervalParams{Table: tb, TimeColumn: "ts", Start: hour(0), End: hour(1), Query: q})
	require.NoError(t, err)
	require.Equal(t, int64(60), n)
	res, err := e.Query(ctx, "SELECT count(*), count(DISTINCT id) FROM s.events")
	require.NoError(t, err)
	require.Equal(t, [][]any{{int64(120), int64(120)}}, res.Rows)
}

// Scenario: a deploy's workers first-build FULL tables that the create
// stage made. A first build into a table empty as made holds only that
// table: it runs while a batch of another table holds its range, and waits
// while a batch of its own table does.
func TestFirstBuildAsMadeHoldsOnlyItsTable(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e, err := Open(ctx, "", Options{})
	require.NoError(t, err)
	defer func() { require.NoError(t, e.Close()) }()
	a, b := warehouse.Table{Schema: "s", Name: "a"}, warehouse.Table{Schema: "s", Name: "b"}
	const q = "SELECT CAST(g AS BIGINT) AS id FROM generate_series(1, 3) AS s(g)"
	require.NoError(t, e.CreateSchema(ctx, "s"))
	for _, tbl := range []warehouse.Table{a, b} {
		require.NoError(t, e.CreateTableAs(ctx, warehouse.CreateTableAsParams{Table: tbl, Query: q}))
	}
	build := func(tbl warehouse.Table, got chan<- error) {
		rows, known, err := e.ReplaceTableRows(ctx, warehouse.ReplaceTableParams{Table: tbl, Query: q, FirstBuild: true})
		if err == nil && (!known || rows != 3) {
			err = fmt.Errorf("first build of %s: %d rows, known %v", tbl, rows, known)
		}
		got <- err
	}
	batch, err := e.shared.wl.lockRange(ctx, a, hour(0), hour(1)) // a batch of a in flight
	require.NoError(t, err)
	blocked := make(chan string, 4)
	e.shared.wl.onBlock = func(what string) { blocked <- what }

	got := make(chan error, 1)
	go build(b, got)
	select {
	case err := <-got:
		require.NoError(t, err)
	case what := <-blocked:
		batch()
		require.Failf(t, "the first build of s.b waited", "for %s", what)
	}

	go build(a, got)
	require.Equal(t, "range of s.a", <-blocked, "the first build of s.a waits for the batch of s.a")
	batch()
	require.NoError(t, <-got)
}
