package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/warehouse"
)

// Scenario: two batches of one table run at once, as a backfill with
// batch_concurrency does. Batch A's query is held up (it waits for an
// advisory lock the test holds). With Concurrent set, A computes its rows
// before it takes the table's write lock, so while it computes it holds no
// lock on the table and batch B, a disjoint hour, writes and commits. Without
// Concurrent, A holds the table's lock while its query runs (B would wait).
// Either way each hour ends with its rows once.
func TestConcurrentInsertIntervalComputesBeforeTheLock(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	b.exec(t, "CREATE TABLE s.src AS SELECT TIMESTAMP '2024-01-01 00:00:00' + g * INTERVAL '10 minutes' AS ts, g::bigint AS id FROM generate_series(0, 11) AS g")
	b.exec(t, "CREATE TABLE s.events (ts timestamp, id bigint)")
	events := tbl("events")
	hour := func(h int) time.Time { return time.Date(2024, 1, 1, h, 0, 0, 0, time.UTC) }
	const held = `SELECT s.ts, s.id FROM s.src AS s, (SELECT pg_advisory_xact_lock_shared(4242)) AS gate`

	holder, err := pgx.Connect(ctx, b.url)
	require.NoError(t, err)
	defer holder.Close(context.Background())
	// waitBlocked returns once a session waits for the advisory lock, that
	// is once A's query runs (a wait on state, not on time).
	waitBlocked := func() {
		for {
			var n int
			require.NoError(t, holder.QueryRow(ctx, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = 4242 AND NOT granted").Scan(&n))
			if n > 0 {
				return
			}
			require.NoError(t, ctx.Err(), "batch A never reached its query")
		}
	}
	tableLocks := func() int {
		var n int
		require.NoError(t, holder.QueryRow(ctx, "SELECT count(*) FROM pg_locks WHERE relation = 's.events'::regclass AND mode = 'ShareRowExclusiveLock' AND granted").Scan(&n))
		return n
	}

	for _, concurrent := range []bool{true, false} {
		_, err := holder.Exec(ctx, "SELECT pg_advisory_lock(4242)")
		require.NoError(t, err)
		doneA := make(chan error, 1)
		go func() {
			_, err := b.e.InsertInterval(ctx, warehouse.InsertIntervalParams{Table: events, TimeColumn: "ts",
				Start: hour(0), End: hour(1), Query: held, Concurrent: concurrent})
			doneA <- err
		}()
		waitBlocked()
		if concurrent {
			require.Zero(t, tableLocks(), "a Concurrent batch computing its rows holds no lock on the table")
			n, err := b.e.InsertInterval(ctx, warehouse.InsertIntervalParams{Table: events, TimeColumn: "ts",
				Start: hour(1), End: hour(2), Query: "SELECT ts, id FROM s.src", Concurrent: true})
			require.NoError(t, err, "batch B writes while A computes")
			require.Equal(t, int64(6), n)
		} else {
			require.Equal(t, 1, tableLocks(), "a plain batch holds the table's lock while its query runs")
		}
		_, err = holder.Exec(ctx, "SELECT pg_advisory_unlock(4242)")
		require.NoError(t, err)
		require.NoError(t, <-doneA)
	}
	require.Equal(t, [][]any{{int64(12), int64(12)}}, b.rows(t, "SELECT count(*), count(DISTINCT id) FROM s.events"))
}
