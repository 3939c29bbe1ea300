package execute_test

import (
	"strings"
	"testing"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/execute"
	"github.com/gapless-dev/gapless/execute/executetest"
	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/model"
	"github.com/gapless-dev/gapless/snapshot"
	"github.com/gapless-dev/gapless/warehouse"
)

// Scenario: an environment's view schema <schema>__<env> keeps its name up
// to 63 bytes and is shortened with a hash past it, stably and distinctly
// per environment; prod serves the model's own schema and every
// environment serves the model's own table name, never rewritten.
func TestViewNamesFit(t *testing.T) {
	t.Parallel()
	require.Equal(t, "demo__dev", execute.ViewSchema("demo", "dev"))
	require.Equal(t, "demo", execute.ViewSchema("demo", execute.ProdEnvironment))
	require.Equal(t, "demo", execute.ViewSchema("demo", ""))

	at63 := strings.Repeat("s", 58) + "__dev" // 63 bytes
	require.Equal(t, at63, execute.ViewSchema(strings.Repeat("s", 58), "dev"))
	over := execute.ViewSchema(strings.Repeat("s", 59), "dev") // 64 bytes
	require.Len(t, over, 63)
	require.True(t, strings.HasPrefix(over, strings.Repeat("s", 52)+"_"), over)
	require.Equal(t, over, execute.ViewSchema(strings.Repeat("s", 59), "dev"), "stable")

	schema := strings.Repeat("s", 63)
	a, b := execute.ViewSchema(schema, "feature_a"), execute.ViewSchema(schema, "feature_b")
	require.NotEqual(t, a, b, "two environments of one long schema do not share views")
	require.Equal(t, schema, execute.ViewSchema(schema, execute.ProdEnvironment))

	table := strings.Repeat("t", 63)
	m := &model.Model{Name: schema + "." + table}
	s := &snapshot.Snapshot{Name: m.Name, Model: m, Version: "0a75ef46a1b2c3d4"}
	require.Equal(t, warehouse.Table{Schema: schema, Name: table}, execute.ViewTable(s, execute.ProdEnvironment))
	require.Equal(t, warehouse.Table{Schema: a, Name: table}, execute.ViewTable(s, "feature_a"))
	phys := execute.PhysicalTable(s)
	require.Equal(t, warehouse.Table{Schema: s.PhysicalSchema(), Name: s.PhysicalTable()}, phys)
	require.LessOrEqual(t, len(phys.Schema), 63)
	require.LessOrEqual(t, len(phys.Name), 63)
}

// Scenario: on PostgreSQL, a project whose schema and table names are at
// the 63-byte limit deploys end to end. Its physical schema
// (gapless__<schema>, 72 bytes) and tables (<schema>__<table>__<version>,
// 146 bytes) would be refused by the engine (PostgreSQL would truncate
// them, and the two models would collide on one name); shortened, both
// tables are created, an interval of each is computed and recorded, the
// downstream model reads the upstream one through its shortened name, and
// a development environment (whose view schema is shortened too) and prod
// serve the rows under the models' own names. The catalog holds exactly the
// names gapless computed, so they round-trip.
func TestLongModelNamesDeployOnPostgres(t *testing.T) {
	t.Parallel()
	schema := "marketing_" + strings.Repeat("x", 53)
	events := "events_" + strings.Repeat("e", 56)
	daily := "daily_" + strings.Repeat("d", 57)
	require.Len(t, schema, 63)
	require.Len(t, events, 63)
	require.Len(t, daily, 63)
	files := map[string]string{
		"models/events.sql": `MODEL (
  name ` + schema + `.` + events + `,
  kind INCREMENTAL_BY_TIME_RANGE (time_column ts),
  cron '@daily',
  start '2024-01-01'
);
SELECT g.ts AS ts, CAST(EXTRACT(HOUR FROM g.ts) AS INTEGER) AS h
FROM generate_series(@start_ts, @end_ts, INTERVAL '1 hour') AS g(ts)`,
		"models/daily.sql": `MODEL (
  name ` + schema + `.` + daily + `,
  kind INCREMENTAL_BY_TIME_RANGE (time_column day),
  cron '@daily',
  start '2024-01-01'
);
SELECT date_trunc('day', e.ts) AS day, count(*) AS n, sum(e.h) AS hs
FROM ` + schema + `.` + events + ` AS e
WHERE e.ts BETWEEN @start_ts AND @end_ts
GROUP BY 1`,
	}
	b := executetest.SetupPostgres(t, false, files)
	pr := b.Load(t)
	tpls, err := execute.Templates(b.Ctx, b.Parser, b.Engine, pr.Snapshots)
	require.NoError(t, err)
	exec := at(2024, 1, 3, 0)
	x := &execute.Executor{Engine: b.Engine, Store: b.Store, ProjectDir: b.Dir, Logger: quiet, Clock: clockwork.NewFakeClockAt(exec)}
	work := interval.NewSet(interval.NewRange(at(2024, 1, 1, 0), at(2024, 1, 3, 0)))

	for _, name := range []string{schema + "." + events, schema + "." + daily} {
		tpl := tpls[name]
		require.NotNil(t, tpl, name)
		s := tpl.Snapshot
		require.Equal(t, execute.PhysicalTable(s), tpl.Table)
		require.LessOrEqual(t, len(tpl.Table.Schema), 63, tpl.Table.Schema)
		require.LessOrEqual(t, len(tpl.Table.Name), 63, tpl.Table.Name)
		require.NotEqual(t, "gapless__"+schema, tpl.Table.Schema, "the physical schema is shortened")

		require.NoError(t, x.Prepare(b.Ctx, tpl, exec))
		res, err := x.Execute(b.Ctx, execute.Work{Template: tpl, Ranges: work, Execution: exec, SkipCovered: true})
		require.NoError(t, err)
		require.Positive(t, res.Batches)
		require.Equal(t, work.String(), b.Intervals(t, s.Name, s.Version))

		// The catalog holds the computed names byte for byte: PostgreSQL
		// truncated nothing.
		got, err := b.Engine.Query(b.Ctx, `SELECT n.nspname::text, c.relname::text
FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = $1 AND c.relname = $2`, tpl.Table.Schema, tpl.Table.Name)
		require.NoError(t, err)
		require.Equal(t, [][]any{{tpl.Table.Schema, tpl.Table.Name}}, got.Rows)
		exists, err := b.Engine.TableExists(b.Ctx, tpl.Table)
		require.NoError(t, err)
		require.True(t, exists)
	}
	up, down := tpls[schema+"."+events], tpls[schema+"."+daily]
	require.Equal(t, up.Table.Schema, down.Table.Schema)
	require.NotEqual(t, up.Table.Name, down.Table.Name, "the two models share a 52-byte prefix, not a table")
	require.Contains(t, down.Query, b.Engine.QuoteTable(up.Table))
	require.Equal(t, int64(48), b.Count(t, b.Engine.QuoteTable(up.Table)))
	require.Equal(t, []string{"24 276", "24 276"},
		b.Rows(t, "SELECT CAST(n AS BIGINT), CAST(hs AS BIGINT) FROM "+b.Engine.QuoteTable(down.Table)))

	for _, env := range []string{"dev", execute.ProdEnvironment} {
		for _, tpl := range []*execute.Template{up, down} {
			view := execute.ViewTable(tpl.Snapshot, env)
			require.NoError(t, b.Engine.CreateSchema(b.Ctx, view.Schema))
			require.NoError(t, b.Engine.CreateOrReplaceView(b.Ctx, warehouse.ViewParams{
				View: view, Query: "SELECT * FROM " + b.Engine.QuoteTable(tpl.Table)}))
		}
	}
	dev := execute.ViewTable(down.Snapshot, "dev")
	require.Len(t, dev.Schema, 63, "<schema>__dev is 68 bytes, shortened")
	require.Equal(t, []string{"24 276", "24 276"},
		b.Rows(t, "SELECT CAST(n AS BIGINT), CAST(hs AS BIGINT) FROM "+b.Engine.QuoteTable(dev)))
	require.Equal(t, []string{"48"}, b.Rows(t, "SELECT CAST(count(*) AS BIGINT) FROM "+schema+"."+events),
		"prod serves the model under its own name")
}
