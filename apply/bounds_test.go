package apply_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/apply"
	"github.com/gapless-dev/gapless/execute/executetest"
	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/plan"
)

// Scenario (design invariant 5, a plan keeps its bounds): a plan for prod is
// built at 2024-01-04 00:00 and applied two days later, when two more days
// of the daily models have come due and their source holds them. The apply
// computes exactly the plan's backfills: every committed batch lies inside
// its model's plan ranges, the interval records end at the plan's bound,
// and the result reports what it recorded. The days due since are the
// scheduler's work, never the apply's.
func TestApplyLaterComputesOnlyThePlansRanges(t *testing.T) {
	t.Parallel()
	b := executetest.Setup(t, false, map[string]string{
		"models/raw.sql": fragileProject, "models/fragile.sql": fragileModel, "models/fragile_sum.sql": fragileChild})
	rawTable(t, b, "3")
	built := at(2024, 1, 4, 0)
	p := b.Plan(t, "p1", plan.Prod, built, plan.Options{})
	want := interval.NewSet(interval.NewRange(at(2024, 1, 1, 0), built))
	for _, name := range []string{"demo.fragile", "demo.fragile_sum"} {
		bf, ok := p.BackfillFor(name)
		require.True(t, ok, name)
		require.Equal(t, want.String(), bf.Ranges.String(), name)
	}

	var mu sync.Mutex
	outside := map[string][]interval.Range{}
	committed := map[string]int{}
	res, err := doApply(b, p, at(2024, 1, 6, 0), apply.Hooks{}, func(e apply.Event) {
		bc, ok := e.(apply.BatchCommitted)
		if !ok {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		committed[bc.Batch.Model]++
		if bf, _ := p.BackfillFor(bc.Batch.Model); !bf.Ranges.Covers(bc.Batch.Interval) {
			outside[bc.Batch.Model] = append(outside[bc.Batch.Model], bc.Batch.Interval)
		}
	})
	require.NoError(t, err)
	require.Empty(t, outside, "batches outside the plan's ranges")
	require.Equal(t, map[string]int{"demo.fragile": 3, "demo.fragile_sum": 1}, committed)
	for i, name := range []string{"demo.fragile", "demo.fragile_sum"} {
		s := p.Snapshots[i+1]
		require.Equal(t, name, s.Name)
		require.Equal(t, want.String(), b.Intervals(t, name, s.Version), "the record ends at the plan's bound")
		require.Equal(t, name, res.Models[i].Model)
		require.Equal(t, want.String(), res.Models[i].Recorded.String(), "the result reports what was recorded")
	}
	require.Equal(t, []string{"1", "1", "3"}, b.Rows(t, "SELECT n FROM demo.fragile ORDER BY ts"))
}
