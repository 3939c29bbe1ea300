package bot_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	gh "github.com/google/go-github/v88/github"
	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/bot"
	"github.com/gapless-dev/gapless/codehost"
	"github.com/gapless-dev/gapless/codehost/githubfake"
	"github.com/gapless-dev/gapless/gate"
	"github.com/gapless-dev/gapless/queue"
	"github.com/gapless-dev/gapless/state"
)

func TestScenarioDeployReplansTheOtherOpenPRs(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, o options) {
		// Scenario: PRs 1 and 2 are both green against prod generation 0.
		// PR 1 is deployed (/deploy), which moves prod to generation 1.
		// PR 2's verdict was planned against generation 0: it is planned
		// again against generation 1, and its checks record that.
		h := newHarness(t, o)
		one := h.openPR("amount", changed())
		two := h.openPR("regions", map[string]string{"models/regions.sql": "MODEL (name ref.regions, kind FULL, cron '@daily');\n\nSELECT 1 AS region_id, 'all' AS name\n"})
		h.requireGreen(one)
		h.requireGreen(two)
		h.fake.AddComment(repoName, one, writer, "/deploy")
		h.idle()
		require.True(t, h.fake.PR(repoName, one).Merged)

		pc, err := h.store.GetPRCheck(h.ctx, repoName, two, "prod")
		require.NoError(t, err)
		require.Equal(t, int64(1), pc.PlannedGeneration, "PR 2 is re-planned against the new prod")
		h.requireGreen(two)
		require.Contains(t, h.checks(two)[gate.CheckAggregate].Title, "generation 1")
	})
}

func TestScenarioDeployIsRefusedUnlessTheChecksAreGreen(t *testing.T) {
	t.Parallel()
	// Scenario: /deploy from a writer is refused, with the reason, on a
	// draft, on a PR GitHub says conflicts with its base, and on a PR whose
	// gapless check failed (its model does not parse). Nothing deploys.
	h := newHarness(t, options{})
	h.fake.Commit(repoName, "draft", changed(), "draft")
	draft := h.fake.OpenPR(repoName, githubfake.PRSpec{Title: "draft", Author: writer, Head: "draft", Base: "main", Draft: true})
	broken := h.openPR("broken", map[string]string{"models/regions.sql": "MODEL (name ref.regions, kind FULL;\nSELECT 1\n"})
	h.idle()
	require.Equal(t, codehost.ConclusionFailure, h.checks(broken)[gate.CheckAggregate].Conclusion)
	conflict := h.openPR("conflict", changed())
	no := false
	h.fake.SetMergeable(repoName, conflict, &no, "dirty")

	for pr, why := range map[int]string{draft: "it is a draft", broken: "its gapless check is not green", conflict: "conflicts with its base"} {
		id := h.fake.AddComment(repoName, pr, writer, "/deploy")
		h.idle()
		reply := h.withMarker(pr, fmt.Sprintf("<!-- gapless:reply:%d -->", id))
		require.Len(t, reply, 1, "PR %d", pr)
		require.Contains(t, reply[0].Body, why, "PR %d", pr)
	}
	ds, err := h.store.ListDeploys(h.ctx, state.ListDeploysParams{Repo: repoName})
	require.NoError(t, err)
	require.Empty(t, ds)
	require.Len(t, h.events(state.EventDeployRefused), 3)
}

func TestScenarioDeployOnMerge(t *testing.T) {
	t.Parallel()
	// Scenario: with deploy_on_merge, a person merges a green PR in
	// GitHub's UI. gapless deploys the prod branch at the merge commit,
	// and the PR environment is invalidated.
	h := newHarness(t, options{github: "  deploy_on_merge: true\n  enable_deploy_command: false\n"})
	n := h.openPR("amount", changed())
	h.requireGreen(n)
	sha := h.fake.MergeByUser(repoName, n, writer)
	h.idle()
	ds, err := h.store.ListDeploys(h.ctx, state.ListDeploysParams{Repo: repoName})
	require.NoError(t, err)
	require.Len(t, ds, 1)
	require.Equal(t, state.TriggerMerge, ds[0].Trigger)
	require.Equal(t, sha, ds[0].HeadSHA, "the merge commit is what deploys")
	require.Equal(t, state.DeployPromoted, ds[0].State, ds[0].Error)
	gen, _, err := h.store.EnvironmentGeneration(h.ctx, "prod")
	require.NoError(t, err)
	require.Equal(t, int64(1), gen)
	env, err := h.store.GetEnvironment(h.ctx, fmt.Sprintf("analytics_%d", n))
	require.NoError(t, err)
	require.True(t, env.Invalidated)
}

func TestScenarioReconcileClosesWhatALostDeliveryLeftOpen(t *testing.T) {
	t.Parallel()
	// Scenario: a PR is closed while gapless is not listening (GitHub
	// does not redeliver). The reconcile job sees it is no longer open,
	// closes its verdict and invalidates its environment.
	h := newHarness(t, options{})
	n := h.openPR("amount", changed())
	h.fake.SetWebhook("", nil)
	h.fake.ClosePR(repoName, n)
	require.NoError(t, h.srv.Bot.Reconcile(h.ctx))
	h.idle()
	pc, err := h.store.GetPRCheck(h.ctx, repoName, n, "prod")
	require.NoError(t, err)
	require.True(t, pc.Closed)
	env, err := h.store.GetEnvironment(h.ctx, fmt.Sprintf("analytics_%d", n))
	require.NoError(t, err)
	require.True(t, env.Invalidated)
}

func TestScenarioPRIntoAnotherBranchIsNotPlanned(t *testing.T) {
	t.Parallel()
	// Scenario: a PR into a release branch, not the prod branch, gets no
	// checks and no environment: only PRs into prod_branch deploy to prod.
	h := newHarness(t, options{})
	h.fake.Commit(repoName, "release", map[string]string{"NOTES.md": "release\n"}, "release branch")
	h.fake.Commit(repoName, "fix", changed(), "fix")
	n := h.fake.OpenPR(repoName, githubfake.PRSpec{Title: "fix", Author: writer, Head: "fix", Base: "release"})
	h.idle()
	require.Empty(t, h.checks(n))
	_, err := h.store.GetPRCheck(h.ctx, repoName, n, "prod")
	require.ErrorIs(t, err, state.ErrNotFound)
	jobs, err := h.srv.Queue.Jobs(h.ctx, queue.JobFilter{Kinds: []string{bot.KindDelivery}, States: []string{queue.StateCompleted}})
	require.NoError(t, err)
	require.NotEmpty(t, jobs, "its delivery was handled, and planned nothing")
}

func TestScenarioPRFromAForkIsNotPlanned(t *testing.T) {
	t.Parallel()
	// Scenario: a pull request arrives from a fork (its head is in
	// mallory/analytics). Its models would run on this server's warehouse
	// with its credentials, so it is not planned: no environment, no
	// verdict, and its gapless check never turns green. The delivery is
	// recorded as ignored, with the reason.
	h := newHarness(t, options{})
	h.fake.SetWebhook("", nil)
	h.fake.Commit(repoName, "fork", changed(), "from a fork")
	n := h.fake.OpenPR(repoName, githubfake.PRSpec{Title: "fork", Author: "mallory", Head: "fork", Base: "main"})
	h.fake.SetWebhook(h.url+"/webhook", []byte(secret))
	var payload map[string]any
	require.NoError(t, json.Unmarshal(h.fake.PullRequestPayload(repoName, n, "opened"), &payload))
	pr := payload["pull_request"].(map[string]any)
	head := pr["head"].(map[string]any)
	repo := map[string]any{}
	for k, v := range head["repo"].(map[string]any) {
		repo[k] = v
	}
	repo["full_name"], repo["name"] = "mallory/analytics", "analytics"
	head["repo"] = repo
	status, err := h.fake.Deliver("pull_request", payload)
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, status)
	h.idle()
	_, err = h.store.GetPRCheck(h.ctx, repoName, n, "prod")
	require.ErrorIs(t, err, state.ErrNotFound)
	require.Empty(t, h.checks(n))
	ds, err := h.store.ListDeliveries(h.ctx, state.ListDeliveriesParams{Event: "pull_request"})
	require.NoError(t, err)
	require.Len(t, ds, 1)
	require.Equal(t, state.DeliveryIgnored, ds[0].Status)
	require.Contains(t, ds[0].Error, "fork mallory/analytics")
}

func TestScenarioRerunPlansTheHeadAgain(t *testing.T) {
	t.Parallel()
	// Scenario: a reviewer presses "Re-run" on the gapless check of a
	// green PR (GitHub sends check_run rerequested). gapless plans the
	// head again (a second pr_planned event) and the checks end green.
	h := newHarness(t, options{})
	n := h.openPR("amount", changed())
	require.Len(t, h.events(state.EventPRPlanned), 1)
	head := h.fake.PR(repoName, n).HeadSHA
	status, err := h.fake.Deliver("check_run", &gh.CheckRunEvent{
		Action: gh.Ptr("rerequested"),
		CheckRun: &gh.CheckRun{Name: gh.Ptr(gate.CheckAggregate), HeadSHA: gh.Ptr(head),
			PullRequests: []*gh.PullRequest{{Number: gh.Ptr(n)}}},
		Repo:   &gh.Repository{FullName: gh.Ptr(repoName)},
		Sender: &gh.User{Login: gh.Ptr(writer)},
	})
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, status)
	h.idle()
	require.Len(t, h.events(state.EventPRPlanned), 2, "planned again")
	h.requireGreen(n)
}

func TestScenarioALateDeliveryNeverMovesTheHeadBack(t *testing.T) {
	t.Parallel()
	// Scenario: GitHub delivers the synchronize of an older head after the
	// newer one (deliveries are not ordered). The recorded head stays the
	// one GitHub says now, and the PR stays green on it.
	h := newHarness(t, options{})
	n := h.openPR("amount", changed())
	stale := h.fake.PullRequestPayload(repoName, n, "synchronize")
	old := h.fake.PR(repoName, n).HeadSHA
	h.fake.Commit(repoName, "amount", map[string]string{"NOTES.md": "newer\n"}, "newer")
	h.idle()
	head := h.fake.PR(repoName, n).HeadSHA
	require.NotEqual(t, old, head)

	status, err := h.fake.Deliver("pull_request", stale)
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, status)
	h.idle()
	pc, err := h.store.GetPRCheck(h.ctx, repoName, n, "prod")
	require.NoError(t, err)
	require.Equal(t, head, pc.HeadSHA, "the late delivery of %s did not move the head back", old)
	h.requireGreen(n)
}

func TestScenarioGitHubUnavailableWhilePlanningIsRetriedNotFailed(t *testing.T) {
	t.Parallel()
	// Scenario: GitHub answers 503 to the tarball download eight times in
	// a row while a PR is planned (more than the client's own six
	// attempts). The plan job is retried rather than recording a failed
	// verdict: the PR ends green, and no failed verdict was ever planned.
	h := newHarness(t, options{})
	h.fake.Fail(githubfake.RouteTarball, http.StatusServiceUnavailable, 8)
	n := h.openPR("amount", changed())
	h.requireGreen(n)
	require.Len(t, h.fake.Requests(githubfake.RouteTarball), 9, "eight failures, then the download")
	jobs, err := h.srv.Queue.Jobs(h.ctx, queue.JobFilter{Kinds: []string{bot.KindPlanPR}, States: []string{queue.StateCompleted}})
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	require.Equal(t, 2, jobs[0].Attempt, "the plan job's first attempt gave up after the client's six; the second planned")
	for _, e := range h.events(state.EventPRPlanned) {
		require.NotEqual(t, state.VerdictFailure, e.Reason, "an unavailable GitHub is not the PR's fault")
	}
}
