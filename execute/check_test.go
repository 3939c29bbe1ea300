package execute_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/execute"
	"github.com/gapless-dev/gapless/execute/executetest"
	"github.com/gapless-dev/gapless/model"
	"github.com/gapless-dev/gapless/plan"
	"github.com/gapless-dev/gapless/project"
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

// onlyDescribe hides an engine's DescribeAll: Check then describes one
// model at a time.
type onlyDescribe struct{ warehouse.Engine }

// batchCounter counts DescribeAll's batches and queries.
type batchCounter struct {
	warehouse.Engine
	b              warehouse.BatchDescriber
	batches, total int
}

func (c *batchCounter) DescribeAll(ctx context.Context, ps []warehouse.DescribeParams) ([]warehouse.Described, error) {
	c.batches++
	c.total += len(ps)
	return c.b.DescribeAll(ctx, ps)
}

// Scenario: on DuckDB the check describes the models a layer at a time
// (warehouse.BatchDescriber), not one by one. A project with three layers
// and several bad models: a query naming an unknown column, a child of it
// (not checked: its parent's error is reported once), a time column of the
// wrong type, a second unknown column in the last layer. The batched check
// reports exactly the errors, in the same order, at the same file, line
// and column, and derives the same columns as the one-by-one check, in
// one batch per layer.
func TestCheckInBatchesReportsEveryBadModel(t *testing.T) {
	t.Parallel()
	files := map[string]string{
		"models/a.sql":  "MODEL (name demo.a, kind FULL, cron '@daily', start '2024-01-01');\nSELECT 1 AS id, DATE '2024-01-01' AS d",
		"models/b1.sql": "MODEL (name demo.b1, kind FULL, cron '@daily', start '2024-01-01');\nSELECT id,\n  nope FROM demo.a",
		"models/b2.sql": "MODEL (name demo.b2, kind INCREMENTAL_BY_TIME_RANGE (time_column id), cron '@daily', start '2024-01-01');\nSELECT id FROM demo.a WHERE d BETWEEN @start_ds AND @end_ds",
		"models/b3.sql": "MODEL (name demo.b3, kind FULL, cron '@daily', start '2024-01-01');\nSELECT id + 1 AS id, d FROM demo.a",
		"models/c1.sql": "MODEL (name demo.c1, kind FULL, cron '@daily', start '2024-01-01');\nSELECT * FROM demo.b1",
		"models/c3.sql": "MODEL (name demo.c3, kind FULL, cron '@daily', start '2024-01-01');\nSELECT id, dd FROM demo.b3",
		"models/c4.sql": "MODEL (name demo.c4, kind VIEW, cron '@daily', start '2024-01-01');\nSELECT x.id, y.d FROM demo.b3 AS x JOIN demo.a AS y USING (id)",
	}
	b := executetest.Setup(t, false, files)
	p := b.Plan(t, "p1", plan.Prod, at(2024, 1, 3, 0), plan.Options{})
	check := map[string]bool{}
	for _, s := range p.Snapshots {
		check[s.Name] = true
	}
	bd, ok := b.Engine.(warehouse.BatchDescriber)
	require.True(t, ok, "DuckDB describes in batches")
	batched := &batchCounter{Engine: b.Engine, b: bd}
	run := func(e warehouse.Engine) (map[string][]warehouse.Column, project.Errors) {
		cols, err := execute.Check(b.Ctx, execute.CheckParams{Engine: e, Parser: b.Parser, ProjectDir: b.Dir,
			Snapshots: p.Snapshots, Check: check, Execution: p.ExecutionTime})
		var errs project.Errors
		require.ErrorAs(t, err, &errs)
		return cols, errs
	}
	oneCols, oneErrs := run(onlyDescribe{b.Engine})
	cols, errs := run(batched)
	require.Equal(t, 3, batched.batches, "one batch per layer")
	require.Equal(t, 6, batched.total, "each query described once; c1 (its parent failed) not at all")
	require.Len(t, errs, 3)
	require.Equal(t, len(oneErrs), len(errs))
	for i := range errs {
		var me, one *model.Error
		require.ErrorAs(t, errs[i], &me)
		require.ErrorAs(t, oneErrs[i], &one)
		require.Equal(t, one.Pos, me.Pos, "error %d", i)
		require.Equal(t, one.Msg, me.Msg, "error %d", i)
	}
	var first *model.Error
	require.ErrorAs(t, errs[0], &first)
	require.Contains(t, first.Msg, "model demo.b1: unknown column nope")
	require.True(t, strings.HasSuffix(first.Pos.File, "b1.sql"), first.Pos.File)
	require.Equal(t, 3, first.Pos.Line, "at its use in the file")
	require.Equal(t, oneCols, cols)
	require.Equal(t, []string{"id", "d"}, names(cols["demo.c4"]))
}
