package execute_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/execute"
	"github.com/gapless-dev/gapless/execute/executetest"
	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/warehouse"
)

// failFirst orders a failure among concurrent batches: the InsertInterval
// whose range starts at first waits until others more calls are in
// flight, and those wait until it has returned. So the batches launched
// with it are in flight when it fails.
type failFirst struct {
	warehouse.Engine
	first  time.Time
	others int
	mu     sync.Mutex
	in     int
	ready  chan struct{} // closed when others calls are in flight
	failed chan struct{} // closed when the first call returned
}

func (f *failFirst) InsertInterval(ctx context.Context, p warehouse.InsertIntervalParams) (int64, error) {
	wait := func(ch chan struct{}) error {
		select {
		case <-ch:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if p.Start.Equal(f.first) {
		defer close(f.failed)
		if err := wait(f.ready); err != nil {
			return 0, err
		}
		return f.Engine.InsertInterval(ctx, p)
	}
	f.mu.Lock()
	f.in++
	if f.in == f.others {
		close(f.ready)
	}
	f.mu.Unlock()
	if err := wait(f.failed); err != nil {
		return 0, err
	}
	return f.Engine.InsertInterval(ctx, p)
}

// concurrentModel fails for every batch of 2024-01-02 that starts before
// ctl.flags' fail_before.
var concurrentModel = map[string]string{
	"models/flags.sql": `MODEL (name ctl.flags, kind EXTERNAL, columns (fail_before TIMESTAMP));`,
	"models/hourly.sql": `MODEL (name demo.hourly, kind INCREMENTAL_BY_TIME_RANGE (time_column ts, batch_size 2, batch_concurrency 3), cron '@hourly', start '2024-01-01');
SELECT @start_ts + INTERVAL '6 minute' * g AS ts, g AS v,
  (CASE WHEN @start_ts >= TIMESTAMP '2024-01-02 00:00:00' AND @start_ts < f.fail_before THEN 'boom' ELSE '1' END)::INTEGER AS ok
FROM generate_series(0, 19) AS s(g), ctl.flags AS f`,
}

// Scenario: an hourly model with batch_size 2 and batch_concurrency 3 is
// backfilled over two days on each backend. Its batches run three at a
// time (the gate proves they overlap), each is recorded once it commits,
// and OnBatch is never called for two of them at once. Then three batches
// of day 2 fail together: all three errors are returned, earliest first,
// and no fourth batch starts. Then day 2's first batch fails while the next
// two are in flight: those two finish and are recorded, the failed one is
// not, and the error names the interval. Resuming completes
// exactly the rest, and every row is there once. Restating with InOrder
// (a served version) runs one batch at a time.
func TestConcurrentBatches(t *testing.T) {
	t.Parallel()
	for _, setup := range []func(testing.TB, bool, map[string]string) *executetest.Bundle{executetest.Setup, executetest.SetupPostgres} {
		b := setup(t, false, concurrentModel)
		t.Run(b.Backends, func(t *testing.T) {
			pr := b.Load(t)
			tpls, err := execute.Templates(b.Ctx, b.Parser, b.Engine, pr.Snapshots)
			require.NoError(t, err)
			tpl := tpls["demo.hourly"]
			require.Equal(t, 3, tpl.Snapshot.Model.BatchConcurrency)
			exec := at(2024, 1, 3, 0)
			g := executetest.NewGate(b.Engine, 3)
			var inside, overlapped atomic.Int32
			var batches []execute.Batch
			x := &execute.Executor{Engine: g, Store: b.Store, ProjectDir: b.Dir, Logger: quiet,
				Clock: clockwork.NewFakeClockAt(exec),
				OnBatch: func(bt execute.Batch) {
					if inside.Add(1) > 1 {
						overlapped.Add(1)
					}
					batches = append(batches, bt)
					inside.Add(-1)
				}}
			flags := warehouse.Table{Schema: "ctl", Name: "flags"}
			require.NoError(t, b.Engine.CreateSchema(b.Ctx, "ctl"))
			// failBefore makes day 2's batches that start before hour h fail.
			failBefore := func(h int) {
				require.NoError(t, b.Engine.ReplaceTable(b.Ctx, warehouse.ReplaceTableParams{Table: flags,
					Query: fmt.Sprintf("SELECT TIMESTAMP '2024-01-02 00:00:00' + INTERVAL '1 hour' * %d AS fail_before", h)}))
			}
			failBefore(0)
			require.NoError(t, x.Prepare(b.Ctx, tpl, exec))
			ctx, cancel := context.WithTimeout(b.Ctx, 30*time.Second)
			defer cancel()
			day1 := interval.NewSet(interval.NewRange(at(2024, 1, 1, 0), at(2024, 1, 2, 0)))
			w := execute.Work{Template: tpl, Execution: exec, SkipCovered: true, Ranges: day1}
			res, err := x.Execute(ctx, w)
			require.NoError(t, err)
			require.Equal(t, 12, res.Batches)
			require.Equal(t, int64(24*10), res.Rows)
			require.Equal(t, 3, g.Most(), "three batches ran at once, never more")
			require.Zero(t, overlapped.Load(), "OnBatch calls must not overlap")
			require.Len(t, batches, 12)
			s := tpl.Snapshot
			require.Equal(t, day1.String(), b.Intervals(t, s.Name, s.Version))
			phys := b.Engine.QuoteTable(tpl.Table)
			require.Equal(t, int64(24*10), b.Count(t, phys))

			// Day 2's first three batches all fail, together (the gate holds
			// each until all three are in flight): every failure is
			// returned, earliest first, nothing is recorded, and no fourth
			// batch starts (each slot frees only once its failure is known).
			day2 := interval.NewSet(interval.NewRange(at(2024, 1, 2, 0), at(2024, 1, 3, 0)))
			g.SetWant(3)
			failBefore(6)
			w.Ranges = day2
			res, err = x.Execute(ctx, w)
			var be *execute.BatchError
			require.ErrorAs(t, err, &be)
			require.Equal(t, interval.NewRange(at(2024, 1, 2, 0), at(2024, 1, 2, 2)), be.Interval, "the earliest failure first")
			for _, h := range []string{"T00:00:00Z", "T02:00:00Z", "T04:00:00Z"} {
				require.ErrorContains(t, err, "2024-01-02"+h, "every failure is returned")
			}
			require.Zero(t, res.Batches)
			require.Equal(t, 3, g.Calls(), "no batch started after the failures")
			require.Equal(t, day1.String(), b.Intervals(t, s.Name, s.Version))

			// Day 2's first batch fails while the next two are in flight
			// (held until it failed): those two finish and are recorded.
			g.SetWant(1)
			failBefore(2)
			x.Engine = &failFirst{Engine: g, first: at(2024, 1, 2, 0), others: 2, ready: make(chan struct{}), failed: make(chan struct{})}
			res, err = x.Execute(ctx, w)
			x.Engine = g
			require.ErrorAs(t, err, &be)
			require.Equal(t, interval.NewRange(at(2024, 1, 2, 0), at(2024, 1, 2, 2)), be.Interval)
			require.True(t, res.Recorded.Covers(interval.NewRange(at(2024, 1, 2, 2), at(2024, 1, 2, 6))),
				"the two batches in flight when it failed are recorded: %s", res.Recorded)
			require.True(t, res.Recorded.IntersectRange(be.Interval).IsEmpty(), "the failed batch is not recorded")
			require.Equal(t, int64(24*10+res.Batches*2*10), b.Count(t, phys), "the table holds exactly the recorded batches' rows")

			failBefore(0)
			res, err = x.Execute(ctx, w)
			require.NoError(t, err)
			require.True(t, res.Recorded.Covers(be.Interval))
			require.Equal(t, interval.NewSet(interval.NewRange(at(2024, 1, 1, 0), at(2024, 1, 3, 0))).String(), b.Intervals(t, s.Name, s.Version))
			require.Equal(t, []string{"480|480"}, b.Rows(t, "SELECT count(*) || '|' || count(DISTINCT ts) FROM "+phys))

			// Once served, the version's batches run in order (InOrder):
			// restating day 1 never runs two at once.
			g.SetWant(1)
			res, err = x.Execute(ctx, execute.Work{Template: tpl, Execution: exec, Ranges: day1, InOrder: true})
			require.NoError(t, err)
			require.Equal(t, 12, res.Batches)
			require.Equal(t, 1, g.Most(), "a served version's batches run one at a time")
			require.Equal(t, []string{"480|480"}, b.Rows(t, "SELECT count(*) || '|' || count(DISTINCT ts) FROM "+phys))
		})
	}
}

// Scenario: a model that reads its own table (a running count, with its
// columns declared) asks for batch_concurrency 4. Its table is made from
// the declared columns, and its batches depend on each other's rows, so
// they run one after another: each hour sees exactly the hours before it.
func TestSelfReadingModelRunsBatchesInOrder(t *testing.T) {
	t.Parallel()
	b := executetest.Setup(t, false, map[string]string{"models/running.sql": `MODEL (name demo.running, kind INCREMENTAL_BY_TIME_RANGE (time_column ts, batch_size 1, batch_concurrency 4), cron '@hourly', start '2024-01-01',
  columns (ts TIMESTAMP, seen BIGINT));
SELECT @start_ts AS ts, (SELECT count(*) FROM demo.running) AS seen`})
	pr := b.Load(t)
	tpls, err := execute.Templates(b.Ctx, b.Parser, b.Engine, pr.Snapshots)
	require.NoError(t, err)
	tpl := tpls["demo.running"]
	require.True(t, tpl.ReadsItself)
	exec := at(2024, 1, 1, 8)
	g := executetest.NewGate(b.Engine, 1)
	x := &execute.Executor{Engine: g, Store: b.Store, ProjectDir: b.Dir, Logger: quiet, Clock: clockwork.NewFakeClockAt(exec)}
	// Prepare makes the table from the declared columns, so the first
	// batch can read it.
	require.NoError(t, x.Prepare(b.Ctx, tpl, exec))
	cols, err := b.Engine.Columns(b.Ctx, tpl.Table)
	require.NoError(t, err)
	require.Equal(t, []warehouse.Column{{Name: "ts", Type: "TIMESTAMP"}, {Name: "seen", Type: "BIGINT"}}, cols)
	res, err := x.Execute(b.Ctx, execute.Work{Template: tpl, Execution: exec,
		Ranges: interval.NewSet(interval.NewRange(at(2024, 1, 1, 0), exec))})
	require.NoError(t, err)
	require.Equal(t, 8, res.Batches)
	require.Equal(t, 1, g.Most(), "one batch at a time")
	require.Equal(t, []string{"0", "1", "2", "3", "4", "5", "6", "7"},
		b.Rows(t, "SELECT seen FROM "+b.Engine.QuoteTable(tpl.Table)+" ORDER BY ts"))
	require.NotContains(t, tpl.Query, "demo.running", "the self-reference reads the physical table")
}
