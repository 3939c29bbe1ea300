package execute_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/execute"
	"github.com/gapless-dev/gapless/execute/executetest"
	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/model"
	"github.com/gapless-dev/gapless/project"
	"github.com/gapless-dev/gapless/snapshot"
	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/warehouse"
)

func stmtDay(d int) time.Time { return time.Date(2024, 1, d, 0, 0, 0, 0, time.UTC) }

// statementFiles: shop.items's pre-statements put the batch's day into
// ops.param, which its query reads; its post-statement logs how many rows
// of that day the model's table holds once written. shop.strict logs its
// day into ops.strict, whose CHECK refuses 2024-01-02; shop.broken's
// pre-statement writes to a table that does not exist.
var statementFiles = map[string]string{
	"gapless.yaml":     "model_defaults:\n  start: '2024-01-01'\n",
	"models/param.sql": "MODEL (name ops.param, kind EXTERNAL, columns (v VARCHAR));\n",
	"models/items.sql": `MODEL (
  name shop.items,
  kind INCREMENTAL_BY_TIME_RANGE (time_column ds, batch_size 1),
  cron '@daily'
);
DELETE FROM ops.param;
INSERT INTO ops.param VALUES (@start_ds);
SELECT CAST(p.v AS DATE) AS ds, 'x' AS tag FROM ops.param AS p;
INSERT INTO ops.log SELECT @start_ds, count(*) FROM @this_model WHERE ds = @start_ds;
`,
	"models/strict.sql": `MODEL (
  name shop.strict,
  kind INCREMENTAL_BY_TIME_RANGE (time_column ds, batch_size 1),
  cron '@daily'
);
SELECT CAST(@start_ds AS DATE) AS ds;

INSERT INTO ops.strict VALUES (@start_ds);
`,
	"models/broken.sql": `MODEL (
  name shop.broken,
  kind FULL,
  cron '@daily'
);
INSERT INTO ops.nowhere VALUES (1);
SELECT 1 AS id;
`,
}

const statementTables = `CREATE SCHEMA IF NOT EXISTS ops;
CREATE TABLE ops.param (v VARCHAR);
CREATE TABLE ops.log (ds VARCHAR, n BIGINT);
CREATE TABLE ops.strict (v VARCHAR CHECK (v <> '2024-01-02'))`

// Scenario: on DuckDB and PostgreSQL, a model's pre-statements run before
// each batch's query and their effect is what the query reads (each day's
// row comes from ops.param, which the pre-statements rewrite per batch,
// @start_ds rendered for it); its post-statement runs after the batch's
// rows are written (it counts them through @this_model). A post-statement
// that fails for the second day fails that batch naming the model, the
// statement's file:line and the interval: the day's rows are in the table
// but not recorded, and the resumed run rewrites exactly that interval, so
// nothing is duplicated. A pre-statement that fails writes and records
// nothing.
func TestStatementsRunAroundEachBatch(t *testing.T) {
	t.Parallel()
	for _, b := range []func() *executetest.Bundle{
		func() *executetest.Bundle { return executetest.Setup(t, false, statementFiles) },
		func() *executetest.Bundle { return executetest.SetupPostgres(t, false, statementFiles) },
	} {
		b := b()
		t.Run(b.Backends, func(t *testing.T) {
			for _, st := range splitSQL(statementTables) {
				_, err := b.Engine.Query(b.Ctx, st)
				require.NoError(t, err)
			}
			pr := b.Load(t)
			require.Len(t, pr.Models["shop.items"].PreStatements, 2)
			tpls, err := execute.Templates(b.Ctx, b.Parser, b.Engine, pr.Snapshots)
			require.NoError(t, err)
			x := &execute.Executor{Engine: b.Engine, Store: b.Store, ProjectDir: b.Dir, Logger: quiet}
			exec := stmtDay(4)
			days := interval.NewSet(interval.NewRange(stmtDay(1), stmtDay(4)))

			items := tpls["shop.items"]
			require.NoError(t, x.Prepare(b.Ctx, items, exec))
			res, err := x.Execute(b.Ctx, execute.Work{Template: items, Ranges: days, Execution: exec, InOrder: true})
			require.NoError(t, err)
			require.Equal(t, 3, res.Batches)
			table := b.Engine.QuoteTable(items.Table)
			require.Equal(t, []string{"2024-01-01 x", "2024-01-02 x", "2024-01-03 x"},
				b.Rows(t, "SELECT CAST(ds AS VARCHAR), tag FROM "+table))
			require.Equal(t, []string{"2024-01-01 1", "2024-01-02 1", "2024-01-03 1"},
				b.Rows(t, "SELECT ds, n FROM ops.log"), "each post-statement saw its batch's row written")

			strict := tpls["shop.strict"]
			require.NoError(t, x.Prepare(b.Ctx, strict, exec))
			res, err = x.Execute(b.Ctx, execute.Work{Template: strict, Ranges: days, Execution: exec, InOrder: true})
			var be *execute.BatchError
			require.ErrorAs(t, err, &be)
			require.Equal(t, interval.NewRange(stmtDay(2), stmtDay(3)), be.Interval)
			var se *execute.StatementError
			require.ErrorAs(t, err, &se)
			require.Equal(t, "post-statement", se.Kind)
			require.Equal(t, model.Pos{File: "models/strict.sql", Line: 8, Col: 1}, se.Pos)
			require.ErrorContains(t, err, "model shop.strict (version ")
			require.ErrorContains(t, err, "interval [2024-01-02T00:00:00Z, 2024-01-03T00:00:00Z): post-statement at models/strict.sql:8:1: ")
			require.Equal(t, "{[2024-01-01T00:00:00Z, 2024-01-02T00:00:00Z)}", res.Recorded.String())
			strictTable := b.Engine.QuoteTable(strict.Table)
			require.Equal(t, []string{"2024-01-01", "2024-01-02"}, b.Rows(t, "SELECT CAST(ds AS VARCHAR) FROM "+strictTable),
				"the failed day's rows were written before its post-statement; they are not recorded")
			got, err := b.Store.GetIntervals(b.Ctx, []state.VersionKey{{Name: strict.Snapshot.Name, Version: strict.Snapshot.Version}})
			require.NoError(t, err)
			require.Equal(t, "{[2024-01-01T00:00:00Z, 2024-01-02T00:00:00Z)}", got[state.VersionKey{Name: strict.Snapshot.Name, Version: strict.Snapshot.Version}].String())

			for _, st := range []string{"DROP TABLE ops.strict", "CREATE TABLE ops.strict (v VARCHAR)"} {
				_, err := b.Engine.Query(b.Ctx, st)
				require.NoError(t, err)
			}
			res, err = x.Execute(b.Ctx, execute.Work{Template: strict, Ranges: days, Execution: exec, InOrder: true, SkipCovered: true})
			require.NoError(t, err)
			require.Equal(t, "{[2024-01-02T00:00:00Z, 2024-01-04T00:00:00Z)}", res.Recorded.String())
			require.Equal(t, []string{"2024-01-01", "2024-01-02", "2024-01-03"}, b.Rows(t, "SELECT CAST(ds AS VARCHAR) FROM "+strictTable),
				"the resumed day replaced its unrecorded rows")

			broken := tpls["shop.broken"]
			require.NoError(t, x.Prepare(b.Ctx, broken, exec))
			res, err = x.Execute(b.Ctx, execute.Work{Template: broken, Whole: true, Execution: exec})
			require.ErrorAs(t, err, &se)
			require.Equal(t, "pre-statement", se.Kind)
			require.ErrorContains(t, err, "model shop.broken (version ")
			require.ErrorContains(t, err, "pre-statement at models/broken.sql:6:1: ")
			require.True(t, res.Recorded.IsEmpty())
			require.Equal(t, int64(0), b.Count(t, b.Engine.QuoteTable(broken.Table)), "nothing was built")
		})
	}
}

// Scenario: a statement whose effect lasts only for its session (SET, USE,
// CREATE TEMP TABLE, BEGIN) is refused when the project loads, naming the
// model, the file:line and why: gapless runs each statement on its own
// pooled connection, so it would not reach the query.
func TestSessionScopedStatementsAreRefusedAtLoad(t *testing.T) {
	t.Parallel()
	b := executetest.Setup(t, false, map[string]string{})
	for _, c := range []struct{ stmt, want string }{
		{"SET threads = 1;", "SET changes a setting of the session"},
		{"use shop;", "USE changes the current catalog or schema"},
		{"CREATE OR REPLACE TEMP TABLE t AS SELECT 1;", "CREATE TEMP makes an object that lasts only as long as the session"},
		{"-- open one\nBEGIN;", "BEGIN controls a transaction"},
		{"PRAGMA threads=2;", "PRAGMA sets an option"},
	} {
		executetest.WriteFiles(t, b.Dir, map[string]string{
			"models/a.sql": "MODEL (name shop.a, kind FULL);\nSELECT 1 AS id;\n" + c.stmt + "\n",
		})
		_, _, err := project.Load(b.Ctx, b.Dir, b.Parser)
		var me *model.Error
		require.ErrorAs(t, err, &me, c.stmt)
		require.Equal(t, model.CodeSessionStatement, me.Code)
		require.Equal(t, 3, me.Pos.Line, c.stmt)
		require.ErrorContains(t, err, "models/a.sql:3:")
		require.ErrorContains(t, err, "model shop.a: post-statement")
		require.ErrorContains(t, err, c.want)
	}
	require.Empty(t, model.SessionScoped("CREATE TABLE IF NOT EXISTS ops.t (a INT)"))
	require.Empty(t, model.SessionScoped("PRAGMA create_fts_index('t', 'id', 'body')"))
	require.Empty(t, model.SessionScoped("INSERT INTO settings SELECT 1"))
}

// Scenario: before_all and after_all statements see @this_env as the
// environment's name, the execution time's variables and the project's
// variables; a failing one is named by its file:line.
func TestEnvironmentStatementsRender(t *testing.T) {
	t.Parallel()
	b := executetest.Setup(t, false, map[string]string{})
	s := &execute.EnvironmentStatements{
		BeforeAll: []model.Statement{{SQL: "CREATE TABLE IF NOT EXISTS main.runs (env VARCHAR, day VARCHAR, who VARCHAR)", Pos: model.Pos{File: "gapless.yaml", Line: 3, Col: 5}}},
		AfterAll: []model.Statement{
			{SQL: "INSERT INTO main.runs VALUES (@this_env, @execution_ds, @owner)", Pos: model.Pos{File: "gapless.yaml", Line: 5, Col: 5}},
			{SQL: "INSERT INTO main.nowhere VALUES (1)", Pos: model.Pos{File: "gapless.yaml", Line: 6, Col: 5}},
		},
		Variables: map[string]any{"owner": "ops"},
	}
	require.NoError(t, s.RunBefore(b.Ctx, b.Engine, "dev", stmtDay(2)))
	err := s.RunAfter(b.Ctx, b.Engine, "dev", stmtDay(2))
	var se *execute.StatementError
	require.ErrorAs(t, err, &se)
	require.Equal(t, "after_all", se.Kind)
	require.ErrorContains(t, err, "after_all at gapless.yaml:6:5: ")
	require.Equal(t, []string{"dev 2024-01-02 ops"}, b.Rows(t, "SELECT * FROM main.runs"))
	var none *execute.EnvironmentStatements
	require.NoError(t, none.RunBefore(b.Ctx, b.Engine, "dev", stmtDay(2)))
}

// splitSQL cuts a test's setup script at ';'.
func splitSQL(script string) []string {
	var out []string
	for _, s := range strings.Split(script, ";") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// Scenario: a model's on-virtual-update statements see @this_model as the
// environment view they follow; a failing one names the model, the view
// and its file:line.
func TestOnVirtualUpdateRendersTheView(t *testing.T) {
	t.Parallel()
	b := executetest.Setup(t, false, map[string]string{})
	for _, sql := range []string{"CREATE TABLE main.seen (v VARCHAR)", "CREATE SCHEMA shop__dev", "CREATE VIEW shop__dev.items AS SELECT 42 AS v"} {
		_, err := b.Engine.Query(b.Ctx, sql)
		require.NoError(t, err)
	}
	s := &snapshot.Snapshot{Name: "shop.items", Model: &model.Model{Name: "shop.items", OnVirtualUpdate: []model.Statement{
		{SQL: "INSERT INTO main.seen SELECT CAST(v AS VARCHAR) FROM @this_model", Pos: model.Pos{File: "models/items.sql", Line: 5, Col: 1}},
		{SQL: "INSERT INTO main.nowhere VALUES (1)", Pos: model.Pos{File: "models/items.sql", Line: 6, Col: 1}},
	}}}
	err := execute.RunOnVirtualUpdate(b.Ctx, b.Engine, s, warehouse.Table{Schema: "shop__dev", Name: "items"}, stmtDay(2))
	require.ErrorContains(t, err, "model shop.items, view shop__dev.items: on-virtual-update statement at models/items.sql:6:1: ")
	require.Equal(t, []string{"42"}, b.Rows(t, "SELECT v FROM main.seen"))
}
