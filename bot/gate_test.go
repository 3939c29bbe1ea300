package bot_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/bot"
	"github.com/gapless-dev/gapless/codehost"
	"github.com/gapless-dev/gapless/codehost/githubfake"
	"github.com/gapless-dev/gapless/deploygate"
	"github.com/gapless-dev/gapless/gate"
	"github.com/gapless-dev/gapless/prplan"
	"github.com/gapless-dev/gapless/state"
)

// regionsChange is a second, independent change (ref.regions).
func regionsChange() map[string]string {
	return map[string]string{"models/regions.sql": "MODEL (name ref.regions, kind FULL, cron '@daily');\n\nSELECT 1 AS region_id, 'all' AS name\n"}
}

// aggregate is the aggregate check on the PR's head now.
func (h *harness) aggregate(n int) codehost.CheckRun {
	h.t.Helper()
	return h.checks(n)[gate.CheckAggregate]
}

// holds returns the holds on PR n (all of them, released too).
func (h *harness) holds(n int) []state.Hold {
	h.t.Helper()
	hs, err := h.store.ListHolds(h.ctx, state.ListHoldsParams{Repo: repoName, Number: n})
	require.NoError(h.t, err)
	return hs
}

// onlyDeploy returns the one deploy attempt recorded.
func (h *harness) onlyDeploy() state.DeployAttempt {
	h.t.Helper()
	ds, err := h.store.ListDeploys(h.ctx, state.ListDeploysParams{})
	require.NoError(h.t, err)
	require.Len(h.t, ds, 1)
	return ds[0]
}

// gateSnapshot is what a test hook saw at one moment of a deploy.
type gateSnapshot struct {
	seen         bool
	attemptState string
	holdError    string
	prodExists   bool
	mergeAllowed bool
	aggregate    codehost.CheckRun
}

// snapshot reads the world as it stands, for PR n and attempt id.
func (h *harness) snapshot(ctx context.Context, n int, attemptID string) gateSnapshot {
	s := gateSnapshot{seen: true}
	if a, err := h.store.GetDeploy(ctx, attemptID); err == nil {
		s.attemptState = a.State
	}
	hs, err := h.store.ListHolds(ctx, state.ListHoldsParams{AttemptID: attemptID, Repo: repoName, Number: n})
	if err == nil && len(hs) == 1 {
		s.holdError = hs[0].RenderError
	}
	_, _, err = h.store.EnvironmentGeneration(ctx, "prod")
	s.prodExists = err == nil
	s.mergeAllowed = h.fake.MergeAllowed(repoName, n)
	s.aggregate = h.aggregate(n)
	return s
}

func TestScenarioRenderFailureKeepsGateClosed(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		fault func(f *githubfake.Fake)
		want  string // in the hold's render error
	}{
		// GitHub answers 500 three times (the client retries them), then
		// 422: the update never lands.
		{"errors", func(f *githubfake.Fake) {
			f.Fail(githubfake.RouteUpdateCheckRun, http.StatusInternalServerError, 3)
			f.Fail(githubfake.RouteUpdateCheckRun, http.StatusUnprocessableEntity, 1)
		}, "422"},
		// GitHub answers 200 but the read-back shows the old conclusion:
		// that is not rendered either.
		{"lost update", func(f *githubfake.Fake) { f.LoseCheckRunUpdates(1) }, "reads back as completed/success"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			stores(t, func(t *testing.T, o options) {
				// Scenario: PR 7 and PR 8 are green on prod. A writer
				// comments /deploy on PR 8, whose deploy holds PR 7. The
				// update of PR 7's aggregate check fails (the seed's
				// fail-open finding: SchemaBot discarded this error). The
				// attempt stays held, nothing is deployed, and the error is
				// on PR 7's hold; GitHub would still let PR 7 merge (the
				// visible hole the gate must not open on). The render job
				// retries, the hold lands, and only then does the deploy
				// start: at that moment GitHub shows PR 7 action_required
				// and refuses its merge. After the deploy, PR 7 re-plans
				// green at the new generation.
				var h *harness
				var mu sync.Mutex
				var failed, opened gateSnapshot
				var seven int
				o.hooks = &bot.Hooks{
					HoldRendered: func(ctx context.Context, repo string, n int, err error) {
						mu.Lock()
						defer mu.Unlock()
						if err != nil && !failed.seen {
							failed = h.snapshot(ctx, seven, h.onlyDeployCtx(ctx).ID)
						}
					},
					GateOpen: func(ctx context.Context, id string) error {
						mu.Lock()
						defer mu.Unlock()
						opened = h.snapshot(ctx, seven, id)
						return nil
					},
				}
				h = newHarness(t, o)
				seven = h.openPR("amount", changed())
				eight := h.openPR("regions", regionsChange())
				h.requireGreen(seven)
				h.requireGreen(eight)

				tc.fault(h.fake)
				h.fake.AddComment(repoName, eight, writer, "/deploy")
				h.idle()

				require.True(t, opened.seen, "the gate opened once the render landed")
				require.Equal(t, codehost.ConclusionActionRequired, opened.aggregate.Conclusion, "PR 7 held on GitHub before the first backfill")
				require.False(t, opened.mergeAllowed, "and GitHub refuses its merge")
				require.False(t, opened.prodExists)

				require.True(t, failed.seen, "a render of PR 7's hold failed")
				require.Equal(t, state.DeployHeld, failed.attemptState, "the attempt stays held, not rendered")
				require.Contains(t, failed.holdError, tc.want, "the hold records why its render failed")
				require.False(t, failed.prodExists, "nothing was deployed while the hold was not shown")
				require.True(t, failed.mergeAllowed, "GitHub still showed PR 7 green: exactly why the gate stays shut")

				a := h.onlyDeploy()
				require.Equal(t, state.DeployPromoted, a.State)
				require.False(t, a.HoldsRenderedAt.IsZero())
				require.False(t, a.SettledAt.IsZero(), "settled")
				hs := h.holds(seven)
				require.Len(t, hs, 1)
				require.False(t, hs[0].Active(), "released by the settle")
				require.Empty(t, hs[0].RenderError, "the successful render cleared the error")
				h.requireGreen(seven)
				pc, err := h.store.GetPRCheck(h.ctx, repoName, seven, "prod")
				require.NoError(t, err)
				require.Equal(t, a.ResultGeneration, pc.PlannedGeneration, "re-planned at the new generation")
				require.Len(t, h.withMarker(seven, bot.HoldMarker(a.ID)), 1, "one hold comment")
			})
		})
	}
}

// onlyDeployCtx is onlyDeploy from a hook (no test assertions there).
func (h *harness) onlyDeployCtx(ctx context.Context) state.DeployAttempt {
	ds, err := h.store.ListDeploys(ctx, state.ListDeploysParams{Limit: 1})
	if err != nil || len(ds) == 0 {
		return state.DeployAttempt{}
	}
	return ds[0]
}

func TestScenarioHoldCommentOnceOnBusyPR(t *testing.T) {
	t.Parallel()
	// before is how many comments PR 7 has when it is held: its summary
	// and before-1 others, so the hold comment is comment before+1.
	for _, before := range []int{150, 100, 99} {
		t.Run(fmt.Sprintf("%d comments", before), func(t *testing.T) {
			t.Parallel()
			// Scenario: PR 7 is busy: it has many comments when PR 8's
			// deploy holds it. The hold comment is posted, then the worker
			// fails before recording it; its job is retried twice. The
			// retries find the comment by its marker across every page of
			// comments (GitHub lists them oldest first, 100 a page, and
			// ignores sort): exactly one comment carries the marker (the
			// seed's comment-dedup finding: SchemaBot read only one page).
			// With 100 comments before it, the hold comment is the first of
			// page 2; with 99, the last of page 1.
			failures := 0
			var mu sync.Mutex
			var h *harness
			o := options{hooks: &bot.Hooks{AfterComment: func(ctx context.Context, repo string, n int, marker string) error {
				mu.Lock()
				defer mu.Unlock()
				if strings.HasPrefix(marker, "<!-- gapless:hold:") && failures < 2 {
					failures++
					return errors.New("worker crashed after posting")
				}
				return nil
			}}}
			h = newHarness(t, o)
			seven := h.openPR("amount", changed())
			eight := h.openPR("regions", regionsChange())
			for i := range before - 1 {
				h.fake.AddComment(repoName, seven, reader, fmt.Sprintf("lgtm %d", i))
			}
			h.idle()
			require.Len(t, h.fake.Comments(repoName, seven), before)
			h.fake.AddComment(repoName, eight, writer, "/deploy")
			h.idle()

			a := h.onlyDeploy()
			require.Equal(t, state.DeployPromoted, a.State)
			require.Equal(t, 2, failures, "the comment job failed twice after posting")
			hold := h.withMarker(seven, bot.HoldMarker(a.ID))
			require.Len(t, hold, 1, "exactly one hold comment whatever the retries")
			require.Contains(t, hold[0].Body, "Released", "edited in place when the hold was released")
			all := h.fake.Comments(repoName, seven)
			require.Len(t, all, before+1)
			require.Equal(t, hold[0].ID, all[before].ID, "it is comment %d", before+1)
			h.requireGreen(seven)
		})
	}
}

func TestScenarioSynchronizeDuringHoldStaysBlocked(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, o options) {
		// Scenario: PR 8 is being deployed; PR 7 is held. While the deploy
		// runs, PR 7's author pushes a new head (which is planned green
		// against prod as it was), and PR 9 is opened. Both show
		// action_required on GitHub while the deploy runs: the hold is the
		// PR's, not its head's, and a PR opened mid-deploy is held by the
		// write path. Only the deploy's settle releases them (its own
		// holds, PR 9's included), and each turns green only after its
		// re-plan at the new generation.
		var h *harness
		var seven, nine int
		type seen struct {
			head            string
			agg7, agg9      codehost.CheckRun
			merge7, merge9  bool
			desired7Success bool
		}
		var mid seen
		var waitHeld func(ctx context.Context) error
		rendered := make(chan struct{}, 16)
		o.hooks = &bot.Hooks{
			GateOpen: func(ctx context.Context, id string) error {
				mid.head = h.fake.Commit(repoName, "amount", map[string]string{"NOTES.md": "pushed mid-deploy\n"}, "push during the hold")
				h.fake.Commit(repoName, "late", regionsChange(), "a late branch")
				nine = h.fake.OpenPR(repoName, githubfake.PRSpec{Title: "late", Author: writer, Head: "late", Base: "main"})
				return waitHeld(ctx)
			},
			HoldRendered: func(ctx context.Context, repo string, n int, err error) {
				if err == nil {
					select {
					case rendered <- struct{}{}:
					default:
					}
				}
			},
		}
		// waitHeld waits, in the deploy (its gate open, nothing backfilled
		// yet), until PR 7's new head is planned and GitHub shows both PRs
		// held on their current heads, and looks.
		waitHeld = func(ctx context.Context) error {
			for {
				seven7 := h.fake.CheckRuns(repoName, mid.head)
				pr9 := h.fake.PR(repoName, nine)
				held := func(runs []codehost.CheckRun) bool {
					for _, r := range runs {
						if r.Name == gate.CheckAggregate && r.Conclusion == codehost.ConclusionActionRequired {
							return true
						}
					}
					return false
				}
				pc, err := h.store.GetPRCheck(ctx, repoName, seven, "prod")
				if err == nil && pc.HeadSHA == mid.head && pc.Verdict != state.VerdictPending &&
					held(seven7) && held(h.fake.CheckRuns(repoName, pr9.HeadSHA)) {
					mid.agg7 = h.aggregate(seven)
					mid.agg9 = h.aggregate(nine)
					mid.merge7 = h.fake.MergeAllowed(repoName, seven)
					mid.merge9 = h.fake.MergeAllowed(repoName, nine)
					mid.desired7Success = pc.Verdict == state.VerdictSuccess || pc.Verdict == state.VerdictChanges
					return nil
				}
				select {
				case <-rendered:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
		}
		h = newHarness(t, o)
		seven = h.openPR("amount", changed())
		eight := h.openPR("regions", regionsChange())
		h.requireGreen(seven)
		h.fake.AddComment(repoName, eight, writer, "/deploy")
		h.idle()

		require.Equal(t, mid.head, h.fake.PR(repoName, seven).HeadSHA)
		require.True(t, mid.desired7Success, "the new head was planned green against prod as it was")
		require.Equal(t, codehost.ConclusionActionRequired, mid.agg7.Conclusion, "but GitHub showed it held")
		require.False(t, mid.merge7)
		require.Equal(t, codehost.ConclusionActionRequired, mid.agg9.Conclusion, "a PR opened mid-deploy is held")
		require.False(t, mid.merge9)

		a := h.onlyDeploy()
		require.Equal(t, state.DeployPromoted, a.State)
		for _, n := range []int{seven, nine} {
			hs := h.holds(n)
			require.Len(t, hs, 1, "PR %d", n)
			require.Equal(t, a.ID, hs[0].AttemptID)
			require.False(t, hs[0].Active(), "PR %d released by the deploy's own settle", n)
			h.requireGreen(n)
			pc, err := h.store.GetPRCheck(h.ctx, repoName, n, "prod")
			require.NoError(t, err)
			require.Equal(t, a.ResultGeneration, pc.PlannedGeneration, "PR %d re-planned at the new generation", n)
		}
	})
}

func TestScenarioOlderSettleDuringANewerHoldReleasesNothing(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, o options) {
		// Scenario: PR 8's deploy (attempt A) ends; before its settle
		// runs, an operator starts `gapless apply` on prod from a terminal
		// (attempt B, mode recorded), which holds PR 7 too. A's settle is
		// deferred and releases nothing: PR 7 stays held. B ends and
		// settles its own hold only: PR 7 is still held by A. The sweep
		// settles A; only then is PR 7 re-planned and green (invariant G5:
		// a hold is released only by its own attempt's settle).
		var h *harness
		var b *deploygate.Attempt
		var afterDeferred gateSnapshot
		var deferredHolds []state.Hold
		var beginErr error
		o.hooks = &bot.Hooks{BeforeSettle: func(ctx context.Context, id string) {
			if b != nil {
				return
			}
			var err error
			b, err = deploygate.Begin(ctx, deploygate.Params{Store: h.store, Clock: h.clock, Owner: "ops@laptop"}, state.BeginDeployParams{
				ID: "cli-attempt-b", Mode: state.GateRecorded, Now: h.clock.Now(),
				Request: &state.RequestDeployParams{ID: "cli-attempt-b", Env: "prod", Origin: "cli:ops@laptop", Trigger: state.TriggerCLI, RequestedBy: "ops", Now: h.clock.Now()},
			})
			beginErr = err
		}}
		h = newHarness(t, o)
		seven := h.openPR("amount", changed())
		eight := h.openPR("regions", regionsChange())
		h.fake.AddComment(repoName, eight, writer, "/deploy")
		h.idle()
		require.NoError(t, beginErr)
		require.NotNil(t, b, "attempt B began before A's settle")
		ds, err := h.store.ListDeploys(h.ctx, state.ListDeploysParams{Repo: repoName, Number: eight})
		require.NoError(t, err)
		require.Len(t, ds, 1)
		a := ds[0]
		require.Equal(t, state.DeployPromoted, a.State)
		require.True(t, a.SettledAt.IsZero(), "A's settle was deferred to B")
		afterDeferred = h.snapshot(h.ctx, seven, a.ID)
		deferredHolds = h.holds(seven)
		require.Len(t, deferredHolds, 2, "held by A and by B")
		for _, hd := range deferredHolds {
			require.True(t, hd.Active(), "nothing released while B holds prod: %+v", hd)
		}
		require.Equal(t, codehost.ConclusionActionRequired, afterDeferred.aggregate.Conclusion)
		require.False(t, afterDeferred.mergeAllowed)

		require.NoError(t, b.Finish(h.ctx, state.FinishDeployParams{State: state.DeployCancelled}))
		h.idle()
		for _, hd := range h.holds(seven) {
			require.Equal(t, hd.AttemptID == a.ID, hd.Active(), "B's settle released B's hold only: %+v", hd)
		}
		require.Equal(t, codehost.ConclusionActionRequired, h.aggregate(seven).Conclusion, "PR 7 is still held by A")

		require.NoError(t, h.srv.Bot.Sweep(h.ctx, 1))
		h.idle()
		require.NoError(t, h.srv.Bot.Sweep(h.ctx, 2))
		h.idle()
		for _, hd := range h.holds(seven) {
			require.False(t, hd.Active(), "the sweep settled A: %+v", hd)
		}
		h.requireGreen(seven)
		pc, err := h.store.GetPRCheck(h.ctx, repoName, seven, "prod")
		require.NoError(t, err)
		require.Equal(t, a.ResultGeneration, pc.PlannedGeneration)
		// Re-plans coalesce: two settles and two sweeps at one generation
		// planned PR 7 once at it.
		plans := 0
		for _, e := range h.events(state.EventPRPlanned) {
			var d struct {
				Number     int   `json:"number"`
				Generation int64 `json:"generation"`
			}
			require.NoError(t, json.Unmarshal(e.Data, &d))
			if d.Number == seven && d.Generation == a.ResultGeneration {
				plans++
			}
		}
		require.Equal(t, 1, plans, "PR 7 planned once at generation %d", a.ResultGeneration)
	})
}

// cliDeploy deploys main's head to prod as `gapless apply` does from a
// terminal: through the merge gate (deploygate) in mode, with onWait
// called whenever it waits for its holds. It returns the gate's error,
// or the apply's.
func (h *harness) cliDeploy(id, mode string, onWait func()) (*deploygate.Attempt, error) {
	h.t.Helper()
	root := h.t.TempDir()
	for name, body := range h.fake.Files(repoName, h.fake.Branch(repoName, "main")) {
		p := filepath.Join(root, filepath.FromSlash(name))
		require.NoError(h.t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(h.t, os.WriteFile(p, []byte(body), 0o644))
	}
	p := deploygate.Params{Store: h.store, Clock: h.clock, Owner: "ops@laptop", Wait: 2 * time.Minute,
		OnWait: func(context.Context, state.DeployAttempt) { onWait() }}
	g, err := deploygate.Begin(h.ctx, p, state.BeginDeployParams{ID: id, Mode: mode, Now: h.clock.Now(),
		Request: &state.RequestDeployParams{ID: id, Env: "prod", Origin: "cli:ops@laptop", Trigger: state.TriggerCLI, RequestedBy: "ops", Now: h.clock.Now()}})
	require.NoError(h.t, err)
	if err := g.Open(h.ctx); err != nil {
		return g, err
	}
	_, res, err := prplan.Deploy(h.ctx, prplan.Params{Store: h.store, Engine: h.engine, ProjectRoot: root, Clock: h.clock, Gate: g.Fence()})
	fin := state.FinishDeployParams{State: state.DeployPromoted}
	if err != nil {
		fin = state.FinishDeployParams{State: state.DeployFailed, Error: err.Error()}
	} else {
		fin.PlanID, fin.ResultGeneration = res.Environment.PlanID, res.Environment.Generation
	}
	require.NoError(h.t, g.Finish(h.ctx, fin))
	return g, err
}

func TestScenarioGitHubDownStrictVsRecorded(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, o options) {
		// Scenario: PR 7 is green; prod does not exist yet. GitHub goes
		// down. An operator deploys main to prod from a terminal. In mode
		// rendered the holds are recorded but cannot be shown: serve's
		// renders fail, the gate waits its 2 minutes and ends the attempt
		// failed, naming PR 7 and the error; nothing was deployed. In mode
		// recorded (for exactly this outage) the deploy starts once the
		// holds are recorded and promotes prod. GitHub comes back: the
		// sweep renders and re-plans PR 7 green at the new generation, and
		// each attempt's hold comment is posted exactly once.
		h := newHarness(t, o)
		seven := h.openPR("amount", changed())
		h.requireGreen(seven)
		h.fake.Down(true)

		round := int64(100)
		var lag []state.Hold
		_, err := h.cliDeploy("cli-strict", state.GateRendered, func() {
			// serve sweeps while the operator waits: the render fails.
			round++
			require.NoError(t, h.srv.Bot.Sweep(h.ctx, round))
			h.idle()
			hs, err := h.store.ListHolds(h.ctx, state.ListHoldsParams{Repo: repoName, Number: seven, ActiveOnly: true})
			require.NoError(t, err)
			lag = hs
			h.clock.Advance(time.Minute)
		})
		var nerr *deploygate.NotOpenError
		require.ErrorAs(t, err, &nerr, "the gate did not open")
		require.Contains(t, err.Error(), "acme/analytics#1")
		require.Contains(t, err.Error(), "nothing was backfilled")
		require.Len(t, lag, 1, "PR 7 was held while the operator waited")
		require.True(t, lag[0].RenderedAt.IsZero())
		require.Contains(t, lag[0].RenderError, "503", "the hold says why it is not shown")
		_, _, err = h.store.EnvironmentGeneration(h.ctx, "prod")
		require.ErrorIs(t, err, state.ErrNotFound, "nothing was deployed in mode rendered")
		strict, err := h.store.GetDeploy(h.ctx, "cli-strict")
		require.NoError(t, err)
		require.Equal(t, state.DeployFailed, strict.State)
		require.False(t, strict.SettledAt.IsZero(), "its holds were released")

		_, err = h.cliDeploy("cli-recorded", state.GateRecorded, func() { t.Error("mode recorded never waits") })
		require.NoError(t, err)
		gen, _, err := h.store.EnvironmentGeneration(h.ctx, "prod")
		require.NoError(t, err)
		require.Equal(t, int64(1), gen, "mode recorded deployed during the outage")
		opened := h.events(state.EventGateOpened)
		require.Len(t, opened, 1)
		require.Equal(t, state.GateRecorded, opened[0].Reason, "the mode is recorded in the history")

		// GitHub is back a few minutes later: a comment claim taken by a
		// job that failed during the outage has expired (whether that post
		// reached GitHub is unknown, so the claim is not given up early;
		// the next poster searches every page for the marker first).
		h.fake.Down(false)
		h.clock.Advance(3 * time.Minute)
		require.NoError(t, h.srv.Bot.Sweep(h.ctx, round+1))
		h.idle()
		h.requireGreen(seven)
		pc, err := h.store.GetPRCheck(h.ctx, repoName, seven, "prod")
		require.NoError(t, err)
		require.Equal(t, int64(1), pc.PlannedGeneration)
		for _, id := range []string{"cli-strict", "cli-recorded"} {
			require.Len(t, h.withMarker(seven, bot.HoldMarker(id)), 1, "one hold comment for %s", id)
		}
		require.NoError(t, h.srv.Bot.Sweep(h.ctx, round+2))
		h.idle()
		for _, id := range []string{"cli-strict", "cli-recorded"} {
			require.Len(t, h.withMarker(seven, bot.HoldMarker(id)), 1, "still one for %s after another sweep", id)
		}
	})
}

func TestScenarioUnprotectedBranchMarksTheGateUnsafe(t *testing.T) {
	t.Parallel()
	// Scenario: branch protection of main requires only "ci/build", not
	// the aggregate "gapless" check: GitHub would merge a held PR. serve
	// does not pretend: /healthz, the gate target (what `gapless gate
	// status` shows) and the PR's summary comment and aggregate check say
	// the gate is not enforced, and why. While a deploy holds PR 7, the
	// metrics show the hold. Once an admin requires the check, the next
	// sweep marks the gate enforced again.
	h := newHarness(t, options{required: []string{"ci/build"}})
	seven := h.openPR("amount", changed())

	code, body := h.get("/healthz")
	require.Equal(t, http.StatusOK, code, "serving, but degraded: %s", body)
	var health bot.Health
	require.NoError(t, json.Unmarshal([]byte(body), &health))
	require.NotNil(t, health.Gate)
	require.False(t, health.Gate.Enforced)
	require.Contains(t, health.Gate.Unsafe, `does not require the check "gapless"`)
	target, err := h.store.GetGateTarget(h.ctx, "prod")
	require.NoError(t, err)
	require.Contains(t, target.Unsafe, "acme/analytics:main")
	summary := h.withMarker(seven, bot.SummaryMarker)
	require.Len(t, summary, 1)
	require.Contains(t, summary[0].Body, "merge gate is not enforced")
	require.Contains(t, h.aggregate(seven).Summary, "merge gate is not enforced")

	h.fake.SetRequiredChecks(repoName, "main", gate.CheckAggregate, "ci/build")
	require.NoError(t, h.srv.Bot.Sweep(h.ctx, 1))
	code, body = h.get("/healthz")
	require.Equal(t, http.StatusOK, code)
	health = bot.Health{}
	require.NoError(t, json.Unmarshal([]byte(body), &health))
	require.True(t, health.Gate.Enforced, "%s", body)
	require.Empty(t, health.Gate.Unsafe)
	require.Len(t, h.events(state.EventGateTarget), 2, "unsafe, then safe: both in the history")
}

func TestScenarioGateMetricsShowHoldsAndRenderFailures(t *testing.T) {
	t.Parallel()
	// Scenario: while PR 8's deploy holds PR 7 and PR 7's render fails
	// once, an operator scrapes /metrics: one hold, not rendered, with its
	// lag; a failed render counted. After the deploy: no hold, the render
	// counted, the sweeps counted.
	var h *harness
	var during map[string]float64
	h = newHarness(t, options{hooks: &bot.Hooks{HoldRendered: func(ctx context.Context, repo string, n int, err error) {
		if err != nil && during == nil {
			h.clock.Advance(5 * time.Second)
			_, body := h.get("/metrics")
			during = parseExposition(h.t, body)
		}
	}}})
	seven := h.openPR("amount", changed())
	eight := h.openPR("regions", regionsChange())
	h.requireGreen(seven)
	h.fake.Fail(githubfake.RouteUpdateCheckRun, http.StatusUnprocessableEntity, 1)
	h.fake.AddComment(repoName, eight, writer, "/deploy")
	h.idle()
	require.NotNil(t, during, "a render failed")
	require.Equal(t, 1.0, during[`gapless_gate_holds{env="prod",rendered="false"}`])
	require.Equal(t, 5.0, during[`gapless_gate_render_lag_seconds{env="prod"}`])
	require.Equal(t, 1.0, during[`gapless_gate_renders_total{outcome="failed"}`])

	_, body := h.get("/metrics")
	after := parseExposition(t, body)
	require.Zero(t, after[`gapless_gate_holds{env="prod",rendered="false"}`])
	require.Zero(t, after[`gapless_gate_holds{env="prod",rendered="true"}`])
	require.GreaterOrEqual(t, after[`gapless_gate_renders_total{outcome="rendered"}`], 1.0)
	require.GreaterOrEqual(t, after[`gapless_gate_sweeps_total`], 1.0, "serve swept at start")
}
