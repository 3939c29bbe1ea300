package source_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/config"
	"github.com/gapless-dev/gapless/model"
	"github.com/gapless-dev/gapless/source"
)

const full = `name: Raw.Events
connector: files
files:
  path: ${LANDING}/events/*.csv      # relative to the project
  settle: 0s
  replace_runs: ${LANDING}/events/full/*/
apply: upsert
unique_key: [event_id]
time_column: event_ts
start: '2024-01-01'
watermark: {lateness: 10m}
columns:
  event_id: BIGINT
  event_ts: TIMESTAMP
  amount: DECIMAL(10, 2)
`

func env(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
}

func TestParseReadsEveryField(t *testing.T) {
	t.Parallel()
	d, err := source.Parse("sources/events.yaml", []byte(full), env(map[string]string{"LANDING": "landing"}))
	require.NoError(t, err)
	require.Equal(t, &source.Definition{
		Name: "raw.events", File: "sources/events.yaml", Pos: model.Pos{File: "sources/events.yaml", Line: 1, Col: 7},
		Connector: source.ConnectorFiles,
		Files:     &source.Files{Path: "landing/events/*.csv", Settle: 0, ReplaceRuns: "landing/events/full/*/"},
		Apply:     source.ApplyUpsert, UniqueKey: []string{"event_id"}, TimeColumn: "event_ts",
		Start:     time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC),
		Watermark: source.Watermark{Lateness: 10 * time.Minute},
		Columns:   []model.Column{{Name: "event_id", Type: "BIGINT"}, {Name: "event_ts", Type: "TIMESTAMP"}, {Name: "amount", Type: "DECIMAL(10, 2)"}},
	}, d)
	require.Equal(t, "raw", d.Schema())
	require.Equal(t, "events", d.Table())
}

func TestParseDefaults(t *testing.T) {
	t.Parallel()
	d, err := source.Parse("sources/e.yaml", []byte("name: raw.e\nconnector: files\nfiles: {path: in/*.parquet}\ntime_column: ts\n"), nil)
	require.NoError(t, err)
	require.Equal(t, source.ApplyAppend, d.Apply)
	require.Equal(t, source.DefaultSettle, d.Files.Settle)
	require.Empty(t, d.Files.ReplaceRuns)
	require.Zero(t, d.Watermark.Lateness)
	require.True(t, d.Start.IsZero())
	require.Nil(t, d.Columns)
}

// TestParseErrors: every problem is an error at the file, line and column
// of the value (or key) concerned.
func TestParseErrors(t *testing.T) {
	t.Parallel()
	const ok = "connector: files\nfiles: {path: in/*.csv}\ntime_column: ts\n"
	cases := []struct {
		name, src, want string
		is              error
	}{
		{"unknown key with a suggestion", "name: raw.e\n" + ok + "time_colum: ts\n",
			"sources/e.yaml:5:1: unknown key time_colum at the top level: did you mean time_column?", nil},
		{"unknown key in the connector's block", "name: raw.e\nconnector: files\nfiles:\n  path: a\n  setle: 3s\ntime_column: ts\n",
			"sources/e.yaml:5:3: unknown key setle in files: did you mean settle?", nil},
		{"block of another connector", "name: raw.e\nconnector: files\nnats: {url: x}\ntime_column: ts\n",
			"sources/e.yaml:3:1: unknown key nats at the top level", nil},
		{"missing name", ok, "sources/e.yaml:1:1: missing name: the table models read, as schema.table (name: raw.events)", nil},
		{"name without schema", "name: events\n" + ok,
			"sources/e.yaml:1:7: name events has no schema: write schema.table (name: raw.events)", nil},
		{"name with three parts", "name: a.b.c\n" + ok,
			"sources/e.yaml:1:7: bad name a.b.c: want schema.table, each a plain identifier", nil},
		{"name with a reserved schema", "name: raw__dev.e\n" + ok,
			"sources/e.yaml:1:7: bad source name raw__dev.e: a schema name may not contain \"__\"", nil},
		{"missing connector", "name: raw.e\nfiles: {path: a}\ntime_column: ts\n",
			"sources/e.yaml:1:1: missing connector: how the source's data arrives (connectors: files)", nil},
		{"unknown connector", "name: raw.e\nconnector: file\nfiles: {path: a}\ntime_column: ts\n",
			"sources/e.yaml:2:12: connector file is not known: did you mean files? (connectors: files)", nil},
		{"connector without its block", "name: raw.e\nconnector: files\ntime_column: ts\n",
			"sources/e.yaml:2:1: connector files needs a files block", nil},
		{"files without path", "name: raw.e\nconnector: files\nfiles:\n  settle: 1s\ntime_column: ts\n",
			"sources/e.yaml:3:1: files needs path: a glob of the files to land, relative to the project", nil},
		{"absolute path", "name: raw.e\nconnector: files\nfiles: {path: /data/*.csv}\ntime_column: ts\n",
			"sources/e.yaml:3:15: files.path /data/*.csv is absolute: write it relative to the project", nil},
		{"path outside the project", "name: raw.e\nconnector: files\nfiles: {path: ../x/*.csv}\ntime_column: ts\n",
			"sources/e.yaml:3:15: files.path ../x/*.csv leaves the project", nil},
		{"bad glob", "name: raw.e\nconnector: files\nfiles: {path: 'in/[a.csv'}\ntime_column: ts\n",
			"sources/e.yaml:3:15: files.path in/[a.csv is not a valid glob", nil},
		{"unset variable", "name: raw.e\nconnector: files\nfiles: {path: '${NOPE}/*.csv'}\ntime_column: ts\n",
			"sources/e.yaml:3:15: files.path: environment variable is not set: ${NOPE}", config.ErrUnsetVariable},
		{"bad settle", "name: raw.e\nconnector: files\nfiles: {path: a, settle: soon}\ntime_column: ts\n",
			"sources/e.yaml:3:26: files.settle: want a duration such as 30s, 10m or 1h (0s for none), got soon", source.ErrBadDuration},
		{"settle without a unit", "name: raw.e\nconnector: files\nfiles: {path: a, settle: 30}\ntime_column: ts\n",
			"sources/e.yaml:3:26: files.settle: want a duration such as 30s, 10m or 1h (0s for none), got 30", source.ErrBadDuration},
		{"negative lateness", "name: raw.e\n" + ok + "watermark: {lateness: -1m}\n",
			"sources/e.yaml:5:23: watermark.lateness: want a duration such as 30s, 10m or 1h (0s for none), got -1m", source.ErrBadDuration},
		{"unknown watermark key", "name: raw.e\n" + ok + "watermark: {latenes: 1m}\n",
			"sources/e.yaml:5:13: unknown key latenes in watermark: did you mean lateness?", nil},
		{"unknown apply", "name: raw.e\n" + ok + "apply: upsrt\n",
			"sources/e.yaml:5:8: apply upsrt is not an apply mode: did you mean upsert? (modes: append, upsert, replace)", nil},
		{"upsert without unique_key", "name: raw.e\n" + ok + "apply: upsert\n",
			"sources/e.yaml:5:8: apply upsert needs unique_key", nil},
		{"upsert with an empty unique_key", "name: raw.e\n" + ok + "apply: upsert\nunique_key: []\n",
			"sources/e.yaml:6:13: apply upsert needs unique_key", nil},
		{"unique_key twice", "name: raw.e\n" + ok + "unique_key: [id, ID]\n",
			"sources/e.yaml:5:18: unique_key names id twice", nil},
		{"unique_key not a column name", "name: raw.e\n" + ok + "unique_key: [a b]\n",
			"sources/e.yaml:5:14: unique_key[0]: \"a b\" is not a column name", nil},
		{"unique_key not a list", "name: raw.e\n" + ok + "unique_key: id\n",
			"sources/e.yaml:5:13: string was used where sequence is expected", nil},
		{"missing time_column", "name: raw.e\nconnector: files\nfiles: {path: a}\n",
			"sources/e.yaml:1:1: missing time_column: the column that says when a row happened", nil},
		{"bad start", "name: raw.e\n" + ok + "start: '2024-13-01'\n",
			"sources/e.yaml:5:8: start: bad time \"2024-13-01\"", model.ErrBadTime},
		{"bad column type", "name: raw.e\n" + ok + "columns:\n  ts: 'INT)'\n",
			"sources/e.yaml:6:7: column ts: bad type INT)", nil},
		{"comma in a flow column type", "name: raw.e\n" + ok + "columns: {ts: TIMESTAMP, x: DECIMAL(10, 2)}\n",
			"sources/e.yaml:5:29: column x: bad type DECIMAL(10 (inside {...} a comma ends the value", nil},
		{"bad column name", "name: raw.e\n" + ok + "columns:\n  '1ts': INT\n",
			"sources/e.yaml:6:3: columns.1ts: \"1ts\" is not a column name", nil},
		{"column declared twice", "name: raw.e\n" + ok + "columns:\n  ts: INT\n  TS: INT\n",
			"sources/e.yaml:7:3: column ts is declared twice", nil},
		{"time_column not declared", "name: raw.e\n" + ok + "columns: {t: TIMESTAMP}\n",
			"sources/e.yaml:4:14: time_column ts is not a declared column (columns: t); did you mean t?", nil},
		{"unique_key not declared", "name: raw.e\n" + ok + "unique_key: [id]\ncolumns: {ts: TIMESTAMP, idd: INT}\n",
			"sources/e.yaml:5:14: unique_key id is not a declared column (columns: ts, idd); did you mean idd?", nil},
		{"columns as a list", "name: raw.e\n" + ok + "columns: [ts]\n",
			"sources/e.yaml:5:10: ", nil},
		{"two documents", "name: raw.e\n" + ok + "---\nname: raw.f\n",
			"sources/e.yaml:6:5: a source file must hold a single YAML document", nil},
		{"broken YAML", "name: [raw.e\n", "sources/e.yaml:1:", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			d, err := source.Parse("sources/e.yaml", []byte(c.src), env(nil))
			require.Error(t, err)
			require.Nil(t, d)
			var se *source.Error
			require.ErrorAs(t, err, &se)
			require.Equal(t, "sources/e.yaml", se.File)
			require.Contains(t, err.Error(), c.want)
			require.Regexp(t, `^sources/e\.yaml:\d+:\d+: `, err.Error())
			if c.is != nil {
				require.ErrorIs(t, err, c.is)
			}
		})
	}
}

func write(t *testing.T, dir, rel, content string) {
	t.Helper()
	p := filepath.Join(dir, rel)
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
}

const minimal = "connector: files\nfiles: {path: in/*.csv}\ntime_column: ts\n"

func TestLoadDirReadsEverySourceFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	require.DirExists(t, dir)
	defs, err := source.LoadDir(dir, nil)
	require.NoError(t, err, "a project without sources/ has no sources")
	require.Empty(t, defs)

	write(t, dir, "sources/b.yaml", "name: raw.b\n"+minimal)
	write(t, dir, "sources/sub/a.yml", "name: raw.a\n"+minimal)
	write(t, dir, "sources/notes.txt", "not a source")
	defs, err = source.LoadDir(dir, nil)
	require.NoError(t, err)
	require.Len(t, defs, 2)
	require.Equal(t, "raw.b", defs[0].Name)
	require.Equal(t, filepath.Join("sources", "b.yaml"), defs[0].File)
	require.Equal(t, "raw.a", defs[1].Name)
	require.Equal(t, filepath.Join("sources", "sub", "a.yml"), defs[1].File)
}

func TestLoadDirRefusesTwoFilesOfOneName(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write(t, dir, "sources/a.yaml", "name: raw.events\n"+minimal)
	write(t, dir, "sources/b.yaml", "name: RAW.events\n"+minimal)
	write(t, dir, "sources/c.yaml", "name: raw.c\nconnector: nope\n")
	defs, err := source.LoadDir(dir, nil)
	require.Nil(t, defs)
	var errs source.Errors
	require.True(t, errors.As(err, &errs))
	require.Len(t, errs, 2, "every file's problem is reported")
	require.EqualError(t, errs[0], filepath.Join("sources", "b.yaml")+":1:7: source raw.events is already defined in "+filepath.Join("sources", "a.yaml")+":1:7")
	require.Contains(t, errs[1].Error(), filepath.Join("sources", "c.yaml")+":2:12: connector nope is not known")
}
