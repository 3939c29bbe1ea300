package bot_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/gapless-dev/gapless/bot"
	"github.com/gapless-dev/gapless/codehost"
	"github.com/gapless-dev/gapless/codehost/githubfake"
	"github.com/gapless-dev/gapless/deploygate"
	run "github.com/gapless-dev/gapless/run"
	"github.com/gapless-dev/gapless/sqlparse"
	"github.com/gapless-dev/gapless/state"
)

// gateChecks is how many random stories TestPropertyRandomInterleavings
// plays (each is a whole serve with its warehouse):
// GAPLESS_GATE_CHECKS overrides it.
func gateChecks() int {
	if n, err := strconv.Atoi(os.Getenv("GAPLESS_GATE_CHECKS")); err == nil && n > 0 {
		return n
	}
	return 4
}

// story is one random interleaving's world: the harness, what the hooks
// saw, and the open PRs with their branches.
type story struct {
	h       *harness
	mu      sync.Mutex
	crashes int // worker crashes still to inject
	// violations are invariant breaks the hooks saw mid-deploy.
	violations []string
	open       map[int]string // PR number -> branch
	branches   int
}

// midDeploy checks, at a moment a deploy is running (its gate open, its
// apply returned with prod promoted but its holds not settled, or after),
// that GitHub lets no held PR merge (G1): a PR whose hold GitHub shows is
// never mergeable until its settle.
func (s *story) midDeploy(ctx context.Context, moment string) {
	hs, err := s.h.store.ListHolds(ctx, state.ListHoldsParams{Env: "prod", ActiveOnly: true})
	if err != nil {
		s.violate("%s: listing holds: %v", moment, err)
		return
	}
	for _, hd := range hs {
		if !hd.RenderedAt.IsZero() && s.h.fake.MergeAllowed(repoName, hd.Number) {
			s.violate("%s: PR %d is held (attempt %s, rendered) and GitHub lets it merge", moment, hd.Number, hd.AttemptID)
		}
	}
}

func (s *story) violate(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.violations = append(s.violations, fmt.Sprintf(format, args...))
}

// crash makes the next comment or plan worker fail after its side
// effect, while crashes are left.
func (s *story) crash() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.crashes > 0 {
		s.crashes--
		return errors.New("injected worker crash")
	}
	return nil
}

func TestPropertyRandomInterleavings(t *testing.T) {
	t.Parallel()
	// Scenario: random stories of PRs opened, pushed and closed, /deploys,
	// merges by users whenever GitHub allows them, deploys from a terminal
	// (either gate mode), scheduler ticks, GitHub faults, worker crashes
	// and sweeps. After
	// every step, and at every moment a deploy runs: no PR GitHub shows
	// held is mergeable (G1); every prod generation was promoted by a
	// deploy attempt under the gate (G2); no aggregate is green for a
	// head or a prod generation its verdict was not planned at, or while
	// held (G3); after a sweep no hold outlives its attempt (G4); at most
	// one hold comment per PR and attempt, and exactly one once GitHub is
	// healthy (G6).
	if f := flagRapidChecks(); f != nil {
		t.Cleanup(f)
	}
	rapid.Check(t, func(rt *rapid.T) {
		s := &story{open: map[int]string{}}
		s.h = newHarness(t, options{hooks: &bot.Hooks{
			GateOpen:     func(ctx context.Context, _ string) error { s.midDeploy(ctx, "gate open"); return nil },
			AfterApply:   func(ctx context.Context, _ string) { s.midDeploy(ctx, "applied, not settled") },
			AfterPromote: func(ctx context.Context, _ string) error { s.midDeploy(ctx, "promoted"); return nil },
			AfterComment: func(context.Context, string, int, string) error { return s.crash() },
			BeforePlan:   func(context.Context, string, int, string) error { return s.crash() },
		}})
		h := s.h
		steps := rapid.IntRange(3, 7).Draw(rt, "steps")
		for i := range steps {
			s.step(rt, i)
			h.idle()
			require.NoError(t, h.srv.Bot.Sweep(h.ctx, int64(1000+i)))
			h.idle()
			s.requireInvariants(rt, fmt.Sprintf("after step %d", i))
		}
		// GitHub healthy, a last sweep: every hold has its one comment.
		h.fake.Down(false)
		h.clock.Advance(3 * commentTTL)
		require.NoError(t, h.srv.Bot.Sweep(h.ctx, 9999))
		h.idle()
		s.requireInvariants(rt, "at the end")
		hs, err := h.store.ListHolds(h.ctx, state.ListHoldsParams{Env: "prod"})
		require.NoError(t, err)
		for _, hd := range hs {
			if n := len(h.withMarker(hd.Number, bot.HoldMarker(hd.AttemptID))); n != 1 {
				rt.Fatalf("PR %d has %d hold comments of attempt %s (G6)", hd.Number, n, hd.AttemptID)
			}
		}
	})
}

// commentTTL is the comment claim's TTL (bot's commentClaimTTL).
const commentTTL = 2 * time.Minute

// step draws and plays one action.
func (s *story) step(rt *rapid.T, i int) {
	h := s.h
	prs := make([]int, 0, len(s.open))
	for n := range s.open {
		prs = append(prs, n)
	}
	slices.Sort(prs)
	actions := []string{"open", "open", "sweep", "cli", "fault", "crash", "tick"}
	if len(prs) > 0 {
		actions = append(actions, "push", "close", "deploy", "deploy", "merge")
	}
	switch a := rapid.SampledFrom(actions).Draw(rt, fmt.Sprintf("action%d", i)); a {
	case "open":
		s.branches++
		branch := fmt.Sprintf("b%d", s.branches)
		h.fake.Commit(repoName, branch, randomChange(rt, branch), "change "+branch)
		n := h.fake.OpenPR(repoName, githubfake.PRSpec{Title: branch, Author: writer, Head: branch, Base: "main"})
		s.open[n] = branch
	case "push":
		n := rapid.SampledFrom(prs).Draw(rt, "pushPR")
		h.fake.Commit(repoName, s.open[n], randomChange(rt, s.open[n]), "push")
	case "close":
		n := rapid.SampledFrom(prs).Draw(rt, "closePR")
		h.fake.ClosePR(repoName, n)
		delete(s.open, n)
	case "deploy":
		n := rapid.SampledFrom(prs).Draw(rt, "deployPR")
		h.fake.AddComment(repoName, n, writer, "/deploy")
	case "merge":
		n := rapid.SampledFrom(prs).Draw(rt, "mergePR")
		if h.fake.MergeAllowed(repoName, n) {
			s.requireNotStale(rt, n, "a user merges")
			h.fake.MergeByUser(repoName, n, writer)
			delete(s.open, n)
		}
	case "cli":
		mode := rapid.SampledFrom([]string{state.GateRendered, state.GateRecorded}).Draw(rt, "mode")
		round := int64(5000 + i*10)
		_, err := h.cliDeploy(fmt.Sprintf("cli-%d", i), mode, func() {
			round++
			require.NoError(h.t, h.srv.Bot.Sweep(h.ctx, round))
			h.idle()
			s.midDeploy(h.ctx, "cli waiting")
			h.clock.Advance(30 * time.Second)
		})
		var nerr *deploygate.NotOpenError
		if err != nil && !errors.As(err, &nerr) && !errors.Is(err, state.ErrDeployActive) {
			rt.Fatalf("the CLI deploy failed: %v", err)
		}
	case "fault":
		route := rapid.SampledFrom([]string{githubfake.RouteUpdateCheckRun, githubfake.RouteCreateCheckRun, githubfake.RouteCreateComment, githubfake.RouteListComments}).Draw(rt, "route")
		status := rapid.SampledFrom([]int{http.StatusInternalServerError, http.StatusUnprocessableEntity}).Draw(rt, "status")
		h.fake.Fail(route, status, rapid.IntRange(1, 3).Draw(rt, "times"))
	case "crash":
		s.mu.Lock()
		s.crashes += rapid.IntRange(1, 2).Draw(rt, "crashes")
		s.mu.Unlock()
	case "sweep":
		h.clock.Advance(45 * time.Second)
	case "tick":
		// An hour passes and the scheduler runs prod's due intervals: it
		// writes intervals, never a generation, so it neither needs nor
		// takes the gate.
		h.clock.Advance(time.Hour)
		if _, _, err := h.store.EnvironmentGeneration(h.ctx, "prod"); err == nil {
			parser, err := sqlparse.Open()
			require.NoError(h.t, err)
			_, err = run.Once(h.ctx, run.Params{Env: "prod", ExecutionTime: h.clock.Now(), Store: h.store, Engine: h.engine, Parser: parser,
				Clock: h.clock, Logger: testLog(h.t)})
			require.NoError(h.t, parser.Close())
			if err != nil {
				rt.Fatalf("the scheduler's run failed: %v", err)
			}
		}
	}
}

// randomChange changes one model of the project, differently per draw.
func randomChange(rt *rapid.T, label string) map[string]string {
	if rapid.Bool().Draw(rt, "which") {
		amount := fmt.Sprintf("%d.5", rapid.IntRange(11, 99).Draw(rt, "amount"))
		return map[string]string{"models/events.sql": strings.Replace(project("10.0")["models/events.sql"], "10.0 AS amount", amount+" AS amount", 1)}
	}
	return map[string]string{"models/regions.sql": fmt.Sprintf("MODEL (name ref.regions, kind FULL, cron '@daily');\n\nSELECT %d AS region_id, '%s' AS name\n",
		rapid.IntRange(1, 9).Draw(rt, "region"), label)}
}

// requireNotStale: GitHub lets PR n merge only on a verdict for its head
// at prod's generation now, with no hold (G3).
func (s *story) requireNotStale(rt *rapid.T, n int, when string) {
	h := s.h
	pr := h.fake.PR(repoName, n)
	pc, err := h.store.GetPRCheck(h.ctx, repoName, n, "prod")
	if err != nil {
		rt.Fatalf("%s: PR %d is mergeable with no verdict: %v", when, n, err)
	}
	gen, _, err := h.store.EnvironmentGeneration(h.ctx, "prod")
	if errors.Is(err, state.ErrNotFound) {
		gen, err = 0, nil
	}
	require.NoError(h.t, err)
	if pc.HeadSHA != pr.HeadSHA || pc.PlannedGeneration != gen {
		// Unless prod serves exactly this head, deployed by this PR.
		ds, err := h.store.ListDeploys(h.ctx, state.ListDeploysParams{Repo: repoName, Number: n, Limit: 1})
		require.NoError(h.t, err)
		if len(ds) == 1 && ds[0].HeadSHA == pr.HeadSHA && !ds[0].PromotedAt.IsZero() && ds[0].ResultGeneration == gen {
			return
		}
		rt.Fatalf("%s: PR %d is mergeable on a stale verdict (head %s, generation %d; now %s, %d) (G3)", when, n, pc.HeadSHA, pc.PlannedGeneration, pr.HeadSHA, gen)
	}
	hs, err := h.store.ListHolds(h.ctx, state.ListHoldsParams{Repo: repoName, Number: n, ActiveOnly: true})
	require.NoError(h.t, err)
	if len(hs) > 0 {
		rt.Fatalf("%s: PR %d is mergeable while held by %s (G1)", when, n, hs[0].AttemptID)
	}
}

// requireInvariants checks G1-G4 and G6 on the store and the fake.
func (s *story) requireInvariants(rt *rapid.T, when string) {
	h := s.h
	s.mu.Lock()
	violations := append([]string(nil), s.violations...)
	s.mu.Unlock()
	if len(violations) > 0 {
		rt.Fatalf("%s: %s", when, strings.Join(violations, "; "))
	}
	for n := range s.open {
		agg := h.aggregate(n)
		if agg.Status == codehost.StatusCompleted && agg.Conclusion == codehost.ConclusionSuccess && h.fake.MergeAllowed(repoName, n) {
			s.requireNotStale(rt, n, when)
		}
	}
	// G2: every prod generation was promoted under a deploy attempt's
	// fence.
	gen, _, err := h.store.EnvironmentGeneration(h.ctx, "prod")
	if errors.Is(err, state.ErrNotFound) {
		gen, err = 0, nil
	}
	require.NoError(h.t, err)
	ds, err := h.store.ListDeploys(h.ctx, state.ListDeploysParams{Env: "prod", Limit: 1000})
	require.NoError(h.t, err)
	promoted := map[int64]bool{}
	for _, d := range ds {
		if !d.PromotedAt.IsZero() {
			promoted[d.ResultGeneration] = true
		}
		// G4: after the sweep, an ended attempt holds nothing.
		if d.Terminal() {
			hs, err := h.store.ListHolds(h.ctx, state.ListHoldsParams{AttemptID: d.ID, ActiveOnly: true})
			require.NoError(h.t, err)
			if len(hs) > 0 {
				rt.Fatalf("%s: attempt %s ended %s but holds PR %d (G4)", when, d.ID, d.State, hs[0].Number)
			}
		}
	}
	for g := int64(1); g <= gen; g++ {
		if !promoted[g] {
			rt.Fatalf("%s: prod generation %d was promoted by no gated deploy attempt (G2)", when, g)
		}
	}
	// G6: never two hold comments for one PR and attempt.
	hs, err := h.store.ListHolds(h.ctx, state.ListHoldsParams{Env: "prod"})
	require.NoError(h.t, err)
	for _, hd := range hs {
		if n := len(h.withMarker(hd.Number, bot.HoldMarker(hd.AttemptID))); n > 1 {
			rt.Fatalf("%s: PR %d has %d hold comments of attempt %s (G6)", when, hd.Number, n, hd.AttemptID)
		}
	}
}

// flagRapidChecks sets rapid's number of checks to gateChecks() unless
// -rapid.checks was given, and returns the restore (nil when it changed
// nothing). No other test of this package uses rapid.
func flagRapidChecks() func() {
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "rapid.checks" })
	f := flag.Lookup("rapid.checks")
	if given || f == nil {
		return nil
	}
	old := f.Value.String()
	if err := f.Value.Set(strconv.Itoa(gateChecks())); err != nil {
		return nil
	}
	return func() { _ = f.Value.Set(old) }
}
