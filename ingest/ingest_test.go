package ingest_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/connector"
	"github.com/gapless-dev/gapless/connector/files"
	"github.com/gapless-dev/gapless/ingest"
	"github.com/gapless-dev/gapless/internal/pgtest"
	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/source"
	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/state/postgres"
	"github.com/gapless-dev/gapless/state/sqlite"
	"github.com/gapless-dev/gapless/warehouse"
	"github.com/gapless-dev/gapless/warehouse/duckdb"
	pgwarehouse "github.com/gapless-dev/gapless/warehouse/postgres"
)

const src = "raw.events"

var epoch = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// engine is what the tests use of a warehouse: both engines are one.
type engine interface {
	warehouse.Ingester
	ingest.Reader
	Close() error
}

// env is one project folder landing raw.events from landing/*.csv
// (settle 0s) into a real warehouse (DuckDB or PostgreSQL), with a real
// state store (SQLite or PostgreSQL).
type env struct {
	t     *testing.T
	root  string
	store state.Store
	wh    engine
	clk   *clockwork.FakeClock
	d     *source.Definition // set before the first pass
	conn  *files.Connector
	hooks ingest.Hooks
}

// eachStore runs fn on the matrix of state stores (SQLite, PostgreSQL)
// and warehouse engines (DuckDB, PostgreSQL): subtests
// sqlite_duckdb, sqlite_postgres, postgres_duckdb, postgres_postgres.
func eachStore(t *testing.T, fn func(t *testing.T, e *env)) {
	for _, combo := range [][2]string{{"sqlite", "duckdb"}, {"sqlite", "postgres"}, {"postgres", "duckdb"}, {"postgres", "postgres"}} {
		t.Run(combo[0]+"_"+combo[1], func(t *testing.T) {
			ctx := t.Context()
			var st state.Store
			if combo[0] == "sqlite" {
				lite, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "state.db"))
				require.NoError(t, err)
				t.Cleanup(func() { require.NoError(t, lite.Close()) })
				st = lite
			} else {
				pg, err := postgres.Open(ctx, pgtest.NewDatabase(t))
				require.NoError(t, err)
				t.Cleanup(func() { pg.Close() })
				st = pg
			}
			var wh engine
			if combo[1] == "duckdb" {
				duck, err := duckdb.Open(ctx, filepath.Join(t.TempDir(), "warehouse.duckdb"), duckdb.Options{})
				require.NoError(t, err)
				wh = duck
			} else {
				pg, err := pgwarehouse.Open(ctx, pgtest.NewDatabase(t))
				require.NoError(t, err)
				wh = pg
			}
			t.Cleanup(func() { require.NoError(t, wh.Close()) })
			root := t.TempDir()
			require.NoError(t, os.MkdirAll(filepath.Join(root, "landing"), 0o755))
			clk := clockwork.NewFakeClockAt(epoch)
			fn(t, &env{t: t, root: root, store: st, wh: wh, clk: clk, d: def()})
		})
	}
}

func def() *source.Definition {
	return &source.Definition{Name: src, File: "sources/events.yaml", Connector: source.ConnectorFiles,
		Files: &source.Files{Path: "landing/*.csv"}, Apply: source.ApplyAppend}
}

// csv writes landing/name with a header and the rows (id, v).
func (e *env) csv(name string, ids ...int) {
	var b strings.Builder
	b.WriteString("id,v\n")
	for _, id := range ids {
		fmt.Fprintf(&b, "%d,v%d\n", id, id)
	}
	e.write(name, b.String())
}

func (e *env) write(name, body string) {
	require.NoError(e.t, os.WriteFile(filepath.Join(e.root, "landing", name), []byte(body), 0o644))
}

// pass runs one ingest pass and returns the source's report.
func (e *env) pass() ingest.SourceReport {
	e.t.Helper()
	e.clk.Advance(time.Second)
	if e.conn == nil {
		c, err := files.New(e.d, files.Options{Root: e.root, Clock: e.clk, ChunkFiles: 2})
		require.NoError(e.t, err)
		e.conn = c
	}
	rep, err := ingest.Pass(e.t.Context(), ingest.Params{Store: e.store, Engine: e.wh,
		Sources: map[string]*source.Definition{src: e.d}, Connectors: []connector.Connector{e.conn},
		Root: e.root, Clock: e.clk, Hooks: e.hooks})
	require.NoError(e.t, err)
	require.Len(e.t, rep.Sources, 1)
	return rep.Sources[0]
}

// served returns count(*) and count(DISTINCT id) of the source's view.
func (e *env) served() (rows, distinct int64) {
	e.t.Helper()
	r, err := e.wh.ReadOnlyQuery(e.t.Context(), "SELECT count(*), count(DISTINCT id) FROM raw.events")
	require.NoError(e.t, err)
	return toInt(e.t, r.Rows[0][0]), toInt(e.t, r.Rows[0][1])
}

func toInt(t *testing.T, v any) int64 {
	t.Helper()
	switch n := v.(type) {
	case int64:
		return n
	case int32:
		return int64(n)
	}
	require.Failf(t, "not an integer", "%T %v", v, v)
	return 0
}

// requireServes asserts the view serves exactly n rows, each id once.
func (e *env) requireServes(n int64) {
	e.t.Helper()
	rows, distinct := e.served()
	require.Equal(e.t, n, rows, "rows served")
	require.Equal(e.t, n, distinct, "distinct ids served: a row served twice")
}

func (e *env) source() *state.Source {
	e.t.Helper()
	s, err := e.store.GetSource(e.t.Context(), src)
	require.NoError(e.t, err)
	return s
}

func (e *env) warehouseState() warehouse.IngestState {
	e.t.Helper()
	ws, err := e.wh.IngestState(e.t.Context(), src)
	require.NoError(e.t, err)
	return ws
}

func TestPassPrimesAppendsAndRepeatsNothing(t *testing.T) {
	// Scenario: a pass over an empty landing folder registers the source
	// and defers its build; files land (three, so the snapshot has two
	// chunks of two files at most); a pass primes the source, serving
	// every row once; two more files and a pass append exactly them onto
	// the serving generation; a pass with nothing new changes nothing in
	// the state store or the warehouse.
	eachStore(t, func(t *testing.T, e *env) {
		r := e.pass()
		require.NoError(t, r.Err)
		require.Equal(t, "no_data", r.Deferred)
		require.Equal(t, state.SourcePendingBackfill, e.source().State())

		e.csv("a.csv", 1, 2, 3)
		e.csv("b.csv", 4, 5)
		e.csv("c.csv", 6)
		r = e.pass()
		require.NoError(t, r.Err)
		require.Equal(t, 3, r.Staged)
		require.Equal(t, int64(1), r.Built)
		s := e.source()
		require.Equal(t, state.SourcePrimed, s.State())
		require.Equal(t, int64(1), s.Serving)
		e.requireServes(6)

		e.csv("d.csv", 7, 8)
		e.csv("e.csv", 9)
		r = e.pass()
		require.NoError(t, r.Err)
		require.Equal(t, 2, r.Staged)
		require.Equal(t, 2, r.Applied)
		require.Zero(t, r.Built)
		e.requireServes(9)

		before, ws := e.source(), e.warehouseState()
		r = e.pass()
		require.NoError(t, r.Err)
		require.Zero(t, r.Staged)
		require.Zero(t, r.Applied)
		require.Zero(t, r.Built)
		e.requireServes(9)
		require.Equal(t, ws, e.warehouseState(), "a pass with nothing new writes no marker")
		after := e.source()
		require.Equal(t, before.LastGeneration, after.LastGeneration)
		require.Equal(t, before.Serving, after.Serving)
	})
}

func TestResyncBuildsNewGenerationServingSameRows(t *testing.T) {
	// Scenario: a primed source with a live batch applied is resynced
	// (RequestBuild); the next pass builds generation 2 from a new
	// snapshot, swaps it in and records it; the view serves the same rows
	// from the new physical table, once each.
	eachStore(t, func(t *testing.T, e *env) {
		e.csv("a.csv", 1, 2)
		require.NoError(t, e.pass().Err)
		e.csv("b.csv", 3)
		require.NoError(t, e.pass().Err)
		e.requireServes(3)

		_, err := e.store.RequestBuild(t.Context(), state.RequestBuildParams{Source: src, Reason: "resync", Now: e.clk.Now()})
		require.NoError(t, err)
		require.Equal(t, state.SourcePendingBackfill, e.source().State())
		r := e.pass()
		require.NoError(t, r.Err)
		require.Equal(t, int64(2), r.Built)
		s := e.source()
		require.Equal(t, state.SourcePrimed, s.State())
		require.Equal(t, int64(2), s.Serving)
		require.Equal(t, int64(2), e.warehouseState().ServingGeneration)
		e.requireServes(3)
		g2, err := e.wh.ReadOnlyQuery(t.Context(), "SELECT count(*) FROM gapless__raw.raw__events__g2")
		require.NoError(t, err)
		require.Equal(t, int64(3), toInt(t, g2.Rows[0][0]))

		e.csv("c.csv", 4)
		r = e.pass()
		require.NoError(t, r.Err)
		require.Equal(t, 1, r.Applied)
		e.requireServes(4)
	})
}

func TestBadFileBlocksItsBatchAndLaterOnes(t *testing.T) {
	// Scenario: on a primed source, b.csv lands with a value that is not
	// an id, then c.csv, a good file. The pass fails the source at b.csv's
	// batch, naming the file and DuckDB's reason, and leaves c.csv waiting:
	// the view serves a.csv alone. Once b.csv is fixed, the next pass
	// applies b.csv then c.csv, in order.
	eachStore(t, func(t *testing.T, e *env) {
		e.csv("a.csv", 1, 2)
		require.NoError(t, e.pass().Err)
		e.write("b.csv", "id,v\nnot-an-id,x\n")
		e.csv("c.csv", 5)
		r := e.pass()
		require.Error(t, r.Err)
		var be *ingest.BatchError
		require.ErrorAs(t, r.Err, &be)
		require.Equal(t, int64(2), be.Index)
		require.Contains(t, r.Err.Error(), "b.csv")
		require.Contains(t, r.Err.Error(), "not-an-id")
		require.Zero(t, r.Applied)
		e.requireServes(2)

		// a second pass, still bad: still blocked, still nothing applied.
		r = e.pass()
		require.ErrorAs(t, r.Err, &be)
		e.requireServes(2)

		e.csv("b.csv", 3, 4)
		r = e.pass()
		require.NoError(t, r.Err)
		require.Equal(t, 2, r.Applied)
		e.requireServes(5)
	})
}

func TestCrashBetweenSwapAndRecordSwapIsHealed(t *testing.T) {
	// Scenario: the first pass commits the warehouse swap of generation 1
	// and crashes before RecordSwap (a hook fails there): the warehouse
	// serves generation 1, the state store still shows it building. The
	// next pass heals the state from the warehouse (records the swap)
	// without building again, and the source is PRIMED serving each row
	// once; live batches then apply on generation 1.
	eachStore(t, func(t *testing.T, e *env) {
		crash := errors.New("crash after swap")
		e.hooks.AfterSwap = func(string, int64) error { return crash }
		e.csv("a.csv", 1, 2, 3)
		r := e.pass()
		require.ErrorIs(t, r.Err, crash)
		s := e.source()
		require.Equal(t, int64(1), s.Building)
		require.Zero(t, s.Serving)
		require.Equal(t, int64(1), e.warehouseState().ServingGeneration)

		e.hooks.AfterSwap = nil
		e.csv("b.csv", 4)
		r = e.pass()
		require.NoError(t, r.Err)
		require.NotEmpty(t, r.Healed)
		require.Zero(t, r.Built, "healing records the swap; it does not rebuild")
		s = e.source()
		require.Equal(t, state.SourcePrimed, s.State())
		require.Equal(t, int64(1), s.Serving)
		require.Equal(t, int64(1), s.LastGeneration)
		require.Equal(t, 1, r.Applied)
		e.requireServes(4)
	})
}

func TestPassPublishesWatermark(t *testing.T) {
	// Scenario: a source with time_column ts and lateness 10m primes from
	// a file whose times reach 10:00: its coverage (state.SourceKey) is
	// [start, 09:50); a live file reaching 11:00 grows it to 10:50. A
	// source without a time_column publishes nothing (checked first).
	eachStore(t, func(t *testing.T, e *env) {
		e.d.TimeColumn = "ts"
		e.d.Start = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
		e.d.Watermark.Lateness = 10 * time.Minute
		e.write("a.csv", "id,ts\n1,2024-01-01 08:00:00\n2,2024-01-01 10:00:00\n")
		r := e.pass()
		require.NoError(t, r.Err)
		cov := e.coverage()
		require.Equal(t, interval.NewSet(interval.NewRange(e.d.Start, time.Date(2024, 1, 1, 9, 50, 0, 0, time.UTC))), cov)

		e.write("b.csv", "id,ts\n3,2024-01-01 11:00:00\n")
		require.NoError(t, e.pass().Err)
		require.Equal(t, interval.NewSet(interval.NewRange(e.d.Start, time.Date(2024, 1, 1, 10, 50, 0, 0, time.UTC))), e.coverage())
	})
}

func TestNoTimeColumnPublishesNoWatermark(t *testing.T) {
	// Scenario: a primed source without a time_column publishes no
	// coverage: models reading it keep waiting (the gate of run.DueWork).
	eachStore(t, func(t *testing.T, e *env) {
		e.csv("a.csv", 1)
		r := e.pass()
		require.NoError(t, r.Err)
		require.Zero(t, r.Watermark)
		require.True(t, e.coverage().IsEmpty())
	})
}

func (e *env) coverage() interval.Set {
	e.t.Helper()
	m, err := e.store.GetIntervals(e.t.Context(), []state.VersionKey{state.SourceKey(src)})
	require.NoError(e.t, err)
	return m[state.SourceKey(src)]
}

func TestCrashBetweenPlanAndFenceIsResumed(t *testing.T) {
	// Scenario: a pass plans generation 1 in the state store and crashes
	// before the warehouse fence moves (a hook fails there). The next pass,
	// with nothing new landed, finds the snapshot where it was pinned: it
	// replays the fence and resumes generation 1. Then a second source
	// history: the crash repeats on a resync (generation 2 planned, fence
	// still at 1), and a file lands meanwhile, after 2's pin: the next pass
	// still resumes generation 2 at its pin, fencing it and catching it up
	// on the new file, and 2 serves every row once; no generation is
	// retired and none is planned beyond 2.
	eachStore(t, func(t *testing.T, e *env) {
		crash := errors.New("crash after plan")
		e.hooks.AfterPlan = func(string, int64) error { return crash }
		e.csv("a.csv", 1, 2)
		require.ErrorIs(t, e.pass().Err, crash)
		require.Equal(t, int64(1), e.source().Building)
		require.False(t, e.warehouseState().Exists, "the fence never moved")

		e.hooks.AfterPlan = nil
		r := e.pass()
		require.NoError(t, r.Err)
		require.Equal(t, int64(1), r.Built)
		e.requireServes(2)

		_, err := e.store.RequestBuild(t.Context(), state.RequestBuildParams{Source: src, Reason: "resync", Now: e.clk.Now()})
		require.NoError(t, err)
		e.hooks.AfterPlan = func(string, int64) error { return crash }
		require.ErrorIs(t, e.pass().Err, crash)
		require.Equal(t, int64(2), e.source().Building)
		require.Equal(t, int64(1), e.warehouseState().PlannedGeneration)

		e.hooks.AfterPlan = nil
		e.csv("b.csv", 3)
		r = e.pass()
		require.NoError(t, r.Err)
		require.Equal(t, int64(2), r.Built, "generation 2 resumed at its pin")
		s := e.source()
		require.Equal(t, state.SourcePrimed, s.State())
		require.Equal(t, int64(2), s.Serving)
		require.Equal(t, int64(2), s.LastGeneration, "nothing replanned")
		for _, g := range s.Generations {
			switch g.Generation {
			case 1:
				require.Equal(t, state.RetiredReplaced, g.RetiredReason, "generation 1 is retired only by 2's swap")
			case 2:
				require.Equal(t, state.GenerationSwapped, g.Status)
				require.Equal(t, int64(1), *g.Pin, "pinned before b.csv")
			}
		}
		e.requireServes(3)
	})
}
