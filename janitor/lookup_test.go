package janitor_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/backend"
	"github.com/gapless-dev/gapless/execute/executetest"
	"github.com/gapless-dev/gapless/janitor"
	"github.com/gapless-dev/gapless/plan"
	"github.com/gapless-dev/gapless/warehouse"
)

// Scenario: prod is redeployed with two breaking changes in a row, so two
// versions of demo.hits stop being served. The janitor (snapshot_ttl 0)
// drops both tables and keeps prod's, asking the warehouse which tables
// exist once for the whole pass, not once per version (in DuckDB each
// question scans the whole catalog).
func TestJanitorAsksTheCatalogOncePerPass(t *testing.T) {
	t.Parallel()
	onBothBackends(t, map[string]string{"models/hits.sql": hourly("demo.hits", 0)}, func(t *testing.T, b *executetest.Bundle) {
		deploy(t, b, "p1", plan.Prod, at(2024, 1, 1, 6))
		first, _ := b.Served(t, plan.Prod)
		executetest.WriteFiles(t, b.Dir, map[string]string{"models/hits.sql": hourly("demo.hits", 1)})
		deploy(t, b, "p2", plan.Prod, at(2024, 1, 1, 6))
		second, _ := b.Served(t, plan.Prod)
		executetest.WriteFiles(t, b.Dir, map[string]string{"models/hits.sql": hourly("demo.hits", 2)})
		deploy(t, b, "p3", plan.Prod, at(2024, 1, 1, 6))
		third, _ := b.Served(t, plan.Prod)

		eng := &executetest.CountingEngine{Engine: b.Engine}
		rep, err := janitor.Run(b.Ctx, &backend.Backend{Store: b.Store, Engine: eng}, at(2024, 1, 9, 0),
			janitor.Options{Log: quiet})
		require.NoError(t, err)
		require.ElementsMatch(t, []string{
			first["demo.hits"].Version, second["demo.hits"].Version,
		}, []string{rep.Versions[0].Version, rep.Versions[1].Version}, "both retired versions dropped")
		require.Len(t, rep.Versions, 2)
		require.Equal(t, int32(1), eng.Many.Load(), "one catalog question for the pass")
		require.Equal(t, int32(0), eng.One.Load(), "none per table")
		for name, s := range map[string]string{"first": first["demo.hits"].PhysicalTable(), "second": second["demo.hits"].PhysicalTable()} {
			ok, err := b.Engine.TableExists(b.Ctx, warehouse.Table{Schema: first["demo.hits"].PhysicalSchema(), Name: s})
			require.NoError(t, err)
			require.False(t, ok, "the %s version's table is dropped", name)
		}
		ok, err := b.Engine.TableExists(b.Ctx, warehouse.Table{Schema: third["demo.hits"].PhysicalSchema(), Name: third["demo.hits"].PhysicalTable()})
		require.NoError(t, err)
		require.True(t, ok, "prod's table stays")
	})
}
