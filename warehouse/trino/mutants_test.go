package trino_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/warehouse"
	"github.com/gapless-dev/gapless/warehouse/trino"
	"github.com/gapless-dev/gapless/warehouse/warehousetest"
)

// mutantEnv makes TestMutantChild and TestMutantOwnChild run against the
// mutant it names; catalogEnv is the catalog (of the parent's pool) the
// child uses.
const (
	mutantEnv  = "GAPLESS_TRINO_TEST_MUTANT"
	catalogEnv = "GAPLESS_TRINO_TEST_MUTANT_CATALOG"
)

// mutants each break one promise of the engine the way a plausible Trino
// implementation would, and name the test that must catch it: a scenario
// of the conformance suite (Group/Scenario) or, for a promise the suite
// cannot see, one of this package's (own:Name).
var mutants = []warehousetest.Mutant{
	{Name: "insert-without-delete", Test: "InsertInterval/ReinsertLeavesOneCopy"},
	{Name: "insert-without-range-filter", Test: "InsertInterval/InsertsOnlyRowsInRange"},
	{Name: "insert-delete-then-insert", Test: "InsertInterval/FailingQueryKeepsPreviousRows"},
	{Name: "insert-counts-merge-update-count", Test: "InsertInterval/ReinsertLeavesOneCopy"},
	{Name: "writers-without-turns-or-retries", Test: "Concurrency/InsertIntervalDifferentIntervals"},
	{Name: "merge-appends", Test: "MergeByKey/UpdatesAndInserts"},
	{Name: "merge-null-unsafe", Test: "MergeByKey/NullKeyMatchesNullKey"},
	{Name: "merge-without-duplicate-check", Test: "own:NewKeyTwiceIsRefused"},
	{Name: "replace-drop-then-create", Test: "ReplaceTable/FailedSwapKeepsOldTable"},
	{Name: "views-unchecked", Test: "Views/AllOrNothing"},
}

// Scenario: the suite and this package's tests are the contract, so they
// must fail engines that break it. Each mutant runs its test in a child
// process, on a catalog of the parent's pool, which must fail on exactly
// that test.
func TestSuiteCatchesMutants(t *testing.T) {
	t.Parallel()
	warehousetest.CatchMutants(t, warehousetest.MutantRun{Env: mutantEnv, Child: "TestMutantChild", OwnChild: "TestMutantOwnChild",
		Environ: func(t *testing.T) []string { return []string{catalogEnv + "=" + pooledCatalog(t)} }}, mutants)
}

// mutantEngine opens the mutant the environment names on the parent's
// catalog, closed when t ends.
func mutantEngine(t *testing.T) warehouse.Engine {
	e, err := trino.Open(t.Context(), os.Getenv(catalogEnv))
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.Close() })
	return &mutant{Engine: e, kind: os.Getenv(mutantEnv)}
}

// TestMutantChild runs the suite against a mutant, only as a child of
// TestSuiteCatchesMutants.
func TestMutantChild(t *testing.T) {
	if os.Getenv(mutantEnv) == "" {
		return // only meaningful as a child process of TestSuiteCatchesMutants; nothing to check here
	}
	warehousetest.Run(t, mutantEngine)
}

// TestMutantOwnChild runs this package's engine-agnostic checks against a
// mutant, only as a child of TestSuiteCatchesMutants.
func TestMutantOwnChild(t *testing.T) {
	if os.Getenv(mutantEnv) == "" {
		return // only meaningful as a child process of TestSuiteCatchesMutants; nothing to check here
	}
	t.Run("NewKeyTwiceIsRefused", func(t *testing.T) { checkNewKeyTwiceIsRefused(t, mutantEngine(t)) })
}

// mutant is a Trino engine with one method rewritten wrongly, through the
// real engine's Query (which runs any one statement).
type mutant struct {
	*trino.Engine
	kind string
}

// wrap reports a mutant's failure as the contract asks, so that a mutant
// fails the tests only for the promise it breaks.
func wrap(t warehouse.Table, err error) error {
	if err == nil || errors.As(err, new(*warehouse.Error)) {
		return err
	}
	return &warehouse.Error{Op: "mutant", Object: t.String(), SQL: "(mutant)", Err: err}
}

// exec runs one statement and returns its update count (the one value a
// DML statement returns).
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

// columns returns t's quoted column names, and a NULL for each.
func (m *mutant) columns(ctx context.Context, t warehouse.Table) (names []string, nulls []string, err error) {
	cols, err := m.Columns(ctx, t)
	if err != nil {
		return nil, nil, err
	}
	for _, c := range cols {
		names = append(names, m.QuoteIdent(c.Name))
		nulls = append(nulls, "NULL")
	}
	return names, nulls, nil
}

func prefixed(prefix string, names []string) string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = prefix + n
	}
	return strings.Join(out, ", ")
}

func (m *mutant) InsertInterval(ctx context.Context, p warehouse.InsertIntervalParams) (int64, error) {
	n, err := m.insertInterval(ctx, p)
	return n, wrap(p.Table, err)
}

func (m *mutant) insertInterval(ctx context.Context, p warehouse.InsertIntervalParams) (int64, error) {
	names, nulls, err := m.columns(ctx, p.Table)
	if err != nil {
		return 0, err
	}
	t, tc, cols := m.QuoteTable(p.Table), m.QuoteIdent(p.TimeColumn), strings.Join(names, ", ")
	inRange := " WHERE " + tc + " >= $1 AND " + tc + " < $2"
	del := "DELETE FROM " + t + inRange
	ins := "INSERT INTO " + t + " (" + cols + ") SELECT " + cols + " FROM (\n" + p.Query + "\n) AS q"
	merge := "MERGE INTO " + t + " AS t USING (SELECT " + prefixed("q.", names) + ", false AS gapless_m FROM (\n" + p.Query + "\n) AS q" +
		" WHERE q." + tc + " >= $1 AND q." + tc + " < $2 UNION ALL SELECT " + strings.Join(nulls, ", ") + ", true) AS s" +
		" ON s.gapless_m AND t." + tc + " >= $1 AND t." + tc + " < $2 WHEN MATCHED THEN DELETE" +
		" WHEN NOT MATCHED AND NOT s.gapless_m THEN INSERT (" + cols + ") VALUES (" + prefixed("s.", names) + ")"
	switch m.kind {
	case "insert-without-delete":
		return m.exec(ctx, ins+inRange, p.Start, p.End)
	case "insert-without-range-filter":
		if _, err := m.exec(ctx, del, p.Start, p.End); err != nil {
			return 0, err
		}
		return m.exec(ctx, ins)
	case "insert-delete-then-insert":
		// Two statements, two commits: a failing query leaves the
		// interval empty.
		if _, err := m.exec(ctx, del, p.Start, p.End); err != nil {
			return 0, err
		}
		return m.exec(ctx, ins+inRange, p.Start, p.End)
	case "insert-counts-merge-update-count":
		// The right statement, but its update count (deleted plus
		// inserted rows) returned as the rows inserted.
		return m.exec(ctx, merge, p.Start, p.End)
	case "writers-without-turns-or-retries":
		// The right statement, sent at once by every writer, and a
		// refused commit returned as the error.
		return m.exec(ctx, merge, p.Start, p.End)
	}
	return m.Engine.InsertInterval(ctx, p)
}

func (m *mutant) MergeByKey(ctx context.Context, p warehouse.MergeParams) (int64, error) {
	n, err := m.mergeByKey(ctx, p)
	return n, wrap(p.Table, err)
}

func (m *mutant) mergeByKey(ctx context.Context, p warehouse.MergeParams) (int64, error) {
	names, _, err := m.columns(ctx, p.Table)
	if err != nil {
		return 0, err
	}
	t, cols := m.QuoteTable(p.Table), strings.Join(names, ", ")
	merge := func(eq string) string {
		on := make([]string, len(p.Key))
		for i, k := range p.Key {
			on[i] = "t." + m.QuoteIdent(k) + eq + "s." + m.QuoteIdent(k)
		}
		sets := make([]string, len(names))
		for i, n := range names {
			sets[i] = n + " = s." + n
		}
		return "MERGE INTO " + t + " AS t USING (SELECT " + prefixed("q.", names) + " FROM (\n" + p.Query + "\n) AS q) AS s ON " +
			strings.Join(on, " AND ") + " WHEN MATCHED THEN UPDATE SET " + strings.Join(sets, ", ") +
			" WHEN NOT MATCHED THEN INSERT (" + cols + ") VALUES (" + prefixed("s.", names) + ")"
	}
	switch m.kind {
	case "merge-appends":
		return m.exec(ctx, "INSERT INTO "+t+" ("+cols+") SELECT "+cols+" FROM (\n"+p.Query+"\n) AS q")
	case "merge-null-unsafe":
		return m.exec(ctx, merge(" = "))
	case "merge-without-duplicate-check":
		return m.exec(ctx, merge(" IS NOT DISTINCT FROM "))
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

func (m *mutant) CreateOrReplaceViews(ctx context.Context, views []warehouse.ViewParams) error {
	if m.kind == "views-unchecked" {
		// One at a time in order, but nothing checked first: a bad
		// query late in the batch fails after the views before it
		// changed.
		for _, v := range views {
			if err := m.CreateOrReplaceView(ctx, v); err != nil {
				return err
			}
		}
		return nil
	}
	return m.Engine.CreateOrReplaceViews(ctx, views)
}
