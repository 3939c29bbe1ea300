package promotion_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/gapless-dev/gapless/cadence"
	"github.com/gapless-dev/gapless/cron"
	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/promotion"
	"github.com/gapless-dev/gapless/state"
)

func hour(h int) time.Time {
	return time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(h) * time.Hour)
}

func spec(t testing.TB, expr string, unit interval.Unit) cadence.Spec {
	c, err := cron.Parse(expr)
	require.NoError(t, err)
	return cadence.Spec{Start: hour(0), Cron: c, Unit: unit}
}

func covered(rs ...[2]int) interval.Set {
	var s interval.Set
	for _, r := range rs {
		s = s.Add(interval.NewRange(hour(r[0]), hour(r[1])))
	}
	return s
}

var inc = state.SnapshotRef{Name: "m", Fingerprint: "f1", Version: "v1"}

// seed is seed 000's case: built through 10:00, the incumbent at 11:00.
func seed(t testing.TB) promotion.Candidate {
	hourly := spec(t, "@hourly", interval.Hour)
	return promotion.Candidate{Model: "m", Recorded: inc, Served: inc, Incumbent: hourly, Replacement: hourly,
		FrontierAtPlan: hour(10), FrontierNow: hour(11), Covered: covered([2]int{0, 10})}
}

func tg(n int) promotion.Policy {
	return promotion.Policy{Name: promotion.TrailingGap, MaxTrailingGapIntervals: n}
}

// Scenario: each rule of Judge decides the seed's case and its variants,
// with the reason code the rule names.
func TestJudgeRules(t *testing.T) {
	t.Parallel()
	two := spec(t, "0 */2 * * *", interval.Hour)
	cases := []struct {
		name   string
		pol    promotion.Policy
		edit   func(c *promotion.Candidate)
		reason promotion.Reason
		ok     bool
	}{
		{"covered under strict", promotion.Default, func(c *promotion.Candidate) { c.Covered = covered([2]int{0, 11}) }, promotion.Covered, true},
		{"seed under strict", promotion.Default, nil, promotion.IncumbentAdvanced, false},
		{"seed under catch-up", promotion.Policy{Name: promotion.CatchUp}, nil, promotion.IncumbentAdvanced, false},
		{"seed under trailing-gap(1)", tg(1), nil, promotion.TrailingGapAccepted, true},
		{"seed under trailing-gap(0)", tg(0), nil, promotion.OverBound, false},
		{"two advances under trailing-gap(1)", tg(1), func(c *promotion.Candidate) { c.FrontierNow = hour(12) }, promotion.OverBound, false},
		{"historical gap", tg(9), func(c *promotion.Candidate) { c.Covered = covered([2]int{0, 4}, [2]int{5, 10}) }, promotion.HistoricalGap, false},
		{"internal gap after the plan", tg(9), func(c *promotion.Candidate) {
			c.FrontierNow = hour(12)
			c.Covered = covered([2]int{0, 10}, [2]int{11, 12})
		}, promotion.InternalGap, false},
		{"hole past the incumbent's frontier", promotion.Default, func(c *promotion.Candidate) {
			c.Covered = covered([2]int{0, 11}, [2]int{12, 14}) // a batch after 11:00 failed, later ones committed
		}, promotion.InternalGap, false},
		{"covered past the incumbent's frontier", promotion.Default, func(c *promotion.Candidate) {
			c.Covered = covered([2]int{0, 14})
		}, promotion.Covered, true},
		{"changed cron", tg(9), func(c *promotion.Candidate) { c.Replacement = two }, promotion.ScheduleChanged, false},
		{"changed unit", tg(9), func(c *promotion.Candidate) { c.Replacement.Unit = interval.Day }, promotion.ScheduleChanged, false},
		{"incumbent changed", tg(9), func(c *promotion.Candidate) { c.Served.Fingerprint = "f2" }, promotion.IncumbentChanged, false},
		{"covered child", tg(1), func(c *promotion.Candidate) {
			c.Downstream = []promotion.Downstream{{Model: "child", Covered: covered([2]int{0, 11})}}
		}, promotion.DownstreamCovered, false},
		{"reused child", tg(1), func(c *promotion.Candidate) {
			c.Downstream = []promotion.Downstream{{Model: "child", Reused: true, Covered: covered([2]int{0, 11})}}
		}, promotion.TrailingGapAccepted, true},
		{"child behind the suffix", tg(1), func(c *promotion.Candidate) {
			c.Downstream = []promotion.Downstream{{Model: "child", Covered: covered([2]int{0, 10})}}
		}, promotion.TrailingGapAccepted, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := seed(t)
			if tc.edit != nil {
				tc.edit(&c)
			}
			v := promotion.Judge(tc.pol, c)
			require.Equal(t, tc.reason, v.Reason)
			require.Equal(t, tc.ok, v.Accepted)
			require.Equal(t, tc.ok, v.Reason.Accepts())
			_, debt := v.Debt("v2")
			require.Equal(t, tc.reason == promotion.TrailingGapAccepted, debt)
			if !v.Accepted {
				require.Contains(t, v.Explain(), string(tc.reason))
			}
		})
	}
}

// Scenario: advances are counted on the cron between the suffix's start and
// the incumbent's frontier now: a two-hourly cron on an hourly unit moves
// 10:00 -> 12:00 in one advance; a daily unit firing at 12:00 moves a day
// in one advance; a frontier a manual run left inside a unit counts as a
// partial advance.
func TestJudgeCountsAdvancesOnTheCron(t *testing.T) {
	t.Parallel()
	c := seed(t)
	c.Incumbent, c.Replacement = spec(t, "0 */2 * * *", interval.Hour), spec(t, "0 */2 * * *", interval.Hour)
	c.FrontierNow = hour(12)
	v := promotion.Judge(tg(1), c)
	require.Equal(t, promotion.TrailingGapAccepted, v.Reason)
	require.Equal(t, 1, v.Advances)

	daily := spec(t, "0 12 * * *", interval.Day)
	d := promotion.Candidate{Model: "d", Recorded: inc, Served: inc, Incumbent: daily, Replacement: daily,
		FrontierAtPlan: hour(4 * 24), FrontierNow: hour(5 * 24), Covered: covered([2]int{0, 4 * 24})}
	v = promotion.Judge(tg(1), d)
	require.Equal(t, promotion.TrailingGapAccepted, v.Reason)
	require.Equal(t, 1, v.Advances)

	p := seed(t)
	p.FrontierNow = hour(11).Add(30 * time.Minute)
	v = promotion.Judge(tg(1), p)
	require.Equal(t, promotion.OverBound, v.Reason, "one full hour and one partial")
	require.Equal(t, 2, v.Advances)
}

// Scenario (property): whatever the coverage, frontiers and bound, Judge
// under trailing-gap accepts a gap only when it is a single trailing suffix
// that starts at or after the plan-time frontier and counts at most the
// bound; an accepted verdict's suffix plus the coverage is exactly
// [start, frontier now); and no accepted replacement covers time after a
// hole, even past the incumbent's frontier.
func TestJudgeNeverAcceptsAnUnboundedOrHistoricalGap(t *testing.T) {
	t.Parallel()
	hourly := spec(t, "@hourly", interval.Hour)
	rapid.Check(t, func(rt *rapid.T) {
		atPlan := rapid.IntRange(0, 20).Draw(rt, "atPlan")
		now := rapid.IntRange(atPlan, 30).Draw(rt, "now")
		bound := rapid.IntRange(0, 5).Draw(rt, "bound")
		var cov interval.Set
		for range rapid.IntRange(0, 4).Draw(rt, "ranges") {
			s := rapid.IntRange(0, 30).Draw(rt, "s")
			n := rapid.IntRange(1, 10).Draw(rt, "n")
			cov = cov.Add(interval.NewRange(hour(s), hour(s+n)))
		}
		c := promotion.Candidate{Model: "m", Recorded: inc, Served: inc, Incumbent: hourly, Replacement: hourly,
			FrontierAtPlan: hour(atPlan), FrontierNow: hour(now), Covered: cov}
		v := promotion.Judge(tg(bound), c)
		end := hour(now)
		if f := cov.Frontier(); f.After(end) {
			end = f
		}
		required := interval.NewRange(hour(0), end)
		if !v.Accepted {
			require.False(t, cov.Covers(required) && end.After(hour(0)), "a replacement without a hole is accepted")
			return
		}
		if v.Reason == promotion.Covered {
			require.True(t, cov.Missing(required).IsEmpty(), "nothing is served after a hole")
			return
		}
		require.False(t, cov.Frontier().After(hour(now)), "nothing is served after an accepted gap")
		require.Equal(t, promotion.TrailingGapAccepted, v.Reason)
		require.False(t, v.Suffix.Start.Before(hour(atPlan)), "the suffix starts after the plan-time frontier")
		require.Equal(t, hour(now), v.Suffix.End)
		require.LessOrEqual(t, v.Advances, bound)
		require.Equal(t, int(v.Suffix.End.Sub(v.Suffix.Start)/time.Hour), v.Advances, "hourly: one advance per hour")
		require.True(t, cov.Union(interval.NewSet(v.Suffix)).Covers(required), "suffix and coverage make up the whole")
	})
}

// Scenario: policy names parse case-insensitively, a typo suggests the
// closest, and String shows the bound the policy runs with.
func TestParseAndString(t *testing.T) {
	t.Parallel()
	n, err := promotion.Parse("Trailing-Gap")
	require.NoError(t, err)
	require.Equal(t, promotion.TrailingGap, n)
	_, err = promotion.Parse("trailing-gaps")
	require.ErrorIs(t, err, promotion.ErrUnknown)
	require.Contains(t, err.Error(), "did you mean trailing-gap")
	require.Equal(t, "strict", promotion.Policy{}.String())
	require.Equal(t, "trailing-gap(2)", tg(2).String())
	require.Equal(t, "catch-up(3)", promotion.Policy{Name: promotion.CatchUp}.String())
	require.Equal(t, "replan(5)", promotion.Policy{Name: promotion.Replan, MaxAttempts: 5}.String())
	require.ErrorIs(t, promotion.Policy{Name: "nope"}.Validate(), promotion.ErrInvalid)
	require.ErrorIs(t, tg(-1).Validate(), promotion.ErrInvalid)
	require.NoError(t, tg(1).Validate())
}

// Scenario: a version that another apply is still backfilling with
// concurrent batches (or left with a failed batch) covers 12:00-14:00 but
// not 11:00-12:00, past the incumbent's frontier. No policy accepts it, and
// the explanation says where the hole came from and what to do.
func TestJudgeRefusesAHolePastTheFrontier(t *testing.T) {
	t.Parallel()
	c := seed(t)
	c.Covered = covered([2]int{0, 11}, [2]int{12, 14})
	for _, p := range []promotion.Policy{promotion.Default, tg(5), {Name: promotion.CatchUp}} {
		v := promotion.Judge(p, c)
		require.Equal(t, promotion.InternalGap, v.Reason, p.String())
		require.Equal(t, covered([2]int{11, 12}).String(), v.Missing.String())
		require.Contains(t, v.Explain(), "past the incumbent's frontier")
		require.Contains(t, v.Explain(), "resume that apply")
	}
}
