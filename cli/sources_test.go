package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/ingest"
	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/state/sqlite"
)

// landEvents writes landing/events/name with one event per id, at
// 2024-01-01 00:10 + (id-1) * 30m, amount id.
func landEvents(t *testing.T, dir, name string, ids ...int) {
	t.Helper()
	var b strings.Builder
	b.WriteString("id,ts,amount\n")
	base := time.Date(2024, 1, 1, 0, 10, 0, 0, time.UTC)
	for _, id := range ids {
		fmt.Fprintf(&b, "%d,%s,%d\n", id, base.Add(time.Duration(id-1)*30*time.Minute).Format("2006-01-02 15:04:05"), id)
	}
	landing := filepath.Join(dir, "landing", "events")
	require.NoError(t, os.MkdirAll(landing, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(landing, name), []byte(b.String()), 0o644))
}

func ids(from, to int) []int {
	var out []int
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

var swappedIn = regexp.MustCompile(`generation (\d+) swapped in`)

// sourcesOf runs `gapless sources --json` and returns the rows by source.
func sourcesOf(t *testing.T, dir string) map[string]ingest.Summary {
	t.Helper()
	var rows []ingest.Summary
	require.NoError(t, json.Unmarshal([]byte(mustRun(t, dir, "sources", "--json")), &rows))
	out := map[string]ingest.Summary{}
	for _, r := range rows {
		out[r.Source] = r
	}
	return out
}

// Scenario: the whole story on the embedded default (DuckDB + SQLite).
// The project is deployed with a source that has not landed; files land
// (events every 30 minutes from 00:10), `ingest --once` builds generation
// 1 and publishes the watermark 03:30 - 10m; `run` computes the model
// reading the source only up to it (hours 00-02). More files land and are
// applied live. A resync retires nothing (no build in flight) and plans
// generation 2 while files keep arriving; the next pass builds a new
// generation from a fresh snapshot and swaps it in; `sources --json` shows
// it serving, caught up (applied = head), nothing blocked, the watermark
// moved; every event is served exactly once; the downstream model catches
// up to the new watermark, hour by hour, with every event counted once.
// The janitor then drops the replaced generation's table.
func TestSourcesStoryOnTheEmbeddedDefault(t *testing.T) {
	t.Parallel()
	dir := initProject(t)
	addSource(t, dir)
	mustRun(t, dir, "plan", "--auto-apply", "--execution-time", t0)
	require.Equal(t, "No sources registered (the first `gapless ingest --once` registers the project's sources).\n", mustRun(t, dir, "sources"))

	landEvents(t, dir, "a.csv", ids(1, 7)...) // 00:10 .. 03:10
	out := mustRun(t, dir, "ingest", "--once")
	require.Equal(t, "raw.events: 1 staged, 0 applied, generation 1 swapped in, complete through 2024-01-01T03:00:00Z\n", out)
	mustRun(t, dir, "run", "--execution-time", t1)
	require.Equal(t, float64(3), count(t, dir, "demo.raw_hourly"), "hours 00, 01, 02: the watermark is 03:00")
	s := sourcesOf(t, dir)["raw.events"]
	require.Equal(t, state.SourcePrimed, s.State)
	require.Equal(t, int64(1), s.ServingGeneration)
	require.Equal(t, time.Date(2024, 1, 1, 3, 0, 0, 0, time.UTC), s.Watermark.UTC())

	landEvents(t, dir, "b.csv", ids(8, 9)...) // 03:40, 04:10
	require.Equal(t, "raw.events: 1 staged, 1 applied, complete through 2024-01-01T04:00:00Z\n", mustRun(t, dir, "ingest", "--once"))

	out = mustRun(t, dir, "sources", "resync", "raw.events")
	require.Equal(t, "raw.events: no build was in flight, planned generation 2.\nGeneration 1 serves until 2 swaps in; the next ingest pass builds it.\n", out)
	s = sourcesOf(t, dir)["raw.events"]
	require.Equal(t, state.SourceBackfilling, s.State)
	require.Equal(t, int64(2), s.BuildingGeneration)
	require.Equal(t, int64(1), s.ServingGeneration, "the old generation serves while the new one builds")
	require.Equal(t, float64(9), count(t, dir, "raw.events"))

	landEvents(t, dir, "c.csv", ids(10, 12)...) // 04:40 .. 05:40: files keep arriving
	out = mustRun(t, dir, "ingest", "--once")
	m := swappedIn.FindStringSubmatch(out)
	require.NotNil(t, m, out)
	built, err := strconv.ParseInt(m[1], 10, 64)
	require.NoError(t, err)
	require.GreaterOrEqual(t, built, int64(2), "a generation planned after the resync")
	require.Contains(t, out, "complete through 2024-01-01T05:30:00Z")

	s = sourcesOf(t, dir)["raw.events"]
	require.Equal(t, "files", s.Connector)
	require.Equal(t, state.SourcePrimed, s.State)
	require.Equal(t, built, s.ServingGeneration)
	require.Zero(t, s.BuildingGeneration)
	require.Equal(t, int64(3), s.HeadSeq)
	require.Equal(t, s.HeadSeq, s.AppliedSeq, "caught up")
	require.Equal(t, s.HeadPosition, s.AppliedPosition)
	require.Zero(t, s.PendingBatches)
	require.Zero(t, s.BlockedBatches)
	require.Nil(t, s.Blocked)
	require.Zero(t, s.LagSeconds)
	require.False(t, s.BuildRequested)
	require.Equal(t, time.Date(2024, 1, 1, 5, 30, 0, 0, time.UTC), s.Watermark.UTC())
	res := queryRows(t, dir, "SELECT count(*)::float8, count(DISTINCT id)::float8 FROM raw.events")
	require.Equal(t, []any{float64(12), float64(12)}, res.Rows[0], "every event served exactly once")

	mustRun(t, dir, "run", "--execution-time", t1)
	res = queryRows(t, dir, "SELECT count(*)::float8, sum(n)::float8 FROM demo.raw_hourly")
	require.Equal(t, []any{float64(5), float64(10)}, res.Rows[0], "hours 00-04 (the watermark is 05:30), two events each, once")
	human := mustRun(t, dir, "sources")
	require.Regexp(t, fmt.Sprintf(`raw\.events +files +PRIMED +g%d +- +seq 3 / 3 +0s +2024-01-01T05:30:00Z +0\n`, built), human)

	// The janitor drops the replaced generation 1's table (--grace 0: at
	// once) and keeps the serving one; the source still serves every row.
	require.Regexp(t, `Would remove 1 retired source generation table\(s\) and \d+ of their marker\(s\):\n  table gapless__raw\.raw__events__g1\n`,
		mustRun(t, dir, "janitor", "--grace", "0", "--dry-run"))
	var jr janitorReport
	require.NoError(t, json.Unmarshal([]byte(mustRun(t, dir, "janitor", "--grace", "0", "--json")), &jr))
	require.Equal(t, []string{"gapless__raw.raw__events__g1"}, jr.SourceTables)
	require.Positive(t, jr.SourceMarkers)
	require.Equal(t, float64(12), count(t, dir, "raw.events"))
	require.Equal(t, []any{float64(0)}, queryRows(t, dir, "SELECT count(*)::float8 FROM gapless__ingest.markers WHERE generation = 1").Rows[0])
}

// Scenario: `sources show` lists a source's generations, its batches and
// the warehouse's fence; a failing file blocks its batch, which `sources`
// reports with its age; `sources resync` of a typo fails (exit 1) naming
// the closest source; `show` without its argument is a usage error. A
// parked source names its reason and the resync that heals it, which
// unparks it and plans generation 2; a second resync retires 2.
func TestSourcesShowAndBadInput(t *testing.T) {
	t.Parallel()
	dir := initProject(t)
	addSource(t, dir)
	landEvents(t, dir, "a.csv", ids(1, 4)...)
	mustRun(t, dir, "ingest", "--once")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "landing", "events", "b.csv"), []byte("id,ts,amount\nx,not a time,1\n"), 0o644))
	require.Equal(t, ExitFailure, run(t, dir, "ingest", "--once").code)

	out := mustRun(t, dir, "sources", "--execution-time", "2024-03-01T10:31:30Z") // 90s after the files were staged
	require.Contains(t, out, "  raw.events: blocked for 1m30s at batch 2 (landing/events/b.csv); fix or remove the file and ingest again\n"+
		"    failed once, last: source raw.events: batch 2 (landing/events/b.csv): ")
	require.Regexp(t, `raw\.events +files +PRIMED +g1 +- +seq 1 / 2 +1m30s +2024-01-01T01:30:00Z +1\n`, out)

	out = mustRun(t, dir, "sources", "show", "raw.events")
	require.Contains(t, out, "raw.events (files): PRIMED, serving g1, building -\n")
	require.Regexp(t, `(?m)^  g1 +backfill +pin \d+.* +chunks 1/1 +last batch 1 +swapped$`, out)
	require.Regexp(t, `(?m)^  seq 1 .*landing/events/a\.csv +staged 2024-03-01T10:30:00Z +applied$`, out)
	require.Regexp(t, `(?m)^  seq 2 .*landing/events/b\.csv .* pending$`, out)
	require.Contains(t, out, "Blocked: 1 batch(es) held back, from batch 2 (landing/events/b.csv), staged 2024-03-01T10:30:00Z, 0s ago\n"+
		"  on g1 since 2024-03-01T10:30:00Z (0s ago), failed once, last: source raw.events: batch 2 (landing/events/b.csv): ")
	require.Contains(t, out, "Warehouse: fenced for g1, serving g1")
	require.Contains(t, out, "  agrees with the state store\n")

	var d ingest.Detail
	require.NoError(t, json.Unmarshal([]byte(mustRun(t, dir, "sources", "show", "raw.events", "--json")), &d))
	require.Len(t, d.Generations, 1)
	require.Equal(t, 1, d.BlockedBatches)
	require.Len(t, d.RecentBatches, 2)
	require.Empty(t, d.Warehouse.Disagreements)

	r := run(t, dir, "sources", "resync", "raw.evnts")
	require.Equal(t, ExitFailure, r.code)
	require.Equal(t, "gapless: unknown source raw.evnts: did you mean raw.events?\n", r.stderr)
	r = run(t, dir, "sources", "show", "raw.evnts")
	require.Equal(t, ExitFailure, r.code)
	require.Contains(t, r.stderr, "did you mean raw.events?")
	require.Equal(t, ExitUsage, run(t, dir, "sources", "show").code)

	// Parked NEEDS_RESYNC (as ingest parks a source whose staged file
	// vanished), the source says how to heal it; the resync unparks it.
	st, err := sqlite.Open(t.Context(), filepath.Join(dir, ".gapless", "state.db"))
	require.NoError(t, err)
	_, err = st.ParkSource(t.Context(), state.ParkSourceParams{Source: "raw.events", Expect: state.SourceExpectation{Serving: 1},
		Reason: "landing/events/a.csv vanished", Now: testNow})
	require.NoError(t, err)
	require.NoError(t, st.Close())
	out = mustRun(t, dir, "sources")
	require.Contains(t, out, "  raw.events: landing/events/a.csv vanished; run `gapless sources resync raw.events`\n")
	require.Regexp(t, `raw\.events +files +NEEDS_RESYNC +g1 `, out)

	var res ingest.ResyncResult
	require.NoError(t, json.Unmarshal([]byte(mustRun(t, dir, "sources", "resync", "raw.events", "--json")), &res))
	require.Equal(t, ingest.ResyncResult{Source: "raw.events", Planned: 2, Serving: 1, Unparked: true}, res)
	require.Equal(t, state.SourceBackfilling, sourcesOf(t, dir)["raw.events"].State)
	out = mustRun(t, dir, "sources", "resync", "raw.events")
	require.Equal(t, "raw.events: retired generation 2 (the build in flight), planned generation 3.\nGeneration 1 serves until 3 swaps in; the next ingest pass builds it.\n", out)
}

// Scenario: `gapless init` writes a source into the example project,
// raw.orders, with three CSV files in landing/orders and a model reading
// it, and `make demo`'s order works: the plan holds the model back waiting
// on the source; `ingest --once` lands the three files as generation 1 and
// publishes the watermark (the last order, 2024-01-02 00:45, less 10m);
// `run` computes the model's 24 hours of 2024-01-01, two orders each, and
// not the incomplete hour after.
func TestInitWritesALandableSource(t *testing.T) {
	t.Parallel()
	dir := initProjectWithSource(t)
	for _, rel := range []string{"sources/orders.yaml", "models/orders_hourly.sql", "landing/orders/2024-01-01-01.csv",
		"landing/orders/2024-01-01-02.csv", "landing/orders/2024-01-01-03.csv"} {
		require.FileExists(t, filepath.Join(dir, rel))
	}
	out := mustRun(t, dir, "plan", "--auto-apply", "--execution-time", t0)
	require.Contains(t, out, "+ raw.orders  added: new source")
	require.Regexp(t, `demo\.orders_hourly +\S+ +24 intervals in .*: waiting on raw\.orders \(not landed yet\)`, out)

	out = mustRun(t, dir, "ingest", "--once")
	require.Equal(t, "raw.orders: 3 staged, 0 applied, generation 1 swapped in, complete through 2024-01-02T00:35:00Z\n", out)
	mustRun(t, dir, "run", "--execution-time", t1)
	res := queryRows(t, dir, "SELECT count(*)::float8, sum(orders)::float8 FROM demo.orders_hourly")
	require.Equal(t, []any{float64(24), float64(48)}, res.Rows[0])
	s := sourcesOf(t, dir)["raw.orders"]
	require.Equal(t, state.SourcePrimed, s.State)
	require.Equal(t, int64(3), s.AppliedSeq)
	st := statusOf(t, dir, "--execution-time", t1)
	require.Equal(t, []string{"waiting on raw.orders (complete through 2024-01-02T00:35:00Z)"}, st["demo.orders_hourly"].WaitingOn)
}

// Scenario: raw.events serves generation 1 and b.csv, which does not
// parse, blocks batch 2 (two passes failed on it); then another process
// holds the DuckDB warehouse file, as the scheduler daemon does. `gapless
// sources` answers at once from the state store (default --lock-wait, no
// wait announced): applied seq 1 of head 2, the block with its age since
// the first failure, its attempts and the reason naming the file, and
// `--json` carries them (blocked.reason, blocked.attempts, late_rows).
// `sources show` says in one line that it could not read the markers and
// shows the state store's view of generation 1, exit 0. Once the file is
// free it compares the markers with the state store again.
func TestSourcesAnswerWhileTheWarehouseIsHeld(t *testing.T) {
	t.Parallel()
	dir := initProject(t)
	addSource(t, dir)
	landEvents(t, dir, "a.csv", ids(1, 4)...)
	mustRun(t, dir, "ingest", "--once")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "landing", "events", "b.csv"), []byte("id,ts,amount\nx,not a time,1\n"), 0o644))
	require.Equal(t, ExitFailure, run(t, dir, "ingest", "--once").code)
	require.Equal(t, ExitFailure, run(t, dir, "ingest", "--once").code)

	release := startHolder(t, filepath.Join(dir, "warehouse.duckdb"))
	r := run(t, dir, "sources", "--execution-time", "2024-03-01T10:32:00Z")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Empty(t, r.stderr, "nothing waited for the warehouse")
	require.Regexp(t, `raw\.events +files +PRIMED +g1 +- +seq 1 / 2 +2m0s +2024-01-01T01:30:00Z +1\n`, r.stdout)
	require.Contains(t, r.stdout, "  raw.events: blocked for 2m0s at batch 2 (landing/events/b.csv); fix or remove the file and ingest again\n"+
		"    failed 2 times, last: source raw.events: batch 2 (landing/events/b.csv): ")
	require.NotContains(t, r.stdout, "SQL:", "the reason's first line only")

	var rows []map[string]any
	require.NoError(t, json.Unmarshal([]byte(mustRun(t, dir, "sources", "--json", "--execution-time", "2024-03-01T10:32:00Z")), &rows))
	require.Len(t, rows, 1)
	require.Equal(t, float64(1), rows[0]["applied_seq"])
	require.Equal(t, float64(0), rows[0]["late_rows"])
	blocked, ok := rows[0]["blocked"].(map[string]any)
	require.True(t, ok, "blocked: %v", rows[0]["blocked"])
	require.Equal(t, float64(2), blocked["seq"])
	require.Equal(t, "landing/events/b.csv", blocked["location"])
	require.Equal(t, float64(2), blocked["attempts"])
	require.Equal(t, float64(120), blocked["failing_seconds"])
	require.Contains(t, blocked["reason"], "landing/events/b.csv")

	r = run(t, dir, "sources", "show", "raw.events")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "Warehouse: markers not read: the warehouse file ")
	require.Contains(t, r.stdout, "warehouse.duckdb is in use by another process; shown: the state store's record\n")
	require.Regexp(t, `(?m)^  g1 +backfill +pin \d+.* +chunks 1/1 +last batch 1 +swapped$`, r.stdout)
	var d ingest.Detail
	require.NoError(t, json.Unmarshal([]byte(mustRun(t, dir, "sources", "show", "raw.events", "--json")), &d))
	require.False(t, d.Warehouse.Read)
	require.Contains(t, d.Warehouse.NotRead, "in use by another process")
	require.Equal(t, 1, d.Generations[0].ChunksApplied)

	release()
	out := mustRun(t, dir, "sources", "show", "raw.events")
	require.Contains(t, out, "Warehouse: fenced for g1, serving g1")
	require.Contains(t, out, "  agrees with the state store\n")
}
