package queue

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"regexp"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"

	"github.com/gapless-dev/gapless/internal/logkey"
)

var schemaRE = regexp.MustCompile(`\A[A-Za-z_][A-Za-z0-9_]{0,39}\z`)

// backend is what Queue needs of a River client, whatever its driver.
type backend interface {
	insert(ctx context.Context, args river.JobArgs, opts *river.InsertOpts) (*rivertype.JobInsertResult, error)
	// insertTx inserts in tx, which must be of the driver's type.
	insertTx(ctx context.Context, tx any, args river.JobArgs, opts *river.InsertOpts) (*rivertype.JobInsertResult, error)
	start(ctx context.Context) error
	stop(ctx context.Context) error
	stopAndCancel(ctx context.Context) error
	subscribe() (<-chan *river.Event, func())
	jobList(ctx context.Context, p *river.JobListParams) ([]*rivertype.JobRow, error)
	counts(ctx context.Context) ([]Count, error)
}

type riverBackend[TTx any] struct {
	client      *river.Client[TTx]
	countsQuery func(ctx context.Context) ([]Count, error)
}

func (b *riverBackend[TTx]) insert(ctx context.Context, args river.JobArgs, opts *river.InsertOpts) (*rivertype.JobInsertResult, error) {
	return b.client.Insert(ctx, args, opts)
}
func (b *riverBackend[TTx]) insertTx(ctx context.Context, tx any, args river.JobArgs, opts *river.InsertOpts) (*rivertype.JobInsertResult, error) {
	t, ok := tx.(TTx)
	if !ok {
		return nil, fmt.Errorf("%w: a transaction of type %T cannot insert on this queue's database", ErrConfig, tx)
	}
	return b.client.InsertTx(ctx, t, args, opts)
}

func (b *riverBackend[TTx]) start(ctx context.Context) error { return b.client.Start(ctx) }
func (b *riverBackend[TTx]) stop(ctx context.Context) error  { return b.client.Stop(ctx) }
func (b *riverBackend[TTx]) stopAndCancel(ctx context.Context) error {
	return b.client.StopAndCancel(ctx)
}

func (b *riverBackend[TTx]) subscribe() (<-chan *river.Event, func()) {
	return b.client.SubscribeConfig(&river.SubscribeConfig{
		ChanSize: 10_000,
		Kinds: []river.EventKind{
			river.EventKindJobCompleted, river.EventKindJobCancelled, river.EventKindJobFailed,
			river.EventKindJobSnoozed, river.EventKindJobInterrupted,
		},
	})
}

func (b *riverBackend[TTx]) jobList(ctx context.Context, p *river.JobListParams) ([]*rivertype.JobRow, error) {
	res, err := b.client.JobList(ctx, p)
	if err != nil {
		return nil, err
	}
	return res.Jobs, nil
}

func (b *riverBackend[TTx]) counts(ctx context.Context) ([]Count, error) { return b.countsQuery(ctx) }

// Queue is a durable job queue: a River client on the queue's database.
// Several Queues (processes) may share one database: each job runs on one
// of them at a time.
type Queue struct {
	cfg Config
	b   backend

	mu       sync.Mutex
	state    int // 0 new, 1 started, 2 stopped
	stopping chan struct{}
	pump     *eventPump
	fwdDone  chan struct{}
	changed  chan struct{} // closed and replaced at every event
}

// Migrate brings River's tables in cfg's database up to date (rivermigrate
// up). It is idempotent, and safe to run from two processes at once: on
// PostgreSQL under a session advisory lock (and it creates cfg.Schema if
// absent), on SQLite in one BEGIN IMMEDIATE transaction.
func Migrate(ctx context.Context, cfg Config) error {
	c, err := cfg.resolve()
	if err != nil {
		return err
	}
	if c.SQLite != nil {
		return migrateSQLite(ctx, c)
	}
	return migratePostgres(ctx, c)
}

func migrateSQLite(ctx context.Context, c Config) error {
	m, err := rivermigrate.New(riversqlite.New(c.SQLite), &rivermigrate.Config{Logger: quietLogger(c.Logger)})
	if err != nil {
		return fmt.Errorf("queue: migrate sqlite: %w", err)
	}
	// One transaction, begun IMMEDIATE by OpenSQLite's DSN: a second
	// migrator (another process) waits for the write lock, then finds
	// every version applied. SQLite's DDL is transactional, so the
	// migrations need no commit between them.
	tx, err := c.SQLite.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("queue: migrate sqlite: begin: %w", err)
	}
	//nolint:staticcheck // SA1019: MigrateTx is deprecated for PostgreSQL migrations that need a commit between them; SQLite's do not, and one transaction is what serialises two migrators.
	if _, err := m.MigrateTx(ctx, tx, rivermigrate.DirectionUp, nil); err != nil {
		return errors.Join(fmt.Errorf("queue: migrate sqlite: %w", err), tx.Rollback())
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("queue: migrate sqlite: commit: %w", err)
	}
	return nil
}

// migrateLockKey is the advisory lock taken while migrating schema.
func migrateLockKey(schema string) int64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte("gapless/queue/migrate/" + schema))
	return int64(h.Sum64()) //nolint:gosec // G115: any 64 bits make a lock key; wrapping is fine.
}

func migratePostgres(ctx context.Context, c Config) error {
	conn, err := c.Postgres.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("queue: migrate postgres schema %s: acquire a connection: %w", c.Schema, err)
	}
	defer conn.Release()
	key := migrateLockKey(c.Schema)
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", key); err != nil {
		return fmt.Errorf("queue: migrate postgres schema %s: take the migration lock: %w", c.Schema, err)
	}
	defer func() {
		// A failed unlock (the connection broke) ends the session, which
		// releases the lock too: close it rather than pool it.
		if _, err := conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", key); err != nil {
			_ = conn.Conn().Close(context.WithoutCancel(ctx))
		}
	}()
	if _, err := conn.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{c.Schema}.Sanitize()); err != nil {
		return fmt.Errorf("queue: migrate postgres: create schema %s: %w", c.Schema, err)
	}
	m, err := rivermigrate.New(riverpgxv5.New(c.Postgres), &rivermigrate.Config{Schema: c.Schema, Logger: quietLogger(c.Logger)})
	if err != nil {
		return fmt.Errorf("queue: migrate postgres schema %s: %w", c.Schema, err)
	}
	// Migrate (not MigrateTx): some of River's PostgreSQL migrations need a
	// commit between them. The advisory lock, held on conn, serialises
	// migrators; the migrations run on other connections of the pool.
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("queue: migrate postgres schema %s: %w", c.Schema, err)
	}
	return nil
}

// quietLogger is l, less its info messages: rivermigrate logs every
// version at info, and River every job's error and its start and stop.
func quietLogger(l *slog.Logger) *slog.Logger {
	return slog.New(levelFilter{h: l.Handler(), min: slog.LevelWarn})
}

type levelFilter struct {
	h   slog.Handler
	min slog.Level
}

func (f levelFilter) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= f.min && f.h.Enabled(ctx, l)
}
func (f levelFilter) Handle(ctx context.Context, r slog.Record) error { return f.h.Handle(ctx, r) }
func (f levelFilter) WithAttrs(a []slog.Attr) slog.Handler {
	return levelFilter{h: f.h.WithAttrs(a), min: f.min}
}
func (f levelFilter) WithGroup(n string) slog.Handler {
	return levelFilter{h: f.h.WithGroup(n), min: f.min}
}

// Open migrates cfg's database and builds the queue's River client,
// insert-only when cfg.Workers is nil. Nothing runs until Start.
func Open(ctx context.Context, cfg Config) (*Queue, error) {
	c, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	if err := Migrate(ctx, c); err != nil {
		return nil, err
	}
	rc := &river.Config{
		FetchCooldown:        c.FetchCooldown,
		FetchPollInterval:    c.FetchPollInterval,
		JobTimeout:           c.JobTimeout,
		RescueStuckJobsAfter: c.RescueStuckJobsAfter,
		MaxAttempts:          c.MaxAttempts,
		Logger:               quietLogger(c.Logger), // River's info lines are per job; errorLogger logs failures
		Schema:               c.Schema,
		ErrorHandler:         &errorLogger{log: c.Logger},
	}
	if c.RetryDelay != nil {
		rc.RetryPolicy = &retryPolicy{delay: c.RetryDelay}
	}
	if c.Workers != nil {
		rw := river.NewWorkers()
		for _, kind := range c.Workers.Kinds() {
			if err := c.Workers.kinds[kind].register(rw, c.JobTimeout); err != nil {
				return nil, fmt.Errorf("queue: open: register kind %q: %w", kind, err)
			}
		}
		rc.Workers = rw
		rc.Queues = map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: c.MaxWorkers}}
	}
	q := &Queue{cfg: c, stopping: make(chan struct{}), changed: make(chan struct{})}
	if c.SQLite != nil {
		db := c.SQLite
		client, err := river.NewClient(sqliteDriver{riversqlite.New(db)}, rc)
		if err != nil {
			return nil, fmt.Errorf("queue: open sqlite client: %w", err)
		}
		q.b = &riverBackend[*sql.Tx]{client: client, countsQuery: func(ctx context.Context) ([]Count, error) {
			rows, err := db.QueryContext(ctx, "SELECT kind, state, count(*) FROM river_job GROUP BY kind, state ORDER BY kind, state")
			if err != nil {
				return nil, err
			}
			defer func() { _ = rows.Close() }()
			var out []Count
			for rows.Next() {
				var c Count
				if err := rows.Scan(&c.Kind, &c.State, &c.N); err != nil {
					return nil, err
				}
				out = append(out, c)
			}
			return out, rows.Err()
		}}
	} else {
		pool, table := c.Postgres, pgx.Identifier{c.Schema, "river_job"}.Sanitize()
		client, err := river.NewClient(pgDriver{riverpgxv5.New(pool)}, rc)
		if err != nil {
			return nil, fmt.Errorf("queue: open postgres client: %w", err)
		}
		q.b = &riverBackend[pgx.Tx]{client: client, countsQuery: func(ctx context.Context) ([]Count, error) {
			rows, err := pool.Query(ctx, "SELECT kind, state::text, count(*) FROM "+table+" GROUP BY kind, state ORDER BY kind, state")
			if err != nil {
				return nil, err
			}
			return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Count, error) {
				var c Count
				err := r.Scan(&c.Kind, &c.State, &c.N)
				return c, err
			})
		}}
	}
	return q, nil
}

// sqliteDriver and pgDriver are River's drivers without their listener,
// so River runs them poll-only, and wakes the client's own fetcher directly
// at each insert it makes (debounced by FetchCooldown, never lost): the
// insert-to-start latency is about FetchCooldown (BenchmarkInsertToRun).
//
// With the listener, an insert reaches the fetcher through NOTIFY
// (PostgreSQL) or a river_notification row polled every 50ms on the single
// connection (SQLite), and River sends none for an insert within
// FetchCooldown of the client's previous one: such a job waited for the
// next poll, a FetchPollInterval; measured, the slowest of 200 sequential
// inserts took the whole poll interval on both drivers.
//
// The cost: a job inserted by another process (a second replica of serve,
// the CLI) is found by that process's next poll (FetchPollInterval), and a
// new leader is elected by polling (seconds) when the leader stops.
type sqliteDriver struct{ *riversqlite.Driver }

func (sqliteDriver) SupportsListener() bool     { return false }
func (sqliteDriver) SupportsListenNotify() bool { return false }

type pgDriver struct{ *riverpgxv5.Driver }

func (pgDriver) SupportsListener() bool     { return false }
func (pgDriver) SupportsListenNotify() bool { return false }

// retryPolicy is Config.RetryDelay as River's ClientRetryPolicy.
type retryPolicy struct {
	delay func(attempt int) time.Duration
}

func (p *retryPolicy) NextRetry(job *rivertype.JobRow) time.Time {
	return time.Now().UTC().Add(max(p.delay(job.Attempt), 0))
}

// errorLogger logs failed attempts: at info when retried, at warn when
// discarded, and panics at error with their stack.
type errorLogger struct{ log *slog.Logger }

func (h *errorLogger) HandleError(ctx context.Context, job *rivertype.JobRow, err error) *river.ErrorHandlerResult {
	if errors.As(err, new(*rivertype.JobCancelError)) || errors.As(err, new(*rivertype.JobSnoozeError)) {
		return nil
	}
	level, msg := slog.LevelInfo, "queue: job attempt failed; retrying"
	if job.Attempt >= job.MaxAttempts {
		level, msg = slog.LevelWarn, "queue: job attempt failed; discarded"
	}
	h.log.Log(ctx, level, msg, logkey.Kind, job.Kind, logkey.Job, job.ID, logkey.Attempt, job.Attempt, logkey.MaxAttempts, job.MaxAttempts, logkey.Error, err.Error())
	return nil
}

func (h *errorLogger) HandlePanic(ctx context.Context, job *rivertype.JobRow, panicVal any, trace string) *river.ErrorHandlerResult {
	h.log.ErrorContext(ctx, "queue: job panicked", logkey.Kind, job.Kind, logkey.Job, job.ID, logkey.Attempt, job.Attempt,
		logkey.MaxAttempts, job.MaxAttempts, logkey.Panic, fmt.Sprint(panicVal), logkey.Trace, trace)
	return nil
}

// Insert adds a job (see InsertOpts). Args are stored as JSON.
func (q *Queue) Insert(ctx context.Context, args Args, opts *InsertOpts) (Inserted, error) {
	return q.insert(ctx, nil, args, opts)
}

// InsertPgxTx adds a job in tx, a transaction on the queue's PostgreSQL
// database (the state store's): the job exists if and only if tx commits,
// so a state change and the work it calls for are recorded atomically.
// The job is found by the next fetch poll (FetchPollInterval): River wakes
// no fetcher for an insert in a transaction. Refused on SQLite, whose
// queue file is not the state store's.
func (q *Queue) InsertPgxTx(ctx context.Context, tx pgx.Tx, args Args, opts *InsertOpts) (Inserted, error) {
	if q.cfg.Postgres == nil {
		return Inserted{}, fmt.Errorf("%w: InsertPgxTx: the queue is on SQLite", ErrConfig)
	}
	if tx == nil {
		return Inserted{}, fmt.Errorf("%w: InsertPgxTx: nil transaction", ErrConfig)
	}
	return q.insert(ctx, tx, args, opts)
}

func (q *Queue) insert(ctx context.Context, tx pgx.Tx, args Args, opts *InsertOpts) (Inserted, error) {
	if args == nil {
		return Inserted{}, fmt.Errorf("%w: insert: nil args", ErrConfig)
	}
	o, err := resolveInsertOpts(args, opts, q.cfg.Workers, q.cfg.MaxAttempts)
	if err != nil {
		return Inserted{}, err
	}
	ro := &river.InsertOpts{MaxAttempts: o.MaxAttempts, Priority: o.Priority}
	if o.ScheduledAt.After(time.Now()) {
		// A past ScheduledAt would make the job "scheduled", waiting for the
		// leader's scheduler (every 5s) when it is due already.
		ro.ScheduledAt = o.ScheduledAt
	}
	if o.Unique {
		ro.UniqueOpts = river.UniqueOpts{ByArgs: true, ByState: uniqueStates}
	}
	var res *rivertype.JobInsertResult
	if tx != nil {
		res, err = q.b.insertTx(ctx, tx, args, ro)
	} else {
		res, err = q.b.insert(ctx, args, ro)
	}
	if err != nil {
		return Inserted{}, fmt.Errorf("queue: insert %s job: %w", args.Kind(), err)
	}
	return Inserted{ID: res.Job.ID, Duplicate: res.UniqueSkippedAsDuplicate}, nil
}

// ErrInsertOnly is returned by Start on a Queue opened without Workers.
var ErrInsertOnly = errors.New("queue: insert-only (opened without Workers)")

// Start starts fetching and running jobs. ctx's values are kept, its
// cancellation is not: Stop stops the queue. A Queue starts once.
func (q *Queue) Start(ctx context.Context) error {
	if q.cfg.Workers == nil {
		return ErrInsertOnly
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.state != 0 {
		return errors.New("queue: start: already started (a Queue starts once; open another)")
	}
	events, unsubscribe := q.b.subscribe() // closed by River when the client stops
	pump := newEventPump(q.cfg.OnEvent)
	fwdDone := make(chan struct{})
	go func() {
		defer close(fwdDone)
		defer pump.close()
		for ev := range events {
			if e, ok := eventFromRiver(ev); ok {
				pump.push(e)
				q.signalChange()
			}
		}
	}()
	if err := q.b.start(context.WithoutCancel(ctx)); err != nil {
		unsubscribe() // ends the forwarder and the pump
		return fmt.Errorf("queue: start: %w", err)
	}
	q.state, q.pump, q.fwdDone = 1, pump, fwdDone
	return nil
}

// Stopping is closed when Stop begins.
func (q *Queue) Stopping() <-chan struct{} { return q.stopping }

// Stop stops the queue: it stops fetching, waits for running jobs to
// return until ctx ends, then cancels their contexts and waits for them at
// most Config.StopCancelWait. A job cancelled this way is available again,
// not charged an attempt (its event is EventInterrupted), and runs on the
// next start of a Queue on the database. Stop returns nil when every job
// returned before ctx ended, and an error wrapping ctx's otherwise. Every
// event is delivered to OnEvent before Stop returns. Stop on a Queue never
// started, or stopped, returns nil.
func (q *Queue) Stop(ctx context.Context) error {
	q.mu.Lock()
	if q.state != 1 {
		q.mu.Unlock()
		return nil
	}
	q.state = 2
	close(q.stopping)
	q.mu.Unlock()

	err := q.b.stop(ctx)
	if err != nil && ctx.Err() != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), q.cfg.StopCancelWait)
		defer cancel()
		if cerr := q.b.stopAndCancel(cctx); cerr != nil {
			return fmt.Errorf("queue: stop: jobs still running %s after their contexts were cancelled (stop waited for them until: %w): %w", q.cfg.StopCancelWait, ctx.Err(), cerr)
		}
		<-q.fwdDone
		<-q.pump.done
		return fmt.Errorf("queue: stop: running jobs were cancelled when the wait for them ended: %w", ctx.Err())
	}
	if err != nil {
		return fmt.Errorf("queue: stop: %w", err)
	}
	<-q.fwdDone
	<-q.pump.done
	return nil
}

func (q *Queue) signalChange() {
	q.mu.Lock()
	close(q.changed)
	q.changed = make(chan struct{})
	q.mu.Unlock()
}

func (q *Queue) changedCh() <-chan struct{} {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.changed
}

// Counts returns the number of jobs by kind and state (states with no job
// are left out), sorted by kind and state.
func (q *Queue) Counts(ctx context.Context) ([]Count, error) {
	out, err := q.b.counts(ctx)
	if err != nil {
		return nil, fmt.Errorf("queue: counts: %w", err)
	}
	return out, nil
}

// Jobs returns the jobs f selects, by id.
func (q *Queue) Jobs(ctx context.Context, f JobFilter) ([]JobRow, error) {
	p, err := jobListParams(f)
	if err != nil {
		return nil, err
	}
	rows, err := q.b.jobList(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("queue: list jobs: %w", err)
	}
	out := make([]JobRow, 0, len(rows))
	for _, r := range rows {
		out = append(out, jobRowFromRiver(r))
	}
	return out, nil
}

func jobListParams(f JobFilter) (*river.JobListParams, error) {
	limit := cmpOr(f.Limit, 100)
	if limit < 1 || limit > 10_000 {
		return nil, fmt.Errorf("%w: JobFilter.Limit %d is not between 1 and 10000", ErrConfig, f.Limit)
	}
	p := river.NewJobListParams().First(limit).OrderBy(river.JobListOrderByID, river.SortOrderAsc)
	if len(f.IDs) > 0 {
		p = p.IDs(f.IDs...)
	}
	if len(f.Kinds) > 0 {
		p = p.Kinds(f.Kinds...)
	}
	if len(f.States) > 0 {
		states := make([]rivertype.JobState, 0, len(f.States))
		for _, s := range f.States {
			if !validState(s) {
				return nil, fmt.Errorf("%w: JobFilter.States: unknown state %q (want one of %v)", ErrConfig, s, allStates)
			}
			states = append(states, rivertype.JobState(s))
		}
		p = p.States(states...)
	}
	return p, nil
}

func validState(s string) bool {
	for _, a := range allStates {
		if s == a {
			return true
		}
	}
	return false
}

// idlePoll is how often WaitIdle looks again when no event of its own
// client woke it (another client's jobs, a job coming due).
const idlePoll = 50 * time.Millisecond

// WaitIdle returns when no job is running and none is due: available,
// scheduled or waiting to retry with a run time at or before now. A job
// waiting for a later retry or schedule does not keep the queue busy. It
// looks again after every event of this client and every 50ms, and
// returns ctx's error if ctx ends first.
func (q *Queue) WaitIdle(ctx context.Context) error {
	tick := time.NewTicker(idlePoll)
	defer tick.Stop()
	for {
		changed := q.changedCh()
		idle, err := q.idle(ctx)
		if err != nil {
			return err
		}
		if idle {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("queue: wait until idle: %w", ctx.Err())
		case <-changed:
		case <-tick.C:
		}
	}
}

func (q *Queue) idle(ctx context.Context) (bool, error) {
	// One query, one snapshot: a running job's scheduled_at is in the past,
	// so it sorts before any job not yet due.
	next, err := q.b.jobList(ctx, river.NewJobListParams().
		States(rivertype.JobStateRunning, rivertype.JobStateAvailable, rivertype.JobStateScheduled, rivertype.JobStateRetryable).
		OrderBy(river.JobListOrderByScheduledAt, river.SortOrderAsc).First(1))
	if err != nil {
		return false, fmt.Errorf("queue: wait until idle: %w", err)
	}
	return len(next) == 0 || next[0].ScheduledAt.After(time.Now()), nil
}
