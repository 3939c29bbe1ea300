package bot

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gapless-dev/gapless/codehost"
	"github.com/gapless-dev/gapless/deploygate"
	"github.com/gapless-dev/gapless/gate"
	"github.com/gapless-dev/gapless/internal/logkey"
	"github.com/gapless-dev/gapless/prplan"
	"github.com/gapless-dev/gapless/queue"
	"github.com/gapless-dev/gapless/state"
)

// deployBusyWait is how long a deploy waits before it tries again to start
// while another attempt deploys the same environment.
const deployBusyWait = 10 * time.Second

// replyMarker is the hidden marker of the bot's one reply to a command
// comment, so that a retried job edits its reply rather than post another.
func replyMarker(commentID int64) string { return fmt.Sprintf("<!-- gapless:reply:%d -->", commentID) }

// deployMarker is the hidden marker of a deploy attempt's outcome comment.
func deployMarker(id string) string { return fmt.Sprintf("<!-- gapless:deploy:%s -->", id) }

// deployCommand handles /deploy: it checks who asked and whether the pull
// request may be deployed now, and records a pending deploy attempt pinned
// to the PR's head. The attempt's id is derived from the comment, so a
// retried job records the same attempt.
func (b *Bot) deployCommand(ctx context.Context, ev codehost.Event) error {
	repo, n, who := ev.Repo, ev.Number, ev.Sender
	reply := func(text string) error {
		body := replyMarker(ev.Comment.ID) + "\n" + text
		return b.ensureComment(ctx, repo, n, replyMarker(ev.Comment.ID), body)
	}
	perm, err := b.d.Host.Permission(ctx, repo, who)
	if err != nil {
		return fmt.Errorf("reading %s's permission on %s: %w", who, repo, err)
	}
	if !perm.CanWrite() {
		b.logPR(repo, n).Info("deploy refused", logkey.Sender, who, logkey.Reason, "permission")
		return reply(fmt.Sprintf("@%s, thanks — but `/deploy` needs write permission on %s, and you have %s. Ask someone with write access to deploy.", who, repo, perm))
	}
	pr, err := b.d.Host.PullRequest(ctx, repo, n)
	if err != nil {
		return fmt.Errorf("reading %s#%d: %w", repo, n, err)
	}
	if reason := b.refusal(ctx, pr); reason != "" {
		if reason == retryMergeability {
			return queue.Snooze(mergeabilityWait)
		}
		b.logPR(repo, n).Info("deploy refused", logkey.Sender, who, logkey.Reason, reason)
		if err := b.appendEvent(ctx, state.Event{Kind: state.EventDeployRefused, Environment: b.cfg.Target, Reason: reason},
			prEventData{Repo: repo, Number: n, HeadSHA: pr.HeadSHA, Sender: who}); err != nil {
			return err
		}
		return reply(fmt.Sprintf("@%s, this pull request cannot be deployed now: %s.", who, reason))
	}
	id := fmt.Sprintf("%s#%d/comment/%d", repo, n, ev.Comment.ID)
	a, err := b.d.Store.RequestDeploy(ctx, state.RequestDeployParams{
		ID: id, Env: b.cfg.Target, Repo: repo, Number: n, HeadSHA: pr.HeadSHA,
		Origin: fmt.Sprintf("pr:%s#%d@%s", repo, n, pr.HeadSHA), Trigger: state.TriggerDeployCommand,
		RequestedBy: who, Now: b.now(),
	})
	if err != nil {
		return fmt.Errorf("recording the deploy of %s#%d: %w", repo, n, err)
	}
	if err := b.appendEvent(ctx, state.Event{Kind: state.EventDeployRequested, Environment: b.cfg.Target, Reason: state.TriggerDeployCommand},
		prEventData{Repo: repo, Number: n, HeadSHA: a.HeadSHA, Sender: who, Deploy: a.ID}); err != nil {
		return err
	}
	if err := b.d.Host.React(ctx, repo, ev.Comment.ID, "eyes"); err != nil {
		return fmt.Errorf("reacting to the /deploy comment: %w", err)
	}
	b.logPR(repo, n).Info("deploy requested", logkey.Deploy, a.ID, logkey.Sender, who, logkey.Head, a.HeadSHA)
	if err := b.enqueue(ctx, DeployJob{AttemptID: a.ID}); err != nil {
		return fmt.Errorf("enqueueing deploy %s: %w", a.ID, err)
	}
	return b.enqueue(ctx, RenderPRJob{Repo: repo, Number: n, Deploy: a.ID + "/requested"})
}

// retryMergeability is refusal's answer when GitHub has not computed the
// PR's mergeability yet.
const retryMergeability = "mergeability unknown"

// refusal says why pr may not be deployed now ("" when it may): it must be
// open, not a draft, into the prod branch and mergeable; its gapless
// check must be green for its current head at the target's current
// generation; and, with check_if_blocked_on_deploy, GitHub must not say it
// is blocked.
func (b *Bot) refusal(ctx context.Context, pr *codehost.PR) string {
	switch {
	case !pr.Open():
		return "it is closed"
	case pr.Draft:
		return "it is a draft"
	case pr.BaseRef != b.cfg.ProdBranch:
		return fmt.Sprintf("it merges into %s, not the prod branch %s", pr.BaseRef, b.cfg.ProdBranch)
	case pr.Mergeable == nil:
		return retryMergeability
	case !*pr.Mergeable || pr.MergeableState == "dirty":
		return "it conflicts with its base"
	}
	pc, err := b.d.Store.GetPRCheck(ctx, pr.Repo, pr.Number, b.cfg.Target)
	if err != nil {
		return "gapless has no verdict for it yet"
	}
	gen, err := b.targetGeneration(ctx)
	if err != nil {
		return "gapless could not read " + b.cfg.Target + "'s generation"
	}
	agg := gate.Aggregate(gate.Input{Verdict: verdictOf(pc), HeadSHA: pr.HeadSHA, Target: b.cfg.Target, Generation: gen})
	if !agg.Green() {
		return fmt.Sprintf("its gapless check is not green (%s)", strings.ToLower(agg.Title))
	}
	if b.cfg.CheckIfBlocked && pr.MergeableState == "blocked" {
		return "GitHub says it is blocked (a required review or check is missing)"
	}
	return ""
}

// requestMergeDeploy records a deploy of the prod branch after a merge
// (deploy_on_merge). The attempt is pinned to the merge commit; an attempt
// for an older merge that has not started when a newer one is requested
// is cancelled by the deploy job, so merges in a row deploy the newest.
func (b *Bot) requestMergeDeploy(ctx context.Context, pr *codehost.PR) error {
	if pr.MergeCommitSHA == "" {
		return fmt.Errorf("%s#%d merged without a merge commit in the payload", pr.Repo, pr.Number)
	}
	id := fmt.Sprintf("%s#%d/merge/%s", pr.Repo, pr.Number, pr.MergeCommitSHA)
	a, err := b.d.Store.RequestDeploy(ctx, state.RequestDeployParams{
		ID: id, Env: b.cfg.Target, Repo: pr.Repo, Number: pr.Number, HeadSHA: pr.MergeCommitSHA,
		Origin: fmt.Sprintf("merge:%s#%d@%s", pr.Repo, pr.Number, pr.MergeCommitSHA), Trigger: state.TriggerMerge,
		RequestedBy: pr.Author, Now: b.now(),
	})
	if err != nil {
		return fmt.Errorf("recording the deploy of %s#%d's merge: %w", pr.Repo, pr.Number, err)
	}
	if err := b.appendEvent(ctx, state.Event{Kind: state.EventDeployRequested, Environment: b.cfg.Target, Reason: state.TriggerMerge},
		prEventData{Repo: pr.Repo, Number: pr.Number, HeadSHA: a.HeadSHA, Deploy: a.ID}); err != nil {
		return err
	}
	return b.enqueue(ctx, DeployJob{AttemptID: a.ID})
}

// deploy runs one deploy attempt: it starts it (at most one active
// attempt per environment, under a lease renewed while it runs), plans the
// target from the pull request's merge commit and applies it with the
// environment's promotion policy, records the outcome, and after a /deploy
// merges the pull request at the head that was deployed, and only at that
// head.
//
// On a merge-gated target it starts through the gate (openGate): its holds
// are recorded and rendered before anything is planned or backfilled, the
// promotion names the attempt's fence, and its end queues the settle that
// releases its holds. A gate that did not open ends the attempt failed.
//
// A retried job resumes from the attempt's stored state: a promoted
// attempt whose merge is not recorded merges (pinned to the same head); an
// ended attempt only says its outcome again (edited in place); an attempt
// still active elsewhere is left to its lease (and the sweep).
func (b *Bot) deploy(ctx context.Context, id string) error {
	a, err := b.d.Store.GetDeploy(ctx, id)
	if err != nil {
		return fmt.Errorf("reading deploy %s: %w", id, err)
	}
	switch a.State {
	case state.DeployPending:
	case state.DeployPromoted:
		return b.afterPromotion(ctx, a)
	case state.DeployFailed, state.DeployCancelled, state.DeployAbandoned:
		// A retry after the outcome was recorded: say it (once; the
		// comment is edited in place) and show it.
		if err := b.deployComment(ctx, a); err != nil {
			return err
		}
		if a.Repo == "" {
			return nil
		}
		return b.enqueue(ctx, RenderPRJob{Repo: a.Repo, Number: a.Number, Deploy: a.ID + "/" + a.State})
	default:
		return nil
	}
	if a.Trigger == state.TriggerMerge {
		if newer, err := b.newerMergeDeploy(ctx, a); err != nil || newer != "" {
			if err != nil {
				return err
			}
			_, err := b.d.Store.CancelDeploy(ctx, state.CancelDeployParams{ID: a.ID, Reason: "superseded by the deploy of a newer merge, " + newer, Now: b.now()})
			return err
		}
	}
	var g *deploygate.Attempt
	if b.gated() {
		// The merge gate: record the holds, render them, and start only
		// once the gate opens (design invariant 4).
		g, err = deploygate.Begin(ctx, b.gateParams(), state.BeginDeployParams{ID: id, Mode: b.cfg.GateMode, Now: b.now()})
		if err == nil {
			a = g.Attempt()
		}
	} else {
		a, err = b.d.Store.StartDeploy(ctx, state.StartDeployParams{ID: id, Owner: b.d.Owner, TTL: b.cfg.DeployLease, Now: b.now()})
	}
	switch {
	case errors.Is(err, state.ErrDeployActive):
		return queue.Snooze(deployBusyWait)
	case errors.Is(err, state.ErrDeployState):
		return nil // another worker started it
	case err != nil:
		return fmt.Errorf("starting deploy %s: %w", id, err)
	}
	log := b.logPR(a.Repo, a.Number).With(logkey.Deploy, a.ID)
	if g != nil {
		opened, err := b.openGate(ctx, g)
		if err != nil || !opened {
			return err
		}
		a = g.Attempt()
	}
	log.Info("deploy started", logkey.Head, a.HeadSHA)
	if err := b.appendEvent(ctx, state.Event{Kind: state.EventDeployStarted, Environment: a.Env, Reason: a.Trigger},
		prEventData{Repo: a.Repo, Number: a.Number, HeadSHA: a.HeadSHA, Deploy: a.ID}); err != nil {
		return err
	}
	if err := b.enqueue(ctx, RenderPRJob{Repo: a.Repo, Number: a.Number, Deploy: a.ID + "/running"}); err != nil {
		// The deploy goes on: the outcome's render follows it, and the
		// reconcile job re-arms renders.
		log.Warn("enqueueing the render of a running deploy failed", logkey.Error, err)
	}

	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	token := a.LeaseToken
	stopRenew := deploygate.RenewLease(runCtx, b.gateParams(), a.ID, token, cancel)
	var fence *state.GateFence
	if g != nil {
		fence = g.Fence()
	}
	planID, gen, runErr := b.runDeploy(runCtx, a, fence)
	stopRenew()
	if h := b.d.Hooks.AfterApply; h != nil {
		h(ctx, a.ID)
	}
	if cause := context.Cause(runCtx); runErr != nil && cause != nil && errors.Is(cause, state.ErrLeaseLost) {
		return fmt.Errorf("deploy %s lost its lease while it ran: %w", id, cause)
	}
	fin := state.FinishDeployParams{ID: id, Token: token, State: state.DeployPromoted, PlanID: planID, ResultGeneration: gen, Now: b.now()}
	if runErr != nil {
		fin.State, fin.Error = state.DeployFailed, runErr.Error()
		if errors.Is(runErr, errHeadMoved) {
			fin.State = state.DeployCancelled
		}
	}
	if g != nil {
		// Finish enqueues the settle job, which releases the holds and
		// re-plans the held pull requests.
		if err := g.Finish(context.WithoutCancel(ctx), fin); err != nil {
			return err
		}
		a = g.Attempt()
	} else if a, err = b.d.Store.FinishDeploy(context.WithoutCancel(ctx), fin); err != nil {
		return fmt.Errorf("recording the end of deploy %s: %w", id, err)
	}
	log.Info("deploy ended", logkey.Outcome, a.State, logkey.Generation, a.ResultGeneration, logkey.Error, a.Error)
	if err := b.appendEvent(ctx, state.Event{Kind: state.EventDeployFinished, Environment: a.Env, PlanID: a.PlanID, Reason: a.State},
		prEventData{Repo: a.Repo, Number: a.Number, HeadSHA: a.HeadSHA, Deploy: a.ID, Generation: a.ResultGeneration, Error: a.Error}); err != nil {
		return err
	}
	if a.State != state.DeployPromoted {
		if err := b.deployComment(ctx, a); err != nil {
			return err
		}
		return b.enqueue(ctx, RenderPRJob{Repo: a.Repo, Number: a.Number, Deploy: a.ID + "/" + a.State})
	}
	if h := b.d.Hooks.AfterPromote; h != nil {
		if err := h(ctx, a.ID); err != nil {
			return err
		}
	}
	return b.afterPromotion(ctx, a)
}

// errHeadMoved: the pull request's head is no longer the one /deploy
// asked for.
var errHeadMoved = errors.New("the pull request's head moved after /deploy")

// runDeploy plans and applies the target from the attempt's commit.
func (b *Bot) runDeploy(ctx context.Context, a state.DeployAttempt, fence *state.GateFence) (planID string, gen int64, err error) {
	sha := a.HeadSHA
	if a.Trigger == state.TriggerDeployCommand {
		pr, err := b.d.Host.PullRequest(ctx, a.Repo, a.Number)
		if err != nil {
			return "", 0, fmt.Errorf("reading %s#%d: %w", a.Repo, a.Number, err)
		}
		switch {
		case pr.HeadSHA != a.HeadSHA:
			return "", 0, fmt.Errorf("%w: /deploy was for %s, the head is %s now; nothing was deployed", errHeadMoved, shortSHA(a.HeadSHA), shortSHA(pr.HeadSHA))
		case !pr.Open():
			return "", 0, errors.New("the pull request was closed before its deploy started; nothing was deployed")
		case pr.MergeCommitSHA == "":
			return "", 0, errors.New("GitHub has no test merge commit for the pull request; nothing was deployed")
		}
		sha = pr.MergeCommitSHA
	}
	root, cleanup, err := b.checkout(ctx, a.Repo, sha)
	if err != nil {
		return "", 0, err
	}
	defer cleanup()
	pl, res, err := prplan.Deploy(ctx, prplan.Params{
		Store: b.d.Store, Engine: b.d.Engine, ProjectRoot: root, Clock: b.d.Clock,
		ExecutionTime: b.now(), Logger: b.d.Log, Parser: b.d.Parser, Gate: fence,
	})
	if err != nil {
		return "", 0, err
	}
	if res == nil || res.Environment == nil {
		// Nothing to change: the target already serves this project.
		gen, gerr := b.targetGeneration(ctx)
		return pl.ID, gen, gerr
	}
	return res.Environment.PlanID, res.Environment.Generation, nil
}

// afterPromotion finishes a promoted attempt: the merge (after /deploy,
// pinned to the deployed head), the PR environment's invalidation, the
// outcome comment, and a re-plan of every other open pull request, whose
// verdicts were planned against the generation this deploy replaced.
func (b *Bot) afterPromotion(ctx context.Context, a state.DeployAttempt) error {
	if a.Trigger == state.TriggerDeployCommand && b.cfg.MergeMethod != "" && a.MergeSHA == "" && a.MergeError == "" {
		sha, err := b.d.Host.Merge(ctx, a.Repo, a.Number, a.HeadSHA, b.cfg.MergeMethod)
		rec := state.RecordDeployMergeParams{ID: a.ID, MergeSHA: sha, Now: b.now()}
		switch {
		case errors.Is(err, codehost.ErrConflict):
			rec.MergeError = fmt.Sprintf("the head moved after the deploy of %s; a head that was not deployed is never merged. Push nothing more and comment /deploy again, or merge by hand.", shortSHA(a.HeadSHA))
		case errors.Is(err, codehost.ErrNotMergeable):
			rec.MergeError = "GitHub refused the merge (not mergeable now): " + err.Error()
		case err != nil:
			return fmt.Errorf("merging %s#%d at %s: %w", a.Repo, a.Number, a.HeadSHA, err)
		}
		if a, err = b.d.Store.RecordDeployMerge(ctx, rec); err != nil {
			return fmt.Errorf("recording the merge of deploy %s: %w", a.ID, err)
		}
		if err := b.appendEvent(ctx, state.Event{Kind: state.EventDeployMerged, Environment: a.Env, PlanID: a.PlanID, Reason: map[bool]string{true: "merged", false: "not_merged"}[a.MergeSHA != ""]},
			prEventData{Repo: a.Repo, Number: a.Number, HeadSHA: a.HeadSHA, Deploy: a.ID, MergeSHA: a.MergeSHA, Error: a.MergeError}); err != nil {
			return err
		}
	}
	if b.cfg.InvalidateAfterDeploy && a.Trigger == state.TriggerDeployCommand {
		if err := b.invalidate(ctx, b.prEnv(a.Number)); err != nil {
			return err
		}
	}
	if err := b.deployComment(ctx, a); err != nil {
		return err
	}
	if err := b.enqueue(ctx, RenderPRJob{Repo: a.Repo, Number: a.Number, Deploy: a.ID + "/" + a.State, Generation: a.ResultGeneration}); err != nil {
		return err
	}
	return b.replanOpen(ctx, a.ResultGeneration)
}

// replanOpen queues a plan of every open pull request's head at gen,
// except those a deploy holds: the settle that releases a hold re-plans
// its PR, at the generation then, so a held PR is planned once per
// deploy, not once now and again at its release.
func (b *Bot) replanOpen(ctx context.Context, gen int64) error {
	open, err := b.d.Store.ListPRChecks(ctx, state.ListPRChecksParams{Env: b.cfg.Target, OpenOnly: true})
	if err != nil {
		return fmt.Errorf("listing the open pull requests to re-plan: %w", err)
	}
	holds, err := b.d.Store.ListHolds(ctx, state.ListHoldsParams{Env: b.cfg.Target, ActiveOnly: true})
	if err != nil {
		return fmt.Errorf("listing the holds: %w", err)
	}
	held := map[string]bool{}
	for _, h := range holds {
		held[fmt.Sprintf("%s#%d", h.Repo, h.Number)] = true
	}
	for _, pc := range open {
		if held[fmt.Sprintf("%s#%d", pc.Repo, pc.Number)] {
			continue
		}
		if err := b.enqueue(ctx, PlanPRJob{Repo: pc.Repo, Number: pc.Number, HeadSHA: pc.HeadSHA, Generation: gen}); err != nil {
			return err
		}
		if err := b.enqueue(ctx, RenderPRJob{Repo: pc.Repo, Number: pc.Number, Revision: pc.Revision, Generation: gen}); err != nil {
			return err
		}
	}
	return nil
}

// newerMergeDeploy names a pending or running merge deploy on the same
// environment requested after a ("" when none).
func (b *Bot) newerMergeDeploy(ctx context.Context, a state.DeployAttempt) (string, error) {
	ds, err := b.d.Store.ListDeploys(ctx, state.ListDeploysParams{Env: a.Env,
		States: []string{state.DeployPending, state.DeployHeld, state.DeployRendered, state.DeployRunning}, Limit: 50})
	if err != nil {
		return "", fmt.Errorf("listing the deploys of %s: %w", a.Env, err)
	}
	for _, d := range ds {
		if d.ID != a.ID && d.Trigger == state.TriggerMerge && d.CreatedAt.After(a.CreatedAt) {
			return d.ID, nil
		}
	}
	return "", nil
}

// deployComment posts (once) or edits the attempt's outcome comment.
func (b *Bot) deployComment(ctx context.Context, a state.DeployAttempt) error {
	if a.Trigger != state.TriggerDeployCommand {
		return nil
	}
	var text string
	switch a.State {
	case state.DeployPromoted:
		text = fmt.Sprintf("Deployed `%s` to %s (generation %d, plan `%s`).", shortSHA(a.HeadSHA), a.Env, a.ResultGeneration, a.PlanID)
		switch {
		case a.MergeSHA != "":
			text += fmt.Sprintf(" Merged with %s at `%s`.", b.cfg.MergeMethod, shortSHA(a.MergeSHA))
		case a.MergeError != "":
			text += " **Not merged**: " + a.MergeError
		}
	case state.DeployCancelled:
		text = "Deploy cancelled: " + a.Error
	default:
		text = fmt.Sprintf("Deploy %s: %s", a.State, a.Error)
	}
	m := deployMarker(a.ID)
	return b.ensureComment(ctx, a.Repo, a.Number, m, m+"\n"+clip(text))
}
