package warehousetest_test

import (
	"context"
	"os"
	"os/exec"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/warehouse"
	"github.com/gapless-dev/gapless/warehouse/duckdb"
	"github.com/gapless-dev/gapless/warehouse/warehousetest"
)

// mutantEnv makes TestDeclarationMutantChild run the suite against the
// mutant it names.
const mutantEnv = "GAPLESS_WAREHOUSETEST_MUTANT"

// declarationMutants are DuckDB engines that declare what they do not
// keep, or keep the weaker view guarantee badly: each names the scenario
// that must catch it. (The engine mutants of warehouse/duckdb break the
// promises every engine keeps; these break the ones that depend on
// Capabilities.)
var declarationMutants = []warehousetest.Mutant{
	{Name: "views-one-by-one-in-reverse", Test: "Views/ReadersSeeAPrefix"},
	{Name: "views-dropped-then-created", Test: "Views/ReadersSeeAPrefix"},
	{Name: "declares-no-ingest", Test: "Capabilities/IngestIffIngester"},
	{Name: "declaration-changes", Test: "Capabilities/DeclarationIsStable"},
}

// Scenario: the scenarios that assert what an engine declares must fail an
// engine that does not keep it. Each mutant runs its scenario in a child
// process, which must fail on exactly that scenario.
func TestSuiteCatchesDeclarationMutants(t *testing.T) {
	t.Parallel()
	warehousetest.CatchMutants(t, warehousetest.MutantRun{Env: mutantEnv, Child: "TestDeclarationMutantChild"}, declarationMutants)
}

// Scenario: the prefix scenario is no stricter than the guarantee it
// asserts: an engine that replaces views one at a time in the order given
// (each replace atomic, with the same busy window between them) passes it.
func TestPrefixScenarioPassesViewsInOrder(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(os.Args[0], "-test.count=1", "-test.run", "^TestDeclarationMutantChild$/^Views$/^ReadersSeeAPrefix$", "-test.v")
	cmd.Env = append(os.Environ(), mutantEnv+"=views-one-by-one-in-order")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "--- PASS: TestDeclarationMutantChild/Views/ReadersSeeAPrefix ", "%s", out)
}

// TestDeclarationMutantChild runs the suite against a mutant, only as a
// child of TestSuiteCatchesDeclarationMutants.
func TestDeclarationMutantChild(t *testing.T) {
	kind := os.Getenv(mutantEnv)
	if kind == "" {
		return // only meaningful as a child process of TestSuiteCatchesDeclarationMutants; nothing to check here
	}
	var calls atomic.Int64
	warehousetest.Run(t, func(t *testing.T) warehouse.Engine {
		e, err := duckdb.Open(t.Context(), "", duckdb.Options{})
		require.NoError(t, err)
		return &mutant{Engine: e, kind: kind, calls: &calls}
	})
}

// mutant is an in-memory DuckDB engine with its declaration, or its view
// batches, rewritten wrongly.
type mutant struct {
	*duckdb.Engine
	kind  string
	calls *atomic.Int64 // Capabilities calls, across the mutant's engines
}

func (m *mutant) Capabilities() warehouse.Capabilities {
	c := m.Engine.Capabilities()
	switch m.kind {
	case "views-one-by-one-in-reverse", "views-dropped-then-created", "views-one-by-one-in-order":
		c.AtomicViews = false
	case "declares-no-ingest":
		c.Ingest = false
	case "declaration-changes":
		c.AtomicViews = m.calls.Add(1)%2 == 1
	}
	return c
}

// CreateOrReplaceViews replaces the views of a batch one at a time, for
// the view mutants: wrongly (in reverse order, or dropping each before
// creating it), or rightly (in order, the control). A busy query between
// two steps widens the window a concurrent reader can land in.
func (m *mutant) CreateOrReplaceViews(ctx context.Context, views []warehouse.ViewParams) error {
	switch m.kind {
	case "views-one-by-one-in-order":
		for _, v := range views {
			if err := m.CreateOrReplaceView(ctx, v); err != nil {
				return err
			}
			m.busy(ctx)
		}
		return nil
	case "views-one-by-one-in-reverse":
		for i := len(views) - 1; i >= 0; i-- {
			if err := m.CreateOrReplaceView(ctx, views[i]); err != nil {
				return err
			}
			m.busy(ctx)
		}
		return nil
	case "views-dropped-then-created":
		for _, v := range views {
			if err := m.DropView(ctx, v.View); err != nil {
				return err
			}
			m.busy(ctx)
			if err := m.CreateOrReplaceView(ctx, v); err != nil {
				return err
			}
		}
		return nil
	}
	return m.Engine.CreateOrReplaceViews(ctx, views)
}

// busy runs a query that takes some milliseconds.
func (m *mutant) busy(ctx context.Context) {
	_, _ = m.Query(ctx, "SELECT count(*) FROM range(20000000) AS r(i) WHERE i % 7 = 3")
}
