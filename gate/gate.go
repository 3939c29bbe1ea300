// Package gate decides what a pull request's checks show: a pure function of
// the bot's stored verdict for the PR, the PR's head now and the target
// environment's generation now. It knows no database and no code host.
//
// The invariant it keeps (DESIGN.md, invariant 4, and "no stale verdicts"):
// the aggregate check, the one branch protection requires, is success only
// for a verdict planned at the PR's current head against the target
// environment's current generation, whose PR environment was built and
// whose prod preview was planned. Anything else — no verdict yet, a verdict
// for an older head, a verdict planned before the target moved, a planning
// still running, a failure — is never green. Checks that must block are
// in_progress, failure or action_required, never neutral or skipped, which
// GitHub's branch protection counts as passing.
//
// The merge gate adds holds (design invariant 4): while a deploy attempt
// holds the pull request, its aggregate is action_required whatever the
// verdict says, and a hold only ever makes a check less green. Only the
// settle of the hold's own attempt removes it from the input.
package gate

import (
	"fmt"
	"strings"
	"time"
)

// The check runs gapless keeps on a pull request's head. Aggregate is the
// only one branch protection should require.
const (
	CheckAggregate   = "gapless"
	CheckEnvironment = "gapless / pr environment"
	CheckPreview     = "gapless / prod plan preview"
	CheckDeploy      = "gapless / deploy"
)

// Status is a check run's status, as GitHub names it.
type Status string

// Conclusion is a completed check run's conclusion, as GitHub names it.
type Conclusion string

// The statuses and conclusions gate produces. Neutral and skipped are
// deliberately absent: GitHub lets a required check with them pass.
const (
	StatusInProgress Status = "in_progress"
	StatusCompleted  Status = "completed"

	ConclusionNone           Conclusion = ""
	ConclusionSuccess        Conclusion = "success"
	ConclusionFailure        Conclusion = "failure"
	ConclusionActionRequired Conclusion = "action_required"
	ConclusionCancelled      Conclusion = "cancelled"
)

// State is what the bot has done with a pull request's head.
type State string

// The verdict states.
const (
	// Planning: the head was seen and a plan is queued or running.
	Planning State = "pending"
	// Planned: the PR environment and the prod preview were attempted;
	// Environment and Preview say how each went.
	Planned State = "planned"
	// Unmergeable: the head cannot be merged into the base (a conflict),
	// so there is no merge commit to plan.
	Unmergeable State = "unmergeable"
)

// Part is how one half of a planned verdict went.
type Part struct {
	OK      bool   `json:"ok"`
	Title   string `json:"title"`
	Summary string `json:"summary"` // markdown
}

// Verdict is the bot's stored verdict for one pull request against one
// target environment.
type Verdict struct {
	State State `json:"state"`
	// HeadSHA is the head the verdict is for; PlannedGeneration the target
	// environment's generation the preview was planned against (0 when the
	// target did not exist yet).
	HeadSHA           string `json:"head_sha"`
	PlannedGeneration int64  `json:"planned_generation"`
	Environment       Part   `json:"environment"` // the PR environment
	Preview           Part   `json:"preview"`     // the plan against the target
	// Error is a planning failure that is neither half's (the files could
	// not be fetched, the project did not load); empty otherwise.
	Error string `json:"error,omitempty"`
}

// Input is everything Desired reads.
type Input struct {
	// Verdict is the stored verdict; nil before the first plan.
	Verdict *Verdict
	// HeadSHA is the pull request's head now.
	HeadSHA string
	// Target is the environment the PR deploys to (prod) and Generation its
	// generation now (0 when it does not exist yet).
	Target     string
	Generation int64
	// Holds are the unreleased holds of deploy attempts on the PR.
	Holds []Hold
	// Deployed, when set, is the PR's own deploy that promoted a head to
	// the target, and the generation it produced. When it is the PR's head
	// now and the target is still at that generation, the target serves
	// exactly this PR: its aggregate is green ("deployed"), whatever the
	// verdict planned before the deploy says, so the bot's merge pinned to
	// that head is not blocked by the deploy's own generation.
	Deployed *Deployed
	// Unsafe, when set, says why the target's gate cannot be trusted
	// (branch protection does not require the aggregate); the aggregate's
	// summary says so. It changes no conclusion.
	Unsafe string
}

// Deployed is a pull request's own promoted deploy.
type Deployed struct {
	HeadSHA    string
	Generation int64
}

// Hold is one deploy attempt holding the pull request: a deploy is
// changing the target, so the PR's verdict is about to be stale.
type Hold struct {
	Attempt string
	// Origin says who deploys (pr:<repo>#<n>@<sha> or cli:<user>@<host>),
	// PlanID what, when known.
	Origin string
	PlanID string
	Since  time.Time
}

// Run is one check run as it should show.
type Run struct {
	Name       string
	Status     Status
	Conclusion Conclusion // set when Status is completed
	Title      string
	Summary    string // markdown
}

// Green reports whether the run passes a branch protection rule that
// requires it.
func (r Run) Green() bool { return r.Status == StatusCompleted && r.Conclusion == ConclusionSuccess }

// Desired returns the check runs a pull request's head should show, in a
// fixed order: the PR environment, the prod preview, and the aggregate.
// The aggregate folds the other two, first match wins: any in progress, any
// failure, any action required, else success (SchemaBot's fold).
func Desired(in Input) []Run {
	env, preview := halves(in)
	agg := fold(in, env, preview)
	if d := in.Deployed; d != nil && in.HeadSHA != "" && d.HeadSHA == in.HeadSHA && d.Generation == in.Generation && in.Generation > 0 {
		agg = completed(CheckAggregate, ConclusionSuccess, fmt.Sprintf("Deployed to %s (generation %d)", in.Target, d.Generation),
			fmt.Sprintf("Head `%s` is what %s serves: this pull request's deploy promoted generation %d.", shortSHA(d.HeadSHA), in.Target, d.Generation))
	}
	if len(in.Holds) > 0 {
		agg = held(in, agg)
	}
	if in.Unsafe != "" {
		agg.Summary += "\n\n**The merge gate is not enforced**: " + in.Unsafe
	}
	return []Run{env, preview, agg}
}

// held is the aggregate of a held pull request: action_required (never
// neutral, which GitHub counts as passing), naming the deploy, whatever
// the verdict says.
func held(in Input, verdict Run) Run {
	h := in.Holds[0]
	for _, o := range in.Holds[1:] {
		if o.Since.Before(h.Since) {
			h = o
		}
	}
	what := "a deploy"
	if h.PlanID != "" {
		what = fmt.Sprintf("a deploy of plan `%s`", h.PlanID)
	}
	who := ""
	if h.Origin != "" {
		who = " by " + h.Origin
	}
	since := ""
	if !h.Since.IsZero() {
		since = " since " + h.Since.UTC().Format(time.RFC3339)
	}
	state := string(verdict.Conclusion)
	if verdict.Status != StatusCompleted {
		state = string(verdict.Status)
	}
	return Run{
		Name: CheckAggregate, Status: StatusCompleted, Conclusion: ConclusionActionRequired,
		Title: fmt.Sprintf("Held: a deploy to %s is in progress", in.Target),
		Summary: fmt.Sprintf("Held: %s to %s is in progress%s%s (attempt `%s`). "+
			"This check re-plans when the deploy settles; do not merge until then.\n\nVerdict before the hold: %s — %s\n\n%s",
			what, in.Target, who, since, h.Attempt, state, verdict.Title, verdict.Summary),
	}
}

// Aggregate returns only the aggregate check run of Desired.
func Aggregate(in Input) Run { return Desired(in)[2] }

// halves returns the environment and preview runs.
func halves(in Input) (Run, Run) {
	env := Run{Name: CheckEnvironment}
	preview := Run{Name: CheckPreview}
	v := in.Verdict
	short := shortSHA(in.HeadSHA)
	planningFor := func(r *Run, what string) {
		r.Status = StatusInProgress
		r.Title = "Planning " + short
		r.Summary = fmt.Sprintf("gapless is %s for head `%s`.", what, short)
	}
	currentHead := v != nil && v.HeadSHA == in.HeadSHA && in.HeadSHA != ""
	switch {
	case !currentHead:
		planningFor(&env, "building this pull request's environment")
		planningFor(&preview, "planning this pull request against "+in.Target)
		return env, preview
	case v.State == Planning:
		planningFor(&env, "building this pull request's environment")
		planningFor(&preview, "planning this pull request against "+in.Target)
		return env, preview
	case v.State == Unmergeable:
		msg := fmt.Sprintf("Head `%s` cannot be merged into its base (a conflict): there is no merge commit to plan. Resolve the conflict and push.", short)
		env = completed(CheckEnvironment, ConclusionFailure, "Merge conflict", msg)
		preview = completed(CheckPreview, ConclusionFailure, "Merge conflict", msg)
		return env, preview
	case v.State != Planned:
		msg := "gapless does not know this verdict state; it re-plans the pull request."
		env = completed(CheckEnvironment, ConclusionActionRequired, "Unknown state", msg)
		preview = completed(CheckPreview, ConclusionActionRequired, "Unknown state", msg)
		return env, preview
	case v.Error != "":
		env = completed(CheckEnvironment, ConclusionFailure, "Planning failed", v.Error)
		preview = completed(CheckPreview, ConclusionFailure, "Planning failed", v.Error)
		return env, preview
	}
	env = part(CheckEnvironment, v.Environment)
	preview = part(CheckPreview, v.Preview)
	if v.Preview.OK && v.PlannedGeneration != in.Generation {
		// A preview planned against another generation of the target says
		// nothing about what a deploy would do now: never green.
		preview = Run{
			Name: CheckPreview, Status: StatusInProgress,
			Title: fmt.Sprintf("%s changed; re-planning", in.Target),
			Summary: fmt.Sprintf("This preview was planned against %s generation %d; %s is at generation %d now. gapless re-plans it.",
				in.Target, v.PlannedGeneration, in.Target, in.Generation),
		}
	}
	return env, preview
}

func part(name string, p Part) Run {
	c := ConclusionSuccess
	if !p.OK {
		c = ConclusionFailure
	}
	return completed(name, c, p.Title, p.Summary)
}

func completed(name string, c Conclusion, title, summary string) Run {
	return Run{Name: name, Status: StatusCompleted, Conclusion: c, Title: title, Summary: summary}
}

// fold folds the halves into the aggregate.
func fold(in Input, runs ...Run) Run {
	agg := Run{Name: CheckAggregate}
	var lines []string
	for _, r := range runs {
		state := string(r.Conclusion)
		if r.Status != StatusCompleted {
			state = string(r.Status)
		}
		lines = append(lines, fmt.Sprintf("- **%s**: %s — %s", r.Name, state, r.Title))
	}
	anyOf := func(match func(Run) bool) bool {
		for _, r := range runs {
			if match(r) {
				return true
			}
		}
		return false
	}
	switch {
	case anyOf(func(r Run) bool { return r.Status != StatusCompleted }):
		agg.Status, agg.Title = StatusInProgress, "Planning"
	case anyOf(func(r Run) bool { return r.Conclusion == ConclusionFailure }):
		agg.Status, agg.Conclusion, agg.Title = StatusCompleted, ConclusionFailure, "Failed"
	case anyOf(func(r Run) bool { return r.Conclusion != ConclusionSuccess }):
		agg.Status, agg.Conclusion, agg.Title = StatusCompleted, ConclusionActionRequired, "Action required"
	default:
		agg.Status, agg.Conclusion = StatusCompleted, ConclusionSuccess
		agg.Title = fmt.Sprintf("Ready: planned against %s generation %d", in.Target, in.Verdict.PlannedGeneration)
	}
	pin := ""
	if in.Verdict != nil && in.Verdict.State == Planned {
		pin = fmt.Sprintf("\n\nVerdict for head `%s`, planned against %s generation %d.", shortSHA(in.Verdict.HeadSHA), in.Target, in.Verdict.PlannedGeneration)
	}
	agg.Summary = strings.Join(lines, "\n") + pin
	return agg
}

// shortSHA is the first 12 characters of a commit id.
func shortSHA(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}
