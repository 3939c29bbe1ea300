package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
)

// DefaultInlineMaxSnoozes bounds how often one job may snooze in one Drain.
const DefaultInlineMaxSnoozes = 10

// InlineOptions configures an Inline runner.
type InlineOptions struct {
	Logger  *slog.Logger
	OnEvent func(Event)
	// JobTimeout bounds one run unless its kind sets WorkerOptions.Timeout
	// (DefaultJobTimeout).
	JobTimeout time.Duration
	// MaxAttempts is the default attempt cap (DefaultMaxAttempts).
	MaxAttempts int
	// MaxSnoozes bounds the snoozes of one job in one Drain
	// (DefaultInlineMaxSnoozes); the next snooze discards it.
	MaxSnoozes int
	// Clock is what Drain waits on for a snoozed or scheduled job when no
	// other job can run (default: the real clock).
	Clock clockwork.Clock
}

// Inline runs jobs synchronously, in the goroutine that calls Drain, with
// the outcome rules of Queue: a failed attempt (error or recovered panic)
// is retried, at once rather than after a backoff, until MaxAttempts, then
// discarded; Snooze runs the job again after its delay (waited for on
// Clock only when no other job can run), without charging an attempt, at
// most MaxSnoozes times; Cancel ends it; a unique insert is a duplicate
// while the same job is pending or running. Nothing is durable: it serves
// `gapless github run`, where no server runs, and tests.
type Inline struct {
	w *Workers
	o InlineOptions

	mu       sync.Mutex
	nextID   int64
	seq      int64
	jobs     []*inlineJob          // every job, by id
	pending  map[string]*inlineJob // unique key -> job not yet final
	draining bool
}

type inlineJob struct {
	row       JobRow
	seq       int64 // order among jobs due at once: insert, then re-queue
	uniqueKey string
	snoozes   int // in the current Drain
}

// NewInline returns an Inline runner of w's handlers.
func NewInline(w *Workers, log *slog.Logger, onEvent func(Event)) *Inline {
	return NewInlineOptions(w, InlineOptions{Logger: log, OnEvent: onEvent})
}

// NewInlineOptions returns an Inline runner of w's handlers configured by o.
func NewInlineOptions(w *Workers, o InlineOptions) *Inline {
	if w == nil {
		w = NewWorkers()
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Clock == nil {
		o.Clock = clockwork.NewRealClock()
	}
	o.JobTimeout = cmpOr(max(o.JobTimeout, 0), DefaultJobTimeout)
	o.MaxAttempts = cmpOr(max(o.MaxAttempts, 0), DefaultMaxAttempts)
	o.MaxSnoozes = cmpOr(max(o.MaxSnoozes, 0), DefaultInlineMaxSnoozes)
	return &Inline{w: w, o: o, pending: map[string]*inlineJob{}}
}

// Insert records a job; nothing runs until Drain. A kind without a handler
// is refused, as Queue refuses it.
func (i *Inline) Insert(ctx context.Context, args Args, opts *InsertOpts) (Inserted, error) {
	if args == nil {
		return Inserted{}, fmt.Errorf("%w: insert: nil args", ErrConfig)
	}
	if err := ctx.Err(); err != nil {
		return Inserted{}, fmt.Errorf("queue: inline insert %s job: %w", args.Kind(), err)
	}
	kind := args.Kind()
	if i.w.kinds[kind] == nil {
		return Inserted{}, fmt.Errorf("queue: inline insert: no worker registered for kind %q", kind)
	}
	o, err := resolveInsertOpts(args, opts, i.w, i.o.MaxAttempts)
	if err != nil {
		return Inserted{}, err
	}
	raw, err := json.Marshal(args)
	if err != nil {
		return Inserted{}, fmt.Errorf("queue: inline insert %s job: marshal args: %w", kind, err)
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	var key string
	if o.Unique {
		key = kind + "\x00" + string(raw)
		if j := i.pending[key]; j != nil {
			return Inserted{ID: j.row.ID, Duplicate: true}, nil
		}
	}
	now := i.o.Clock.Now()
	i.nextID++
	i.seq++
	j := &inlineJob{seq: i.seq, uniqueKey: key, row: JobRow{
		ID: i.nextID, Kind: kind, State: StateAvailable, MaxAttempts: o.MaxAttempts, Priority: o.Priority,
		CreatedAt: now, ScheduledAt: now, Args: raw,
	}}
	if o.ScheduledAt.After(now) {
		j.row.State, j.row.ScheduledAt = StateScheduled, o.ScheduledAt
	}
	i.jobs = append(i.jobs, j)
	if key != "" {
		i.pending[key] = j
	}
	return Inserted{ID: j.row.ID}, nil
}

// ErrJobsDiscarded is wrapped by Drain's error when jobs were discarded.
var ErrJobsDiscarded = errors.New("queue: jobs discarded")

// Drain runs jobs until none is left; the jobs may insert more. When no
// job is due, it waits on the Clock for the first one scheduled later (a
// snooze, InsertOpts.ScheduledAt), bounded by ctx. It returns
// an error wrapping ErrJobsDiscarded, naming them, when any job was
// discarded in this drain (every other job still ran), and ctx's error,
// leaving the rest pending, when ctx ends. One Drain runs at a time.
func (i *Inline) Drain(ctx context.Context) error {
	i.mu.Lock()
	if i.draining {
		i.mu.Unlock()
		return errors.New("queue: inline drain: already draining (Drain called from a job, or twice at once)")
	}
	i.draining = true
	for _, j := range i.jobs {
		j.snoozes = 0
	}
	i.mu.Unlock()
	defer func() {
		i.mu.Lock()
		i.draining = false
		i.mu.Unlock()
	}()

	var discarded []string
	for {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("queue: inline drain: %w", err)
		}
		j, wait := i.next()
		if j == nil && wait == 0 {
			break
		}
		if j == nil {
			select {
			case <-ctx.Done():
				return fmt.Errorf("queue: inline drain: %w", ctx.Err())
			case <-i.o.Clock.After(wait):
			}
			continue
		}
		if ev := i.run(ctx, j); ev.State == EventDiscarded {
			discarded = append(discarded, fmt.Sprintf("%s job %d: %v", ev.Kind, ev.JobID, ev.Err))
		}
	}
	if len(discarded) > 0 {
		return fmt.Errorf("%w: %s", ErrJobsDiscarded, strings.Join(discarded, "; "))
	}
	return nil
}

// next returns the job to run now (due, by priority then order), or, when
// none is due, how long until the first one is (0: no job is left). It
// marks the returned job running.
func (i *Inline) next() (*inlineJob, time.Duration) {
	i.mu.Lock()
	defer i.mu.Unlock()
	now := i.o.Clock.Now()
	var best *inlineJob
	var soonest time.Time
	for _, j := range i.jobs {
		if j.row.State != StateAvailable && j.row.State != StateScheduled && j.row.State != StateRetryable {
			continue
		}
		if j.row.ScheduledAt.After(now) {
			if soonest.IsZero() || j.row.ScheduledAt.Before(soonest) {
				soonest = j.row.ScheduledAt
			}
			continue
		}
		if best == nil || j.row.Priority < best.row.Priority || (j.row.Priority == best.row.Priority && j.seq < best.seq) {
			best = j
		}
	}
	if best != nil {
		best.row.State = StateRunning
		best.row.Attempt++
		t := now
		best.row.AttemptedAt = &t
		return best, 0
	}
	if soonest.IsZero() {
		return nil, 0
	}
	return nil, max(soonest.Sub(now), time.Nanosecond)
}

// run runs j once, records its outcome and reports it.
func (i *Inline) run(ctx context.Context, j *inlineJob) Event {
	i.mu.Lock()
	meta := jobMeta{ID: j.row.ID, Attempt: j.row.Attempt, MaxAttempts: j.row.MaxAttempts, CreatedAt: j.row.CreatedAt}
	kind, raw := j.row.Kind, j.row.Args
	i.mu.Unlock()
	entry := i.w.kinds[kind]
	timeout := cmpOr(entry.opts.Timeout, i.o.JobTimeout)
	started := i.o.Clock.Now()

	trace, err := func() (trace string, err error) {
		var jctx context.Context
		var cancel context.CancelFunc
		if timeout == NoTimeout {
			jctx, cancel = context.WithCancel(ctx)
		} else {
			jctx, cancel = context.WithTimeout(ctx, timeout)
		}
		defer cancel()
		defer func() {
			if p := recover(); p != nil {
				trace, err = string(debug.Stack()), fmt.Errorf("%v", p)
			}
		}()
		return "", entry.run(jctx, meta, raw)
	}()

	i.mu.Lock()
	now := i.o.Clock.Now()
	ev := Event{Kind: kind, JobID: meta.ID, Attempt: meta.Attempt}
	var snooze *snoozeError
	var cancelled *cancelError
	switch {
	case err == nil:
		ev.State = EventCompleted
		i.finish(j, StateCompleted, now)
	case errors.As(err, &snooze) && j.snoozes < i.o.MaxSnoozes:
		j.snoozes++
		j.row.Snoozes++
		j.row.Attempt--
		ev.State = EventSnoozed
		i.requeue(j, now.Add(snooze.d))
	default:
		if snooze != nil {
			err = fmt.Errorf("queue: inline: snoozed %d times in one drain, the bound (InlineOptions.MaxSnoozes); giving up", j.snoozes)
		}
		ae := AttemptError{At: started, Attempt: meta.Attempt, Message: err.Error(), Trace: trace}
		j.row.Errors = append(j.row.Errors, ae)
		ev.Err = &ae
		switch {
		case snooze != nil:
			ev.State = EventDiscarded
			i.finish(j, StateDiscarded, now)
		case errors.As(err, &cancelled):
			ev.State = EventCancelled
			i.finish(j, StateCancelled, now)
		case meta.Attempt >= j.row.MaxAttempts:
			ev.State = EventDiscarded
			i.finish(j, StateDiscarded, now)
		default:
			ev.State = EventFailed
			i.requeue(j, now)
		}
	}
	i.mu.Unlock()

	if ev.Err != nil {
		attrs := []any{"kind", kind, "job_id", meta.ID, "attempt", meta.Attempt, "outcome", ev.State, "error", err.Error()}
		if trace != "" {
			attrs = append(attrs, "trace", trace)
		}
		i.o.Logger.WarnContext(ctx, "queue: inline job failed", attrs...)
	}
	if i.o.OnEvent != nil {
		i.o.OnEvent(ev)
	}
	return ev
}

// finish makes j final (called with mu held).
func (i *Inline) finish(j *inlineJob, state string, now time.Time) {
	j.row.State = state
	t := now
	j.row.FinalizedAt = &t
	if j.uniqueKey != "" && i.pending[j.uniqueKey] == j {
		delete(i.pending, j.uniqueKey)
	}
}

// requeue makes j due at at, after the jobs queued before (mu held).
func (i *Inline) requeue(j *inlineJob, at time.Time) {
	i.seq++
	j.seq = i.seq
	j.row.ScheduledAt = at
	j.row.State = StateAvailable
	if at.After(i.o.Clock.Now()) {
		j.row.State = StateScheduled
	}
}

// Jobs returns the jobs f selects, by id (as Queue.Jobs).
func (i *Inline) Jobs(_ context.Context, f JobFilter) ([]JobRow, error) {
	limit := cmpOr(f.Limit, 100)
	if limit < 1 || limit > 10_000 {
		return nil, fmt.Errorf("%w: JobFilter.Limit %d is not between 1 and 10000", ErrConfig, f.Limit)
	}
	for _, s := range f.States {
		if !validState(s) {
			return nil, fmt.Errorf("%w: JobFilter.States: unknown state %q (want one of %v)", ErrConfig, s, allStates)
		}
	}
	in := func(list []string, s string) bool {
		if len(list) == 0 {
			return true
		}
		for _, x := range list {
			if x == s {
				return true
			}
		}
		return false
	}
	inID := func(id int64) bool {
		if len(f.IDs) == 0 {
			return true
		}
		for _, x := range f.IDs {
			if x == id {
				return true
			}
		}
		return false
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	var out []JobRow
	for _, j := range i.jobs {
		if len(out) == limit {
			break
		}
		if inID(j.row.ID) && in(f.Kinds, j.row.Kind) && in(f.States, j.row.State) {
			r := j.row
			r.Errors = append([]AttemptError(nil), j.row.Errors...)
			out = append(out, r)
		}
	}
	return out, nil
}

// Counts returns the number of jobs by kind and state (as Queue.Counts).
func (i *Inline) Counts(context.Context) ([]Count, error) {
	i.mu.Lock()
	n := map[[2]string]int{}
	for _, j := range i.jobs {
		n[[2]string{j.row.Kind, j.row.State}]++
	}
	i.mu.Unlock()
	out := make([]Count, 0, len(n))
	for k, v := range n {
		out = append(out, Count{Kind: k[0], State: k[1], N: v})
	}
	sort.Slice(out, func(a, b int) bool {
		if out[a].Kind != out[b].Kind {
			return out[a].Kind < out[b].Kind
		}
		return out[a].State < out[b].State
	})
	return out, nil
}
