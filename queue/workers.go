package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"time"

	"github.com/riverqueue/river"
)

// Args is a job's arguments: a JSON-serialisable struct (a value type, not a
// pointer: its zero value's Kind is read at registration) with a stable Kind.
//
// A unique job (InsertOpts.Unique) is unique by its kind and all its args:
// keep only the key fields in a unique job's args.
type Args interface{ Kind() string }

// ArgsWithDefaults is implemented by args whose kind has default insert
// options (unique, max attempts, priority). The options given to Insert win
// field by field: a non-zero MaxAttempts, Priority or ScheduledAt, and
// Unique when true.
type ArgsWithDefaults interface {
	Args
	DefaultInsertOpts() InsertOpts
}

// Job is one run of a job as its handler sees it.
type Job[T Args] struct {
	ID   int64
	Args T
	// Attempt is this run's attempt, from 1. A snoozed run is not charged:
	// the next run has the same Attempt.
	Attempt     int
	MaxAttempts int
	CreatedAt   time.Time
}

// NoTimeout is WorkerOptions.Timeout for a run that is not bounded.
const NoTimeout time.Duration = -1

// WorkerOptions tunes one kind's handler.
type WorkerOptions struct {
	// Timeout bounds one run (its context is cancelled after it). Zero:
	// Config.JobTimeout (Inline: InlineOptions.JobTimeout). NoTimeout: the
	// run is not bounded (a job whose work is fenced by a lease of its
	// own, which River's rescue of a stuck job may run a second time).
	Timeout time.Duration
	// MaxAttempts is the kind's attempt cap when Insert's options and the
	// args' defaults give none. Zero: Config.MaxAttempts.
	MaxAttempts int
}

// kindRE is the job kind format River accepts (rivercommon.UserSpecifiedIDOrKindRE).
var kindRE = regexp.MustCompile(`\A[\w][\w\-\[\]<>\/.·:+]+\z`)

// Workers is the set of job handlers, one per kind. It is built before the
// Queue (or Inline) that runs it and not changed afterwards.
type Workers struct {
	kinds map[string]*workerEntry
}

// workerEntry is one kind's handler, in the two forms the runners need.
type workerEntry struct {
	kind string
	opts WorkerOptions
	// register adds the handler to a River worker bundle.
	register func(rw *river.Workers, defaultTimeout time.Duration) error
	// run decodes the args (JSON, as stored) and calls the handler. It does
	// not recover panics: the caller does.
	run func(ctx context.Context, meta jobMeta, args []byte) error
}

// jobMeta is a run's identity and attempt, without its args.
type jobMeta struct {
	ID          int64
	Attempt     int
	MaxAttempts int
	CreatedAt   time.Time
}

// NewWorkers returns an empty handler set.
func NewWorkers() *Workers { return &Workers{kinds: map[string]*workerEntry{}} }

// Kinds returns the registered kinds, sorted.
func (w *Workers) Kinds() []string {
	out := make([]string, 0, len(w.kinds))
	for k := range w.kinds {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// AddWorker registers fn as the handler of T's kind.
//
// fn's outcome decides the job's: nil completes it; Snooze(d) runs it again
// after d without charging an attempt; Cancel(err) ends it for good; any
// other error (or a panic, which is recovered) fails the attempt, retried
// with backoff until MaxAttempts, then discarded.
//
// AddWorker panics when T's kind is empty, malformed or already registered,
// or when opts are negative: these are programming errors, made at start.
func AddWorker[T Args](w *Workers, fn func(ctx context.Context, job *Job[T]) error, opts WorkerOptions) {
	var zero T
	kind := zero.Kind()
	switch {
	case fn == nil:
		panic(fmt.Sprintf("queue: AddWorker: nil handler for kind %q", kind))
	case !kindRE.MatchString(kind):
		panic(fmt.Sprintf("queue: AddWorker: job kind %q is not valid (want %s)", kind, kindRE))
	case w.kinds[kind] != nil:
		panic(fmt.Sprintf("queue: AddWorker: a worker for kind %q is already registered", kind))
	case (opts.Timeout < 0 && opts.Timeout != NoTimeout) || opts.MaxAttempts < 0:
		panic(fmt.Sprintf("queue: AddWorker: kind %q: negative Timeout or MaxAttempts", kind))
	}
	w.kinds[kind] = &workerEntry{
		kind: kind,
		opts: opts,
		register: func(rw *river.Workers, defaultTimeout time.Duration) error {
			return river.AddWorkerSafely[T](rw, &riverWorker[T]{fn: fn, timeout: cmpOr(opts.Timeout, defaultTimeout)})
		},
		run: func(ctx context.Context, meta jobMeta, raw []byte) error {
			var args T
			if err := json.Unmarshal(raw, &args); err != nil {
				return fmt.Errorf("queue: decode args of %s job %d: %w", kind, meta.ID, err)
			}
			return fn(ctx, &Job[T]{ID: meta.ID, Args: args, Attempt: meta.Attempt, MaxAttempts: meta.MaxAttempts, CreatedAt: meta.CreatedAt})
		},
	}
}

// riverWorker adapts a handler to River's Worker.
type riverWorker[T Args] struct {
	river.WorkerDefaults[T]
	fn      func(ctx context.Context, job *Job[T]) error
	timeout time.Duration
}

func (w *riverWorker[T]) Timeout(*river.Job[T]) time.Duration { return w.timeout }

func (w *riverWorker[T]) Work(ctx context.Context, rj *river.Job[T]) error {
	err := w.fn(ctx, &Job[T]{ID: rj.ID, Args: rj.Args, Attempt: rj.Attempt, MaxAttempts: rj.MaxAttempts, CreatedAt: rj.CreatedAt})
	return toRiverError(err)
}

// toRiverError turns the handler outcomes Snooze and Cancel (possibly
// wrapped) into River's; other errors pass unchanged.
func toRiverError(err error) error {
	if err == nil {
		return nil
	}
	var s *snoozeError
	if errors.As(err, &s) {
		return river.JobSnooze(s.d)
	}
	var c *cancelError
	if errors.As(err, &c) {
		return river.JobCancel(err)
	}
	return err
}

type snoozeError struct{ d time.Duration }

func (e *snoozeError) Error() string { return fmt.Sprintf("queue: snooze %s", e.d) }

type cancelError struct{ err error }

func (e *cancelError) Error() string {
	if e.err == nil {
		return "queue: cancelled"
	}
	return e.err.Error()
}

func (e *cancelError) Unwrap() error { return e.err }

// Snooze is a handler outcome: run the job again after d (a negative d is
// taken as 0), without charging an attempt. It may be wrapped.
func Snooze(d time.Duration) error { return &snoozeError{d: max(d, 0)} }

// Cancel is a handler outcome: the job never runs again, whatever attempts
// remain (its state becomes cancelled). err, which may be nil, is recorded.
// It may be wrapped.
func Cancel(err error) error { return &cancelError{err: err} }

func cmpOr[T comparable](vals ...T) T {
	var zero T
	for _, v := range vals {
		if v != zero {
			return v
		}
	}
	return zero
}
