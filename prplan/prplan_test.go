package prplan_test

import (
	"context"
	"errors"
	"flag"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/gapless-dev/gapless/apply"
	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/model"
	"github.com/gapless-dev/gapless/plan"
	"github.com/gapless-dev/gapless/promotion"
	"github.com/gapless-dev/gapless/prplan"
	"github.com/gapless-dev/gapless/run"
	"github.com/gapless-dev/gapless/snapshot"
	"github.com/gapless-dev/gapless/sqlparse"
	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/state/sqlite"
	"github.com/gapless-dev/gapless/warehouse"
	"github.com/gapless-dev/gapless/warehouse/duckdb"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

var parser *sqlparse.Parser

func TestMain(m *testing.M) {
	flag.Parse()
	var err error
	if parser, err = sqlparse.Open(); err != nil {
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

func at(y int, mo time.Month, d, h int) time.Time { return time.Date(y, mo, d, h, 0, 0, 0, time.UTC) }

// The repository's project lives in analytics/ (github.project_dir).
const projectDir = "analytics"

// repo is a small repository: an hourly model of generated events, its
// daily rollup, a FULL total over it, and an independent FULL model; prod
// promotes under trailing-gap(2).
func repo() fstest.MapFS {
	return fstest.MapFS{
		"README.md": {Data: []byte("# analytics\n")},
		"analytics/gapless.yaml": {Data: []byte(`model_defaults:
  dialect: duckdb
  start: '2024-01-01'
environments:
  prod:
    on_incumbent_advance: trailing-gap
    max_trailing_gap_intervals: 2
github:
  repositories: [acme/analytics]
  project_dir: analytics
`)},
		"analytics/models/events.sql": {Data: []byte(eventsSQL("10.0"))},
		"analytics/models/daily.sql": {Data: []byte(`MODEL (
  name demo.daily,
  kind INCREMENTAL_BY_TIME_RANGE (time_column day),
  cron '@daily',
  grain (day, customer_id)
);

SELECT
  date_trunc('day', event_ts) AS day,
  customer_id,
  count(*) AS events,
  sum(amount) AS revenue
FROM demo.events
WHERE event_ts BETWEEN @start_ts AND @end_ts
GROUP BY ALL
`)},
		"analytics/models/totals.sql": {Data: []byte(`MODEL (name demo.totals, kind FULL, cron '@daily');

SELECT customer_id, sum(revenue) AS revenue FROM demo.daily GROUP BY customer_id
`)},
		"analytics/models/regions.sql": {Data: []byte(`MODEL (name ref.regions, kind FULL, cron '@daily');

SELECT * FROM (VALUES (1, 'north'), (2, 'south')) AS t(region_id, name)
`)},
	}
}

// eventsSQL is demo.events with amount computed as amount.
func eventsSQL(amount string) string {
	return `MODEL (
  name demo.events,
  kind INCREMENTAL_BY_TIME_RANGE (time_column event_ts, batch_size 24),
  cron '@hourly',
  grain (event_id)
);

SELECT
  epoch(g.ts)::BIGINT / 300 AS event_id,
  g.ts AS event_ts,
  (epoch(g.ts)::BIGINT / 300) % 5 + 1 AS customer_id,
  ` + amount + ` AS amount
FROM generate_series(@start_ts, @end_ts, INTERVAL 5 MINUTE) AS g(ts)
`
}

// fixture is a warehouse and a state store as the serve process holds
// them: a real in-memory DuckDB and a real SQLite file.
type fixture struct {
	ctx    context.Context
	store  state.Store
	engine warehouse.Engine
}

func setup(t *testing.T) *fixture {
	t.Helper()
	ctx := t.Context()
	eng, err := duckdb.Open(ctx, "", duckdb.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, eng.Close()) })
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "state.db"))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, st.Close()) })
	return &fixture{ctx: ctx, store: st, engine: eng}
}

// checkout checks files' project out for the test's lifetime.
func checkout(t *testing.T, files fs.FS) string {
	t.Helper()
	root, cleanup, err := prplan.Checkout(files, projectDir)
	require.NoError(t, err)
	t.Cleanup(cleanup)
	return root
}

// params plans root at exec, with plan ids id1, id2, ...
func (f *fixture) params(root string, exec time.Time, id string) prplan.Params {
	return prplan.Params{Store: f.store, Engine: f.engine, ProjectRoot: root, Clock: clockwork.NewFakeClockAt(exec),
		ExecutionTime: exec, Parser: parser, IDs: plan.Numbered(id), Actor: "test"}
}

// deploy deploys files to prod at exec, with plan ids id1, ...
func (f *fixture) deploy(t *testing.T, files fs.FS, exec time.Time, id string) *state.Environment {
	t.Helper()
	_, res, err := prplan.Deploy(f.ctx, f.params(checkout(t, files), exec, id))
	require.NoError(t, err)
	return res.Environment
}

// golden compares got with testdata/name, or rewrites it under -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		require.NoError(t, os.MkdirAll("testdata", 0o755))
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test ./prplan -update to write it")
	require.Equal(t, string(want), got, "testdata/%s differs; run go test ./prplan -update and review the diff", name)
}

func versionOf(t *testing.T, e *state.Environment, name string) string {
	t.Helper()
	for _, r := range e.Snapshots {
		if r.Name == name {
			return r.Version
		}
	}
	t.Fatalf("%s serves no %s", e.Name, name)
	return ""
}

// Scenario: the preview of a first deploy, before prod exists, says prod
// will be created, lists every model as added with its backfill, and
// writes nothing: no environment, no saved plan, no table.
func TestPreviewOfAFirstDeploy(t *testing.T) {
	t.Parallel()
	f := setup(t)
	exec := at(2024, 1, 3, 0)
	pl, err := prplan.Preview(f.ctx, f.params(checkout(t, repo()), exec, "preview"))
	require.NoError(t, err)
	require.Equal(t, plan.Prod, pl.Environment)
	require.Equal(t, plan.Expected{}, pl.Expected, "prod does not exist yet")
	require.Len(t, pl.Changes, 4)
	for _, c := range pl.Changes {
		require.Equal(t, snapshot.Added, c.Category, c.Name)
	}
	b, ok := pl.BackfillFor("demo.events")
	require.True(t, ok)
	require.Equal(t, 48, b.Buckets)
	require.False(t, pl.Options.AllowGaps, "a prod plan runs the no-gap check")
	require.Equal(t, "trailing-gap(2)", pl.Options.Policy.String(), "prod's policy from the project's gapless.yaml")

	envs, err := f.store.ListEnvironments(f.ctx)
	require.NoError(t, err)
	require.Empty(t, envs, "a preview promotes nothing")
	plans, err := f.store.ListPlans(f.ctx, state.PlanFilter{})
	require.NoError(t, err)
	require.Empty(t, plans, "a preview saves no plan")
	exists, err := f.engine.TableExists(f.ctx, warehouse.Table{Schema: "demo", Name: "events"})
	require.NoError(t, err)
	require.False(t, exists, "a preview creates nothing in the warehouse")

	golden(t, "preview_first_deploy.md", prplan.PreviewMarkdown(pl))
}

// Scenario: Deploy promotes prod (generation 1, then 2 after a change); a
// deploy of what prod already serves applies nothing and leaves the
// generation where it is.
func TestDeployPromotesProd(t *testing.T) {
	t.Parallel()
	f := setup(t)
	files := repo()
	e := f.deploy(t, files, at(2024, 1, 3, 0), "d")
	require.Equal(t, int64(1), e.Generation)
	require.Equal(t, "d1", e.PlanID)

	pl, res, err := prplan.Deploy(f.ctx, f.params(checkout(t, files), at(2024, 1, 3, 0), "again"))
	require.NoError(t, err)
	require.True(t, prplan.UpToDate(pl))
	require.Equal(t, int64(1), res.Environment.Generation, "nothing to deploy: the generation does not move")
	require.Empty(t, res.Models)

	files["analytics/models/events.sql"] = &fstest.MapFile{Data: []byte(eventsSQL("20.0"))}
	p := f.params(checkout(t, files), at(2024, 1, 3, 0), "e")
	var batches atomic.Int64
	p.OnEvent = func(e apply.Event) {
		if _, ok := e.(apply.BatchCommitted); ok {
			batches.Add(1)
		}
	}
	pl, res, err = prplan.Deploy(f.ctx, p)
	require.NoError(t, err)
	require.Positive(t, batches.Load(), "apply's events reach OnEvent")
	require.Equal(t, plan.Expected{PlanID: "d1", Generation: 1}, pl.Expected)
	require.Equal(t, int64(2), res.Environment.Generation)
	require.Equal(t, "e1", res.Environment.PlanID)
	got, err := f.store.GetEnvironment(f.ctx, plan.Prod)
	require.NoError(t, err)
	require.Equal(t, int64(2), got.Generation)

	rows, err := f.engine.ReadOnlyQuery(f.ctx, "SELECT max(amount)::DOUBLE FROM demo.events")
	require.NoError(t, err)
	require.Len(t, rows.Rows, 1)
	require.EqualValues(t, 20.0, rows.Rows[0][0], "prod serves the deployed change")
}

// Scenario: prod promotes under strict; while a deploy of a breaking change
// to the daily rollup backfills, the scheduler advances prod's daily table
// a day: the promotion is refused, Deploy's error wraps the policy's
// *promotion.Error, and prod stays at its generation.
func TestDeployRefusedPromotionWrapsThePolicyError(t *testing.T) {
	t.Parallel()
	f := setup(t)
	files := repo()
	files["analytics/gapless.yaml"] = &fstest.MapFile{Data: []byte("model_defaults:\n  dialect: duckdb\n  start: '2024-01-01'\n")}
	f.deploy(t, files, at(2024, 1, 3, 0), "d")
	prodRoot := checkout(t, files)
	files["analytics/models/daily.sql"] = &fstest.MapFile{Data: []byte(strings.Replace(string(files["analytics/models/daily.sql"].Data),
		"sum(amount) AS revenue", "sum(amount) * 2 AS revenue", 1))}

	p := f.params(checkout(t, files), at(2024, 1, 3, 0), "e")
	var advanced sync.Once
	var runErr error
	p.OnEvent = func(e apply.Event) {
		if _, ok := e.(apply.BatchCommitted); !ok {
			return
		}
		advanced.Do(func() { // the scheduler's run of prod, a day later, mid-deploy
			_, runErr = run.Once(f.ctx, run.Params{Env: plan.Prod, ExecutionTime: at(2024, 1, 4, 0), Store: f.store, Engine: f.engine,
				Parser: parser, ProjectDir: prodRoot, Clock: clockwork.NewFakeClockAt(at(2024, 1, 4, 0)), Logger: slog.New(slog.DiscardHandler)})
		})
	}
	pl, _, err := prplan.Deploy(f.ctx, p)
	require.NoError(t, runErr)
	var perr *promotion.Error
	require.ErrorAs(t, err, &perr)
	require.True(t, perr.OnlyAdvanced())
	require.ErrorContains(t, err, "prod: plan e1 was not promoted; prod serves what it served before")
	require.Equal(t, "strict", pl.Options.Policy.OrDefault().String())
	prod, err := f.store.GetEnvironment(f.ctx, plan.Prod)
	require.NoError(t, err)
	require.Equal(t, int64(1), prod.Generation)
	require.Equal(t, "d1", prod.PlanID)
}

// Scenario: after prod is deployed, a pull request changes the daily
// rollup's revenue column: the preview is pinned to prod's generation and
// plan, shows the breaking change with its diff, the indirect change
// downstream, the backfill bounded by prod, and prod's promotion policy.
func TestPreviewOfABreakingChange(t *testing.T) {
	t.Parallel()
	f := setup(t)
	files := repo()
	f.deploy(t, files, at(2024, 1, 3, 0), "d")
	files["analytics/models/daily.sql"] = &fstest.MapFile{Data: []byte(strings.Replace(string(files["analytics/models/daily.sql"].Data),
		"sum(amount) AS revenue", "sum(amount) * 2 AS revenue", 1))}

	pl, err := prplan.Preview(f.ctx, f.params(checkout(t, files), at(2024, 1, 3, 0), "preview"))
	require.NoError(t, err)
	require.Equal(t, plan.Expected{PlanID: "d1", Generation: 1}, pl.Expected, "planned against prod as it is")
	cats := map[string]snapshot.Category{}
	for _, c := range pl.Changes {
		cats[c.Name] = c.Category
	}
	require.Equal(t, map[string]snapshot.Category{"demo.daily": snapshot.Breaking, "demo.totals": snapshot.IndirectBreaking}, cats)

	md := prplan.PreviewMarkdown(pl)
	require.Contains(t, md, "**prod generation 1** (plan `d1`)")
	require.Contains(t, md, "```diff\n")
	require.Contains(t, md, "+  sum(amount) * 2 AS revenue")
	golden(t, "preview_breaking_change.md", md)

	prod, err := f.store.GetEnvironment(f.ctx, plan.Prod)
	require.NoError(t, err)
	require.Equal(t, int64(1), prod.Generation, "a preview never promotes")
}

// Scenario: a pull request changes demo.events; its environment is built
// with pr_start 1d: the changed models compute only the last day (the
// state's intervals say so), the unchanged ref.regions serves prod's
// table, and the environment's views serve the change.
func TestBuildEnvironmentIsBoundedAndReusesProd(t *testing.T) {
	t.Parallel()
	f := setup(t)
	files := repo()
	exec := at(2024, 1, 3, 0)
	prod := f.deploy(t, files, exec, "d")
	files["analytics/models/events.sql"] = &fstest.MapFile{Data: []byte(eventsSQL("30.0"))}

	env := prplan.EnvName("analytics", 7)
	from := exec.Add(-24 * time.Hour)
	pl, res, err := prplan.BuildEnvironment(f.ctx, f.params(checkout(t, files), exec, "pr"), env, from)
	require.NoError(t, err)
	require.Equal(t, "analytics_7", env)
	require.Equal(t, plan.Expected{}, pl.Expected, "a new environment")
	require.Equal(t, int64(1), res.Environment.Generation)

	built, err := f.store.GetEnvironment(f.ctx, env)
	require.NoError(t, err)
	require.Equal(t, versionOf(t, prod, "ref.regions"), versionOf(t, built, "ref.regions"), "the unchanged model is prod's version")
	require.NotEqual(t, versionOf(t, prod, "demo.events"), versionOf(t, built, "demo.events"))
	var computed []string
	for _, m := range res.Models {
		computed = append(computed, m.Model)
	}
	require.NotContains(t, computed, "ref.regions", "prod's table is reused, not computed again")

	window := interval.NewSet(interval.NewRange(from, exec))
	keys := []state.VersionKey{
		{Name: "demo.events", Version: versionOf(t, built, "demo.events")},
		{Name: "demo.daily", Version: versionOf(t, built, "demo.daily")},
		{Name: "demo.events", Version: versionOf(t, prod, "demo.events")},
	}
	got, err := f.store.GetIntervals(f.ctx, keys)
	require.NoError(t, err)
	require.True(t, window.Equal(got[keys[0]]), "events computed only the window: %s", got[keys[0]])
	require.True(t, window.Equal(got[keys[1]]), "daily computed only the window: %s", got[keys[1]])
	require.True(t, interval.NewSet(interval.NewRange(at(2024, 1, 1, 0), exec)).Equal(got[keys[2]]), "prod's version is untouched")

	rows, err := f.engine.ReadOnlyQuery(f.ctx, "SELECT count(*), min(event_ts), max(amount)::DOUBLE FROM demo__analytics_7.events")
	require.NoError(t, err)
	require.EqualValues(t, 24*12, rows.Rows[0][0], "one day of events, twelve an hour")
	require.Equal(t, from, rows.Rows[0][1].(time.Time).UTC())
	require.EqualValues(t, 30.0, rows.Rows[0][2])

	golden(t, "environment_built.md", prplan.EnvironmentMarkdown(env, pl, res))

	// A push that changes nothing planned applies nothing.
	pl, res, err = prplan.BuildEnvironment(f.ctx, f.params(checkout(t, files), exec, "push"), env, from)
	require.NoError(t, err)
	require.True(t, prplan.UpToDate(pl))
	require.Equal(t, int64(1), res.Environment.Generation)
	golden(t, "environment_unchanged.md", prplan.EnvironmentMarkdown(env, pl, res))
}

// Scenario: a closed pull request's environment is invalidated for the
// janitor; invalidating one that does not exist is not an error, and
// prod is never invalidated.
func TestInvalidate(t *testing.T) {
	t.Parallel()
	f := setup(t)
	exec := at(2024, 1, 3, 0)
	f.deploy(t, repo(), exec, "d")
	env := prplan.EnvName("analytics", 3)
	_, _, err := prplan.BuildEnvironment(f.ctx, f.params(checkout(t, repo()), exec, "pr"), env, exec.Add(-time.Hour))
	require.NoError(t, err)

	require.NoError(t, prplan.Invalidate(f.ctx, f.store, env, exec))
	e, err := f.store.GetEnvironment(f.ctx, env)
	require.NoError(t, err)
	require.True(t, e.Invalidated)
	require.NoError(t, prplan.Invalidate(f.ctx, f.store, "analytics_404", exec), "no such environment")
	require.Error(t, prplan.Invalidate(f.ctx, f.store, plan.Prod, exec))
	prod, err := f.store.GetEnvironment(f.ctx, plan.Prod)
	require.NoError(t, err)
	require.False(t, prod.Invalidated)
}

// Scenario: a pull request whose model does not parse gets an error that
// names the file and line relative to the project, never the temporary
// folder it was checked out in, and that says the project is at fault.
func TestBadProjectIsAProjectError(t *testing.T) {
	t.Parallel()
	f := setup(t)
	files := repo()
	files["analytics/models/broken.sql"] = &fstest.MapFile{Data: []byte("MODEL (\n  name demo.broken,\n  kind FULL,\n  bogus_key 1\n);\nSELECT 1 AS x\n")}
	root := checkout(t, files)
	_, err := prplan.Preview(f.ctx, f.params(root, at(2024, 1, 3, 0), "p"))
	var pe *prplan.ProjectError
	require.ErrorAs(t, err, &pe)
	require.Contains(t, err.Error(), filepath.Join("models", "broken.sql")+":4:")
	require.NotContains(t, err.Error(), root)
	var me *model.Error
	require.ErrorAs(t, err, &me, "the loader's error stays reachable")

	files = repo()
	files["analytics/gapless.yaml"] = &fstest.MapFile{Data: []byte("model_defaults:\n  dialect: duckdb\nenvironmnets: {}\n")}
	_, _, err = prplan.Deploy(f.ctx, f.params(checkout(t, files), at(2024, 1, 3, 0), "p"))
	require.ErrorAs(t, err, &pe)
	require.Equal(t, "gapless.yaml:3:1: unknown key environmnets at the top level: did you mean environments?", err.Error())

	files = repo()
	files["analytics/models/totals.sql"] = &fstest.MapFile{Data: []byte("MODEL (name demo.totals, kind FULL, cron '@daily');\nSELECT no_such_column FROM demo.daily\n")}
	_, err = prplan.Preview(f.ctx, f.params(checkout(t, files), at(2024, 1, 3, 0), "p"))
	require.ErrorAs(t, err, &pe, "the plan's check refuses the model: the project is at fault")
	require.Contains(t, err.Error(), "models/totals.sql")

	_, err = prplan.Preview(f.ctx, prplan.Params{Store: f.store, ProjectRoot: root})
	require.EqualError(t, err, "prplan: no warehouse engine")
	require.False(t, errors.As(err, &pe))
}

func TestEnvName(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		prefix string
		n      int
		want   string
	}{
		{"analytics", 42, "analytics_42"},
		{"Acme-Analytics", 1, "acme_analytics_1"},
		{"data..team__x", 7, "data_team_x_7"},
		{"", 5, "pr_5"},
		{"!!!", 5, "pr_5"},
		{"2fast", 9, "pr_2fast_9"},
		{"x", -3, "x_3"},
	} {
		got := prplan.EnvName(tt.prefix, tt.n)
		require.Equal(t, tt.want, got, tt.prefix)
		require.NoError(t, snapshot.CheckEnvironmentName(got))
	}
}
