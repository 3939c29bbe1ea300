package gate

import (
	"testing"

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
// aggregate is green exactly when the verdict is planned, error-free, both
// halves OK, for the head the PR has now and against the generation the
// target has now (invariant 4's "no stale verdicts").
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
		v := in.Verdict
		current := v != nil && v.State == Planned && v.Error == "" && v.Environment.OK && v.Preview.OK &&
			in.HeadSHA != "" && v.HeadSHA == in.HeadSHA && v.PlannedGeneration == in.Generation
		agg := Aggregate(in)
		if agg.Green() != current {
			t.Fatalf("aggregate green=%v for a verdict current=%v: %+v / %+v", agg.Green(), current, in, v)
		}
	})
}
