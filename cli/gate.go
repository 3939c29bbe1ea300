package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/gapless-dev/gapless/apply"
	"github.com/gapless-dev/gapless/backend"
	"github.com/gapless-dev/gapless/config"
	"github.com/gapless-dev/gapless/deploygate"
	"github.com/gapless-dev/gapless/internal/logkey"
	"github.com/gapless-dev/gapless/plan"
	"github.com/gapless-dev/gapless/state"
)

// The merge gate on the command line (design invariant 4: a pull
// request's check is never green while an apply on its target is in
// flight). Every promoting command (apply, plan --auto-apply, rollback)
// goes through applyPlan, which, for a merge-gated environment, records a
// deploy attempt and its holds before the apply starts, waits for the gate
// to open, applies under the attempt's fence and ends and settles the
// attempt however the apply ended. An environment that is not gated is
// applied exactly as before, with no attempt recorded.

// The merge gate's flags, on apply and plan (for --auto-apply).
const (
	flagMergeGate     = "merge-gate"
	flagMergeGateWait = "merge-gate-wait"
)

// maxAttemptError bounds the apply error recorded on a failed attempt:
// its first part names the plan, the stage and the model; the rest (SQL)
// is on the command's output.
const maxAttemptError = 4000

// mergeGateFlags are --merge-gate and --merge-gate-wait as given: "" and
// 0 when not given (the configured or the gate target's default applies).
// Their values are checked as they are parsed, so a bad one is a usage
// error naming its flag.
type mergeGateFlags struct {
	mode string
	wait time.Duration
}

// addMergeGateFlags defines --merge-gate and --merge-gate-wait on cmd.
func addMergeGateFlags(cmd *cobra.Command, f *mergeGateFlags) {
	fl := cmd.Flags()
	fl.Var(gateModeValue{&f.mode}, flagMergeGate,
		"on a merge-gated environment, start once the holds on its open pull requests are rendered on GitHub (rendered) or only recorded (recorded, for GitHub outages) "+
			"(default: github.merge_gate.wait_for in gapless.yaml, else the gate's mode)")
	fl.Var(gateWaitValue{&f.wait}, flagMergeGateWait,
		fmt.Sprintf("on a merge-gated environment, how long to wait for the gate to open before failing, nothing backfilled (default: github.merge_gate.wait, else %s)", deploygate.DefaultWait))
}

// gateModeValue is --merge-gate: rendered or recorded.
type gateModeValue struct{ p *string }

func (v gateModeValue) String() string {
	if v.p == nil {
		return ""
	}
	return *v.p
}

func (v gateModeValue) Set(s string) error {
	m, err := config.ParseWaitFor(s)
	if err != nil {
		return err
	}
	*v.p = m
	return nil
}

func (gateModeValue) Type() string { return "rendered|recorded" }

// gateWaitValue is --merge-gate-wait: a positive duration.
type gateWaitValue struct{ p *time.Duration }

func (v gateWaitValue) String() string {
	if v.p == nil || *v.p == 0 {
		return ""
	}
	return v.p.String()
}

func (v gateWaitValue) Set(s string) error {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil || d <= 0 {
		return fmt.Errorf("want a positive duration such as 2m or 90s, got %q", s)
	}
	*v.p = d
	return nil
}

func (gateWaitValue) Type() string { return "duration" }

// openMergeGate is the merge gate's start for an apply of pl: nil (and
// nothing written) when pl's environment is not merge-gated. An
// environment is gated when the state store has a gate target for it, or
// when gapless.yaml's github.merge_gate.environments names it; then it is
// first registered as a gate target, so that every later process (and
// Promote) treats it as gated too.
//
// For a gated environment it records a deploy attempt and its holds
// (deploygate.Begin), says so on stderr, and waits until the gate opens
// (deploygate.Attempt.Open). It returns the attempt, running, or an
// error: another attempt holds the environment (nothing recorded), or the
// gate did not open (the attempt ended failed and settled, its holds
// released). On error the caller must change nothing.
func (g *globals) openMergeGate(ctx context.Context, b *backend.Backend, pl *plan.Plan, f mergeGateFlags) (*deploygate.Attempt, error) {
	env := pl.Environment
	target, gated, err := deploygate.Target(ctx, b.Store, env)
	if err != nil {
		return nil, err
	}
	var conf *config.MergeGate
	if b.Config != nil && b.Config.GitHub != nil && b.Config.GitHub.MergeGate.Gated(env) {
		conf = &b.Config.GitHub.MergeGate
	}
	if !gated && conf == nil {
		return nil, nil
	}
	if !gated {
		repo := ""
		if rs := b.Config.GitHub.Repositories; len(rs) > 0 {
			repo = rs[0]
		}
		target, err = b.Store.SetGateTarget(ctx, state.GateTarget{Env: env, Repo: repo, Mode: conf.WaitFor, UpdatedAt: g.now()})
		if err != nil {
			return nil, fmt.Errorf("registering %s's merge gate (github.merge_gate.environments): %w", env, err)
		}
		g.log.Info("merge gate: environment registered", logkey.Environment, env, logkey.Repo, repo, logkey.GateMode, target.Mode)
	}
	if target.Unsafe != "" {
		g.say(fmt.Sprintf("warning: %s's merge gate is marked unsafe: %s; its holds may not stop a merge", env, target.Unsafe),
			logkey.Environment, env, logkey.Reason, target.Unsafe)
	}

	mode, wait := f.mode, f.wait
	if mode == "" && conf != nil {
		mode = conf.WaitFor
	}
	if wait <= 0 && conf != nil {
		wait = conf.Wait
	}
	if wait <= 0 {
		wait = deploygate.DefaultWait
	}
	actor := actorName()
	user, _, _ := strings.Cut(actor, "@")
	id := uuid.NewString()
	now := g.now()
	p := deploygate.Params{Store: b.Store, Clock: g.clock(), Log: g.log, Owner: actor, Wait: wait}
	a, err := deploygate.Begin(ctx, p, state.BeginDeployParams{
		ID: id,
		Request: &state.RequestDeployParams{ID: id, Env: env, Origin: "cli:" + actor, Trigger: state.TriggerCLI,
			RequestedBy: user, Now: now},
		Mode: mode, PlanID: pl.ID, Now: now,
	})
	if errors.Is(err, state.ErrDeployActive) {
		return nil, g.deployActiveError(ctx, b.Store, env, err)
	}
	if err != nil {
		return nil, fmt.Errorf("%s is merge-gated: %w", env, err)
	}
	att := a.Attempt()
	n := len(a.Holds())
	switch {
	case n == 0:
		g.say(fmt.Sprintf("%s is merge-gated: no open pull request to hold; starting now (deploy attempt %s)", env, att.ID),
			logkey.Environment, env, logkey.Deploy, att.ID, logkey.Holds, n)
	case att.Mode == state.GateRecorded:
		g.say(fmt.Sprintf("%s is merge-gated: holds recorded on %d pull request(s) (deploy attempt %s); starting now; the holds render while the deploy runs (--%s=%s)",
			env, n, att.ID, flagMergeGate, state.GateRecorded),
			logkey.Environment, env, logkey.Deploy, att.ID, logkey.Holds, n, logkey.GateMode, att.Mode)
	default:
		g.say(fmt.Sprintf("%s is merge-gated: holds recorded on %d pull request(s) (deploy attempt %s); waiting for them to show on GitHub (up to %s)…",
			env, n, att.ID, wait),
			logkey.Environment, env, logkey.Deploy, att.ID, logkey.Holds, n, logkey.GateMode, att.Mode)
	}
	if err := a.Open(ctx); err != nil {
		// A *deploygate.NotOpenError names the pull requests and the
		// flags; the attempt ended failed and its holds were released.
		return nil, err
	}
	return a, nil
}

// deployActiveError is BeginDeploy refused because another deploy
// attempt holds env: it names that attempt and how to end a stuck one.
func (g *globals) deployActiveError(ctx context.Context, st state.Store, env string, err error) error {
	active, lerr := st.ListDeploys(ctx, state.ListDeploysParams{Env: env,
		States: []string{state.DeployHeld, state.DeployRendered, state.DeployRunning}, Limit: 1})
	if lerr != nil || len(active) == 0 {
		return fmt.Errorf("%s is merge-gated and another deploy attempt holds it; nothing was applied: %w", env, err)
	}
	o := active[0]
	return fmt.Errorf("%s is merge-gated and deploy attempt %s (%s, %s since %s, lease until %s) holds it; nothing was applied. "+
		"Wait for it to end, or, if its process is gone, `gapless gate settle %s`: %w",
		env, o.ID, o.Origin, o.State, fmtTime(o.CreatedAt), fmtTime(o.LeaseExpiresAt), o.ID, err)
}

// finishMergeGate ends a gated apply's attempt however the apply ended
// and settles it (releasing its holds): promoted when the environment
// serves the apply's plan (res.Environment is set once the promotion
// committed, even when a later stage failed), cancelled when ctx was
// cancelled, failed otherwise. A failure to record the end is reported,
// never returned: the apply's outcome stands, and the release sweep of
// `gapless serve` resolves the attempt once its lease expires.
func (g *globals) finishMergeGate(ctx context.Context, st state.Store, a *deploygate.Attempt, pl *plan.Plan, res *apply.Result, applyErr error) {
	fin := state.FinishDeployParams{}
	switch {
	case res != nil && res.Environment != nil:
		fin.State, fin.PlanID, fin.ResultGeneration = state.DeployPromoted, res.Environment.PlanID, res.Environment.Generation
	case applyErr == nil:
		fin.State, fin.PlanID = state.DeployPromoted, lastPlanID(pl, res)
		e, err := st.GetEnvironment(ctx, pl.Environment)
		if err != nil && !errors.Is(err, state.ErrNotFound) {
			g.say(fmt.Sprintf("could not read %s to record the end of deploy attempt %s: %v", pl.Environment, a.Attempt().ID, err),
				logkey.Deploy, a.Attempt().ID, logkey.Error, err)
		}
		if e != nil {
			fin.ResultGeneration = e.Generation
		}
	case ctx.Err() != nil:
		fin.State, fin.Error = state.DeployCancelled, "interrupted: "+applyErr.Error()
	default:
		msg := applyErr.Error()
		if len(msg) > maxAttemptError {
			msg = msg[:maxAttemptError] + "…"
		}
		fin.State, fin.Error = state.DeployFailed, msg
	}
	if err := a.Finish(context.WithoutCancel(ctx), fin); err != nil {
		g.say(fmt.Sprintf("the apply ended %s, but its deploy attempt's end was not recorded: %v", fin.State, err),
			logkey.Deploy, a.Attempt().ID, logkey.Outcome, fin.State, logkey.Error, err)
	}
}

// fmtTime is t in RFC 3339, UTC, or "-" when zero.
func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// recentEndedAttempts is how many ended attempts gate status lists per
// environment.
const recentEndedAttempts = 10

// gateStatusReport is `gapless gate status --json`; its field names are
// stable.
type gateStatusReport struct {
	// At is the time ages and render lags are measured at.
	At      time.Time          `json:"at"`
	Targets []gateTargetStatus `json:"targets"`
}

// gateTargetStatus is one merge-gated environment (or one that is no
// longer gated but still has active holds: Gated false).
type gateTargetStatus struct {
	Env       string    `json:"env"`
	Gated     bool      `json:"gated"`
	Repo      string    `json:"repo,omitempty"`
	Mode      string    `json:"mode,omitempty"`
	Unsafe    string    `json:"unsafe,omitempty"`
	UpdatedAt time.Time `json:"updated_at,omitzero"`
	// Active are the attempts not ended, and the ended ones not settled
	// (whose holds may still be active), newest first, with their holds.
	Active []gateAttemptStatus `json:"active"`
	// Recent are the last ended and settled attempts, newest first,
	// without their holds.
	Recent []gateAttemptStatus `json:"recent"`
}

// gateAttemptStatus is one deploy attempt.
type gateAttemptStatus struct {
	ID              string           `json:"id"`
	State           string           `json:"state"`
	Origin          string           `json:"origin,omitempty"`
	Trigger         string           `json:"trigger"`
	Mode            string           `json:"mode,omitempty"`
	PlanID          string           `json:"plan_id,omitempty"`
	Owner           string           `json:"owner,omitempty"`
	CreatedAt       time.Time        `json:"created_at"`
	HoldsRecordedAt time.Time        `json:"holds_recorded_at,omitzero"`
	HoldsRenderedAt time.Time        `json:"holds_rendered_at,omitzero"`
	LeaseExpiresAt  time.Time        `json:"lease_expires_at,omitzero"`
	FinishedAt      time.Time        `json:"finished_at,omitzero"`
	SettledAt       time.Time        `json:"settled_at,omitzero"`
	SettledBy       string           `json:"settled_by,omitempty"`
	Error           string           `json:"error,omitempty"`
	Holds           []gateHoldStatus `json:"holds,omitempty"`
}

// gateHoldStatus is one hold of an attempt.
type gateHoldStatus struct {
	Repo        string    `json:"repo"`
	Number      int       `json:"number"`
	HeadSHA     string    `json:"head_sha"`
	CreatedAt   time.Time `json:"created_at"`
	Rendered    bool      `json:"rendered"`
	RenderedAt  time.Time `json:"rendered_at,omitzero"`
	RenderError string    `json:"render_error,omitempty"`
	// RenderLagSeconds is, for an active hold not rendered yet, how long
	// it has waited for its render (At - CreatedAt); 0 otherwise.
	RenderLagSeconds int64     `json:"render_lag_seconds"`
	Released         bool      `json:"released"`
	ReleasedAt       time.Time `json:"released_at,omitzero"`
	ReleaseReason    string    `json:"release_reason,omitempty"`
}

// activeDeployStates are the states of an attempt that has not ended.
var activeDeployStates = []string{state.DeployPending, state.DeployHeld, state.DeployRendered, state.DeployRunning}

// endedDeployStates are the states of an attempt that has ended.
var endedDeployStates = []string{state.DeployPromoted, state.DeployFailed, state.DeployCancelled, state.DeployAbandoned}

// gateStatus assembles gate status at now: every gate target, and every
// environment with active holds, by name; per environment its attempts
// not ended or not settled (with their holds) and its last ended ones.
// It reads the state store only.
func gateStatus(ctx context.Context, st state.Store, now time.Time) (gateStatusReport, error) {
	rep := gateStatusReport{At: now, Targets: []gateTargetStatus{}}
	targets, err := st.ListGateTargets(ctx)
	if err != nil {
		return rep, fmt.Errorf("listing the merge-gated environments: %w", err)
	}
	byEnv := map[string]*gateTargetStatus{}
	for _, t := range targets {
		byEnv[t.Env] = &gateTargetStatus{Env: t.Env, Gated: true, Repo: t.Repo, Mode: t.Mode, Unsafe: t.Unsafe, UpdatedAt: t.UpdatedAt}
	}
	active, err := st.ListHolds(ctx, state.ListHoldsParams{ActiveOnly: true})
	if err != nil {
		return rep, fmt.Errorf("listing the active holds: %w", err)
	}
	// Attempts with active holds, by environment: an ended attempt whose
	// settle has not run yet must show, wherever its holds are.
	held := map[string][]string{}
	for _, h := range active {
		if byEnv[h.Env] == nil {
			byEnv[h.Env] = &gateTargetStatus{Env: h.Env}
		}
		if !slices.Contains(held[h.Env], h.AttemptID) {
			held[h.Env] = append(held[h.Env], h.AttemptID)
		}
	}
	envs := make([]string, 0, len(byEnv))
	for env := range byEnv {
		envs = append(envs, env)
	}
	sort.Strings(envs)
	for _, env := range envs {
		ts := byEnv[env]
		if err := fillGateTarget(ctx, st, ts, held[env], now); err != nil {
			return rep, err
		}
		rep.Targets = append(rep.Targets, *ts)
	}
	return rep, nil
}

// fillGateTarget reads ts's attempts: those not ended, those ended and
// not settled (among the newest ended, and heldIDs, the attempts with
// active holds), and the last recentEndedAttempts ended and settled.
func fillGateTarget(ctx context.Context, st state.Store, ts *gateTargetStatus, heldIDs []string, now time.Time) error {
	ts.Active, ts.Recent = []gateAttemptStatus{}, []gateAttemptStatus{}
	open, err := st.ListDeploys(ctx, state.ListDeploysParams{Env: ts.Env, States: activeDeployStates})
	if err != nil {
		return fmt.Errorf("listing the deploy attempts of %s: %w", ts.Env, err)
	}
	ended, err := st.ListDeploys(ctx, state.ListDeploysParams{Env: ts.Env, States: endedDeployStates})
	if err != nil {
		return fmt.Errorf("listing the ended deploy attempts of %s: %w", ts.Env, err)
	}
	current := open
	seen := map[string]bool{}
	for _, a := range open {
		seen[a.ID] = true
	}
	for _, a := range ended {
		switch {
		case a.SettledAt.IsZero():
			current = append(current, a)
			seen[a.ID] = true
		case len(ts.Recent) < recentEndedAttempts:
			ts.Recent = append(ts.Recent, attemptStatus(a))
		}
	}
	for _, id := range heldIDs {
		if seen[id] {
			continue
		}
		a, err := st.GetDeploy(ctx, id)
		if err != nil {
			return fmt.Errorf("reading deploy attempt %s, which holds pull requests: %w", id, err)
		}
		current = append(current, a)
		seen[id] = true
	}
	sort.SliceStable(current, func(i, j int) bool {
		if !current[i].CreatedAt.Equal(current[j].CreatedAt) {
			return current[i].CreatedAt.After(current[j].CreatedAt)
		}
		return current[i].ID < current[j].ID
	})
	for _, a := range current {
		as := attemptStatus(a)
		holds, err := st.ListHolds(ctx, state.ListHoldsParams{AttemptID: a.ID})
		if err != nil {
			return fmt.Errorf("listing the holds of deploy attempt %s: %w", a.ID, err)
		}
		for _, h := range holds {
			as.Holds = append(as.Holds, holdStatus(h, now))
		}
		ts.Active = append(ts.Active, as)
	}
	return nil
}

func attemptStatus(a state.DeployAttempt) gateAttemptStatus {
	return gateAttemptStatus{
		ID: a.ID, State: a.State, Origin: a.Origin, Trigger: a.Trigger, Mode: a.Mode, PlanID: a.PlanID, Owner: a.Owner,
		CreatedAt: a.CreatedAt, HoldsRecordedAt: a.HoldsRecordedAt, HoldsRenderedAt: a.HoldsRenderedAt,
		LeaseExpiresAt: a.LeaseExpiresAt, FinishedAt: a.FinishedAt, SettledAt: a.SettledAt, SettledBy: a.SettledBy,
		Error: a.Error,
	}
}

func holdStatus(h state.Hold, now time.Time) gateHoldStatus {
	hs := gateHoldStatus{
		Repo: h.Repo, Number: h.Number, HeadSHA: h.HeadSHA, CreatedAt: h.CreatedAt,
		Rendered: !h.RenderedAt.IsZero(), RenderedAt: h.RenderedAt, RenderError: h.RenderError,
		Released: !h.Active(), ReleasedAt: h.ReleasedAt, ReleaseReason: h.ReleaseReason,
	}
	if h.Active() && h.RenderedAt.IsZero() && now.After(h.CreatedAt) {
		hs.RenderLagSeconds = int64(now.Sub(h.CreatedAt) / time.Second)
	}
	return hs
}

// printGateStatus prints rep as aligned text.
func printGateStatus(out io.Writer, rep gateStatusReport) error {
	if len(rep.Targets) == 0 {
		fmt.Fprintln(out, "No environment is merge-gated (github.merge_gate.environments registers one at its first gated apply, or when `gapless serve` starts).")
		return nil
	}
	for i, t := range rep.Targets {
		if i > 0 {
			fmt.Fprintln(out)
		}
		switch {
		case t.Gated && t.Repo != "":
			fmt.Fprintf(out, "%s: merge-gated, mode %s, pull requests of %s\n", t.Env, t.Mode, t.Repo)
		case t.Gated:
			fmt.Fprintf(out, "%s: merge-gated, mode %s\n", t.Env, t.Mode)
		default:
			fmt.Fprintf(out, "%s: no longer merge-gated; holds remain until their attempts settle\n", t.Env)
		}
		if t.Unsafe != "" {
			fmt.Fprintf(out, "  UNSAFE: %s\n", t.Unsafe)
		}
		if len(t.Active) == 0 {
			fmt.Fprintln(out, "  No deploy attempt in flight or unsettled.")
		} else {
			fmt.Fprintln(out, "  Deploy attempts in flight or unsettled:")
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "    ATTEMPT\tSTATE\tORIGIN\tTRIGGER\tMODE\tCREATED\tHOLDS RECORDED\tHOLDS RENDERED\tLEASE UNTIL")
			for _, a := range t.Active {
				fmt.Fprintf(tw, "    %s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.ID, a.State, dash(a.Origin), a.Trigger, dash(a.Mode),
					fmtTime(a.CreatedAt), fmtTime(a.HoldsRecordedAt), fmtTime(a.HoldsRenderedAt), fmtTime(a.LeaseExpiresAt))
			}
			if err := tw.Flush(); err != nil {
				return fmt.Errorf("writing gate status: %w", err)
			}
			for _, a := range t.Active {
				if err := printAttemptHolds(out, a); err != nil {
					return err
				}
			}
		}
		if len(t.Recent) > 0 {
			fmt.Fprintf(out, "  Last %d ended:\n", len(t.Recent))
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "    ATTEMPT\tSTATE\tORIGIN\tPLAN\tFINISHED\tSETTLED BY\tERROR")
			for _, a := range t.Recent {
				fmt.Fprintf(tw, "    %s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.ID, a.State, dash(a.Origin), dash(a.PlanID),
					fmtTime(a.FinishedAt), dash(a.SettledBy), dash(firstLine(a.Error)))
			}
			if err := tw.Flush(); err != nil {
				return fmt.Errorf("writing gate status: %w", err)
			}
		}
	}
	return nil
}

// printAttemptHolds prints one attempt's error and holds.
func printAttemptHolds(out io.Writer, a gateAttemptStatus) error {
	if a.Error == "" && len(a.Holds) == 0 {
		return nil
	}
	fmt.Fprintf(out, "  Attempt %s:\n", a.ID)
	if a.Error != "" {
		fmt.Fprintf(out, "    error: %s\n", firstLine(a.Error))
	}
	if len(a.Holds) == 0 {
		fmt.Fprintln(out, "    no holds")
		return nil
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "    PULL REQUEST\tHEAD\tHELD SINCE\tRENDERED\tRENDER LAG\tRENDER ERROR")
	for _, h := range a.Holds {
		rendered, lag := fmtTime(h.RenderedAt), "-"
		switch {
		case h.Released:
			rendered = "released " + fmtTime(h.ReleasedAt) + " (" + h.ReleaseReason + ")"
		case !h.Rendered:
			rendered = "no"
			lag = (time.Duration(h.RenderLagSeconds) * time.Second).String()
		}
		fmt.Fprintf(tw, "    %s#%d\t%s\t%s\t%s\t%s\t%s\n", h.Repo, h.Number, shortSHA(h.HeadSHA), fmtTime(h.CreatedAt), rendered, lag, dash(h.RenderError))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("writing gate status: %w", err)
	}
	return nil
}

// dash is s, or "-" when empty.
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// shortSHA is a commit's first 12 characters.
func shortSHA(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return dash(s)
}

func newGateCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "gate",
		Short: "The merge gate: deploy attempts on merge-gated environments and the pull requests they hold",
		Args:  rangeArgs(0, 0),
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newGateStatusCmd(g), newGateSettleCmd(g))
	return cmd
}

func newGateStatusCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Per merge-gated environment: deploy attempts in flight or unsettled, their holds, render lag and errors, and the last ended",
		Long: `Reads the state store only. For each merge-gated environment (its mode,
and why its gate is unsafe, if it is): the deploy attempts not ended, or
ended and not settled (id, state, origin, trigger, mode, created, when
their holds were recorded and rendered, lease expiry, error), and each
one's holds: the pull request, its head, whether the hold is rendered on
GitHub, the last render error and, for one not rendered, its render lag
(how long it has waited). Then the last 10 ended attempts. --json prints
all of it as one document; --execution-time is the "now" lags are
measured at.`,
		Args: rangeArgs(0, 0),
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			ctx := cmd.Context()
			now, err := g.execTime()
			if err != nil {
				return err
			}
			_, b, err := g.open(ctx, true)
			if err != nil {
				return err
			}
			defer g.closeBackend(b, &err)
			rep, err := gateStatus(ctx, b.Store, now.UTC())
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(g.env.Stdout, rep)
			}
			return printGateStatus(g.env.Stdout, rep)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newGateSettleCmd(g *globals) *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:   "settle ATTEMPT",
		Short: "Operator override: end a stuck deploy attempt (abandoned) and release its holds, recorded as such",
		Long: `Settles deploy attempt ATTEMPT (its id, as gate status lists it) by force:
an attempt that has not ended is first marked abandoned, with --reason as
its error; its holds are released, even while another attempt holds the
environment, and each held pull request's verdict goes back to pending,
to be re-planned by gapless serve. The override is recorded in the
history (a gate_settled event with reason operator).

Use it for an attempt whose process is gone and that the release sweep
of gapless serve cannot resolve: an attempt still applying loses its
lease and its promotion is refused.`,
		Args: rangeArgs(1, 1),
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			ctx := cmd.Context()
			id := strings.TrimSpace(args[0])
			if id == "" {
				return usagef("gate settle: ATTEMPT must not be empty")
			}
			if reason == "" {
				reason = "gapless gate settle by " + actorName()
			}
			_, b, err := g.open(ctx, true)
			if err != nil {
				return err
			}
			defer g.closeBackend(b, &err)
			before, err := b.Store.GetDeploy(ctx, id)
			if errors.Is(err, state.ErrNotFound) {
				return fmt.Errorf("no deploy attempt %s (gapless gate status lists them): %w", id, err)
			}
			if err != nil {
				return fmt.Errorf("reading deploy attempt %s: %w", id, err)
			}
			a, released, err := b.Store.SettleDeploy(ctx, state.SettleDeployParams{ID: id, By: state.SettledByOperator,
				Force: true, Reason: reason, Now: g.now()})
			if errors.Is(err, state.ErrNotFound) {
				return fmt.Errorf("no deploy attempt %s (gapless gate status lists them): %w", id, err)
			}
			if err != nil {
				return fmt.Errorf("settling deploy attempt %s: %w", id, err)
			}
			g.log.Info("merge gate: settled by an operator", logkey.Deploy, id, logkey.Environment, a.Env,
				logkey.Outcome, a.State, logkey.Holds, len(released), logkey.Reason, reason)
			printSettle(g.env.Stdout, before, a, released)
			return nil
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why (recorded as a not-ended attempt's error and in the history; default: who settled it)")
	return cmd
}

// printSettle says what gate settle did.
func printSettle(out io.Writer, before, a state.DeployAttempt, released []state.Hold) {
	if len(released) == 0 && !before.SettledAt.IsZero() {
		fmt.Fprintf(out, "Deploy attempt %s (%s, %s) was already settled at %s by %s; nothing released.\n",
			a.ID, a.Env, a.State, fmtTime(before.SettledAt), dash(before.SettledBy))
		return
	}
	what := a.State
	if before.State != a.State {
		what = before.State + " -> " + a.State
	}
	fmt.Fprintf(out, "Settled deploy attempt %s (%s, %s) by operator override; released %d hold(s)", a.ID, a.Env, what, len(released))
	if len(released) == 0 {
		fmt.Fprintln(out, ".")
		return
	}
	prs := make([]string, len(released))
	for i, h := range released {
		prs[i] = fmt.Sprintf("%s#%d", h.Repo, h.Number)
	}
	fmt.Fprintf(out, ": %s.\nTheir checks re-plan against %s as it is now when gapless serve picks them up.\n", strings.Join(prs, ", "), a.Env)
}
