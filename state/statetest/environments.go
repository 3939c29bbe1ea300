package statetest

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/state"
)

func environmentTests() []test {
	return []test{
		{"GetMissing", testEnvGetMissing},
		{"PromoteBumpsGeneration", testEnvPromoteGenerations},
		{"ConflictingPlanChangesNothing", testEnvConflict},
		{"CheckRunsInsideThePromotion", testEnvCheckReads},
		{"CheckErrorAbortsThePromotion", testEnvCheckAborts},
		{"Finalize", testEnvFinalize},
		{"Invalidate", testEnvInvalidate},
		{"ListIsSortedByName", testEnvList},
		{"DeleteIsPinnedToGeneration", testEnvDelete},
		{"ThousandSnapshotsRoundTrip", testEnvLarge},
		{"RejectsBadPromotions", testEnvBadPromote},
		{"GenerationFollowsTheEnvironment", testEnvGeneration},
	}
}

func testEnvGetMissing(t *testing.T, b *bundle) {
	// Scenario: an environment that was never promoted is not found, and a
	// fresh store lists none.
	_, err := b.store.GetEnvironment(b.ctx, "prod")
	require.ErrorIs(t, err, state.ErrNotFound)
	list, err := b.store.ListEnvironments(b.ctx)
	require.NoError(t, err)
	require.Empty(t, list)
}

func testEnvPromoteGenerations(t *testing.T, b *bundle) {
	// Scenario: prod is promoted three times. Generations are 1, 2, 3; each
	// promotion records the plan it replaced, sorts its snapshots by name,
	// and clears the previous plan's finalisation.
	snaps := refs(3, "a")
	e1, err := b.store.Promote(b.ctx, state.PromoteParams{
		Environment: "prod", PlanID: "plan-1", Snapshots: snaps, Now: hour(1), ExpiresAt: hour(100),
	})
	require.NoError(t, err)
	sorted := slices.Clone(snaps)
	slices.SortFunc(sorted, func(x, y state.SnapshotRef) int { return strings.Compare(x.Name, y.Name) })
	requireEnv(t, &state.Environment{
		Name: "prod", Generation: 1, PlanID: "plan-1", Snapshots: sorted, PromotedAt: hour(1), ExpiresAt: hour(100),
	}, e1)
	requireEnv(t, e1, getEnv(t, b, "prod"))

	require.NoError(t, b.store.Finalize(b.ctx, state.FinalizeParams{Environment: "prod", PlanID: "plan-1", Now: hour(2)}))
	e2 := promote(t, b, "prod", "plan-1", "plan-2", hour(3), refs(2, "b")...)
	require.Equal(t, int64(2), e2.Generation)
	require.Equal(t, "plan-1", e2.PreviousPlanID)
	require.True(t, e2.FinalizedAt.IsZero())
	require.True(t, e2.ExpiresAt.IsZero())
	requireEnv(t, e2, getEnv(t, b, "prod"))

	e3 := promote(t, b, "prod", "plan-2", "plan-3", hour(4))
	require.Equal(t, int64(3), e3.Generation)
	require.Equal(t, "plan-2", e3.PreviousPlanID)
	require.Empty(t, e3.Snapshots)
	requireEnv(t, e3, getEnv(t, b, "prod"))
}

func testEnvConflict(t *testing.T, b *bundle) {
	// Scenario: promotions that expect a plan other than the current one
	// (a stale plan, "" for an existing environment, a plan for a missing
	// environment) fail with ErrConflictingPlan and change nothing; their
	// Check never runs.
	before := promote(t, b, "prod", "", "plan-1", hour(0), refs(2, "a")...)
	checked := false
	check := func(context.Context, state.Reader) (state.CheckResult, error) {
		checked = true
		return state.CheckResult{}, nil
	}
	for _, p := range []state.PromoteParams{
		{Environment: "prod", ExpectedPlanID: "plan-0", PlanID: "plan-2"},
		{Environment: "prod", ExpectedPlanID: "", PlanID: "plan-2"},
		{Environment: "dev", ExpectedPlanID: "plan-1", PlanID: "plan-2"},
	} {
		p.Now, p.Check, p.Snapshots = hour(1), check, refs(1, "x")
		_, err := b.store.Promote(b.ctx, p)
		require.ErrorIsf(t, err, state.ErrConflictingPlan, "%+v", p)
	}
	require.False(t, checked, "Check ran although the expected plan id did not match")
	requireEnv(t, before, getEnv(t, b, "prod"))
	_, err := b.store.GetEnvironment(b.ctx, "dev")
	require.ErrorIs(t, err, state.ErrNotFound)
}

func testEnvCheckReads(t *testing.T, b *bundle) {
	// Scenario: Check runs inside the promotion: it sees the environment as
	// it is before the promotion and the intervals recorded so far, and the
	// promotion commits after it returns nil.
	k := vkey("m.a", "v1")
	add(t, b, k, set(hours(0, 24)))
	e1 := promote(t, b, "prod", "", "plan-1", hour(0))
	var seenEnv *state.Environment
	var seenSet bool
	e2, err := b.store.Promote(b.ctx, state.PromoteParams{
		Environment: "prod", ExpectedPlanID: "plan-1", PlanID: "plan-2", Now: hour(1),
		Check: func(ctx context.Context, r state.Reader) (state.CheckResult, error) {
			e, err := r.GetEnvironment(ctx, "prod")
			if err != nil {
				return state.CheckResult{}, err
			}
			seenEnv = e
			got, err := r.GetIntervals(ctx, []state.VersionKey{k, vkey("m.b", "v1")})
			if err != nil {
				return state.CheckResult{}, err
			}
			seenSet = set(hours(0, 24)).Equal(got[k]) && got[vkey("m.b", "v1")].IsEmpty()
			return state.CheckResult{}, nil
		},
	})
	require.NoError(t, err)
	requireEnv(t, e1, seenEnv)
	require.True(t, seenSet, "Check did not see the recorded intervals")
	require.Equal(t, e1.Generation+1, e2.Generation)
	requireEnv(t, e2, getEnv(t, b, "prod"))
}

var errGap = errors.New("an unaccepted gap")

func testEnvCheckAborts(t *testing.T, b *bundle) {
	// Scenario: Check finds a gap and returns an error. The promotion fails
	// with that error (errors.Is works through the wrapping) and nothing
	// changes: the next promotion still expects the old plan.
	before := promote(t, b, "prod", "", "plan-1", hour(0), refs(1, "a")...)
	_, err := b.store.Promote(b.ctx, state.PromoteParams{
		Environment: "prod", ExpectedPlanID: "plan-1", PlanID: "plan-2", Now: hour(1), Snapshots: refs(4, "b"),
		Check: func(context.Context, state.Reader) (state.CheckResult, error) { return state.CheckResult{}, errGap },
	})
	require.ErrorIs(t, err, errGap)
	require.NotErrorIs(t, err, state.ErrConflictingPlan)
	requireEnv(t, before, getEnv(t, b, "prod"))
	e := promote(t, b, "prod", "plan-1", "plan-3", hour(2))
	require.Equal(t, before.Generation+1, e.Generation)
}

func testEnvFinalize(t *testing.T, b *bundle) {
	// Scenario: Finalize is pinned to the plan id: the current plan is
	// finalised at Now; a stale plan id fails with ErrConflictingPlan and
	// leaves the row as it was; an unknown environment is ErrNotFound.
	promote(t, b, "prod", "", "plan-1", hour(0))
	promote(t, b, "prod", "plan-1", "plan-2", hour(1))
	before := getEnv(t, b, "prod")

	err := b.store.Finalize(b.ctx, state.FinalizeParams{Environment: "prod", PlanID: "plan-1", Now: hour(2)})
	require.ErrorIs(t, err, state.ErrConflictingPlan)
	requireEnv(t, before, getEnv(t, b, "prod"))

	err = b.store.Finalize(b.ctx, state.FinalizeParams{Environment: "nowhere", PlanID: "plan-2", Now: hour(2)})
	require.ErrorIs(t, err, state.ErrNotFound)

	require.NoError(t, b.store.Finalize(b.ctx, state.FinalizeParams{Environment: "prod", PlanID: "plan-2", Now: hour(3)}))
	want := *before
	want.FinalizedAt = hour(3)
	requireEnv(t, &want, getEnv(t, b, "prod"))
}

func testEnvInvalidate(t *testing.T, b *bundle) {
	// Scenario: an invalidated environment is kept, marked and expired at
	// Now; it is treated as absent by Promote (expect "", not its old plan),
	// and the promotion clears the mark and continues its generations.
	e1 := promote(t, b, "dev", "", "plan-1", hour(0))
	require.ErrorIs(t, b.store.Invalidate(b.ctx, state.InvalidateParams{Environment: "nowhere", Now: hour(1)}), state.ErrNotFound)
	require.NoError(t, b.store.Invalidate(b.ctx, state.InvalidateParams{Environment: "dev", Now: hour(1)}))

	inv := getEnv(t, b, "dev")
	require.True(t, inv.Invalidated)
	require.True(t, inv.ExpiresAt.Equal(hour(1)), "ExpiresAt %v", inv.ExpiresAt)
	require.Equal(t, e1.Generation, inv.Generation)
	require.Equal(t, "plan-1", inv.PlanID)

	_, err := b.store.Promote(b.ctx, state.PromoteParams{Environment: "dev", ExpectedPlanID: "plan-1", PlanID: "plan-2", Now: hour(2)})
	require.ErrorIs(t, err, state.ErrConflictingPlan)
	requireEnv(t, inv, getEnv(t, b, "dev"))

	e2 := promote(t, b, "dev", "", "plan-2", hour(3))
	require.False(t, e2.Invalidated)
	require.True(t, e2.ExpiresAt.IsZero())
	require.Greater(t, e2.Generation, e1.Generation)
	requireEnv(t, e2, getEnv(t, b, "dev"))
}

func testEnvList(t *testing.T, b *bundle) {
	// Scenario: environments promoted in any order are listed sorted by
	// name, invalidated ones included.
	for _, name := range []string{"zeta", "alpha", "prod", "mid"} {
		promote(t, b, name, "", "plan-"+name, hour(0))
	}
	require.NoError(t, b.store.Invalidate(b.ctx, state.InvalidateParams{Environment: "mid", Now: hour(1)}))
	list, err := b.store.ListEnvironments(b.ctx)
	require.NoError(t, err)
	var names []string
	for _, e := range list {
		names = append(names, e.Name)
		requireEnv(t, getEnv(t, b, e.Name), e)
	}
	require.Equal(t, []string{"alpha", "mid", "prod", "zeta"}, names)
}

func testEnvDelete(t *testing.T, b *bundle) {
	// Scenario: the janitor read generation 1, then a promotion made it 2.
	// Deleting at 1 fails with ErrConflictingPlan and keeps the row;
	// deleting at 2 removes it; deleting again is ErrNotFound.
	e1 := promote(t, b, "dev", "", "plan-1", hour(0))
	e2 := promote(t, b, "dev", "plan-1", "plan-2", hour(1))
	require.ErrorIs(t, removeErr(b.store.RemoveEnvironment(b.ctx, state.RemoveEnvironmentParams{Name: "dev", Generation: e1.Generation, Now: hour(3)})), state.ErrConflictingPlan)
	requireEnv(t, e2, getEnv(t, b, "dev"))

	require.NoError(t, removeErr(b.store.RemoveEnvironment(b.ctx, state.RemoveEnvironmentParams{Name: "dev", Generation: e2.Generation, Now: hour(3)})))
	_, err := b.store.GetEnvironment(b.ctx, "dev")
	require.ErrorIs(t, err, state.ErrNotFound)
	require.ErrorIs(t, removeErr(b.store.RemoveEnvironment(b.ctx, state.RemoveEnvironmentParams{Name: "dev", Generation: e2.Generation, Now: hour(3)})), state.ErrNotFound)

	e3 := promote(t, b, "dev", "", "plan-3", hour(2))
	require.Greater(t, e3.Generation, e2.Generation)
	require.Empty(t, e3.PreviousPlanID)
}

func testEnvLarge(t *testing.T, b *bundle) {
	// Scenario: an environment of 1,000 snapshots round-trips in order.
	e := promote(t, b, "prod", "", "plan-1", hour(0), refs(1000, "big")...)
	require.Len(t, e.Snapshots, 1000)
	require.True(t, slices.IsSortedFunc(e.Snapshots, func(x, y state.SnapshotRef) int { return strings.Compare(x.Name, y.Name) }))
	requireEnv(t, e, getEnv(t, b, "prod"))
}

func testEnvBadPromote(t *testing.T, b *bundle) {
	// Scenario: promotions without an environment name or a plan id, or
	// serving one model twice, are refused with an error and change nothing.
	before := promote(t, b, "prod", "", "plan-1", hour(0), refs(1, "a")...)
	twice := append(refs(2, "a"), refs(1, "b")...)
	for _, p := range []state.PromoteParams{
		{Environment: "", ExpectedPlanID: "plan-1", PlanID: "plan-2"},
		{Environment: "prod", ExpectedPlanID: "plan-1", PlanID: ""},
		{Environment: "prod", ExpectedPlanID: "plan-1", PlanID: "plan-2", Snapshots: twice},
	} {
		p.Now = hour(1)
		_, err := b.store.Promote(b.ctx, p)
		require.Errorf(t, err, "%+v", p)
	}
	requireEnv(t, before, getEnv(t, b, "prod"))
}

// removeErr is the error of a RemoveEnvironment call (its removal event is
// checked where a test needs it).
func removeErr(_ state.Event, err error) error { return err }

// requireGeneration checks EnvironmentGeneration of name against want, and
// against what GetEnvironment reads of the same row.
func requireGeneration(t *testing.T, b *bundle, name string, want int64, invalidated bool) {
	t.Helper()
	gen, inv, err := b.store.EnvironmentGeneration(b.ctx, name)
	require.NoError(t, err)
	require.Equal(t, want, gen)
	require.Equal(t, invalidated, inv)
	e := getEnv(t, b, name)
	require.Equal(t, e.Generation, gen, "EnvironmentGeneration and GetEnvironment disagree")
	require.Equal(t, e.Invalidated, inv, "EnvironmentGeneration and GetEnvironment disagree")
}

func testEnvGeneration(t *testing.T, b *bundle) {
	// Scenario: EnvironmentGeneration follows dev through its life: not
	// found before its first promotion; generation 1, then 2 after a second
	// promotion; invalidated at 2 after Invalidate; not found once removed
	// (also by name only, whatever generation it had); and past 2, no
	// longer invalidated, once promoted again. Another environment's
	// promotion never shows through.
	_, _, err := b.store.EnvironmentGeneration(b.ctx, "dev")
	require.ErrorIs(t, err, state.ErrNotFound)

	promote(t, b, "dev", "", "plan-1", hour(0), refs(3, "a")...)
	requireGeneration(t, b, "dev", 1, false)
	promote(t, b, "prod", "", "plan-p", hour(0), refs(2, "p")...)
	requireGeneration(t, b, "dev", 1, false)
	e2 := promote(t, b, "dev", "plan-1", "plan-2", hour(1), refs(2, "b")...)
	requireGeneration(t, b, "dev", 2, false)

	require.NoError(t, b.store.Invalidate(b.ctx, state.InvalidateParams{Environment: "dev", Now: hour(2)}))
	requireGeneration(t, b, "dev", e2.Generation, true)
	requireGeneration(t, b, "prod", 1, false)

	require.NoError(t, removeErr(b.store.RemoveEnvironment(b.ctx, state.RemoveEnvironmentParams{Name: "dev", Generation: e2.Generation, Now: hour(3)})))
	_, _, err = b.store.EnvironmentGeneration(b.ctx, "dev")
	require.ErrorIs(t, err, state.ErrNotFound, "a removed environment has no generation")

	e3 := promote(t, b, "dev", "", "plan-3", hour(4))
	gen, inv, err := b.store.EnvironmentGeneration(b.ctx, "dev")
	require.NoError(t, err)
	require.Greater(t, gen, e2.Generation)
	require.False(t, inv)
	requireGeneration(t, b, "dev", e3.Generation, false)
}
