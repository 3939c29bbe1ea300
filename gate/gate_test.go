package gate

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

func planned(head string, gen int64) *Verdict {
	return &Verdict{
		State: Planned, HeadSHA: head, PlannedGeneration: gen,
		Environment: Part{OK: true, Title: "Built"},
		Preview:     Part{OK: true, Title: "2 changes"},
	}
}

func TestDesiredGreenOnlyForACurrentVerdict(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		in    Input
		green bool
		agg   Status
		concl Conclusion
	}{
		{"current verdict", Input{Verdict: planned("h1", 3), HeadSHA: "h1", Target: "prod", Generation: 3}, true, StatusCompleted, ConclusionSuccess},
		{"no verdict yet", Input{HeadSHA: "h1", Target: "prod", Generation: 3}, false, StatusInProgress, ConclusionNone},
		{"verdict for an older head", Input{Verdict: planned("h0", 3), HeadSHA: "h1", Target: "prod", Generation: 3}, false, StatusInProgress, ConclusionNone},
		{"prod moved since the plan", Input{Verdict: planned("h1", 3), HeadSHA: "h1", Target: "prod", Generation: 4}, false, StatusInProgress, ConclusionNone},
		{"still planning", Input{Verdict: &Verdict{State: Planning, HeadSHA: "h1"}, HeadSHA: "h1", Target: "prod", Generation: 3}, false, StatusInProgress, ConclusionNone},
		{"unmergeable", Input{Verdict: &Verdict{State: Unmergeable, HeadSHA: "h1"}, HeadSHA: "h1", Target: "prod"}, false, StatusCompleted, ConclusionFailure},
		{"unknown state", Input{Verdict: &Verdict{State: "weird", HeadSHA: "h1"}, HeadSHA: "h1", Target: "prod"}, false, StatusCompleted, ConclusionActionRequired},
		{"planning error", Input{Verdict: func() *Verdict { v := planned("h1", 3); v.Error = "no gapless.yaml"; return v }(), HeadSHA: "h1", Target: "prod", Generation: 3}, false, StatusCompleted, ConclusionFailure},
		{"environment failed", Input{Verdict: func() *Verdict { v := planned("h1", 3); v.Environment.OK = false; return v }(), HeadSHA: "h1", Target: "prod", Generation: 3}, false, StatusCompleted, ConclusionFailure},
		{"empty head", Input{Verdict: planned("", 0), HeadSHA: "", Target: "prod"}, false, StatusInProgress, ConclusionNone},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			runs := Desired(c.in)
			require.Len(t, runs, 3)
			require.Equal(t, []string{CheckEnvironment, CheckPreview, CheckAggregate}, []string{runs[0].Name, runs[1].Name, runs[2].Name})
			agg := runs[2]
			require.Equal(t, c.green, agg.Green(), "aggregate %+v", agg)
			require.Equal(t, c.agg, agg.Status)
			require.Equal(t, c.concl, agg.Conclusion)
			for _, r := range runs {
				require.NotEqual(t, Conclusion("neutral"), r.Conclusion)
				require.NotEqual(t, Conclusion("skipped"), r.Conclusion)
				if r.Status == StatusCompleted {
					require.NotEmpty(t, r.Conclusion, "%s completed without a conclusion", r.Name)
				} else {
					require.Empty(t, r.Conclusion, "%s in progress with a conclusion", r.Name)
				}
			}
		})
	}
}

// TestPropertyNeverGreenWhenStale: whatever the verdict and the world, the
// aggregate is green exactly when nothing holds the PR and either the
// verdict is planned, error-free, both halves OK, for the head the PR has
// now and against the generation the target has now (invariant 4's "no
// stale verdicts"), or the target's generation now is the PR's own deploy
// of its head now.
func TestPropertyNeverGreenWhenStale(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		heads := []string{"", "aaa", "bbb"}
		in := Input{
			HeadSHA:    rapid.SampledFrom(heads).Draw(t, "head"),
			Target:     "prod",
			Generation: rapid.Int64Range(0, 3).Draw(t, "generation"),
		}
		if rapid.Bool().Draw(t, "hasVerdict") {
			in.Verdict = &Verdict{
				State:             rapid.SampledFrom([]State{Planning, Planned, Unmergeable, "other"}).Draw(t, "state"),
				HeadSHA:           rapid.SampledFrom(heads).Draw(t, "verdictHead"),
				PlannedGeneration: rapid.Int64Range(0, 3).Draw(t, "plannedGeneration"),
				Environment:       Part{OK: rapid.Bool().Draw(t, "envOK")},
				Preview:           Part{OK: rapid.Bool().Draw(t, "previewOK")},
				Error:             rapid.SampledFrom([]string{"", "boom"}).Draw(t, "error"),
			}
		}
		in.Holds = drawHolds(t)
		if rapid.Bool().Draw(t, "deployed") {
			in.Deployed = &Deployed{HeadSHA: rapid.SampledFrom(heads).Draw(t, "deployedHead"), Generation: rapid.Int64Range(0, 3).Draw(t, "deployedGeneration")}
		}
		v := in.Verdict
		current := v != nil && v.State == Planned && v.Error == "" && v.Environment.OK && v.Preview.OK &&
			in.HeadSHA != "" && v.HeadSHA == in.HeadSHA && v.PlannedGeneration == in.Generation
		// Or the target serves exactly this head, deployed by this PR.
		current = current || (in.Deployed != nil && in.HeadSHA != "" && in.Deployed.HeadSHA == in.HeadSHA &&
			in.Deployed.Generation == in.Generation && in.Generation > 0)
		agg := Aggregate(in)
		if agg.Green() != (current && len(in.Holds) == 0) {
			t.Fatalf("aggregate green=%v for a verdict current=%v with %d holds: %+v / %+v", agg.Green(), current, len(in.Holds), in, v)
		}
		if len(in.Holds) > 0 && (agg.Status != StatusCompleted || agg.Conclusion != ConclusionActionRequired) {
			// Held is action_required: never neutral or skipped, which
			// branch protection counts as passing, and never in_progress,
			// which a later fold could read as "still planning".
			t.Fatalf("a held aggregate is %s/%s, want completed/action_required", agg.Status, agg.Conclusion)
		}
	})
}

func drawHolds(t *rapid.T) []Hold {
	n := rapid.IntRange(0, 2).Draw(t, "holds")
	out := make([]Hold, n)
	for i := range out {
		out[i] = Hold{
			Attempt: rapid.SampledFrom([]string{"a1", "a2"}).Draw(t, "attempt"),
			Origin:  rapid.SampledFrom([]string{"", "pr:acme/x#8@abc", "cli:ops@host"}).Draw(t, "origin"),
			Since:   time.Unix(rapid.Int64Range(0, 100).Draw(t, "since"), 0),
		}
	}
	return out
}

// TestPropertyAHoldNeverMakesACheckGreener: adding holds to any input
// turns no run from not green to green, and the aggregate is never green
// while held (invariant 4: "when in doubt the answer is blocked").
func TestPropertyAHoldNeverMakesACheckGreener(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		in := Input{HeadSHA: "aaa", Target: "prod", Generation: rapid.Int64Range(0, 2).Draw(t, "generation")}
		if rapid.Bool().Draw(t, "hasVerdict") {
			in.Verdict = &Verdict{
				State: Planned, HeadSHA: rapid.SampledFrom([]string{"aaa", "bbb"}).Draw(t, "verdictHead"),
				PlannedGeneration: rapid.Int64Range(0, 2).Draw(t, "plannedGeneration"),
				Environment:       Part{OK: rapid.Bool().Draw(t, "envOK")},
				Preview:           Part{OK: rapid.Bool().Draw(t, "previewOK")},
			}
		}
		free := Desired(in)
		in.Holds = drawHolds(t)
		in.Unsafe = rapid.SampledFrom([]string{"", "not required"}).Draw(t, "unsafe")
		heldRuns := Desired(in)
		for i := range free {
			if heldRuns[i].Green() && !free[i].Green() {
				t.Fatalf("%s turned green with %d holds", free[i].Name, len(in.Holds))
			}
		}
		if len(in.Holds) > 0 && heldRuns[2].Green() {
			t.Fatalf("the aggregate is green while held")
		}
	})
}

func TestDesiredHeldNamesTheDeploy(t *testing.T) {
	t.Parallel()
	since := time.Date(2024, 1, 3, 1, 0, 0, 0, time.UTC)
	in := Input{Verdict: planned("aaa", 2), HeadSHA: "aaa", Target: "prod", Generation: 2,
		Holds: []Hold{{Attempt: "att-2", Origin: "cli:ops@h", Since: since.Add(time.Hour)}, {Attempt: "att-1", Origin: "pr:acme/a#8@abc", PlanID: "p-9", Since: since}}}
	agg := Aggregate(in)
	require.Equal(t, StatusCompleted, agg.Status)
	require.Equal(t, ConclusionActionRequired, agg.Conclusion)
	require.Contains(t, agg.Summary, "plan `p-9`")
	require.Contains(t, agg.Summary, "pr:acme/a#8@abc")
	require.Contains(t, agg.Summary, "att-1")
	require.Contains(t, agg.Summary, "2024-01-03T01:00:00Z")
	in.Holds = nil
	require.True(t, Aggregate(in).Green(), "released, the same verdict is green again")
	in.Unsafe = "branch protection of main does not require the check \"gapless\""
	agg = Aggregate(in)
	require.True(t, agg.Green())
	require.Contains(t, agg.Summary, "not enforced")
}
