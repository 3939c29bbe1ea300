package bot

import (
	"context"
	"errors"
	"fmt"

	"github.com/gapless-dev/gapless/internal/logkey"
	"github.com/gapless-dev/gapless/state"
)

// Reconcile compares the code host with the store and queues what a lost
// delivery or a discarded job left undone: GitHub does not redeliver a
// failed webhook. For every allowed repository it plans each open pull
// request into the prod branch whose head has no current verdict, re-plans
// verdicts planned against an older generation of the target, re-arms the
// render of every pull request whose checks lag what the store wants, and
// closes the verdicts of pull requests no longer open.
func (b *Bot) Reconcile(ctx context.Context) error {
	gen, err := b.targetGeneration(ctx)
	if err != nil {
		return err
	}
	round := b.now().Unix()
	open := map[string]bool{}
	for _, repo := range b.cfg.Repositories {
		prs, err := b.d.Host.OpenPullRequests(ctx, repo, b.cfg.ProdBranch)
		if err != nil {
			return fmt.Errorf("reconcile: listing the open pull requests of %s: %w", repo, err)
		}
		for _, pr := range prs {
			open[fmt.Sprintf("%s#%d", pr.Repo, pr.Number)] = true
			pc, err := b.d.Store.GetPRCheck(ctx, pr.Repo, pr.Number, b.cfg.Target)
			switch {
			case errors.Is(err, state.ErrNotFound) || (err == nil && (pc.HeadSHA != pr.HeadSHA || pc.Closed)):
				b.logPR(pr.Repo, pr.Number).Info("reconcile: planning a head no delivery brought", logkey.Head, pr.HeadSHA)
				if _, err := b.prHead(ctx, pr); err != nil {
					return err
				}
			case err != nil:
				return fmt.Errorf("reconcile: reading the verdict of %s#%d: %w", pr.Repo, pr.Number, err)
			case pc.PlannedGeneration != gen || pc.Verdict == state.VerdictPending:
				if err := b.enqueue(ctx, PlanPRJob{Repo: pr.Repo, Number: pr.Number, HeadSHA: pr.HeadSHA, Generation: gen}); err != nil {
					return err
				}
			}
		}
	}
	stored, err := b.d.Store.ListPRChecks(ctx, state.ListPRChecksParams{Env: b.cfg.Target, OpenOnly: true})
	if err != nil {
		return fmt.Errorf("reconcile: listing the stored verdicts: %w", err)
	}
	for _, pc := range stored {
		if !b.cfg.Allowed(pc.Repo) || open[fmt.Sprintf("%s#%d", pc.Repo, pc.Number)] {
			continue
		}
		b.logPR(pc.Repo, pc.Number).Info("reconcile: closing the verdict of a pull request no longer open")
		if err := b.closeVerdict(ctx, pc.Repo, pc.Number); err != nil {
			return err
		}
		if err := b.invalidate(ctx, b.prEnv(pc.Number)); err != nil {
			return err
		}
	}
	lagging, err := b.d.Store.ListCheckRenders(ctx, state.ListCheckRendersParams{LaggingOnly: true})
	if err != nil {
		return fmt.Errorf("reconcile: listing lagging renders: %w", err)
	}
	seen := map[string]bool{}
	for _, r := range lagging {
		k := fmt.Sprintf("%s#%d", r.Key.Repo, r.Key.Number)
		if seen[k] {
			continue
		}
		seen[k] = true
		if err := b.enqueue(ctx, RenderPRJob{Repo: r.Key.Repo, Number: r.Key.Number, Generation: gen, Rearm: round}); err != nil {
			return err
		}
	}
	return nil
}
