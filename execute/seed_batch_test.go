package execute_test

import (
	"testing"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/execute"
	"github.com/gapless-dev/gapless/execute/executetest"
)

// Scenario: a SEED with batch_size 2 loads its five rows in chunks into a
// staging table and then into its own table at once: the table holds all
// five, and no staging table is left. When a later chunk fails (a value that
// is not an integer on row 5), the seed's table holds no row at all, not
// the chunks before, and the staging table is gone too.
func TestSeedBatchSizeLoadsAtomically(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, csv string
		rows      int64
	}{
		{"whole", "id,name\n1,a\n2,b\n3,c\n4,d\n5,e\n", 5},
		{"failing chunk", "id,name\n1,a\n2,b\n3,c\n4,d\nnot_a_number,e\n", -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := executetest.Setup(t, false, map[string]string{
				"seeds/people.csv": tc.csv,
				"models/people.sql": `MODEL (name demo.people, kind SEED (path '$root/seeds/people.csv', batch_size 2),
  columns (id BIGINT, name VARCHAR), start '2024-01-01');`,
			})
			pr := b.Load(t)
			tpls, err := execute.Templates(b.Ctx, b.Parser, b.Engine, pr.Snapshots)
			require.NoError(t, err)
			exec := at(2024, 1, 3, 0)
			x := &execute.Executor{Engine: b.Engine, Store: b.Store, ProjectDir: b.Dir, Logger: quiet, Clock: clockwork.NewFakeClockAt(exec)}
			tpl := tpls["demo.people"]
			require.NoError(t, x.Prepare(b.Ctx, tpl, exec))
			res, err := x.Execute(b.Ctx, execute.Work{Template: tpl, Whole: true, Execution: exec, SkipCovered: true})
			if tc.rows < 0 {
				require.Error(t, err)
				require.Contains(t, err.Error(), "seed rows 5 to 5")
				require.Equal(t, []string{"0"}, b.Rows(t, "SELECT count(*) FROM "+b.Engine.QuoteTable(tpl.Table)))
			} else {
				require.NoError(t, err)
				require.Equal(t, tc.rows, res.Rows)
				require.Equal(t, []string{"5"}, b.Rows(t, "SELECT count(*) FROM "+b.Engine.QuoteTable(tpl.Table)))
			}
			left := b.Rows(t, "SELECT count(*) FROM information_schema.tables WHERE table_name LIKE '__gapless_seed_load%'")
			require.Equal(t, []string{"0"}, left, "no staging table is left behind")
		})
	}
}
