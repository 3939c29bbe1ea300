package janitor_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/backend"
	"github.com/gapless-dev/gapless/connector"
	"github.com/gapless-dev/gapless/connector/files"
	"github.com/gapless-dev/gapless/execute/executetest"
	"github.com/gapless-dev/gapless/ingest"
	"github.com/gapless-dev/gapless/janitor"
	"github.com/gapless-dev/gapless/source"
	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/warehouse"
)

const rawEvents = "raw.events"

// landed is a project landing raw.events from landing/*.csv with real
// ingest passes.
type landed struct {
	t    *testing.T
	b    *executetest.Bundle
	clk  *clockwork.FakeClock
	def  *source.Definition
	conn *files.Connector
}

func newLanded(t *testing.T, b *executetest.Bundle) *landed {
	require.NoError(t, os.MkdirAll(filepath.Join(b.Dir, "landing"), 0o755))
	d := &source.Definition{Name: rawEvents, File: "sources/events.yaml", Connector: source.ConnectorFiles,
		Files: &source.Files{Path: "landing/*.csv"}, Apply: source.ApplyAppend}
	clk := clockwork.NewFakeClockAt(at(2024, 1, 1, 0))
	c, err := files.New(d, files.Options{Root: b.Dir, Clock: clk})
	require.NoError(t, err)
	return &landed{t: t, b: b, clk: clk, def: d, conn: c}
}

func (l *landed) land(name, body string) {
	require.NoError(l.t, os.WriteFile(filepath.Join(l.b.Dir, "landing", name), []byte(body), 0o644))
}

func (l *landed) pass() {
	l.t.Helper()
	rep, err := ingest.Pass(l.b.Ctx, ingest.Params{Store: l.b.Store, Engine: l.b.Engine.(warehouse.Ingester),
		Sources: map[string]*source.Definition{rawEvents: l.def}, Connectors: []connector.Connector{l.conn},
		Root: l.b.Dir, Clock: l.clk, Logger: quiet})
	require.NoError(l.t, err)
	require.NoError(l.t, rep.Err())
}

func (l *landed) generation(g int64) state.Generation {
	l.t.Helper()
	s, err := l.b.Store.GetSource(l.b.Ctx, rawEvents)
	require.NoError(l.t, err)
	for _, gen := range s.Generations {
		if gen.Generation == g {
			return gen
		}
	}
	require.Failf(l.t, "no generation", "%d", g)
	return state.Generation{}
}

func (l *landed) tablesExist(gens ...int64) []bool {
	l.t.Helper()
	tables := make([]warehouse.Table, len(gens))
	for i, g := range gens {
		tables[i] = ingest.Table(rawEvents, g)
	}
	found, err := l.b.Engine.TablesExist(l.b.Ctx, tables)
	require.NoError(l.t, err)
	return found
}

func (l *landed) markers(g int64) int {
	l.t.Helper()
	ws, err := l.b.Engine.(warehouse.Ingester).IngestState(l.b.Ctx, rawEvents)
	require.NoError(l.t, err)
	n := 0
	for _, m := range ws.Markers {
		if m.Generation == g {
			n++
		}
	}
	return n
}

// Scenario: raw.events primes generation 1, a rebuild swaps in 2 (1 is
// retired, replaced), and a resync plans 3, which a pass fences in the
// warehouse and writes a chunk of before it stops; a second resync retires
// 3 and plans 4. Within --grace of 1's retirement the janitor drops
// nothing and says until when it keeps 1. After it: a dry run reports 1's
// table and markers and changes nothing; the janitor then drops 1's table
// and markers, and keeps 3, which the warehouse fence still plans (its
// markers are what the fence checks), as well as 2 (serving) and 4
// (building). The view still serves every row.
func TestJanitorDropsRetiredSourceGenerationsAfterGrace(t *testing.T) {
	t.Parallel()
	onBothBackends(t, nil, func(t *testing.T, b *executetest.Bundle) {
		l := newLanded(t, b)
		l.land("a.csv", "id,v\n1,a\n2,b\n")
		l.pass()
		_, err := b.Store.RequestBuild(b.Ctx, state.RequestBuildParams{Source: rawEvents, Reason: "rebuild", Now: l.clk.Now()})
		require.NoError(t, err)
		l.pass()
		retired1 := l.generation(1).RetiredAt
		require.Equal(t, state.RetiredReplaced, l.generation(1).RetiredReason)

		l.clk.Advance(time.Hour)
		res, err := ingest.Resync(b.Ctx, b.Store, rawEvents, l.clk.Now())
		require.NoError(t, err)
		require.Equal(t, int64(3), res.Planned)
		in := b.Engine.(warehouse.Ingester)
		_, err = in.ApplyIngest(b.Ctx, warehouse.IngestParams{Source: rawEvents, Step: warehouse.StepFence, From: 2, Generation: 3})
		require.NoError(t, err)
		_, err = in.ApplyIngest(b.Ctx, warehouse.IngestParams{Source: rawEvents, Step: warehouse.StepChunk, Generation: 3, Index: 0,
			Table: ingest.Table(rawEvents, 3), Files: warehouse.StagedFiles{Format: warehouse.FormatCSV, Paths: []string{filepath.Join(b.Dir, "landing", "a.csv")}}})
		require.NoError(t, err)
		res, err = ingest.Resync(b.Ctx, b.Store, rawEvents, l.clk.Now())
		require.NoError(t, err)
		require.Equal(t, ingest.ResyncResult{Source: rawEvents, Retired: 3, Planned: 4, Serving: 2}, res)
		require.Equal(t, []bool{true, true, true}, l.tablesExist(1, 2, 3))
		m1, m2, m3 := l.markers(1), l.markers(2), l.markers(3)
		require.Positive(t, m1)

		bk := &backend.Backend{Store: b.Store, Engine: b.Engine}
		grace := 24 * time.Hour
		rep, err := janitor.Run(b.Ctx, bk, retired1.Add(grace-time.Second), janitor.Options{Grace: grace, Log: quiet})
		require.NoError(t, err)
		require.Empty(t, rep.SourceTables)
		require.Zero(t, rep.SourceMarkers)
		require.Len(t, rep.KeptGenerations, 2)
		require.Equal(t, int64(1), rep.KeptGenerations[0].Generation)
		require.Equal(t, retired1.Add(grace).UTC(), rep.KeptGenerations[0].Until)
		require.Equal(t, []bool{true, true, true}, l.tablesExist(1, 2, 3))

		exec := l.clk.Now().Add(grace)
		rep, err = janitor.Run(b.Ctx, bk, exec, janitor.Options{Grace: grace, DryRun: true, Log: quiet})
		require.NoError(t, err)
		require.Equal(t, []string{"gapless__raw.raw__events__g1"}, rep.SourceTables)
		require.Equal(t, int64(m1), rep.SourceMarkers)
		require.Equal(t, []bool{true, true, true}, l.tablesExist(1, 2, 3), "a dry run drops nothing")
		require.Equal(t, m1, l.markers(1))

		rep, err = janitor.Run(b.Ctx, bk, exec, janitor.Options{Grace: grace, Log: quiet})
		require.NoError(t, err)
		require.Equal(t, []string{"gapless__raw.raw__events__g1"}, rep.SourceTables)
		require.Equal(t, int64(m1), rep.SourceMarkers)
		require.Equal(t, []janitor.KeptGeneration{{Source: rawEvents, Generation: 3,
			Reason: "the warehouse fence still plans or serves it"}}, rep.KeptGenerations)
		require.Equal(t, []bool{false, true, true}, l.tablesExist(1, 2, 3))
		require.Zero(t, l.markers(1))
		require.Equal(t, m2, l.markers(2))
		require.Equal(t, m3, l.markers(3))
		r, err := b.Engine.Query(b.Ctx, "SELECT count(*) FROM raw.events")
		require.NoError(t, err)
		require.EqualValues(t, 2, r.Rows[0][0])

		rep, err = janitor.Run(b.Ctx, bk, exec, janitor.Options{Grace: grace, Log: quiet})
		require.NoError(t, err)
		require.Empty(t, rep.SourceTables, "a second pass finds nothing more")
		require.Zero(t, rep.SourceMarkers)
	})
}
