package execute_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/gapless-dev/gapless/execute"
	"github.com/gapless-dev/gapless/execute/executetest"
	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/sqlparse"
	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/warehouse"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var at = executetest.At

var quiet = slog.New(slog.DiscardHandler)

// Scenario: the quickstart's rollup reads demo.events; its template reads
// the physical table of the version the target set uses, quoted by the
// engine, while macros stay for per-interval rendering.
func TestTemplatesPointAtPhysicalTables(t *testing.T) {
	t.Parallel()
	b := executetest.Setup(t, true, nil)
	pr := b.Load(t)
	tpls, err := execute.Templates(b.Ctx, b.Parser, b.Engine, pr.Snapshots)
	require.NoError(t, err)

	events := pr.Snapshots["demo.events"]
	daily := tpls["demo.daily_revenue"]
	phys := b.Engine.QuoteTable(execute.PhysicalTable(events))
	require.Contains(t, daily.Query, "FROM "+phys+" AS e")
	require.Contains(t, daily.Query, "@start_ts")
	require.NotContains(t, daily.Query, "demo.events")

	sql, err := daily.Render(interval.NewRange(at(2024, 1, 1, 0), at(2024, 1, 2, 0)), at(2024, 1, 2, 0))
	require.NoError(t, err)
	require.Contains(t, sql, "TIMESTAMP '2024-01-01 00:00:00'")
	require.Contains(t, sql, "TIMESTAMP '2024-01-01 23:59:59.999999'")

	require.Equal(t, "demo__dev", execute.ViewTable(events, "dev").Schema)
	require.Equal(t, "demo", execute.ViewTable(events, "prod").Schema)
	require.Equal(t, "gapless__demo", execute.PhysicalTable(events).Schema)
}

// Scenario: a snapshot made by loading the project keeps where its query
// names tables (Snapshot.Refs), so its template is built without the SQL
// parser: with the parser closed, the template is the one parsing gives. A
// snapshot saved without references is parsed as before, and references
// that do not fit the query fail instead of running it unrewritten.
func TestTemplatesUseTheSnapshotsReferencesWithoutParsing(t *testing.T) {
	t.Parallel()
	b := executetest.Setup(t, true, nil)
	pr := b.Load(t)
	daily := pr.Snapshots["demo.daily_revenue"]
	require.NotEmpty(t, daily.Refs, "loading the project keeps the query's table references")
	parsed := *daily
	parsed.Refs = nil
	want, err := execute.TemplateOf(b.Ctx, b.Parser, b.Engine, &parsed, pr.Snapshots)
	require.NoError(t, err)

	closed, err := sqlparse.Open()
	require.NoError(t, err)
	require.NoError(t, closed.Close())
	got, err := execute.TemplateOf(b.Ctx, closed, b.Engine, daily, pr.Snapshots)
	require.NoError(t, err, "a snapshot with references needs no parser")
	require.Equal(t, want.Query, got.Query)
	require.Equal(t, want.ReadsItself, got.ReadsItself)

	_, err = execute.TemplateOf(b.Ctx, closed, b.Engine, &parsed, pr.Snapshots)
	require.Error(t, err, "without references the query is parsed, and the closed parser fails")

	shifted := *daily
	shifted.Refs = slices.Clone(daily.Refs)
	for i := range shifted.Refs {
		shifted.Refs[i].Offset++
	}
	_, err = execute.TemplateOf(b.Ctx, closed, b.Engine, &shifted, pr.Snapshots)
	require.ErrorIs(t, err, sqlparse.ErrRewrite, "references that do not fit the text are refused")
}

// Scenario: two days of hourly events are computed in batches of 24 hours;
// each batch is recorded after it commits, and running the same work again
// with SkipCovered does nothing. Restating a day replaces exactly its rows.
func TestIncrementalBatchesAreRecordedAndIdempotent(t *testing.T) {
	t.Parallel()
	b := executetest.Setup(t, true, nil)
	pr := b.Load(t)
	tpls, err := execute.Templates(b.Ctx, b.Parser, b.Engine, pr.Snapshots)
	require.NoError(t, err)
	var batches []execute.Batch
	x := &execute.Executor{Engine: b.Engine, Store: b.Store, ProjectDir: b.Dir, Logger: quiet,
		Clock: clockwork.NewFakeClockAt(at(2024, 1, 3, 0)), OnBatch: func(bt execute.Batch) { batches = append(batches, bt) }}
	tpl := tpls["demo.events"]
	exec := at(2024, 1, 3, 0)
	require.NoError(t, x.Prepare(b.Ctx, tpl, exec))
	require.NoError(t, x.Prepare(b.Ctx, tpl, exec), "preparing twice is fine")

	work := interval.NewSet(interval.NewRange(at(2024, 1, 1, 0), at(2024, 1, 3, 0)))
	res, err := x.Execute(b.Ctx, execute.Work{Template: tpl, Ranges: work, Execution: exec, SkipCovered: true})
	require.NoError(t, err)
	require.Equal(t, 2, res.Batches)
	require.Equal(t, int64(2*24*12), res.Rows)
	require.Len(t, batches, 2)
	s := tpl.Snapshot
	require.Equal(t, work.String(), b.Intervals(t, s.Name, s.Version))
	phys := b.Engine.QuoteTable(tpl.Table)
	require.Equal(t, int64(2*24*12), b.Count(t, phys))

	res, err = x.Execute(b.Ctx, execute.Work{Template: tpl, Ranges: work, Execution: exec, SkipCovered: true})
	require.NoError(t, err)
	require.Zero(t, res.Batches)
	require.Equal(t, work.String(), res.Skipped.String())

	day := interval.NewSet(interval.NewRange(at(2024, 1, 2, 0), at(2024, 1, 3, 0)))
	res, err = x.Execute(b.Ctx, execute.Work{Template: tpl, Ranges: day, Execution: exec})
	require.NoError(t, err)
	require.Equal(t, 1, res.Batches)
	require.Equal(t, int64(2*24*12), b.Count(t, phys), "a recomputed interval replaces its rows")
	require.Equal(t, []string{"576"}, b.Rows(t, "SELECT count(DISTINCT event_id) FROM "+phys))
}

// Scenario: a model fails for one interval only. The batches before it are
// recorded, the failing one is not, and the error names model, interval and
// SQL; after the fix the same work with SkipCovered resumes at the failure.
func TestFailedBatchRecordsNothingAndResumes(t *testing.T) {
	t.Parallel()
	bad := `MODEL (name demo.fragile, kind INCREMENTAL_BY_TIME_RANGE (time_column ts, batch_size 1), cron '@daily', start '2024-01-01');
SELECT @start_ts AS ts, (CASE WHEN @start_ds = '2024-01-03' THEN 'boom' ELSE '1' END)::INTEGER AS v`
	b := executetest.Setup(t, false, map[string]string{"models/fragile.sql": bad})
	pr := b.Load(t)
	tpls, err := execute.Templates(b.Ctx, b.Parser, b.Engine, pr.Snapshots)
	require.NoError(t, err)
	x := &execute.Executor{Engine: b.Engine, Store: b.Store, ProjectDir: b.Dir, Logger: quiet, Clock: clockwork.NewFakeClockAt(at(2024, 1, 6, 0))}
	tpl := tpls["demo.fragile"]
	exec := at(2024, 1, 6, 0)
	require.NoError(t, x.Prepare(b.Ctx, tpl, exec))
	work := interval.NewSet(interval.NewRange(at(2024, 1, 1, 0), at(2024, 1, 6, 0)))
	_, err = x.Execute(b.Ctx, execute.Work{Template: tpl, Ranges: work, Execution: exec, SkipCovered: true})
	var be *execute.BatchError
	require.ErrorAs(t, err, &be)
	require.Equal(t, "demo.fragile", be.Model)
	require.Equal(t, interval.NewRange(at(2024, 1, 3, 0), at(2024, 1, 4, 0)), be.Interval)
	require.Contains(t, be.SQL, "'2024-01-03'")
	require.Contains(t, strings.ToLower(err.Error()), "could not convert")
	s := tpl.Snapshot
	require.Equal(t, "{[2024-01-01T00:00:00Z, 2024-01-03T00:00:00Z)}", b.Intervals(t, s.Name, s.Version))
}

// Scenario: a SEED is loaded from its CSV with inferred types, and a FULL
// model built over it records its whole range; a stale fence refuses the
// record with state.ErrFenced.
func TestWholeKindsAndFences(t *testing.T) {
	t.Parallel()
	b := executetest.Setup(t, true, nil)
	pr := b.Load(t)
	tpls, err := execute.Templates(b.Ctx, b.Parser, b.Engine, pr.Snapshots)
	require.NoError(t, err)
	exec := at(2024, 1, 3, 5)
	x := &execute.Executor{Engine: b.Engine, Store: b.Store, ProjectDir: b.Dir, Logger: quiet, Clock: clockwork.NewFakeClockAt(exec)}
	seed := tpls["demo.customers"]
	require.NoError(t, x.Prepare(b.Ctx, seed, exec))
	res, err := x.Execute(b.Ctx, execute.Work{Template: seed, Whole: true, Execution: exec, SkipCovered: true})
	require.NoError(t, err)
	require.Equal(t, int64(5), res.Rows)
	cols, err := b.Engine.Columns(b.Ctx, seed.Table)
	require.NoError(t, err)
	require.Equal(t, "BIGINT", cols[0].Type)
	require.Equal(t, "VARCHAR", cols[1].Type)
	require.Equal(t, "{[2024-01-01T00:00:00Z, 2024-01-03T00:00:00Z)}", b.Intervals(t, seed.Snapshot.Name, seed.Snapshot.Version))

	// A fence on an environment that does not exist at generation 7 is stale.
	fence := &state.Fence{Environment: "prod", Generation: 7}
	_, err = x.Execute(b.Ctx, execute.Work{Template: seed, Whole: true, Execution: at(2024, 1, 5, 0), Fence: fence})
	require.True(t, errors.Is(err, state.ErrFenced), "got %v", err)
	require.Equal(t, "{[2024-01-01T00:00:00Z, 2024-01-03T00:00:00Z)}", b.Intervals(t, seed.Snapshot.Name, seed.Snapshot.Version))
}

// Scenario: an INCREMENTAL_BY_UNIQUE_KEY model merges each batch by key:
// the customer's latest day wins, and re-running a batch changes nothing.
func TestUniqueKeyMergesByKey(t *testing.T) {
	t.Parallel()
	src := `MODEL (name demo.latest, kind INCREMENTAL_BY_UNIQUE_KEY (unique_key (id)), cron '@daily', start '2024-01-01');
SELECT i AS id, @start_ts AS seen FROM range(3) AS r(i)`
	b := executetest.Setup(t, false, map[string]string{"models/latest.sql": src})
	pr := b.Load(t)
	tpls, err := execute.Templates(b.Ctx, b.Parser, b.Engine, pr.Snapshots)
	require.NoError(t, err)
	exec := at(2024, 1, 4, 0)
	x := &execute.Executor{Engine: b.Engine, Store: b.Store, ProjectDir: b.Dir, Logger: quiet, Clock: clockwork.NewFakeClockAt(exec)}
	tpl := tpls["demo.latest"]
	require.NoError(t, x.Prepare(b.Ctx, tpl, exec))
	first := interval.NewSet(interval.NewRange(at(2024, 1, 1, 0), at(2024, 1, 3, 0)))
	res, err := x.Execute(b.Ctx, execute.Work{Template: tpl, Ranges: first, Execution: exec})
	require.NoError(t, err)
	require.Equal(t, 1, res.Batches, "no batch_size: one merge")
	next := interval.NewSet(interval.NewRange(at(2024, 1, 3, 0), at(2024, 1, 4, 0)))
	for range 2 {
		_, err = x.Execute(b.Ctx, execute.Work{Template: tpl, Ranges: next, Execution: exec})
		require.NoError(t, err)
	}
	phys := b.Engine.QuoteTable(tpl.Table)
	require.Equal(t, []string{"0 2024-01-03", "1 2024-01-03", "2 2024-01-03"},
		b.Rows(t, "SELECT id, strftime(seen, '%Y-%m-%d') FROM "+phys))
	require.Equal(t, "{[2024-01-01T00:00:00Z, 2024-01-04T00:00:00Z)}", b.Intervals(t, "demo.latest", tpl.Snapshot.Version))
}

// Scenario: a scheduler is asked to stop while a model's first daily batch
// runs (its OnBatch closes Stop). That batch finishes and is recorded; the
// next one does not start, and Execute says it stopped. Running the same
// work again resumes with the second day.
func TestStopKeepsTheNextBatchFromStarting(t *testing.T) {
	t.Parallel()
	b := executetest.Setup(t, true, nil)
	pr := b.Load(t)
	tpls, err := execute.Templates(b.Ctx, b.Parser, b.Engine, pr.Snapshots)
	require.NoError(t, err)
	stop := make(chan struct{})
	x := &execute.Executor{Engine: b.Engine, Store: b.Store, ProjectDir: b.Dir, Logger: quiet,
		Clock: clockwork.NewFakeClockAt(at(2024, 1, 3, 0)), OnBatch: func(execute.Batch) { close(stop) }}
	tpl := tpls["demo.events"]
	exec := at(2024, 1, 3, 0)
	require.NoError(t, x.Prepare(b.Ctx, tpl, exec))
	work := interval.NewSet(interval.NewRange(at(2024, 1, 1, 0), at(2024, 1, 3, 0)))
	res, err := x.Execute(b.Ctx, execute.Work{Template: tpl, Ranges: work, Execution: exec, Stop: stop})
	require.ErrorIs(t, err, execute.ErrStopped)
	require.Equal(t, 1, res.Batches)
	s := tpl.Snapshot
	require.Equal(t, "{[2024-01-01T00:00:00Z, 2024-01-02T00:00:00Z)}", b.Intervals(t, s.Name, s.Version))
	require.Equal(t, int64(24*12), b.Count(t, b.Engine.QuoteTable(tpl.Table)))

	x.OnBatch = nil
	res, err = x.Execute(b.Ctx, execute.Work{Template: tpl, Ranges: work, Execution: exec, SkipCovered: true})
	require.NoError(t, err)
	require.Equal(t, 1, res.Batches, "resumed with the second day")
	require.Equal(t, work.String(), b.Intervals(t, s.Name, s.Version))
}

// Scenario: an incremental model declares columns (ts, v) but its query
// produces (ts, v, note), or only (ts). Prepare refuses both before any
// batch runs, naming the model and the columns that disagree, and leaves
// no table behind; a matching declaration (names compared as the engine
// does, case-insensitively) makes the table with the declared types.
func TestDeclaredColumnsMustMatchTheQuery(t *testing.T) {
	t.Parallel()
	header := `MODEL (name demo.declared, kind INCREMENTAL_BY_TIME_RANGE (time_column ts), cron '@daily', start '2024-01-01', columns (ts TIMESTAMP, v BIGINT));
`
	for _, c := range []struct {
		name, query, want string
	}{
		{"an undeclared column", "SELECT @start_ts AS ts, 1 AS v, 'x' AS note", "does not declare note, which the query produces"},
		{"a declared column missing", "SELECT @start_ts AS ts", "declares v, which the query does not produce"},
		{"matching", "SELECT @start_ts AS TS, 1 AS V", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b := executetest.Setup(t, false, map[string]string{"models/declared.sql": header + c.query})
			pr := b.Load(t)
			tpls, err := execute.Templates(b.Ctx, b.Parser, b.Engine, pr.Snapshots)
			require.NoError(t, err)
			tpl := tpls["demo.declared"]
			x := &execute.Executor{Engine: b.Engine, Store: b.Store, ProjectDir: b.Dir, Logger: quiet}
			err = x.Prepare(b.Ctx, tpl, at(2024, 1, 2, 0))
			exists, xerr := b.Engine.TableExists(b.Ctx, tpl.Table)
			require.NoError(t, xerr)
			if c.want == "" {
				require.NoError(t, err)
				require.True(t, exists)
				cols, err := b.Engine.Columns(b.Ctx, tpl.Table)
				require.NoError(t, err)
				require.Equal(t, "BIGINT", cols[1].Type, "the declared type")
				return
			}
			require.ErrorIs(t, err, execute.ErrColumnsMismatch)
			require.ErrorContains(t, err, "demo.declared")
			require.ErrorContains(t, err, c.want)
			require.False(t, exists, "no table is left behind")
		})
	}
}

// wholeKinds is a SEED of four rows, a FULL model keeping three of them and
// a VIEW keeping two of those, in SQL both engines run.
var wholeKinds = map[string]string{
	"seeds/people.csv": "id,name\n1,ann\n2,bob\n3,cy\n4,dee\n",
	"models/people.sql": `MODEL (name demo.people, kind SEED (path '../seeds/people.csv'), cron '@daily', start '2024-01-01');
`,
	"models/kept.sql": `MODEL (name demo.kept, kind FULL, cron '@daily', start '2024-01-01');
SELECT id, name FROM demo.people WHERE id > 1`,
	"models/shown.sql": `MODEL (name demo.shown, kind VIEW, cron '@daily', start '2024-01-01');
SELECT id, name FROM demo.kept WHERE id > 2`,
}

// Scenario: on both backends, a SEED, a FULL and a VIEW model are built
// whole. Each reports the rows its table or view holds (4, 3, 2), not the
// 0 rows their writes return; so does the SEED when a later build finds it
// already loaded and leaves it alone.
func TestWholeKindsReportTheRowsTheyHold(t *testing.T) {
	t.Parallel()
	for _, setup := range []func(testing.TB, bool, map[string]string) *executetest.Bundle{executetest.Setup, executetest.SetupPostgres} {
		b := setup(t, false, wholeKinds)
		t.Run(b.Backends, func(t *testing.T) {
			pr := b.Load(t)
			tpls, err := execute.Templates(b.Ctx, b.Parser, b.Engine, pr.Snapshots)
			require.NoError(t, err)
			exec := at(2024, 1, 3, 0)
			var reported []int64
			x := &execute.Executor{Engine: b.Engine, Store: b.Store, ProjectDir: b.Dir, Logger: quiet,
				Clock: clockwork.NewFakeClockAt(exec), OnBatch: func(bt execute.Batch) { reported = append(reported, bt.Rows) }}
			for _, c := range []struct {
				model string
				rows  int64
			}{{"demo.people", 4}, {"demo.kept", 3}, {"demo.shown", 2}} {
				tpl := tpls[c.model]
				require.NoError(t, x.Prepare(b.Ctx, tpl, exec))
				res, err := x.Execute(b.Ctx, execute.Work{Template: tpl, Whole: true, Execution: exec, SkipCovered: true})
				require.NoError(t, err, c.model)
				require.Equal(t, 1, res.Batches, c.model)
				require.Equal(t, c.rows, res.Rows, c.model)
			}
			require.Equal(t, []int64{4, 3, 2}, reported, "the per-batch reports agree")

			// A day later the seed is due again; its table is complete
			// and left alone, and it still holds four rows.
			res, err := x.Execute(b.Ctx, execute.Work{Template: tpls["demo.people"], Whole: true, Execution: at(2024, 1, 4, 0)})
			require.NoError(t, err)
			require.Equal(t, int64(4), res.Rows)
		})
	}
}

// cancelAt is a real engine whose n-th InsertInterval cancels the work's
// context before it writes: Ctrl-C arriving with that batch in flight.
type cancelAt struct {
	warehouse.Engine
	n      int32
	calls  atomic.Int32
	cancel context.CancelFunc
}

func (c *cancelAt) InsertInterval(ctx context.Context, p warehouse.InsertIntervalParams) (int64, error) {
	if c.calls.Add(1) == c.n {
		c.cancel()
	}
	return c.Engine.InsertInterval(ctx, p)
}

// Scenario: the user presses Ctrl-C while the third daily batch is in
// flight. The batch rolls back and records nothing; the error wraps
// context.Canceled and carries no SQL, nothing is logged as an error, and
// running the same work again resumes at the third day.
func TestInterruptedBatchIsNotAFailure(t *testing.T) {
	t.Parallel()
	for _, setup := range []func(testing.TB, bool, map[string]string) *executetest.Bundle{executetest.Setup, executetest.SetupPostgres} {
		b := setup(t, false, map[string]string{"models/daily.sql": `MODEL (name demo.daily, kind INCREMENTAL_BY_TIME_RANGE (time_column ts, batch_size 1), cron '@daily', start '2024-01-01');
SELECT @start_ts AS ts, 1 AS v`})
		t.Run(b.Backends, func(t *testing.T) {
			pr := b.Load(t)
			tpls, err := execute.Templates(b.Ctx, b.Parser, b.Engine, pr.Snapshots)
			require.NoError(t, err)
			tpl := tpls["demo.daily"]
			exec := at(2024, 1, 6, 0)
			ctx, cancel := context.WithCancel(b.Ctx)
			defer cancel()
			var logs bytes.Buffer
			x := &execute.Executor{Engine: &cancelAt{Engine: b.Engine, n: 3, cancel: cancel}, Store: b.Store, ProjectDir: b.Dir,
				Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})), Clock: clockwork.NewFakeClockAt(exec)}
			require.NoError(t, x.Prepare(b.Ctx, tpl, exec))
			work := interval.NewSet(interval.NewRange(at(2024, 1, 1, 0), at(2024, 1, 6, 0)))
			res, err := x.Execute(ctx, execute.Work{Template: tpl, Ranges: work, Execution: exec, SkipCovered: true})
			require.ErrorIs(t, err, context.Canceled)
			var be *execute.BatchError
			require.ErrorAs(t, err, &be)
			require.Equal(t, interval.NewRange(at(2024, 1, 3, 0), at(2024, 1, 4, 0)), be.Interval)
			require.Empty(t, be.SQL, "an interruption is not reported with its SQL")
			require.Equal(t, 2, res.Batches)
			require.NotContains(t, logs.String(), "level=ERROR")
			require.Contains(t, logs.String(), `msg="`+execute.MsgBatchInterrupted+`"`)
			s := tpl.Snapshot
			require.Equal(t, "{[2024-01-01T00:00:00Z, 2024-01-03T00:00:00Z)}", b.Intervals(t, s.Name, s.Version))

			res, err = x.Execute(b.Ctx, execute.Work{Template: tpl, Ranges: work, Execution: exec, SkipCovered: true})
			require.NoError(t, err)
			require.Equal(t, 3, res.Batches, "resumed at the third day")
			require.Equal(t, work.String(), b.Intervals(t, s.Name, s.Version))
			require.Equal(t, int64(5), b.Count(t, b.Engine.QuoteTable(tpl.Table)))
		})
	}
}

// queryCounter counts Query calls and passes ReplaceTableRows through.
type queryCounter struct {
	warehouse.Engine
	queries int
}

func (q *queryCounter) Query(ctx context.Context, sql string, args ...any) (*warehouse.Result, error) {
	q.queries++
	return q.Engine.Query(ctx, sql, args...)
}

func (q *queryCounter) ReplaceTableRows(ctx context.Context, p warehouse.ReplaceTableParams) (int64, bool, error) {
	return q.Engine.(warehouse.RowReplacer).ReplaceTableRows(ctx, p)
}

// Scenario: a FULL model's first build appends to its empty table and
// reports the rows the INSERT wrote, asking no count afterwards; its
// rebuild swaps in a new table and counts.
func TestFullFirstBuildReportsTheInsertsRows(t *testing.T) {
	t.Parallel()
	src := "MODEL (name demo.full, kind FULL, cron '@daily', start '2024-01-01');\nSELECT i AS id FROM range(7) AS r(i)"
	b := executetest.Setup(t, false, map[string]string{"models/full.sql": src})
	pr := b.Load(t)
	qc := &queryCounter{Engine: b.Engine}
	tpls, err := execute.Templates(b.Ctx, b.Parser, qc, pr.Snapshots)
	require.NoError(t, err)
	exec := at(2024, 1, 3, 0)
	x := &execute.Executor{Engine: qc, Store: b.Store, ProjectDir: b.Dir, Logger: quiet, Clock: clockwork.NewFakeClockAt(exec)}
	tpl := tpls["demo.full"]
	require.NoError(t, x.Prepare(b.Ctx, tpl, exec))
	qc.queries = 0
	res, err := x.Execute(b.Ctx, execute.Work{Template: tpl, Whole: true, Execution: exec, SkipCovered: true})
	require.NoError(t, err)
	require.Equal(t, int64(7), res.Rows)
	require.Equal(t, 0, qc.queries, "no count(*) after the append")
	require.Equal(t, int64(7), b.Count(t, b.Engine.QuoteTable(tpl.Table)))
	res, err = x.Execute(b.Ctx, execute.Work{Template: tpl, Whole: true, Execution: exec})
	require.NoError(t, err)
	require.Equal(t, int64(7), res.Rows, "a swap counts")
	require.Equal(t, 1, qc.queries)
}
