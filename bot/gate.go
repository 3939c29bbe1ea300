package bot

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gapless-dev/gapless/deploygate"
	"github.com/gapless-dev/gapless/gate"
	"github.com/gapless-dev/gapless/internal/logkey"
	"github.com/gapless-dev/gapless/state"
)

// The merge gate in the bot (design invariant 4). A deploy to a gated
// target records its holds (deploygate.Begin), enqueues their renders and
// hold comments, waits for the gate, and applies under the attempt's
// fence. Renders mark holds rendered once GitHub reads back the held
// aggregate. When the attempt ends, a settle job releases its holds (only
// its own: state.GateStore.SettleDeploy) and re-plans every PR it held; the
// sweep settles what no settle job did, resolves attempts whose process
// died, and re-arms renders and comments that lag.

// HoldMarker is the hidden marker of the one comment a deploy attempt
// posts on each pull request it holds.
func HoldMarker(attemptID string) string { return fmt.Sprintf("<!-- gapless:hold:%s -->", attemptID) }

// The merge gate's defaults.
const (
	// DefaultSweepEvery is the release sweep's period.
	DefaultSweepEvery = 30 * time.Second
	// DefaultSweepGrace is how long after its lease expired an attempt is
	// taken for dead by the sweep.
	DefaultSweepGrace = 30 * time.Second
	// gatePoll is how often a deploy waiting for its holds re-reads the
	// store (renders in this process wake it at once).
	gatePoll = time.Second
)

// SettleJob releases one ended deploy attempt's holds and re-plans the
// pull requests it held. Unique by attempt.
type SettleJob struct {
	AttemptID string `json:"attempt_id"`
}

// Kind implements queue.Args.
func (SettleJob) Kind() string { return KindSettle }

// HoldCommentJob posts, or edits in place, the hold comment of one
// attempt on one pull request: what is being deployed, and, once
// released, that the check re-plans. Released distinguishes the edit.
type HoldCommentJob struct {
	AttemptID string `json:"attempt_id"`
	Repo      string `json:"repo"`
	Number    int    `json:"number"`
	Released  bool   `json:"released,omitempty"`
}

// Kind implements queue.Args.
func (HoldCommentJob) Kind() string { return KindHoldComment }

// SweepJob is one round of the merge gate's sweep. Round makes each
// period's job unique, so replicas ticking together sweep once.
type SweepJob struct {
	Round int64 `json:"round"`
}

// Kind implements queue.Args.
func (SweepJob) Kind() string { return KindSweep }

// endedStates are the states of a deploy attempt that has ended.
var endedStates = []string{state.DeployPromoted, state.DeployFailed, state.DeployCancelled, state.DeployAbandoned}

// gated reports whether the bot's target is merge-gated.
func (b *Bot) gated() bool { return b.cfg.GateMode != "" }

// gateParams are the deploy gate's parameters for this bot.
func (b *Bot) gateParams() deploygate.Params {
	return deploygate.Params{
		Store: b.d.Store, Clock: b.d.Clock, Log: b.d.Log, Owner: b.d.Owner, TTL: b.cfg.DeployLease,
		Wait: b.cfg.GateWait, Poll: gatePoll, Kick: b.kick,
		Settle: func(ctx context.Context, a state.DeployAttempt) error {
			return b.enqueue(ctx, SettleJob{AttemptID: a.ID})
		},
		OnWait: func(ctx context.Context, a state.DeployAttempt) {
			if h := b.d.Hooks.GateWait; h != nil {
				h(ctx, a.ID)
			}
		},
	}
}

// RegisterGate puts the bot's target under the merge gate in the state
// store (with its mode and repository), so that every process, a
// `gapless apply` from a terminal included, is fenced by it; and records
// whether branch protection makes the gate effective (verifyProtection).
// A bot whose target is not gated does nothing.
func (b *Bot) RegisterGate(ctx context.Context) error {
	if !b.gated() {
		return nil
	}
	unsafe, err := b.verifyProtection(ctx)
	if err != nil {
		// Unknown is not safe; but a blip of GitHub does not change what
		// was last read: keep it, and look again at the next sweep.
		b.d.Log.Warn("merge gate: reading branch protection failed; keeping what was last read", logkey.Error, err)
		prev, ok, terr := deploygate.Target(ctx, b.d.Store, b.cfg.Target)
		switch {
		case terr != nil:
			return terr
		case ok:
			unsafe = prev.Unsafe
		default:
			unsafe = "branch protection could not be read: " + err.Error()
		}
	}
	t, err := b.d.Store.SetGateTarget(ctx, state.GateTarget{
		Env: b.cfg.Target, Repo: b.cfg.Repositories[0], Mode: b.cfg.GateMode, Unsafe: unsafe, UpdatedAt: b.now(),
	})
	if err != nil {
		return fmt.Errorf("registering the merge gate of %s: %w", b.cfg.Target, err)
	}
	if t.Unsafe != "" {
		b.d.Log.Warn("merge gate: not enforced by GitHub", logkey.Environment, t.Env, logkey.Reason, t.Unsafe)
	}
	return nil
}

// verifyProtection returns why branch protection does not enforce the
// gate on the prod branch of any allowed repository ("" when it does):
// the aggregate check must be a required status check, or GitHub lets a
// PR merge whatever the gate shows.
func (b *Bot) verifyProtection(ctx context.Context) (string, error) {
	var why []string
	for _, repo := range b.cfg.Repositories {
		req, err := b.d.Host.RequiredChecks(ctx, repo, b.cfg.ProdBranch)
		if err != nil {
			return "", fmt.Errorf("reading the branch protection of %s:%s: %w", repo, b.cfg.ProdBranch, err)
		}
		if !slices.Contains(req, gate.CheckAggregate) {
			why = append(why, fmt.Sprintf("branch protection of %s:%s does not require the check %q, so GitHub lets a pull request merge while a deploy holds it; add it to the required status checks",
				repo, b.cfg.ProdBranch, gate.CheckAggregate))
		}
	}
	return strings.Join(why, "; "), nil
}

// gateUnsafe is why the target's gate is not enforced ("" when it is or
// when the target is not gated).
func (b *Bot) gateUnsafe(ctx context.Context) (string, error) {
	if !b.gated() {
		return "", nil
	}
	t, ok, err := deploygate.Target(ctx, b.d.Store, b.cfg.Target)
	if err != nil || !ok {
		return "", err
	}
	return t.Unsafe, nil
}

// activeHolds returns the pull request's unreleased holds as the gate
// reads them.
func (b *Bot) activeHolds(ctx context.Context, repo string, n int) ([]state.Hold, []gate.Hold, error) {
	hs, err := b.d.Store.ListHolds(ctx, state.ListHoldsParams{Env: b.cfg.Target, Repo: repo, Number: n, ActiveOnly: true})
	if err != nil {
		return nil, nil, fmt.Errorf("listing the holds on %s#%d: %w", repo, n, err)
	}
	out := make([]gate.Hold, 0, len(hs))
	for _, h := range hs {
		gh := gate.Hold{Attempt: h.AttemptID, Since: h.CreatedAt}
		a, err := b.d.Store.GetDeploy(ctx, h.AttemptID)
		if err != nil {
			return nil, nil, fmt.Errorf("reading deploy %s, which holds %s#%d: %w", h.AttemptID, repo, n, err)
		}
		gh.Origin, gh.PlanID = a.Origin, a.PlanID
		out = append(out, gh)
	}
	return hs, out, nil
}

// markHolds records the render outcome of a PR's holds: rendered when
// the held aggregate was read back (cause nil), or the render's error.
// Renders in this process waiting on the gate are woken.
func (b *Bot) markHolds(ctx context.Context, holds []state.Hold, cause error) error {
	var errs []error
	for _, h := range holds {
		if !h.RenderedAt.IsZero() && cause != nil {
			continue // a later failure does not unrender what GitHub showed
		}
		p := state.MarkHoldRenderedParams{AttemptID: h.AttemptID, Repo: h.Repo, Number: h.Number, Now: b.now()}
		if cause != nil {
			p.Error = cause.Error()
		}
		b.d.Metrics.GateRender(cause == nil)
		if _, err := b.d.Store.MarkHoldRendered(ctx, p); err != nil && !errors.Is(err, state.ErrNotFound) {
			errs = append(errs, fmt.Errorf("recording the hold of %s on %s#%d: %w", h.AttemptID, h.Repo, h.Number, err))
		}
	}
	if cause == nil && len(holds) > 0 {
		b.kick.Notify()
	}
	if h := b.d.Hooks.HoldRendered; h != nil && len(holds) > 0 {
		h(ctx, holds[0].Repo, holds[0].Number, cause)
	}
	return errors.Join(errs...)
}

// settle releases an ended attempt's holds (its own only) and re-plans
// every pull request it released, at the target's generation now (plan
// jobs are unique by head and generation, so settles at one generation
// re-plan each PR once). A settle deferred to an attempt that holds the
// target now completes: that attempt's settle settles the attempts left
// unsettled before it, and the sweep is the backstop.
func (b *Bot) settle(ctx context.Context, id string) error {
	if h := b.d.Hooks.BeforeSettle; h != nil {
		h(ctx, id)
	}
	a, released, err := b.d.Store.SettleDeploy(ctx, state.SettleDeployParams{ID: id, By: state.SettledBySettle, Now: b.now()})
	switch {
	case errors.Is(err, state.ErrSettleDeferred):
		b.d.Log.Info("merge gate: settle deferred to the deploy holding the target now", logkey.Deploy, id)
		return nil
	case err != nil:
		return fmt.Errorf("settling deploy %s: %w", id, err)
	}
	if err := b.replanReleased(ctx, a, released); err != nil {
		return err
	}
	// Attempts that ended while this one held the target deferred their
	// settles to it.
	return b.settleUnsettled(ctx, a.Env, a.ID)
}

// replanReleased re-plans the pull requests an attempt released and
// edits their hold comments.
func (b *Bot) replanReleased(ctx context.Context, a state.DeployAttempt, released []state.Hold) error {
	if len(released) > 0 {
		b.d.Log.Info("merge gate: holds released", logkey.Deploy, a.ID, logkey.Outcome, a.State, logkey.Holds, len(released))
	}
	gen, err := b.targetGeneration(ctx)
	if err != nil {
		return err
	}
	for _, h := range released {
		pc, err := b.d.Store.GetPRCheck(ctx, h.Repo, h.Number, b.cfg.Target)
		if errors.Is(err, state.ErrNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("reading the verdict of %s#%d: %w", h.Repo, h.Number, err)
		}
		if !pc.Closed {
			if err := b.enqueue(ctx, PlanPRJob{Repo: h.Repo, Number: h.Number, HeadSHA: pc.HeadSHA, Generation: gen}); err != nil {
				return err
			}
		}
		if err := b.enqueue(ctx, RenderPRJob{Repo: h.Repo, Number: h.Number, Revision: pc.Revision, Generation: gen, Deploy: a.ID + "/released"}); err != nil {
			return err
		}
		if err := b.enqueue(ctx, HoldCommentJob{AttemptID: a.ID, Repo: h.Repo, Number: h.Number, Released: true}); err != nil {
			return err
		}
	}
	return nil
}

// settleUnsettled enqueues a settle for every ended, unsettled attempt on
// env other than except.
func (b *Bot) settleUnsettled(ctx context.Context, env, except string) error {
	ds, err := b.d.Store.ListDeploys(ctx, state.ListDeploysParams{Env: env,
		States: endedStates, Limit: 200})
	if err != nil {
		return fmt.Errorf("listing the ended deploys of %s: %w", env, err)
	}
	for _, d := range ds {
		if d.ID != except && d.SettledAt.IsZero() && !d.HoldsRecordedAt.IsZero() {
			if err := b.enqueue(ctx, SettleJob{AttemptID: d.ID}); err != nil {
				return err
			}
		}
	}
	return nil
}

// holdComment posts or edits one attempt's hold comment on one PR. It
// never gates the deploy: the check run is the gate, the comment says
// why.
func (b *Bot) holdComment(ctx context.Context, job HoldCommentJob) error {
	a, err := b.d.Store.GetDeploy(ctx, job.AttemptID)
	if err != nil {
		return fmt.Errorf("reading deploy %s: %w", job.AttemptID, err)
	}
	hs, err := b.d.Store.ListHolds(ctx, state.ListHoldsParams{AttemptID: a.ID, Repo: job.Repo, Number: job.Number})
	if err != nil {
		return fmt.Errorf("listing the hold of %s on %s#%d: %w", a.ID, job.Repo, job.Number, err)
	}
	if len(hs) == 0 {
		return nil
	}
	h := hs[0]
	marker := HoldMarker(a.ID)
	if h.Active() && job.Released {
		return nil // an edit enqueued before a newer state; the newer job says it
	}
	// A hold released before its comment was posted gets the released
	// text as its one comment: the PR says it was held and re-planned.
	return b.ensureComment(ctx, job.Repo, job.Number, marker, b.holdCommentBody(ctx, a, h))
}

// holdCommentBody says what holds the pull request, and after the
// release what happens next. User-controlled text is not quoted.
func (b *Bot) holdCommentBody(ctx context.Context, a state.DeployAttempt, h state.Hold) string {
	var sb strings.Builder
	sb.WriteString(HoldMarker(a.ID) + "\n")
	what := "A deploy"
	if a.PlanID != "" {
		what = fmt.Sprintf("A deploy of plan `%s`", a.PlanID)
	}
	if h.Active() {
		fmt.Fprintf(&sb, "⏸️ **Held.** %s to %s is in progress (%s, since %s). While it runs, this pull request's `%s` check is `action_required`: "+
			"its verdict was planned against %s as it was before the deploy. The check re-plans against %s when the deploy settles; merge after that.\n",
			what, a.Env, a.Origin, h.CreatedAt.UTC().Format(time.RFC3339), gate.CheckAggregate, a.Env, a.Env)
	} else {
		gen, err := b.targetGeneration(ctx)
		genText := fmt.Sprintf("generation %d", gen)
		if err != nil {
			genText = "its new generation"
		}
		fmt.Fprintf(&sb, "▶️ **Released.** %s to %s ended (%s) at %s; %s is at %s. This pull request is re-planned against it; its `%s` check turns green only if that plan does.\n",
			what, a.Env, a.State, h.ReleasedAt.UTC().Format(time.RFC3339), a.Env, genText, gate.CheckAggregate)
	}
	if unsafe, err := b.gateUnsafe(ctx); err == nil && unsafe != "" {
		fmt.Fprintf(&sb, "\n> **The merge gate is not enforced**: %s\n", unsafe)
	}
	fmt.Fprintf(&sb, "\n<sub>deploy attempt `%s`</sub>\n", a.ID)
	return clip(sb.String())
}

// Sweep is one round of the merge gate's sweep, the backstop of every
// step a process that died or a job that was discarded left undone: it
// re-reads branch protection; resolves each attempt whose lease expired
// more than the grace ago (promoted if its promotion committed, abandoned
// otherwise) and settles it; settles every ended attempt left unsettled;
// re-arms the render and the comment of every hold not rendered or not
// commented; and re-plans verdicts a settle from a terminal reset. So no
// hold outlives its attempt by more than a sweep period (plus the grace).
func (b *Bot) Sweep(ctx context.Context, round int64) error {
	if !b.gated() {
		return nil
	}
	b.d.Metrics.GateSweep()
	if err := b.RegisterGate(ctx); err != nil {
		return err
	}
	active, err := b.d.Store.ListDeploys(ctx, state.ListDeploysParams{Env: b.cfg.Target,
		States: []string{state.DeployHeld, state.DeployRendered, state.DeployRunning}, Limit: 20})
	if err != nil {
		return fmt.Errorf("sweep: listing the active deploys: %w", err)
	}
	for _, a := range active {
		r, resolved, err := b.d.Store.ResolveDeploy(ctx, state.ResolveDeployParams{ID: a.ID, Grace: b.cfg.SweepGrace, Now: b.now()})
		if err != nil {
			return fmt.Errorf("sweep: resolving deploy %s: %w", a.ID, err)
		}
		if resolved {
			b.d.Log.Warn("merge gate: a deploy whose process died was resolved", logkey.Deploy, r.ID, logkey.Outcome, r.State)
			if r.Repo != "" {
				if err := b.enqueue(ctx, RenderPRJob{Repo: r.Repo, Number: r.Number, Deploy: r.ID + "/" + r.State}); err != nil {
					return err
				}
			}
		}
	}
	if err := b.settleUnsettled(ctx, b.cfg.Target, ""); err != nil {
		return err
	}
	holds, err := b.d.Store.ListHolds(ctx, state.ListHoldsParams{Env: b.cfg.Target, ActiveOnly: true})
	if err != nil {
		return fmt.Errorf("sweep: listing the active holds: %w", err)
	}
	for _, h := range holds {
		if h.RenderedAt.IsZero() {
			if err := b.enqueue(ctx, RenderPRJob{Repo: h.Repo, Number: h.Number, Deploy: h.AttemptID + "/held", Rearm: round}); err != nil {
				return err
			}
		}
		c, err := b.d.Store.GetComment(ctx, h.Repo, h.Number, HoldMarker(h.AttemptID))
		if errors.Is(err, state.ErrNotFound) || (err == nil && !c.Posted) {
			if err := b.enqueue(ctx, HoldCommentJob{AttemptID: h.AttemptID, Repo: h.Repo, Number: h.Number}); err != nil {
				return err
			}
		} else if err != nil {
			return fmt.Errorf("sweep: reading the hold comment of %s on %s#%d: %w", h.AttemptID, h.Repo, h.Number, err)
		}
	}
	if err := b.rearmReleasedComments(ctx); err != nil {
		return err
	}
	return b.replanPending(ctx, holds)
}

// rearmReleasedComments queues the hold comment of every hold of the
// latest ended attempts whose comment was never posted (GitHub was down
// while it was held): each held pull request gets its one comment saying
// it was held and re-planned.
func (b *Bot) rearmReleasedComments(ctx context.Context) error {
	ended, err := b.d.Store.ListDeploys(ctx, state.ListDeploysParams{Env: b.cfg.Target,
		States: endedStates, Limit: 20})
	if err != nil {
		return fmt.Errorf("sweep: listing the ended deploys: %w", err)
	}
	for _, a := range ended {
		if a.SettledAt.IsZero() || a.HoldsRecordedAt.IsZero() {
			continue
		}
		hs, err := b.d.Store.ListHolds(ctx, state.ListHoldsParams{AttemptID: a.ID})
		if err != nil {
			return fmt.Errorf("sweep: listing the holds of %s: %w", a.ID, err)
		}
		for _, h := range hs {
			c, err := b.d.Store.GetComment(ctx, h.Repo, h.Number, HoldMarker(a.ID))
			switch {
			case err == nil && c.Posted:
				continue
			case err != nil && !errors.Is(err, state.ErrNotFound):
				return fmt.Errorf("sweep: reading the hold comment of %s on %s#%d: %w", a.ID, h.Repo, h.Number, err)
			}
			if err := b.enqueue(ctx, HoldCommentJob{AttemptID: a.ID, Repo: h.Repo, Number: h.Number, Released: true}); err != nil {
				return err
			}
		}
	}
	return nil
}

// replanPending plans every open, unheld pull request whose verdict is
// pending (a settle from a terminal reset it, with no serve to re-plan).
func (b *Bot) replanPending(ctx context.Context, holds []state.Hold) error {
	held := map[string]bool{}
	for _, h := range holds {
		held[fmt.Sprintf("%s#%d", h.Repo, h.Number)] = true
	}
	open, err := b.d.Store.ListPRChecks(ctx, state.ListPRChecksParams{Env: b.cfg.Target, OpenOnly: true})
	if err != nil {
		return fmt.Errorf("sweep: listing the open verdicts: %w", err)
	}
	gen, err := b.targetGeneration(ctx)
	if err != nil {
		return err
	}
	for _, pc := range open {
		if pc.Verdict != state.VerdictPending || held[fmt.Sprintf("%s#%d", pc.Repo, pc.Number)] {
			continue
		}
		if err := b.enqueue(ctx, PlanPRJob{Repo: pc.Repo, Number: pc.Number, HeadSHA: pc.HeadSHA, Generation: gen}); err != nil {
			return err
		}
	}
	return nil
}

// openGate renders an attempt's holds and waits for its gate. opened is
// false when the gate did not open in time: the attempt ended failed
// (deploygate), its settle is queued, and its outcome is shown; nothing
// was planned or backfilled.
func (b *Bot) openGate(ctx context.Context, g *deploygate.Attempt) (opened bool, err error) {
	a := g.Attempt()
	// Render the holds here first: a render job may not run while this
	// one waits (one worker, or `gapless github run`'s inline queue). A
	// failed render is recorded on its hold, and its job retries it with
	// backoff (and the sweep re-arms it while the attempt is active).
	for _, h := range g.Holds() {
		if err := b.renderPR(ctx, RenderPRJob{Repo: h.Repo, Number: h.Number}); err != nil {
			b.logPR(h.Repo, h.Number).Warn("merge gate: rendering a hold failed; its job retries it", logkey.Deploy, a.ID, logkey.Error, err)
			if err := b.enqueue(ctx, RenderPRJob{Repo: h.Repo, Number: h.Number, Deploy: a.ID + "/held"}); err != nil {
				return false, b.gateFailed(ctx, g, err)
			}
		}
		if err := b.enqueue(ctx, HoldCommentJob{AttemptID: a.ID, Repo: h.Repo, Number: h.Number}); err != nil {
			return false, b.gateFailed(ctx, g, err)
		}
	}
	if a.Repo != "" {
		if err := b.enqueue(ctx, RenderPRJob{Repo: a.Repo, Number: a.Number, Deploy: a.ID + "/" + a.State}); err != nil {
			return false, b.gateFailed(ctx, g, err)
		}
	}
	err = g.Open(ctx)
	var nerr *deploygate.NotOpenError
	if errors.As(err, &nerr) {
		a, gerr := b.d.Store.GetDeploy(context.WithoutCancel(ctx), a.ID)
		if gerr != nil {
			return false, fmt.Errorf("reading deploy %s: %w", a.ID, gerr)
		}
		b.logPR(a.Repo, a.Number).Warn("merge gate did not open; nothing was deployed", logkey.Deploy, a.ID, logkey.Error, err)
		if err := b.appendEvent(ctx, state.Event{Kind: state.EventDeployFinished, Environment: a.Env, Reason: a.State},
			prEventData{Repo: a.Repo, Number: a.Number, HeadSHA: a.HeadSHA, Deploy: a.ID, Error: a.Error}); err != nil {
			return false, err
		}
		if err := b.deployComment(ctx, a); err != nil {
			return false, err
		}
		if a.Repo != "" {
			return false, b.enqueue(ctx, RenderPRJob{Repo: a.Repo, Number: a.Number, Deploy: a.ID + "/" + a.State})
		}
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if h := b.d.Hooks.GateOpen; h != nil {
		if err := h(ctx, a.ID); err != nil {
			return false, b.gateFailed(ctx, g, err)
		}
	}
	return true, nil
}

// gateFailed ends an attempt whose gate could not be worked (its renders
// not enqueued): failed, settled, with err as the reason.
func (b *Bot) gateFailed(ctx context.Context, g *deploygate.Attempt, err error) error {
	ferr := g.Finish(context.WithoutCancel(ctx), state.FinishDeployParams{State: state.DeployFailed, Error: "merge gate: " + err.Error()})
	return errors.Join(err, ferr)
}
