package bot

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gapless-dev/gapless/codehost"
	"github.com/gapless-dev/gapless/gate"
	"github.com/gapless-dev/gapless/internal/logkey"
	"github.com/gapless-dev/gapless/state"
)

// SummaryMarker is the hidden marker of a pull request's one sticky
// summary comment.
const SummaryMarker = "<!-- gapless:summary -->"

// renderRounds bounds how often one render job re-reads the store when
// what it should show moved while it rendered.
const renderRounds = 4

// commentClaimTTL is how long a claim to post a comment excludes others.
const commentClaimTTL = 2 * time.Minute

// renderPR brings one pull request's check runs and its sticky comment on
// the code host up to what the store says now.
//
// Invariants it keeps:
//   - what it shows is computed when it runs (gate.Desired of the stored
//     verdict and the target's generation now), never what a job was
//     enqueued with, so a late job renders the newest state;
//   - a check render counts as done only when the code host's read-back
//     shows it (MarkCheckRendered after CheckRuns); any error in between
//     returns the error, so the job is retried: nothing is logged and
//     forgotten;
//   - when the desired state moved while it rendered (its mark was
//     refused, or the store's revision changed), it renders again.
func (b *Bot) renderPR(ctx context.Context, job RenderPRJob) error {
	for range renderRounds {
		again, err := b.renderOnce(ctx, job.Repo, job.Number)
		if err != nil || !again {
			return err
		}
	}
	return fmt.Errorf("rendering %s#%d: what it should show kept moving for %d rounds; retrying", job.Repo, job.Number, renderRounds)
}

// renderOnce renders once; again says the store moved meanwhile.
func (b *Bot) renderOnce(ctx context.Context, repo string, n int) (again bool, err error) {
	pc, err := b.d.Store.GetPRCheck(ctx, repo, n, b.cfg.Target)
	if errors.Is(err, state.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading the verdict of %s#%d: %w", repo, n, err)
	}
	gen, err := b.targetGeneration(ctx)
	if err != nil {
		return false, err
	}
	holds, gholds, err := b.activeHolds(ctx, repo, n)
	if err != nil {
		return false, err
	}
	unsafe, err := b.gateUnsafe(ctx)
	if err != nil {
		return false, err
	}
	dep, err := b.latestDeploy(ctx, repo, n, pc.HeadSHA)
	if err != nil {
		return false, err
	}
	var deployed *gate.Deployed
	if dep != nil && (!dep.PromotedAt.IsZero() || dep.State == state.DeployPromoted) {
		deployed = &gate.Deployed{HeadSHA: dep.HeadSHA, Generation: dep.ResultGeneration}
	}
	var runs []gate.Run
	if !pc.Closed {
		// A closed PR's verdict is no longer shown or re-planned; only its
		// deploy check still moves (a deploy's merge closes it).
		runs = gate.Desired(gate.Input{Verdict: verdictOf(pc), HeadSHA: pc.HeadSHA, Target: b.cfg.Target, Generation: gen,
			Holds: gholds, Unsafe: unsafe, Deployed: deployed})
	}
	// fail records a render error on the PR's holds too: a deploy waiting
	// for them says which PR's render failed, and why.
	fail := func(err error) error {
		return errors.Join(err, b.markHolds(ctx, holds, err))
	}
	if dep != nil {
		runs = append(runs, deployRun(*dep))
	}
	if !pc.Closed && gen != pc.PlannedGeneration && pc.Verdict != state.VerdictPending && len(holds) == 0 {
		// The target moved since this head was planned: plan it again (a
		// unique job, so every render at this generation asks once). A
		// held PR is re-planned by its hold's settle.
		if err := b.enqueue(ctx, PlanPRJob{Repo: repo, Number: n, HeadSHA: pc.HeadSHA, Generation: gen}); err != nil {
			return false, fmt.Errorf("enqueueing the re-plan of %s#%d: %w", repo, n, err)
		}
	}

	type pending struct {
		key state.CheckKey
		rev int64
		run gate.Run
	}
	var lag []pending
	for _, r := range runs {
		key := state.CheckKey{Repo: repo, Number: n, HeadSHA: pc.HeadSHA, Name: r.Name}
		rec, err := b.d.Store.SetCheckDesired(ctx, state.SetCheckDesiredParams{Key: key, Desired: desiredOf(r), Now: b.now()})
		if err != nil {
			return false, fmt.Errorf("storing the desired %q check of %s#%d: %w", r.Name, repo, n, err)
		}
		if rec.RenderedRevision < rec.DesiredRevision {
			lag = append(lag, pending{key, rec.DesiredRevision, r})
		}
	}
	log := b.logPR(repo, n).With(logkey.Head, pc.HeadSHA)
	for _, p := range lag {
		if _, err := b.d.Host.UpsertCheckRun(ctx, repo, checkRunOf(pc.HeadSHA, p.run)); err != nil {
			return false, fail(b.renderFailed(ctx, p.key, p.rev, fmt.Errorf("writing the %q check of %s#%d: %w", p.run.Name, repo, n, err)))
		}
	}
	if len(lag) > 0 {
		shown, err := b.d.Host.CheckRuns(ctx, repo, pc.HeadSHA)
		if err != nil {
			readErr := fmt.Errorf("reading back the checks of %s#%d: %w", repo, n, err)
			for _, p := range lag {
				if ferr := b.d.Store.MarkCheckRenderFailed(ctx, state.MarkCheckRenderFailedParams{Key: p.key, Revision: p.rev, Error: readErr.Error(), Now: b.now()}); ferr != nil {
					readErr = errors.Join(readErr, fmt.Errorf("recording the render failure: %w", ferr))
				}
			}
			return false, fail(readErr)
		}
		for _, p := range lag {
			got, ok := findRun(shown, p.run.Name)
			if !ok || !sameRun(got, p.run) {
				return false, fail(b.renderFailed(ctx, p.key, p.rev, fmt.Errorf("the %q check of %s#%d reads back as %s/%s %q, not %s/%s %q",
					p.run.Name, repo, n, got.Status, got.Conclusion, got.Title, p.run.Status, p.run.Conclusion, p.run.Title)))
			}
			applied, err := b.d.Store.MarkCheckRendered(ctx, state.MarkCheckRenderedParams{Key: p.key, Revision: p.rev, CheckRunID: got.ID, Now: b.now()})
			if err != nil {
				return false, fmt.Errorf("recording the %q check of %s#%d rendered: %w", p.run.Name, repo, n, err)
			}
			if !applied {
				again = true
			}
			log.Debug("check rendered", logkey.Check, p.run.Name, logkey.Revision, p.rev)
		}
	}
	if len(holds) > 0 && !pc.Closed {
		// Every run this pass wanted is rendered (read back) or was already:
		// GitHub shows the held aggregate on the PR's head.
		if err := b.markHolds(ctx, holds, nil); err != nil {
			return false, err
		}
	}
	if !pc.Closed {
		if err := b.ensureComment(ctx, repo, n, SummaryMarker, b.summaryBody(pc, runs, dep, unsafe)); err != nil {
			return false, err
		}
	}
	after, err := b.d.Store.GetPRCheck(ctx, repo, n, b.cfg.Target)
	if err != nil {
		return false, fmt.Errorf("re-reading the verdict of %s#%d: %w", repo, n, err)
	}
	genAfter, err := b.targetGeneration(ctx)
	if err != nil {
		return false, err
	}
	return again || after.Revision != pc.Revision || genAfter != gen, nil
}

// renderFailed records a render's error on its check and returns it.
func (b *Bot) renderFailed(ctx context.Context, key state.CheckKey, rev int64, cause error) error {
	if err := b.d.Store.MarkCheckRenderFailed(ctx, state.MarkCheckRenderFailedParams{Key: key, Revision: rev, Error: cause.Error(), Now: b.now()}); err != nil {
		return errors.Join(cause, fmt.Errorf("recording the render failure: %w", err))
	}
	return cause
}

func desiredOf(r gate.Run) state.CheckDesired {
	return state.CheckDesired{Status: string(r.Status), Conclusion: string(r.Conclusion), Title: r.Title, Summary: clip(r.Summary)}
}

func checkRunOf(head string, r gate.Run) codehost.CheckRun {
	return codehost.CheckRun{
		HeadSHA: head, Name: r.Name, Status: codehost.CheckStatus(r.Status),
		Conclusion: codehost.Conclusion(r.Conclusion), Title: r.Title, Summary: clip(r.Summary),
	}
}

func findRun(runs []codehost.CheckRun, name string) (codehost.CheckRun, bool) {
	for _, r := range runs {
		if r.Name == name {
			return r, true
		}
	}
	return codehost.CheckRun{}, false
}

// sameRun: the code host shows what was desired.
func sameRun(got codehost.CheckRun, want gate.Run) bool {
	return string(got.Status) == string(want.Status) && string(got.Conclusion) == string(want.Conclusion) &&
		got.Title == want.Title && got.Summary == clip(want.Summary)
}

// clip keeps a text within what the code host accepts: at most
// codehost.MaxBodyLength bytes (GitHub counts a check run's summary in
// bytes), cut at a character boundary, with a note saying so.
func clip(s string) string {
	const note = "\n\n…(truncated: run `gapless plan prod` for the whole plan)"
	if len(s) <= codehost.MaxBodyLength {
		return s
	}
	cut := codehost.MaxBodyLength - len(note)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + note
}

// latestDeploy is the newest deploy attempt of the pull request at head,
// nil when there is none.
func (b *Bot) latestDeploy(ctx context.Context, repo string, n int, head string) (*state.DeployAttempt, error) {
	ds, err := b.d.Store.ListDeploys(ctx, state.ListDeploysParams{Repo: repo, Number: n, Limit: 5})
	if err != nil {
		return nil, fmt.Errorf("listing the deploys of %s#%d: %w", repo, n, err)
	}
	for _, d := range ds {
		if d.HeadSHA == head {
			return &d, nil
		}
	}
	return nil, nil
}

// deployRun is the deploy check of an attempt.
func deployRun(a state.DeployAttempt) gate.Run {
	r := gate.Run{Name: gate.CheckDeploy}
	switch a.State {
	case state.DeployPending:
		r.Status, r.Title = gate.StatusInProgress, "Deploy queued"
		r.Summary = fmt.Sprintf("%s asked for a deploy of `%s`; it starts when %s is free.", a.RequestedBy, shortSHA(a.HeadSHA), a.Env)
	case state.DeployHeld, state.DeployRendered:
		r.Status, r.Title = gate.StatusInProgress, "Waiting for the merge gate"
		r.Summary = fmt.Sprintf("The deploy of `%s` to %s holds the other open pull requests' checks; it starts once GitHub shows the holds.", shortSHA(a.HeadSHA), a.Env)
	case state.DeployRunning:
		r.Status, r.Title = gate.StatusInProgress, "Deploying to "+a.Env
		r.Summary = fmt.Sprintf("Deploying `%s` to %s.", shortSHA(a.HeadSHA), a.Env)
	case state.DeployPromoted:
		r.Status, r.Conclusion = gate.StatusCompleted, gate.ConclusionSuccess
		r.Title = fmt.Sprintf("Deployed to %s (generation %d)", a.Env, a.ResultGeneration)
		r.Summary = fmt.Sprintf("Plan `%s` promoted %s to generation %d.", a.PlanID, a.Env, a.ResultGeneration)
		switch {
		case a.MergeSHA != "":
			r.Summary += fmt.Sprintf(" Merged at `%s`.", shortSHA(a.MergeSHA))
		case a.MergeError != "":
			r.Summary += " Not merged: " + a.MergeError
		}
	case state.DeployCancelled:
		r.Status, r.Conclusion, r.Title = gate.StatusCompleted, gate.ConclusionCancelled, "Deploy cancelled"
		r.Summary = a.Error
	default: // failed, abandoned
		r.Status, r.Conclusion, r.Title = gate.StatusCompleted, gate.ConclusionFailure, "Deploy "+a.State
		r.Summary = a.Error
	}
	return r
}

func shortSHA(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}

// summaryBody is the sticky summary comment: the checks, the preview, and
// how to deploy.
func (b *Bot) summaryBody(pc state.PRCheck, runs []gate.Run, dep *state.DeployAttempt, unsafe string) string {
	var sb strings.Builder
	sb.WriteString(SummaryMarker + "\n### gapless\n\n")
	if unsafe != "" {
		fmt.Fprintf(&sb, "> [!WARNING]\n> **The merge gate is not enforced**: %s\n\n", unsafe)
	}
	fmt.Fprintf(&sb, "Head `%s` · PR environment `%s`", shortSHA(pc.HeadSHA), pc.PREnvironment)
	if pc.Verdict != state.VerdictPending {
		fmt.Fprintf(&sb, " · planned against %s generation %d", b.cfg.Target, pc.PlannedGeneration)
	}
	sb.WriteString("\n\n| check | state | |\n|---|---|---|\n")
	for _, r := range runs {
		st := string(r.Conclusion)
		if r.Status != gate.StatusCompleted {
			st = string(r.Status)
		}
		fmt.Fprintf(&sb, "| %s | %s | %s |\n", r.Name, st, strings.ReplaceAll(r.Title, "|", "\\|"))
	}
	if v := verdictOf(pc); v != nil && v.State == gate.Planned && v.Preview.Summary != "" {
		sb.WriteString("\n<details><summary>Prod plan preview</summary>\n\n")
		sb.WriteString(v.Preview.Summary)
		sb.WriteString("\n\n</details>\n")
	}
	if b.cfg.EnableDeployCommand {
		fmt.Fprintf(&sb, "\nComment `%s/deploy` to deploy this pull request to %s", b.cfg.CommandNamespace, b.cfg.Target)
		if b.cfg.MergeMethod != "" {
			fmt.Fprintf(&sb, " and merge it (%s)", b.cfg.MergeMethod)
		}
		sb.WriteString("; it needs write permission.\n")
	}
	if dep != nil {
		fmt.Fprintf(&sb, "\nLatest deploy: %s.\n", deployRun(*dep).Title)
	}
	return clip(sb.String())
}

// ensureComment keeps exactly one comment carrying marker on a pull
// request, with body. The store's claim makes posters take turns; the
// all-pages marker search finds a comment posted by a poster that died
// before recording it, so it is edited, never posted again.
func (b *Bot) ensureComment(ctx context.Context, repo string, n int, marker, body string) error {
	claim, err := b.d.Store.ClaimComment(ctx, state.ClaimCommentParams{Repo: repo, Number: n, Marker: marker, Owner: b.claimOwner(ctx), TTL: commentClaimTTL, Now: b.now()})
	if err != nil {
		return fmt.Errorf("claiming the comment %s on %s#%d: %w", marker, repo, n, err)
	}
	switch {
	case claim.Posted:
		_, err := b.d.Host.EditComment(ctx, repo, claim.CommentID, body)
		if err == nil {
			return nil
		}
		if !errors.Is(err, codehost.ErrNotFound) {
			return fmt.Errorf("editing comment %d on %s#%d: %w", claim.CommentID, repo, n, err)
		}
		// Someone deleted it: fall back to the marker search, which posts
		// a new one only if no other comment carries the marker.
		c, _, err := codehost.EnsureComment(ctx, b.d.Host, repo, n, marker, body)
		if err != nil {
			return fmt.Errorf("re-posting the comment %s on %s#%d: %w", marker, repo, n, err)
		}
		b.logPR(repo, n).Warn("sticky comment was deleted; posted again", logkey.Comment, c.ID)
		return nil
	case claim.Held:
		return fmt.Errorf("the comment %s on %s#%d is being posted by another worker; retrying", marker, repo, n)
	}
	c, created, err := codehost.EnsureComment(ctx, b.d.Host, repo, n, marker, body)
	if err != nil {
		return fmt.Errorf("posting the comment %s on %s#%d: %w", marker, repo, n, err)
	}
	if h := b.d.Hooks.AfterComment; h != nil {
		if err := h(ctx, repo, n, marker); err != nil {
			return err
		}
	}
	if err := b.d.Store.MarkCommentPosted(ctx, state.MarkCommentPostedParams{Repo: repo, Number: n, Marker: marker, Token: claim.Token, CommentID: c.ID, Now: b.now()}); err != nil {
		return fmt.Errorf("recording the comment %s on %s#%d posted: %w", marker, repo, n, err)
	}
	b.logPR(repo, n).Info("comment posted", logkey.Comment, c.ID, logkey.Outcome, map[bool]string{true: "created", false: "found"}[created])
	return nil
}
