package apply_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/apply"
	"github.com/gapless-dev/gapless/execute"
	"github.com/gapless-dev/gapless/execute/executetest"
	"github.com/gapless-dev/gapless/plan"
	"github.com/gapless-dev/gapless/snapshot"
)

// childOverParent is an incremental model that reads demo.parent, of any
// kind, in SQL that DuckDB and PostgreSQL both run: one row per day and
// parent row, with every column of the parent.
const childOverParent = `MODEL (
  name demo.child,
  kind INCREMENTAL_BY_TIME_RANGE (time_column day),
  cron '@daily',
  start '2024-01-01'
);
SELECT CAST(g.day AS DATE) AS day, p.*
FROM generate_series(@start_ts, @end_ts, INTERVAL '1 day') AS g(day)
CROSS JOIN demo.parent AS p`

// parentFiles is demo.parent as kind (SEED, FULL or VIEW) holding the
// labels given, ids 1 and 2, demo.child over it, and demo.labels, a VIEW
// over it (on PostgreSQL a view binds to the table it reads, so the
// parent's table must be filled in place, never dropped and made again).
func parentFiles(kind, label1, label2 string) map[string]string {
	files := map[string]string{
		"models/child.sql":  childOverParent,
		"models/labels.sql": "MODEL (name demo.labels, kind VIEW);\nSELECT p.id, p.label FROM demo.parent AS p",
	}
	rows := "(1, '" + label1 + "'), (2, '" + label2 + "')"
	switch kind {
	case "SEED":
		files["models/parent.sql"] = "MODEL (name demo.parent, kind SEED (path '../seeds/parent.csv'), start '2024-01-01');"
		files["seeds/parent.csv"] = "id,label\n1," + label1 + "\n2," + label2 + "\n"
	default:
		files["models/parent.sql"] = "MODEL (name demo.parent, kind " + kind + ", start '2024-01-01');\n" +
			"SELECT v.id, v.label FROM (VALUES " + rows + ") AS v(id, label)"
	}
	return files
}

// childRows are the rows prod serves for demo.child, as text.
func childRows(t *testing.T, b *executetest.Bundle, cols string) []string {
	t.Helper()
	return b.Rows(t, "SELECT CAST(day AS TEXT), "+cols+" FROM demo.child")
}

// Scenario: the first deploy of an incremental model over a SEED, a FULL
// and a VIEW model, then a breaking change of that parent. Without a
// create stage in DAG order the child's table was described before its
// parent existed, and both deploys failed with the engine's "table does
// not exist". Now each deploys in one apply: the parent's physical object
// is made first, the child's table from it; the breaking change gives the
// parent and the child fresh versions (indirect-breaking), rebuilt from
// the new parent, and prod serves every day with the new labels, none
// lost.
func TestIncrementalOverEachKindDeploysInOneStep(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"SEED", "FULL", "VIEW"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			onBoth(t, parentFiles(kind, "a", "b"), func(t *testing.T, b *executetest.Bundle) {
				p1 := b.Plan(t, "p1", plan.Prod, at(2024, 1, 3, 0), plan.Options{})
				_, err := doApply(b, p1, at(2024, 1, 3, 0), apply.Hooks{}, nil)
				require.NoError(t, err)
				require.Equal(t, []string{
					"2024-01-01 1 a", "2024-01-01 2 b", "2024-01-02 1 a", "2024-01-02 2 b",
				}, childRows(t, b, "id, label"))
				require.Equal(t, []string{"1 a", "2 b"}, b.Rows(t, "SELECT id, label FROM demo.labels"))
				before, _ := b.Served(t, plan.Prod)

				executetest.WriteFiles(t, b.Dir, parentFiles(kind, "A", "B"))
				p2 := b.Plan(t, "p2", plan.Prod, at(2024, 1, 3, 0), plan.Options{})
				categories := map[string]snapshot.Category{}
				for _, c := range p2.Changes {
					categories[c.Name] = c.Category
				}
				require.Equal(t, map[string]snapshot.Category{"demo.parent": snapshot.Breaking,
					"demo.child": snapshot.IndirectBreaking, "demo.labels": snapshot.IndirectBreaking}, categories)
				_, err = doApply(b, p2, at(2024, 1, 3, 0), apply.Hooks{}, nil)
				require.NoError(t, err)

				after, _ := b.Served(t, plan.Prod)
				require.NotEqual(t, before["demo.child"].Version, after["demo.child"].Version, "the child is rebuilt")
				require.Equal(t, "{[2024-01-01T00:00:00Z, 2024-01-03T00:00:00Z)}", b.Intervals(t, "demo.child", after["demo.child"].Version))
				require.Equal(t, []string{
					"2024-01-01 1 A", "2024-01-01 2 B", "2024-01-02 1 A", "2024-01-02 2 B",
				}, childRows(t, b, "id, label"))
				require.Equal(t, []string{"1 A", "2 B"}, b.Rows(t, "SELECT id, label FROM demo.labels"))
			})
		})
	}
}

// Scenario: two columns are added to the seed's CSV, a text and a
// fractional one (a DOUBLE PRECISION on both engines). The seed gets a new
// version (its content changed: breaking), and the incremental child that
// selects p.* gets one too (indirect-breaking): its table is made again
// from the seed's new columns, so the new column arrives in every day the
// child serves, and no day is lost. The old child table is not touched:
// it serves until the promotion.
func TestSeedColumnAddedRebuildsTheChild(t *testing.T) {
	t.Parallel()
	onBoth(t, parentFiles("SEED", "a", "b"), func(t *testing.T, b *executetest.Bundle) {
		p1 := b.Plan(t, "p1", plan.Prod, at(2024, 1, 3, 0), plan.Options{})
		_, err := doApply(b, p1, at(2024, 1, 3, 0), apply.Hooks{}, nil)
		require.NoError(t, err)
		before, _ := b.Served(t, plan.Prod)

		executetest.WriteFiles(t, b.Dir, map[string]string{"seeds/parent.csv": "id,label,tier,weight\n1,a,gold,1.5\n2,b,,\n"})
		p2 := b.Plan(t, "p2", plan.Prod, at(2024, 1, 3, 0), plan.Options{})
		_, err = doApply(b, p2, at(2024, 1, 3, 0), apply.Hooks{}, nil)
		require.NoError(t, err)

		after, _ := b.Served(t, plan.Prod)
		require.NotEqual(t, before["demo.child"].Version, after["demo.child"].Version)
		cols, err := b.Engine.Columns(b.Ctx, execute.PhysicalTable(after["demo.child"]))
		require.NoError(t, err)
		names := make([]string, len(cols))
		for i, c := range cols {
			names[i] = c.Name
		}
		require.Equal(t, []string{"day", "id", "label", "tier", "weight"}, names)
		require.Equal(t, []string{
			"2024-01-01 1 gold 3", "2024-01-01 2 - 0", "2024-01-02 1 gold 3", "2024-01-02 2 - 0",
		}, childRows(t, b, "id, coalesce(tier, '-'), CAST(coalesce(weight, 0) * 2 AS BIGINT)"))
		require.Equal(t, "{[2024-01-01T00:00:00Z, 2024-01-03T00:00:00Z)}", b.Intervals(t, "demo.child", after["demo.child"].Version))
	})
}
