package project

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/model"
	"github.com/gapless-dev/gapless/source"
	"github.com/gapless-dev/gapless/sqlparse"
)

const eventsSource = `name: raw.events
connector: files
files:
  path: landing/events/*.csv
  settle: 30s
apply: append
time_column: ts
start: '2024-01-02'
watermark: {lateness: 10m}
columns: {id: INT, ts: TIMESTAMP, amount: DOUBLE}
`

const readsEvents = `MODEL (name stg.events, kind INCREMENTAL_BY_TIME_RANGE (time_column ts), cron '@hourly');
SELECT id, ts, amount FROM raw.events WHERE ts BETWEEN @start_ts AND @end_ts`

// Scenario: a model reads a source by name, without it being a model or an
// EXTERNAL declaration; the source is a node of the graph, its stand-in an
// EXTERNAL model marked as a source, and the model inherits its start.
func TestAModelReadsASourceByName(t *testing.T) {
	t.Parallel()
	dir := writeProject(t, map[string]string{"sources/events.yaml": eventsSource, "models/stg.sql": readsEvents})
	p, err := LoadModels(t.Context(), dir, model.Defaults{}, parser)
	require.NoError(t, err)
	require.Equal(t, []string{"raw.events", "stg.events"}, p.Graph.Order())
	require.Equal(t, []string{"raw.events"}, p.Graph.Parents("stg.events"))
	require.Equal(t, source.ConnectorFiles, p.Sources["raw.events"].Connector)
	require.Len(t, p.Sources, 1)
	m := p.Models["raw.events"]
	require.True(t, m.Source)
	require.Equal(t, model.KindExternal, m.Kind)
	require.Equal(t, []model.Column{{Name: "id", Type: "INT"}, {Name: "ts", Type: "TIMESTAMP"}, {Name: "amount", Type: "DOUBLE"}}, m.Columns)
	require.Equal(t, model.Pos{File: filepath.Join("sources", "events.yaml"), Line: 1, Col: 7}, m.HeaderPos)
	require.Nil(t, p.Queries["raw.events"])
	require.Equal(t, []string{"raw.events"}, p.Snapshots["stg.events"].Parents)
	require.False(t, p.Models["stg.events"].Source)
	require.Equal(t, "2024-01-02", p.Models["stg.events"].Start.Format("2006-01-02"), "a model without a start inherits its source's")
}

// Scenario: changing how a source lands (its connector's options, apply,
// watermark) changes no version and no fingerprint: it rebuilds nothing.
// Turning an EXTERNAL table into a source changes fingerprints (a run reads
// the mark from the stored snapshot) but no version.
func TestSourceConnectorOptionsChangeNoVersion(t *testing.T) {
	t.Parallel()
	before, err := load(t, writeProject(t, map[string]string{"sources/events.yaml": eventsSource, "models/stg.sql": readsEvents}))
	require.NoError(t, err)
	changed := `name: raw.events
connector: files
files:
  path: elsewhere/**/*.parquet
  settle: 0s
  replace_runs: elsewhere/full/*/
apply: upsert
unique_key: [id]
time_column: ts
start: '2024-01-02'
watermark: {lateness: 1h}
columns: {id: INT, ts: TIMESTAMP, amount: DOUBLE}
`
	after, err := load(t, writeProject(t, map[string]string{"sources/events.yaml": changed, "models/stg.sql": readsEvents}))
	require.NoError(t, err)
	for _, n := range []string{"raw.events", "stg.events"} {
		require.Equal(t, before.Snapshots[n].Fingerprint, after.Snapshots[n].Fingerprint, n)
		require.Equal(t, before.Snapshots[n].Version, after.Snapshots[n].Version, n)
	}

	// The same table as an EXTERNAL model (and the source with the
	// EXTERNAL's start, the project's default).
	ext, err := load(t, writeProject(t, map[string]string{"models/raw.sql": `MODEL (name raw.events, kind EXTERNAL, columns (id INT, ts TIMESTAMP, amount DOUBLE));`,
		"models/stg.sql": readsEvents}))
	require.NoError(t, err)
	src, err := load(t, writeProject(t, map[string]string{"sources/events.yaml": strings.Replace(eventsSource, "2024-01-02", "2024-01-01", 1),
		"models/stg.sql": readsEvents}))
	require.NoError(t, err)
	require.Equal(t, ext.Models["raw.events"].Start, src.Models["raw.events"].Start)
	for _, n := range []string{"raw.events", "stg.events"} {
		require.NotEqual(t, ext.Snapshots[n].Fingerprint, src.Snapshots[n].Fingerprint, "%s: a run must read the source mark from the stored snapshot", n)
		require.Equal(t, ext.Snapshots[n].Version, src.Snapshots[n].Version, "%s: turning an EXTERNAL table into a source rebuilds nothing", n)
	}
	require.Equal(t, ext.Snapshots["raw.events"].Fingerprint.DataHash, src.Snapshots["raw.events"].Fingerprint.DataHash,
		"the source's rows are declared as the EXTERNAL table's")
}

// Scenario: ${VAR} in a source's connector block comes from the process
// environment unless Options.LookupEnv says otherwise.
func TestSourceExpandsVariables(t *testing.T) {
	t.Parallel()
	src := "name: raw.e\nconnector: files\nfiles: {path: '${LANDING}/*.csv'}\ntime_column: ts\n"
	dir := writeProject(t, map[string]string{"sources/e.yaml": src, "gapless.yaml": "", "models/x.sql": "MODEL (name s.x, kind FULL);\nSELECT 1 AS n"})
	p, _, err := LoadWith(t.Context(), dir, Options{Parser: func() (*sqlparse.Parser, error) { return parser, nil }, LookupEnv: func(k string) (string, bool) {
		return map[string]string{"LANDING": "in"}[k], k == "LANDING"
	}})
	require.NoError(t, err)
	require.Equal(t, "in/*.csv", p.Sources["raw.e"].Files.Path)

	_, _, err = LoadWith(t.Context(), dir, Options{Parser: func() (*sqlparse.Parser, error) { return parser, nil }, LookupEnv: func(string) (string, bool) { return "", false }})
	require.ErrorContains(t, err, filepath.Join("sources", "e.yaml")+":3:15: files.path: environment variable is not set: ${LANDING}")
}
