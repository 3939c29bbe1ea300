package scheduler_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/execute/executetest"
	"github.com/gapless-dev/gapless/plan"
	"github.com/gapless-dev/gapless/scheduler"
	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/warehouse"
)

// Scenario: four daemons on one state store and one warehouse tick at the
// same execution time over six independent hourly models and a child of
// the first, three hours due each, one hour per batch: more workers than
// any model has room for. The first batch any daemon starts is held until
// another daemon has been refused a lease, so the daemons provably overlap.
// The warehouse's record of executions (begin and end on one shared
// counter) shows that no two executions of one model version ever
// overlapped, and that together the daemons computed every due hour exactly
// once; the refused daemons reported their deferrals.
func TestDaemonsNeverRunOneVersionAtOnce(t *testing.T) {
	t.Parallel()
	files := map[string]string{"models/c1.sql": hourly("demo.c1", "demo.m1", ", batch_size 1")}
	for i := 1; i <= 6; i++ {
		files[fmt.Sprintf("models/m%d.sql", i)] = hourly(fmt.Sprintf("demo.m%d", i), "", ", batch_size 1")
	}
	b := executetest.Setup(t, false, files)
	deploy(t, b, "p1", at(2024, 1, 1, 10))
	clk := clockwork.NewFakeClockAt(at(2024, 1, 1, 13).Add(5 * time.Minute))

	l := &ledger{}
	refused := make(chan struct{})
	var refuseOnce sync.Once
	var holding atomic.Bool
	hold := func(ctx context.Context, _ warehouse.InsertIntervalParams) error {
		if !holding.CompareAndSwap(false, true) {
			return nil
		}
		select {
		case <-refused:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	const daemons = 4
	ds := make([]*daemon, daemons)
	for i := range ds {
		ds[i] = newDaemon(t, b, fmt.Sprintf("d%d", i), clk, l)
		ds[i].engine.hold = hold
		ds[i].store.onAcquire = func(_ string, err error) {
			if errors.Is(err, state.ErrLeaseHeld) {
				refuseOnce.Do(func() { close(refused) })
			}
		}
	}

	results := make([]scheduler.TickResult, daemons)
	errs := make([]error, daemons)
	var wg sync.WaitGroup
	for i, d := range ds {
		wg.Go(func() { results[i], errs[i] = d.Tick(b.Ctx) })
	}
	wg.Wait()
	deferred := 0
	for i := range ds {
		require.NoError(t, errs[i], "daemon %d", i)
		deferred += len(results[i].Envs[0].Deferred)
	}
	require.Positive(t, deferred, "the daemons overlapped and deferred leased versions")
	// A child whose parent another daemon was still computing may be left
	// for the next tick of any daemon.
	_, err := ds[0].Tick(b.Ctx)
	require.NoError(t, err)

	execs := l.all()
	byTable := map[string][]execution{}
	for _, e := range execs {
		require.NoError(t, e.err)
		byTable[e.table] = append(byTable[e.table], e)
	}
	require.Len(t, byTable, 7)
	for table, es := range byTable {
		slices.SortFunc(es, func(a, b execution) int { return int(a.began - b.began) })
		for i := 1; i < len(es); i++ {
			require.Less(t, es[i-1].did, es[i].began, "%s: %s (%s) and %s (%s) overlapped", table,
				es[i-1].daemon, es[i-1].start, es[i].daemon, es[i].start)
		}
		hours := map[time.Time]int{}
		for _, e := range es {
			require.Equal(t, time.Hour, e.end.Sub(e.start))
			hours[e.start]++
		}
		require.Equal(t, map[time.Time]int{at(2024, 1, 1, 10): 1, at(2024, 1, 1, 11): 1, at(2024, 1, 1, 12): 1}, hours,
			"%s: every due hour computed exactly once", table)
	}
	servedNow, _ := b.Served(t, plan.Prod)
	for name := range servedNow {
		require.Equal(t, "{[2024-01-01T00:00:00Z, 2024-01-01T13:00:00Z)}", served(t, b, name), name)
	}
	daemonsThatRan := map[string]bool{}
	for _, e := range execs {
		daemonsThatRan[e.daemon] = true
	}
	require.Greater(t, len(daemonsThatRan), 1, "the work was shared")
}

// Scenario: daemon B reads the parent's due hour, then (held by the test)
// takes the version's lease only after daemon A has computed that hour and
// finished its tick. B reads the intervals again under the lease and
// computes nothing: each hour is computed once, not once per daemon that
// saw it due.
func TestADaemonRereadsUnderTheLease(t *testing.T) {
	t.Parallel()
	b := executetest.Setup(t, false, pair())
	deploy(t, b, "p1", at(2024, 1, 1, 10))
	clk := clockwork.NewFakeClockAt(at(2024, 1, 1, 11))
	l := &ledger{}
	bRead, aDone := make(chan struct{}), make(chan struct{})
	da := newDaemon(t, b, "a", clk, l)
	var heldOnce sync.Once
	da.engine.hold = func(ctx context.Context, _ warehouse.InsertIntervalParams) error {
		heldOnce.Do(func() { <-bRead })
		return nil
	}
	db := newDaemon(t, b, "b", clk, l)
	var bOnce sync.Once
	db.store.beforeAcquire = func(string) {
		bOnce.Do(func() {
			close(bRead)
			<-aDone
		})
	}

	var wg sync.WaitGroup
	var resB scheduler.TickResult
	var errB error
	wg.Go(func() { resB, errB = db.Tick(b.Ctx) })
	_, errA := da.Tick(b.Ctx)
	close(aDone)
	wg.Wait()
	require.NoError(t, errA)
	require.NoError(t, errB)
	require.Zero(t, resB.Envs[0].Ran)

	execs := l.all()
	require.Len(t, execs, 2, "%+v", execs)
	for _, e := range execs {
		require.Equal(t, "a", e.daemon)
	}
	require.Equal(t, throughEleven, served(t, b, "demo.parent"))
	require.Equal(t, throughEleven, served(t, b, "demo.child"))
}
