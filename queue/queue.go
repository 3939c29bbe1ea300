// Package queue is gapless's small durable job queue: River
// (github.com/riverqueue/river) on SQLite (riversqlite) or PostgreSQL
// (riverpgxv5), behind types of its own so that no domain package imports
// River.
//
// Jobs are short and idempotent: domain state lives in the state store,
// written with compare-and-swap, so a job that runs twice or late cannot
// regress it. River gives at-least-once execution: a job whose process dies
// mid-run is rescued after Config.RescueStuckJobsAfter and runs again, and
// River has no per-attempt fencing token (design note A6).
//
// Two runners share the Workers and the outcome rules: Queue (River, durable,
// concurrent, for `gapless serve`) and Inline (in memory, synchronous, for
// `gapless github run` in GitHub Actions).
package queue

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
)

// InsertOpts are one insert's options; the zero value (or nil) takes the
// kind's defaults (ArgsWithDefaults, WorkerOptions) and then the queue's.
type InsertOpts struct {
	// Unique skips the insert when a job of the same kind and args is
	// available, scheduled, waiting to retry or running, and returns that
	// job's id with Duplicate set. A completed, cancelled or discarded job
	// does not block a new one.
	Unique bool
	// MaxAttempts caps the attempts (0: the kind's or the queue's default).
	MaxAttempts int
	// ScheduledAt delays the job's first run (zero or past: run now).
	ScheduledAt time.Time
	// Priority orders available jobs, 1 (first) to 4; 0 means 1.
	Priority int
}

// Inserted is an insert's result.
type Inserted struct {
	ID int64
	// Duplicate: a unique insert found a pending job with the same kind
	// and args; ID is that job's and nothing was inserted.
	Duplicate bool
}

// Enqueuer is what domain code needs to add work. Queue and Inline
// implement it.
type Enqueuer interface {
	Insert(ctx context.Context, args Args, opts *InsertOpts) (Inserted, error)
}

// Event outcomes (Event.State).
const (
	EventCompleted = "completed"
	// EventFailed: the attempt failed (an error or a panic) and the job
	// will be retried.
	EventFailed = "failed"
	// EventDiscarded: the attempt failed and it was the last.
	EventDiscarded = "discarded"
	EventCancelled = "cancelled"
	EventSnoozed   = "snoozed"
	// EventInterrupted: the run was cancelled because the queue stopped;
	// the job is available again, not charged an attempt.
	EventInterrupted = "interrupted"
)

// Event is one job run's outcome, reported after the queue recorded it.
type Event struct {
	Kind  string
	JobID int64
	// Attempt is the attempt of the run this is the outcome of.
	Attempt int
	// State is the outcome: one of the Event* constants.
	State string
	// Err is the run's error for failed, discarded and cancelled (an
	// *AttemptError), nil otherwise.
	Err error
}

// Job states (JobRow.State, Count.State, JobFilter.States), River's.
const (
	StateAvailable = "available"
	StateScheduled = "scheduled"
	StateRetryable = "retryable"
	StateRunning   = "running"
	StateCompleted = "completed"
	StateCancelled = "cancelled"
	StateDiscarded = "discarded"
	StatePending   = "pending"
)

var allStates = []string{StateAvailable, StateCancelled, StateCompleted, StateDiscarded, StatePending, StateRetryable, StateRunning, StateScheduled}

// AttemptError is a failed attempt as recorded.
type AttemptError struct {
	At      time.Time
	Attempt int
	Message string
	// Trace is the stack of a panic; empty for a returned error.
	Trace string
}

func (e *AttemptError) Error() string {
	if e.Panicked() {
		return fmt.Sprintf("attempt %d: panic: %s", e.Attempt, e.Message)
	}
	return fmt.Sprintf("attempt %d: %s", e.Attempt, e.Message)
}

// Panicked reports whether the attempt panicked.
func (e *AttemptError) Panicked() bool { return e.Trace != "" }

// JobRow is a job as stored.
type JobRow struct {
	ID          int64
	Kind        string
	State       string
	Attempt     int
	MaxAttempts int
	Priority    int
	// Snoozes counts the runs that snoozed.
	Snoozes     int
	CreatedAt   time.Time
	ScheduledAt time.Time
	AttemptedAt *time.Time
	FinalizedAt *time.Time
	Errors      []AttemptError
	Args        json.RawMessage
}

// JobFilter selects jobs; empty fields select all.
type JobFilter struct {
	IDs    []int64
	Kinds  []string
	States []string
	// Limit caps the rows (default 100, at most 10000); rows come by id.
	Limit int
}

// Count is the number of jobs of one kind in one state.
type Count struct {
	Kind  string
	State string
	N     int
}

// DefaultSchema is the PostgreSQL schema of River's tables.
const DefaultSchema = "gapless_queue"

// Defaults of Config.
const (
	DefaultMaxWorkers           = 4
	DefaultFetchCooldown        = 5 * time.Millisecond
	DefaultFetchPollInterval    = 200 * time.Millisecond
	DefaultJobTimeout           = 2 * time.Minute
	DefaultRescueStuckJobsAfter = 10 * time.Minute
	DefaultMaxAttempts          = 25
	DefaultStopCancelWait       = 10 * time.Second
)

// Config configures a Queue.
type Config struct {
	// Exactly one of SQLite and Postgres.

	// SQLite is a database opened with OpenSQLite: a file of the queue's
	// own, beside the state store's.
	SQLite *sql.DB
	// Postgres is the state store's database; River's tables live in
	// Schema. Migrate holds one of its connections while another runs the
	// migrations: the pool needs at least two.
	Postgres *pgxpool.Pool
	// Schema is the PostgreSQL schema of River's tables (DefaultSchema),
	// created if absent. Must be empty with SQLite.
	Schema string

	// Workers are the handlers; nil makes an insert-only client (Start
	// refuses). An insert of a kind Workers lacks is refused.
	Workers *Workers
	// MaxWorkers is how many jobs run at once (DefaultMaxWorkers).
	MaxWorkers int
	// FetchCooldown is the least time between two fetches of jobs
	// (DefaultFetchCooldown; River's is 100ms). An insert by this client
	// wakes its fetcher at once, or at the end of the cooldown when a
	// fetch ran within it.
	FetchCooldown time.Duration
	// FetchPollInterval is the time between fetches when nothing wakes the
	// fetcher (DefaultFetchPollInterval; River's is 1s). It bounds the
	// latency of a retry or snooze coming due, and of a job inserted by
	// another process. At least FetchCooldown.
	FetchPollInterval time.Duration
	// JobTimeout bounds one run unless its kind sets WorkerOptions.Timeout
	// (DefaultJobTimeout).
	JobTimeout time.Duration
	// RescueStuckJobsAfter is how long a job may stay running before it is
	// taken for dead and retried (DefaultRescueStuckJobsAfter); it must
	// exceed every timeout. A rescued job may run twice.
	RescueStuckJobsAfter time.Duration
	// MaxAttempts is the default attempt cap (DefaultMaxAttempts).
	MaxAttempts int
	// RetryDelay gives the wait before retrying after the failed attempt
	// (1 for the first failure). Nil: River's policy, attempt^4 seconds.
	RetryDelay func(attempt int) time.Duration
	// StopCancelWait is how long Stop waits for jobs to return after it
	// cancelled them (DefaultStopCancelWait).
	StopCancelWait time.Duration
	// Logger (nil: slog.Default()).
	Logger *slog.Logger
	// OnEvent is called for every job outcome of this client, in order,
	// from one goroutine, after the outcome is stored. It must not block
	// for long: later events wait for it (none is dropped).
	OnEvent func(Event)
}

// ErrConfig is wrapped by errors of an invalid Config or InsertOpts.
var ErrConfig = errors.New("queue: invalid configuration")

// resolve validates c and fills its defaults.
func (c Config) resolve() (Config, error) {
	switch {
	case c.SQLite == nil && c.Postgres == nil:
		return c, fmt.Errorf("%w: neither SQLite nor Postgres is set", ErrConfig)
	case c.SQLite != nil && c.Postgres != nil:
		return c, fmt.Errorf("%w: both SQLite and Postgres are set; set one", ErrConfig)
	case c.SQLite != nil && c.Schema != "":
		return c, fmt.Errorf("%w: Schema %q is for PostgreSQL; leave it empty with SQLite", ErrConfig, c.Schema)
	}
	if c.Postgres != nil && c.Schema == "" {
		c.Schema = DefaultSchema
	}
	if c.Schema != "" && !schemaRE.MatchString(c.Schema) {
		return c, fmt.Errorf("%w: Schema %q: want letters, digits and underscores, not starting with a digit, at most 40 characters", ErrConfig, c.Schema)
	}
	for name, v := range map[string]time.Duration{
		"FetchCooldown": c.FetchCooldown, "FetchPollInterval": c.FetchPollInterval, "JobTimeout": c.JobTimeout,
		"RescueStuckJobsAfter": c.RescueStuckJobsAfter, "StopCancelWait": c.StopCancelWait,
	} {
		if v < 0 {
			return c, fmt.Errorf("%w: %s is negative (%s)", ErrConfig, name, v)
		}
	}
	if c.MaxWorkers < 0 || c.MaxAttempts < 0 {
		return c, fmt.Errorf("%w: MaxWorkers (%d) and MaxAttempts (%d) must not be negative", ErrConfig, c.MaxWorkers, c.MaxAttempts)
	}
	c.MaxWorkers = cmpOr(c.MaxWorkers, DefaultMaxWorkers)
	c.FetchCooldown = cmpOr(c.FetchCooldown, DefaultFetchCooldown)
	c.FetchPollInterval = cmpOr(c.FetchPollInterval, max(DefaultFetchPollInterval, c.FetchCooldown))
	c.JobTimeout = cmpOr(c.JobTimeout, DefaultJobTimeout)
	c.RescueStuckJobsAfter = cmpOr(c.RescueStuckJobsAfter, DefaultRescueStuckJobsAfter)
	c.MaxAttempts = cmpOr(c.MaxAttempts, DefaultMaxAttempts)
	c.StopCancelWait = cmpOr(c.StopCancelWait, DefaultStopCancelWait)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.FetchCooldown < time.Millisecond {
		return c, fmt.Errorf("%w: FetchCooldown %s is below River's minimum of 1ms", ErrConfig, c.FetchCooldown)
	}
	if c.FetchPollInterval < c.FetchCooldown {
		return c, fmt.Errorf("%w: FetchPollInterval %s is shorter than FetchCooldown %s", ErrConfig, c.FetchPollInterval, c.FetchCooldown)
	}
	if c.RescueStuckJobsAfter <= c.JobTimeout {
		return c, fmt.Errorf("%w: RescueStuckJobsAfter %s must exceed JobTimeout %s", ErrConfig, c.RescueStuckJobsAfter, c.JobTimeout)
	}
	if c.Workers != nil {
		for _, kind := range c.Workers.Kinds() {
			if t := c.Workers.kinds[kind].opts.Timeout; t >= c.RescueStuckJobsAfter {
				return c, fmt.Errorf("%w: kind %q: Timeout %s must be below RescueStuckJobsAfter %s", ErrConfig, kind, t, c.RescueStuckJobsAfter)
			}
		}
	}
	return c, nil
}

// uniqueStates are the states in which a unique job blocks a duplicate
// (River requires available, pending, running and scheduled).
var uniqueStates = []rivertype.JobState{
	rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRetryable,
	rivertype.JobStateRunning, rivertype.JobStateScheduled,
}

// resolveInsertOpts merges an insert's options over the args' defaults, the
// kind's worker options and the default cap, and validates them.
func resolveInsertOpts(args Args, opts *InsertOpts, w *Workers, defaultMaxAttempts int) (InsertOpts, error) {
	var o InsertOpts
	if d, ok := args.(ArgsWithDefaults); ok {
		o = d.DefaultInsertOpts()
	}
	if opts != nil {
		o.Unique = o.Unique || opts.Unique
		o.MaxAttempts = cmpOr(opts.MaxAttempts, o.MaxAttempts)
		o.Priority = cmpOr(opts.Priority, o.Priority)
		if !opts.ScheduledAt.IsZero() {
			o.ScheduledAt = opts.ScheduledAt
		}
	}
	if o.MaxAttempts == 0 && w != nil {
		if e := w.kinds[args.Kind()]; e != nil {
			o.MaxAttempts = e.opts.MaxAttempts
		}
	}
	o.MaxAttempts = cmpOr(o.MaxAttempts, defaultMaxAttempts)
	o.Priority = cmpOr(o.Priority, 1)
	if o.MaxAttempts < 1 {
		return o, fmt.Errorf("%w: %s job: MaxAttempts %d is below 1", ErrConfig, args.Kind(), o.MaxAttempts)
	}
	if o.Priority < 1 || o.Priority > 4 {
		return o, fmt.Errorf("%w: %s job: Priority %d is not between 1 and 4", ErrConfig, args.Kind(), o.Priority)
	}
	return o, nil
}

// eventFromRiver turns River's event into ours.
func eventFromRiver(ev *river.Event) (Event, bool) {
	j := ev.Job
	if j == nil {
		return Event{}, false
	}
	e := Event{Kind: j.Kind, JobID: j.ID, Attempt: j.Attempt}
	switch ev.Kind {
	case river.EventKindJobCompleted:
		e.State = EventCompleted
	case river.EventKindJobCancelled:
		e.State = EventCancelled
	case river.EventKindJobFailed:
		e.State = EventFailed
		if j.State == rivertype.JobStateDiscarded {
			e.State = EventDiscarded
		}
	case river.EventKindJobSnoozed:
		// A snooze gives the attempt back: the run was attempt+1.
		e.State, e.Attempt = EventSnoozed, j.Attempt+1
	case river.EventKindJobInterrupted:
		e.State, e.Attempt = EventInterrupted, j.Attempt+1
	default:
		return Event{}, false
	}
	if e.State == EventFailed || e.State == EventDiscarded || e.State == EventCancelled {
		if n := len(j.Errors); n > 0 {
			ae := attemptErrorFromRiver(j.Errors[n-1])
			e.Err = &ae
		}
	}
	return e, true
}

func attemptErrorFromRiver(a rivertype.AttemptError) AttemptError {
	return AttemptError{At: a.At, Attempt: a.Attempt, Message: strings.TrimPrefix(a.Error, "JobCancelError: "), Trace: a.Trace}
}

func jobRowFromRiver(j *rivertype.JobRow) JobRow {
	r := JobRow{
		ID: j.ID, Kind: j.Kind, State: string(j.State), Attempt: j.Attempt, MaxAttempts: j.MaxAttempts,
		Priority: j.Priority, CreatedAt: j.CreatedAt, ScheduledAt: j.ScheduledAt,
		AttemptedAt: j.AttemptedAt, FinalizedAt: j.FinalizedAt, Args: json.RawMessage(j.EncodedArgs),
	}
	for _, a := range j.Errors {
		r.Errors = append(r.Errors, attemptErrorFromRiver(a))
	}
	var md struct {
		Snoozes int `json:"snoozes"`
	}
	if json.Unmarshal(j.Metadata, &md) == nil {
		r.Snoozes = md.Snoozes
	}
	return r
}

// eventPump delivers events to a callback in order from one goroutine,
// buffering without bound so the producer never blocks or drops.
type eventPump struct {
	mu     sync.Mutex
	buf    []Event
	closed bool
	wake   chan struct{}
	done   chan struct{}
}

func newEventPump(fn func(Event)) *eventPump {
	p := &eventPump{wake: make(chan struct{}, 1), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for {
			p.mu.Lock()
			batch, closed := p.buf, p.closed
			p.buf = nil
			p.mu.Unlock()
			for _, e := range batch {
				if fn != nil {
					fn(e)
				}
			}
			if len(batch) == 0 {
				if closed {
					return
				}
				<-p.wake
			}
		}
	}()
	return p
}

func (p *eventPump) push(e Event) {
	p.mu.Lock()
	p.buf = append(p.buf, e)
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// close lets the pump end once it delivered what it holds.
func (p *eventPump) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}
