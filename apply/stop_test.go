package apply_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/apply"
	"github.com/gapless-dev/gapless/execute"
	"github.com/gapless-dev/gapless/execute/executetest"
	"github.com/gapless-dev/gapless/plan"
	"github.com/gapless-dev/gapless/snapshot"
	"github.com/gapless-dev/gapless/warehouse"
)

const steadyModel = `MODEL (
  name demo.steady,
  kind INCREMENTAL_BY_TIME_RANGE (time_column ts, batch_size 1),
  cron '@daily',
  start '2024-01-01'
);
SELECT g.ts AS ts, 1 AS n FROM generate_series(@start_ts, @end_ts, INTERVAL 1 HOUR) AS g(ts)`

// gateEngine holds the first batch of demo.steady in flight until release
// is closed, and holds every batch of demo.fragile until that first batch
// is in flight.
type gateEngine struct {
	warehouse.Engine
	steadyIn chan struct{} // closed once steady's first batch is in flight
	once     sync.Once
	release  chan struct{}
}

func (g *gateEngine) InsertInterval(ctx context.Context, p warehouse.InsertIntervalParams) (int64, error) {
	switch name := p.Table.String(); {
	case strings.Contains(name, "steady"):
		first := false
		g.once.Do(func() { first = true; close(g.steadyIn) })
		if first {
			<-g.release
		}
	case strings.Contains(name, "fragile"):
		<-g.steadyIn
	}
	return g.Engine.InsertInterval(ctx, p)
}

// Scenario: two independent models backfill side by side; one fails on its
// third day while the other's first batch is in flight. The failure is the
// apply's error, and it stops the other model without interrupting it: the
// batch in flight commits and is recorded, and no later batch of it starts
// (the next apply resumes from there).
func TestFirstFailureLetsInFlightBatchesFinishAndStartsNoMore(t *testing.T) {
	t.Parallel()
	b := executetest.Setup(t, false, map[string]string{
		"models/raw.sql": fragileProject, "models/fragile.sql": fragileModel, "models/steady.sql": steadyModel})
	rawTable(t, b, "boom")
	exec := at(2024, 1, 6, 0)
	p := b.Plan(t, "p1", plan.Prod, exec, plan.Options{})
	g := &gateEngine{Engine: b.Engine, steadyIn: make(chan struct{}), release: make(chan struct{})}
	var (
		mu       sync.Mutex
		failures = map[string]error{}
	)
	_, err := apply.Apply(b.Ctx, apply.Params{
		Plan: p, Store: b.Store, Engine: g, Parser: b.Parser, ProjectDir: b.Dir, Workers: 2,
		Clock: clockwork.NewFakeClockAt(exec), Logger: quiet,
		OnEvent: func(e apply.Event) {
			mf, ok := e.(apply.ModelFailed)
			if !ok {
				return
			}
			mu.Lock()
			failures[mf.Model] = mf.Err
			mu.Unlock()
			if mf.Model == "demo.fragile" {
				close(g.release)
			}
		},
	})
	var be *execute.BatchError
	require.ErrorAs(t, err, &be)
	require.Equal(t, "demo.fragile", be.Model, "the first failure is the apply's error")
	require.False(t, errors.Is(err, execute.ErrStopped))

	i := slices.IndexFunc(p.Snapshots, func(s *snapshot.Snapshot) bool { return s.Name == "demo.steady" })
	require.GreaterOrEqual(t, i, 0)
	steady := p.Snapshots[i]
	require.Equal(t, "{[2024-01-01T00:00:00Z, 2024-01-02T00:00:00Z)}", b.Intervals(t, steady.Name, steady.Version),
		"the batch in flight committed and was recorded; no later batch started")
	require.Equal(t, []string{"24"}, b.Rows(t, "SELECT count(*) FROM "+steady.PhysicalSchema()+"."+steady.PhysicalTable()))
	mu.Lock()
	defer mu.Unlock()
	require.ErrorIs(t, failures["demo.steady"], execute.ErrStopped)
	require.ErrorAs(t, failures["demo.fragile"], &be)
}
