package scheduler_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/connector"
	"github.com/gapless-dev/gapless/connector/files"
	"github.com/gapless-dev/gapless/execute/executetest"
	"github.com/gapless-dev/gapless/internal/logkey"
	"github.com/gapless-dev/gapless/model"
	"github.com/gapless-dev/gapless/project"
	"github.com/gapless-dev/gapless/scheduler"
	"github.com/gapless-dev/gapless/state"
)

// landed is a project whose hourly demo.child reads the source raw.src
// (landing/*.csv, settle 0s, no lateness), deployed to prod at 10:00
// before anything landed.
func landed(t *testing.T) *executetest.Bundle {
	t.Helper()
	b := executetest.Setup(t, false, map[string]string{
		"sources/src.yaml": "name: raw.src\nconnector: files\nfiles: {path: landing/*.csv, settle: 0s}\n" +
			"time_column: ts\nstart: '2024-01-01'\ncolumns: {id: BIGINT, ts: TIMESTAMP, v: INTEGER}\n",
		"models/child.sql": hourly("demo.child", "raw.src", ""),
	})
	require.NoError(t, os.MkdirAll(filepath.Join(b.Dir, "landing"), 0o755))
	deploy(t, b, "p1", at(2024, 1, 1, 10))
	return b
}

// withIngest lands the project's sources before each tick.
func withIngest(t *testing.T, b *executetest.Bundle, clk clockwork.Clock) option {
	t.Helper()
	pr, err := project.LoadModels(b.Ctx, b.Dir, model.Defaults{}, b.Parser)
	require.NoError(t, err)
	var conns []connector.Connector
	for _, d := range pr.Sources {
		c, err := files.New(d, files.Options{Root: b.Dir, Clock: clk})
		require.NoError(t, err)
		conns = append(conns, c)
	}
	return func(p *scheduler.Params, _ *daemon) {
		p.Ingest = &scheduler.Ingest{Sources: pr.Sources, Connectors: conns, Root: b.Dir}
	}
}

// land writes landing/name with rows "id,ts,v".
func land(t *testing.T, b *executetest.Bundle, name string, rows ...string) {
	t.Helper()
	body := "id,ts,v\n" + strings.Join(rows, "\n") + "\n"
	require.NoError(t, os.WriteFile(filepath.Join(b.Dir, "landing", name), []byte(body), 0o644))
}

// Scenario: prod serves demo.child, which reads the unlanded source
// raw.src. A daemon ingesting before each tick: the first tick ingests
// nothing (the landing folder is empty; the build is deferred) and runs
// nothing. Files land with times up to 03:30; the next tick's pass builds
// generation 1 and publishes the watermark 03:30, and the same tick's run,
// on the warehouse the pass opened (opened once), computes demo.child up
// to it: hours 00 to 02. More rows up to 05:10 land: the next tick applies
// them and computes 03 and 04.
func TestTickIngestsThenRunsUpToTheWatermark(t *testing.T) {
	t.Parallel()
	b := landed(t)
	clk := clockwork.NewFakeClockAt(at(2024, 1, 1, 11).Add(30 * time.Minute))
	d := newDaemon(t, b, "d1", clk, nil, withIngest(t, b, clk))

	res, err := d.Tick(b.Ctx)
	require.NoError(t, err)
	require.NotNil(t, res.Ingest)
	require.Equal(t, "no_data", res.Ingest.Sources[0].Deferred)
	require.Zero(t, res.Envs[0].Ran)
	require.Equal(t, "{}", served(t, b, "demo.child"))

	land(t, b, "a.csv", "1,2024-01-01 00:10:00,1", "2,2024-01-01 01:10:00,2", "3,2024-01-01 03:30:00,3")
	res, err = d.Tick(b.Ctx)
	require.NoError(t, err)
	src := res.Ingest.Sources[0]
	require.Equal(t, int64(1), src.Built)
	require.Equal(t, at(2024, 1, 1, 3).Add(30*time.Minute), src.Watermark)
	require.Equal(t, 1, res.Envs[0].Ran, "the tick's run sees the watermark its pass published")
	require.Equal(t, "{[2024-01-01T00:00:00Z, 2024-01-01T03:00:00Z)}", served(t, b, "demo.child"))
	require.Equal(t, int64(1), d.opens.Load(), "the first tick had nothing to land or run and opened nothing; the second one open for the pass and the run")

	land(t, b, "b.csv", "4,2024-01-01 05:10:00,4")
	clk.Advance(time.Hour)
	res, err = d.Tick(b.Ctx)
	require.NoError(t, err)
	require.Equal(t, 1, res.Ingest.Sources[0].Applied)
	require.Equal(t, "{[2024-01-01T00:00:00Z, 2024-01-01T05:00:00Z)}", served(t, b, "demo.child"))
	require.Equal(t, int64(2), d.opens.Load(), "one open for the third tick's pass and run")
	require.Equal(t, d.opens.Load(), d.closes.Load())
}

// Scenario: the same project and files, with a daemon that does not
// ingest (--ingest=false): the files stay where they landed, the source
// is not even registered, nothing publishes a watermark, and the model
// waits: the tick finds nothing runnable and does not open the warehouse.
func TestTickWithoutIngestLeavesTheFilesAndTheModelWaits(t *testing.T) {
	t.Parallel()
	b := landed(t)
	land(t, b, "a.csv", "1,2024-01-01 00:10:00,1", "2,2024-01-01 03:30:00,2")
	clk := clockwork.NewFakeClockAt(at(2024, 1, 1, 11).Add(30 * time.Minute))
	d := newDaemon(t, b, "d1", clk, nil)

	res, err := d.Tick(b.Ctx)
	require.NoError(t, err)
	require.Nil(t, res.Ingest)
	require.False(t, res.OpenedEngine)
	require.Equal(t, []string{"demo.child"}, res.Envs[0].Due)
	require.Zero(t, res.Envs[0].Ran)
	require.Equal(t, "{}", served(t, b, "demo.child"))
	_, err = b.Store.GetSource(b.Ctx, "raw.src")
	require.ErrorIs(t, err, state.ErrNotFound)
}

// Scenario: a daemon given an Ingest without sources (a project that
// defines none) does no ingest work: with nothing due, the tick opens
// nothing and reports no pass.
func TestTickIngestsNothingForAProjectWithoutSources(t *testing.T) {
	t.Parallel()
	b := executetest.Setup(t, false, pair())
	deploy(t, b, "p1", at(2024, 1, 1, 10))
	clk := clockwork.NewFakeClockAt(at(2024, 1, 1, 10).Add(30 * time.Minute))
	d := newDaemon(t, b, "d1", clk, nil, withIngest(t, b, clk))
	res, err := d.Tick(b.Ctx)
	require.NoError(t, err)
	require.Nil(t, res.Ingest)
	require.False(t, res.OpenedEngine)
	require.Zero(t, d.opens.Load())
}

// Scenario: /metrics after the daemon's ingest passes. Before anything
// lands the source is PENDING_BACKFILL with nothing staged; a file of
// three rows lands and the tick builds generation 1: PRIMED, three rows
// written by its chunk, the watermark 03:30 eight hours behind the 11:30
// clock. Then, an hour on, a good file, a file that does not parse and a
// good one land: the pass applies the first (one batch, one row) and
// stops at the bad one, so two staged batches wait (lag 2) and the
// watermark, 04:00, is 8.5 hours behind.
func TestMetricsAfterIngestPasses(t *testing.T) {
	t.Parallel()
	b := landed(t)
	clk := clockwork.NewFakeClockAt(at(2024, 1, 1, 11).Add(30 * time.Minute))
	d := newDaemon(t, b, "d1", clk, nil, withIngest(t, b, clk))
	states := func(primed, pending string) []string {
		return []string{
			`gapless_source_state{source="raw.src",state="BACKFILLING"} 0`,
			`gapless_source_state{source="raw.src",state="NEEDS_RESYNC"} 0`,
			`gapless_source_state{source="raw.src",state="PENDING_BACKFILL"} ` + pending,
			`gapless_source_state{source="raw.src",state="PRIMED"} ` + primed,
		}
	}

	_, err := d.Tick(b.Ctx)
	require.NoError(t, err)
	body := scrape(t, d)
	for _, want := range append(states("0", "1"), `gapless_source_lag_batches{source="raw.src"} 0`,
		`gapless_source_batches_applied_total{source="raw.src"} 0`, `gapless_source_blocked_batches{source="raw.src"} 0`) {
		require.Contains(t, body, want)
	}
	require.NotContains(t, body, "gapless_source_watermark_lag_seconds{", "no watermark published yet")

	land(t, b, "a.csv", "1,2024-01-01 00:10:00,1", "2,2024-01-01 01:10:00,2", "3,2024-01-01 03:30:00,3")
	_, err = d.Tick(b.Ctx)
	require.NoError(t, err)
	body = scrape(t, d)
	for _, want := range append(states("1", "0"),
		`gapless_source_rows_applied_total{source="raw.src",step="chunk"} 3`,
		`gapless_source_lag_batches{source="raw.src"} 0`,
		`gapless_source_watermark_lag_seconds{source="raw.src"} 28800`,
		`gapless_source_fenced_total{source="raw.src"} 0`,
		`gapless_source_already_applied_total{source="raw.src"} 0`) {
		require.Contains(t, body, want)
	}

	land(t, b, "b.csv", "4,2024-01-01 04:00:00,4")
	land(t, b, "c.csv", "not-an-id,2024-01-01 04:10:00,5")
	land(t, b, "d.csv", "6,2024-01-01 04:20:00,6")
	clk.Advance(time.Hour)
	res, err := d.Tick(b.Ctx)
	require.ErrorContains(t, err, "c.csv", "a source stopped at a file fails the tick")
	require.Equal(t, 1, res.Ingest.Sources[0].Applied)
	body = scrape(t, d)
	for _, want := range append(states("1", "0"),
		`gapless_source_batches_applied_total{source="raw.src"} 1`,
		`gapless_source_rows_applied_total{source="raw.src",step="batch"} 1`,
		`gapless_source_rows_applied_total{source="raw.src",step="chunk"} 3`,
		`gapless_source_lag_batches{source="raw.src"} 2`,
		`gapless_source_watermark_lag_seconds{source="raw.src"} 30600`) {
		require.Contains(t, body, want)
	}
}

// Scenario: the daemon's ingest path writes history events of the closed
// set only. Ticks prime raw.src, apply a live file, stop at a bad one
// (fixed by the next tick), rebuild it after a resync, and heal a crash
// between a rebuild's warehouse swap and its record (a hook fails there).
// Every event written after the deploy is a source event of
// state.SourceEventKinds, about raw.src, and they tell that story in
// order (a swap retires the generation it replaces without an event of
// its own: source_swapped names it). The daemon's log records, and the
// pass's, use only the log keys.
func TestDaemonIngestWritesOnlyClosedSetEvents(t *testing.T) {
	t.Parallel()
	b := landed(t)
	before, err := b.Store.ListEvents(b.Ctx, state.EventFilter{})
	require.NoError(t, err)
	clk := clockwork.NewFakeClockAt(at(2024, 1, 1, 11).Add(30 * time.Minute))
	crash := errors.New("crash after swap")
	var crashing atomic.Bool
	d := newDaemon(t, b, "d1", clk, nil, withIngest(t, b, clk), func(p *scheduler.Params, _ *daemon) {
		p.Ingest.Hooks.AfterSwap = func(string, int64) error {
			if crashing.Load() {
				return crash
			}
			return nil
		}
	})
	tick := func() scheduler.TickResult {
		t.Helper()
		clk.Advance(time.Minute)
		res, _ := d.Tick(b.Ctx)
		return res
	}

	land(t, b, "a.csv", "1,2024-01-01 00:10:00,1")
	require.Equal(t, int64(1), tick().Ingest.Sources[0].Built)
	land(t, b, "b.csv", "2,2024-01-01 01:10:00,2")
	land(t, b, "c.csv", "x,2024-01-01 01:20:00,3")
	require.Error(t, tick().Ingest.Sources[0].Err)
	land(t, b, "c.csv", "3,2024-01-01 01:20:00,3")
	require.NoError(t, tick().Err())
	_, err = b.Store.RequestBuild(b.Ctx, state.RequestBuildParams{Source: "raw.src", Reason: "resync", Now: clk.Now()})
	require.NoError(t, err)
	require.Equal(t, int64(2), tick().Ingest.Sources[0].Built)
	_, err = b.Store.RequestBuild(b.Ctx, state.RequestBuildParams{Source: "raw.src", Reason: "resync", Now: clk.Now()})
	require.NoError(t, err)
	crashing.Store(true)
	require.ErrorIs(t, tick().Ingest.Sources[0].Err, crash)
	crashing.Store(false)
	res := tick()
	require.NoError(t, res.Err())
	require.NotEmpty(t, res.Ingest.Sources[0].Healed)

	evs, err := b.Store.ListEvents(b.Ctx, state.EventFilter{AfterID: before[len(before)-1].ID})
	require.NoError(t, err)
	var kinds []string
	for _, e := range evs {
		require.Contains(t, state.SourceEventKinds(), e.Kind, "event %d", e.ID)
		require.Equal(t, "raw.src", e.Model)
		kinds = append(kinds, e.Kind)
	}
	require.Equal(t, []string{
		state.EventSourceRegistered, state.EventSourcePlanned, state.EventSourceSwapped,
		state.EventSourceResyncRequest, state.EventSourcePlanned, state.EventSourceSwapped,
		state.EventSourceResyncRequest, state.EventSourcePlanned, state.EventSourceSwapped, // the healed record
	}, kinds)

	// Its log records keep to the log keys, the pass's own records too.
	var msgs []string
	for _, line := range strings.Split(strings.TrimSpace(d.logs.String()), "\n") {
		require.NoError(t, logkey.CheckRecord([]byte(line)))
		var rec struct{ Msg string }
		require.NoError(t, json.Unmarshal([]byte(line), &rec))
		msgs = append(msgs, rec.Msg)
	}
	require.Contains(t, msgs, scheduler.MsgSourceIngested)
	require.Contains(t, msgs, "ingest pass of source failed")
}
