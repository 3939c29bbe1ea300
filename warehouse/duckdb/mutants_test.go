package duckdb_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/gapless-dev/gapless/warehouse"
	"github.com/gapless-dev/gapless/warehouse/duckdb"
	"github.com/gapless-dev/gapless/warehouse/warehousetest"
)

// mutantEnv makes TestMutantChild run the conformance suite against the
// mutant it names.
const mutantEnv = "GAPLESS_DUCKDB_TEST_MUTANT"

// mutants each break one promise of the engine the way a plausible
// implementation would, and name the scenario that must catch it.
var mutants = []warehousetest.Mutant{
	{Name: "insert-without-delete", Test: "InsertInterval/ReinsertLeavesOneCopy"},
	{Name: "insert-without-range-filter", Test: "InsertInterval/InsertsOnlyRowsInRange"},
	{Name: "insert-outside-transaction", Test: "InsertInterval/FailingQueryKeepsPreviousRows"},
	{Name: "merge-appends", Test: "MergeByKey/UpdatesAndInserts"},
	{Name: "merge-null-unsafe", Test: "MergeByKey/NullKeyMatchesNullKey"},
	{Name: "replace-drop-then-create", Test: "ReplaceTable/FailedSwapKeepsOldTable"},
	{Name: "swap-without-fence", Test: "Ingest/FenceRefusesRetiredGeneration"},
	{Name: "swap-without-catch-up", Test: "Ingest/SwapRefusesWhenBehind"},
	{Name: "markers-without-generation", Test: "Ingest/SwapRefusesWhenBehind"},
	{Name: "swap-serving-outside-transaction", Test: "Ingest/SwapIsAtomic"},
	{Name: "drop-generation-without-fence", Test: "DropGeneration/DropsRetiredKeepsFenced"},
}

// Scenario: the suite is the contract, so it must fail engines that break
// it. Each mutant runs its scenario in a child process, which must fail
// on exactly that scenario.
func TestSuiteCatchesMutants(t *testing.T) {
	t.Parallel()
	warehousetest.CatchMutants(t, warehousetest.MutantRun{Env: mutantEnv, Child: "TestMutantChild"}, mutants)
}

// TestMutantChild runs the suite against a mutant, only as a child of
// TestSuiteCatchesMutants.
func TestMutantChild(t *testing.T) {
	kind := os.Getenv(mutantEnv)
	if kind == "" {
		return // only meaningful as a child process of TestSuiteCatchesMutants; nothing to check here
	}
	warehousetest.Run(t, func(t *testing.T) warehouse.Engine {
		return &mutant{Engine: memoryEngine(t), kind: kind}
	})
}

// mutant is a DuckDB engine with one method rewritten wrongly, through the
// real engine's Query (which runs any single statement).
type mutant struct {
	*duckdb.Engine
	kind string
}

func (m *mutant) exec(ctx context.Context, sql string, args ...any) (int64, error) {
	res, err := m.Query(ctx, sql, args...)
	if err != nil {
		return 0, err
	}
	if len(res.Rows) == 1 && len(res.Rows[0]) == 1 {
		if n, ok := res.Rows[0][0].(int64); ok {
			return n, nil
		}
	}
	return 0, nil
}

func (m *mutant) columnList(ctx context.Context, t warehouse.Table) (string, error) {
	cols, err := m.Columns(ctx, t)
	if err != nil {
		return "", err
	}
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = m.QuoteIdent(c.Name)
	}
	return strings.Join(names, ", "), nil
}

// wrap reports a mutant's failure as the contract asks, so that a mutant
// fails the suite only for the promise it breaks.
func wrap(t warehouse.Table, err error) error {
	if err == nil {
		return nil
	}
	return &warehouse.Error{Op: "mutant", Object: t.String(), SQL: "(mutant)", Err: err}
}

func (m *mutant) InsertInterval(ctx context.Context, p warehouse.InsertIntervalParams) (int64, error) {
	n, err := m.insertInterval(ctx, p)
	return n, wrap(p.Table, err)
}

func (m *mutant) insertInterval(ctx context.Context, p warehouse.InsertIntervalParams) (int64, error) {
	cols, err := m.columnList(ctx, p.Table)
	if err != nil {
		return 0, err
	}
	tc := m.QuoteIdent(p.TimeColumn)
	del := "DELETE FROM " + m.QuoteTable(p.Table) + " WHERE " + tc + " >= $1 AND " + tc + " < $2"
	ins := "INSERT INTO " + m.QuoteTable(p.Table) + " (" + cols + ") SELECT " + cols + " FROM (\n" + p.Query + "\n) AS q"
	inRange := " WHERE " + tc + " >= $1 AND " + tc + " < $2"
	switch m.kind {
	case "insert-without-delete":
		return m.exec(ctx, ins+inRange, p.Start, p.End)
	case "insert-without-range-filter":
		if _, err := m.exec(ctx, del, p.Start, p.End); err != nil {
			return 0, err
		}
		return m.exec(ctx, ins)
	case "insert-outside-transaction":
		if _, err := m.exec(ctx, del, p.Start, p.End); err != nil {
			return 0, err
		}
		return m.exec(ctx, ins+inRange, p.Start, p.End)
	}
	return m.Engine.InsertInterval(ctx, p)
}

func (m *mutant) MergeByKey(ctx context.Context, p warehouse.MergeParams) (int64, error) {
	n, err := m.mergeByKey(ctx, p)
	return n, wrap(p.Table, err)
}

func (m *mutant) mergeByKey(ctx context.Context, p warehouse.MergeParams) (int64, error) {
	cols, err := m.columnList(ctx, p.Table)
	if err != nil {
		return 0, err
	}
	switch m.kind {
	case "merge-appends":
		return m.exec(ctx, "INSERT INTO "+m.QuoteTable(p.Table)+" ("+cols+") SELECT "+cols+" FROM (\n"+p.Query+"\n) AS q")
	case "merge-null-unsafe":
		match := make([]string, len(p.Key))
		for i, k := range p.Key {
			match[i] = "t." + m.QuoteIdent(k) + " = q." + m.QuoteIdent(k)
		}
		if _, err := m.exec(ctx, "DELETE FROM "+m.QuoteTable(p.Table)+" AS t WHERE EXISTS (SELECT 1 FROM (\n"+p.Query+"\n) AS q WHERE "+strings.Join(match, " AND ")+")"); err != nil {
			return 0, err
		}
		return m.exec(ctx, "INSERT INTO "+m.QuoteTable(p.Table)+" ("+cols+") SELECT "+cols+" FROM (\n"+p.Query+"\n) AS q")
	}
	return m.Engine.MergeByKey(ctx, p)
}

func (m *mutant) ReplaceTable(ctx context.Context, p warehouse.ReplaceTableParams) error {
	if m.kind == "replace-drop-then-create" {
		if err := m.DropTable(ctx, p.Table); err != nil {
			return err
		}
		return m.CreateTableAs(ctx, warehouse.CreateTableAsParams{Table: p.Table, Query: p.Query, WithData: true})
	}
	return m.Engine.ReplaceTable(ctx, p)
}

func (m *mutant) DropGeneration(ctx context.Context, p warehouse.DropGenerationParams) (warehouse.DropGenerationResult, error) {
	if m.kind != "drop-generation-without-fence" {
		return m.Engine.DropGeneration(ctx, p)
	}
	// A drop that does not look at the fence: the table and the markers
	// go, whichever generation it is.
	found, err := m.TablesExist(ctx, []warehouse.Table{p.Table})
	if err != nil {
		return warehouse.DropGenerationResult{}, wrap(p.Table, err)
	}
	if found[0] {
		if err := m.DropTable(ctx, p.Table); err != nil {
			return warehouse.DropGenerationResult{}, wrap(p.Table, err)
		}
	}
	n, err := m.exec(ctx, "DELETE FROM gapless__ingest.markers WHERE source = $1 AND generation = $2", p.Source, p.Generation)
	return warehouse.DropGenerationResult{TableDropped: found[0], Markers: n}, wrap(p.Table, err)
}

func (m *mutant) ApplyIngest(ctx context.Context, p warehouse.IngestParams) (warehouse.IngestResult, error) {
	const markers = "gapless__ingest.markers"
	switch {
	case m.kind == "swap-without-fence" && p.Step == warehouse.StepSwap:
		// A swap that does not check the fence: as if it held it.
		if _, err := m.exec(ctx, "UPDATE gapless__ingest.fences SET planned_generation = $2 WHERE source = $1", p.Source, p.Generation); err != nil {
			return warehouse.IngestResult{}, wrap(p.Table, err)
		}
	case m.kind == "swap-without-catch-up" && p.Step == warehouse.StepSwap:
		// A swap that does not compare the generations' batches: as if the
		// new one covered every batch.
		if _, err := m.exec(ctx, "INSERT INTO "+markers+" VALUES ($1, $2, 'covered', 1000000, 0, now()) ON CONFLICT DO NOTHING", p.Source, p.Generation); err != nil {
			return warehouse.IngestResult{}, wrap(p.Table, err)
		}
	case m.kind == "swap-serving-outside-transaction" && p.Step == warehouse.StepSwap:
		// The serving generation moved in a transaction of its own, before
		// the view.
		if _, err := m.exec(ctx, "UPDATE gapless__ingest.fences SET serving_generation = $2 WHERE source = $1 AND planned_generation = $2", p.Source, p.Generation); err != nil {
			return warehouse.IngestResult{}, wrap(p.Table, err)
		}
	case m.kind == "markers-without-generation" && p.Step != warehouse.StepFence:
		// Markers keyed (source, kind, index): a step another generation
		// applied counts as applied.
		kind, idx := p.Marker()
		res, err := m.Query(ctx, "SELECT count(*) FROM "+markers+" WHERE source = $1 AND kind = $2 AND idx = $3", p.Source, kind, idx)
		if err == nil && len(res.Rows) == 1 && res.Rows[0][0] != int64(0) {
			return warehouse.IngestResult{}, wrap(p.Table, warehouse.ErrAlreadyApplied)
		}
	}
	return m.Engine.ApplyIngest(ctx, p)
}
