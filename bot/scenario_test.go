package bot_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/bot"
	"github.com/gapless-dev/gapless/codehost"
	"github.com/gapless-dev/gapless/codehost/githubfake"
	"github.com/gapless-dev/gapless/gate"
	"github.com/gapless-dev/gapless/queue"
	"github.com/gapless-dev/gapless/state"
)

// stores runs a scenario on SQLite state and on PostgreSQL state.
func stores(t *testing.T, scenario func(t *testing.T, o options)) {
	t.Run("sqlite", func(t *testing.T) { t.Parallel(); scenario(t, options{}) })
	t.Run("postgres", func(t *testing.T) { t.Parallel(); scenario(t, options{postgres: true}) })
}

func changed() map[string]string {
	return map[string]string{"models/events.sql": strings.Replace(project("10.0")["models/events.sql"], "10.0 AS amount", "12.5 AS amount", 1)}
}

func TestScenarioPROpened(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, o options) {
		// Scenario: a data engineer opens a pull request that changes
		// demo.events. gapless builds its environment analytics_<n> with
		// the last day backfilled, writes three green checks on its head
		// with the prod preview, and posts one summary comment.
		h := newHarness(t, o)
		n := h.openPR("amount", changed())
		h.requireGreen(n)
		runs := h.checks(n)
		require.Contains(t, runs[gate.CheckPreview].Summary, "demo.events")
		require.Contains(t, runs[gate.CheckAggregate].Title, "planned against prod generation 0")

		env, err := h.store.GetEnvironment(h.ctx, fmt.Sprintf("analytics_%d", n))
		require.NoError(t, err)
		require.False(t, env.Invalidated)
		summary := h.withMarker(n, bot.SummaryMarker)
		require.Len(t, summary, 1)
		require.Contains(t, summary[0].Body, "gapless / prod plan preview")

		pc, err := h.store.GetPRCheck(h.ctx, repoName, n, "prod")
		require.NoError(t, err)
		require.Equal(t, h.fake.PR(repoName, n).HeadSHA, pc.HeadSHA, "the verdict records the head it was planned at")
		require.Equal(t, int64(0), pc.PlannedGeneration, "and prod's generation (none yet)")
		require.Len(t, h.events(state.EventPRPlanned), 1)
	})
}

func TestScenarioPushReplansAndEditsTheComment(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, o options) {
		// Scenario: after the PR is green, its author pushes another
		// change. The checks are planned again on the new head, the
		// summary comment is edited in place (never posted twice), and the
		// verdict records the new head.
		h := newHarness(t, o)
		n := h.openPR("amount", changed())
		first := h.fake.PR(repoName, n).HeadSHA
		before := h.withMarker(n, bot.SummaryMarker)
		require.Len(t, before, 1)

		h.fake.Commit(repoName, "amount", map[string]string{"models/regions.sql": strings.Replace(project("10.0")["models/regions.sql"], "'south'", "'south'), (3, 'east'", 1)}, "add a region")
		h.idle()
		head := h.fake.PR(repoName, n).HeadSHA
		require.NotEqual(t, first, head)
		h.requireGreen(n)
		after := h.withMarker(n, bot.SummaryMarker)
		require.Len(t, after, 1, "the summary is edited, not posted again")
		require.Equal(t, before[0].ID, after[0].ID)
		require.Contains(t, after[0].Body, head[:12])
		require.Contains(t, h.checks(n)[gate.CheckPreview].Summary, "ref.regions")
	})
}

func TestScenarioBusyPRFindsItsSummaryAcrossPages(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, o options) {
		// Scenario: a PR already has 150 comments when gapless first sees it
		// (the delivery was lost; the reconcile job finds it). The summary is
		// posted as comment 151, on the second page, and the worker dies
		// before it records that. The retried job must find the summary by its
		// marker across every page (the per-issue list is oldest first and
		// ignores sort=desc) and edit it, never post it again.
		var crashes atomic.Int32
		o.hooks = &bot.Hooks{AfterComment: func(_ context.Context, _ string, _ int, marker string) error {
			if marker == bot.SummaryMarker && crashes.Add(1) <= 2 {
				return errors.New("worker died after posting the comment")
			}
			return nil
		}}
		h := newHarness(t, o)
		h.fake.SetWebhook("", nil)
		h.fake.Commit(repoName, "busy", changed(), "busy change")
		n := h.fake.OpenPR(repoName, githubfake.PRSpec{Title: "busy", Author: "carol", Head: "busy", Base: "main"})
		for i := range 150 {
			h.fake.AddComment(repoName, n, "carol", fmt.Sprintf("comment %d", i))
		}
		_, err := h.srv.Queue.Insert(h.ctx, bot.ReconcileJob{Round: 42}, &queue.InsertOpts{Unique: true})
		require.NoError(t, err)
		h.idle()
		require.GreaterOrEqual(t, crashes.Load(), int32(3), "the hook crashed the first two posts")
		summary := h.withMarker(n, bot.SummaryMarker)
		require.Len(t, summary, 1, "exactly one summary whatever the retries")
		require.Len(t, h.fake.Comments(repoName, n), 151)
		h.requireGreen(n)
	})
}

func TestScenarioDeployByWriter(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, o options) {
		// Scenario: a writer comments /deploy on a green PR. gapless plans
		// prod from the PR's merge commit, promotes it, merges the PR at
		// exactly the head it deployed, invalidates the PR environment, and
		// says so on the PR.
		h := newHarness(t, o)
		n := h.openPR("amount", changed())
		h.requireGreen(n)
		head := h.fake.PR(repoName, n).HeadSHA
		h.fake.AddComment(repoName, n, writer, "/deploy")
		h.idle()

		gen, _, err := h.store.EnvironmentGeneration(h.ctx, "prod")
		require.NoError(t, err)
		require.Equal(t, int64(1), gen, "prod promoted once")
		pr := h.fake.PR(repoName, n)
		require.True(t, pr.Merged, "the PR is merged after its deploy")
		require.Len(t, h.fake.Requests("PUT /repos/{owner}/{repo}/pulls/{n}/merge"), 1)
		merge := h.fake.Requests("PUT /repos/{owner}/{repo}/pulls/{n}/merge")[0]
		require.Contains(t, string(merge.Body), head, "merged pinned to the deployed head")
		require.Contains(t, string(merge.Body), "squash")

		ds, err := h.store.ListDeploys(h.ctx, state.ListDeploysParams{Repo: repoName, Number: n})
		require.NoError(t, err)
		require.Len(t, ds, 1)
		require.Equal(t, state.DeployPromoted, ds[0].State)
		require.Equal(t, head, ds[0].HeadSHA)
		require.NotEmpty(t, ds[0].MergeSHA)
		env, err := h.store.GetEnvironment(h.ctx, fmt.Sprintf("analytics_%d", n))
		require.NoError(t, err)
		require.True(t, env.Invalidated, "the PR environment is invalidated after the deploy")
		outcome := h.withMarker(n, "<!-- gapless:deploy:")
		require.Len(t, outcome, 1)
		require.Contains(t, outcome[0].Body, "Deployed")
		for _, k := range []string{state.EventDeployRequested, state.EventDeployStarted, state.EventDeployFinished, state.EventDeployMerged} {
			require.Len(t, h.events(k), 1, k)
		}
		require.Equal(t, codehost.ConclusionSuccess, h.checks(n)[gate.CheckDeploy].Conclusion)
	})
}

func TestScenarioDeployByReaderIsRefused(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, o options) {
		// Scenario: someone with read permission comments /deploy. gapless
		// answers politely, once, and deploys nothing.
		h := newHarness(t, o)
		n := h.openPR("amount", changed())
		id := h.fake.AddComment(repoName, n, reader, "please\n/deploy\n")
		h.idle()
		reply := h.withMarker(n, fmt.Sprintf("<!-- gapless:reply:%d -->", id))
		require.Len(t, reply, 1)
		require.Contains(t, reply[0].Body, "needs write permission")
		_, _, err := h.store.EnvironmentGeneration(h.ctx, "prod")
		require.ErrorIs(t, err, state.ErrNotFound, "prod was not deployed")
		ds, err := h.store.ListDeploys(h.ctx, state.ListDeploysParams{Repo: repoName})
		require.NoError(t, err)
		require.Empty(t, ds)
		require.False(t, h.fake.PR(repoName, n).Merged)
	})
}

func TestScenarioPushAfterDeployIsNotMerged(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, o options) {
		// Scenario: a writer comments /deploy; while prod is being deployed,
		// the author pushes another commit. The deploy promotes what was
		// asked for, but the PR is not merged (the head that would merge was
		// never deployed), and gapless says why on the PR.
		var h *harness
		o.hooks = &bot.Hooks{AfterPromote: func(context.Context, string) error {
			h.fake.Commit(repoName, "amount", map[string]string{"NOTES.md": "late push\n"}, "late push")
			return nil
		}}
		h = newHarness(t, o)
		n := h.openPR("amount", changed())
		h.fake.AddComment(repoName, n, writer, "/deploy")
		h.idle()
		pr := h.fake.PR(repoName, n)
		require.False(t, pr.Merged, "a head pushed after /deploy is never merged")
		ds, err := h.store.ListDeploys(h.ctx, state.ListDeploysParams{Repo: repoName, Number: n})
		require.NoError(t, err)
		require.Len(t, ds, 1)
		require.Equal(t, state.DeployPromoted, ds[0].State)
		require.Empty(t, ds[0].MergeSHA)
		require.Contains(t, ds[0].MergeError, "head moved")
		outcome := h.withMarker(n, "<!-- gapless:deploy:")
		require.Len(t, outcome, 1)
		require.Contains(t, outcome[0].Body, "Not merged")
	})
}

func TestScenarioClosedPRInvalidatesItsEnvironment(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, o options) {
		// Scenario: a PR is closed without merging. Its environment is
		// invalidated (the janitor drops it) and its verdict is closed.
		h := newHarness(t, o)
		n := h.openPR("amount", changed())
		h.fake.ClosePR(repoName, n)
		h.idle()
		env, err := h.store.GetEnvironment(h.ctx, fmt.Sprintf("analytics_%d", n))
		require.NoError(t, err)
		require.True(t, env.Invalidated)
		pc, err := h.store.GetPRCheck(h.ctx, repoName, n, "prod")
		require.NoError(t, err)
		require.True(t, pc.Closed)
	})
}

func TestScenarioRedeliveredWebhookMakesNoSecondJob(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, o options) {
		// Scenario: GitHub (or an attacker replaying a captured delivery)
		// sends a delivery again. It is answered 200 and enqueues nothing.
		h := newHarness(t, o)
		h.openPR("amount", changed())
		var opened githubfake.Delivery
		for _, d := range h.fake.Deliveries() {
			if d.Event == "pull_request" {
				opened = d
			}
		}
		require.Equal(t, http.StatusAccepted, opened.Status)
		status, err := h.fake.Redeliver(opened.ID)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, status, "a replay is answered, and does nothing")
		h.idle()
		jobs, err := h.srv.Queue.Jobs(h.ctx, queue.JobFilter{Kinds: []string{bot.KindDelivery}, Limit: 1000})
		require.NoError(t, err)
		var runs int
		for _, j := range jobs {
			if strings.Contains(string(j.Args), opened.ID) {
				runs++
			}
		}
		require.Equal(t, 1, runs, "one job for the delivery, however often it arrives")
		got, err := h.store.ListDeliveries(h.ctx, state.ListDeliveriesParams{Repo: repoName, Event: "pull_request"})
		require.NoError(t, err)
		require.Len(t, got, 1)
		require.Equal(t, state.DeliveryProcessed, got[0].Status)
	})
}

func TestScenarioPanickingJobIsDiscardedAndTheProcessLives(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, o options) {
		// Scenario: planning one PR panics (a bug). Its job is retried up to
		// its attempt cap and discarded; the process keeps serving, another PR
		// is planned green, and the panicking PR's checks are never green.
		var boom atomic.Value
		boom.Store("")
		o.hooks = &bot.Hooks{BeforePlan: func(_ context.Context, _ string, _ int, head string) error {
			if head == boom.Load().(string) {
				panic("a bug in planning")
			}
			return nil
		}}
		h := newHarness(t, o)
		boom.Store(h.fake.Commit(repoName, "boom", changed(), "boom"))
		bad := h.fake.OpenPR(repoName, githubfake.PRSpec{Title: "boom", Author: writer, Head: "boom", Base: "main"})
		good := h.openPR("fine", map[string]string{"NOTES.md": "docs only\n"})
		h.idle()

		jobs, err := h.srv.Queue.Jobs(h.ctx, queue.JobFilter{Kinds: []string{bot.KindPlanPR}, States: []string{queue.StateDiscarded}})
		require.NoError(t, err)
		require.Len(t, jobs, 1, "the panicking plan job is discarded at its cap")
		require.Equal(t, bot.PlanMaxAttempts, jobs[0].Attempt)
		require.Len(t, jobs[0].Errors, bot.PlanMaxAttempts, "every attempt panicked, and each is recorded")
		for _, e := range jobs[0].Errors {
			require.True(t, e.Panicked(), "attempt %d", e.Attempt)
			require.Contains(t, e.Error(), "a bug in planning")
		}
		h.requireGreen(good)
		require.False(t, h.fake.MergeAllowed(repoName, bad), "a PR whose plan panicked is never mergeable")
		agg := h.checks(bad)[gate.CheckAggregate]
		require.NotEqual(t, codehost.ConclusionSuccess, agg.Conclusion)

		resp, err := http.Get(h.url + "/healthz")
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		require.Equal(t, http.StatusOK, resp.StatusCode, "the process is alive")
	})
}
