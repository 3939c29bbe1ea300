package execute

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/gapless-dev/gapless/audit"
	"github.com/gapless-dev/gapless/cadence"
	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/model"
	"github.com/gapless-dev/gapless/snapshot"
	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/warehouse"
)

// Executor writes model rows with a warehouse engine and records them in a
// state store. It holds no per-run state and is safe for concurrent use on
// different snapshots.
type Executor struct {
	Engine warehouse.Engine
	Store  state.Store
	// ProjectDir is the project folder; SEED paths are relative to the
	// model file's folder inside it.
	ProjectDir string
	// Clock stamps interval writes and times batches. Nil means the real
	// clock (clockwork.NewRealClock).
	Clock clockwork.Clock
	// Logger receives one record per batch. Nil means slog.Default().
	Logger *slog.Logger
	// OnBatch, when set, is called after each batch has committed and been
	// recorded. It must not block for long. Calls for the batches of one
	// Execute never overlap; calls from Executes running at once may.
	OnBatch func(Batch)
	// Audits are the project's user audits (audits/*.sql). Nil means
	// they are read from ProjectDir when a model calls an audit.
	Audits *audit.Library
}

// Batch reports one committed and recorded batch.
type Batch struct {
	Model    string
	Version  string
	Interval interval.Range // the range recorded
	Rows     int64
	Duration time.Duration
}

// Work is what to compute for one snapshot.
type Work struct {
	Template *Template
	// Ranges are the intervals to compute, for incremental kinds.
	Ranges interval.Set
	// Whole builds a kind that is built whole (FULL, VIEW, SEED) and
	// records WholeRange at Execution.
	Whole bool
	// Execution is the execution time macros see.
	Execution time.Time
	// SkipCovered re-reads the version's intervals first and computes only
	// the part of Ranges not yet covered (resuming an apply). It never adds
	// to Ranges. For Whole work it skips the build when WholeRange is
	// already covered.
	SkipCovered bool
	// Fence, when set, pins every interval write (see state.Fence).
	Fence *state.Fence
	// InOrder makes the batches run one after another, in interval order,
	// whatever the model's batch_concurrency: set it for a version some
	// environment serves, so that its views never show a later interval's
	// rows while an earlier one is still missing (a gap nobody accepted),
	// not even for the time of a batch, and so that a failure leaves its
	// covered intervals a prefix, as ever. Concurrent batches are for
	// versions nobody serves yet, which promotion checks whole.
	InOrder bool
	// Stop, when it is closed, keeps further batches from starting: Execute
	// returns an error wrapping ErrStopped before the next batch. The batch
	// in flight is not interrupted (its context governs that), so a stop
	// leaves every batch committed and recorded, or not started.
	Stop <-chan struct{}
}

// ErrStopped is wrapped when Work.Stop kept a batch from starting.
var ErrStopped = errors.New("stopped before the next batch")

// Result is what Execute did.
type Result struct {
	Batches int
	// Rows is the rows the batches wrote; for a kind built whole (FULL,
	// VIEW, SEED) it is the rows the table or view holds once built.
	Rows     int64
	Recorded interval.Set // ranges recorded by this call
	Skipped  interval.Set // ranges of the work found already covered
}

// clock is x.Clock, or the real clock when it is nil: the one place the
// executor decides its time source.
func (x *Executor) clock() clockwork.Clock {
	if x.Clock != nil {
		return x.Clock
	}
	return clockwork.NewRealClock()
}

func (x *Executor) now() time.Time { return x.clock().Now().UTC() }

func (x *Executor) logger() *slog.Logger {
	if x.Logger != nil {
		return x.Logger
	}
	return slog.Default()
}

// WholeRange is the range a kind built whole records when it is built at
// exec: [Unit.Floor(model start), schedule Bound(exec)). Recording a range
// makes "due" uniform across kinds: the scheduler rebuilds the table when
// the next cron firing moves the bound. It reports false when the model has
// no schedule (no start) or nothing is due yet; the table is then built
// but nothing is recorded.
func WholeRange(m *model.Model, exec time.Time) (interval.Range, bool) {
	spec, err := cadence.ForModel(m)
	if err != nil {
		return interval.Range{}, false
	}
	r := interval.NewRange(spec.Unit.Floor(spec.Start), spec.Bound(exec))
	return r, !r.Empty()
}

// Prepare creates the snapshot's physical schema and its physical object,
// when it does not exist yet, the way the backfill will build it, so that
// the models that read it can be made from it (SQLMesh's create stage):
//   - an incremental table, empty, with the model's declared columns when
//     it has some (so a model that reads itself finds its table), or else
//     with the columns of its query (rendered for the model's first
//     interval, read with LIMIT 0);
//   - a FULL table, empty, with the columns of its query;
//   - a VIEW's view;
//   - a SEED's table, empty, with the CSV's columns (the backfill loads it).
//
// The parents' objects must exist: callers prepare the snapshots of a set
// in topological order. It does nothing for an object that exists, so it
// is safe to repeat.
func (x *Executor) Prepare(ctx context.Context, t *Template, exec time.Time) error {
	s := t.Snapshot
	if s.Model.Kind == model.KindExternal {
		return nil
	}
	if err := x.Engine.CreateSchema(ctx, t.Table.Schema); err != nil {
		return fmt.Errorf("creating schema for %s: %w", s.Name, err)
	}
	exists, err := x.Engine.TableExists(ctx, t.Table)
	if err != nil {
		return fmt.Errorf("checking the table of %s: %w", s.Name, err)
	}
	if exists {
		return nil
	}
	return x.create(ctx, t, exec)
}

// PrepareAll is Prepare for every template of tpls, in their order (a
// topological one: parents first), at the cost of one existence question
// for the whole set (warehouse.Engine.TablesExist) and one CreateSchema
// per physical schema that gets a new object, instead of one of each per
// template: Prepare's lookup scans DuckDB's catalog, so preparing N
// templates one by one costs N catalog scans (O(N²) for a first deploy).
// Every object is checked against the warehouse, those recorded as built
// too, so a table dropped behind gapless's back is made again rather than
// served missing. Like Prepare, it creates only what does not exist and is
// safe to repeat; a creation that fails because the object exists by then
// (made meanwhile by a concurrent apply) counts as done. It stops at the
// first other failure, leaving what it made.
func (x *Executor) PrepareAll(ctx context.Context, tpls []*Template, exec time.Time) error {
	snaps := make([]*snapshot.Snapshot, len(tpls))
	byName := make(map[string]*Template, len(tpls))
	for i, t := range tpls {
		snaps[i] = t.Snapshot
		byName[t.Snapshot.Name] = t
	}
	return x.PrepareSnapshots(ctx, snaps, func(s *snapshot.Snapshot) (*Template, error) { return byName[s.Name], nil }, exec)
}

// PrepareSnapshots is PrepareAll for snaps, asking template for the
// template of a snapshot only when its object is missing: the existence
// question needs only the physical table (PhysicalTable), and building a
// template parses the model's query, so a deploy that changes one model of
// 10,000 builds one template here, not 10,000.
func (x *Executor) PrepareSnapshots(ctx context.Context, snaps []*snapshot.Snapshot, template func(*snapshot.Snapshot) (*Template, error), exec time.Time) error {
	var todo []*snapshot.Snapshot
	var tables []warehouse.Table
	for _, s := range snaps {
		if s.Model.Kind == model.KindExternal {
			continue
		}
		todo = append(todo, s)
		tables = append(tables, PhysicalTable(s))
	}
	found, err := x.Engine.TablesExist(ctx, tables)
	if err != nil {
		return fmt.Errorf("checking the tables of %d models: %w", len(tables), err)
	}
	made := map[warehouse.Table]bool{}
	schemas := map[string]bool{}
	for i, s := range todo {
		table := tables[i]
		if found[i] || made[table] {
			continue
		}
		t, err := template(s)
		if err != nil {
			return err
		}
		if !schemas[table.Schema] {
			if err := x.Engine.CreateSchema(ctx, table.Schema); err != nil {
				return fmt.Errorf("creating schema for %s: %w", s.Name, err)
			}
			schemas[table.Schema] = true
		}
		if err := x.create(ctx, t, exec); err != nil {
			// Another apply (a plan sharing this version) may have made
			// it since the question: what Prepare would have found.
			if exists, xerr := x.Engine.TableExists(ctx, table); xerr != nil || !exists {
				return err
			}
		}
		made[table] = true
	}
	return nil
}

// create makes t's physical object, which does not exist, in its schema,
// which does (see Prepare).
func (x *Executor) create(ctx context.Context, t *Template, exec time.Time) error {
	s := t.Snapshot
	spec, err := cadence.ForModel(s.Model)
	if err != nil {
		return err
	}
	first := spec.Unit.Floor(spec.Start)
	firstRange := interval.NewRange(first, spec.Unit.Add(first, 1))
	created := func() error {
		x.emit(ctx, TableCreated{Model: s.Name, Version: s.Version, Table: t.Table})
		return nil
	}
	x.warnLayout(ctx, s.Model)
	switch s.Model.Kind {
	case model.KindSeed:
		cols, _, err := ReadSeed(x.seedPath(s.Model), s.Model.Columns)
		if err != nil {
			return &BatchError{Model: s.Name, Version: s.Version, Err: fmt.Errorf("seed %s: %w", s.Name, err)}
		}
		if err := x.Engine.CreateTable(ctx, warehouse.CreateTableParams{Table: t.Table, Columns: cols, Layout: LayoutOf(s.Model)}); err != nil {
			return &BatchError{Model: s.Name, Version: s.Version, Err: fmt.Errorf("creating the seed's table: %w", err)}
		}
		return created()
	case model.KindView:
		r := firstRange
		if whole, ok := WholeRange(s.Model, exec); ok {
			r = whole // as the backfill renders it
		}
		sql, err := t.Render(r, exec)
		if err != nil {
			return &BatchError{Model: s.Name, Version: s.Version, Err: err}
		}
		if err := x.Engine.CreateOrReplaceView(ctx, warehouse.ViewParams{View: t.Table, Query: sql}); err != nil {
			return &BatchError{Model: s.Name, Version: s.Version, SQL: sql, Err: err}
		}
		if err := x.RegisterComments(ctx, s); err != nil {
			return &BatchError{Model: s.Name, Version: s.Version, Err: err}
		}
		return created()
	}
	if cols := s.Model.Columns; len(cols) > 0 && s.Model.Kind.IsIncremental() {
		// Declared columns make the table, so that a model that reads
		// itself finds it before its first query.
		wcols := make([]warehouse.Column, len(cols))
		for i, c := range cols {
			wcols[i] = warehouse.Column{Name: c.Name, Type: c.Type}
		}
		if s.Model.Kind.IsSCDType2() { // the history columns (execute/kinds.go)
			wcols = append(wcols, warehouse.Column{Name: s.Model.SCD.ValidFrom, Type: s.Model.SCD.TimeDataType},
				warehouse.Column{Name: s.Model.SCD.ValidTo, Type: s.Model.SCD.TimeDataType})
		}
		if err := x.Engine.CreateTable(ctx, warehouse.CreateTableParams{Table: t.Table, Columns: wcols, Layout: LayoutOf(s.Model)}); err != nil {
			return &BatchError{Model: s.Name, Version: s.Version, Err: fmt.Errorf("creating the table from the declared columns: %w", err)}
		}
		// The table exists now, so even a query that reads it can be
		// described: its columns must be the declared ones, or the first
		// batch would fail (a declared column missing) or drop data (an
		// undeclared one).
		if err := x.checkDeclared(ctx, t, spec, exec); err != nil {
			if derr := x.Engine.DropTable(ctx, t.Table); derr != nil {
				err = errors.Join(err, fmt.Errorf("dropping the table again: %w", derr))
			}
			return err
		}
		return created()
	}
	// Incremental and FULL: the query's columns, no rows. A FULL model's
	// columns derived by Check are a hint the engine may make the table
	// from (its first build compares the table with the query anyway);
	// an incremental table's batches insert by name, so it is made from
	// the query itself.
	sql, err := t.Render(firstRange, exec)
	if err != nil {
		return &BatchError{Model: s.Name, Version: s.Version, Err: err}
	}
	if s.Model.Kind.IsSCDType2() {
		sql = scdCreateQuery(x.Engine, s.Model, sql) // with the history columns (execute/kinds.go)
	}
	p := warehouse.CreateTableAsParams{Table: t.Table, Query: sql, Layout: LayoutOf(s.Model)}
	if s.Model.Kind == model.KindFull {
		p.Columns = t.Columns
	}
	if err := x.Engine.CreateTableAs(ctx, p); err != nil {
		return &BatchError{Model: s.Name, Version: s.Version, SQL: sql, Err: err}
	}
	return created()
}

// seedPath is where m's CSV is (see seedFile).
func (x *Executor) seedPath(m *model.Model) string { return seedFile(x.ProjectDir, m) }

// seedFile is where m's CSV is in the project at dir: relative to the
// model file's folder, unless absolute.
func seedFile(dir string, m *model.Model) string {
	if filepath.IsAbs(m.SeedPath) {
		return m.SeedPath
	}
	return filepath.Join(dir, filepath.Dir(m.Path), m.SeedPath)
}

// checkDeclared compares the columns t's query produces (rendered for the
// model's first interval, read with LIMIT 0) with the model's declared
// columns, by name as the engines compare them (ASCII case folded).
func (x *Executor) checkDeclared(ctx context.Context, t *Template, spec cadence.Spec, exec time.Time) error {
	s := t.Snapshot
	first := spec.Unit.Floor(spec.Start)
	sql, err := t.Render(interval.NewRange(first, spec.Unit.Add(first, 1)), exec)
	if err != nil {
		return &BatchError{Model: s.Name, Version: s.Version, Err: err}
	}
	probe := "SELECT * FROM (\n" + strings.TrimRight(strings.TrimSpace(sql), ";") + "\n) AS gapless_q LIMIT 0"
	res, err := x.Engine.Query(ctx, probe)
	if err != nil {
		return &BatchError{Model: s.Name, Version: s.Version, SQL: probe, Err: fmt.Errorf("describing the query's columns: %w", err)}
	}
	cols := make([]warehouse.Column, len(res.Columns))
	for i, n := range res.Columns {
		cols[i] = warehouse.Column{Name: n}
	}
	if err := declaredMatch(s.Model, cols); err != nil {
		return &BatchError{Model: s.Name, Version: s.Version, Err: err}
	}
	return nil
}

// ErrColumnsMismatch is wrapped when a model's declared columns are not
// the columns its query produces.
var ErrColumnsMismatch = errors.New("declared columns do not match the query")

// Execute computes w and records what it computed.
//
// Invariant: each batch's interval is recorded only after the statement
// that wrote its rows has committed; a failing batch returns a *BatchError
// and records nothing, and batches before it stay recorded, so running the
// same work again with SkipCovered resumes after the last committed batch.
// A fenced work checks its fence before each batch (state.CheckFence), so
// a writer whose evidence went stale writes nothing more to the warehouse;
// and records each batch under the fence, so evidence that goes stale
// during a batch fails its record with an error wrapping state.ErrFenced:
// that batch's rows were written (replacing exactly that interval's rows,
// so a later run that recomputes it cannot duplicate them) but are not
// claimed.
//
// A time-range model with batch_concurrency N > 1 (that does not read
// itself, and whose work is not InOrder) runs up to N batches at once, each keeping the invariant above on
// its own. Once one fails, no further batch starts; those in flight finish
// and stay recorded if they commit, and every failure is returned, earliest
// interval first. The recorded intervals may then have holes, which a
// resume with SkipCovered fills exactly.
func (x *Executor) Execute(ctx context.Context, w Work) (Result, error) {
	t := w.Template
	s := t.Snapshot
	key := state.VersionKey{Name: s.Name, Version: s.Version}
	var res Result
	if s.Model.Kind == model.KindExternal {
		return res, nil
	}
	var covered interval.Set
	if w.SkipCovered || s.Model.Kind == model.KindSeed {
		got, err := x.Store.GetIntervals(ctx, []state.VersionKey{key})
		if err != nil {
			return res, fmt.Errorf("reading intervals of %s: %w", s.Name, err)
		}
		covered = got[key]
	}
	// Audits are resolved before anything is written: an unknown audit or
	// a bad argument fails the work, not a batch halfway.
	auds, err := x.bindAudits(s.Model)
	if err != nil {
		return res, &BatchError{Model: s.Name, Version: s.Version, Err: err}
	}
	if w.Whole || !s.Model.Kind.IsIncremental() {
		return x.buildWhole(ctx, w, covered, auds)
	}
	todo := w.Ranges
	if w.SkipCovered {
		todo = w.Ranges.Subtract(covered)
		res.Skipped = w.Ranges.Intersect(covered)
	}
	if todo.IsEmpty() {
		return res, nil
	}
	spec, err := cadence.ForModel(s.Model)
	if err != nil {
		return res, err
	}
	text, err := x.textTime(ctx, t)
	if err != nil {
		return res, err
	}
	batches := slices.Collect(cadence.Batches(todo, spec.Unit, s.Model.BatchSize))
	slots := 1
	if s.Model.Kind == model.KindIncrementalByTimeRange && s.Model.BatchConcurrency > 1 && len(batches) > 1 {
		switch {
		case w.InOrder:
			x.emit(ctx, BatchesInOrder{Model: s.Name, Version: s.Version})
		case t.ReadsItself:
			x.emit(ctx, BatchesInOrder{Model: s.Name, Version: s.Version, ReadsItself: true})
		default:
			slots = min(s.Model.BatchConcurrency, len(batches))
		}
	}
	var (
		mu      sync.Mutex // guards res, errs and the call to report
		errs    []batchFailure
		sem     = make(chan struct{}, slots)
		wg      sync.WaitGroup
		stopped error
	)
	failed := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(errs) > 0
	}
batches:
	for _, r := range batches {
		// A slot frees only after its batch's outcome is in errs or res, so
		// with one slot this is the sequential loop: the next batch starts
		// only after the previous one committed and was recorded.
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			stopped = fmt.Errorf("model %s before interval %s: %w", s.Name, r, ctx.Err())
			break batches
		}
		if failed() {
			<-sem
			break
		}
		if err := ctx.Err(); err != nil {
			stopped = fmt.Errorf("model %s before interval %s: %w", s.Name, r, err)
		}
		if stopped == nil {
			select {
			case <-w.Stop:
				stopped = fmt.Errorf("model %s before interval %s: %w", s.Name, r, ErrStopped)
			default:
			}
		}
		if stopped != nil {
			<-sem
			break
		}
		wg.Go(func() {
			defer func() { <-sem }()
			b, err := x.runBatch(ctx, w, key, r, slots > 1, text, auds)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, batchFailure{r, err})
				return
			}
			res.Batches++
			res.Rows += b.Rows
			res.Recorded = res.Recorded.Add(r)
			x.report(ctx, b)
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		// Concurrent batches can fail together: every failure is returned,
		// earliest interval first, so errors.As finds the earliest.
		slices.SortFunc(errs, func(a, b batchFailure) int { return a.r.Start.Compare(b.r.Start) })
		joined := make([]error, len(errs))
		for i, f := range errs {
			joined[i] = f.err
		}
		if len(joined) == 1 {
			return res, joined[0]
		}
		return res, errors.Join(joined...)
	}
	return res, stopped
}

type batchFailure struct {
	r   interval.Range
	err error
}

// textTime is the format of t's time column when the column holds text:
// its batches then compare it with their bounds rendered in that format.
// It is nil for a time column of a DATE or TIMESTAMP type (compared as
// time, whatever the format says) and for a model without a format.
func (x *Executor) textTime(ctx context.Context, t *Template) (*model.TimeFormat, error) {
	m := t.Snapshot.Model
	if m.Kind != model.KindIncrementalByTimeRange || m.TimeColumnFormat == "" {
		return nil, nil
	}
	f, err := model.ParseTimeFormat(m.TimeColumnFormat)
	if err != nil {
		return nil, fmt.Errorf("model %s: %w", m.Name, err)
	}
	cols, err := x.Engine.Columns(ctx, t.Table)
	if err != nil {
		return nil, fmt.Errorf("reading the columns of %s: %w", m.Name, err)
	}
	if col, ok := findColumn(cols, m.TimeColumn); ok && timeType(col.Type) == "text" {
		return &f, nil
	}
	return nil, nil
}

// runBatch writes and records one batch of an incremental snapshot: the
// fence is checked before anything is written, and the interval is
// recorded only after the statement that wrote its rows committed.
// concurrent tells the engine other batches of the table run at once; text,
// when set, is the format the time column's text is in.
//
// The model's pre-statements run before the write and its post-statements
// after it, before the audits (runStatements); a failing one fails the
// batch and records nothing.
//
// Once the rows are written, the model's audits run over them (auds); a
// blocking one that fails keeps the interval from being recorded, and for
// a time-range model removes the batch's rows again (see clearInterval).
func (x *Executor) runBatch(ctx context.Context, w Work, key state.VersionKey, r interval.Range, concurrent bool, text *model.TimeFormat, auds []audit.Bound) (Batch, error) {
	t := w.Template
	s := t.Snapshot
	if err := x.checkFence(ctx, key, r, w.Fence); err != nil {
		return Batch{}, err
	}
	began := x.now()
	x.emit(ctx, BatchStarted{Model: s.Name, Version: s.Version, Interval: r.String()})
	sql, err := t.Render(r, w.Execution)
	if err != nil {
		return Batch{}, &BatchError{Model: s.Name, Version: s.Version, Interval: r, Err: err}
	}
	if err := x.runStatements(ctx, t, false, r, false, w.Execution); err != nil {
		return Batch{}, err
	}
	var rows int64
	switch s.Model.Kind {
	case model.KindIncrementalByTimeRange:
		p := warehouse.InsertIntervalParams{
			Table: t.Table, TimeColumn: s.Model.TimeColumn, Start: r.Start, End: r.End, Query: sql, Concurrent: concurrent}
		if text != nil {
			p.Text = &warehouse.TextBounds{Start: text.Format(r.Start), End: text.Format(r.End)}
		}
		rows, err = x.Engine.InsertInterval(ctx, p)
	case model.KindSCDType2ByTime, model.KindSCDType2ByColumn, model.KindIncrementalByPartition, model.KindIncrementalUnmanaged:
		rows, err = x.kindBatch(ctx, t, key, sql, w.Execution) // execute/kinds.go
		if serr := (*sqlError)(nil); errors.As(err, &serr) {
			sql = serr.sql
		}
	default:
		rows, err = x.Engine.MergeByKey(ctx, warehouse.MergeParams{Table: t.Table, Key: s.Model.UniqueKey, Query: sql})
	}
	if err != nil {
		if ierr := interrupted(ctx); ierr != nil {
			x.emit(ctx, BatchEnded{Model: s.Name, Version: s.Version, Interval: r.String(), Interrupted: true, Err: ierr})
			return Batch{}, &BatchError{Model: s.Name, Version: s.Version, Interval: r, Err: ierr}
		}
		x.emit(ctx, BatchEnded{Model: s.Name, Version: s.Version, Interval: r.String(), Err: err})
		return Batch{}, &BatchError{Model: s.Name, Version: s.Version, Interval: r, SQL: sql, Err: err}
	}
	if err := x.runStatements(ctx, t, true, r, false, w.Execution); err != nil {
		return Batch{}, err
	}
	if len(auds) > 0 {
		if err := blockingFailure(x.runAudits(ctx, w.Template, auds, r, text, w.Execution)); err != nil {
			if s.Model.Kind == model.KindIncrementalByTimeRange {
				if cerr := x.clearInterval(ctx, w.Template, r, text); cerr != nil {
					err = errors.Join(err, cerr)
				}
			}
			x.emit(ctx, BatchEnded{Model: s.Name, Version: s.Version, Interval: r.String(), Err: err})
			return Batch{}, &BatchError{Model: s.Name, Version: s.Version, Interval: r, Err: err}
		}
	}
	if err := x.record(ctx, key, interval.NewSet(r), w.Fence); err != nil {
		return Batch{}, err
	}
	return Batch{Model: s.Name, Version: s.Version, Interval: r, Rows: rows, Duration: x.now().Sub(began)}, nil
}

// buildWhole builds a FULL, VIEW or SEED snapshot and records WholeRange.
//
// Once built, the model's audits run over the whole table (auds); a
// blocking one that fails keeps WholeRange from being recorded.
func (x *Executor) buildWhole(ctx context.Context, w Work, covered interval.Set, auds []audit.Bound) (Result, error) {
	t := w.Template
	s := t.Snapshot
	var res Result
	whole, recordable := WholeRange(s.Model, w.Execution)
	if w.SkipCovered && recordable && covered.Covers(whole) {
		res.Skipped = interval.NewSet(whole)
		return res, nil
	}
	if err := x.checkFence(ctx, state.VersionKey{Name: s.Name, Version: s.Version}, whole, w.Fence); err != nil {
		return res, err
	}
	began := x.now()
	x.emit(ctx, BatchStarted{Model: s.Name, Version: s.Version, Interval: whole.String()})
	var (
		rows    int64
		counted bool // rows is what the write itself reported
		sql     string
		err     error
	)
	if err := x.runStatements(ctx, t, false, whole, true, w.Execution); err != nil {
		return res, err
	}
	switch s.Model.Kind {
	case model.KindSeed:
		_, err = x.loadSeed(ctx, t, covered) // rows are counted below
	case model.KindView:
		if sql, err = t.Render(whole, w.Execution); err == nil {
			err = x.Engine.CreateOrReplaceView(ctx, warehouse.ViewParams{View: t.Table, Query: sql})
		}
		if err == nil {
			err = x.RegisterComments(ctx, s) // a replaced view may lose them
		}
	default: // FULL, and an incremental kind asked to build whole
		if sql, err = t.Render(whole, w.Execution); err == nil {
			// Nothing recorded yet: the table is as Prepare made it, empty.
			first := recordable && covered.IsEmpty() && w.SkipCovered
			rp := warehouse.ReplaceTableParams{Table: t.Table, Query: sql, FirstBuild: first, Layout: LayoutOf(s.Model)}
			if rr, ok := x.Engine.(warehouse.RowReplacer); ok {
				rows, counted, err = rr.ReplaceTableRows(ctx, rp)
			} else {
				err = x.Engine.ReplaceTable(ctx, rp)
			}
		}
	}
	if err != nil {
		if ierr := interrupted(ctx); ierr != nil {
			x.emit(ctx, BatchEnded{Model: s.Name, Version: s.Version, Whole: true, Interrupted: true, Err: ierr})
			return res, &BatchError{Model: s.Name, Version: s.Version, Err: ierr}
		}
		x.emit(ctx, BatchEnded{Model: s.Name, Version: s.Version, Whole: true, Err: err})
		return res, &BatchError{Model: s.Name, Version: s.Version, SQL: sql, Err: err}
	}
	if err := x.runStatements(ctx, t, true, whole, true, w.Execution); err != nil {
		return res, err
	}
	// Report the rows the table or view holds: a view's write returns no
	// count, a FULL table's only when it appended (warehouse.RowReplacer),
	// and a SEED left as it was loaded none.
	if !counted {
		if rows, err = x.countRows(ctx, t); err != nil {
			if ierr := interrupted(ctx); ierr != nil {
				return res, &BatchError{Model: s.Name, Version: s.Version, Err: ierr}
			}
			return res, &BatchError{Model: s.Name, Version: s.Version, Err: err}
		}
	}
	if len(auds) > 0 {
		if err := blockingFailure(x.runAudits(ctx, t, auds, interval.Range{}, nil, w.Execution)); err != nil {
			x.emit(ctx, BatchEnded{Model: s.Name, Version: s.Version, Whole: true, Err: err})
			return res, &BatchError{Model: s.Name, Version: s.Version, Err: err}
		}
	}
	res.Batches, res.Rows = 1, rows
	if recordable {
		key := state.VersionKey{Name: s.Name, Version: s.Version}
		if err := x.record(ctx, key, interval.NewSet(whole), w.Fence); err != nil {
			return res, err
		}
		res.Recorded = interval.NewSet(whole)
	}
	x.report(ctx, Batch{Model: s.Name, Version: s.Version, Interval: whole, Rows: rows, Duration: x.now().Sub(began)})
	return res, nil
}

// countRows counts the rows t's table (or view) holds. For a view this runs
// its query once, so a view that cannot be read fails its build rather than
// its first reader.
func (x *Executor) countRows(ctx context.Context, t *Template) (int64, error) {
	q := "SELECT count(*) FROM " + x.Engine.QuoteTable(t.Table)
	res, err := x.Engine.Query(ctx, q)
	if err != nil {
		return 0, fmt.Errorf("counting the rows of %s: %w", t.Table, err)
	}
	if len(res.Rows) != 1 || len(res.Rows[0]) != 1 {
		return 0, fmt.Errorf("counting the rows of %s: %d rows back", t.Table, len(res.Rows))
	}
	switch n := res.Rows[0][0].(type) {
	case int64:
		return n, nil
	case int32:
		return int64(n), nil
	case uint64:
		return int64(n), nil
	default:
		return 0, fmt.Errorf("counting the rows of %s: a %T back", t.Table, n)
	}
}

// interrupted is the error of a write that failed because ctx was
// cancelled (Ctrl-C, a stopping daemon, a sibling's failure): it wraps
// ctx.Err(), so errors.Is(err, context.Canceled) holds whatever the engine
// reported. It is nil while ctx is live. An interrupted batch is not a
// failure of its model: its statement rolled back and nothing was recorded,
// so it is neither logged as an error nor reported with its SQL.
func interrupted(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("interrupted, rolled back: %w", err)
	}
	return nil
}

// checkFence refuses to start a batch whose fence is already stale.
func (x *Executor) checkFence(ctx context.Context, key state.VersionKey, r interval.Range, fence *state.Fence) error {
	if fence == nil {
		return nil
	}
	if err := x.Store.CheckFence(ctx, *fence, x.now()); err != nil {
		if errors.Is(err, state.ErrFenced) {
			x.emit(ctx, WriteFenced{Model: key.Name, Version: key.Version, Interval: r.String(), BeforeStart: true})
		}
		return fmt.Errorf("starting %s %s for %s: %w", key.Name, r, key.Version, err)
	}
	return nil
}

func (x *Executor) record(ctx context.Context, key state.VersionKey, ranges interval.Set, fence *state.Fence) error {
	err := x.Store.AddIntervals(ctx, state.IntervalsParams{Key: key, Ranges: ranges, Fence: fence, Now: x.now()})
	if err != nil {
		if errors.Is(err, state.ErrFenced) {
			x.emit(ctx, WriteFenced{Model: key.Name, Version: key.Version, Interval: ranges.String()})
		}
		return fmt.Errorf("recording %s %s for %s: %w", key.Name, ranges, key.Version, err)
	}
	return nil
}

func (x *Executor) report(ctx context.Context, b Batch) {
	x.emit(ctx, BatchCommitted{Batch: b})
	if x.OnBatch != nil {
		x.OnBatch(b)
	}
}
