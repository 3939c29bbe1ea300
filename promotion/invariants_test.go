package promotion

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/internal/invariants"
	"github.com/gapless-dev/gapless/interval"
)

// Judge checks every verdict in invariants builds (the race builds of the
// suite): verdicts that accept more than their policy allows, made here as
// only a bug in Judge could, panic naming the invariant.
func TestJudgeChecksTheVerdictInvariant(t *testing.T) {
	t.Parallel()
	if !invariants.Enabled {
		t.Skip("the checks run in builds tagged invariants or race")
	}
	h := func(n int) time.Time { return time.Date(2024, 1, 1, n, 0, 0, 0, time.UTC) }
	suffix := interval.NewRange(h(10), h(11))
	accepted := func() Verdict {
		return Verdict{Model: "m", Policy: "trailing-gap(1)", Reason: TrailingGapAccepted, Accepted: true,
			FrontierAtPlan: h(10), FrontierNow: h(11), Missing: interval.NewSet(suffix), Suffix: suffix, Advances: 1, Bound: 1}
	}
	for name, c := range map[string]struct {
		want    string // in the violation
		breakIt func(v *Verdict)
	}{
		"rejecting reason accepted":  {"accepted is true for reason historical_gap", func(v *Verdict) { v.Reason = HistoricalGap }},
		"accepting reason refused":   {"accepted is false for reason trailing_gap_accepted", func(v *Verdict) { v.Accepted = false }},
		"covered with a gap":         {"covered, but", func(v *Verdict) { v.Reason = Covered }},
		"trailing gap under strict":  {"accepted under strict", func(v *Verdict) { v.Policy = "strict" }},
		"no suffix":                  {"no suffix", func(v *Verdict) { v.Suffix = interval.Range{} }},
		"a gap besides the suffix":   {"is missing", func(v *Verdict) { v.Missing = v.Missing.Add(interval.NewRange(h(3), h(4))) }},
		"suffix before the frontier": {"starts before the plan-time frontier", func(v *Verdict) { v.FrontierAtPlan = h(10).Add(time.Minute) }},
		"over the bound":             {"2 advances over the bound 1", func(v *Verdict) { v.Advances = 2 }},
	} {
		t.Run(name, func(t *testing.T) {
			v := accepted()
			c.breakIt(&v)
			err := v.check()
			require.ErrorContains(t, err, c.want)
			require.PanicsWithValue(t, "invariant violated: "+verdictInvariant+": "+err.Error(), v.mustBeValid)
		})
	}
	require.NotPanics(t, accepted().mustBeValid)
	require.NotPanics(t, Verdict{Model: "m", Reason: Covered, Accepted: true}.mustBeValid)
	require.NotPanics(t, Verdict{Model: "m", Reason: OverBound, Missing: interval.NewSet(suffix)}.mustBeValid)
}
