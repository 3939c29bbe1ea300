package scheduler_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/apply"
	"github.com/gapless-dev/gapless/execute/executetest"
	"github.com/gapless-dev/gapless/lease"
	"github.com/gapless-dev/gapless/plan"
	"github.com/gapless-dev/gapless/promotion"
	"github.com/gapless-dev/gapless/scheduler"
	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/warehouse"
)

const (
	throughTen    = "{[2024-01-01T00:00:00Z, 2024-01-01T10:00:00Z)}"
	throughEleven = "{[2024-01-01T00:00:00Z, 2024-01-01T11:00:00Z)}"
)

// tickLines returns the "scheduler tick" log records a daemon wrote.
func tickLines(t *testing.T, d *daemon) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(d.logs.String()))
	for sc.Scan() {
		var rec map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &rec))
		if rec["msg"] == scheduler.MsgTick {
			out = append(out, rec)
		}
	}
	return out
}

// Scenario: prod is computed through 10:00. A tick at 10:30 finds nothing
// due from three state reads and never opens the warehouse. At 11:30 the
// 10:00 hour is due for parent and child: the tick opens the warehouse
// once, runs both, records the hour and closes the warehouse. Snapshots are
// read once, ever: the second tick reuses the cache. A third tick at 11:30
// again opens nothing. Each tick logs one line per environment with stable
// keys.
func TestTickOpensTheWarehouseOnlyWhenWorkIsDue(t *testing.T) {
	t.Parallel()
	b := executetest.Setup(t, false, pair())
	deploy(t, b, "p1", at(2024, 1, 1, 10))
	clk := clockwork.NewFakeClockAt(at(2024, 1, 1, 10).Add(30 * time.Minute))
	d := newDaemon(t, b, "d1", clk, nil)

	res, err := d.Tick(b.Ctx)
	require.NoError(t, err)
	require.False(t, res.OpenedEngine)
	require.Zero(t, d.opens.Load())
	require.Len(t, res.Envs, 1)
	er := res.Envs[0]
	require.Equal(t, int64(1), er.Generation)
	require.Empty(t, er.Due)
	require.Zero(t, er.Lag)
	require.Equal(t, int64(1), d.store.envReads.Load())
	require.Equal(t, int64(1), d.store.snapReads.Load())
	require.Equal(t, int64(1), d.store.intervalReads.Load())

	clk.Advance(time.Hour)
	res, err = d.Tick(b.Ctx)
	require.NoError(t, err)
	require.True(t, res.OpenedEngine)
	require.Equal(t, int64(1), d.opens.Load())
	require.Equal(t, int64(1), d.closes.Load(), "the warehouse is closed at the end of the tick")
	er = res.Envs[0]
	require.ElementsMatch(t, []string{"demo.parent", "demo.child"}, er.Due)
	require.Equal(t, 2, er.Ran)
	require.Equal(t, 2, er.Intervals)
	require.Zero(t, er.Lag)
	require.Equal(t, throughEleven, served(t, b, "demo.parent"))
	require.Equal(t, throughEleven, served(t, b, "demo.child"))
	require.Equal(t, int64(1), d.store.snapReads.Load(), "snapshots are cached by key")

	res, err = d.Tick(b.Ctx)
	require.NoError(t, err)
	require.False(t, res.OpenedEngine)
	require.Equal(t, int64(1), d.opens.Load())

	lines := tickLines(t, d)
	require.Len(t, lines, 3)
	for _, k := range []string{"environment", "generation", "due_models", "ran_models", "intervals", "deferred", "duration_ms", "lag_seconds"} {
		require.Contains(t, lines[1], k)
	}
	require.Equal(t, "prod", lines[1]["environment"])
	require.EqualValues(t, 2, lines[1]["due_models"])
	require.EqualValues(t, 2, lines[1]["ran_models"])
	require.EqualValues(t, 2, lines[1]["intervals"])
	require.EqualValues(t, 0, lines[2]["due_models"])
}

// Scenario: a deploy under the lock policy holds the parent's version lease.
// The tick defers the parent (and the child waits for it), says so in its
// result, its log and its metrics, and reports the lag: at 12:05 the oldest
// missing hour ended at 11:00. Once the deploy lets go, the next tick runs
// both and the lag is back to zero.
func TestTickDefersALeasedVersion(t *testing.T) {
	t.Parallel()
	b := executetest.Setup(t, false, pair())
	deploy(t, b, "p1", at(2024, 1, 1, 10))
	clk := clockwork.NewFakeClockAt(at(2024, 1, 1, 12).Add(5 * time.Minute))
	d := newDaemon(t, b, "d1", clk, nil)
	held, err := lease.TryAcquire(b.Ctx, b.Store, versionLease(t, b, "demo.parent"), lease.Options{Owner: "deploy p2", Clock: clk})
	require.NoError(t, err)

	res, err := d.Tick(b.Ctx)
	require.NoError(t, err)
	er := res.Envs[0]
	require.Equal(t, []string{"demo.parent"}, er.Deferred)
	require.Zero(t, er.Ran)
	require.Equal(t, 65*time.Minute, er.Lag)
	for _, m := range er.Models {
		if m.Model == "demo.parent" {
			self := lease.Self()
			require.Equal(t, fmt.Sprintf("deploy p2 (pid %d on %s)", self.PID, self.Host), m.DeferredBy)
			require.Equal(t, clk.Now().Add(lease.DefaultTTL), m.DeferredUntil)
		}
	}
	require.Equal(t, throughTen, served(t, b, "demo.parent"))
	require.Contains(t, d.logs.String(), `"deferred_models":["demo.parent"]`)
	metrics := scrape(t, d)
	require.Contains(t, metrics, `gapless_scheduler_deferred_total{env="prod",reason="leased"} 1`)
	require.Contains(t, metrics, `gapless_scheduler_lag_seconds{env="prod"} 3900`)

	require.NoError(t, held.Release(b.Ctx))
	res, err = d.Tick(b.Ctx)
	require.NoError(t, err)
	require.Equal(t, 2, res.Envs[0].Ran)
	require.Equal(t, 4, res.Envs[0].Intervals)
	require.Zero(t, res.Envs[0].Lag)
	require.Contains(t, scrape(t, d), `gapless_scheduler_lag_seconds{env="prod"} 0`)
}

// Scenario (seed 000 under trailing-gap(1), with the daemon): p1 serves
// parent and child through 10:00; p2, a breaking change to the parent, was
// planned at 10:00. The daemon's 11:05 tick runs the parent's 10:00 hour
// under generation 1 (the incumbent advances); just after the child passed
// its circuit-breaker check, p2 is applied and promoted, accepting the
// one-hour trailing gap as debt. The child's write is fenced. The daemon
// follows the promotion in the same tick: it re-reads prod and runs the
// promoted parent and child, repairing the debt. Nothing was recorded for
// the retired child.
func TestTickFollowsAPromotionAndRepairsTheTrailingGap(t *testing.T) {
	t.Parallel()
	b := executetest.Setup(t, false, pair())
	deploy(t, b, "p1", at(2024, 1, 1, 10))
	retired, _ := b.Served(t, plan.Prod)
	executetest.WriteFiles(t, b.Dir, map[string]string{"models/parent.sql": strings.Replace(hourly("demo.parent", "", ""),
		"AS INTEGER) AS v", "AS INTEGER) + 100 AS v", 1)})
	p2 := b.Plan(t, "p2", plan.Prod, at(2024, 1, 1, 10), plan.Options{Policy: promotion.Policy{Name: promotion.TrailingGap, MaxTrailingGapIntervals: 1}})
	require.NotEmpty(t, p2.Incumbents)

	exec := at(2024, 1, 1, 11).Add(5 * time.Minute)
	clk := clockwork.NewFakeClockAt(exec)
	var once sync.Once
	var applyErr error
	var debts []state.Debt
	d := newDaemon(t, b, "d1", clk, nil, withHooks(func(p *scheduler.Params) {
		p.Hooks.AfterCheck = func(ctx context.Context, model string) error {
			if model != "demo.child" {
				return nil
			}
			once.Do(func() {
				var res *apply.Result
				res, applyErr = apply.Apply(ctx, apply.Params{Plan: p2, Store: b.Store, Engine: b.Engine, Parser: b.Parser,
					ProjectDir: b.Dir, Clock: clockwork.NewFakeClockAt(exec), Logger: quiet,
					Replan: b.Replanner("p2-r")})
				if res != nil {
					debts = res.Debts
				}
			})
			return applyErr
		}
	}))

	res, err := d.Tick(b.Ctx)
	require.NoError(t, err)
	require.NoError(t, applyErr)
	require.NotEmpty(t, debts, "the promotion accepted the advanced hour as debt")
	er := res.Envs[0]
	require.Equal(t, 1, er.Followed)
	require.Equal(t, int64(2), er.Generation)
	require.Zero(t, er.Lag)
	require.Equal(t, throughEleven, served(t, b, "demo.parent"))
	require.Equal(t, throughEleven, served(t, b, "demo.child"))
	require.Equal(t, throughTen, b.Intervals(t, "demo.child", retired["demo.child"].Version), "the fenced write recorded nothing")
	open, err := b.Store.ListDebts(b.Ctx, state.DebtFilter{Environment: plan.Prod, OpenOnly: true})
	require.NoError(t, err)
	require.Empty(t, open, "the trailing gap was repaired in the same tick")
	require.Equal(t, []string{"11 1155"}, b.Rows(t, "SELECT CAST(count(*) AS BIGINT), CAST(sum(v) AS BIGINT) FROM demo.parent"))
	require.Equal(t, []string{"11 2310"}, b.Rows(t, "SELECT CAST(count(*) AS BIGINT), CAST(sum(v) AS BIGINT) FROM demo.child"))
	require.Contains(t, scrape(t, d), `gapless_scheduler_fenced_total{env="prod"} 1`)
}

// Scenario: Run ticks at once (nothing due at 10:00), then on the clock.
// The 11:00 tick starts the parent's hour; while that batch is in flight
// the daemon is told to stop. The batch finishes and is recorded, no
// further model starts (the child keeps its 10:00 frontier), the version
// lease is released, the warehouse closed, and Run returns nil.
func TestRunStopsAfterTheBatchInFlight(t *testing.T) {
	t.Parallel()
	b := executetest.Setup(t, false, pair())
	deploy(t, b, "p1", at(2024, 1, 1, 10))
	clk := clockwork.NewFakeClockAt(at(2024, 1, 1, 10))
	inflight, release := make(chan struct{}), make(chan struct{})
	d := newDaemon(t, b, "d1", clk, nil)
	d.engine.hold = func(ctx context.Context, p warehouse.InsertIntervalParams) error {
		close(inflight)
		<-release
		return nil
	}
	key := versionLease(t, b, "demo.parent")

	ctx, cancel := context.WithCancel(b.Ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	require.NoError(t, clk.BlockUntilContext(b.Ctx, 1), "the first tick is done; Run waits for its ticker")
	require.Zero(t, d.opens.Load())
	clk.Advance(time.Hour)
	<-inflight
	_, err := b.Store.GetLease(b.Ctx, key)
	require.NoError(t, err, "the batch runs under the version's lease")
	cancel()
	close(release)
	require.NoError(t, <-done)

	require.Equal(t, throughEleven, served(t, b, "demo.parent"), "the batch in flight finished and was recorded")
	require.Equal(t, throughTen, served(t, b, "demo.child"), "no model started after the stop")
	_, err = b.Store.GetLease(b.Ctx, key)
	require.ErrorIs(t, err, state.ErrNotFound, "the lease was released")
	require.Equal(t, int64(1), d.opens.Load())
	require.Equal(t, int64(1), d.closes.Load())
	require.Equal(t, int64(2), d.Health().Ticks)
}

// Scenario: as above, but the batch in flight outlasts the grace period.
// It is cancelled: its warehouse transaction rolls back and nothing is
// recorded; the lease is released and the warehouse closed all the same.
func TestRunCancelsTheBatchInFlightAfterTheGrace(t *testing.T) {
	t.Parallel()
	b := executetest.Setup(t, false, pair())
	deploy(t, b, "p1", at(2024, 1, 1, 10))
	clk := clockwork.NewFakeClockAt(at(2024, 1, 1, 10))
	inflight := make(chan struct{})
	d := newDaemon(t, b, "d1", clk, nil, withHooks(func(p *scheduler.Params) { p.Grace = 30 * time.Second }))
	d.engine.hold = func(ctx context.Context, p warehouse.InsertIntervalParams) error {
		close(inflight)
		<-ctx.Done()
		return context.Cause(ctx)
	}
	key := versionLease(t, b, "demo.parent")

	ctx, cancel := context.WithCancel(b.Ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	require.NoError(t, clk.BlockUntilContext(b.Ctx, 1))
	clk.Advance(time.Hour)
	<-inflight
	cancel()
	// Run's ticker, the lease's renewal ticker and the grace timer.
	require.NoError(t, clk.BlockUntilContext(b.Ctx, 3))
	clk.Advance(30 * time.Second)
	require.NoError(t, <-done)

	require.Equal(t, throughTen, served(t, b, "demo.parent"), "the cancelled batch recorded nothing")
	require.Equal(t, []string{"10"}, b.Rows(t, "SELECT CAST(count(*) AS BIGINT) FROM demo.parent"))
	_, err := b.Store.GetLease(b.Ctx, key)
	require.ErrorIs(t, err, state.ErrNotFound)
	require.Equal(t, d.opens.Load(), d.closes.Load())
	require.Contains(t, d.Health().LastError, "context canceled")
}

// Scenario: an environment that does not exist yet is not an error for the
// daemon: it is reported absent and the tick opens nothing.
func TestTickSkipsAnAbsentEnvironment(t *testing.T) {
	t.Parallel()
	b := executetest.Setup(t, false, pair())
	d := newDaemon(t, b, "d1", clockwork.NewFakeClockAt(at(2024, 1, 2, 0)), nil)
	res, err := d.Tick(b.Ctx)
	require.NoError(t, err)
	require.True(t, res.Envs[0].Absent)
	require.False(t, res.OpenedEngine)
}

// Scenario: the warehouse cannot be opened (another process holds the
// DuckDB file beyond --lock-wait). The tick fails for the environment,
// writes nothing and counts an error run; the next tick tries again.
func TestTickReportsAWarehouseThatCannotBeOpened(t *testing.T) {
	t.Parallel()
	b := executetest.Setup(t, false, pair())
	deploy(t, b, "p1", at(2024, 1, 1, 10))
	locked := errors.New("the warehouse file is in use by another process")
	fail := true
	d := newDaemon(t, b, "d1", clockwork.NewFakeClockAt(at(2024, 1, 1, 11)), nil, func(p *scheduler.Params, d *daemon) {
		open := p.OpenEngine
		p.OpenEngine = func(ctx context.Context) (warehouse.Engine, error) {
			if fail {
				return nil, locked
			}
			return open(ctx)
		}
	})
	res, err := d.Tick(b.Ctx)
	require.ErrorIs(t, err, locked)
	require.ErrorIs(t, res.Envs[0].Err, locked)
	require.Contains(t, scrape(t, d), `gapless_scheduler_runs_total{env="prod",outcome="error"} 1`)
	require.Equal(t, throughTen, served(t, b, "demo.parent"))

	fail = false
	_, err = d.Tick(b.Ctx)
	require.NoError(t, err)
	require.Equal(t, throughEleven, served(t, b, "demo.parent"))
}

// Scenario: a model that fails from 10:00 on (its SQL raises an error) is
// first in the environment's order. The tick reports its failure, naming
// the model and the interval, and still runs the parent and child after
// leaving it out; the failed model records nothing.
func TestTickRunsTheOthersWhenAModelFails(t *testing.T) {
	t.Parallel()
	files := pair()
	files["models/a_bad.sql"] = `MODEL (
  name demo.a_bad,
  kind INCREMENTAL_BY_TIME_RANGE (time_column ts),
  cron '@hourly',
  start '2024-01-01'
);
SELECT g.ts AS ts, CASE WHEN g.ts >= TIMESTAMP '2024-01-01 10:00:00' THEN error('boom') ELSE 1 END AS v
FROM generate_series(@start_ts, @end_ts, INTERVAL '1 hour') AS g(ts)`
	b := executetest.Setup(t, false, files)
	deploy(t, b, "p1", at(2024, 1, 1, 10))
	d := newDaemon(t, b, "d1", clockwork.NewFakeClockAt(at(2024, 1, 1, 11).Add(30*time.Minute)), nil)

	res, err := d.Tick(b.Ctx)
	require.ErrorContains(t, err, "demo.a_bad")
	require.ErrorContains(t, err, "boom")
	er := res.Envs[0]
	require.Equal(t, 2, er.Ran)
	require.Equal(t, throughEleven, served(t, b, "demo.parent"))
	require.Equal(t, throughEleven, served(t, b, "demo.child"))
	require.Equal(t, throughTen, served(t, b, "demo.a_bad"))
	require.Equal(t, 30*time.Minute, er.Lag, "a_bad's 10:00 hour, due since 11:00, is still missing")
	require.Contains(t, scrape(t, d), `gapless_scheduler_runs_total{env="prod",outcome="error"} 1`)
}

// Scenario: the parent's batch outlives its version lease (the daemon
// stalls past the TTL, so a renewal finds the lease expired). The loss is
// counted; the batch's interval write, fenced on the lease, is refused and
// records nothing; the daemon follows at once with a fresh lease and
// computes the hour again, replacing (not duplicating) its rows.
func TestALostLeaseIsCountedAndItsWriteRefused(t *testing.T) {
	t.Parallel()
	b := executetest.Setup(t, false, pair())
	deploy(t, b, "p1", at(2024, 1, 1, 10))
	clk := clockwork.NewFakeClockAt(at(2024, 1, 1, 11))
	renewed := make(chan error, 4)
	l := &ledger{}
	d := newDaemon(t, b, "d1", clk, l, withHooks(func(p *scheduler.Params) {
		p.Lease.TTL = 30 * time.Second
		p.Lease.OnRenew = func(err error) { renewed <- err }
	}))
	inflight, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	d.engine.hold = func(ctx context.Context, p warehouse.InsertIntervalParams) error {
		once.Do(func() {
			close(inflight)
			<-release
		})
		return nil
	}

	done := make(chan error, 1)
	var res scheduler.TickResult
	go func() {
		var err error
		res, err = d.Tick(b.Ctx)
		done <- err
	}()
	<-inflight
	require.NoError(t, clk.BlockUntilContext(b.Ctx, 1), "the lease's renewal ticker")
	clk.Advance(31 * time.Second)
	require.ErrorIs(t, <-renewed, state.ErrLeaseLost)
	close(release)
	require.NoError(t, <-done)

	er := res.Envs[0]
	require.Equal(t, 1, er.Followed)
	require.Equal(t, throughEleven, served(t, b, "demo.parent"))
	require.Equal(t, throughEleven, served(t, b, "demo.child"))
	require.Equal(t, []string{"11"}, b.Rows(t, "SELECT CAST(count(*) AS BIGINT) FROM demo.parent"))
	parents := 0
	for _, e := range l.all() {
		if strings.Contains(e.table, "parent") {
			parents++
		}
	}
	require.Equal(t, 2, parents, "the refused hour was computed again")
	m := scrape(t, d)
	require.Contains(t, m, "gapless_scheduler_lease_losses_total 1")
	require.Contains(t, m, `gapless_scheduler_fenced_total{env="prod"} 1`)
}
