package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/state/sqlite"
)

// addSource writes a source and an hourly model reading it into the
// example project at dir.
func addSource(t *testing.T, dir string) {
	t.Helper()
	files := map[string]string{
		"sources/events.yaml": `name: raw.events
connector: files
files:
  path: landing/events/*.csv
  settle: 0s
apply: append
time_column: ts
start: '2024-01-01'
watermark: {lateness: 10m}
columns: {id: BIGINT, ts: TIMESTAMP, amount: DOUBLE}
`,
		"models/raw_hourly.sql": `MODEL (name demo.raw_hourly, kind INCREMENTAL_BY_TIME_RANGE (time_column hour), cron '@hourly');
SELECT date_trunc('hour', ts) AS hour, count(*) AS n, sum(amount) AS amount
FROM raw.events WHERE ts >= @start_ts AND ts <= @end_ts GROUP BY 1`,
	}
	for rel, body := range files {
		p := filepath.Join(dir, rel)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
	}
}

// Scenario: the example project gains a source, raw.events, that has not
// landed (there is no ingestion yet), and a model reading it. `models`
// lists the source; `plan --auto-apply` deploys everything else and holds
// the model's work back, saying why; `run` computes the rest and not the
// model; `status` names the reason. Nothing is computed from the source's
// empty stand-in.
func TestAModelReadingAnUnlandedSourceIsNotRun(t *testing.T) {
	t.Parallel()
	dir := initProject(t)
	addSource(t, dir)

	var rows []modelRow
	require.NoError(t, json.Unmarshal([]byte(mustRun(t, dir, "models", "--json", "--execution-time", t0)), &rows))
	kinds := map[string]string{}
	for _, r := range rows {
		kinds[r.Name] = r.Kind
	}
	require.Equal(t, "SOURCE", kinds["raw.events"])
	require.Equal(t, "INCREMENTAL_BY_TIME_RANGE", kinds["demo.raw_hourly"])
	require.Regexp(t, `raw\.events +SOURCE `, mustRun(t, dir, "models", "--execution-time", t0))

	out := mustRun(t, dir, "plan", "--auto-apply", "--execution-time", t0)
	require.Contains(t, out, "+ raw.events  added: new source")
	require.Contains(t, out, "Waiting on sources (computed by `gapless run` once they have landed):")
	require.Regexp(t, `demo\.raw_hourly +\S+ +24 intervals in \[2024-01-01T00:00:00Z, 2024-01-02T00:00:00Z\): waiting on raw\.events \(not landed yet\)`, out)
	require.NotRegexp(t, `(?m)^  demo\.raw_hourly \S+: \d+ batch`, out, "the apply computes none of it")
	require.Contains(t, out, "Applied plan")
	require.Equal(t, float64(0), count(t, dir, "demo.raw_hourly"))
	require.Equal(t, float64(24*12), count(t, dir, "demo.events"), "the rest of the project deploys")

	out = mustRun(t, dir, "run", "--execution-time", t1)
	require.Contains(t, out, "demo.raw_hourly")
	require.Contains(t, out, "0 batches, 0 rows, waiting for parents: {[2024-01-01T00:00:00Z, 2024-01-02T05:00:00Z)}; waiting on raw.events (not landed yet)")
	require.Equal(t, float64(29*12), count(t, dir, "demo.events"))

	st := statusOf(t, dir, "--execution-time", t1)
	require.Equal(t, []string{"waiting on raw.events (not landed yet)"}, st["demo.raw_hourly"].WaitingOn)
	require.Empty(t, st["demo.raw_hourly"].Covered)
	require.Equal(t, 29, st["demo.raw_hourly"].MissingBuckets)
	require.Equal(t, "SOURCE", st["raw.events"].Kind)
	require.Empty(t, st["demo.events"].WaitingOn)
	human := mustRun(t, dir, "status", "--execution-time", t1)
	require.Contains(t, human, "demo.raw_hourly: waiting on raw.events (not landed yet)\n")

	// Once the source publishes coverage (what ingestion will do, written
	// here by hand), status says how far it is complete.
	st0, err := sqlite.Open(t.Context(), filepath.Join(dir, ".gapless", "state.db"))
	require.NoError(t, err)
	three := interval.NewSet(interval.NewRange(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2024, 1, 1, 3, 0, 0, 0, time.UTC)))
	require.NoError(t, st0.AddIntervals(t.Context(), state.IntervalsParams{Key: state.SourceKey("raw.events"), Ranges: three, Now: testNow}))
	require.NoError(t, st0.Close())
	st = statusOf(t, dir, "--execution-time", t1)
	require.Equal(t, []string{"waiting on raw.events (complete through 2024-01-01T03:00:00Z)"}, st["demo.raw_hourly"].WaitingOn)

	// Sources are shared by every environment: dev reads the same
	// raw.events, and waits on the same coverage.
	mustRun(t, dir, "plan", "dev", "--auto-apply", "--execution-time", t1)
	st = statusOf(t, dir, "dev", "--execution-time", t1)
	require.Equal(t, []string{"waiting on raw.events (complete through 2024-01-01T03:00:00Z)"}, st["demo.raw_hourly"].WaitingOn)
	rendered := mustRun(t, dir, "render", "demo.raw_hourly", "--start", "2024-01-01", "--end", "2024-01-01T01:00:00Z")
	require.Contains(t, rendered, "FROM raw.events")
}

// Scenario: a source and a model of one name: every command that loads
// the project refuses it, naming both files.
func TestASourceAndAModelOfOneNameIsRefused(t *testing.T) {
	t.Parallel()
	dir := initProject(t)
	addSource(t, dir)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "models", "raw_events.sql"),
		[]byte("MODEL (name raw.events, kind EXTERNAL, columns (id BIGINT));\n"), 0o644))
	r := run(t, dir, "plan", "--execution-time", t0)
	require.Equal(t, ExitFailure, r.code)
	require.Contains(t, r.stderr, filepath.Join("sources", "events.yaml")+":1:7: source raw.events ("+filepath.Join("sources", "events.yaml")+
		") has the name of the EXTERNAL model in "+filepath.Join("models", "raw_events.sql")+":1:1")
}

// Scenario: the source lands: after a deploy, a CSV file arrives in
// landing/events and `gapless ingest --once` stages it, builds generation
// 1 and publishes the watermark (max ts 03:30 - lateness 10m); `run` then
// computes the model's hours the source covers, and a second pass with
// nothing new changes nothing (it says so, without opening the
// warehouse). A bad file stops the source, exit 1, naming the file. A
// source name the project does not define, or a --interval of 0, is a
// usage error.
func TestIngestOnceLandsTheSource(t *testing.T) {
	t.Parallel()
	dir := initProject(t)
	addSource(t, dir)
	mustRun(t, dir, "plan", "--auto-apply", "--execution-time", t0)
	r := run(t, dir, "ingest", "raw.evnts", "--once")
	require.Equal(t, ExitUsage, r.code)
	require.Contains(t, r.stderr, "source raw.evnts: no such source in the project; did you mean raw.events?")
	require.Equal(t, ExitUsage, run(t, dir, "ingest", "--interval", "0s").code)

	landing := filepath.Join(dir, "landing", "events")
	require.NoError(t, os.MkdirAll(landing, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(landing, "a.csv"), []byte("id,ts,amount\n1,2024-01-01 00:10:00,1.5\n2,2024-01-01 01:10:00,2\n3,2024-01-01 02:10:00,3\n4,2024-01-01 03:30:00,4\n"), 0o644))
	out := mustRun(t, dir, "ingest", "--once")
	require.Equal(t, "raw.events: 1 staged, 0 applied, generation 1 swapped in, complete through 2024-01-01T03:20:00Z\n", out)
	require.Equal(t, float64(4), count(t, dir, "raw.events"))
	mustRun(t, dir, "run", "--execution-time", t1)
	require.Equal(t, float64(3), count(t, dir, "demo.raw_hourly"), "hours 00, 01, 02: 03 is not complete")

	out = mustRun(t, dir, "ingest", "--once")
	require.Equal(t, "raw.events: 0 staged, 0 applied, nothing new\n", out, "an idle pass leaves the watermark as it was")
	require.Equal(t, float64(4), count(t, dir, "raw.events"))

	require.NoError(t, os.WriteFile(filepath.Join(landing, "b.csv"), []byte("id,ts,amount\nx,not a time,1\n"), 0o644))
	r = run(t, dir, "ingest", "raw.events", "--once")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "b.csv")
	require.Equal(t, float64(4), count(t, dir, "raw.events"))
}
