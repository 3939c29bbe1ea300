package bot

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gapless-dev/gapless/codehost"
	"github.com/gapless-dev/gapless/internal/logkey"
	"github.com/gapless-dev/gapless/state"
)

// handleEvent turns one delivery into work and records its outcome on the
// delivery. It is idempotent: every write it makes is a compare-and-swap,
// and every job it enqueues is unique.
func (b *Bot) handleEvent(ctx context.Context, ev codehost.Event) error {
	outcome, err := b.dispatch(ctx, ev)
	status, msg := state.DeliveryProcessed, ""
	switch {
	case err != nil:
		// The job is retried; the delivery stays received until then.
		return fmt.Errorf("delivery %s (%s %s on %s): %w", ev.DeliveryID, ev.Kind, ev.Action, ev.Repo, err)
	case outcome != "":
		status, msg = state.DeliveryIgnored, outcome
	}
	if ev.DeliveryID == "" {
		return nil // a synthetic event (gapless github run)
	}
	if err := b.d.Store.FinishDelivery(ctx, state.FinishDeliveryParams{ID: ev.DeliveryID, Status: status, Error: msg, Now: b.now()}); err != nil {
		return fmt.Errorf("recording delivery %s processed: %w", ev.DeliveryID, err)
	}
	return nil
}

// dispatch acts on one event; a non-empty outcome says why it was ignored.
func (b *Bot) dispatch(ctx context.Context, ev codehost.Event) (ignored string, err error) {
	switch ev.Kind {
	case "pull_request":
		if ev.PR == nil {
			return "no pull request in the payload", nil
		}
		switch ev.Action {
		case "opened", "synchronize", "reopened", "ready_for_review", "edited":
			return b.prEvent(ctx, ev.PR)
		case "closed":
			return b.prClosed(ctx, ev.PR)
		}
		return "pull_request " + ev.Action + " needs nothing", nil
	case "issue_comment":
		if ev.Action != "created" || !ev.OnPR || ev.Comment == nil {
			return "not a new comment on a pull request", nil
		}
		if strings.HasSuffix(ev.Sender, "[bot]") {
			return "a bot's comment (gapless's own among them) is never a command", nil
		}
		return b.command(ctx, ev)
	case "check_run", "check_suite":
		if ev.Action != "rerequested" {
			return ev.Kind + " " + ev.Action + " needs nothing", nil
		}
		return b.rerun(ctx, ev)
	}
	return ev.Kind + " needs nothing", nil
}

// rerun plans a pull request's head again when a person asks GitHub to
// re-run gapless's checks: its verdict goes back to planning, so the
// checks say so at once, and a plan is queued (a new job: a re-run is
// always a fresh plan, even at the same head and generation).
func (b *Bot) rerun(ctx context.Context, ev codehost.Event) (string, error) {
	if ev.Number == 0 {
		return "a re-run of checks on no pull request", nil
	}
	pr, err := b.d.Host.PullRequest(ctx, ev.Repo, ev.Number)
	if err != nil {
		return "", fmt.Errorf("reading %s#%d: %w", ev.Repo, ev.Number, err)
	}
	if pr.HeadSHA != ev.After {
		return "a re-run of checks on an older head", nil
	}
	for range 5 {
		pc, err := b.d.Store.GetPRCheck(ctx, pr.Repo, pr.Number, b.cfg.Target)
		if errors.Is(err, state.ErrNotFound) {
			return b.prHead(ctx, pr)
		}
		if err != nil {
			return "", fmt.Errorf("reading the verdict of %s#%d: %w", pr.Repo, pr.Number, err)
		}
		_, err = b.d.Store.PutPRCheck(ctx, planningCheck(pr, b.cfg.Target, b.prEnv(pr.Number), pc.Revision, b.now()))
		if errors.Is(err, state.ErrRevisionConflict) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("re-planning %s#%d: %w", pr.Repo, pr.Number, err)
		}
		return b.prHead(ctx, pr)
	}
	return "", fmt.Errorf("re-planning %s#%d: %w", pr.Repo, pr.Number, state.ErrRevisionConflict)
}

// prEvent handles a pull request's head as a delivery reported it.
// Deliveries may arrive late or out of order, so the head recorded is the
// one GitHub says now, read fresh: an older synchronize never moves the
// recorded head back.
func (b *Bot) prEvent(ctx context.Context, payload *codehost.PR) (string, error) {
	if payload.FromFork() {
		return b.prHead(ctx, payload) // refused there, without a call
	}
	pr, err := b.d.Host.PullRequest(ctx, payload.Repo, payload.Number)
	if err != nil {
		return "", fmt.Errorf("reading %s#%d: %w", payload.Repo, payload.Number, err)
	}
	return b.prHead(ctx, pr)
}

// prHead records a pull request's head and queues its plan and its render.
// The verdict goes to planning for the new head at once, so the checks on
// GitHub say "planning" rather than keep a verdict of an older head.
func (b *Bot) prHead(ctx context.Context, pr *codehost.PR) (string, error) {
	if pr.BaseRef != b.cfg.ProdBranch {
		return fmt.Sprintf("base %s is not the prod branch %s", pr.BaseRef, b.cfg.ProdBranch), nil
	}
	if !pr.Open() {
		return "pull request is closed", nil
	}
	if pr.FromFork() {
		// A fork's SQL would run on this server's warehouse with its
		// credentials: never planned, so never green and never deployed.
		b.logPR(pr.Repo, pr.Number).Warn("pull request from a fork is not planned", logkey.Reason, "fork")
		return fmt.Sprintf("pull request from the fork %s: its models would run with this server's credentials, so it is not planned", pr.HeadRepo), nil
	}
	gen, err := b.targetGeneration(ctx)
	if err != nil {
		return "", err
	}
	pc, err := b.recordHead(ctx, pr)
	if err != nil {
		return "", err
	}
	if err := b.enqueue(ctx, PlanPRJob{Repo: pr.Repo, Number: pr.Number, HeadSHA: pr.HeadSHA, Generation: gen}); err != nil {
		return "", fmt.Errorf("enqueueing the plan of %s#%d: %w", pr.Repo, pr.Number, err)
	}
	if err := b.enqueue(ctx, RenderPRJob{Repo: pr.Repo, Number: pr.Number, Revision: pc.Revision, Generation: gen}); err != nil {
		return "", fmt.Errorf("enqueueing the render of %s#%d: %w", pr.Repo, pr.Number, err)
	}
	return "", nil
}

// recordHead stores the PR's head with a planning verdict, unless the
// stored verdict is for that head already (a redelivery, or the reconcile
// job seeing what a delivery recorded). A compare-and-swap lost to another
// writer is re-read and retried.
func (b *Bot) recordHead(ctx context.Context, pr *codehost.PR) (state.PRCheck, error) {
	for range 5 {
		pc, err := b.d.Store.GetPRCheck(ctx, pr.Repo, pr.Number, b.cfg.Target)
		switch {
		case errors.Is(err, state.ErrNotFound):
			pc = state.PRCheck{}
		case err != nil:
			return pc, fmt.Errorf("reading the verdict of %s#%d: %w", pr.Repo, pr.Number, err)
		case pc.HeadSHA == pr.HeadSHA && !pc.Closed:
			return pc, nil
		}
		next, err := b.d.Store.PutPRCheck(ctx, planningCheck(pr, b.cfg.Target, b.prEnv(pr.Number), pc.Revision, b.now()))
		if errors.Is(err, state.ErrRevisionConflict) {
			continue
		}
		if err != nil {
			return pc, fmt.Errorf("recording the head of %s#%d: %w", pr.Repo, pr.Number, err)
		}
		b.logPR(pr.Repo, pr.Number).Info("pull request head recorded", logkey.Head, pr.HeadSHA, logkey.Revision, next.Revision)
		return next, nil
	}
	return state.PRCheck{}, fmt.Errorf("recording the head of %s#%d: %w (five writers in a row won)", pr.Repo, pr.Number, state.ErrRevisionConflict)
}

func planningCheck(pr *codehost.PR, target, env string, rev int64, now time.Time) state.PutPRCheckParams {
	return state.PutPRCheckParams{
		Repo: pr.Repo, Number: pr.Number, Env: target, HeadSHA: pr.HeadSHA, BaseSHA: pr.BaseSHA,
		PREnvironment: env, Verdict: state.VerdictPending,
		ExpectedRevision: rev, Now: now,
	}
}

// prClosed marks the verdict closed, invalidates the PR environment and,
// for a merge into the prod branch with deploy_on_merge, requests a
// deploy.
func (b *Bot) prClosed(ctx context.Context, pr *codehost.PR) (string, error) {
	if err := b.closeVerdict(ctx, pr.Repo, pr.Number); err != nil {
		return "", err
	}
	env := b.prEnv(pr.Number)
	if err := b.invalidate(ctx, env); err != nil {
		return "", err
	}
	b.logPR(pr.Repo, pr.Number).Info("pull request closed; its environment invalidated", logkey.Environment, env)
	if pr.Merged && b.cfg.DeployOnMerge && pr.BaseRef == b.cfg.ProdBranch {
		return "", b.requestMergeDeploy(ctx, pr)
	}
	return "", nil
}

// closeVerdict marks the stored verdict closed (CAS on its revision).
func (b *Bot) closeVerdict(ctx context.Context, repo string, n int) error {
	for range 5 {
		pc, err := b.d.Store.GetPRCheck(ctx, repo, n, b.cfg.Target)
		switch {
		case errors.Is(err, state.ErrNotFound):
			return nil
		case err != nil:
			return fmt.Errorf("reading the verdict of %s#%d: %w", repo, n, err)
		case pc.Closed:
			return nil
		}
		p := putFrom(pc)
		p.Closed = true
		p.Now = b.now()
		_, err = b.d.Store.PutPRCheck(ctx, p)
		if errors.Is(err, state.ErrRevisionConflict) {
			continue
		}
		if err != nil {
			return fmt.Errorf("closing the verdict of %s#%d: %w", repo, n, err)
		}
		return nil
	}
	return fmt.Errorf("closing the verdict of %s#%d: %w", repo, n, state.ErrRevisionConflict)
}

// putFrom is a PutPRCheckParams that rewrites pc as it is, pinned to its
// revision.
func putFrom(pc state.PRCheck) state.PutPRCheckParams {
	return state.PutPRCheckParams{
		Repo: pc.Repo, Number: pc.Number, Env: pc.Env, HeadSHA: pc.HeadSHA, BaseSHA: pc.BaseSHA,
		MergeSHA: pc.MergeSHA, PREnvironment: pc.PREnvironment, PlanID: pc.PlanID,
		PlannedGeneration: pc.PlannedGeneration, Verdict: pc.Verdict, Summary: pc.Summary,
		Detail: pc.Detail, Closed: pc.Closed, ExpectedRevision: pc.Revision,
	}
}

// command acts on a PR comment that is a gapless command.
func (b *Bot) command(ctx context.Context, ev codehost.Event) (string, error) {
	if !b.cfg.EnableDeployCommand {
		return "the deploy command is off (github.enable_deploy_command)", nil
	}
	if !IsDeployCommand(ev.Comment.Body, b.cfg.CommandNamespace) {
		return "not a gapless command", nil
	}
	return "", b.deployCommand(ctx, ev)
}

// IsDeployCommand reports whether a comment body holds the deploy
// command on a line of its own: "/deploy", or "<namespace>/deploy" when a
// namespace is configured.
func IsDeployCommand(body, namespace string) bool {
	want := namespace + "/deploy"
	for line := range strings.SplitSeq(body, "\n") {
		if strings.TrimSpace(line) == want {
			return true
		}
	}
	return false
}
