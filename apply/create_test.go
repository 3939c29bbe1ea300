package apply_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/apply"
	"github.com/gapless-dev/gapless/execute"
	"github.com/gapless-dev/gapless/execute/executetest"
	"github.com/gapless-dev/gapless/plan"
	"github.com/gapless-dev/gapless/warehouse"
	"github.com/gapless-dev/gapless/warehouse/duckdb"
)

// Scenario: prod is deployed; someone drops the physical table of an
// unchanged model behind gapless's back. The next deploy, which changes
// another model, checks every table of the plan (also those state records
// as built) and makes the dropped one again (on DuckDB, prod's view over
// it then answers again).
func TestDeployRemakesATableDroppedBehindItsBack(t *testing.T) {
	t.Parallel()
	files := func(v string) map[string]string {
		return map[string]string{
			"models/kept.sql":    "MODEL (name demo.kept, kind FULL, cron '@daily', start '2024-01-01');\nSELECT 1 AS id",
			"models/changed.sql": "MODEL (name demo.changed, kind FULL, cron '@daily', start '2024-01-01');\nSELECT " + v + " AS id",
		}
	}
	for _, setup := range []func(testing.TB, bool, map[string]string) *executetest.Bundle{executetest.Setup, executetest.SetupPostgres} {
		b := setup(t, false, files("1"))
		t.Run(b.Backends, func(t *testing.T) {
			exec := at(2024, 1, 3, 0)
			_, err := doApply(b, b.Plan(t, "p1", plan.Prod, exec, plan.Options{}), exec, apply.Hooks{}, nil)
			require.NoError(t, err)
			served, _ := b.Served(t, plan.Prod)
			kept := execute.PhysicalTable(served["demo.kept"])
			// PostgreSQL refuses while prod's view depends on it; CASCADE
			// drops the view there too.
			_, err = b.Engine.Query(b.Ctx, "DROP TABLE "+b.Engine.QuoteTable(kept)+" CASCADE")
			require.NoError(t, err)

			executetest.WriteFiles(t, b.Dir, files("2"))
			_, err = doApply(b, b.Plan(t, "p2", plan.Prod, exec, plan.Options{}), exec, apply.Hooks{}, nil)
			require.NoError(t, err)
			ok, err := b.Engine.TableExists(b.Ctx, kept)
			require.NoError(t, err)
			require.True(t, ok, "the dropped table is made again")
			require.Equal(t, int64(0), b.Count(t, b.Engine.QuoteTable(kept)), "made empty: the recorded day is not rebuilt")
			if b.Backends == "duckdb+sqlite" {
				// DuckDB's view binds by name, so it survived the drop
				// and answers again.
				view := execute.ViewTable(served["demo.kept"], plan.Prod)
				require.Equal(t, int64(0), b.Count(t, b.Engine.QuoteTable(view)), "prod's view answers")
			}
		})
	}
}

// Scenario: p1 is replaced by a breaking change p2; someone then drops one
// of p1's physical tables. A rollback to p1 is refused before it writes
// anything, naming the model, its version and the table that is gone (one
// existence question for all of p1's tables), and prod still serves p2.
func TestRollbackRefusesADroppedTableByName(t *testing.T) {
	t.Parallel()
	files := func(v string) map[string]string {
		return map[string]string{
			"models/a.sql": "MODEL (name demo.a, kind FULL, cron '@daily', start '2024-01-01');\nSELECT " + v + " AS id",
			"models/b.sql": "MODEL (name demo.b, kind FULL, cron '@daily', start '2024-01-01');\nSELECT id FROM demo.a",
		}
	}
	for _, setup := range []func(testing.TB, bool, map[string]string) *executetest.Bundle{executetest.Setup, executetest.SetupPostgres} {
		b := setup(t, false, files("1"))
		t.Run(b.Backends, func(t *testing.T) {
			exec := at(2024, 1, 3, 0)
			_, err := doApply(b, b.Plan(t, "p1", plan.Prod, exec, plan.Options{}), exec, apply.Hooks{}, nil)
			require.NoError(t, err)
			p1, _ := b.Served(t, plan.Prod)
			executetest.WriteFiles(t, b.Dir, files("2"))
			_, err = doApply(b, b.Plan(t, "p2", plan.Prod, exec, plan.Options{}), exec, apply.Hooks{}, nil)
			require.NoError(t, err)
			gone := execute.PhysicalTable(p1["demo.b"])
			require.NoError(t, b.Engine.DropTable(b.Ctx, gone))

			_, err = apply.RollbackPlan(b.Ctx, apply.RollbackParams{Store: b.Store, Engine: b.Engine, Environment: plan.Prod,
				ID: "r1", ExecutionTime: exec, Now: exec})
			var dropped *apply.DroppedError
			require.ErrorAs(t, err, &dropped)
			require.Equal(t, []apply.DroppedTable{{Model: "demo.b", Version: p1["demo.b"].Version, Table: gone}}, dropped.Tables)
			_, env := b.Served(t, plan.Prod)
			require.Equal(t, "p2", env.PlanID)
		})
	}
}

// hintRecorder is a real DuckDB engine that records the column hints its
// CreateTableAs calls get, by table name.
type hintRecorder struct {
	*duckdb.Engine
	mu    sync.Mutex
	hints map[string][]warehouse.Column
}

func (h *hintRecorder) CreateTableAs(ctx context.Context, p warehouse.CreateTableAsParams) error {
	h.mu.Lock()
	h.hints[p.Table.Name] = p.Columns
	h.mu.Unlock()
	return h.Engine.CreateTableAs(ctx, p)
}

// Scenario: a first deploy's create stage makes a FULL model's empty table
// from the columns the models' check derived (the warehouse need not bind
// the query again), and an incremental model's from its query; the deploy
// ends as ever, each table with its query's columns and rows.
func TestCreateStagePassesTheCheckedColumnsOfFullModels(t *testing.T) {
	t.Parallel()
	b := executetest.Setup(t, false, map[string]string{
		"models/a.sql": "MODEL (name demo.a, kind FULL, cron '@daily', start '2024-01-01');\nSELECT 1 AS id, 'x' AS v",
		"models/i.sql": "MODEL (name demo.i, kind INCREMENTAL_BY_TIME_RANGE (time_column ts), cron '@daily', start '2024-01-01');\nSELECT TIMESTAMP '2024-01-01' AS ts, id FROM demo.a",
	})
	rec := &hintRecorder{Engine: b.Engine.(*duckdb.Engine), hints: map[string][]warehouse.Column{}}
	b.Engine = rec
	exec := at(2024, 1, 3, 0)
	_, err := doApply(b, b.Plan(t, "p1", plan.Prod, exec, plan.Options{}), exec, apply.Hooks{}, nil)
	require.NoError(t, err)
	served, _ := b.Served(t, plan.Prod)
	a, i := execute.PhysicalTable(served["demo.a"]), execute.PhysicalTable(served["demo.i"])
	want := []warehouse.Column{{Name: "id", Type: "INTEGER"}, {Name: "v", Type: "VARCHAR"}}
	require.Equal(t, want, rec.hints[a.Name], "the FULL model's checked columns")
	require.Contains(t, rec.hints, i.Name)
	require.Nil(t, rec.hints[i.Name], "an incremental table is made from its query")
	cols, err := rec.Columns(b.Ctx, a)
	require.NoError(t, err)
	require.Equal(t, want, cols)
	res, err := rec.Query(b.Ctx, "SELECT count(*) FROM "+rec.QuoteTable(i))
	require.NoError(t, err)
	require.EqualValues(t, 1, res.Rows[0][0], "its one row, of its first day")
}
