package ingest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
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

// renv is env with either warehouse engine, replace runs under
// landing/full/<run>/, and the pass's log captured.
type renv struct {
	t     *testing.T
	root  string
	store state.Store
	wh    engine
	clk   *clockwork.FakeClock
	d     *source.Definition
	conn  connector.Connector
	hooks ingest.Hooks
	// wrap, when set, wraps the connector and the engine a pass uses.
	wrapConn   func(connector.Connector) connector.Connector
	wrapEngine func(engine) engine
	logs       *syncBuffer
}

// syncBuffer is a bytes.Buffer safe for the logger's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func openStore(t *testing.T, name string) state.Store {
	t.Helper()
	if name == "sqlite" {
		lite, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "state.db"))
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, lite.Close()) })
		return lite
	}
	pg, err := postgres.Open(t.Context(), pgtest.NewDatabase(t))
	require.NoError(t, err)
	t.Cleanup(func() { pg.Close() })
	return pg
}

func openEngine(t *testing.T, name string) engine {
	t.Helper()
	if name == "duckdb" {
		wh, err := duckdb.Open(t.Context(), filepath.Join(t.TempDir(), "warehouse.duckdb"), duckdb.Options{})
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, wh.Close()) })
		return wh
	}
	wh, err := pgwarehouse.Open(t.Context(), pgtest.NewDatabase(t))
	require.NoError(t, err)
	t.Cleanup(func() { wh.Close() })
	return wh
}

// eachBackend runs fn on both state stores × both warehouse engines.
func eachBackend(t *testing.T, fn func(t *testing.T, e *renv)) {
	for _, st := range []string{"sqlite", "postgres"} {
		for _, wh := range []string{"duckdb", "postgres"} {
			t.Run(st+"_state/"+wh+"_warehouse", func(t *testing.T) { fn(t, newRenv(t, st, wh)) })
		}
	}
}

// eachStoreDuck runs fn on both state stores with the DuckDB engine.
func eachStoreDuck(t *testing.T, fn func(t *testing.T, e *renv)) {
	for _, st := range []string{"sqlite", "postgres"} {
		t.Run(st, func(t *testing.T) { fn(t, newRenv(t, st, "duckdb")) })
	}
}

func newRenv(t *testing.T, st, wh string) *renv {
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "landing", "full"), 0o755))
	d := def()
	d.Files.ReplaceRuns = "landing/full/*"
	return &renv{t: t, root: root, store: openStore(t, st), wh: openEngine(t, wh), clk: clockwork.NewFakeClockAt(epoch), d: d, logs: &syncBuffer{}}
}

// csv writes landing/name (name may hold a folder) with rows (id, v).
func (e *renv) csv(name string, ids ...int) {
	var b strings.Builder
	b.WriteString("id,v\n")
	for _, id := range ids {
		fmt.Fprintf(&b, "%d,v%d\n", id, id)
	}
	e.write(name, b.String())
}

func (e *renv) write(name, body string) {
	p := filepath.Join(e.root, "landing", filepath.FromSlash(name))
	require.NoError(e.t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(e.t, os.WriteFile(p, []byte(body), 0o644))
}

func (e *renv) remove(name string) {
	require.NoError(e.t, os.Remove(filepath.Join(e.root, "landing", filepath.FromSlash(name))))
}

// timed writes landing/name with rows (id, ts), ts as hours after epoch.
func (e *renv) timed(name string, rows map[int]float64) {
	var b strings.Builder
	b.WriteString("id,ts\n")
	ids := make([]int, 0, len(rows))
	for id := range rows {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		fmt.Fprintf(&b, "%d,%s\n", id, at(rows[id]).Format("2006-01-02 15:04:05"))
	}
	e.write(name, b.String())
}

func at(hours float64) time.Time { return epoch.Add(time.Duration(hours * float64(time.Hour))) }

// params are one pass's parameters.
func (e *renv) params() ingest.Params {
	if e.conn == nil {
		c, err := files.New(e.d, files.Options{Root: e.root, Clock: e.clk, ChunkFiles: 2})
		require.NoError(e.t, err)
		e.conn = c
	}
	conn, wh := e.conn, e.wh
	if e.wrapConn != nil {
		conn = e.wrapConn(conn)
	}
	if e.wrapEngine != nil {
		wh = e.wrapEngine(wh)
	}
	return ingest.Params{Store: e.store, Engine: wh, Sources: map[string]*source.Definition{src: e.d},
		Connectors: []connector.Connector{conn}, Root: e.root, Clock: e.clk, Hooks: e.hooks,
		Logger: slog.New(slog.NewJSONHandler(e.logs, nil))}
}

// pass runs one ingest pass and returns the source's report.
func (e *renv) pass() ingest.SourceReport {
	e.t.Helper()
	e.clk.Advance(time.Second)
	rep, err := ingest.Pass(e.t.Context(), e.params())
	require.NoError(e.t, err)
	require.Len(e.t, rep.Sources, 1)
	return rep.Sources[0]
}

// ids returns the ids the source's view serves, sorted (an id served
// twice appears twice).
func (e *renv) ids() []int64 {
	e.t.Helper()
	return readIDs(e.t, e.wh)
}

func readIDs(t *testing.T, wh ingest.Reader) []int64 {
	t.Helper()
	r, err := wh.ReadOnlyQuery(t.Context(), "SELECT CAST(id AS BIGINT) FROM raw.events ORDER BY 1")
	require.NoError(t, err)
	out := []int64{}
	for _, row := range r.Rows {
		out = append(out, toInt(t, row[0]))
	}
	return out
}

func ints(v ...int64) []int64 { return v }

func (e *renv) source() *state.Source {
	e.t.Helper()
	s, err := e.store.GetSource(e.t.Context(), src)
	require.NoError(e.t, err)
	return s
}

func (e *renv) generation(g int64) state.Generation {
	e.t.Helper()
	for _, x := range e.source().Generations {
		if x.Generation == g {
			return x
		}
	}
	require.Failf(e.t, "no such generation", "%d", g)
	return state.Generation{}
}

func (e *renv) events(kind string) []state.Event {
	e.t.Helper()
	evs, err := e.store.ListEvents(e.t.Context(), state.EventFilter{Model: src})
	require.NoError(e.t, err)
	var out []state.Event
	for _, ev := range evs {
		if ev.Kind == kind {
			out = append(out, ev)
		}
	}
	return out
}

func eventData(t *testing.T, ev state.Event) state.SourceEventData {
	t.Helper()
	var d state.SourceEventData
	require.NoError(t, json.Unmarshal(ev.Data, &d), "event %s data %s", ev.Kind, ev.Data)
	return d
}

// passWith runs one pass with p (a second worker, inside a hook).
func passWith(t *testing.T, p ingest.Params) (ingest.SourceReport, error) {
	rep, err := ingest.Pass(t.Context(), p)
	if err != nil || len(rep.Sources) != 1 {
		return ingest.SourceReport{}, errors.Join(err, fmt.Errorf("%d source reports", len(rep.Sources)))
	}
	return rep.Sources[0], nil
}

// resync does what `gapless sources resync` does: retire the build in
// flight, if any, and plan the next generation at once, without a pin
// (the next pass pins it).
func (e *renv) resync() int64 {
	e.t.Helper()
	ctx := e.t.Context()
	_, err := e.store.RequestBuild(ctx, state.RequestBuildParams{Source: src, Retire: e.source().Building, Reason: "resync", Now: e.clk.Now()})
	require.NoError(e.t, err)
	g, err := e.store.PlanGeneration(ctx, state.PlanGenerationParams{Source: src, Kind: state.GenerationBackfill, Now: e.clk.Now()})
	require.NoError(e.t, err)
	return g.Generation
}

func (e *renv) coverage() interval.Set {
	e.t.Helper()
	m, err := e.store.GetIntervals(e.t.Context(), []state.VersionKey{state.SourceKey(src)})
	require.NoError(e.t, err)
	return m[state.SourceKey(src)]
}

// snapshotHook is a connector whose Snapshot runs before, once, first.
type snapshotHook struct {
	connector.Connector
	once   sync.Once
	before func()
}

func (h *snapshotHook) Snapshot(ctx context.Context, q connector.Queue) (connector.Snapshot, error) {
	h.once.Do(h.before)
	return h.Connector.Snapshot(ctx, q)
}

// readHook is an engine that runs after, once, after the first read-only
// query whose text holds match has returned.
type readHook struct {
	engine
	match string
	once  sync.Once
	after func()
}

func (h *readHook) ReadOnlyQuery(ctx context.Context, q string, args ...any) (*warehouse.Result, error) {
	res, err := h.engine.ReadOnlyQuery(ctx, q, args...)
	if strings.Contains(q, h.match) {
		h.once.Do(h.after)
	}
	return res, err
}
