package ingest_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/connector"
	"github.com/gapless-dev/gapless/connector/files"
	"github.com/gapless-dev/gapless/ingest"
	"github.com/gapless-dev/gapless/internal/pgtest"
	"github.com/gapless-dev/gapless/source"
	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/state/postgres"
	"github.com/gapless-dev/gapless/state/sqlite"
	"github.com/gapless-dev/gapless/warehouse"
	"github.com/gapless-dev/gapless/warehouse/duckdb"
	pgwh "github.com/gapless-dev/gapless/warehouse/postgres"
)

// The rig of the seed, crash and property tests: env (ingest_test.go) on
// any state store and either warehouse engine, usable from a rapid.T, and
// with passes that may run concurrently (from several goroutines).

// rig is one project folder landing raw.events from landing/*.csv
// (settle 0s) and replace runs landing/full/*/ into a real warehouse,
// with a real state store.
type rig struct {
	t     require.TestingT
	ctx   context.Context
	root  string
	store state.Store
	wh    engine
	clk   *clockwork.FakeClock
	d     *source.Definition
	conn  *files.Connector
	close []func()
}

// backend names a state store and a warehouse engine.
type backend struct{ store, engine string }

func (b backend) String() string { return b.store + "_state/" + b.engine + "_warehouse" }

// allBackends are both state stores on both engines.
var allBackends = []backend{{"sqlite", "duckdb"}, {"postgres", "duckdb"}, {"sqlite", "postgres"}, {"postgres", "postgres"}}

// newRig opens the rig's stores under dir; for PostgreSQL, each in a
// database of its own from pgtest (tb owns it). rt receives the
// assertions (tb itself, or a rapid.T). The caller runs shutdown.
func newRig(tb testing.TB, rt require.TestingT, b backend, dir string) *rig {
	ctx := context.Background()
	r := &rig{t: rt, ctx: ctx, root: filepath.Join(dir, "project"), clk: clockwork.NewFakeClockAt(epoch)}
	require.NoError(rt, os.MkdirAll(filepath.Join(r.root, "landing", "full"), 0o755))
	switch b.store {
	case "sqlite":
		lite, err := sqlite.Open(ctx, filepath.Join(dir, "state.db"))
		require.NoError(rt, err)
		r.close = append(r.close, func() { _ = lite.Close() })
		r.store = lite
	default:
		pg, err := postgres.Open(ctx, migratedStateDatabase(tb))
		require.NoError(rt, err)
		r.close = append(r.close, func() { _ = pg.Close() })
		r.store = pg
	}
	switch b.engine {
	case "duckdb":
		wh, err := duckdb.Open(ctx, filepath.Join(dir, "warehouse.duckdb"), duckdb.Options{})
		require.NoError(rt, err)
		r.wh = wh
	default:
		wh, err := pgwh.Open(ctx, pgtest.NewDatabase(tb))
		require.NoError(rt, err)
		r.wh = wh
	}
	r.close = append(r.close, func() { _ = r.wh.Close() })
	r.d = def()
	r.d.Files.ReplaceRuns = "landing/full/*"
	c, err := files.New(r.d, files.Options{Root: r.root, Clock: r.clk, ChunkFiles: 2})
	require.NoError(rt, err)
	r.conn = c
	return r
}

// migratedStateDatabase is a fresh PostgreSQL database at the state
// store's newest schema: a copy of a template migrated once, which is
// several times faster than migrating each one. The template is named
// after a hash of the migrations' sources (read from the repository), so a
// changed migration gets a new one.
func migratedStateDatabase(tb testing.TB) string {
	tb.Helper()
	names, err := filepath.Glob(filepath.Join("..", "state", "postgres", "migrations", "*.sql"))
	require.NoError(tb, err)
	require.NotEmpty(tb, names, "the state store's migrations")
	h := sha256.New()
	for _, n := range names {
		b, err := os.ReadFile(n)
		require.NoError(tb, err)
		fmt.Fprintf(h, "%s\x00%d\x00", filepath.Base(n), len(b))
		h.Write(b)
	}
	key := "ingest_state_" + hex.EncodeToString(h.Sum(nil))[:16]
	return pgtest.NewDatabaseFrom(tb, key, func(ctx context.Context, u string) error {
		s, err := postgres.Open(ctx, u)
		if err != nil {
			return err
		}
		return s.Close()
	})
}

// rigT is newRig for a test, closed when it ends.
func rigT(t *testing.T, b backend) *rig {
	r := newRig(t, t, b, t.TempDir())
	t.Cleanup(r.shutdown)
	return r
}

func (r *rig) shutdown() {
	for i := len(r.close) - 1; i >= 0; i-- {
		r.close[i]()
	}
}

// csvBody is a CSV of the rows (id, v).
func csvBody(ids ...int) string {
	var b strings.Builder
	b.WriteString("id,v\n")
	for _, id := range ids {
		fmt.Fprintf(&b, "%d,v%d\n", id, id)
	}
	return b.String()
}

// csv writes landing/name (a live append file) with the rows (id, v).
func (r *rig) csv(name string, ids ...int) {
	r.write(filepath.Join("landing", name), csvBody(ids...))
}

// runFile writes a file of replace run folder landing/full/run.
func (r *rig) runFile(run, name string, ids ...int) {
	require.NoError(r.t, os.MkdirAll(filepath.Join(r.root, "landing", "full", run), 0o755))
	r.write(filepath.Join("landing", "full", run, name), csvBody(ids...))
}

// runSuccess completes replace run landing/full/run.
func (r *rig) runSuccess(run string) {
	r.write(filepath.Join("landing", "full", run, files.Success), "")
}

func (r *rig) write(rel, body string) {
	require.NoError(r.t, os.WriteFile(filepath.Join(r.root, rel), []byte(body), 0o644))
}

// params are a pass's parameters with hooks h.
func (r *rig) params(h ingest.Hooks) ingest.Params {
	return ingest.Params{Store: r.store, Engine: r.wh, Sources: map[string]*source.Definition{src: r.d},
		Connectors: []connector.Connector{r.conn}, Root: r.root, Clock: r.clk, Hooks: h,
		Logger: slog.New(slog.DiscardHandler)}
}

// run runs one ingest pass with hooks h and returns the source's report.
// It asserts nothing, so that it may run in another goroutine.
func (r *rig) run(ctx context.Context, h ingest.Hooks) (ingest.SourceReport, error) {
	r.clk.Advance(time.Second)
	rep, err := ingest.Pass(ctx, r.params(h))
	if err != nil {
		return ingest.SourceReport{}, err
	}
	if len(rep.Sources) != 1 {
		return ingest.SourceReport{}, fmt.Errorf("%d source reports, want 1", len(rep.Sources))
	}
	return rep.Sources[0], nil
}

// pass runs one ingest pass with hooks h.
func (r *rig) pass(h ingest.Hooks) ingest.SourceReport {
	rep, err := r.run(r.ctx, h)
	require.NoError(r.t, err)
	return rep
}

// stage is the discovery step of a pass running elsewhere: what landed is
// staged, nothing is applied.
func (r *rig) stage() int {
	d, err := r.conn.Discover(r.ctx, r.store)
	require.NoError(r.t, err)
	if len(d.Batches) == 0 {
		return 0
	}
	staged, err := r.store.StageBatches(r.ctx, state.StageBatchesParams{Source: src, Batches: d.Batches, Now: r.clk.Now()})
	require.NoError(r.t, err)
	return len(staged)
}

// servedIDs returns the ids the source's view serves, in order, duplicates
// kept; nil when no view exists yet.
func (r *rig) servedIDs() []int64 {
	ws := r.warehouseState()
	if ws.ServingGeneration == 0 {
		return nil
	}
	res, err := r.wh.ReadOnlyQuery(r.ctx, "SELECT id FROM raw.events ORDER BY id")
	require.NoError(r.t, err)
	out := make([]int64, 0, len(res.Rows))
	for _, row := range res.Rows {
		switch n := row[0].(type) {
		case int64:
			out = append(out, n)
		case int32:
			out = append(out, int64(n))
		default:
			require.Failf(r.t, "id is not an integer", "%T %v", row[0], row[0])
		}
	}
	return out
}

// served returns count(*) and count(DISTINCT id) of the source's view (0,
// 0 before anything serves).
func (r *rig) served() (rows, distinct int64) {
	rows, distinct, err := r.count()
	require.NoError(r.t, err)
	return rows, distinct
}

// count is served without assertions, for other goroutines.
func (r *rig) count() (rows, distinct int64, err error) {
	ws, err := r.wh.IngestState(r.ctx, src)
	if err != nil || ws.ServingGeneration == 0 {
		return 0, 0, err
	}
	res, err := r.wh.ReadOnlyQuery(r.ctx, "SELECT count(*), count(DISTINCT id) FROM raw.events")
	if err != nil {
		return 0, 0, err
	}
	n := func(v any) int64 {
		switch x := v.(type) {
		case int64:
			return x
		case int32:
			return int64(x)
		}
		err = fmt.Errorf("count is %T %v, not an integer", v, v)
		return 0
	}
	rows, distinct = n(res.Rows[0][0]), n(res.Rows[0][1])
	return rows, distinct, err
}

// requireServesExactly asserts the view serves each of ids exactly once,
// and nothing else: count(*) = count(DISTINCT id) = len(ids).
func (r *rig) requireServesExactly(ids []int64) {
	rows, distinct := r.served()
	require.Equal(r.t, int64(len(ids)), rows, "rows served")
	require.Equal(r.t, rows, distinct, "a row is served twice")
	want := slices.Clone(ids)
	slices.Sort(want)
	got := r.servedIDs()
	if len(want) == 0 {
		want = nil
	}
	if len(got) == 0 {
		got = nil
	}
	require.Equal(r.t, want, got, "ids served")
}

func (r *rig) source() *state.Source {
	s, err := r.store.GetSource(r.ctx, src)
	require.NoError(r.t, err)
	return s
}

func (r *rig) warehouseState() warehouse.IngestState {
	ws, err := r.wh.IngestState(r.ctx, src)
	require.NoError(r.t, err)
	return ws
}

// events returns the source's history events, in order.
func (r *rig) events() []state.Event {
	evs, err := r.store.ListEvents(r.ctx, state.EventFilter{Model: src})
	require.NoError(r.t, err)
	return evs
}

// eventGeneration decodes the generation of a source event.
func eventGeneration(t require.TestingT, ev state.Event) int64 {
	var d state.SourceEventData
	if len(ev.Data) > 0 {
		require.NoError(t, json.Unmarshal(ev.Data, &d))
	}
	return d.Generation
}

// ids returns lo..hi.
func ids(lo, hi int) []int64 {
	var out []int64
	for i := lo; i <= hi; i++ {
		out = append(out, int64(i))
	}
	return out
}
