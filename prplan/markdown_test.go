package prplan_test

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/apply"
	"github.com/gapless-dev/gapless/codehost"
	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/model"
	"github.com/gapless-dev/gapless/plan"
	"github.com/gapless-dev/gapless/prplan"
	"github.com/gapless-dev/gapless/snapshot"
	"github.com/gapless-dev/gapless/state"
)

// fenceRE is a line that opens or closes a backtick fence.
var fenceRE = regexp.MustCompile("^(`{3,})([a-z]*)$")

// requireBalancedFences fails unless every backtick fence md opens is
// closed by a fence at least as long, as CommonMark reads them.
func requireBalancedFences(t *testing.T, md string) {
	t.Helper()
	open := ""
	for i, line := range strings.Split(md, "\n") {
		m := fenceRE.FindStringSubmatch(line)
		switch {
		case m == nil:
		case open == "":
			open = m[1]
		case m[2] == "" && len(m[1]) >= len(open):
			open = ""
		default:
			require.Less(t, len(m[1]), len(open), "line %d: a fence inside a fence must be shorter than its opening", i+1)
		}
	}
	require.Empty(t, open, "a fence is left open")
}

// bigPlan is a prod plan of n directly modified models, each with a diff
// of lines lines, and their backfills.
func bigPlan(n, lines int) *plan.Plan {
	pl := &plan.Plan{ID: "big", Environment: plan.Prod, ExecutionTime: at(2024, 1, 3, 0), Expected: plan.Expected{PlanID: "p7", Generation: 7}}
	for i := range n {
		name := fmt.Sprintf("demo.model_%04d", i)
		var diff strings.Builder
		fmt.Fprintf(&diff, "--- %s (current)\n+++ %s (new)\n@@ -1,%d +1,%d @@\n", name, name, lines, lines)
		for j := range lines {
			fmt.Fprintf(&diff, "-  col_%d AS a_%d,\n+  col_%d * 2 AS a_%d,\n", j, j, j, j)
		}
		pl.Changes = append(pl.Changes, plan.Change{Name: name, Category: snapshot.Breaking, Reason: "column a changes", Diff: diff.String()})
		pl.Snapshots = append(pl.Snapshots, &snapshot.Snapshot{Name: name, Version: fmt.Sprintf("v%04d", i),
			Model: &model.Model{Name: name, IntervalUnit: interval.Hour}})
		pl.Backfills = append(pl.Backfills, plan.Backfill{Name: name, Version: fmt.Sprintf("v%04d", i), Buckets: 48,
			Ranges: interval.NewSet(interval.NewRange(at(2024, 1, 1, 0), at(2024, 1, 3, 0)))})
	}
	return pl
}

// Scenario: a preview longer than GitHub accepts is cut to at most
// MaxBodyLength between blocks, every fence it opened closed, and ends
// saying it was cut and how to see the rest; a single diff longer than the
// limit is cut between its lines, inside its fence, which is closed.
func TestMarkdownIsCutToWhatGitHubAccepts(t *testing.T) {
	t.Parallel()
	rows := bigPlan(3000, 0)
	rows.Changes = nil // prod catching up: no change, a long backfill
	for name, pl := range map[string]*plan.Plan{
		"many changes":  bigPlan(400, 20),
		"one long diff": bigPlan(1, 5000),
		"many rows":     rows,
	} {
		md := prplan.PreviewMarkdown(pl)
		require.LessOrEqual(t, len(md), codehost.MaxBodyLength, name)
		require.Greater(t, len(md), codehost.MaxBodyLength-3000, "%s: cut near the limit, not far below it", name)
		requireBalancedFences(t, md)
		require.True(t, strings.HasSuffix(md, "Run `gapless plan prod` locally to see all of it.\n"), name)
		require.Contains(t, md, "**prod generation 7** (plan `p7`)", name)
		require.Equal(t, md, prplan.PreviewMarkdown(pl), "%s: deterministic", name)
	}
	md := prplan.PreviewMarkdown(bigPlan(1, 5000))
	require.Regexp(t, "\n… [0-9]+ more lines not shown\n```\n", md, "the long diff is cut inside its fence, which is closed")
	md = prplan.PreviewMarkdown(rows)
	require.Regexp(t, "\\| `demo.model_[0-9]+` \\| `v[0-9]+` \\| 48 intervals in [^\n]+ \\|\n\n---\n", md, "the table is cut between its rows")

	small := bigPlan(2, 3)
	md = prplan.PreviewMarkdown(small)
	require.NotContains(t, md, "Truncated", "a preview that fits is whole")
	requireBalancedFences(t, md)

	// The environment's report is cut the same way.
	pl := bigPlan(3000, 0)
	pl.Environment, pl.Expected = "analytics_1", plan.Expected{}
	res := &apply.Result{Environment: &state.Environment{Name: "analytics_1", Generation: 1, PlanID: "big"}}
	for _, b := range pl.Backfills {
		res.Models = append(res.Models, apply.ModelResult{Model: b.Name, Version: b.Version, Batches: 2, Rows: 100, Recorded: b.Ranges})
	}
	md = prplan.EnvironmentMarkdown("analytics_1", pl, res)
	require.LessOrEqual(t, len(md), codehost.MaxBodyLength)
	requireBalancedFences(t, md)
	require.True(t, strings.HasSuffix(md, "Run `gapless status analytics_1` locally to see all of it.\n"))
}

// Scenario: text from the pull request cannot break the markdown out of
// its fence, open HTML or a hidden bot marker, or mention anyone: a diff
// holding a fence and a marker gets a longer fence and a defused marker,
// and a reason's markdown is escaped.
func TestMarkdownEscapesWhatThePullRequestWrote(t *testing.T) {
	t.Parallel()
	pl := bigPlan(1, 0)
	pl.Changes[0].Diff = "--- a\n+++ b\n@@ -1 +1 @@\n-SELECT 1\n+SELECT 1 -- ```` <!-- gapless:summary --> @octocat\n"
	pl.Changes[0].Reason = "column `x|y` <b>changes</b> @octocat *now*"
	md := prplan.PreviewMarkdown(pl)
	requireBalancedFences(t, md)
	require.Contains(t, md, "\n`````diff\n", "the fence is longer than the run of backticks inside")
	require.NotContains(t, md, "<!--", "no hidden marker can be forged")
	require.NotContains(t, md, "<b>")
	require.NotContains(t, md, " @octocat *now*")
	require.Contains(t, md, "column \\`x\\|y\\` \\<b\\>changes\\</b\\> @\u200boctocat \\*now\\*")
}

// Scenario: a preview of a project prod already serves says there is
// nothing to deploy.
func TestPreviewMarkdownOfNoChanges(t *testing.T) {
	t.Parallel()
	pl := &plan.Plan{ID: "p", Environment: plan.Prod, ExecutionTime: at(2024, 1, 3, 0), Expected: plan.Expected{PlanID: "d1", Generation: 4}}
	md := prplan.PreviewMarkdown(pl)
	require.Contains(t, md, "**prod generation 4** (plan `d1`)")
	require.Contains(t, md, "**No changes**: prod already serves this project")
	require.Contains(t, md, "**Promotion policy:** `strict`")
}
