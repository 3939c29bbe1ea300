package project

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/gapless-dev/gapless/config"
	"github.com/gapless-dev/gapless/model"
	"github.com/gapless-dev/gapless/snapshot"
	"github.com/gapless-dev/gapless/source"
	"github.com/gapless-dev/gapless/sqlparse"
)

var parser *sqlparse.Parser

func TestMain(m *testing.M) {
	var err error
	parser, err = sqlparse.Open()
	if err != nil {
		panic(err)
	}
	code := m.Run()
	if err := parser.Close(); err != nil {
		panic(err)
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			println("goroutine leak:", err.Error())
			code = 1
		}
	}
	os.Exit(code)
}

// writeProject lays out files (path relative to the project root) in a new
// temporary project folder and returns it.
func writeProject(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for rel, body := range files {
		path := filepath.Join(dir, rel)
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(body), 0o644))
	}
	return dir
}

func load(t *testing.T, dir string) (*Project, error) {
	t.Helper()
	return LoadModels(context.Background(), dir, model.Defaults{Start: time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)}, parser)
}

const external = `MODEL (name raw.events, kind EXTERNAL, columns (id INT, ts TIMESTAMP, amount DOUBLE));`

func TestQuickstartExampleLoads(t *testing.T) {
	t.Parallel()
	p, err := load(t, filepath.Join("..", "examples", "quickstart"))
	require.NoError(t, err)
	require.Equal(t, []string{"demo.customers", "demo.events", "demo.daily_revenue", "demo.customer_totals", "demo.top_customers",
		"raw.orders", "demo.orders_hourly"}, p.Graph.Order())
	require.Equal(t, []string{"raw.orders"}, p.Graph.Parents("demo.orders_hourly"), "the example's model reads its source")
	require.Contains(t, p.Sources, "raw.orders")
	require.Equal(t, []string{"demo.customers", "demo.daily_revenue"}, p.Graph.Parents("demo.customer_totals"))
	require.Empty(t, p.Graph.Parents("demo.events"), "generate_series is a table function, not a dependency")
	for name, s := range p.Snapshots {
		require.NotEmpty(t, s.Version, name)
	}
	require.NotEmpty(t, p.Snapshots["demo.customers"].SeedHash)
}

func TestCTENamesAreNotDependencies(t *testing.T) {
	t.Parallel()
	dir := writeProject(t, map[string]string{
		"models/raw.sql": external,
		"models/stg.sql": `MODEL (name stg.events, kind FULL);
WITH events AS (SELECT * FROM raw.events), recent AS (SELECT * FROM events WHERE ts > now() - INTERVAL 1 DAY)
SELECT * FROM recent`,
	})
	p, err := load(t, dir)
	require.NoError(t, err)
	require.Equal(t, []string{"raw.events"}, p.Graph.Parents("stg.events"))
}

// Scenario: a model's query names raw.events twice after a macro whose
// parseable stand-in is not as long as it is written; its snapshot keeps
// both references, each at the offset of the name in the query as
// written, so that a run can point them at physical tables unparsed.
func TestSnapshotsKeepWhereTheirQueryNamesTables(t *testing.T) {
	t.Parallel()
	dir := writeProject(t, map[string]string{
		"models/raw.sql": external,
		"models/stg.sql": `MODEL (name stg.events, kind INCREMENTAL_BY_TIME_RANGE (time_column ts), cron '@daily');
SELECT e.id, e.ts FROM raw.events AS e WHERE e.ts BETWEEN @start_ts AND @end_ts
UNION ALL SELECT id, ts FROM RAW.Events WHERE ts < @start_ts`,
	})
	p, err := load(t, dir)
	require.NoError(t, err)
	s := p.Snapshots["stg.events"]
	require.Len(t, s.Refs, 2)
	for i, want := range []string{"raw.events", "RAW.Events"} {
		r := s.Refs[i]
		require.Equal(t, "raw", r.Schema)
		require.Equal(t, "events", r.Name)
		require.True(t, strings.HasPrefix(s.Model.Query[r.Offset:], want), "ref %d at %d: %q", i, r.Offset, s.Model.Query[r.Offset:])
	}
	require.Nil(t, p.Snapshots["raw.events"].Refs, "an EXTERNAL table has no query")
}

// Scenario: two copies of a project differ only in whitespace, comments and
// keyword case. Their models get the same fingerprints and versions, so a
// reformat never rebuilds a table.
func TestFormattingDoesNotChangeVersions(t *testing.T) {
	t.Parallel()
	a := writeProject(t, map[string]string{
		"models/raw.sql": external,
		"models/stg.sql": "MODEL (name stg.events, kind FULL);\nSELECT id, amount * 2 AS doubled FROM raw.events WHERE amount > 0",
	})
	b := writeProject(t, map[string]string{
		"models/raw.sql": external,
		"models/stg.sql": "MODEL (name stg.events, kind FULL);\n-- doubled amounts\nselect   id,\n  amount*2 as doubled\nfrom raw.events /* only positive */ where amount>0;",
	})
	pa, err := load(t, a)
	require.NoError(t, err)
	pb, err := load(t, b)
	require.NoError(t, err)
	require.Equal(t, pa.Snapshots["stg.events"].Fingerprint, pb.Snapshots["stg.events"].Fingerprint)
	require.Equal(t, pa.Snapshots["stg.events"].Version, pb.Snapshots["stg.events"].Version)
}

// Scenario: a model gains a projection (non-breaking) and, separately, a
// filter (breaking). The real SQL parser decides, and the child follows.
func TestChangeCategoriesWithTheRealParser(t *testing.T) {
	t.Parallel()
	base := map[string]string{
		"models/raw.sql":  external,
		"models/stg.sql":  "MODEL (name stg.events, kind FULL);\nSELECT id, amount FROM raw.events",
		"models/mart.sql": "MODEL (name mart.totals, kind FULL);\nSELECT sum(amount) AS total FROM stg.events",
	}
	prev, err := load(t, writeProject(t, base))
	require.NoError(t, err)

	for _, tc := range []struct {
		query     string
		stg, mart snapshot.Category
		reason    string // stg's
	}{
		{"SELECT id, amount, amount * 2 AS doubled FROM raw.events", snapshot.NonBreaking, snapshot.IndirectNonBreaking, "adds column doubled, which no child reads"},
		{"SELECT id, amount FROM raw.events WHERE amount > 0", snapshot.Breaking, snapshot.IndirectBreaking, "the WHERE clause changes"},
		{"SELECT id, amount + 1 AS amount FROM raw.events", snapshot.Breaking, snapshot.IndirectBreaking, "column amount changes"},
		{"select  id,amount\n from raw.events -- same", snapshot.Unchanged, snapshot.Unchanged, ""},
	} {
		next := withStg(t, base, tc.query)
		changes, err := snapshot.Categorize(prev.Snapshots, next.Snapshots, next.Graph, Additive(context.Background(), parser), snapshot.Options{})
		require.NoError(t, err)
		got := map[string]snapshot.Change{}
		for _, c := range changes {
			got[c.Name] = c
		}
		require.Equal(t, tc.stg, got["stg.events"].Category, tc.query)
		require.Equal(t, tc.reason, got["stg.events"].Reason, tc.query)
		require.Equal(t, tc.mart, got["mart.totals"].Category, tc.query)
	}

	// Scenario: the operator chooses non-breaking. The real parser tells
	// which columns the child reads: amount, not id.
	choose := snapshot.Options{Choices: map[string]snapshot.Choice{"stg.events": snapshot.ChooseNonBreaking}}
	next := withStg(t, base, "SELECT id + 1 AS id, amount FROM raw.events")
	changes, err := snapshot.Categorize(prev.Snapshots, next.Snapshots, next.Graph, Additive(context.Background(), parser), choose)
	require.NoError(t, err)
	require.Equal(t, snapshot.NonBreaking, changes[1].Category, changes[1].Name)
	require.Equal(t, snapshot.IndirectNonBreaking, changes[2].Category, changes[2].Name)
	next = withStg(t, base, "SELECT id, amount + 1 AS amount FROM raw.events")
	_, err = snapshot.Categorize(prev.Snapshots, next.Snapshots, next.Graph, Additive(context.Background(), parser), choose)
	require.EqualError(t, err, "category non-breaking for stg.events refused: mart.totals reads column amount, which this change alters (column amount changes)")
}

// withStg loads base with stg.events's query replaced.
func withStg(t *testing.T, base map[string]string, query string) *Project {
	t.Helper()
	files := map[string]string{}
	for k, v := range base {
		files[k] = v
	}
	files["models/stg.sql"] = "MODEL (name stg.events, kind FULL);\n" + query
	next, err := load(t, writeProject(t, files))
	require.NoError(t, err)
	return next
}

func TestSeedContentIsPartOfTheVersion(t *testing.T) {
	t.Parallel()
	files := map[string]string{
		"models/seed.sql":  "MODEL (name ref.codes, kind SEED (path 'codes.csv'));",
		"models/codes.csv": "code,label\n1,a\n",
	}
	a, err := load(t, writeProject(t, files))
	require.NoError(t, err)
	files["models/codes.csv"] = "code,label\n1,b\n"
	b, err := load(t, writeProject(t, files))
	require.NoError(t, err)
	require.NotEqual(t, a.Snapshots["ref.codes"].Version, b.Snapshots["ref.codes"].Version)
}

// Bad projects: every message names the file, line and column.
func TestLoadErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		files map[string]string
		want  []string
	}{
		{
			name: "reference to an unknown table",
			files: map[string]string{
				"models/raw.sql": external,
				"models/stg.sql": "MODEL (name stg.events, kind FULL);\nSELECT *\nFROM raw.event",
			},
			want: []string{"models/stg.sql:3:6: model stg.events reads raw.event, which is neither a model, a source nor a declared EXTERNAL table; did you mean raw.events?"},
		},
		{
			name: "unqualified reference",
			files: map[string]string{
				"models/stg.sql": "MODEL (name stg.events, kind FULL);\nSELECT * FROM events",
			},
			want: []string{"models/stg.sql:2:15: model stg.events reads events without a schema; write schema.table (models, sources and EXTERNAL tables are schema-qualified)"},
		},
		{
			name: "cycle",
			files: map[string]string{
				"models/a.sql": "MODEL (name s.a, kind FULL);\nSELECT * FROM s.c",
				"models/b.sql": "MODEL (name s.b, kind FULL);\nSELECT * FROM s.a",
				"models/c.sql": "MODEL (name s.c, kind FULL);\nSELECT * FROM s.b",
			},
			want: []string{"models/a.sql:1:1: dependency cycle: s.a (models/a.sql) -> s.b (models/b.sql) -> s.c (models/c.sql) -> s.a (models/a.sql)"},
		},
		{
			name: "an incremental model that reads itself declares its columns",
			files: map[string]string{
				"models/run.sql": "MODEL (name s.running, kind INCREMENTAL_BY_TIME_RANGE (time_column ts), start '2024-01-01');\nSELECT @start_ts AS ts, (SELECT count(*) FROM s.running) AS n",
			},
			want: []string{"models/run.sql:2:47: model s.running reads itself: declare its columns (columns (name TYPE, ...)) so that its table exists before its first query runs"},
		},
		{
			name: "a session-scoped pre-statement is refused, not run to no effect",
			files: map[string]string{
				"models/p.sql": "MODEL (name s.p, kind FULL);\n@DEF(n, 2);\nSET threads = 1;\nSELECT @n AS n",
			},
			want: []string{"models/p.sql:3:1: model s.p: pre-statement \"SET threads = 1\": SET changes a setting of the session that runs it; gapless runs each statement on its own pooled connection, " +
				"so its effect would not reach the model's query: write the setting into the query or the warehouse's configuration, or use a persistent object instead of a temporary one"},
		},
		{
			name: "a session-scoped post-statement is refused",
			files: map[string]string{
				"models/p.sql": "MODEL (name s.p, kind FULL);\nSELECT 1 AS n;\nANALYZE s.p;\nCREATE TEMP TABLE t AS SELECT 1",
			},
			want: []string{"models/p.sql:4:1: model s.p: post-statement \"CREATE TEMP TABLE t …\": CREATE TEMP makes an object that lasts only as long as the session that runs it; gapless runs each statement on its own pooled connection, " +
				"so its effect would not reach the model's query: write the setting into the query or the warehouse's configuration, or use a persistent object instead of a temporary one"},
		},
		{
			name: "a FULL model cannot read itself",
			files: map[string]string{
				"models/f.sql": "MODEL (name s.f, kind FULL, columns (n BIGINT));\nSELECT count(*) AS n FROM s.f",
			},
			want: []string{"models/f.sql:2:27: model s.f reads itself, which only an incremental model can (a FULL model is rebuilt from its query alone)"},
		},
		{
			name: "an SCD type 2 model cannot read itself yet",
			files: map[string]string{
				"models/h.sql": "MODEL (name s.h, kind SCD_TYPE_2_BY_COLUMN (unique_key id, columns [v]), columns (id INT, v INT));\nSELECT id, v FROM s.h",
			},
			want: []string{"models/h.sql:2:19: model s.h reads itself, which gapless allows only INCREMENTAL_BY_TIME_RANGE and INCREMENTAL_BY_UNIQUE_KEY models so far (each SCD_TYPE_2_BY_COLUMN batch rebuilds the table from its query and the table's rows)"},
		},
		{
			name: "SQL syntax error is located in the file",
			files: map[string]string{
				"models/raw.sql": external,
				"models/stg.sql": "MODEL (name stg.events, kind FULL);\n\nSELECT id,\n  FROM FROM raw.events",
			},
			want: []string{`models/stg.sql:4:8: SQL syntax error: syntax error at or near "FROM"`},
		},
		{
			name: "duplicate model name",
			files: map[string]string{
				"models/a.sql": external,
				"models/b.sql": "\n" + external,
			},
			want: []string{"models/b.sql:2:1: model raw.events is already defined in models/a.sql:1:1"},
		},
		{
			name: "did you mean names a source",
			files: map[string]string{
				"sources/events.yaml": eventsSource,
				"models/stg.sql":      "MODEL (name stg.events, kind FULL);\nSELECT *\nFROM raw.event",
			},
			want: []string{"models/stg.sql:3:6: model stg.events reads raw.event, which is neither a model, a source nor a declared EXTERNAL table; did you mean raw.events?"},
		},
		{
			name: "a source and a model of one name",
			files: map[string]string{
				"sources/events.yaml": eventsSource,
				"models/raw.sql":      "MODEL (name raw.events, kind FULL);\nSELECT 1 AS id",
			},
			want: []string{"sources/events.yaml:1:7: source raw.events (sources/events.yaml) has the name of the model in models/raw.sql:1:1"},
		},
		{
			name: "a source and an EXTERNAL model of one name",
			files: map[string]string{
				"sources/events.yaml": eventsSource,
				"models/raw.sql":      external,
			},
			want: []string{"sources/events.yaml:1:7: source raw.events (sources/events.yaml) has the name of the EXTERNAL model in models/raw.sql:1:1"},
		},
		{
			name: "two sources of one name",
			files: map[string]string{
				"sources/a.yaml": eventsSource,
				"sources/b.yaml": eventsSource,
				"models/stg.sql": readsEvents,
			},
			want: []string{"sources/b.yaml:1:7: source raw.events is already defined in sources/a.yaml:1:7"},
		},
		{
			name: "a model reading a source without columns",
			files: map[string]string{
				"sources/events.yaml": "name: raw.events\nconnector: files\nfiles: {path: landing/*.csv}\ntime_column: ts\n",
				"models/stg.sql":      "MODEL (name stg.events, kind FULL);\nSELECT * FROM raw.events",
			},
			want: []string{"models/stg.sql:2:15: model stg.events reads source raw.events, which declares no columns: declare them in sources/events.yaml"},
		},
		{
			name: "model and source errors together",
			files: map[string]string{
				"sources/bad.yaml": "name: raw.bad\nconector: files\n",
				"models/a.sql":     "MODEL (name s.a, kind FULLL);\nSELECT 1",
			},
			want: []string{"models/a.sql:1:23:", "sources/bad.yaml:2:1: unknown key conector at the top level: did you mean connector?"},
		},
		{
			name: "header errors from several files are all reported",
			files: map[string]string{
				"models/a.sql": "MODEL (name s.a, kind FULLL);\nSELECT 1",
				"models/b.sql": "MODEL (kind FULL);\nSELECT 1",
			},
			want: []string{"models/a.sql:1:23:", "models/b.sql:1:1:"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := load(t, writeProject(t, tc.files))
			require.Error(t, err)
			var errs Errors
			require.ErrorAs(t, err, &errs)
			require.Len(t, errs, len(tc.want), err.Error())
			for i, w := range tc.want {
				require.Contains(t, errs[i].Error(), w)
				var me *model.Error
				var se *source.Error
				require.True(t, errors.As(errs[i], &me) || errors.As(errs[i], &se), "a located error: %v", errs[i])
			}
		})
	}
}

func TestFindRootWalksUp(t *testing.T) {
	t.Parallel()
	dir := writeProject(t, map[string]string{
		"gapless.yaml":        "warehouse: duckdb://w.duckdb\n",
		"models/deep/raw.sql": external,
	})
	root, err := FindRoot(filepath.Join(dir, "models", "deep"))
	require.NoError(t, err)
	want, err := filepath.EvalSymlinks(dir)
	require.NoError(t, err)
	got, err := filepath.EvalSymlinks(root)
	require.NoError(t, err)
	require.Equal(t, want, got)

	_, err = FindRoot(t.TempDir())
	require.ErrorIs(t, err, ErrNoProject)
}

func TestLoadReadsConfigDefaults(t *testing.T) {
	t.Parallel()
	dir := writeProject(t, map[string]string{
		"gapless.yaml":   "model_defaults:\n  owner: platform\n  cron: '@hourly'\n",
		"models/raw.sql": external,
		"models/stg.sql": "MODEL (name stg.events, kind FULL);\nSELECT * FROM raw.events",
	})
	p, cfg, err := Load(context.Background(), dir, parser)
	require.NoError(t, err)
	require.Equal(t, "platform", p.Models["stg.events"].Owner)
	require.Equal(t, "@hourly", p.Models["stg.events"].Cron)
	require.Equal(t, config.DriverDuckDB, cfg.Warehouse.Driver)
}

// Scenario: model files are loaded on several goroutines. A project of 40
// files, every fourth with a syntax error and two defining one model,
// reports every error in file order (then the duplicate, which the second
// file in order defines), the same on every load.
func TestLoadReportsErrorsInFileOrderWhateverTheConcurrency(t *testing.T) {
	t.Parallel()
	files := map[string]string{}
	var want []string
	for i := range 40 {
		rel := fmt.Sprintf("models/m%02d.sql", i)
		files[rel] = fmt.Sprintf("MODEL (name s.m%02d, kind FULL);\nSELECT 1 AS x", i)
		if i%4 == 0 {
			files[rel] = fmt.Sprintf("MODEL (name s.m%02d, kind FULL);\nSELEC 1", i)
			want = append(want, rel+":2:1:")
		}
	}
	files["models/m39.sql"] = "MODEL (name s.m01, kind FULL);\nSELECT 1 AS x"
	want = append(want, "models/m39.sql:1:1: model s.m01 is already defined in models/m01.sql")
	dir := writeProject(t, files)
	for range 3 {
		_, err := load(t, dir)
		var errs Errors
		require.ErrorAs(t, err, &errs)
		require.Len(t, errs, len(want), err.Error())
		for i, w := range want {
			require.True(t, strings.HasPrefix(errs[i].Error(), w), "error %d: %s, want %s...", i, errs[i], w)
		}
	}
}
