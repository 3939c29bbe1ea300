package ingest_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/connector"
	"github.com/gapless-dev/gapless/connector/files"
	"github.com/gapless-dev/gapless/ingest"
	"github.com/gapless-dev/gapless/source"
	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/warehouse"
)

var quiet = slog.New(slog.DiscardHandler)

// passed is one pass of a Loop, as OnPass saw it.
type passed struct {
	rep ingest.Report
	err error
}

// loop starts ingest.Loop over e's source every minute on e's fake clock,
// with its warehouse opened by open (e.wh when nil); passes come out of
// the returned channel, and stop cancels the loop and returns its error.
func (e *env) loop(open func(context.Context) (warehouse.Ingester, error)) (<-chan passed, func() error) {
	e.t.Helper()
	c, err := files.New(e.d, files.Options{Root: e.root, Clock: e.clk, ChunkFiles: 2})
	require.NoError(e.t, err)
	ctx, cancel := context.WithCancel(e.t.Context())
	passes := make(chan passed, 16)
	done := make(chan error, 1)
	go func() {
		done <- ingest.Loop(ctx, ingest.LoopParams{
			Params: ingest.Params{Store: e.store, Engine: e.wh, Sources: map[string]*source.Definition{src: e.d},
				Connectors: []connector.Connector{c}, Root: e.root, Clock: e.clk, Logger: quiet},
			Open: open, Interval: time.Minute,
			OnPass: func(r ingest.Report, err error) { passes <- passed{r, err} },
		})
	}()
	return passes, func() error {
		cancel()
		return <-done
	}
}

// next waits for the loop's next pass and, once the loop waits on its
// ticker again, returns it.
func (e *env) next(passes <-chan passed) passed {
	e.t.Helper()
	var p passed
	select {
	case p = <-passes:
	case <-e.t.Context().Done():
		e.t.Fatal("no pass")
	}
	require.NoError(e.t, e.clk.BlockUntilContext(e.t.Context(), 1), "the loop waits for its ticker")
	return p
}

func TestLoopPassesEveryIntervalUntilStopped(t *testing.T) {
	// Scenario: a loop every minute primes the source at once (a.csv), and
	// then waits: nothing passes until the clock moves a minute. A bad file
	// fails the source's second pass, and the loop carries on: once the
	// file is fixed, the third pass applies it and the file after it, in
	// order. Stopping the loop returns nil and runs no further pass.
	eachStore(t, func(t *testing.T, e *env) {
		e.csv("a.csv", 1, 2)
		passes, stop := e.loop(nil)
		p := e.next(passes)
		require.NoError(t, p.err)
		require.NoError(t, p.rep.Err())
		require.Equal(t, int64(1), p.rep.Sources[0].Built)
		e.requireServes(2)

		e.write("b.csv", "id,v\nnot-an-id,x\n")
		e.csv("c.csv", 4)
		e.clk.Advance(59 * time.Second)
		require.Empty(t, passes, "no pass before the interval")
		e.clk.Advance(time.Second)
		p = e.next(passes)
		require.NoError(t, p.err)
		var be *ingest.BatchError
		require.ErrorAs(t, p.rep.Err(), &be)
		require.Contains(t, be.Error(), "b.csv")
		e.requireServes(2)

		e.csv("b.csv", 3)
		e.clk.Advance(time.Minute)
		p = e.next(passes)
		require.NoError(t, p.rep.Err())
		require.Equal(t, 2, p.rep.Sources[0].Applied)
		e.requireServes(4)

		require.NoError(t, stop())
		require.Empty(t, passes, "no pass after the stop")
	})
}

func TestLoopOpensTheWarehousePerPassAndSurvivesAFailedOpen(t *testing.T) {
	// Scenario: a loop opening its warehouse for each pass: the first open
	// fails, which the pass reports for the source that needed it and the
	// loop survives; the second pass opens it,
	// lands a.csv and closes it again before waiting.
	eachStore(t, func(t *testing.T, e *env) {
		e.csv("a.csv", 1)
		opens, closes := 0, 0
		open := func(context.Context) (warehouse.Ingester, error) {
			opens++
			if opens == 1 {
				return nil, errors.New("the file is held by another process")
			}
			return &closing{engine: e.wh, closes: &closes}, nil
		}
		passes, stop := e.loop(open)
		p := e.next(passes)
		require.NoError(t, p.err, "the warehouse is opened by the source that needs it")
		require.ErrorContains(t, p.rep.Err(), "opening the warehouse: the file is held by another process")
		require.Zero(t, p.rep.Sources[0].Applied)

		e.clk.Advance(time.Minute)
		p = e.next(passes)
		require.NoError(t, p.err)
		require.NoError(t, p.rep.Err())
		e.requireServes(1)
		require.NoError(t, stop())
		require.Equal(t, [2]int{2, 1}, [2]int{opens, closes}, "opened per pass, closed after it")
	})
}

// closing is the warehouse whose Close is counted, not done (the test
// closes it).
type closing struct {
	engine
	closes *int
}

func (c *closing) Close() error {
	*c.closes++
	return nil
}

func TestSelectRestrictsToNamedSources(t *testing.T) {
	defs := map[string]*source.Definition{"raw.events": def(), "raw.orders": def()}
	got, err := ingest.Select(defs, nil)
	require.NoError(t, err)
	require.Len(t, got, 2)
	got, err = ingest.Select(defs, []string{"raw.orders"})
	require.NoError(t, err)
	require.Equal(t, []string{"raw.orders"}, keys(got))

	_, err = ingest.Select(defs, []string{"raw.orders", "raw.evnts"})
	var ue *ingest.UnknownSourceError
	require.ErrorAs(t, err, &ue)
	require.Equal(t, "raw.evnts", ue.Name)
	require.Equal(t, "raw.events", ue.Closest)
	require.EqualError(t, err, "source raw.evnts: no such source in the project; did you mean raw.events?")
	_, err = ingest.Select(defs, []string{"zzz"})
	require.EqualError(t, err, "source zzz: no such source in the project")
}

func keys(m map[string]*source.Definition) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestLoopStoppedMidPassFinishesThePass(t *testing.T) {
	// Scenario: the stop (SIGINT) arrives while the first pass is building
	// generation 1 (a hook cancels the loop's context right after the plan).
	// The pass goes on to the swap under its own context: the source serves
	// every row, PRIMED, and Loop returns nil without another pass.
	eachStore(t, func(t *testing.T, e *env) {
		e.csv("a.csv", 1, 2, 3)
		c, err := files.New(e.d, files.Options{Root: e.root, Clock: e.clk, ChunkFiles: 2})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		var reps []ingest.Report
		err = ingest.Loop(ctx, ingest.LoopParams{
			Params: ingest.Params{Store: e.store, Engine: e.wh, Sources: map[string]*source.Definition{src: e.d},
				Connectors: []connector.Connector{c}, Root: e.root, Clock: e.clk, Logger: quiet,
				Hooks: ingest.Hooks{AfterPlan: func(string, int64) error { cancel(); return nil }}},
			Interval: time.Minute,
			OnPass:   func(r ingest.Report, _ error) { reps = append(reps, r) },
		})
		require.NoError(t, err)
		require.Len(t, reps, 1)
		require.NoError(t, reps[0].Err())
		require.Equal(t, int64(1), reps[0].Sources[0].Built)
		require.Equal(t, state.SourcePrimed, e.source().State())
		e.requireServes(3)
	})
}
