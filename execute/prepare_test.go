package execute_test

import (
	"context"
	"testing"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/execute"
	"github.com/gapless-dev/gapless/execute/executetest"
	"github.com/gapless-dev/gapless/snapshot"
	"github.com/gapless-dev/gapless/warehouse"
)

// Scenario: a deploy's create-tables stage prepares every model of the
// plan. It asks the warehouse once for the whole set (not once per model:
// each question scans DuckDB's catalog), creates the missing objects in
// order (a child from its parent), and on the next deploy leaves the
// existing ones alone, with their rows, but makes again the table someone
// dropped behind gapless's back.
func TestPrepareAllAsksOnceAndRemakesADroppedTable(t *testing.T) {
	t.Parallel()
	files := map[string]string{
		"models/a.sql": "MODEL (name demo.a, kind FULL, cron '@daily', start '2024-01-01');\nSELECT 1 AS id",
		"models/b.sql": "MODEL (name demo.b, kind VIEW, cron '@daily', start '2024-01-01');\nSELECT id FROM demo.a",
		"models/c.sql": "MODEL (name other.c, kind FULL, cron '@daily', start '2024-01-01');\nSELECT id, id + 1 AS next FROM demo.b",
	}
	for _, setup := range []func(testing.TB, bool, map[string]string) *executetest.Bundle{executetest.Setup, executetest.SetupPostgres} {
		b := setup(t, false, files)
		t.Run(b.Backends, func(t *testing.T) {
			pr := b.Load(t)
			tpls, err := execute.Templates(b.Ctx, b.Parser, b.Engine, pr.Snapshots)
			require.NoError(t, err)
			ordered := []*execute.Template{tpls["demo.a"], tpls["demo.b"], tpls["other.c"]}
			eng := &executetest.CountingEngine{Engine: b.Engine}
			exec := at(2024, 1, 3, 0)
			x := &execute.Executor{Engine: eng, Store: b.Store, ProjectDir: b.Dir, Logger: quiet, Clock: clockwork.NewFakeClockAt(exec)}

			require.NoError(t, x.PrepareAll(b.Ctx, ordered, exec))
			require.Equal(t, int32(1), eng.Many.Load(), "one question for the whole set")
			require.Equal(t, int32(0), eng.One.Load(), "no question per model")
			for _, tpl := range ordered {
				ok, err := b.Engine.TableExists(b.Ctx, tpl.Table)
				require.NoError(t, err)
				require.True(t, ok, "%s", tpl.Table)
			}
			cols, err := b.Engine.Columns(b.Ctx, tpls["other.c"].Table)
			require.NoError(t, err)
			require.Len(t, cols, 2, "made from its parent, a view")

			a := tpls["demo.a"].Table
			_, err = b.Engine.InsertRows(b.Ctx, warehouse.InsertRowsParams{Table: a, Columns: []string{"id"}, Rows: [][]any{{int64(7)}}})
			require.NoError(t, err)
			c := tpls["other.c"].Table
			require.NoError(t, b.Engine.DropTable(b.Ctx, c))

			require.NoError(t, x.PrepareAll(b.Ctx, ordered, exec))
			require.Equal(t, int32(2), eng.Many.Load())
			require.Equal(t, int32(0), eng.One.Load())
			ok, err := b.Engine.TableExists(b.Ctx, c)
			require.NoError(t, err)
			require.True(t, ok, "the dropped table is made again")
			require.Equal(t, int64(1), b.Count(t, b.Engine.QuoteTable(a)), "an existing table is left alone")
		})
	}
}

// racedEngine is a real engine on which another apply creates tables[0]
// right after TablesExist answered that it is missing.
type racedEngine struct{ warehouse.Engine }

func (r racedEngine) TablesExist(ctx context.Context, ts []warehouse.Table) ([]bool, error) {
	found, err := r.Engine.TablesExist(ctx, ts)
	if err != nil || found[0] {
		return found, err
	}
	if err := r.Engine.CreateSchema(ctx, ts[0].Schema); err != nil {
		return nil, err
	}
	return found, r.Engine.CreateTableAs(ctx, warehouse.CreateTableAsParams{Table: ts[0], Query: "SELECT 1 AS id", WithData: true})
}

// Scenario: two applies of plans that share a version create its table at
// once; the one that finds it made between its question and its CREATE
// takes it as done (as Prepare would have found it), and goes on.
func TestPrepareAllTakesATableMadeMeanwhile(t *testing.T) {
	t.Parallel()
	files := map[string]string{
		"models/a.sql": "MODEL (name demo.a, kind FULL, cron '@daily', start '2024-01-01');\nSELECT 1 AS id",
		"models/b.sql": "MODEL (name demo.b, kind FULL, cron '@daily', start '2024-01-01');\nSELECT id FROM demo.a",
	}
	for _, setup := range []func(testing.TB, bool, map[string]string) *executetest.Bundle{executetest.Setup, executetest.SetupPostgres} {
		b := setup(t, false, files)
		t.Run(b.Backends, func(t *testing.T) {
			pr := b.Load(t)
			tpls, err := execute.Templates(b.Ctx, b.Parser, b.Engine, pr.Snapshots)
			require.NoError(t, err)
			exec := at(2024, 1, 3, 0)
			x := &execute.Executor{Engine: racedEngine{b.Engine}, Store: b.Store, ProjectDir: b.Dir, Logger: quiet, Clock: clockwork.NewFakeClockAt(exec)}
			require.NoError(t, x.PrepareAll(b.Ctx, []*execute.Template{tpls["demo.a"], tpls["demo.b"]}, exec))
			require.Equal(t, int64(1), b.Count(t, b.Engine.QuoteTable(tpls["demo.a"].Table)), "the other apply's table is kept")
			ok, err := b.Engine.TableExists(b.Ctx, tpls["demo.b"].Table)
			require.NoError(t, err)
			require.True(t, ok)
		})
	}
}

// Scenario: a deploy prepares three models whose tables exist but for one,
// dropped behind gapless's back. PrepareSnapshots asks for the template
// (which parses the query) of that one only, and makes it again; on a first
// deploy it asks for every one, in order, and on a repeat for none.
func TestPrepareSnapshotsBuildsTemplatesOnlyForMissingObjects(t *testing.T) {
	t.Parallel()
	files := map[string]string{
		"models/a.sql": "MODEL (name demo.a, kind FULL, cron '@daily', start '2024-01-01');\nSELECT 1 AS id",
		"models/b.sql": "MODEL (name demo.b, kind VIEW, cron '@daily', start '2024-01-01');\nSELECT id FROM demo.a",
		"models/c.sql": "MODEL (name other.c, kind FULL, cron '@daily', start '2024-01-01');\nSELECT id, id + 1 AS next FROM demo.b",
	}
	for _, setup := range []func(testing.TB, bool, map[string]string) *executetest.Bundle{executetest.Setup, executetest.SetupPostgres} {
		b := setup(t, false, files)
		t.Run(b.Backends, func(t *testing.T) {
			pr := b.Load(t)
			snaps := []*snapshot.Snapshot{pr.Snapshots["demo.a"], pr.Snapshots["demo.b"], pr.Snapshots["other.c"]}
			var asked []string
			template := func(s *snapshot.Snapshot) (*execute.Template, error) {
				asked = append(asked, s.Name)
				return execute.TemplateOf(b.Ctx, b.Parser, b.Engine, s, pr.Snapshots)
			}
			exec := at(2024, 1, 3, 0)
			x := &execute.Executor{Engine: b.Engine, Store: b.Store, ProjectDir: b.Dir, Logger: quiet, Clock: clockwork.NewFakeClockAt(exec)}

			require.NoError(t, x.PrepareSnapshots(b.Ctx, snaps, template, exec))
			require.Equal(t, []string{"demo.a", "demo.b", "other.c"}, asked, "a first deploy builds every template, parents first")

			asked = nil
			require.NoError(t, x.PrepareSnapshots(b.Ctx, snaps, template, exec))
			require.Empty(t, asked, "every object exists: no template is built")

			c := execute.PhysicalTable(pr.Snapshots["other.c"])
			require.NoError(t, b.Engine.DropTable(b.Ctx, c))
			require.NoError(t, x.PrepareSnapshots(b.Ctx, snaps, template, exec))
			require.Equal(t, []string{"other.c"}, asked, "only the dropped table's template is built")
			ok, err := b.Engine.TableExists(b.Ctx, c)
			require.NoError(t, err)
			require.True(t, ok, "the dropped table is made again")
		})
	}
}

// Scenario: a deploy's create stage hands a FULL model's template the
// columns the check derived, and DuckDB makes the empty table from them
// without binding the query again. Were they wrong (here a BIGINT where
// the query gives an INTEGER), the first build still leaves the table
// with the query's columns and rows. An incremental table, whose batches
// insert by name, is made from its query whatever its template says.
func TestFullTableIsMadeFromTheCheckedColumns(t *testing.T) {
	t.Parallel()
	b := executetest.Setup(t, false, map[string]string{
		"models/a.sql": "MODEL (name demo.a, kind FULL, cron '@daily', start '2024-01-01');\nSELECT 1 AS id",
		"models/i.sql": "MODEL (name demo.i, kind INCREMENTAL_BY_TIME_RANGE (time_column ts), cron '@daily', start '2024-01-01');\nSELECT TIMESTAMP '2024-01-01' AS ts, 1 AS id",
	})
	pr := b.Load(t)
	tpls, err := execute.Templates(b.Ctx, b.Parser, b.Engine, pr.Snapshots)
	require.NoError(t, err)
	full, inc := tpls["demo.a"], tpls["demo.i"]
	full.Columns = []warehouse.Column{{Name: "id", Type: "BIGINT"}}
	inc.Columns = []warehouse.Column{{Name: "ts", Type: "TIMESTAMP"}, {Name: "id", Type: "BIGINT"}}
	exec := at(2024, 1, 3, 0)
	x := &execute.Executor{Engine: b.Engine, Store: b.Store, ProjectDir: b.Dir, Logger: quiet, Clock: clockwork.NewFakeClockAt(exec)}
	require.NoError(t, x.PrepareAll(b.Ctx, []*execute.Template{full, inc}, exec))
	cols := func(tbl warehouse.Table) []warehouse.Column {
		c, err := b.Engine.Columns(b.Ctx, tbl)
		require.NoError(t, err)
		return c
	}
	require.Equal(t, []warehouse.Column{{Name: "id", Type: "BIGINT"}}, cols(full.Table), "made from the checked columns")
	require.Equal(t, []warehouse.Column{{Name: "ts", Type: "TIMESTAMP"}, {Name: "id", Type: "INTEGER"}}, cols(inc.Table), "made from its query")

	res, err := x.Execute(b.Ctx, execute.Work{Template: full, Whole: true, Execution: exec, SkipCovered: true})
	require.NoError(t, err)
	require.EqualValues(t, 1, res.Rows)
	require.Equal(t, []warehouse.Column{{Name: "id", Type: "INTEGER"}}, cols(full.Table), "the first build gives the table the query's columns")
}
