package apply_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/apply"
	"github.com/gapless-dev/gapless/execute"
	"github.com/gapless-dev/gapless/execute/executetest"
	"github.com/gapless-dev/gapless/model"
	"github.com/gapless-dev/gapless/plan"
	"github.com/gapless-dev/gapless/project"
	"github.com/gapless-dev/gapless/run"
	"github.com/gapless-dev/gapless/state"
)

// checkEvents is a sound hourly parent for the models under check.
const checkEvents = `MODEL (name demo.events, kind INCREMENTAL_BY_TIME_RANGE (time_column ts), cron '@daily', start '2024-01-01');
SELECT g.ts AS ts, 1.5 AS amount FROM generate_series(@start_ts, @end_ts, INTERVAL '1 hour') AS g(ts)`

// tryPlan builds a plan for prod at 2024-01-03 as Bundle.Plan does, and
// returns the builder's error instead of failing.
func tryPlan(b *executetest.Bundle) (*plan.Plan, error) {
	pr, _, err := project.Load(b.Ctx, b.Dir, b.Parser)
	if err != nil {
		return nil, err
	}
	return plan.Assemble(b.Ctx, plan.AssembleParams{
		Store: b.Store, Environment: plan.Prod, Snapshots: pr.Snapshots, Graph: pr.Graph, IDs: plan.Fixed("p1"),
		Additive: project.Additive(b.Ctx, b.Parser), ExecutionTime: at(2024, 1, 3, 0), Now: at(2024, 1, 3, 0),
		Options: plan.Options{},
	})
}

// requireNothingWritten checks that no stage of p ran: state holds no
// plan, environment or snapshot, and the warehouse no physical table and
// no gapless schema.
func requireNothingWritten(t *testing.T, b *executetest.Bundle, p *plan.Plan) {
	t.Helper()
	plans, err := b.Store.ListPlans(b.Ctx, state.PlanFilter{})
	require.NoError(t, err)
	require.Empty(t, plans, "no plan is saved")
	envs, err := b.Store.ListEnvironments(b.Ctx)
	require.NoError(t, err)
	require.Empty(t, envs, "no environment is promoted")
	var keys []state.SnapshotKey
	for _, s := range p.Snapshots {
		keys = append(keys, state.SnapshotKey{Name: s.Name, Fingerprint: s.Fingerprint.String()})
		exists, err := b.Engine.TableExists(b.Ctx, execute.PhysicalTable(s))
		require.NoError(t, err)
		require.False(t, exists, "no physical table of %s", s.Name)
	}
	snaps, err := b.Store.GetSnapshots(b.Ctx, keys)
	require.NoError(t, err)
	require.Empty(t, snaps, "no snapshot is recorded")
	require.Empty(t, b.Rows(t, "SELECT schema_name FROM information_schema.schemata WHERE schema_name LIKE 'gapless%'"))
}

// Scenario: project errors that used to surface late (a table created and
// then a failed backfill, a driver's "could not bind parameter", a run
// that fails after promotion, a binder error printed twice with the whole
// SQL, a merge on a key the query lacks) are each refused before the
// first stage, on both backends: one message naming the model's file, line
// and column and what to do, as `gapless plan` prints it (apply.Check) and
// as Apply returns it, and nothing in state or warehouse. An EXTERNAL
// table is checked against its declared columns.
func TestProjectErrorsAreRefusedBeforeAnythingIsWritten(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		model string
		// want is the message; %TEXT% is the engine's name for text.
		want string
		// alone: the model is the project's only one.
		alone bool
	}{
		{
			name: "time_column not an output column",
			model: `MODEL (name demo.daily, kind INCREMENTAL_BY_TIME_RANGE (time_column dy), cron '@daily', start '2024-01-01');
SELECT CAST(date_trunc('day', e.ts) AS DATE) AS day, sum(e.amount) AS revenue
FROM demo.events AS e WHERE e.ts BETWEEN @start_ts AND @end_ts GROUP BY 1`,
			want: "models/daily.sql:1:69: model demo.daily: time_column dy is not a column of its query " +
				"(its columns: day, revenue); did you mean day?",
		},
		{
			name: "a string time column without a format",
			model: `MODEL (name demo.daily, kind INCREMENTAL_BY_TIME_RANGE (time_column ds), cron '@daily', start '2024-01-01');
SELECT CAST(CAST(date_trunc('day', e.ts) AS DATE) AS TEXT) AS ds, sum(e.amount) AS revenue
FROM demo.events AS e WHERE e.ts BETWEEN @start_ts AND @end_ts GROUP BY 1`,
			want: "models/daily.sql:1:69: model demo.daily: time column ds is %TEXT%, text that gapless cannot compare with " +
				"an interval's bounds as time: give its format as in SQLMesh, time_column (ds, '%Y-%m-%d'), " +
				"or make it a DATE or TIMESTAMP in the query",
		},
		{
			name: "no start in the whole project",
			model: `MODEL (name demo.daily, kind FULL);
SELECT v.id FROM (VALUES (1)) AS v(id)`,
			want: "models/daily.sql:1:1: model demo.daily has no start, and none of the models it reads has one: " +
				"set start in its MODEL header (start '2024-01-01') or model_defaults.start in gapless.yaml",
			alone: true,
		},
		{
			name: "an unknown column",
			model: `MODEL (name demo.daily, kind INCREMENTAL_BY_TIME_RANGE (time_column day), cron '@daily', start '2024-01-01');
SELECT CAST(date_trunc('day', e.ts) AS DATE) AS day, sum(e.amout) AS revenue
FROM demo.events AS e WHERE e.ts BETWEEN @start_ts AND @end_ts GROUP BY 1`,
			want: "models/daily.sql:2:60: model demo.daily: unknown column amout in its query (",
		},
		{
			name: "a unique key that is not a column",
			model: `MODEL (name demo.daily, kind INCREMENTAL_BY_UNIQUE_KEY (unique_key (id, dy)), cron '@daily', start '2024-01-01');
SELECT CAST(1 AS BIGINT) AS id, DATE '2024-01-01' AS day`,
			want: "models/daily.sql:1:30: model demo.daily: unique_key dy is not a column of its query (its columns: id, day); did you mean day?",
		},
		{
			name: "an unknown column of an EXTERNAL table",
			model: `MODEL (name demo.daily, kind FULL, start '2024-01-01');
SELECT r.id, r.labl FROM raw.items AS r`,
			want: "models/daily.sql:2:16: model demo.daily: unknown column labl in its query (",
		},
	}
	external := "MODEL (name raw.items, kind EXTERNAL, columns (id BIGINT, label TEXT));"
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			files := map[string]string{"models/events.sql": checkEvents, "models/daily.sql": c.model, "models/items.sql": external}
			if c.alone {
				files = map[string]string{"models/daily.sql": c.model}
			}
			onBoth(t, files, func(t *testing.T, b *executetest.Bundle) {
				text := "VARCHAR"
				if b.Engine.Dialect() == "postgres" {
					text = "text"
				}
				want := strings.ReplaceAll(c.want, "%TEXT%", text)
				p, err := tryPlan(b)
				require.NoError(t, err)

				err = apply.Check(b.Ctx, p, b.Engine, b.Parser, b.Dir)
				require.Error(t, err)
				var me *model.Error
				require.True(t, errors.As(err, &me), "a project error: %v", err)
				msg := err.Error()
				require.NotContains(t, msg, "\n", "one line")
				require.NotContains(t, msg, "SQL:", "not the rendered SQL")
				require.NotContains(t, msg, "gapless__", "not the physical tables")
				if strings.HasSuffix(want, "(") {
					require.True(t, strings.HasPrefix(msg, want), "%s\ndoes not start with\n%s", msg, want)
					require.Regexp(t, `amount|label`, msg, "the engine's candidate")
				} else {
					require.Equal(t, want, msg)
				}

				_, err = doApply(b, p, at(2024, 1, 3, 0), apply.Hooks{}, nil)
				require.Error(t, err)
				require.Equal(t, msg, err.Error(), "apply refuses it the same way, before its first stage")
				requireNothingWritten(t, b, p)
			})
		})
	}
}

// Scenario: where a start comes from when a model has none. An
// incremental model without one is refused while the plan is built, at its
// header, with the fix. A FULL model over it inherits its start (as SQLMesh
// infers it from the parents), and a seed nothing starts takes the
// earliest start of the project (its start only dates its builds): the
// project deploys, and a run after the promotion finds a schedule for
// every model, where it used to fail.
func TestMissingStart(t *testing.T) {
	t.Parallel()
	b := executetest.Setup(t, false, map[string]string{
		"models/events.sql": strings.Replace(checkEvents, ", start '2024-01-01'", "", 1),
	})
	_, err := tryPlan(b)
	var me *model.Error
	require.ErrorAs(t, err, &me)
	require.Equal(t, "models/events.sql:1:1: model demo.events has no start, and none of the models it reads has one: "+
		"set start in its MODEL header (start '2024-01-01') or model_defaults.start in gapless.yaml", err.Error())

	b = executetest.Setup(t, false, map[string]string{
		"models/events.sql": strings.Replace(checkEvents, "start '2024-01-01'", "start '2024-01-02'", 1),
		"models/early.sql":  "MODEL (name demo.early, kind VIEW, start '2024-01-01');\nSELECT 1 AS x",
		"models/totals.sql": "MODEL (name demo.totals, kind FULL);\nSELECT count(*) AS n FROM demo.events",
		"models/codes.sql":  "MODEL (name demo.codes, kind SEED (path '../seeds/codes.csv'));",
		"seeds/codes.csv":   "code\nx\n",
	})
	pr := b.Load(t)
	require.Equal(t, at(2024, 1, 2, 0), pr.Models["demo.totals"].Start, "inherited from demo.events")
	require.Equal(t, at(2024, 1, 1, 0), pr.Models["demo.codes"].Start, "the project's earliest start")
	p := b.Plan(t, "p1", plan.Prod, at(2024, 1, 3, 0), plan.Options{})
	_, err = doApply(b, p, at(2024, 1, 3, 0), apply.Hooks{}, nil)
	require.NoError(t, err)
	_, err = runOnce(b.Ctx, b, plan.Prod, at(2024, 1, 4, 0), run.Hooks{})
	require.NoError(t, err)
	require.Equal(t, []string{"48"}, b.Rows(t, "SELECT n FROM demo.totals"))
	served, _ := b.Served(t, plan.Prod)
	require.Equal(t, "{[2024-01-01T00:00:00Z, 2024-01-04T00:00:00Z)}", b.Intervals(t, "demo.codes", served["demo.codes"].Version))
}

// Scenario: SQLMesh's starter project (sqlmesh init duckdb) as it is, with
// no model_defaults.start: a seed with declared columns, an incremental
// model over it with its own start, a FULL model over that. It deploys in
// one apply (the seed's table is made before the incremental model is
// described against it), the FULL model inherits the incremental model's
// start and the seed the project's earliest.
func TestSQLMeshStarterProject(t *testing.T) {
	t.Parallel()
	b := executetest.Setup(t, false, map[string]string{
		"seeds/seed_data.csv": "id,item_id,event_date\n1,2,2020-01-01\n2,1,2020-01-01\n3,3,2020-01-03\n4,1,2020-01-04\n" +
			"5,1,2020-01-05\n6,1,2020-01-06\n7,1,2020-01-07\n",
		"models/seed_model.sql": `MODEL (
  name sqlmesh_example.seed_model,
  kind SEED (
    path '../seeds/seed_data.csv'
  ),
  columns (
    id INTEGER,
    item_id INTEGER,
    event_date DATE
  ),
  grain (id, event_date)
);`,
		"models/incremental_model.sql": `MODEL (
  name sqlmesh_example.incremental_model,
  kind INCREMENTAL_BY_TIME_RANGE (
    time_column event_date
  ),
  start '2020-01-01',
  cron '@daily',
  grain (id, event_date)
);

SELECT
  id,
  item_id,
  event_date,
FROM
  sqlmesh_example.seed_model
WHERE
  event_date BETWEEN @start_date AND @end_date`,
		"models/full_model.sql": `MODEL (
  name sqlmesh_example.full_model,
  kind FULL,
  cron '@daily',
  grain item_id
);

SELECT
  item_id,
  COUNT(DISTINCT id) AS num_orders,
FROM
  sqlmesh_example.incremental_model
GROUP BY item_id`,
	})
	p := b.Plan(t, "p1", plan.Prod, time.Date(2020, 1, 8, 1, 0, 0, 0, time.UTC), plan.Options{})
	_, err := doApply(b, p, time.Date(2020, 1, 8, 1, 0, 0, 0, time.UTC), apply.Hooks{}, nil)
	require.NoError(t, err)
	require.Equal(t, []string{"1 5", "2 1", "3 1"}, b.Rows(t, "SELECT item_id, num_orders FROM sqlmesh_example.full_model"))
	require.Equal(t, int64(7), b.Count(t, "sqlmesh_example.incremental_model"))
}

// Scenario: SQLMesh's time_column (ds, '%Y-%m-%d') on a model that keeps
// its day as text, on both backends. Each interval's rows are those whose
// text falls between its bounds rendered in the format: the first deploy
// writes two days, a run the third, and a restatement of everything
// recomputes them in place. A row of the query outside its interval (the
// 1999 one every batch returns) never lands, and no day is held twice.
func TestStringTimeColumnWithFormat(t *testing.T) {
	t.Parallel()
	daily := `MODEL (name demo.daily, kind INCREMENTAL_BY_TIME_RANGE (time_column (ds, '%Y-%m-%d')), cron '@daily', start '2024-01-01');
SELECT CAST(CAST(date_trunc('day', e.ts) AS DATE) AS TEXT) AS ds, count(*) AS n
FROM demo.events AS e WHERE e.ts BETWEEN @start_ts AND @end_ts GROUP BY 1
UNION ALL SELECT '1999-01-01' AS ds, 0 AS n`
	onBoth(t, map[string]string{"models/events.sql": checkEvents, "models/daily.sql": daily}, func(t *testing.T, b *executetest.Bundle) {
		rows := func() []string { return b.Rows(t, "SELECT ds, CAST(n AS BIGINT) FROM demo.daily") }
		p := b.Plan(t, "p1", plan.Prod, at(2024, 1, 3, 0), plan.Options{})
		_, err := doApply(b, p, at(2024, 1, 3, 0), apply.Hooks{}, nil)
		require.NoError(t, err)
		require.Equal(t, []string{"2024-01-01 24", "2024-01-02 24"}, rows())

		_, err = runOnce(b.Ctx, b, plan.Prod, at(2024, 1, 4, 0), run.Hooks{})
		require.NoError(t, err)
		require.Equal(t, []string{"2024-01-01 24", "2024-01-02 24", "2024-01-03 24"}, rows())

		p = b.Plan(t, "p2", plan.Prod, at(2024, 1, 4, 0), plan.Options{Restate: []string{"demo.events"}})
		_, err = doApply(b, p, at(2024, 1, 4, 0), apply.Hooks{}, nil)
		require.NoError(t, err)
		require.Equal(t, []string{"2024-01-01 24", "2024-01-02 24", "2024-01-03 24"}, rows())
		served, _ := b.Served(t, plan.Prod)
		require.Equal(t, "{[2024-01-01T00:00:00Z, 2024-01-04T00:00:00Z)}", b.Intervals(t, "demo.daily", served["demo.daily"].Version))
	})
}
