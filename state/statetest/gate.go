package statetest

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/state"
)

// gateTests check state.GateStore, the merge gate (design invariant 4: a
// pull request's check is never green while an apply on its target is in
// flight): an attempt and its holds recorded atomically, one attempt per
// environment under racing deployers, the gate opened only once the holds
// are rendered (mode rendered), promotion fenced on the gate (G2), the
// settle releasing only its own attempt's holds (G5), the write-path guard
// holding a PR written during a deploy, and the resolution of an attempt
// whose process died.
func gateTests() []test {
	return []test{
		{"TargetsLifecycle", testGateTargets},
		{"BeginDeployRecordsTheAttemptAndItsHolds", testGateBegin},
		{"BeginDeployInsertsACLIAttempt", testGateBeginCLI},
		{"RacingDeployersOneWins", testGateBeginRace},
		{"WrongExpectedGenerationWritesNothing", testGateBeginConflict},
		{"ActiveAttemptBlocksBeginEvenExpired", testGateBeginActive},
		{"BeginDeployRejectsBadInput", testGateBeginBadInput},
		{"HeldUntilTheLastHoldIsRendered", testGateRendered},
		{"RunDeployWaitsForTheRenderInModeRendered", testGateRunRendered},
		{"RunDeployOpensARecordedGateAtOnce", testGateRunRecorded},
		{"PromoteWithoutTheFenceWritesNothing", testGatePromoteUnfenced},
		{"FencedPromoteStampsTheAttempt", testGatePromoteFenced},
		{"SettleDefersToTheActiveAttempt", testGateSettleDefers},
		{"SettleReleasesOnlyItsOwnHolds", testGateSettleOwn},
		{"SettleRefusesAnAttemptNotEnded", testGateSettleNotEnded},
		{"PRCheckDuringADeployIsHeld", testGateGuard},
		{"PRChecksRacingABeginAreAllHeld", testGateGuardRace},
		{"ResolveDeployAfterTheGrace", testGateResolve},
		{"GateTimeoutFinishesAHeldAttempt", testGateFinishHeld},
		{"EveryWriteRequiresNow", testGateNoNow},
	}
}

const gateRepo = "acme/analytics"

// gateTTL is the lease of the suite's attempts.
const gateTTL = 10 * time.Minute

// expectGeneration returns a pointer to g, for ExpectedGeneration.
func expectGeneration(g int64) *int64 { return &g }

// gateScene sets up prod promoted once (plan-0, generation 1) and then put
// under the gate in mode, with open PR checks 7, 8 and 9 on prod, a closed PR 10 on prod
// and an open PR 11 on staging, and a /deploy of PR 7 (attempt a1)
// pending.
func gateScene(t testing.TB, b *bundle, mode string) {
	t.Helper()
	promote(t, b, "prod", "", "plan-0", at(0), refs(2, "old")...)
	_, err := b.store.SetGateTarget(b.ctx, state.GateTarget{Env: "prod", Repo: gateRepo, Mode: mode, UpdatedAt: at(0)})
	require.NoError(t, err)
	for _, n := range []int{7, 8, 9} {
		_, err := b.store.PutPRCheck(b.ctx, prCheck(n, fmt.Sprintf("h%d", n), state.VerdictSuccess, 0, at(0)))
		require.NoError(t, err)
	}
	closed := prCheck(10, "h10", state.VerdictSuccess, 0, at(0))
	closed.Closed = true
	staging := prCheck(11, "h11", state.VerdictSuccess, 0, at(0))
	staging.Env = "staging"
	for _, p := range []state.PutPRCheckParams{closed, staging} {
		_, err := b.store.PutPRCheck(b.ctx, p)
		require.NoError(t, err)
	}
	requestDeploy(t, b, deployReq("a1", 7, at(0)))
}

// begin runs BeginDeploy of a requested attempt id, failing on error.
func begin(t testing.TB, b *bundle, id, mode string, now time.Time) (state.DeployAttempt, []state.Hold) {
	t.Helper()
	a, hs, err := b.store.BeginDeploy(b.ctx, state.BeginDeployParams{ID: id, Owner: "runner-" + id, TTL: gateTTL, Mode: mode, Now: now})
	require.NoError(t, err)
	return a, hs
}

// renderAll marks every active hold of attempt id rendered at now.
func renderAll(t testing.TB, b *bundle, id string, now time.Time) {
	t.Helper()
	for _, h := range holds(t, b, state.ListHoldsParams{AttemptID: id, ActiveOnly: true}) {
		_, err := b.store.MarkHoldRendered(b.ctx, state.MarkHoldRenderedParams{AttemptID: id, Repo: h.Repo, Number: h.Number, Now: now})
		require.NoError(t, err)
	}
}

// runDeploy opens attempt a's gate at now, failing on error.
func runDeploy(t testing.TB, b *bundle, a state.DeployAttempt, now time.Time) state.DeployAttempt {
	t.Helper()
	r, err := b.store.RunDeploy(b.ctx, state.RunDeployParams{ID: a.ID, Token: a.LeaseToken, Now: now})
	require.NoError(t, err)
	return r
}

// finish ends attempt a as st at now, failing on error.
func finish(t testing.TB, b *bundle, a state.DeployAttempt, st string, now time.Time) state.DeployAttempt {
	t.Helper()
	p := state.FinishDeployParams{ID: a.ID, Token: a.LeaseToken, State: st, Now: now}
	switch st {
	case state.DeployFailed:
		p.Error = "boom"
	case state.DeployPromoted:
		p.PlanID, p.ResultGeneration = a.PlanID, a.ResultGeneration
	}
	done, err := b.store.FinishDeploy(b.ctx, p)
	require.NoError(t, err)
	return done
}

func holds(t testing.TB, b *bundle, p state.ListHoldsParams) []state.Hold {
	t.Helper()
	hs, err := b.store.ListHolds(b.ctx, p)
	require.NoError(t, err)
	return hs
}

// heldPRs lists the PRs of hs as "attempt:number", in order.
func heldPRs(hs []state.Hold) []string {
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = fmt.Sprintf("%s:%d", h.AttemptID, h.Number)
	}
	return out
}

// gateData is the part of a gate event's Data the suite checks.
type gateData struct {
	Attempt string `json:"attempt"`
	PRs     []struct {
		Repo   string `json:"repo"`
		Number int    `json:"number"`
	} `json:"prs"`
	Mode       string `json:"mode"`
	By         string `json:"by"`
	State      string `json:"state"`
	Unrendered []struct {
		Number int `json:"number"`
	} `json:"unrendered"`
}

// gateEvents returns the merge gate's events, in id order.
func gateEvents(t testing.TB, b *bundle) []state.Event {
	t.Helper()
	evs, err := b.store.ListEvents(b.ctx, state.EventFilter{Kinds: state.GateEventKinds()})
	require.NoError(t, err)
	return evs
}

// requireGateEvent requires e to be kind on env for attempt, with reason,
// naming the PRs numbers (in order), and returns its data.
func requireGateEvent(t testing.TB, e state.Event, kind, env, attempt, reason string, numbers ...int) gateData {
	t.Helper()
	require.Equal(t, kind, e.Kind)
	require.Equal(t, env, e.Environment)
	require.Equal(t, reason, e.Reason, kind)
	var d gateData
	require.NoError(t, json.Unmarshal(e.Data, &d), "%s data %s", kind, e.Data)
	require.Equal(t, attempt, d.Attempt, kind)
	got := []int{}
	for _, pr := range d.PRs {
		require.Equal(t, gateRepo, pr.Repo)
		got = append(got, pr.Number)
	}
	if numbers == nil {
		numbers = []int{}
	}
	require.Equal(t, numbers, got, "%s PRs", kind)
	return d
}

func testGateTargets(t *testing.T, b *bundle) {
	// Scenario: serve puts prod under the gate (mode defaulting to
	// rendered): one gate_target event, reason safe. Setting the same
	// target again changes nothing; a new mode is stored without an event;
	// branch protection found missing marks it unsafe, with an event. dev
	// is gated too; both list by name. prod is removed (an event, reason
	// removed) and is no longer gated; removing it again is a no-op.
	// Targets without an environment or with an unknown mode are refused.
	prod, err := b.store.SetGateTarget(b.ctx, state.GateTarget{Env: "prod", Repo: gateRepo, UpdatedAt: at(0)})
	require.NoError(t, err)
	require.Equal(t, state.GateTarget{Env: "prod", Repo: gateRepo, Mode: state.GateRendered, UpdatedAt: at(0)}, prod)
	got, err := b.store.GetGateTarget(b.ctx, "prod")
	require.NoError(t, err)
	require.Equal(t, prod, got)
	again, err := b.store.SetGateTarget(b.ctx, state.GateTarget{Env: "prod", Repo: gateRepo, Mode: state.GateRendered, UpdatedAt: at(1)})
	require.NoError(t, err)
	require.Equal(t, prod, again)
	recorded, err := b.store.SetGateTarget(b.ctx, state.GateTarget{Env: "prod", Repo: gateRepo, Mode: state.GateRecorded, UpdatedAt: at(2)})
	require.NoError(t, err)
	require.Equal(t, state.GateRecorded, recorded.Mode)
	require.Equal(t, at(2), recorded.UpdatedAt)
	unsafe, err := b.store.SetGateTarget(b.ctx, state.GateTarget{Env: "prod", Repo: gateRepo, Mode: state.GateRecorded,
		Unsafe: "the gapless check is not required on main", UpdatedAt: at(3)})
	require.NoError(t, err)
	_, err = b.store.SetGateTarget(b.ctx, state.GateTarget{Env: "dev", Mode: state.GateRecorded, UpdatedAt: at(3)})
	require.NoError(t, err)
	all, err := b.store.ListGateTargets(b.ctx)
	require.NoError(t, err)
	require.Len(t, all, 2)
	require.Equal(t, "dev", all[0].Env)
	require.Equal(t, unsafe, all[1])

	require.NoError(t, b.store.RemoveGateTarget(b.ctx, "prod", at(4)))
	_, err = b.store.GetGateTarget(b.ctx, "prod")
	require.ErrorIs(t, err, state.ErrNotFound)
	require.NoError(t, b.store.RemoveGateTarget(b.ctx, "prod", at(5)))

	evs := gateEvents(t, b)
	reasons := []string{}
	for _, e := range evs {
		require.Equal(t, state.EventGateTarget, e.Kind)
		reasons = append(reasons, e.Environment+":"+e.Reason)
	}
	require.Equal(t, []string{"prod:safe", "prod:unsafe", "dev:safe", "prod:removed"}, reasons)

	_, err = b.store.SetGateTarget(b.ctx, state.GateTarget{Mode: state.GateRendered, UpdatedAt: at(6)})
	require.ErrorContains(t, err, "environment")
	_, err = b.store.SetGateTarget(b.ctx, state.GateTarget{Env: "qa", Mode: "eventually", UpdatedAt: at(6)})
	require.ErrorContains(t, err, "mode")
	_, err = b.store.GetGateTarget(b.ctx, "qa")
	require.ErrorIs(t, err, state.ErrNotFound)
}

func testGateBegin(t *testing.T, b *bundle) {
	// Scenario: prod is gated in mode recorded, at generation 1, with open
	// PRs 7, 8 and 9, a closed PR 10 and PR 11 on staging. The /deploy of
	// PR 7 begins expecting generation 1: in one transaction it is held
	// (the target's mode, a lease, BaseGeneration 1, HoldsRecordedAt), PRs
	// 8 and 9 are held (not its own PR 7, not the closed one, not
	// staging's) at their heads, and one gate_holds_recorded event names
	// them. Beginning it again is refused: it is no longer pending.
	gateScene(t, b, state.GateRecorded)
	a, hs, err := b.store.BeginDeploy(b.ctx, state.BeginDeployParams{
		ID: "a1", Owner: "runner-a1", TTL: gateTTL, ExpectedGeneration: expectGeneration(1), PlanID: "plan-1", Now: at(1),
	})
	require.NoError(t, err)
	require.Equal(t, state.DeployHeld, a.State)
	require.Equal(t, state.GateRecorded, a.Mode)
	require.Equal(t, int64(1), a.BaseGeneration)
	require.Equal(t, at(1), a.HoldsRecordedAt)
	require.True(t, a.HoldsRenderedAt.IsZero())
	require.True(t, a.StartedAt.IsZero())
	require.NotEmpty(t, a.LeaseToken)
	require.Equal(t, "runner-a1", a.Owner)
	require.Equal(t, at(11), a.LeaseExpiresAt)
	require.Equal(t, "plan-1", a.PlanID)
	require.Equal(t, a, getDeploy(t, b, "a1"))

	require.Equal(t, []state.Hold{
		{AttemptID: "a1", Env: "prod", Repo: gateRepo, Number: 8, HeadSHA: "h8", CreatedAt: at(1)},
		{AttemptID: "a1", Env: "prod", Repo: gateRepo, Number: 9, HeadSHA: "h9", CreatedAt: at(1)},
	}, hs)
	require.Equal(t, hs, holds(t, b, state.ListHoldsParams{}))
	require.Equal(t, hs, holds(t, b, state.ListHoldsParams{Env: "prod", ActiveOnly: true}))
	require.Equal(t, hs[1:], holds(t, b, state.ListHoldsParams{Repo: gateRepo, Number: 9}))
	require.Empty(t, holds(t, b, state.ListHoldsParams{Env: "staging"}))
	require.True(t, hs[0].Active())

	evs := gateEvents(t, b)
	require.Len(t, evs, 2) // the target's, then the holds'
	d := requireGateEvent(t, evs[1], state.EventGateHoldsRecorded, "prod", "a1", state.GateRecorded, 8, 9)
	require.Equal(t, "plan-1", evs[1].PlanID)
	require.Equal(t, at(1), evs[1].At)
	require.Equal(t, "begin", d.By)

	_, _, err = b.store.BeginDeploy(b.ctx, state.BeginDeployParams{ID: "a1", TTL: gateTTL, Now: at(2)})
	require.ErrorIs(t, err, state.ErrDeployState)
	require.Equal(t, a, getDeploy(t, b, "a1"))
	_, err = b.store.ListHolds(b.ctx, state.ListHoldsParams{Number: -1})
	require.Error(t, err)
}

func testGateBeginCLI(t *testing.T, b *bundle) {
	// Scenario: `gapless apply` from a shell has no pending request: its
	// BeginDeploy inserts the attempt, held at once in the mode it asks
	// for, and holds every open PR on prod (it has no PR of its own). On
	// dev, not gated and without PR checks or an environment yet (expected
	// generation 0), an attempt has nothing to hold: it is rendered at
	// once, in the default mode, with both events.
	gateScene(t, b, state.GateRendered)
	cli := &state.RequestDeployParams{Env: "prod", Origin: "cli:bob@host", Trigger: state.TriggerCLI, RequestedBy: "bob"}
	a, hs, err := b.store.BeginDeploy(b.ctx, state.BeginDeployParams{
		ID: "c1", Request: cli, Owner: "bob@host", TTL: gateTTL, Mode: state.GateRecorded, Now: at(1),
	})
	require.NoError(t, err)
	require.Equal(t, state.DeployHeld, a.State)
	require.Equal(t, state.GateRecorded, a.Mode)
	require.Equal(t, state.TriggerCLI, a.Trigger)
	require.Equal(t, "cli:bob@host", a.Origin)
	require.Equal(t, at(1), a.CreatedAt)
	require.Equal(t, []string{"c1:7", "c1:8", "c1:9"}, heldPRs(hs))
	require.Equal(t, a, getDeploy(t, b, "c1"))

	dev := &state.RequestDeployParams{Env: "dev", Trigger: state.TriggerCLI}
	d, hs, err := b.store.BeginDeploy(b.ctx, state.BeginDeployParams{
		ID: "d1", Request: dev, TTL: gateTTL, ExpectedGeneration: expectGeneration(0), Now: at(2),
	})
	require.NoError(t, err)
	require.Empty(t, hs)
	require.Equal(t, state.DeployRendered, d.State)
	require.Equal(t, state.GateRendered, d.Mode)
	require.Equal(t, int64(0), d.BaseGeneration)
	require.Equal(t, at(2), d.HoldsRecordedAt)
	require.Equal(t, at(2), d.HoldsRenderedAt)
	evs, err := b.store.ListEvents(b.ctx, state.EventFilter{Kinds: state.GateEventKinds(), Environment: "dev"})
	require.NoError(t, err)
	require.Len(t, evs, 2)
	requireGateEvent(t, evs[0], state.EventGateHoldsRecorded, "dev", "d1", state.GateRendered)
	requireGateEvent(t, evs[1], state.EventGateHoldsRendered, "dev", "d1", state.GateRendered)
}

func testGateBeginRace(t *testing.T, b *bundle) {
	// Scenario: 8 deployers begin on prod at the same instant, four with
	// a pending /deploy each and four CLI applies inserting theirs. Exactly
	// one succeeds; the 7 others get ErrDeployActive and wrote nothing
	// (the /deploys stay pending, the CLI attempts do not exist). Every
	// stored hold is the winner's, one per open PR, and one
	// gate_holds_recorded event was appended.
	gateScene(t, b, state.GateRendered)
	ids := make([]string, racers)
	for i := range racers {
		ids[i] = fmt.Sprintf("r%d", i)
		if i%2 == 0 {
			requestDeploy(t, b, deployReq(ids[i], 20+i, at(0)))
		}
	}
	errs := make([]error, racers)
	race(racers, func(i int) {
		p := state.BeginDeployParams{ID: ids[i], Owner: ids[i], TTL: gateTTL, ExpectedGeneration: expectGeneration(1), Now: at(1)}
		if i%2 == 1 {
			p.Request = &state.RequestDeployParams{Env: "prod", Origin: "cli:" + ids[i], Trigger: state.TriggerCLI}
		}
		_, _, errs[i] = b.store.BeginDeploy(b.ctx, p)
	})
	w := requireOneWinner(t, errs, state.ErrDeployActive)
	winner := ids[w]

	active, err := b.store.ListDeploys(b.ctx, state.ListDeploysParams{Env: "prod", States: []string{state.DeployHeld, state.DeployRendered, state.DeployRunning}})
	require.NoError(t, err)
	require.Len(t, active, 1)
	require.Equal(t, winner, active[0].ID)
	require.Equal(t, []string{winner + ":7", winner + ":8", winner + ":9"}, heldPRs(holds(t, b, state.ListHoldsParams{})))
	for i, id := range ids {
		if i == w {
			continue
		}
		a, err := b.store.GetDeploy(b.ctx, id)
		if i%2 == 1 {
			require.ErrorIs(t, err, state.ErrNotFound, id)
			continue
		}
		require.NoError(t, err)
		require.Equal(t, state.DeployPending, a.State, id)
		require.True(t, a.HoldsRecordedAt.IsZero(), id)
	}
	recorded := 0
	for _, e := range gateEvents(t, b) {
		if e.Kind == state.EventGateHoldsRecorded {
			recorded++
			requireGateEvent(t, e, state.EventGateHoldsRecorded, "prod", winner, state.GateRendered, 7, 8, 9)
		}
	}
	require.Equal(t, 1, recorded)
}

func testGateBeginConflict(t *testing.T, b *bundle) {
	// Scenario: prod is at generation 1. A /deploy planned against
	// generation 2 (or against no environment, 0) begins: ErrConflictingPlan,
	// and nothing is written (the attempt stays pending, no hold, no
	// event). A CLI apply with a wrong expectation does not even leave its
	// attempt behind.
	gateScene(t, b, state.GateRendered)
	before := getDeploy(t, b, "a1")
	for _, g := range []int64{2, 0} {
		_, _, err := b.store.BeginDeploy(b.ctx, state.BeginDeployParams{ID: "a1", TTL: gateTTL, ExpectedGeneration: expectGeneration(g), Now: at(1)})
		require.ErrorIs(t, err, state.ErrConflictingPlan, "expected %d", g)
		require.ErrorContains(t, err, "generation 1")
	}
	_, _, err := b.store.BeginDeploy(b.ctx, state.BeginDeployParams{
		ID: "c1", Request: &state.RequestDeployParams{Env: "prod", Trigger: state.TriggerCLI},
		TTL: gateTTL, ExpectedGeneration: expectGeneration(3), Now: at(1),
	})
	require.ErrorIs(t, err, state.ErrConflictingPlan)
	require.Equal(t, before, getDeploy(t, b, "a1"))
	_, err = b.store.GetDeploy(b.ctx, "c1")
	require.ErrorIs(t, err, state.ErrNotFound)
	require.Empty(t, holds(t, b, state.ListHoldsParams{}))
	require.Len(t, gateEvents(t, b), 1) // the target's
}

func testGateBeginActive(t *testing.T, b *bundle) {
	// Scenario: a1 is held on prod on a one-minute lease and its process
	// dies. a2's BeginDeploy at once, and again long after a1's lease
	// expired, is refused with ErrDeployActive: an expired attempt is not
	// abandoned by BeginDeploy (ResolveDeploy does that, after its grace),
	// so a1 and its holds stay as they were and a2 stays pending.
	gateScene(t, b, state.GateRendered)
	requestDeploy(t, b, deployReq("a2", 8, at(0)))
	a1, _, err := b.store.BeginDeploy(b.ctx, state.BeginDeployParams{ID: "a1", TTL: time.Minute, Now: at(1)})
	require.NoError(t, err)
	hs := holds(t, b, state.ListHoldsParams{})
	for _, now := range []time.Time{at(1), at(2), at(30)} {
		_, _, err := b.store.BeginDeploy(b.ctx, state.BeginDeployParams{ID: "a2", TTL: gateTTL, Now: now})
		require.ErrorIs(t, err, state.ErrDeployActive, "at %s", now)
		require.ErrorContains(t, err, "a1")
	}
	require.Equal(t, a1, getDeploy(t, b, "a1"))
	require.Equal(t, state.DeployPending, getDeploy(t, b, "a2").State)
	require.Equal(t, hs, holds(t, b, state.ListHoldsParams{}))
}

func testGateBeginBadInput(t *testing.T, b *bundle) {
	// Scenario: BeginDeploy without an id, with a TTL of zero, an unknown
	// mode, no Now, a negative expected generation, or a request naming
	// another id, is refused with an error naming what is wrong; an id
	// never requested (and no request) is ErrNotFound. Nothing is written.
	gateScene(t, b, state.GateRendered)
	before := getDeploy(t, b, "a1")
	ok := state.BeginDeployParams{ID: "a1", TTL: gateTTL, Now: at(1)}
	for name, c := range map[string]struct {
		mutate func(*state.BeginDeployParams)
		want   string
	}{
		"no id":        {func(p *state.BeginDeployParams) { p.ID = "" }, "id"},
		"no TTL":       {func(p *state.BeginDeployParams) { p.TTL = 0 }, "TTL"},
		"negative TTL": {func(p *state.BeginDeployParams) { p.TTL = -time.Minute }, "TTL"},
		"mode":         {func(p *state.BeginDeployParams) { p.Mode = "eventually" }, "mode"},
		"no now":       {func(p *state.BeginDeployParams) { p.Now = time.Time{} }, ""},
		"negative gen": {func(p *state.BeginDeployParams) { p.ExpectedGeneration = expectGeneration(-1) }, "generation"},
		"request id": {func(p *state.BeginDeployParams) {
			p.Request = &state.RequestDeployParams{ID: "zz", Env: "prod", Trigger: state.TriggerCLI}
		}, "id"},
		"request no env": {func(p *state.BeginDeployParams) {
			p.ID, p.Request = "c9", &state.RequestDeployParams{Trigger: state.TriggerCLI}
		}, "environment"},
	} {
		p := ok
		c.mutate(&p)
		_, _, err := b.store.BeginDeploy(b.ctx, p)
		require.Error(t, err, name)
		if c.want == "" {
			require.ErrorIs(t, err, state.ErrNoNow, name)
		} else {
			require.ErrorContains(t, err, c.want, name)
		}
	}
	_, _, err := b.store.BeginDeploy(b.ctx, state.BeginDeployParams{ID: "nope", TTL: gateTTL, Now: at(1)})
	require.ErrorIs(t, err, state.ErrNotFound)
	require.Equal(t, before, getDeploy(t, b, "a1"))
	as, err := b.store.ListDeploys(b.ctx, state.ListDeploysParams{})
	require.NoError(t, err)
	require.Len(t, as, 1)
	require.Empty(t, holds(t, b, state.ListHoldsParams{}))
	require.Len(t, gateEvents(t, b), 1)
}

func testGateRendered(t *testing.T, b *bundle) {
	// Scenario: a1 holds PRs 8 and 9. PR 8's render fails (a 500): the
	// error is kept and nothing is rendered. It succeeds next: PR 8 is
	// rendered, its error cleared, and a1 is still held, since PR 9 is
	// not. A late failure of PR 8's render leaves it rendered. PR 9
	// renders: a1 is rendered, HoldsRenderedAt stamped, and one
	// gate_holds_rendered event names both. A hold that does not exist is
	// ErrNotFound.
	gateScene(t, b, state.GateRendered)
	begin(t, b, "a1", "", at(1))
	mark := func(n int, errText string, now time.Time) (state.Hold, error) {
		return b.store.MarkHoldRendered(b.ctx, state.MarkHoldRenderedParams{AttemptID: "a1", Repo: gateRepo, Number: n, Error: errText, Now: now})
	}
	h, err := mark(8, "HTTP 500", at(2))
	require.NoError(t, err)
	require.Equal(t, "HTTP 500", h.RenderError)
	require.True(t, h.RenderedAt.IsZero())
	require.Equal(t, h, holds(t, b, state.ListHoldsParams{Number: 8})[0])

	h, err = mark(8, "", at(3))
	require.NoError(t, err)
	require.Equal(t, at(3), h.RenderedAt)
	require.Empty(t, h.RenderError)
	require.Equal(t, state.DeployHeld, getDeploy(t, b, "a1").State)
	late, err := mark(8, "HTTP 502", at(4))
	require.NoError(t, err)
	require.Equal(t, h, late)
	require.Equal(t, h, holds(t, b, state.ListHoldsParams{Number: 8})[0])

	_, err = mark(9, "", at(5))
	require.NoError(t, err)
	a := getDeploy(t, b, "a1")
	require.Equal(t, state.DeployRendered, a.State)
	require.Equal(t, at(5), a.HoldsRenderedAt)
	evs := gateEvents(t, b)
	requireGateEvent(t, evs[len(evs)-1], state.EventGateHoldsRendered, "prod", "a1", state.GateRendered, 8, 9)
	again, err := mark(9, "", at(6))
	require.NoError(t, err)
	require.Equal(t, at(5), again.RenderedAt)
	require.Equal(t, a, getDeploy(t, b, "a1"))
	require.Len(t, gateEvents(t, b), len(evs))

	_, err = mark(10, "", at(6))
	require.ErrorIs(t, err, state.ErrNotFound)
	_, err = b.store.MarkHoldRendered(b.ctx, state.MarkHoldRenderedParams{AttemptID: "nope", Repo: gateRepo, Number: 8, Now: at(6)})
	require.ErrorIs(t, err, state.ErrNotFound)
}

func testGateRunRendered(t *testing.T, b *bundle) {
	// Scenario: in mode rendered, a1 is held and PR 8's render failed: the
	// gate does not open (ErrGateNotOpen, naming PR 8 and its error, and
	// PR 9) and a1 stays held. Once both holds are rendered, a1 is
	// rendered; a stale token or an expired lease still cannot open it
	// (ErrLeaseLost); its own token opens it (running, StartedAt, a
	// gate_opened event), and opening again returns it as it is.
	gateScene(t, b, state.GateRendered)
	a, _ := begin(t, b, "a1", "", at(1))
	_, err := b.store.MarkHoldRendered(b.ctx, state.MarkHoldRenderedParams{AttemptID: "a1", Repo: gateRepo, Number: 8, Error: "HTTP 500", Now: at(2)})
	require.NoError(t, err)
	_, err = b.store.RunDeploy(b.ctx, state.RunDeployParams{ID: "a1", Token: a.LeaseToken, Now: at(2)})
	require.ErrorIs(t, err, state.ErrGateNotOpen)
	require.ErrorContains(t, err, gateRepo+"#8 (HTTP 500)")
	require.ErrorContains(t, err, gateRepo+"#9")
	require.Equal(t, a, getDeploy(t, b, "a1"))

	renderAll(t, b, "a1", at(3))
	rendered := getDeploy(t, b, "a1")
	require.Equal(t, state.DeployRendered, rendered.State)
	_, err = b.store.RunDeploy(b.ctx, state.RunDeployParams{ID: "a1", Token: "stale", Now: at(4)})
	require.ErrorIs(t, err, state.ErrLeaseLost)
	_, err = b.store.RunDeploy(b.ctx, state.RunDeployParams{ID: "a1", Token: a.LeaseToken, Now: a.LeaseExpiresAt})
	require.ErrorIs(t, err, state.ErrLeaseLost)
	require.Equal(t, rendered, getDeploy(t, b, "a1"))

	run := runDeploy(t, b, a, at(4))
	require.Equal(t, state.DeployRunning, run.State)
	require.Equal(t, at(4), run.StartedAt)
	require.Equal(t, run, getDeploy(t, b, "a1"))
	require.Equal(t, run, runDeploy(t, b, a, at(5)))
	evs := gateEvents(t, b)
	d := requireGateEvent(t, evs[len(evs)-1], state.EventGateOpened, "prod", "a1", state.GateRendered, 8, 9)
	require.Empty(t, d.Unrendered)
}

func testGateRunRecorded(t *testing.T, b *bundle) {
	// Scenario: in mode recorded (GitHub is down), a1's gate opens as soon
	// as its holds are recorded; the gate_opened event names the holds not
	// rendered yet. Rendering them later stamps HoldsRenderedAt on the
	// running attempt. A pending attempt, which has no token yet, cannot be
	// run (ErrLeaseLost).
	gateScene(t, b, state.GateRendered)
	requestDeploy(t, b, deployReq("a2", 8, at(0)))
	_, err := b.store.RunDeploy(b.ctx, state.RunDeployParams{ID: "a2", Token: "t", Now: at(1)})
	require.ErrorIs(t, err, state.ErrLeaseLost)
	a, _ := begin(t, b, "a1", state.GateRecorded, at(1))
	run := runDeploy(t, b, a, at(1))
	require.Equal(t, state.DeployRunning, run.State)
	evs := gateEvents(t, b)
	d := requireGateEvent(t, evs[len(evs)-1], state.EventGateOpened, "prod", "a1", state.GateRecorded, 8, 9)
	require.Len(t, d.Unrendered, 2)
	renderAll(t, b, "a1", at(2))
	after := getDeploy(t, b, "a1")
	require.Equal(t, state.DeployRunning, after.State)
	require.Equal(t, at(2), after.HoldsRenderedAt)
}

// gatePromote promotes prod from plan-0 to plan-1 under fence at now.
func gatePromote(b *bundle, fence *state.GateFence, now time.Time) (*state.Environment, error) {
	return b.store.Promote(b.ctx, state.PromoteParams{
		Environment: "prod", ExpectedPlanID: "plan-0", PlanID: "plan-1", Snapshots: refs(2, "new"), Gate: fence, Now: now,
	})
}

func testGatePromoteUnfenced(t *testing.T, b *bundle) {
	// Scenario (G2): prod is gated. A promotion naming no attempt, an
	// unknown attempt, one held or rendered but not running, one running
	// with another token or on a lease expired at the promotion's Now, an
	// attempt on another environment, or one that failed: each is refused
	// wrapping ErrNotHeld, naming prod (and the attempt), and writes
	// nothing: the environment, the intervals and last-served times of what
	// it serves, the events and the attempt are as they were.
	gateScene(t, b, state.GateRendered)
	key := vkey(refs(2, "old")[0].Name, refs(2, "old")[0].Version)
	add(t, b, key, set(hours(0, 5)))
	env := getEnv(t, b, "prod")
	_, err := b.store.SetGateTarget(b.ctx, state.GateTarget{Env: "staging", Mode: state.GateRecorded, UpdatedAt: at(0)})
	require.NoError(t, err)
	stagingReq := deployReq("s1", 11, at(0))
	stagingReq.Env = "staging"
	requestDeploy(t, b, stagingReq)
	s1, _ := begin(t, b, "s1", "", at(1))
	s1 = runDeploy(t, b, s1, at(1))

	events := func() []state.Event {
		evs, err := b.store.ListEvents(b.ctx, state.EventFilter{})
		require.NoError(t, err)
		return evs
	}
	requireRefused := func(name string, fence *state.GateFence, now time.Time, attempt string) {
		t.Helper()
		evs := events()
		a1, _ := b.store.GetDeploy(b.ctx, "a1")
		_, err := gatePromote(b, fence, now)
		require.ErrorIs(t, err, state.ErrNotHeld, name)
		require.ErrorContains(t, err, `"prod"`, name)
		if attempt != "" {
			require.ErrorContains(t, err, attempt, name)
		}
		requireEnv(t, env, getEnv(t, b, "prod"))
		requireIntervals(t, b, key, set(hours(0, 5)))
		served, err := b.store.LastServed(b.ctx, []state.VersionKey{key})
		require.NoError(t, err)
		require.Empty(t, served, name)
		require.Equal(t, evs, events(), name)
		a1After, _ := b.store.GetDeploy(b.ctx, "a1")
		require.Equal(t, a1, a1After, name)
	}

	requireRefused("no fence", nil, at(2), "")
	requireRefused("unknown attempt", &state.GateFence{AttemptID: "nope", Token: "t"}, at(2), "nope")
	a, _ := begin(t, b, "a1", "", at(2))
	requireRefused("held", &state.GateFence{AttemptID: "a1", Token: a.LeaseToken}, at(2), "a1")
	renderAll(t, b, "a1", at(3))
	requireRefused("rendered, not running", &state.GateFence{AttemptID: "a1", Token: a.LeaseToken}, at(3), "a1")
	runDeploy(t, b, a, at(3))
	requireRefused("no fence while running", nil, at(4), "")
	requireRefused("stale token", &state.GateFence{AttemptID: "a1", Token: "stale"}, at(4), "a1")
	requireRefused("no token", &state.GateFence{AttemptID: "a1"}, at(4), "a1")
	requireRefused("expired lease", &state.GateFence{AttemptID: "a1", Token: a.LeaseToken}, a.LeaseExpiresAt, "a1")
	requireRefused("another environment's attempt", &state.GateFence{AttemptID: "s1", Token: s1.LeaseToken}, at(4), "s1")
	finish(t, b, a, state.DeployFailed, at(5))
	requireRefused("ended", &state.GateFence{AttemptID: "a1", Token: a.LeaseToken}, at(5), "a1")
}

func testGatePromoteFenced(t *testing.T, b *bundle) {
	// Scenario: a1 runs on prod (gated, mode recorded). Its promotion,
	// fenced on a1's token, commits: prod is at generation 2, and a1 has
	// PlanID plan-1, ResultGeneration 2 and PromotedAt, stamped in the
	// promotion's transaction; finishing it promoted with them succeeds. On
	// dev, not gated, a promotion without a fence works as it always did;
	// with a fence it is checked all the same (a stale one is refused) and
	// stamps its attempt.
	gateScene(t, b, state.GateRecorded)
	a, _ := begin(t, b, "a1", "", at(1))
	runDeploy(t, b, a, at(1))
	e, err := gatePromote(b, &state.GateFence{AttemptID: "a1", Token: a.LeaseToken}, at(2))
	require.NoError(t, err)
	require.Equal(t, int64(2), e.Generation)
	stamped := getDeploy(t, b, "a1")
	require.Equal(t, state.DeployRunning, stamped.State)
	require.Equal(t, "plan-1", stamped.PlanID)
	require.Equal(t, int64(2), stamped.ResultGeneration)
	require.Equal(t, at(2), stamped.PromotedAt)
	done := finish(t, b, stamped, state.DeployPromoted, at(3))
	require.Equal(t, at(2), done.PromotedAt)
	require.Equal(t, int64(2), done.ResultGeneration)

	promote(t, b, "dev", "", "d-0", at(1))
	dev := &state.RequestDeployParams{Env: "dev", Trigger: state.TriggerCLI}
	d, _, err := b.store.BeginDeploy(b.ctx, state.BeginDeployParams{ID: "d1", Request: dev, TTL: gateTTL, Now: at(4)})
	require.NoError(t, err)
	d = runDeploy(t, b, d, at(4))
	_, err = b.store.Promote(b.ctx, state.PromoteParams{Environment: "dev", ExpectedPlanID: "d-0", PlanID: "d-1",
		Gate: &state.GateFence{AttemptID: "d1", Token: "stale"}, Now: at(5)})
	require.ErrorIs(t, err, state.ErrNotHeld)
	require.Equal(t, "d-0", getEnv(t, b, "dev").PlanID)
	_, err = b.store.Promote(b.ctx, state.PromoteParams{Environment: "dev", ExpectedPlanID: "d-0", PlanID: "d-1",
		Gate: &state.GateFence{AttemptID: "d1", Token: d.LeaseToken}, Now: at(5)})
	require.NoError(t, err)
	require.Equal(t, at(5), getDeploy(t, b, "d1").PromotedAt)
	promote(t, b, "dev", "d-1", "d-2", at(6))
	require.Equal(t, "d-2", getEnv(t, b, "dev").PlanID)
}

func testGateSettleDefers(t *testing.T, b *bundle) {
	// Scenario: a1 (PR 7's /deploy) held PRs 8 and 9 and failed; a2 (PR
	// 8's) began since and holds 7 and 9. a1's settle defers to a2
	// (ErrSettleDeferred, naming it) and writes nothing: every hold, every
	// check and a1 are as they were. When a2 has ended, a1's settle goes
	// through.
	gateScene(t, b, state.GateRecorded)
	requestDeploy(t, b, deployReq("a2", 8, at(0)))
	a1, _ := begin(t, b, "a1", "", at(1))
	finish(t, b, a1, state.DeployFailed, at(2))
	a2, _ := begin(t, b, "a2", "", at(3))
	hs := holds(t, b, state.ListHoldsParams{})
	require.Equal(t, []string{"a1:8", "a1:9", "a2:7", "a2:9"}, heldPRs(hs))
	checks, err := b.store.ListPRChecks(b.ctx, state.ListPRChecksParams{})
	require.NoError(t, err)
	before := getDeploy(t, b, "a1")
	evs := gateEvents(t, b)

	_, _, err = b.store.SettleDeploy(b.ctx, state.SettleDeployParams{ID: "a1", By: state.SettledBySettle, Now: at(4)})
	require.ErrorIs(t, err, state.ErrSettleDeferred)
	require.ErrorContains(t, err, "a2")
	require.Equal(t, hs, holds(t, b, state.ListHoldsParams{}))
	after, err := b.store.ListPRChecks(b.ctx, state.ListPRChecksParams{})
	require.NoError(t, err)
	require.Equal(t, checks, after)
	require.Equal(t, before, getDeploy(t, b, "a1"))
	require.Equal(t, evs, gateEvents(t, b))

	finish(t, b, a2, state.DeployCancelled, at(5))
	settled, released, err := b.store.SettleDeploy(b.ctx, state.SettleDeployParams{ID: "a1", By: state.SettledBySweep, Now: at(6)})
	require.NoError(t, err)
	require.Equal(t, []string{"a1:8", "a1:9"}, heldPRs(released))
	require.Equal(t, at(6), settled.SettledAt)
	require.Equal(t, state.SettledBySweep, settled.SettledBy)
}

func testGateSettleOwn(t *testing.T, b *bundle) {
	// Scenario (G5): a1 held PRs 8 and 9 and failed; PR 9 was closed
	// meanwhile. a2 began since and holds 7 and 8. An operator forces a1's
	// settle while a2 holds prod: only a1's holds are released (reason
	// operator), a2's survive; PR 8's verdict goes back to pending at a new
	// revision (it re-plans), closed PR 9's is left alone, and PR 7's is
	// untouched. Settling a1 again returns no hold and writes nothing.
	// Once a2 promoted, its own settle releases 7 and 8, each PR's verdict
	// pending again.
	gateScene(t, b, state.GateRecorded)
	requestDeploy(t, b, deployReq("a2", 9, at(0)))
	a1, _ := begin(t, b, "a1", "", at(1))
	closed := prCheck(9, "h9", state.VerdictSuccess, 1, at(1))
	closed.Closed = true
	_, err := b.store.PutPRCheck(b.ctx, closed)
	require.NoError(t, err)
	finish(t, b, a1, state.DeployFailed, at(2))
	a2, _ := begin(t, b, "a2", "", at(3))
	require.Equal(t, []string{"a1:8", "a1:9", "a2:7", "a2:8"}, heldPRs(holds(t, b, state.ListHoldsParams{ActiveOnly: true})))
	check7, check8, check9 := getPRCheck(t, b, 7), getPRCheck(t, b, 8), getPRCheck(t, b, 9)

	settled, released, err := b.store.SettleDeploy(b.ctx, state.SettleDeployParams{ID: "a1", By: state.SettledByOperator, Force: true, Now: at(4)})
	require.NoError(t, err)
	require.Equal(t, []string{"a1:8", "a1:9"}, heldPRs(released))
	for _, h := range released {
		require.Equal(t, at(4), h.ReleasedAt)
		require.Equal(t, state.SettledByOperator, h.ReleaseReason)
		require.False(t, h.Active())
	}
	require.Equal(t, state.DeployFailed, settled.State, "an ended attempt keeps its outcome")
	require.Equal(t, at(4), settled.SettledAt)
	require.Equal(t, state.SettledByOperator, settled.SettledBy)
	require.Equal(t, settled, getDeploy(t, b, "a1"))
	require.Equal(t, []string{"a2:7", "a2:8"}, heldPRs(holds(t, b, state.ListHoldsParams{ActiveOnly: true})),
		"another attempt's holds survive a settle")
	reset := getPRCheck(t, b, 8)
	require.Equal(t, state.VerdictPending, reset.Verdict)
	require.Equal(t, check8.Revision+1, reset.Revision)
	require.Equal(t, at(4), reset.UpdatedAt)
	require.Equal(t, check8.HeadSHA, reset.HeadSHA)
	require.Equal(t, check9, getPRCheck(t, b, 9))
	require.Equal(t, check7, getPRCheck(t, b, 7))
	evs := gateEvents(t, b)
	d := requireGateEvent(t, evs[len(evs)-1], state.EventGateSettled, "prod", "a1", state.SettledByOperator, 8, 9)
	require.Equal(t, state.DeployFailed, d.State)

	again, none, err := b.store.SettleDeploy(b.ctx, state.SettleDeployParams{ID: "a1", By: state.SettledBySettle, Now: at(5)})
	require.NoError(t, err)
	require.Empty(t, none)
	require.Equal(t, settled, again)
	require.Equal(t, reset, getPRCheck(t, b, 8))
	require.Equal(t, evs, gateEvents(t, b))

	finish(t, b, a2, state.DeployFailed, at(6))
	_, released, err = b.store.SettleDeploy(b.ctx, state.SettleDeployParams{ID: "a2", By: state.SettledBySettle, Now: at(7)})
	require.NoError(t, err)
	require.Equal(t, []string{"a2:7", "a2:8"}, heldPRs(released))
	require.Empty(t, holds(t, b, state.ListHoldsParams{ActiveOnly: true}))
	require.Equal(t, reset.Revision+1, getPRCheck(t, b, 8).Revision)
	require.Equal(t, state.VerdictPending, getPRCheck(t, b, 7).Verdict)
}

func testGateSettleNotEnded(t *testing.T, b *bundle) {
	// Scenario: a1 runs. Its settle is refused (ErrDeployState) and writes
	// nothing, and so is a pending attempt's. An operator forces it: a1 is
	// first marked abandoned with the operator's reason as its error, then
	// settled, its holds released.
	gateScene(t, b, state.GateRecorded)
	requestDeploy(t, b, deployReq("a2", 8, at(0)))
	a, _ := begin(t, b, "a1", "", at(1))
	run := runDeploy(t, b, a, at(1))
	for _, id := range []string{"a1", "a2"} {
		_, _, err := b.store.SettleDeploy(b.ctx, state.SettleDeployParams{ID: id, By: state.SettledBySweep, Now: at(2)})
		require.ErrorIs(t, err, state.ErrDeployState, id)
	}
	require.Equal(t, run, getDeploy(t, b, "a1"))
	require.Len(t, holds(t, b, state.ListHoldsParams{ActiveOnly: true}), 2)

	forced, released, err := b.store.SettleDeploy(b.ctx, state.SettleDeployParams{ID: "a1", By: state.SettledByOperator, Force: true,
		Reason: "stuck: runner host gone", Now: at(3)})
	require.NoError(t, err)
	require.Len(t, released, 2)
	require.Equal(t, state.DeployAbandoned, forced.State)
	require.Equal(t, "stuck: runner host gone", forced.Error)
	require.Equal(t, at(3), forced.FinishedAt)
	require.Equal(t, at(3), forced.SettledAt)
	require.Empty(t, holds(t, b, state.ListHoldsParams{ActiveOnly: true}))
	_, err = b.store.FinishDeploy(b.ctx, state.FinishDeployParams{ID: "a1", Token: a.LeaseToken, State: state.DeployCancelled, Now: at(4)})
	require.ErrorIs(t, err, state.ErrLeaseLost)
	_, _, err = b.store.SettleDeploy(b.ctx, state.SettleDeployParams{ID: "a1", By: "someone", Now: at(4)})
	require.ErrorContains(t, err, "someone")
	_, _, err = b.store.SettleDeploy(b.ctx, state.SettleDeployParams{ID: "nope", By: state.SettledBySweep, Now: at(4)})
	require.ErrorIs(t, err, state.ErrNotFound)
}

func testGateGuard(t *testing.T, b *bundle) {
	// Scenario: a1 (PR 7's /deploy) holds PRs 8 and 9 on prod. PR 12 is
	// opened meanwhile: its first check inserts a1's hold of it in the same
	// write, with a gate_holds_recorded event (by pr_check). A push to PR 8
	// (held already) adds no second hold; PR 7's own check, a closed PR
	// 13's and a staging PR's are not held. Once a1 ended, a new PR is not
	// held either; nor is one written while an attempt that never went
	// through the gate runs (StartDeploy on dev).
	gateScene(t, b, state.GateRendered)
	begin(t, b, "a1", "", at(1))
	opened, err := b.store.PutPRCheck(b.ctx, prCheck(12, "h12", state.VerdictPending, 0, at(2)))
	require.NoError(t, err)
	require.Equal(t, int64(1), opened.Revision)
	require.Equal(t, []state.Hold{{AttemptID: "a1", Env: "prod", Repo: gateRepo, Number: 12, HeadSHA: "h12", CreatedAt: at(2)}},
		holds(t, b, state.ListHoldsParams{Number: 12}))
	evs := gateEvents(t, b)
	d := requireGateEvent(t, evs[len(evs)-1], state.EventGateHoldsRecorded, "prod", "a1", state.GateRendered, 12)
	require.Equal(t, "pr_check", d.By)

	_, err = b.store.PutPRCheck(b.ctx, prCheck(8, "h8-pushed", state.VerdictPending, 1, at(3)))
	require.NoError(t, err)
	require.Len(t, holds(t, b, state.ListHoldsParams{Number: 8}), 1)
	_, err = b.store.PutPRCheck(b.ctx, prCheck(7, "h7-pushed", state.VerdictPending, 1, at(3)))
	require.NoError(t, err)
	closed := prCheck(13, "h13", state.VerdictSuccess, 0, at(3))
	closed.Closed = true
	staging := prCheck(14, "h14", state.VerdictSuccess, 0, at(3))
	staging.Env = "staging"
	for _, p := range []state.PutPRCheckParams{closed, staging} {
		_, err := b.store.PutPRCheck(b.ctx, p)
		require.NoError(t, err)
	}
	require.Equal(t, []string{"a1:8", "a1:9", "a1:12"}, heldPRs(holds(t, b, state.ListHoldsParams{})))
	require.Len(t, gateEvents(t, b), len(evs))

	a := getDeploy(t, b, "a1")
	finish(t, b, a, state.DeployCancelled, at(4))
	_, err = b.store.PutPRCheck(b.ctx, prCheck(15, "h15", state.VerdictPending, 0, at(5)))
	require.NoError(t, err)
	dev := deployReq("d1", 16, at(5))
	dev.Env = "dev"
	requestDeploy(t, b, dev)
	startDeploy(t, b, "d1", gateTTL, at(5))
	devCheck := prCheck(17, "h17", state.VerdictPending, 0, at(5))
	devCheck.Env = "dev"
	_, err = b.store.PutPRCheck(b.ctx, devCheck)
	require.NoError(t, err)
	require.Equal(t, []string{"a1:8", "a1:9", "a1:12"}, heldPRs(holds(t, b, state.ListHoldsParams{})))
}

func testGateGuardRace(t *testing.T, b *bundle) {
	// Scenario: while a1 begins on prod, 7 new PRs get their first checks
	// at the same instant. Whichever commits first, no PR slips between
	// the two: afterwards every open PR on prod but a1's own is held by a1
	// (BeginDeploy read it, or its write saw a1 held and held itself),
	// exactly once.
	gateScene(t, b, state.GateRendered)
	errs := make([]error, racers)
	race(racers, func(i int) {
		if i == 0 {
			_, _, errs[i] = b.store.BeginDeploy(b.ctx, state.BeginDeployParams{ID: "a1", TTL: gateTTL, Now: at(1)})
			return
		}
		_, errs[i] = b.store.PutPRCheck(b.ctx, prCheck(30+i, fmt.Sprintf("h%d", 30+i), state.VerdictPending, 0, at(1)))
	})
	for i, err := range errs {
		require.NoError(t, err, "racer %d", i)
	}
	checks, err := b.store.ListPRChecks(b.ctx, state.ListPRChecksParams{Env: "prod", OpenOnly: true})
	require.NoError(t, err)
	want := []string{}
	for _, c := range checks {
		if c.Number != 7 {
			want = append(want, fmt.Sprintf("a1:%d", c.Number))
		}
	}
	got := heldPRs(holds(t, b, state.ListHoldsParams{}))
	slices.Sort(want)
	slices.Sort(got)
	require.Len(t, want, 2+racers-1)
	require.Equal(t, want, got)
}

func testGateResolve(t *testing.T, b *bundle) {
	// Scenario: a1's apply promoted prod under its fence, then its process
	// was killed; d1's (on dev) was killed before promoting. Both leases
	// expired at minute 11. With a grace of 5 minutes the sweep leaves both
	// alone at minute 15 (resolved=false, nothing written) and resolves
	// them at minute 16: a1 promoted (PlanID and ResultGeneration kept), d1
	// abandoned (lease expired), FinishedAt the sweep's Now, each with a
	// gate_resolved event. An ended or pending attempt is left alone. The
	// resolved attempts then settle.
	gateScene(t, b, state.GateRecorded)
	a, _ := begin(t, b, "a1", "", at(1))
	runDeploy(t, b, a, at(1))
	_, err := gatePromote(b, &state.GateFence{AttemptID: "a1", Token: a.LeaseToken}, at(2))
	require.NoError(t, err)
	d1, _, err := b.store.BeginDeploy(b.ctx, state.BeginDeployParams{ID: "d1",
		Request: &state.RequestDeployParams{Env: "dev", Trigger: state.TriggerCLI}, TTL: gateTTL, Now: at(1)})
	require.NoError(t, err)
	requestDeploy(t, b, deployReq("p1", 9, at(1)))

	resolve := func(id string, now time.Time) (state.DeployAttempt, bool) {
		t.Helper()
		r, ok, err := b.store.ResolveDeploy(b.ctx, state.ResolveDeployParams{ID: id, Grace: 5 * time.Minute, Now: now})
		require.NoError(t, err)
		return r, ok
	}
	before := getDeploy(t, b, "a1")
	for _, id := range []string{"a1", "d1"} {
		r, ok := resolve(id, at(16).Add(-time.Microsecond))
		require.False(t, ok, id)
		require.Equal(t, getDeploy(t, b, id), r)
	}
	require.Equal(t, before, getDeploy(t, b, "a1"))
	require.Equal(t, d1, getDeploy(t, b, "d1"))

	promoted, ok := resolve("a1", at(16))
	require.True(t, ok)
	require.Equal(t, state.DeployPromoted, promoted.State)
	require.Equal(t, "plan-1", promoted.PlanID)
	require.Equal(t, int64(2), promoted.ResultGeneration)
	require.Equal(t, at(16), promoted.FinishedAt)
	require.Equal(t, promoted, getDeploy(t, b, "a1"))
	abandoned, ok := resolve("d1", at(16))
	require.True(t, ok)
	require.Equal(t, state.DeployAbandoned, abandoned.State)
	require.Equal(t, state.AbandonedLeaseExpired, abandoned.Error)
	require.Equal(t, at(16), abandoned.FinishedAt)
	for _, id := range []string{"a1", "d1", "p1"} {
		r, ok := resolve(id, at(60))
		require.False(t, ok, id)
		require.Equal(t, getDeploy(t, b, id), r)
	}
	prodEvents, err := b.store.ListEvents(b.ctx, state.EventFilter{Kinds: []string{state.EventGateResolved}})
	require.NoError(t, err)
	require.Len(t, prodEvents, 2)
	requireGateEvent(t, prodEvents[0], state.EventGateResolved, "prod", "a1", state.DeployPromoted, 8, 9)
	requireGateEvent(t, prodEvents[1], state.EventGateResolved, "dev", "d1", state.DeployAbandoned)

	_, released, err := b.store.SettleDeploy(b.ctx, state.SettleDeployParams{ID: "a1", By: state.SettledBySweep, Now: at(17)})
	require.NoError(t, err)
	require.Len(t, released, 2)
	_, _, err = b.store.ResolveDeploy(b.ctx, state.ResolveDeployParams{ID: "a1", Grace: -time.Second, Now: at(17)})
	require.ErrorContains(t, err, "grace")
}

func testGateFinishHeld(t *testing.T, b *bundle) {
	// Scenario: a1 (mode rendered, plan-1) is held while GitHub is down;
	// its runner renews the lease of the held attempt, then the gate times
	// out and fails it: the attempt ends failed from held, keeping the
	// plan it named, with its holds still active until its settle, which
	// releases them. A replayed finish returns the stored attempt. A
	// rendered attempt can be cancelled too.
	gateScene(t, b, state.GateRendered)
	a, _, err := b.store.BeginDeploy(b.ctx, state.BeginDeployParams{ID: "a1", TTL: gateTTL, PlanID: "plan-1", Now: at(1)})
	require.NoError(t, err)
	renewed, err := b.store.RenewDeploy(b.ctx, state.RenewDeployParams{ID: "a1", Token: a.LeaseToken, TTL: gateTTL, Now: at(2)})
	require.NoError(t, err)
	require.Equal(t, at(12), renewed.LeaseExpiresAt)
	require.Equal(t, state.DeployHeld, renewed.State)

	fin := state.FinishDeployParams{ID: "a1", Token: a.LeaseToken, State: state.DeployFailed,
		Error: "merge gate: acme/analytics#8 not rendered (HTTP 500)", Now: at(3)}
	failed, err := b.store.FinishDeploy(b.ctx, fin)
	require.NoError(t, err)
	require.Equal(t, state.DeployFailed, failed.State)
	require.Equal(t, "plan-1", failed.PlanID)
	require.Equal(t, at(3), failed.FinishedAt)
	replayed, err := b.store.FinishDeploy(b.ctx, fin)
	require.NoError(t, err)
	require.Equal(t, failed, replayed)
	require.Len(t, holds(t, b, state.ListHoldsParams{AttemptID: "a1", ActiveOnly: true}), 2)
	_, released, err := b.store.SettleDeploy(b.ctx, state.SettleDeployParams{ID: "a1", By: state.SettledBySettle, Now: at(4)})
	require.NoError(t, err)
	require.Len(t, released, 2)

	requestDeploy(t, b, deployReq("a2", 8, at(5)))
	a2, _ := begin(t, b, "a2", "", at(5))
	renderAll(t, b, "a2", at(6))
	require.Equal(t, state.DeployRendered, getDeploy(t, b, "a2").State)
	cancelled := finish(t, b, a2, state.DeployCancelled, at(7))
	require.Equal(t, state.DeployCancelled, cancelled.State)
}

func testGateNoNow(t *testing.T, b *bundle) {
	// Scenario: every write of the gate called without Now is refused with
	// ErrNoNow and writes nothing.
	gateScene(t, b, state.GateRecorded)
	requestDeploy(t, b, deployReq("a2", 8, at(0)))
	a, _ := begin(t, b, "a2", "", at(1))
	before := getDeploy(t, b, "a2")
	hs := holds(t, b, state.ListHoldsParams{})
	evs := gateEvents(t, b)
	for name, call := range map[string]func() error{
		"SetGateTarget": func() error {
			_, err := b.store.SetGateTarget(b.ctx, state.GateTarget{Env: "qa", Mode: state.GateRendered})
			return err
		},
		"RemoveGateTarget": func() error { return b.store.RemoveGateTarget(b.ctx, "prod", time.Time{}) },
		"BeginDeploy": func() error {
			_, _, err := b.store.BeginDeploy(b.ctx, state.BeginDeployParams{ID: "a1", TTL: gateTTL})
			return err
		},
		"MarkHoldRendered": func() error {
			_, err := b.store.MarkHoldRendered(b.ctx, state.MarkHoldRenderedParams{AttemptID: "a2", Repo: gateRepo, Number: 7})
			return err
		},
		"RunDeploy": func() error {
			_, err := b.store.RunDeploy(b.ctx, state.RunDeployParams{ID: "a2", Token: a.LeaseToken})
			return err
		},
		"SettleDeploy": func() error {
			_, _, err := b.store.SettleDeploy(b.ctx, state.SettleDeployParams{ID: "a2", By: state.SettledByOperator, Force: true})
			return err
		},
		"ResolveDeploy": func() error {
			_, _, err := b.store.ResolveDeploy(b.ctx, state.ResolveDeployParams{ID: "a2"})
			return err
		},
	} {
		require.ErrorIs(t, call(), state.ErrNoNow, name)
	}
	require.Equal(t, before, getDeploy(t, b, "a2"))
	require.Equal(t, state.DeployPending, getDeploy(t, b, "a1").State)
	require.Equal(t, hs, holds(t, b, state.ListHoldsParams{}))
	require.Equal(t, evs, gateEvents(t, b))
	_, err := b.store.GetGateTarget(b.ctx, "prod")
	require.NoError(t, err)
}
