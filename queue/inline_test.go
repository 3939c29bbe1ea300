package queue_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/queue"
	"github.com/gapless-dev/gapless/queue/queuetest"
)

type (
	chainArgs struct{ N int }
	stepArgs  struct{ Name string }
	sleepy    struct{ Name string }
)

func (chainArgs) Kind() string { return "inline_chain" }
func (stepArgs) Kind() string  { return "inline_step" }
func (sleepy) Kind() string    { return "inline_sleepy" }

func newInline(w *queue.Workers, rec *queuetest.Recorder, clock clockwork.Clock) *queue.Inline {
	return queue.NewInlineOptions(w, queue.InlineOptions{Logger: slog.New(slog.DiscardHandler), OnEvent: rec.Add, Clock: clock, MaxSnoozes: 3})
}

// Scenario: `gapless github run` plans a PR whose job fans out: each job
// inserts the next, and inserts itself again as a unique job while it
// runs (a duplicate). One Drain runs the whole chain, in order.
func TestInlineDrainRunsJobsInsertedByJobs(t *testing.T) {
	t.Parallel()
	rec := queuetest.NewRecorder()
	w := queue.NewWorkers()
	var in *queue.Inline
	var seen []int
	queue.AddWorker(w, func(ctx context.Context, j *queue.Job[chainArgs]) error {
		seen = append(seen, j.Args.N)
		dup, err := in.Insert(ctx, j.Args, &queue.InsertOpts{Unique: true})
		if err != nil {
			return err
		}
		if !dup.Duplicate || dup.ID != j.ID {
			return queue.Cancel(fmt.Errorf("self insert while running: %+v, want a duplicate of %d", dup, j.ID))
		}
		if j.Args.N < 5 {
			_, err := in.Insert(ctx, chainArgs{N: j.Args.N + 1}, &queue.InsertOpts{Unique: true})
			return err
		}
		return nil
	}, queue.WorkerOptions{})
	in = newInline(w, rec, nil)
	_, err := in.Insert(t.Context(), chainArgs{N: 1}, &queue.InsertOpts{Unique: true})
	require.NoError(t, err)
	require.NoError(t, in.Drain(t.Context()))
	require.Equal(t, []int{1, 2, 3, 4, 5}, seen)
	counts, err := in.Counts(t.Context())
	require.NoError(t, err)
	require.Equal(t, []queue.Count{{Kind: "inline_chain", State: queue.StateCompleted, N: 5}}, counts)
	require.NoError(t, in.Drain(t.Context()), "draining an empty runner is a no-op")
}

// Scenario: one job of a run keeps failing: Drain runs every other job,
// then reports the discarded one by kind, id and error, so the workflow
// step fails.
func TestInlineDrainReportsDiscardedJobs(t *testing.T) {
	t.Parallel()
	rec := queuetest.NewRecorder()
	w := queue.NewWorkers()
	queue.AddWorker(w, func(_ context.Context, j *queue.Job[stepArgs]) error {
		if j.Args.Name == "bad" {
			return errors.New("github is down")
		}
		return nil
	}, queue.WorkerOptions{MaxAttempts: 2})
	in := newInline(w, rec, nil)
	bad, err := in.Insert(t.Context(), stepArgs{Name: "bad"}, nil)
	require.NoError(t, err)
	good, err := in.Insert(t.Context(), stepArgs{Name: "good"}, nil)
	require.NoError(t, err)
	err = in.Drain(t.Context())
	require.ErrorIs(t, err, queue.ErrJobsDiscarded)
	require.ErrorContains(t, err, fmt.Sprintf("inline_step job %d: attempt 2: github is down", bad.ID))
	require.Len(t, rec.ForJob(good.ID), 1)
	require.Equal(t, queue.EventCompleted, rec.ForJob(good.ID)[0].State)
}

// Scenario: GitHub has not computed mergeability yet, so the job snoozes
// 15s. Drain first runs the other job, then waits on its clock, not
// sleeping, and runs the snoozed job when the 15s have passed.
func TestInlineSnoozeWaitsOnItsClockAfterOtherJobs(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	clock := clockwork.NewFakeClock()
	rec := queuetest.NewRecorder()
	w := queue.NewWorkers()
	var mu sync.Mutex
	runs := 0
	queue.AddWorker(w, func(context.Context, *queue.Job[sleepy]) error {
		mu.Lock()
		defer mu.Unlock()
		runs++
		if runs == 1 {
			return queue.Snooze(15 * time.Second)
		}
		return nil
	}, queue.WorkerOptions{})
	queue.AddWorker(w, func(context.Context, *queue.Job[stepArgs]) error { return nil }, queue.WorkerOptions{})
	in := newInline(w, rec, clock)
	s, err := in.Insert(ctx, sleepy{Name: "pr"}, nil)
	require.NoError(t, err)
	o, err := in.Insert(ctx, stepArgs{Name: "other"}, nil)
	require.NoError(t, err)

	done := make(chan error, 1)
	go func() { done <- in.Drain(ctx) }()
	require.NoError(t, clock.BlockUntilContext(ctx, 1), "Drain waits on the clock")
	got := rec.Events()
	require.Len(t, got, 2)
	require.Equal(t, queue.Event{Kind: "inline_sleepy", JobID: s.ID, Attempt: 1, State: queue.EventSnoozed}, got[0])
	require.Equal(t, o.ID, got[1].JobID, "the other job runs while the snoozed one waits")
	select {
	case err := <-done:
		t.Fatalf("Drain returned (%v) before the snooze ended", err)
	default:
	}
	clock.Advance(15 * time.Second)
	require.NoError(t, <-done)
	require.Equal(t, queue.Event{Kind: "inline_sleepy", JobID: s.ID, Attempt: 1, State: queue.EventCompleted}, rec.Events()[2])
}

// Scenario: a job snoozes forever. Inline gives up after MaxSnoozes
// snoozes in one Drain: the job is discarded, saying why.
func TestInlineSnoozeIsBounded(t *testing.T) {
	t.Parallel()
	rec := queuetest.NewRecorder()
	w := queue.NewWorkers()
	queue.AddWorker(w, func(context.Context, *queue.Job[sleepy]) error { return queue.Snooze(0) }, queue.WorkerOptions{})
	in := newInline(w, rec, nil)
	ins, err := in.Insert(t.Context(), sleepy{Name: "forever"}, nil)
	require.NoError(t, err)
	err = in.Drain(t.Context())
	require.ErrorIs(t, err, queue.ErrJobsDiscarded)
	require.ErrorContains(t, err, "snoozed 3 times in one drain")
	evs := rec.ForJob(ins.ID)
	require.Len(t, evs, 4)
	require.Equal(t, queue.EventDiscarded, evs[3].State)
	rows, err := in.Jobs(t.Context(), queue.JobFilter{IDs: []int64{ins.ID}})
	require.NoError(t, err)
	require.Equal(t, queue.StateDiscarded, rows[0].State)
	require.Equal(t, 3, rows[0].Snoozes)
}

// Scenario: jobs of several priorities wait; the lower number runs first,
// and jobs of one priority run in insert order.
func TestInlineRunsByPriorityThenOrder(t *testing.T) {
	t.Parallel()
	rec := queuetest.NewRecorder()
	w := queue.NewWorkers()
	var order []string
	queue.AddWorker(w, func(_ context.Context, j *queue.Job[stepArgs]) error {
		order = append(order, j.Args.Name)
		return nil
	}, queue.WorkerOptions{})
	in := newInline(w, rec, nil)
	for _, p := range []struct {
		name string
		prio int
	}{{"c", 3}, {"a1", 1}, {"b", 2}, {"a2", 0}} {
		_, err := in.Insert(t.Context(), stepArgs{Name: p.name}, &queue.InsertOpts{Priority: p.prio})
		require.NoError(t, err)
	}
	require.NoError(t, in.Drain(t.Context()))
	require.Equal(t, []string{"a1", "a2", "b", "c"}, order)
}

// Scenario: a job calls Drain on its own runner (a programming error):
// the nested Drain is refused and the job fails, rather than deadlocking.
func TestInlineDrainFromAJobIsRefused(t *testing.T) {
	t.Parallel()
	rec := queuetest.NewRecorder()
	w := queue.NewWorkers()
	var in *queue.Inline
	var nested error
	queue.AddWorker(w, func(ctx context.Context, _ *queue.Job[stepArgs]) error {
		nested = in.Drain(ctx)
		return nil
	}, queue.WorkerOptions{})
	in = newInline(w, rec, nil)
	_, err := in.Insert(t.Context(), stepArgs{Name: "x"}, nil)
	require.NoError(t, err)
	require.NoError(t, in.Drain(t.Context()))
	require.ErrorContains(t, nested, "already draining")
}

// Scenario: a kind no handler is registered for is refused at insert, by
// Inline as by Queue, rather than failing later.
func TestInsertOfAnUnknownKindIsRefused(t *testing.T) {
	t.Parallel()
	w := queue.NewWorkers()
	queue.AddWorker(w, func(context.Context, *queue.Job[stepArgs]) error { return nil }, queue.WorkerOptions{})
	in := queue.NewInline(w, slog.New(slog.DiscardHandler), nil)
	_, err := in.Insert(t.Context(), sleepy{}, nil)
	require.ErrorContains(t, err, `no worker registered for kind "inline_sleepy"`)

	cfg := sqliteConfig(t)
	cfg.Workers = w
	q, err := queue.Open(t.Context(), cfg)
	require.NoError(t, err)
	_, err = q.Insert(t.Context(), sleepy{}, nil)
	require.ErrorContains(t, err, "inline_sleepy")
}
