// Package queuetest is the queue's conformance suite: Run on River with
// each driver (the queue package runs it on SQLite and PostgreSQL), and the
// outcome cases also on Inline (RunInline). Tests never sleep: they wait on
// OnEvent signals, bounded by a context.
package queuetest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/queue"
)

// waitFor bounds every wait of the suite: a case that waits longer is broken.
const waitFor = 15 * time.Second

// Tune sets what the suite needs on a driver's Config: small retry delays,
// short fetch intervals, a quiet logger. newConfig's other fields are kept.
func Tune(cfg *queue.Config) {
	cfg.RetryDelay = func(int) time.Duration { return time.Millisecond }
	cfg.FetchCooldown = 5 * time.Millisecond
	cfg.FetchPollInterval = 20 * time.Millisecond
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
}

// Recorder keeps the events a queue reports, and lets a test wait for them.
type Recorder struct {
	mu      sync.Mutex
	evs     []queue.Event
	changed chan struct{}
}

// NewRecorder returns an empty Recorder; pass its Add as Config.OnEvent.
func NewRecorder() *Recorder { return &Recorder{changed: make(chan struct{})} }

// Add records e (an OnEvent callback).
func (r *Recorder) Add(e queue.Event) {
	r.mu.Lock()
	r.evs = append(r.evs, e)
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
}

// Events returns the events so far, in order.
func (r *Recorder) Events() []queue.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]queue.Event(nil), r.evs...)
}

// ForJob returns the events of one job, in order.
func (r *Recorder) ForJob(id int64) []queue.Event {
	var out []queue.Event
	for _, e := range r.Events() {
		if e.JobID == id {
			out = append(out, e)
		}
	}
	return out
}

// Wait returns when pred holds on the events, or ctx's error.
func (r *Recorder) Wait(ctx context.Context, pred func([]queue.Event) bool) error {
	for {
		r.mu.Lock()
		ok, ch := pred(r.evs), r.changed
		r.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
	}
}

// Final reports whether the events hold a final outcome (completed,
// cancelled or discarded) for each of ids.
func Final(ids ...int64) func([]queue.Event) bool {
	return func(evs []queue.Event) bool {
		done := map[int64]bool{}
		for _, e := range evs {
			if e.State == queue.EventCompleted || e.State == queue.EventCancelled || e.State == queue.EventDiscarded {
				done[e.JobID] = true
			}
		}
		for _, id := range ids {
			if !done[id] {
				return false
			}
		}
		return true
	}
}

// states returns each event's "state@attempt".
func states(evs []queue.Event) []string {
	out := make([]string, 0, len(evs))
	for _, e := range evs {
		out = append(out, fmt.Sprintf("%s@%d", e.State, e.Attempt))
	}
	return out
}

// target is a runner under test: a Queue (started by start) or an Inline.
type target struct {
	enq   queue.Enqueuer
	jobs  func(ctx context.Context, f queue.JobFilter) ([]queue.JobRow, error)
	start func(t *testing.T)
	// settle runs (Inline) or waits for (Queue) the jobs until pred holds.
	settle func(t *testing.T, pred func([]queue.Event) bool)
	rec    *Recorder
}

func (g *target) insert(t *testing.T, args queue.Args, opts *queue.InsertOpts) queue.Inserted {
	t.Helper()
	ins, err := g.enq.Insert(context.Background(), args, opts)
	require.NoError(t, err)
	return ins
}

func (g *target) job(t *testing.T, id int64) queue.JobRow {
	t.Helper()
	rows, err := g.jobs(context.Background(), queue.JobFilter{IDs: []int64{id}})
	require.NoError(t, err)
	require.Len(t, rows, 1, "job %d", id)
	return rows[0]
}

type opener func(t *testing.T, w *queue.Workers) *target

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	t.Cleanup(cancel)
	return ctx
}

// openQueue opens a Queue on cfg with w and a fresh recorder, stopped when
// t ends.
func openQueue(t *testing.T, cfg queue.Config, w *queue.Workers, rec *Recorder) *queue.Queue {
	t.Helper()
	cfg.Workers = w
	cfg.OnEvent = rec.Add
	q, err := queue.Open(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		defer cancel()
		require.NoError(t, q.Stop(ctx))
	})
	return q
}

func riverOpener(newConfig func(t *testing.T) queue.Config) opener {
	return func(t *testing.T, w *queue.Workers) *target {
		cfg := newConfig(t)
		Tune(&cfg)
		rec := NewRecorder()
		q := openQueue(t, cfg, w, rec)
		return &target{
			enq: q, jobs: q.Jobs, rec: rec,
			start: func(t *testing.T) { require.NoError(t, q.Start(context.Background())) },
			settle: func(t *testing.T, pred func([]queue.Event) bool) {
				t.Helper()
				require.NoError(t, rec.Wait(ctxFor(t), pred), "events: %v", rec.Events())
			},
		}
	}
}

func inlineOpener(t *testing.T, w *queue.Workers) *target {
	rec := NewRecorder()
	in := queue.NewInlineOptions(w, queue.InlineOptions{Logger: slog.New(slog.DiscardHandler), OnEvent: rec.Add})
	return &target{
		enq: in, jobs: in.Jobs, rec: rec,
		start: func(*testing.T) {},
		settle: func(t *testing.T, pred func([]queue.Event) bool) {
			t.Helper()
			if err := in.Drain(ctxFor(t)); err != nil && !errors.Is(err, queue.ErrJobsDiscarded) {
				require.NoError(t, err)
			}
			require.True(t, pred(rec.Events()), "events: %v", rec.Events())
		},
	}
}

// Args of the suite's jobs, one kind per role.
type (
	echoArgs   struct{ Key string }
	failArgs   struct{ Key string }
	flakyArgs  struct{ Key string }
	cappedArgs struct{ Key string }
	panicArgs  struct{ Key string }
	snoozeArgs struct{ Key string }
	cancelArgs struct{ Key string }
	blockArgs  struct{ Key string }
	countBArgs struct{ Key string }
	keyedArgs  struct{ Repo, SHA string }
)

// DefaultInsertOpts makes keyedArgs unique, capped at 3 attempts, priority 2.
func (keyedArgs) DefaultInsertOpts() queue.InsertOpts {
	return queue.InsertOpts{Unique: true, MaxAttempts: 3, Priority: 2}
}

func (echoArgs) Kind() string   { return "queuetest_echo" }
func (failArgs) Kind() string   { return "queuetest_fail" }
func (flakyArgs) Kind() string  { return "queuetest_flaky" }
func (cappedArgs) Kind() string { return "queuetest_capped" }
func (panicArgs) Kind() string  { return "queuetest_panic" }
func (snoozeArgs) Kind() string { return "queuetest_snooze" }
func (cancelArgs) Kind() string { return "queuetest_cancel" }
func (blockArgs) Kind() string  { return "queuetest_block" }
func (countBArgs) Kind() string { return "queuetest_count_b" }
func (keyedArgs) Kind() string  { return "queuetest_keyed" }

// ledger counts runs by job id, and remembers what each run saw.
type ledger struct {
	mu       sync.Mutex
	runs     map[int64]int
	attempts map[int64][]int
	keys     map[int64]string
	max      map[int64]int
}

func newLedger() *ledger {
	return &ledger{runs: map[int64]int{}, attempts: map[int64][]int{}, keys: map[int64]string{}, max: map[int64]int{}}
}

func (l *ledger) record(id int64, attempt, maxAttempts int, key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.runs[id]++
	l.attempts[id] = append(l.attempts[id], attempt)
	l.keys[id] = key
	l.max[id] = maxAttempts
}

func (l *ledger) count(id int64) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.runs[id]
}

func (l *ledger) attemptsOf(id int64) []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]int(nil), l.attempts[id]...)
}

func (l *ledger) key(id int64) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.keys[id]
}

func (l *ledger) maxOf(id int64) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.max[id]
}

func (l *ledger) total() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, v := range l.runs {
		n += v
	}
	return n
}

// addEcho registers echoArgs: record the run, complete.
func addEcho(w *queue.Workers, l *ledger) {
	queue.AddWorker(w, func(_ context.Context, j *queue.Job[echoArgs]) error {
		l.record(j.ID, j.Attempt, j.MaxAttempts, j.Args.Key)
		return nil
	}, queue.WorkerOptions{})
}

// outcomeCases run on every runner: River on each driver, and Inline.
var outcomeCases = []struct {
	name string
	run  func(t *testing.T, open opener)
}{
	{"RunsOnceAndCompletes", runsOnceAndCompletes},
	{"UniqueIsADuplicateWhilePending", uniqueIsADuplicateWhilePending},
	{"FailingJobIsRetriedThenDiscarded", failingJobIsRetriedThenDiscarded},
	{"PanickingJobIsRetriedThenDiscardedAndOthersRun", panickingJobIsRetriedThenDiscarded},
	{"SnoozeIsNotChargedAnAttempt", snoozeIsNotChargedAnAttempt},
	{"CancelIsTerminal", cancelIsTerminal},
	{"KindDefaultsApplyUnderInsertOpts", kindDefaultsApply},
}

// Run runs the suite on River. newConfig returns a Config on a fresh,
// unmigrated database of its own (SQLite or Postgres set, Schema
// optional); the suite sets Workers, OnEvent and Tune's fields.
func Run(t *testing.T, newConfig func(t *testing.T) queue.Config) {
	open := riverOpener(newConfig)
	for _, c := range outcomeCases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t, open)
		})
	}
	for _, c := range []struct {
		name string
		run  func(t *testing.T, newConfig func(t *testing.T) queue.Config)
	}{
		{"TwoClientsRunEachJobOnce", twoClientsRunEachJobOnce},
		{"StopWaitsForARunningJob", stopWaitsForARunningJob},
		{"StopCancelsAJobStillRunningWhenItsContextEnds", stopCancelsAJobStillRunning},
		{"CountsByKindAndState", countsByKindAndState},
		{"MigrateTwiceConcurrently", migrateTwiceConcurrently},
		{"WaitIdle", waitIdle},
		{"InsertOnlyClientFeedsAWorkingClient", insertOnlyClientFeedsAWorkingClient},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t, newConfig)
		})
	}
}

// RunInline runs the outcome cases on Inline.
func RunInline(t *testing.T) {
	for _, c := range outcomeCases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t, inlineOpener)
		})
	}
}

// Scenario: one job is inserted and the queue started; its handler runs
// once, sees its args and attempt 1, and the job is completed.
func runsOnceAndCompletes(t *testing.T, open opener) {
	l := newLedger()
	w := queue.NewWorkers()
	addEcho(w, l)
	g := open(t, w)
	g.start(t)
	ins := g.insert(t, echoArgs{Key: "a"}, nil)
	require.False(t, ins.Duplicate)
	g.settle(t, Final(ins.ID))

	require.Equal(t, 1, l.count(ins.ID))
	require.Equal(t, []int{1}, l.attemptsOf(ins.ID))
	require.Equal(t, "a", l.key(ins.ID))
	require.Equal(t, queue.DefaultMaxAttempts, l.maxOf(ins.ID))
	require.Equal(t, []string{"completed@1"}, states(g.rec.ForJob(ins.ID)))
	require.Equal(t, "queuetest_echo", g.rec.ForJob(ins.ID)[0].Kind)
	row := g.job(t, ins.ID)
	require.Equal(t, queue.StateCompleted, row.State)
	require.Equal(t, 1, row.Attempt)
	require.Empty(t, row.Errors)
	require.JSONEq(t, `{"Key":"a"}`, string(row.Args))
	require.NotNil(t, row.FinalizedAt)
}

// Scenario: a unique job is inserted twice before it runs: the second
// insert is a duplicate with the first's id, and one run happens. Other
// args, or a non-unique insert, make new jobs. Once the job completed, the
// same unique insert makes a new job.
func uniqueIsADuplicateWhilePending(t *testing.T, open opener) {
	l := newLedger()
	w := queue.NewWorkers()
	addEcho(w, l)
	g := open(t, w)
	unique := &queue.InsertOpts{Unique: true}

	a := g.insert(t, echoArgs{Key: "x"}, unique)
	b := g.insert(t, echoArgs{Key: "x"}, unique)
	c := g.insert(t, echoArgs{Key: "y"}, unique)
	d := g.insert(t, echoArgs{Key: "x"}, nil)
	require.False(t, a.Duplicate)
	require.True(t, b.Duplicate, "the same unique args while pending are a duplicate")
	require.Equal(t, a.ID, b.ID, "a duplicate returns the pending job's id")
	require.False(t, c.Duplicate)
	require.NotEqual(t, a.ID, c.ID)
	require.False(t, d.Duplicate, "a non-unique insert is never a duplicate")
	require.NotEqual(t, a.ID, d.ID)

	g.start(t)
	g.settle(t, Final(a.ID, c.ID, d.ID))
	require.Equal(t, 3, l.total(), "three jobs, three runs")
	require.Equal(t, 1, l.count(a.ID))

	e := g.insert(t, echoArgs{Key: "x"}, unique)
	require.False(t, e.Duplicate, "a completed job does not block a new one")
	require.NotEqual(t, a.ID, e.ID)
	g.settle(t, Final(e.ID))
	require.Equal(t, 1, l.count(e.ID))
}

// Scenario: a job that always fails is retried and discarded at the
// MaxAttempts of its insert, each attempt's error recorded; one that fails
// twice completes on its third attempt; a kind's WorkerOptions.MaxAttempts
// caps a job inserted without options.
func failingJobIsRetriedThenDiscarded(t *testing.T, open opener) {
	l := newLedger()
	w := queue.NewWorkers()
	queue.AddWorker(w, func(_ context.Context, j *queue.Job[failArgs]) error {
		l.record(j.ID, j.Attempt, j.MaxAttempts, j.Args.Key)
		return fmt.Errorf("boom %d", j.Attempt)
	}, queue.WorkerOptions{})
	queue.AddWorker(w, func(_ context.Context, j *queue.Job[flakyArgs]) error {
		l.record(j.ID, j.Attempt, j.MaxAttempts, j.Args.Key)
		if j.Attempt < 3 {
			return errors.New("not yet")
		}
		return nil
	}, queue.WorkerOptions{})
	queue.AddWorker(w, func(_ context.Context, j *queue.Job[cappedArgs]) error {
		l.record(j.ID, j.Attempt, j.MaxAttempts, j.Args.Key)
		return errors.New("always")
	}, queue.WorkerOptions{MaxAttempts: 2})
	g := open(t, w)
	g.start(t)
	fail := g.insert(t, failArgs{Key: "f"}, &queue.InsertOpts{MaxAttempts: 3})
	flaky := g.insert(t, flakyArgs{Key: "k"}, &queue.InsertOpts{MaxAttempts: 5})
	capped := g.insert(t, cappedArgs{Key: "c"}, nil)
	g.settle(t, Final(fail.ID, flaky.ID, capped.ID))

	require.Equal(t, []int{1, 2, 3}, l.attemptsOf(fail.ID))
	require.Equal(t, []string{"failed@1", "failed@2", "discarded@3"}, states(g.rec.ForJob(fail.ID)))
	for i, e := range g.rec.ForJob(fail.ID) {
		var ae *queue.AttemptError
		require.ErrorAs(t, e.Err, &ae)
		require.Equal(t, fmt.Sprintf("boom %d", i+1), ae.Message)
		require.False(t, ae.Panicked())
	}
	row := g.job(t, fail.ID)
	require.Equal(t, queue.StateDiscarded, row.State)
	require.Equal(t, 3, row.Attempt)
	require.Equal(t, 3, row.MaxAttempts)
	require.Len(t, row.Errors, 3)
	for i, e := range row.Errors {
		require.Equal(t, i+1, e.Attempt)
		require.Equal(t, fmt.Sprintf("boom %d", i+1), e.Message)
	}

	require.Equal(t, []int{1, 2, 3}, l.attemptsOf(flaky.ID))
	require.Equal(t, []string{"failed@1", "failed@2", "completed@3"}, states(g.rec.ForJob(flaky.ID)))
	row = g.job(t, flaky.ID)
	require.Equal(t, queue.StateCompleted, row.State)
	require.Len(t, row.Errors, 2)

	require.Equal(t, []int{1, 2}, l.attemptsOf(capped.ID))
	require.Equal(t, 2, l.maxOf(capped.ID))
	require.Equal(t, []string{"failed@1", "discarded@2"}, states(g.rec.ForJob(capped.ID)))
	require.Equal(t, queue.StateDiscarded, g.job(t, capped.ID).State)
}

// Scenario: a handler panics on every attempt. The panic is recovered and
// counts as a failed attempt (its stack kept); the job is retried, then
// discarded at its cap, and the queue keeps running other jobs, before
// and after.
func panickingJobIsRetriedThenDiscarded(t *testing.T, open opener) {
	l := newLedger()
	w := queue.NewWorkers()
	addEcho(w, l)
	queue.AddWorker(w, func(_ context.Context, j *queue.Job[panicArgs]) error {
		l.record(j.ID, j.Attempt, j.MaxAttempts, j.Args.Key)
		var parts []string
		return errors.New(parts[j.Attempt]) // out of range: a runtime panic, as a bug makes
	}, queue.WorkerOptions{})
	g := open(t, w)
	g.start(t)
	bad := g.insert(t, panicArgs{Key: "p"}, &queue.InsertOpts{MaxAttempts: 2})
	good := g.insert(t, echoArgs{Key: "before"}, nil)
	g.settle(t, Final(bad.ID, good.ID))

	require.Equal(t, []int{1, 2}, l.attemptsOf(bad.ID))
	require.Equal(t, []string{"failed@1", "discarded@2"}, states(g.rec.ForJob(bad.ID)))
	for _, e := range g.rec.ForJob(bad.ID) {
		var ae *queue.AttemptError
		require.ErrorAs(t, e.Err, &ae)
		require.True(t, ae.Panicked(), "a panic is recorded with its stack")
		require.Contains(t, ae.Message, "index out of range")
		require.Contains(t, ae.Error(), "panic")
	}
	row := g.job(t, bad.ID)
	require.Equal(t, queue.StateDiscarded, row.State)
	require.Len(t, row.Errors, 2)
	require.Contains(t, row.Errors[0].Trace, "queuetest")
	require.Equal(t, queue.StateCompleted, g.job(t, good.ID).State)

	after := g.insert(t, echoArgs{Key: "after"}, nil)
	g.settle(t, Final(after.ID))
	require.Equal(t, 1, l.count(after.ID), "the queue still runs jobs after a discarded panic")
}

// Scenario: a handler snoozes twice (once wrapped) and then completes. Its
// job, capped at one attempt, completes: a snooze is not charged an
// attempt, and every run sees attempt 1.
func snoozeIsNotChargedAnAttempt(t *testing.T, open opener) {
	l := newLedger()
	w := queue.NewWorkers()
	queue.AddWorker(w, func(_ context.Context, j *queue.Job[snoozeArgs]) error {
		l.record(j.ID, j.Attempt, j.MaxAttempts, j.Args.Key)
		switch l.count(j.ID) {
		case 1:
			return queue.Snooze(time.Millisecond)
		case 2:
			return fmt.Errorf("mergeable not known yet: %w", queue.Snooze(time.Millisecond))
		}
		return nil
	}, queue.WorkerOptions{})
	g := open(t, w)
	g.start(t)
	ins := g.insert(t, snoozeArgs{Key: "s"}, &queue.InsertOpts{MaxAttempts: 1})
	g.settle(t, Final(ins.ID))

	require.Equal(t, []int{1, 1, 1}, l.attemptsOf(ins.ID))
	require.Equal(t, []string{"snoozed@1", "snoozed@1", "completed@1"}, states(g.rec.ForJob(ins.ID)))
	row := g.job(t, ins.ID)
	require.Equal(t, queue.StateCompleted, row.State)
	require.Equal(t, 1, row.Attempt)
	require.Equal(t, 2, row.Snoozes)
	require.Empty(t, row.Errors)
}

// Scenario: a handler cancels its job (the PR closed): it never runs
// again though attempts remain, its error is recorded, and the same
// unique job may be inserted anew.
func cancelIsTerminal(t *testing.T, open opener) {
	l := newLedger()
	w := queue.NewWorkers()
	addEcho(w, l)
	queue.AddWorker(w, func(_ context.Context, j *queue.Job[cancelArgs]) error {
		l.record(j.ID, j.Attempt, j.MaxAttempts, j.Args.Key)
		return fmt.Errorf("plan pr: %w", queue.Cancel(errors.New("pr 7 is closed")))
	}, queue.WorkerOptions{})
	g := open(t, w)
	g.start(t)
	ins := g.insert(t, cancelArgs{Key: "7"}, &queue.InsertOpts{MaxAttempts: 5, Unique: true})
	g.settle(t, Final(ins.ID))

	require.Equal(t, []string{"cancelled@1"}, states(g.rec.ForJob(ins.ID)))
	require.ErrorContains(t, g.rec.ForJob(ins.ID)[0].Err, "pr 7 is closed")
	row := g.job(t, ins.ID)
	require.Equal(t, queue.StateCancelled, row.State)
	require.Equal(t, 1, row.Attempt)
	require.Len(t, row.Errors, 1)
	require.Contains(t, row.Errors[0].Message, "pr 7 is closed")

	// Another job runs after it: the cancelled job has not run again.
	other := g.insert(t, echoArgs{Key: "later"}, nil)
	g.settle(t, Final(other.ID))
	require.Equal(t, 1, l.count(ins.ID))

	again := g.insert(t, cancelArgs{Key: "7"}, &queue.InsertOpts{Unique: true})
	require.False(t, again.Duplicate, "a cancelled job does not block a new one")
	g.settle(t, Final(again.ID))
	require.Equal(t, 1, l.count(again.ID))
}

// Scenario: a kind declares its defaults (ArgsWithDefaults: unique, three
// attempts, priority 2): an insert without options takes them, so a second
// insert of the same key is a duplicate; an insert's own MaxAttempts wins
// over the default.
func kindDefaultsApply(t *testing.T, open opener) {
	l := newLedger()
	w := queue.NewWorkers()
	queue.AddWorker(w, func(_ context.Context, j *queue.Job[keyedArgs]) error {
		l.record(j.ID, j.Attempt, j.MaxAttempts, j.Args.SHA)
		return nil
	}, queue.WorkerOptions{MaxAttempts: 9})
	g := open(t, w)
	a := g.insert(t, keyedArgs{Repo: "o/r", SHA: "abc"}, nil)
	dup := g.insert(t, keyedArgs{Repo: "o/r", SHA: "abc"}, nil)
	require.Equal(t, queue.Inserted{ID: a.ID, Duplicate: true}, dup)
	b := g.insert(t, keyedArgs{Repo: "o/r", SHA: "def"}, &queue.InsertOpts{MaxAttempts: 7})
	require.False(t, b.Duplicate)
	g.start(t)
	g.settle(t, Final(a.ID, b.ID))
	require.Equal(t, 3, l.maxOf(a.ID), "the kind's default over the worker's")
	require.Equal(t, 7, l.maxOf(b.ID), "the insert's over the kind's")
	require.Equal(t, 2, g.job(t, a.ID).Priority)
	require.Equal(t, 2, l.total())
}

// Scenario: two Queue clients (two replicas of serve) share one database,
// each with more workers than half the jobs, so more workers than jobs in
// all. Every job blocks until all N have started, so neither client can
// take them all: each job runs exactly once, and both clients run some.
func twoClientsRunEachJobOnce(t *testing.T, newConfig func(t *testing.T) queue.Config) {
	cfg := newConfig(t)
	TwoClientsRunEachJobOnce(t, cfg, cfg)
}

// TwoClientsRunEachJobOnce is the two-clients case on two configs of one
// database (for SQLite, two handles on one file, as two processes have).
func TwoClientsRunEachJobOnce(t *testing.T, cfgA, cfgB queue.Config) {
	const n = 12
	ctx := ctxFor(t)
	for _, cfg := range []*queue.Config{&cfgA, &cfgB} {
		Tune(cfg)
		cfg.MaxWorkers = n - 1
	}

	var (
		mu       sync.Mutex
		runs     = map[int64]int{}
		byClient = map[string]int{}
		started  int
		release  = make(chan struct{})
	)
	workersFor := func(client string) *queue.Workers {
		w := queue.NewWorkers()
		queue.AddWorker(w, func(jctx context.Context, j *queue.Job[echoArgs]) error {
			mu.Lock()
			runs[j.ID]++
			byClient[client]++
			started++
			if started == n {
				close(release)
			}
			mu.Unlock()
			select {
			case <-release:
				return nil
			case <-jctx.Done():
				return jctx.Err()
			}
		}, queue.WorkerOptions{})
		return w
	}
	rec := NewRecorder()
	a := openQueue(t, cfgA, workersFor("a"), rec)
	b := openQueue(t, cfgB, workersFor("b"), rec)
	require.NoError(t, a.Start(ctx))
	require.NoError(t, b.Start(ctx))

	var ids []int64
	for i := range n {
		ins, err := a.Insert(ctx, echoArgs{Key: fmt.Sprint(i)}, nil)
		require.NoError(t, err)
		ids = append(ids, ins.ID)
	}
	require.NoError(t, rec.Wait(ctx, Final(ids...)), "events: %v; runs by client: %v", rec.Events(), byClient)

	mu.Lock()
	defer mu.Unlock()
	require.Len(t, runs, n)
	for _, id := range ids {
		require.Equal(t, 1, runs[id], "job %d ran %d times", id, runs[id])
	}
	require.Positive(t, byClient["a"], "runs by client: %v", byClient)
	require.Positive(t, byClient["b"], "runs by client: %v", byClient)
	for _, e := range rec.Events() {
		require.Equal(t, queue.EventCompleted, e.State)
	}
	rows, err := a.Jobs(ctx, queue.JobFilter{States: []string{queue.StateCompleted}})
	require.NoError(t, err)
	require.Len(t, rows, n)
}

// gate returns the channels of a blocker and a func closing release once.
func gate() (started chan context.Context, release chan struct{}, free func()) {
	started, release = make(chan context.Context, 1), make(chan struct{})
	var once sync.Once
	return started, release, func() { once.Do(func() { close(release) }) }
}

// blocker registers blockArgs: the handler hands its context to started,
// then returns nil when release closes, or its context's error.
func blocker(w *queue.Workers, started chan<- context.Context, release <-chan struct{}) {
	queue.AddWorker(w, func(ctx context.Context, _ *queue.Job[blockArgs]) error {
		started <- ctx
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}, queue.WorkerOptions{})
}

// Scenario: serve gets SIGTERM while a job runs. Stop stops fetching but
// waits for the running job, without cancelling it, and returns nil once
// the job completed.
func stopWaitsForARunningJob(t *testing.T, newConfig func(t *testing.T) queue.Config) {
	cfg := newConfig(t)
	Tune(&cfg)
	ctx := ctxFor(t)
	started, release, free := gate()
	w := queue.NewWorkers()
	blocker(w, started, release)
	rec := NewRecorder()
	q := openQueue(t, cfg, w, rec)
	t.Cleanup(free) // before the Stop of openQueue, should the case fail
	require.NoError(t, q.Start(ctx))
	ins, err := q.Insert(ctx, blockArgs{Key: "b"}, nil)
	require.NoError(t, err)
	var jobCtx context.Context
	select {
	case jobCtx = <-started:
	case <-ctx.Done():
		t.Fatalf("the job did not start: %v", ctx.Err())
	}

	stopped := make(chan error, 1)
	go func() { stopped <- q.Stop(ctx) }()
	<-q.Stopping()
	select {
	case err := <-stopped:
		t.Fatalf("Stop returned (%v) while a job was running", err)
	default:
	}
	require.NoError(t, jobCtx.Err(), "a graceful stop does not cancel a running job")
	free()
	require.NoError(t, <-stopped)
	require.Equal(t, []string{"completed@1"}, states(rec.ForJob(ins.ID)), "the event is delivered before Stop returns")
	rows, err := q.Jobs(ctx, queue.JobFilter{IDs: []int64{ins.ID}})
	require.NoError(t, err)
	require.Equal(t, queue.StateCompleted, rows[0].State)
}

// Scenario: a job is still running when Stop's context ends. Its context
// is cancelled, Stop returns an error wrapping its context's, and the job
// goes back to available without being charged an attempt; the next queue
// on the database runs it to completion at attempt 1.
func stopCancelsAJobStillRunning(t *testing.T, newConfig func(t *testing.T) queue.Config) {
	cfg := newConfig(t)
	Tune(&cfg)
	ctx := ctxFor(t)
	started := make(chan context.Context, 1)
	w := queue.NewWorkers()
	blocker(w, started, nil) // never released: only a cancel ends it
	rec := NewRecorder()
	q := openQueue(t, cfg, w, rec)
	require.NoError(t, q.Start(ctx))
	ins, err := q.Insert(ctx, blockArgs{Key: "b"}, nil)
	require.NoError(t, err)
	var jobCtx context.Context
	select {
	case jobCtx = <-started:
	case <-ctx.Done():
		t.Fatalf("the job did not start: %v", ctx.Err())
	}

	stopCtx, cancelStop := context.WithCancel(ctx)
	stopped := make(chan error, 1)
	go func() { stopped <- q.Stop(stopCtx) }()
	<-q.Stopping()
	require.NoError(t, jobCtx.Err())
	cancelStop() // the grace period ends
	err = <-stopped
	require.ErrorIs(t, err, context.Canceled)
	require.Error(t, jobCtx.Err(), "the job's context is cancelled")
	require.Equal(t, []string{"interrupted@1"}, states(rec.ForJob(ins.ID)))
	rows, err := q.Jobs(ctx, queue.JobFilter{IDs: []int64{ins.ID}})
	require.NoError(t, err)
	require.Equal(t, queue.StateAvailable, rows[0].State)
	require.Equal(t, 0, rows[0].Attempt, "an interrupted run is not charged")

	l := newLedger()
	w2 := queue.NewWorkers()
	queue.AddWorker(w2, func(_ context.Context, j *queue.Job[blockArgs]) error {
		l.record(j.ID, j.Attempt, j.MaxAttempts, j.Args.Key)
		return nil
	}, queue.WorkerOptions{})
	rec2 := NewRecorder()
	q2 := openQueue(t, cfg, w2, rec2)
	require.NoError(t, q2.Start(ctx))
	require.NoError(t, rec2.Wait(ctx, Final(ins.ID)), "events: %v", rec2.Events())
	require.Equal(t, []int{1}, l.attemptsOf(ins.ID))
}

// Scenario: /metrics asks for jobs by kind and state: a completed and a
// cancelled job of one kind, and a job of another kind scheduled an hour
// ahead.
func countsByKindAndState(t *testing.T, newConfig func(t *testing.T) queue.Config) {
	cfg := newConfig(t)
	Tune(&cfg)
	ctx := ctxFor(t)
	w := queue.NewWorkers()
	queue.AddWorker(w, func(_ context.Context, j *queue.Job[cancelArgs]) error {
		if j.Args.Key == "cancel" {
			return queue.Cancel(errors.New("no"))
		}
		return nil
	}, queue.WorkerOptions{})
	queue.AddWorker(w, func(context.Context, *queue.Job[countBArgs]) error { return nil }, queue.WorkerOptions{})
	rec := NewRecorder()
	q := openQueue(t, cfg, w, rec)
	counts, err := q.Counts(ctx)
	require.NoError(t, err)
	require.Empty(t, counts)

	require.NoError(t, q.Start(ctx))
	ok, err := q.Insert(ctx, cancelArgs{Key: "ok"}, nil)
	require.NoError(t, err)
	no, err := q.Insert(ctx, cancelArgs{Key: "cancel"}, nil)
	require.NoError(t, err)
	_, err = q.Insert(ctx, countBArgs{Key: "later"}, &queue.InsertOpts{ScheduledAt: time.Now().Add(time.Hour)})
	require.NoError(t, err)
	require.NoError(t, rec.Wait(ctx, Final(ok.ID, no.ID)), "events: %v", rec.Events())

	counts, err = q.Counts(ctx)
	require.NoError(t, err)
	require.Equal(t, []queue.Count{
		{Kind: "queuetest_cancel", State: queue.StateCancelled, N: 1},
		{Kind: "queuetest_cancel", State: queue.StateCompleted, N: 1},
		{Kind: "queuetest_count_b", State: queue.StateScheduled, N: 1},
	}, counts)
}

// Scenario: `gapless migrate` and `gapless serve` start at once on a
// fresh database: both migrate, neither fails, and a third run is a
// no-op; the queue then works.
func migrateTwiceConcurrently(t *testing.T, newConfig func(t *testing.T) queue.Config) {
	cfg := newConfig(t)
	Tune(&cfg)
	ctx := ctxFor(t)
	errs := make(chan error, 2)
	for range 2 {
		go func() { errs <- queue.Migrate(ctx, cfg) }()
	}
	require.NoError(t, <-errs)
	require.NoError(t, <-errs)
	require.NoError(t, queue.Migrate(ctx, cfg))

	l := newLedger()
	w := queue.NewWorkers()
	addEcho(w, l)
	rec := NewRecorder()
	q := openQueue(t, cfg, w, rec)
	require.NoError(t, q.Start(ctx))
	ins, err := q.Insert(ctx, echoArgs{Key: "m"}, nil)
	require.NoError(t, err)
	require.NoError(t, rec.Wait(ctx, Final(ins.ID)))
	require.Equal(t, 1, l.count(ins.ID))
}

// Scenario: a test (or `gapless github run`) waits for the queue to have
// nothing left to do. WaitIdle returns only once the inserted jobs
// completed, ignores a job scheduled an hour ahead, and does not return
// while a job runs.
func waitIdle(t *testing.T, newConfig func(t *testing.T) queue.Config) {
	cfg := newConfig(t)
	Tune(&cfg)
	ctx := ctxFor(t)
	l := newLedger()
	started, release, free := gate()
	w := queue.NewWorkers()
	addEcho(w, l)
	blocker(w, started, release)
	q := openQueue(t, cfg, w, NewRecorder())
	t.Cleanup(free)
	require.NoError(t, q.WaitIdle(ctx), "an empty queue is idle")

	require.NoError(t, q.Start(ctx))
	for i := range 3 {
		_, err := q.Insert(ctx, echoArgs{Key: fmt.Sprint(i)}, nil)
		require.NoError(t, err)
	}
	_, err := q.Insert(ctx, echoArgs{Key: "later"}, &queue.InsertOpts{ScheduledAt: time.Now().Add(time.Hour)})
	require.NoError(t, err)
	require.NoError(t, q.WaitIdle(ctx))
	rows, err := q.Jobs(ctx, queue.JobFilter{})
	require.NoError(t, err)
	got := map[string]int{}
	for _, r := range rows {
		got[r.State]++
	}
	require.Equal(t, map[string]int{queue.StateCompleted: 3, queue.StateScheduled: 1}, got)

	blocked, err := q.Insert(ctx, blockArgs{Key: "b"}, nil)
	require.NoError(t, err)
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatalf("the job did not start: %v", ctx.Err())
	}
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, q.WaitIdle(short), context.DeadlineExceeded, "not idle while a job runs")
	free()
	require.NoError(t, q.WaitIdle(ctx))
	rows, err = q.Jobs(ctx, queue.JobFilter{IDs: []int64{blocked.ID}})
	require.NoError(t, err)
	require.Equal(t, queue.StateCompleted, rows[0].State)
}

// Scenario: the webhook intake inserts with an insert-only client (no
// Workers: Start refuses); a working client on the same database runs the
// job.
func insertOnlyClientFeedsAWorkingClient(t *testing.T, newConfig func(t *testing.T) queue.Config) {
	cfg := newConfig(t)
	Tune(&cfg)
	ctx := ctxFor(t)
	ins, err := queue.Open(ctx, cfg)
	require.NoError(t, err)
	require.ErrorIs(t, ins.Start(ctx), queue.ErrInsertOnly)
	job, err := ins.Insert(ctx, echoArgs{Key: "i"}, &queue.InsertOpts{Unique: true})
	require.NoError(t, err)
	dup, err := ins.Insert(ctx, echoArgs{Key: "i"}, &queue.InsertOpts{Unique: true})
	require.NoError(t, err)
	require.Equal(t, queue.Inserted{ID: job.ID, Duplicate: true}, dup)

	l := newLedger()
	w := queue.NewWorkers()
	addEcho(w, l)
	rec := NewRecorder()
	q := openQueue(t, cfg, w, rec)
	require.NoError(t, q.Start(ctx))
	require.NoError(t, rec.Wait(ctx, Final(job.ID)), "events: %v", rec.Events())
	require.Equal(t, 1, l.count(job.ID))
	require.NoError(t, ins.Stop(ctx), "stopping a client never started is a no-op")
}
