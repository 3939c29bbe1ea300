package execute_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/execute"
	"github.com/gapless-dev/gapless/execute/executetest"
	"github.com/gapless-dev/gapless/plan"
	"github.com/gapless-dev/gapless/warehouse"
)

// Scenario: a deploy checks its models before it writes anything. One
// model's version is built already (its table has a column the query no
// longer names: the table, not the query, says what it holds), the others
// are not. Check asks the warehouse once for every table, not once per
// model (each question scans DuckDB's catalog), reads the built one's
// columns from its table and describes the others against stand-ins.
func TestCheckAsksTheCatalogOnce(t *testing.T) {
	t.Parallel()
	files := map[string]string{
		"models/a.sql": "MODEL (name demo.a, kind FULL, cron '@daily', start '2024-01-01');\nSELECT 1 AS id",
		"models/b.sql": "MODEL (name demo.b, kind FULL, cron '@daily', start '2024-01-01');\nSELECT * FROM demo.a",
		"models/c.sql": "MODEL (name demo.c, kind VIEW, cron '@daily', start '2024-01-01');\nSELECT * FROM demo.b",
	}
	for _, setup := range []func(testing.TB, bool, map[string]string) *executetest.Bundle{executetest.Setup, executetest.SetupPostgres} {
		b := setup(t, false, files)
		t.Run(b.Backends, func(t *testing.T) {
			p := b.Plan(t, "p1", plan.Prod, at(2024, 1, 3, 0), plan.Options{})
			byName := map[string]int{}
			for i, s := range p.Snapshots {
				byName[s.Name] = i
			}
			a := execute.PhysicalTable(p.Snapshots[byName["demo.a"]])
			require.NoError(t, b.Engine.CreateSchema(b.Ctx, a.Schema))
			require.NoError(t, b.Engine.CreateTable(b.Ctx, warehouse.CreateTableParams{Table: a,
				Columns: []warehouse.Column{{Name: "id", Type: "INTEGER"}, {Name: "extra", Type: "INTEGER"}}}))
			eng := &executetest.CountingEngine{Engine: b.Engine}
			check := map[string]bool{}
			for _, s := range p.Snapshots {
				check[s.Name] = true
			}
			cols, err := execute.Check(b.Ctx, execute.CheckParams{Engine: eng, Parser: b.Parser, ProjectDir: b.Dir,
				Snapshots: p.Snapshots, Check: check, Execution: p.ExecutionTime})
			require.NoError(t, err)
			require.Equal(t, int32(1), eng.Many.Load(), "one question for every table")
			require.Equal(t, int32(0), eng.One.Load(), "no question per model")
			for _, name := range []string{"demo.a", "demo.b", "demo.c"} {
				require.Equal(t, []string{"id", "extra"}, names(cols[name]), "%s: from the built table", name)
			}
		})
	}
}

func names(cols []warehouse.Column) []string {
	out := make([]string, len(cols))
	for i, c := range cols {
		out[i] = c.Name
	}
	return out
}
