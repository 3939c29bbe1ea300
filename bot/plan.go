package bot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/gapless-dev/gapless/codehost"
	"github.com/gapless-dev/gapless/gate"
	"github.com/gapless-dev/gapless/internal/logkey"
	"github.com/gapless-dev/gapless/prplan"
	"github.com/gapless-dev/gapless/queue"
	"github.com/gapless-dev/gapless/state"
)

// mergeabilityWait is how long a plan job waits for GitHub to compute a
// PR's test merge before it looks again (snoozed, not charged an attempt).
const mergeabilityWait = 3 * time.Second

// prEnv is pull request n's environment.
func (b *Bot) prEnv(n int) string { return prplan.EnvName(b.cfg.PREnvironmentName, n) }

// planPR plans one head: it builds the PR environment from the PR's test
// merge commit (the backfill bounded by pr_start) and plans the target
// from it without applying, then stores the verdict pinned to the head
// and to the target's generation the preview was planned against.
//
// A job that finds its head superseded (a newer push), its PR closed, or
// a verdict for its head already planned at the target's current
// generation does nothing: plans coalesce by head and generation. The
// verdict is written as a compare-and-swap on the revision read before
// planning, so a plan that raced a newer push never overwrites the newer
// head's verdict.
func (b *Bot) planPR(ctx context.Context, job PlanPRJob) error {
	log := b.logPR(job.Repo, job.Number).With(logkey.Head, job.HeadSHA)
	pc, err := b.d.Store.GetPRCheck(ctx, job.Repo, job.Number, b.cfg.Target)
	if errors.Is(err, state.ErrNotFound) {
		log.Info("plan skipped: no verdict recorded for the pull request")
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading the verdict of %s#%d: %w", job.Repo, job.Number, err)
	}
	gen, err := b.targetGeneration(ctx)
	if err != nil {
		return err
	}
	switch {
	case pc.Closed:
		log.Info("plan skipped: the pull request is closed")
		return nil
	case pc.HeadSHA != job.HeadSHA:
		log.Info("plan skipped: a newer head was pushed", logkey.Reason, "superseded")
		return nil
	case pc.Verdict != state.VerdictPending && pc.PlannedGeneration == gen:
		log.Info("plan skipped: already planned at this generation", logkey.Generation, gen)
		return nil
	}
	pr, err := b.d.Host.PullRequest(ctx, job.Repo, job.Number)
	if err != nil {
		return fmt.Errorf("reading %s#%d: %w", job.Repo, job.Number, err)
	}
	switch {
	case !pr.Open():
		log.Info("plan skipped: the pull request is closed")
		return nil
	case pr.HeadSHA != job.HeadSHA:
		log.Info("plan skipped: the head moved on GitHub", logkey.Reason, "superseded")
		return nil
	case pr.Mergeable == nil || (pr.MergeCommitSHA == "" && *pr.Mergeable):
		return queue.Snooze(mergeabilityWait)
	}
	if h := b.d.Hooks.BeforePlan; h != nil {
		if err := h(ctx, job.Repo, job.Number, job.HeadSHA); err != nil {
			return err
		}
	}
	v, put, err := b.plan(ctx, pr, gen)
	if err != nil {
		// A transient failure (GitHub unavailable, the job stopped) is
		// retried, not recorded as the PR's fault; the verdict stays
		// planning meanwhile, never green.
		return err
	}
	p := put
	p.ExpectedRevision = pc.Revision
	p.Now = b.now()
	detail, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encoding the verdict: %w", err)
	}
	p.Detail = detail
	next, err := b.d.Store.PutPRCheck(ctx, p)
	if errors.Is(err, state.ErrRevisionConflict) {
		// Another writer moved the verdict while this planned: a newer
		// head, a close, or another plan of this head. Re-run and decide
		// again from what is stored.
		return fmt.Errorf("the verdict of %s#%d changed while it was planned: %w", job.Repo, job.Number, err)
	}
	if err != nil {
		return fmt.Errorf("storing the verdict of %s#%d: %w", job.Repo, job.Number, err)
	}
	log.Info("pull request planned", logkey.Revision, next.Revision, logkey.Generation, v.PlannedGeneration, logkey.Outcome, next.Verdict)
	if err := b.appendEvent(ctx, state.Event{Kind: state.EventPRPlanned, Environment: b.cfg.Target, PlanID: next.PlanID, Reason: next.Verdict},
		prEventData{Repo: pr.Repo, Number: pr.Number, HeadSHA: pr.HeadSHA, Generation: v.PlannedGeneration, PREnvironment: next.PREnvironment}); err != nil {
		return err
	}
	return b.enqueue(ctx, RenderPRJob{Repo: job.Repo, Number: job.Number, Revision: next.Revision, Generation: gen})
}

// plan builds the verdict for pr's head. Every failure is a failed
// verdict (fail closed) that the checks show, except a transient one (the
// code host unavailable, the job's context ended), which is returned to be
// retried.
func (b *Bot) plan(ctx context.Context, pr *codehost.PR, gen int64) (gate.Verdict, state.PutPRCheckParams, error) {
	env := b.prEnv(pr.Number)
	v := gate.Verdict{State: gate.Planned, HeadSHA: pr.HeadSHA, PlannedGeneration: gen}
	put := state.PutPRCheckParams{
		Repo: pr.Repo, Number: pr.Number, Env: b.cfg.Target, HeadSHA: pr.HeadSHA, BaseSHA: pr.BaseSHA,
		MergeSHA: pr.MergeCommitSHA, PREnvironment: env,
	}
	if !*pr.Mergeable {
		v.State = gate.Unmergeable
		put.Verdict = state.VerdictFailure
		put.Summary = "The pull request conflicts with its base."
		return v, put, nil
	}
	root, cleanup, err := b.checkout(ctx, pr.Repo, pr.MergeCommitSHA)
	if transient(ctx, err) {
		return v, put, err
	}
	if err != nil {
		v.Error = err.Error()
		put.Verdict = state.VerdictFailure
		put.Summary = v.Error
		return v, put, nil
	}
	defer cleanup()
	params := prplan.Params{
		Store: b.d.Store, Engine: b.d.Engine, ProjectRoot: root, Clock: b.d.Clock,
		ExecutionTime: b.now(), Logger: b.d.Log, Parser: b.d.Parser,
	}
	envPlan, res, envErr := prplan.BuildEnvironment(ctx, params, env, b.cfg.PRFrom(b.now()))
	if envErr != nil {
		v.Environment = gate.Part{Title: "The PR environment failed to build", Summary: fmt.Sprintf("Building `%s` failed:\n\n```\n%s\n```", env, envErr)}
	} else {
		v.Environment = gate.Part{OK: true, Title: "Built " + env, Summary: prplan.EnvironmentMarkdown(env, envPlan, res)}
	}
	if transient(ctx, envErr) {
		return v, put, envErr
	}
	preview, prevErr := prplan.Preview(ctx, params)
	if transient(ctx, prevErr) {
		return v, put, prevErr
	}
	switch {
	case prevErr != nil:
		v.Preview = gate.Part{Title: "Planning " + b.cfg.Target + " failed", Summary: fmt.Sprintf("Planning %s failed:\n\n```\n%s\n```", b.cfg.Target, prevErr)}
		put.Verdict = state.VerdictFailure
	default:
		v.PlannedGeneration = preview.Expected.Generation
		put.PlanID = preview.ID
		v.Preview = gate.Part{OK: true, Title: previewTitle(len(preview.Changes), len(preview.Backfills)), Summary: prplan.PreviewMarkdown(preview)}
		put.Verdict = state.VerdictSuccess
		if len(preview.Changes) > 0 {
			put.Verdict = state.VerdictChanges
		}
	}
	if envErr != nil {
		put.Verdict = state.VerdictFailure
	}
	put.PlannedGeneration = v.PlannedGeneration
	put.Summary = v.Preview.Summary
	return v, put, nil
}

func previewTitle(changes, backfills int) string {
	if changes == 0 && backfills == 0 {
		return "No changes to prod"
	}
	return fmt.Sprintf("%s changed, %s to backfill", plural(changes, "model"), plural(backfills, "model"))
}

// checkout fetches a commit's files and writes the project they hold to a
// temporary folder.
func (b *Bot) checkout(ctx context.Context, repo, sha string) (string, func(), error) {
	files, err := b.d.Host.Files(ctx, repo, sha)
	if err != nil {
		return "", nil, fmt.Errorf("fetching the files of %s at %s: %w", repo, sha, err)
	}
	root, cleanup, err := prplan.Checkout(files, b.cfg.ProjectDir)
	if err != nil {
		return "", nil, fmt.Errorf("%s at %s: %w", repo, sha, err)
	}
	return root, cleanup, nil
}

// invalidate invalidates a PR environment (the janitor removes it).
func (b *Bot) invalidate(ctx context.Context, env string) error {
	if err := prplan.Invalidate(ctx, b.d.Store, env, b.now()); err != nil {
		return fmt.Errorf("invalidating %s: %w", env, err)
	}
	return nil
}

// verdictOf decodes a stored verdict's gate.Verdict; nil when it has none.
func verdictOf(pc state.PRCheck) *gate.Verdict {
	if pc.Verdict == state.VerdictPending {
		return &gate.Verdict{State: gate.Planning, HeadSHA: pc.HeadSHA}
	}
	if len(pc.Detail) == 0 {
		return nil
	}
	var v gate.Verdict
	if err := json.Unmarshal(pc.Detail, &v); err != nil {
		// An undecodable verdict is no verdict: the checks show planning,
		// never green.
		return nil
	}
	return &v
}

// plural is "1 model", "2 models".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// transient reports whether err is worth retrying rather than showing as
// the pull request's fault: the code host was unavailable, or the job's
// context ended (the process is stopping, or the job timed out).
func transient(ctx context.Context, err error) bool {
	return err != nil && (errors.Is(err, codehost.ErrUnavailable) || ctx.Err() != nil)
}
