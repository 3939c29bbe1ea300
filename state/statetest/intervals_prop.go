package statetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/state"
)

// drawSet draws a set of one to three ranges on a five-minute grid over
// two days, so that ranges overlap, touch and nest often.
func drawSet(t *rapid.T, label string) interval.Set {
	n := rapid.IntRange(1, 3).Draw(t, label+"_ranges")
	rs := make([]interval.Range, n)
	for i := range rs {
		start := rapid.IntRange(0, 576).Draw(t, fmt.Sprintf("%s_start%d", label, i))
		length := rapid.IntRange(1, 48).Draw(t, fmt.Sprintf("%s_len%d", label, i))
		rs[i] = interval.NewRange(epoch.Add(time.Duration(start)*5*time.Minute),
			epoch.Add(time.Duration(start+length)*5*time.Minute))
	}
	return interval.NewSet(rs...)
}

func testIntervalsProperty(t *testing.T, b *bundle) {
	// Scenario: random sequences of adds and removes on a key give, after
	// every step, exactly what interval.Set computes, and the key always
	// occupies one stored row per range of the model (storage is compacted
	// by every write, removals included).
	var iteration int
	rapid.Check(t, func(rt *rapid.T) {
		iteration++
		k := vkey("m.prop", fmt.Sprintf("v%d", iteration)) // a fresh key per case
		baseRows := rowCount(rt, b)
		var model interval.Set
		steps := rapid.IntRange(1, 12).Draw(rt, "steps")
		for i := range steps {
			s := drawSet(rt, fmt.Sprintf("op%d", i))
			p := state.IntervalsParams{Key: k, Ranges: s, Now: hour(0)}
			if rapid.Bool().Draw(rt, fmt.Sprintf("add%d", i)) {
				require.NoError(rt, b.store.AddIntervals(b.ctx, p))
				model = model.Union(s)
			} else {
				require.NoError(rt, b.store.RemoveIntervals(b.ctx, p))
				model = model.Subtract(s)
			}
			requireIntervals(rt, b, k, model)
			require.Equal(rt, baseRows+model.Len(), rowCount(rt, b), "stored rows after step %d", i)
		}
	})
}
