package scheduler_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/gapless-dev/gapless/apply"
	"github.com/gapless-dev/gapless/execute/executetest"
	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/lease"
	"github.com/gapless-dev/gapless/plan"
	"github.com/gapless-dev/gapless/scheduler"
	"github.com/gapless-dev/gapless/snapshot"
	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/warehouse"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	at    = executetest.At
	quiet = slog.New(slog.DiscardHandler)
)

// hourly is an hourly incremental model starting 2024-01-01; parent, when
// set, is read (so the model is its child); header adds MODEL properties.
func hourly(name, parent, header string) string {
	from := "generate_series(@start_ts, @end_ts, INTERVAL '1 hour') AS g(ts)"
	sel := "g.ts AS ts, CAST(EXTRACT(HOUR FROM g.ts) AS INTEGER) AS v"
	if parent != "" {
		from = parent + " AS p WHERE p.ts BETWEEN @start_ts AND @end_ts"
		sel = "p.ts AS ts, p.v * 2 AS v"
	}
	return fmt.Sprintf(`MODEL (
  name %s,
  kind INCREMENTAL_BY_TIME_RANGE (time_column ts%s),
  cron '@hourly',
  start '2024-01-01'
);
SELECT %s FROM %s`, name, header, sel, from)
}

// pair is seed 000's DAG: an hourly parent and its hourly child.
func pair() map[string]string {
	return map[string]string{
		"models/parent.sql": hourly("demo.parent", "", ""),
		"models/child.sql":  hourly("demo.child", "demo.parent", ""),
	}
}

// deploy plans and applies the project to prod at exec.
func deploy(t *testing.T, b *executetest.Bundle, id string, exec time.Time) {
	t.Helper()
	p := b.Plan(t, id, plan.Prod, exec, plan.Options{})
	_, err := apply.Apply(b.Ctx, apply.Params{Plan: p, Store: b.Store, Engine: b.Engine, Parser: b.Parser,
		ProjectDir: b.Dir, Clock: clockwork.NewFakeClockAt(exec), Logger: quiet})
	require.NoError(t, err)
}

// execution is one InsertInterval as the warehouse saw it: which daemon,
// which table and interval, and when it began and ended on a counter shared
// by every daemon of the test (so that overlaps are exact, not timed).
type execution struct {
	daemon     string
	table      string
	start, end time.Time
	began, did int64
	err        error
}

// ledger records executions across daemons.
type ledger struct {
	clock atomic.Int64
	mu    sync.Mutex
	execs []execution
}

func (l *ledger) add(e execution) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.execs = append(l.execs, e)
}

func (l *ledger) all() []execution {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]execution(nil), l.execs...)
}

// engine is a daemon's view of the test's shared warehouse: Close does not
// close it (the bundle does), but is counted, as are opens; InsertInterval
// is recorded in the ledger and may be held by the test.
type engine struct {
	warehouse.Engine
	daemon string
	ledger *ledger
	opens  *atomic.Int64
	closes *atomic.Int64
	// hold, when set, runs before each InsertInterval; an error fails it
	// without touching the warehouse.
	hold func(ctx context.Context, p warehouse.InsertIntervalParams) error
}

func (e *engine) Close() error {
	e.closes.Add(1)
	return nil
}

func (e *engine) InsertInterval(ctx context.Context, p warehouse.InsertIntervalParams) (int64, error) {
	if e.hold != nil {
		if err := e.hold(ctx, p); err != nil {
			return 0, err
		}
	}
	ex := execution{daemon: e.daemon, table: p.Table.Name, start: p.Start, end: p.End, began: e.ledger.clock.Add(1)}
	n, err := e.Engine.InsertInterval(ctx, p)
	ex.did, ex.err = e.ledger.clock.Add(1), err
	if e.ledger != nil {
		e.ledger.add(ex)
	}
	return n, err
}

// ApplyIngest and IngestState make the engine an Ingester, as the
// bundle's is, for the daemon's ingest pass.
func (e *engine) ApplyIngest(ctx context.Context, p warehouse.IngestParams) (warehouse.IngestResult, error) {
	return e.Engine.(warehouse.Ingester).ApplyIngest(ctx, p)
}

func (e *engine) IngestState(ctx context.Context, src string) (warehouse.IngestState, error) {
	return e.Engine.(warehouse.Ingester).IngestState(ctx, src)
}

// store counts a daemon's state reads and reports its lease attempts.
type store struct {
	state.Store
	envReads, snapReads, intervalReads atomic.Int64
	snapKeys                           atomic.Int64
	// beforeAcquire and onAcquire, when set, run around each lease
	// attempt.
	beforeAcquire func(key string)
	onAcquire     func(key string, err error)
}

func (s *store) GetEnvironment(ctx context.Context, name string) (*state.Environment, error) {
	s.envReads.Add(1)
	return s.Store.GetEnvironment(ctx, name)
}

func (s *store) GetSnapshots(ctx context.Context, keys []state.SnapshotKey) (map[state.SnapshotKey]*snapshot.Snapshot, error) {
	s.snapReads.Add(1)
	s.snapKeys.Add(int64(len(keys)))
	return s.Store.GetSnapshots(ctx, keys)
}

func (s *store) GetIntervals(ctx context.Context, keys []state.VersionKey) (map[state.VersionKey]interval.Set, error) {
	s.intervalReads.Add(1)
	return s.Store.GetIntervals(ctx, keys)
}

func (s *store) AcquireLease(ctx context.Context, p state.AcquireLeaseParams) (state.Lease, error) {
	if s.beforeAcquire != nil {
		s.beforeAcquire(p.Key)
	}
	l, err := s.Store.AcquireLease(ctx, p)
	if s.onAcquire != nil {
		s.onAcquire(p.Key, err)
	}
	return l, err
}

// daemon is one Scheduler of a test with its counted engine and store.
type daemon struct {
	*scheduler.Scheduler
	engine *engine
	store  *store
	opens  atomic.Int64
	closes atomic.Int64
	logs   *syncBuffer
}

type option func(*scheduler.Params, *daemon)

func withHooks(h func(*scheduler.Params)) option {
	return func(p *scheduler.Params, _ *daemon) { h(p) }
}

// newDaemon builds a Scheduler for prod on b's store and engine, at clk.
func newDaemon(t *testing.T, b *executetest.Bundle, name string, clk clockwork.Clock, l *ledger, opts ...option) *daemon {
	t.Helper()
	d := &daemon{store: &store{Store: b.Store}, logs: &syncBuffer{}}
	if l == nil {
		l = &ledger{}
	}
	d.engine = &engine{Engine: b.Engine, daemon: name, ledger: l, opens: &d.opens, closes: &d.closes}
	p := scheduler.Params{
		Envs: []string{plan.Prod}, Store: d.store, Parser: b.Parser, ProjectDir: b.Dir, Clock: clk, Tick: time.Hour,
		OpenEngine: func(context.Context) (warehouse.Engine, error) {
			d.opens.Add(1)
			return d.engine, nil
		},
		Lease:  lease.Options{Owner: name},
		Logger: slog.New(slog.NewJSONHandler(d.logs, nil)),
	}
	for _, o := range opts {
		o(&p, d)
	}
	s, err := scheduler.New(p)
	require.NoError(t, err)
	d.Scheduler = s
	return d
}

// syncBuffer is a bytes.Buffer safe for a logger and a test to share.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// served returns prod's covered set of a model's served version.
func served(t *testing.T, b *executetest.Bundle, name string) string {
	t.Helper()
	s, _ := b.Served(t, plan.Prod)
	require.Contains(t, s, name)
	return b.Intervals(t, name, s[name].Version)
}

// versionLease is the lease key of the version prod serves for name.
func versionLease(t *testing.T, b *executetest.Bundle, name string) string {
	t.Helper()
	s, _ := b.Served(t, plan.Prod)
	return lease.VersionKey(state.VersionKey{Name: name, Version: s[name].Version})
}
