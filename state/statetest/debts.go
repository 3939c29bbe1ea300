package statetest

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/state"
)

// debtTests check freshness debt (state.Debt): written only with the
// promotion that accepted it, repaired by the interval write that completes
// its range, and settled by a promotion that stops serving its version:
// repaired when the version served instead covers its range, superseded and
// carried to that version for what it misses, superseded when the model is
// no longer served.
func debtTests() []test {
	return []test{
		{"CheckResultIsRecordedWithThePromotion", testDebtRecorded},
		{"CheckErrorRecordsNothing", testDebtCheckError},
		{"UnrecordableDebtRefusesThePromotion", testDebtRefused},
		{"ConflictingPlanWritesNoDebt", testDebtConflict},
		{"DebtOnCoveredRangeIsRecordedRepaired", testDebtAlreadyCovered},
		{"RepairStampsOnceWhenCoverageCompletes", testDebtRepair},
		{"RepairReachesEveryEnvironment", testDebtRepairEnvironments},
		{"FencedWriteRepairsNothing", testDebtFenced},
		{"PromotionNotServingTheModelSupersedes", testDebtSuperseded},
		{"ReplacementMissingTheRangeCarriesTheDebt", testDebtCarried},
		{"ReplacementCoveringTheRangeRepairsTheDebt", testDebtReplacementCovers},
		{"ReplacementPartlyCoveringCarriesOnlyTheMissingParts", testDebtCarriedPartly},
		{"FailedPromotionSettlesNothing", testDebtSettlementAtomic},
		{"CarryRacingTheRepairIsNeverMissed", testDebtCarryRace},
		{"ListFilters", testDebtListFilters},
		{"AddIntervalsRequiresNow", testDebtAddNeedsNow},
		{"RepairRacingThePromotionIsNeverMissed", testDebtRace},
		{"InvalidateSupersedesTheOpenDebts", testDebtInvalidate},
		{"RemoveEnvironmentSupersedesTheOpenDebts", testDebtRemoveEnvironment},
		{"StaleRemoveEnvironmentChangesNothing", testDebtRemoveEnvironmentStale},
	}
}

// sref is the snapshot ref of model name at version.
func sref(name, version string) state.SnapshotRef {
	return state.SnapshotRef{Name: name, Fingerprint: shortHash("fp:" + name + version), Version: version}
}

// newDebt is a trailing-gap debt of model name at version over r, leaving
// Environment, PlanID and AcceptedAt for the store to fill.
func newDebt(name, version string, r interval.Range) state.Debt {
	return state.Debt{Model: name, Version: version, Range: r, Policy: "trailing-gap(3)", Bound: 3, Advances: 1}
}

// addAt adds the set to key without a fence at now, failing the test on
// error.
func addAt(t testing.TB, b *bundle, key state.VersionKey, s interval.Set, now time.Time) {
	t.Helper()
	require.NoError(t, b.store.AddIntervals(b.ctx, state.IntervalsParams{Key: key, Ranges: s, Now: now}))
}

// returning is a Check that reads nothing and returns res.
func returning(res state.CheckResult) func(context.Context, state.Reader) (state.CheckResult, error) {
	return func(context.Context, state.Reader) (state.CheckResult, error) { return res, nil }
}

// promoteWithDebts promotes env from expected to plan, serving snaps, with a
// Check that returns debts, failing the test on error.
func promoteWithDebts(t testing.TB, b *bundle, env, expected, plan string, now time.Time, snaps []state.SnapshotRef, debts ...state.Debt) *state.Environment {
	t.Helper()
	e, err := b.store.Promote(b.ctx, state.PromoteParams{
		Environment: env, ExpectedPlanID: expected, PlanID: plan, Snapshots: snaps, Now: now,
		Check: returning(state.CheckResult{Debts: debts}),
	})
	require.NoError(t, err)
	return e
}

// listDebts lists the debts matching f, failing the test on error.
func listDebts(t testing.TB, b *bundle, f state.DebtFilter) []state.Debt {
	t.Helper()
	got, err := b.store.ListDebts(b.ctx, f)
	require.NoError(t, err)
	return got
}

// onlyDebt returns the one debt matching f.
func onlyDebt(t testing.TB, b *bundle, f state.DebtFilter) state.Debt {
	t.Helper()
	got := listDebts(t, b, f)
	require.Lenf(t, got, 1, "debts matching %+v", f)
	return got[0]
}

// normDebt returns d with its times in UTC, for comparison.
func normDebt(d state.Debt) state.Debt {
	for _, t := range []*time.Time{&d.Range.Start, &d.Range.End, &d.AcceptedAt, &d.RepairedAt, &d.SupersededAt} {
		if !t.IsZero() {
			*t = t.UTC()
		}
	}
	return d
}

// requireDebt asserts two debts are equal up to representation.
func requireDebt(t testing.TB, want, got state.Debt) {
	t.Helper()
	require.Equal(t, normDebt(want), normDebt(got))
}

// debtIDs returns the ids of debts.
func debtIDs(debts []state.Debt) []int64 {
	ids := make([]int64, len(debts))
	for i, d := range debts {
		ids[i] = d.ID
	}
	return ids
}

// listEvents lists the events of the given kinds, failing the test on error.
func listEvents(t testing.TB, b *bundle, kinds ...string) []state.Event {
	t.Helper()
	got, err := b.store.ListEvents(b.ctx, state.EventFilter{Kinds: kinds})
	require.NoError(t, err)
	return got
}

// rangeJSON is r as interval.Range encodes it.
func rangeJSON(r interval.Range) string {
	return fmt.Sprintf(`{"start": %q, "end": %q}`, r.Start.UTC().Format(time.RFC3339), r.End.UTC().Format(time.RFC3339))
}

// requireRepairedEvent asserts that ev is the gap_repaired event of d.
func requireRepairedEvent(t testing.TB, d state.Debt, ev state.Event) {
	t.Helper()
	require.Equal(t, state.EventGapRepaired, ev.Kind)
	require.True(t, d.RepairedAt.Equal(ev.At), "event at %v, debt repaired at %v", ev.At, d.RepairedAt)
	require.Equal(t, d.Environment, ev.Environment)
	require.Equal(t, d.Model, ev.Model)
	require.Equal(t, d.PlanID, ev.PlanID)
	require.JSONEq(t, fmt.Sprintf(`{"debt_id": %d, "range": %s, "accepted_at": %q, "repaired_at": %q, "latency_seconds": %g, "policy": %q}`,
		d.ID, rangeJSON(d.Range), d.AcceptedAt.UTC().Format(time.RFC3339), d.RepairedAt.UTC().Format(time.RFC3339),
		d.RepairedAt.Sub(d.AcceptedAt).Seconds(), d.Policy), string(ev.Data))
}

func testDebtRecorded(t *testing.T, b *bundle) {
	// Scenario: a trailing-gap promotion of prod accepts two gaps. Its
	// Check returns one debt with every field left for the store to fill
	// and one naming its own acceptance time, plus the gap_accepted event.
	// After the promotion both debts exist, open, with increasing ids, the
	// environment and plan of the promotion and its Now; the event is in
	// the history. Nothing was recorded before the promotion committed.
	snaps := []state.SnapshotRef{sref("m.a", "v1"), sref("m.b", "v1")}
	explicit := newDebt("m.b", "v1", hours(20, 22))
	explicit.Environment, explicit.PlanID, explicit.AcceptedAt = "prod", "plan-1", hour(23)
	e, err := b.store.Promote(b.ctx, state.PromoteParams{
		Environment: "prod", PlanID: "plan-1", Snapshots: snaps, Now: hour(24),
		Check: func(ctx context.Context, r state.Reader) (state.CheckResult, error) {
			if _, err := r.GetIntervals(ctx, []state.VersionKey{vkey("m.a", "v1")}); err != nil {
				return state.CheckResult{}, err
			}
			return state.CheckResult{
				Debts: []state.Debt{newDebt("m.a", "v1", hours(21, 24)), explicit},
				Events: []state.Event{{At: hour(24), Kind: state.EventGapAccepted, Environment: "prod", Model: "m.a",
					PlanID: "plan-1", Reason: "trailing-gap(3)", Data: json.RawMessage(`{"gap": "3h"}`)}},
			}, nil
		},
	})
	require.NoError(t, err)
	require.Equal(t, "plan-1", e.PlanID)

	got := listDebts(t, b, state.DebtFilter{})
	require.Len(t, got, 2)
	require.Positive(t, got[0].ID)
	require.Greater(t, got[1].ID, got[0].ID)
	want0 := newDebt("m.a", "v1", hours(21, 24))
	want0.ID, want0.Environment, want0.PlanID, want0.AcceptedAt = got[0].ID, "prod", "plan-1", hour(24)
	requireDebt(t, want0, got[0])
	explicit.ID = got[1].ID
	requireDebt(t, explicit, got[1])
	require.True(t, got[0].Open())
	require.True(t, got[1].Open())

	events := listEvents(t, b)
	require.Len(t, events, 1)
	require.Equal(t, state.EventGapAccepted, events[0].Kind)
	require.Equal(t, "plan-1", events[0].PlanID)
	require.JSONEq(t, `{"gap": "3h"}`, string(events[0].Data))
}

func testDebtCheckError(t *testing.T, b *bundle) {
	// Scenario: a Check returns debts and events together with an error
	// (the gap exceeded the policy's bound). The promotion fails with that
	// error and records nothing: no debt, no event, and the environment
	// still serves the previous plan at the previous generation.
	before := promote(t, b, "prod", "", "plan-1", hour(0), sref("m.a", "v1"))
	_, err := b.store.Promote(b.ctx, state.PromoteParams{
		Environment: "prod", ExpectedPlanID: "plan-1", PlanID: "plan-2", Snapshots: []state.SnapshotRef{sref("m.a", "v2")}, Now: hour(5),
		Check: func(context.Context, state.Reader) (state.CheckResult, error) {
			return state.CheckResult{
				Debts:  []state.Debt{newDebt("m.a", "v2", hours(0, 5))},
				Events: []state.Event{{At: hour(5), Kind: state.EventGapAccepted, Environment: "prod", PlanID: "plan-2"}},
			}, errGap
		},
	})
	require.ErrorIs(t, err, errGap)
	require.Empty(t, listDebts(t, b, state.DebtFilter{}))
	require.Empty(t, listEvents(t, b))
	requireEnv(t, before, getEnv(t, b, "prod"))
}

func testDebtRefused(t *testing.T, b *bundle) {
	// Scenario: a Check returns something the store cannot track to its
	// repair: a debt on a version the promotion does not serve, with an
	// empty range, with advances beyond its bound, naming another
	// environment or plan, already stamped repaired, claiming to be carried
	// from another debt, or an event without a kind next to a valid debt. Each promotion fails closed: it is refused
	// and records nothing, not even the valid debts and events beside the
	// bad one.
	before := promote(t, b, "prod", "", "plan-1", hour(0), sref("m.a", "v1"))
	snaps := []state.SnapshotRef{sref("m.a", "v2")}
	good := newDebt("m.a", "v2", hours(3, 5))
	bad := func(edit func(d *state.Debt)) state.Debt {
		d := newDebt("m.a", "v2", hours(0, 2))
		edit(&d)
		return d
	}
	ok := state.Event{At: hour(5), Kind: state.EventGapAccepted}
	for name, res := range map[string]state.CheckResult{
		"version not served":  {Debts: []state.Debt{good, bad(func(d *state.Debt) { d.Version = "v1" })}},
		"empty range":         {Debts: []state.Debt{good, bad(func(d *state.Debt) { d.Range = hours(2, 2) })}},
		"no model":            {Debts: []state.Debt{good, bad(func(d *state.Debt) { d.Model = "" })}},
		"beyond its bound":    {Debts: []state.Debt{good, bad(func(d *state.Debt) { d.Advances = 4 })}},
		"another environment": {Debts: []state.Debt{good, bad(func(d *state.Debt) { d.Environment = "dev" })}},
		"another plan":        {Debts: []state.Debt{good, bad(func(d *state.Debt) { d.PlanID = "plan-9" })}},
		"stamped repaired":    {Debts: []state.Debt{good, bad(func(d *state.Debt) { d.RepairedAt = hour(4) })}},
		"carried from":        {Debts: []state.Debt{good, bad(func(d *state.Debt) { d.CarriedFrom = 1 })}},
		"event without kind":  {Debts: []state.Debt{good}, Events: []state.Event{ok, {At: hour(5)}}},
	} {
		_, err := b.store.Promote(b.ctx, state.PromoteParams{
			Environment: "prod", ExpectedPlanID: "plan-1", PlanID: "plan-2", Snapshots: snaps, Now: hour(5),
			Check: returning(res),
		})
		require.Errorf(t, err, "%s: the promotion was not refused", name)
		require.Emptyf(t, listDebts(t, b, state.DebtFilter{}), "%s: debts recorded", name)
		require.Emptyf(t, listEvents(t, b), "%s: events recorded", name)
		requireEnv(t, before, getEnv(t, b, "prod"))
	}
}

func testDebtConflict(t *testing.T, b *bundle) {
	// Scenario: a deploy whose plan is stale (prod moved to plan-2 since it
	// planned against plan-1) promotes with a Check that would accept a
	// gap. The promotion fails with ErrConflictingPlan: its Check never
	// runs and no debt or event is written.
	promote(t, b, "prod", "", "plan-1", hour(0), sref("m.a", "v1"))
	promote(t, b, "prod", "plan-1", "plan-2", hour(1), sref("m.a", "v1"))
	ran := false
	_, err := b.store.Promote(b.ctx, state.PromoteParams{
		Environment: "prod", ExpectedPlanID: "plan-1", PlanID: "plan-3", Snapshots: []state.SnapshotRef{sref("m.a", "v2")}, Now: hour(2),
		Check: func(context.Context, state.Reader) (state.CheckResult, error) {
			ran = true
			return state.CheckResult{
				Debts:  []state.Debt{newDebt("m.a", "v2", hours(0, 2))},
				Events: []state.Event{{At: hour(2), Kind: state.EventGapAccepted}},
			}, nil
		},
	})
	require.ErrorIs(t, err, state.ErrConflictingPlan)
	require.False(t, ran, "Check ran although the expected plan id did not match")
	require.Empty(t, listDebts(t, b, state.DebtFilter{}))
	require.Empty(t, listEvents(t, b))
}

func testDebtAlreadyCovered(t *testing.T, b *bundle) {
	// Scenario: between the policy's decision and the promotion's commit
	// the scheduler already filled one of the accepted gaps. That debt is
	// recorded repaired at the promotion's Now (never open), with its
	// gap_repaired event; a debt whose range is only partly covered is
	// recorded open.
	add(t, b, vkey("m.a", "v1"), set(hours(0, 10)))
	add(t, b, vkey("m.b", "v1"), set(hours(0, 9)))
	promoteWithDebts(t, b, "prod", "", "plan-1", hour(10),
		[]state.SnapshotRef{sref("m.a", "v1"), sref("m.b", "v1")},
		newDebt("m.a", "v1", hours(8, 10)), newDebt("m.b", "v1", hours(8, 10)))

	a := onlyDebt(t, b, state.DebtFilter{Model: "m.a"})
	require.False(t, a.Open())
	require.True(t, hour(10).Equal(a.RepairedAt), "repaired at %v", a.RepairedAt)
	require.True(t, a.SupersededAt.IsZero())
	partial := onlyDebt(t, b, state.DebtFilter{Model: "m.b"})
	require.True(t, partial.Open())

	events := listEvents(t, b, state.EventGapRepaired)
	require.Len(t, events, 1)
	requireRepairedEvent(t, a, events[0])
}

func testDebtRepair(t *testing.T, b *bundle) {
	// Scenario: prod serves m.a@v1 with a debt on [10, 14). The scheduler
	// records [10, 12): the debt stays open and no gap_repaired event
	// appears. It records [12, 14) at hour 21: the debt is stamped repaired
	// at exactly that Now and one gap_repaired event carries its id, range,
	// acceptance and repair times, latency and policy. Later writes covering
	// the range again do not stamp it again nor append another event. A debt
	// on another version of the model is untouched.
	k := vkey("m.a", "v1")
	add(t, b, k, set(hours(0, 10)))
	promoteWithDebts(t, b, "prod", "", "plan-1", hour(14), []state.SnapshotRef{sref("m.a", "v1")}, newDebt("m.a", "v1", hours(10, 14)))
	promoteWithDebts(t, b, "dev", "", "dev-plan-1", hour(14), []state.SnapshotRef{sref("m.a", "v9")}, newDebt("m.a", "v9", hours(10, 14)))

	write := func(r interval.Range, now time.Time) { t.Helper(); addAt(t, b, k, set(r), now) }
	write(hours(10, 12), hour(20))
	require.True(t, onlyDebt(t, b, state.DebtFilter{Environment: "prod"}).Open(), "a partly covered debt was closed")
	require.Empty(t, listEvents(t, b, state.EventGapRepaired))

	write(hours(12, 14), hour(21))
	d := onlyDebt(t, b, state.DebtFilter{Environment: "prod"})
	require.False(t, d.Open())
	require.True(t, hour(21).Equal(d.RepairedAt), "repaired at %v, want the completing write's Now", d.RepairedAt)
	require.True(t, d.SupersededAt.IsZero())
	events := listEvents(t, b, state.EventGapRepaired)
	require.Len(t, events, 1)
	requireRepairedEvent(t, d, events[0])
	require.Equal(t, "prod", events[0].Environment)
	require.Equal(t, "plan-1", events[0].PlanID)
	require.EqualValues(t, 7*3600, d.RepairedAt.Sub(d.AcceptedAt).Seconds())

	write(hours(10, 15), hour(22))
	write(hours(14, 16), hour(23))
	again := onlyDebt(t, b, state.DebtFilter{Environment: "prod"})
	require.True(t, hour(21).Equal(again.RepairedAt), "a repaired debt was stamped again at %v", again.RepairedAt)
	require.Len(t, listEvents(t, b, state.EventGapRepaired), 1)
	require.True(t, onlyDebt(t, b, state.DebtFilter{Environment: "dev"}).Open(), "a debt of another version was repaired")
}

func testDebtRepairEnvironments(t *testing.T, b *bundle) {
	// Scenario: prod and a dev environment serve the same version of m.a,
	// each with its own debt on an overlapping range, accepted by its own
	// plan. One interval write covering both repairs both, in the same
	// transaction: each debt gets its own gap_repaired event, under the
	// environment and plan that accepted it.
	k := vkey("m.a", "v1")
	promoteWithDebts(t, b, "prod", "", "plan-1", hour(5), []state.SnapshotRef{sref("m.a", "v1")}, newDebt("m.a", "v1", hours(0, 4)))
	promoteWithDebts(t, b, "dev", "", "dev-1", hour(6), []state.SnapshotRef{sref("m.a", "v1")}, newDebt("m.a", "v1", hours(2, 6)))
	addAt(t, b, k, set(hours(0, 6)), hour(7))

	debts := listDebts(t, b, state.DebtFilter{})
	require.Len(t, debts, 2)
	events := listEvents(t, b, state.EventGapRepaired)
	require.Len(t, events, 2)
	for i, d := range debts {
		require.True(t, hour(7).Equal(d.RepairedAt), "debt %d repaired at %v", d.ID, d.RepairedAt)
		requireRepairedEvent(t, d, events[i])
	}
	require.Equal(t, []string{"prod", "dev"}, []string{events[0].Environment, events[1].Environment})
}

func testDebtFenced(t *testing.T, b *bundle) {
	// Scenario: a scheduler fenced on prod's generation 1 is about to record
	// the hours that complete a debt, but prod was promoted again (serving
	// the same version, so the debt stays open). Its write fails with
	// ErrFenced and repairs nothing: the debt stays open, no gap_repaired
	// event appears. A scheduler whose lease expired fares no better. The
	// current writer's write then repairs it.
	k := vkey("m.a", "v1")
	snaps := []state.SnapshotRef{sref("m.a", "v1")}
	e1 := promoteWithDebts(t, b, "prod", "", "plan-1", hour(4), snaps, newDebt("m.a", "v1", hours(0, 4)))
	e2 := promote(t, b, "prod", "plan-1", "plan-2", hour(5), snaps...)
	l := acquire(t, b, "run:m.a", "scheduler-1", hour(5), time.Hour)

	stale := state.Fence{Environment: "prod", Generation: e1.Generation}
	require.ErrorIs(t, fencedWrite(b, true, k, set(hours(0, 4)), stale, hour(6)), state.ErrFenced)
	require.ErrorIs(t, fencedWrite(b, true, k, set(hours(0, 4)), leaseFence(l), hour(6)), state.ErrFenced)
	require.True(t, onlyDebt(t, b, state.DebtFilter{}).Open(), "a fenced write repaired a debt")
	require.Empty(t, listEvents(t, b, state.EventGapRepaired))

	current := state.Fence{Environment: "prod", Generation: e2.Generation}
	require.NoError(t, fencedWrite(b, true, k, set(hours(0, 4)), current, hour(7)))
	require.True(t, hour(7).Equal(onlyDebt(t, b, state.DebtFilter{}).RepairedAt))
	require.Len(t, listEvents(t, b, state.EventGapRepaired), 1)
}

func testDebtSuperseded(t *testing.T, b *bundle) {
	// Scenario: prod's plan-1 serves m.a@v1, m.b@v1 and m.c@v1 with a debt
	// on each; m.c's debt gets repaired. dev serves m.b@v1 with a debt too.
	// plan-2 keeps m.a@v1, no longer serves m.b at all, and moves m.c to a
	// v2 without intervals. Promoting it supersedes exactly prod's open
	// debt on m.b@v1 (stamped at plan-2's Now, with a gap_superseded event
	// naming plan-2, the debt and its version, carried nowhere): no debt
	// is carried, since m.b's gap is no longer served. m.a's debt stays
	// open; m.c's repaired debt is left alone and not carried to v2 (it
	// was not open); dev's debt, in another environment, stays open.
	// Coverage arriving later for m.b@v1 does not repair the superseded
	// debt.
	plan1 := []state.SnapshotRef{sref("m.a", "v1"), sref("m.b", "v1"), sref("m.c", "v1")}
	promoteWithDebts(t, b, "prod", "", "plan-1", hour(4), plan1,
		newDebt("m.a", "v1", hours(2, 4)), newDebt("m.b", "v1", hours(2, 4)), newDebt("m.c", "v1", hours(2, 4)))
	promoteWithDebts(t, b, "dev", "", "dev-1", hour(4), []state.SnapshotRef{sref("m.b", "v1")}, newDebt("m.b", "v1", hours(3, 4)))
	addAt(t, b, vkey("m.c", "v1"), set(hours(0, 4)), hour(5))
	repairedC := onlyDebt(t, b, state.DebtFilter{Model: "m.c"})
	require.False(t, repairedC.Open())
	before := listDebts(t, b, state.DebtFilter{})

	plan2 := []state.SnapshotRef{sref("m.a", "v1"), sref("m.c", "v2")}
	promote(t, b, "prod", "plan-1", "plan-2", hour(6), plan2...)

	require.Len(t, listDebts(t, b, state.DebtFilter{}), len(before), "a debt was carried")
	a := onlyDebt(t, b, state.DebtFilter{Environment: "prod", Model: "m.a"})
	require.True(t, a.Open(), "a debt on a version still served was superseded")
	superseded := onlyDebt(t, b, state.DebtFilter{Environment: "prod", Model: "m.b"})
	require.True(t, hour(6).Equal(superseded.SupersededAt), "superseded at %v", superseded.SupersededAt)
	require.True(t, superseded.RepairedAt.IsZero())
	require.False(t, superseded.Open())
	requireDebt(t, repairedC, onlyDebt(t, b, state.DebtFilter{Model: "m.c"}))
	require.True(t, onlyDebt(t, b, state.DebtFilter{Environment: "dev"}).Open(), "a debt of another environment was superseded")

	events := listEvents(t, b, state.EventGapSuperseded)
	require.Len(t, events, 1)
	ev := events[0]
	require.Equal(t, "prod", ev.Environment)
	require.Equal(t, "m.b", ev.Model)
	require.Equal(t, "plan-2", ev.PlanID)
	require.True(t, hour(6).Equal(ev.At))
	require.JSONEq(t, fmt.Sprintf(`{"debt_id": %d, "range": %s, "version": "v1"}`, superseded.ID, rangeJSON(hours(2, 4))), string(ev.Data))
	require.Empty(t, listEvents(t, b, state.EventGapCarried))

	// A promotion serving the same versions keeps m.a's debt open and
	// settles nothing more.
	promote(t, b, "prod", "plan-2", "plan-3", hour(7), plan2...)
	require.True(t, onlyDebt(t, b, state.DebtFilter{Environment: "prod", Model: "m.a"}).Open())
	require.Len(t, listEvents(t, b, state.EventGapSuperseded), 1)
	require.Len(t, listDebts(t, b, state.DebtFilter{}), len(before))

	addAt(t, b, vkey("m.b", "v1"), set(hours(0, 4)), hour(8))
	stillSuperseded := onlyDebt(t, b, state.DebtFilter{Environment: "prod", Model: "m.b"})
	require.True(t, stillSuperseded.RepairedAt.IsZero(), "a superseded debt was repaired")
	require.False(t, onlyDebt(t, b, state.DebtFilter{Environment: "dev"}).Open(), "dev's debt was not repaired")
}

// requireCarriedEvent asserts that ev is the gap_carried event of d.
func requireCarriedEvent(t testing.TB, d state.Debt, ev state.Event) {
	t.Helper()
	require.Equal(t, state.EventGapCarried, ev.Kind)
	require.True(t, d.AcceptedAt.Equal(ev.At), "event at %v, debt accepted at %v", ev.At, d.AcceptedAt)
	require.Equal(t, d.Environment, ev.Environment)
	require.Equal(t, d.Model, ev.Model)
	require.Equal(t, d.PlanID, ev.PlanID)
	require.Equal(t, "carried", ev.Reason)
	require.JSONEq(t, fmt.Sprintf(`{"debt_id": %d, "carried_from": %d, "range": %s, "version": %q}`,
		d.ID, d.CarriedFrom, rangeJSON(d.Range), d.Version), string(ev.Data))
}

// carriedDebt is the debt the promotion of plan at now carries from d to
// version, over r, with id.
func carriedDebt(d state.Debt, id int64, version, plan string, r interval.Range, now time.Time) state.Debt {
	return state.Debt{
		ID: id, Environment: d.Environment, Model: d.Model, Version: version, Range: r, PlanID: plan,
		Policy: d.Policy, Bound: d.Bound, Advances: d.Advances, AcceptedAt: now, CarriedFrom: d.ID,
	}
}

func testDebtCarried(t *testing.T, b *bundle) {
	// Scenario: prod serves parent@vA, computed over [0, 6); plan-A's
	// trailing-gap policy accepted the debt [6, 7) at hour 7. Before any
	// run, plan-B (another breaking change of parent, built against vA's
	// frontier) computed parent@vB over [0, 6) only, and its promotion at
	// hour 8 passes its check. prod now serves vB without [6, 7): the gap
	// is still served, so vA's debt is superseded and carried to vB. The
	// carried debt covers [6, 7) on vB, belongs to plan-B, keeps plan-A's
	// policy, bound and advances, is accepted at hour 8 and names vA's
	// debt as the one it was carried from. The gap_superseded event names
	// the carried debt, and one gap_carried event records it. A write on
	// the abandoned vA repairs neither; the scheduler's write of [6, 7) on
	// vB at hour 9 repairs the carried debt like any other debt.
	add(t, b, vkey("parent", "vA"), set(hours(0, 6)))
	promoteWithDebts(t, b, "prod", "", "plan-A", hour(7), []state.SnapshotRef{sref("parent", "vA")},
		newDebt("parent", "vA", hours(6, 7)))
	old := onlyDebt(t, b, state.DebtFilter{})
	add(t, b, vkey("parent", "vB"), set(hours(0, 6)))
	promote(t, b, "prod", "plan-A", "plan-B", hour(8), sref("parent", "vB"))

	debts := listDebts(t, b, state.DebtFilter{Environment: "prod"})
	require.Len(t, debts, 2)
	old.SupersededAt = hour(8)
	requireDebt(t, old, debts[0])
	require.Greater(t, debts[1].ID, old.ID)
	carried := carriedDebt(old, debts[1].ID, "vB", "plan-B", hours(6, 7), hour(8))
	requireDebt(t, carried, debts[1])
	require.Equal(t, []int64{carried.ID}, debtIDs(listDebts(t, b, state.DebtFilter{OpenOnly: true})))
	require.Equal(t, []int64{carried.ID}, debtIDs(listDebts(t, b, state.DebtFilter{PlanID: "plan-B"})))

	superseded := listEvents(t, b, state.EventGapSuperseded)
	require.Len(t, superseded, 1)
	require.Equal(t, "plan-B", superseded[0].PlanID)
	require.Equal(t, "parent", superseded[0].Model)
	require.True(t, hour(8).Equal(superseded[0].At))
	require.JSONEq(t, fmt.Sprintf(`{"debt_id": %d, "range": %s, "version": "vA", "carried_to": [%d]}`,
		old.ID, rangeJSON(hours(6, 7)), carried.ID), string(superseded[0].Data))
	carriedEvents := listEvents(t, b, state.EventGapCarried)
	require.Len(t, carriedEvents, 1)
	requireCarriedEvent(t, carried, carriedEvents[0])
	require.Greater(t, carriedEvents[0].ID, superseded[0].ID)
	require.Empty(t, listEvents(t, b, state.EventGapRepaired))

	addAt(t, b, vkey("parent", "vA"), set(hours(6, 7)), hour(9))
	require.Equal(t, []int64{carried.ID}, debtIDs(listDebts(t, b, state.DebtFilter{OpenOnly: true})),
		"a write on the version no longer served closed a debt")
	addAt(t, b, vkey("parent", "vB"), set(hours(6, 7)), hour(9))
	require.Empty(t, listDebts(t, b, state.DebtFilter{OpenOnly: true}))
	carried.RepairedAt = hour(9)
	requireDebt(t, carried, listDebts(t, b, state.DebtFilter{})[1])
	requireDebt(t, old, listDebts(t, b, state.DebtFilter{})[0])
	repaired := listEvents(t, b, state.EventGapRepaired)
	require.Len(t, repaired, 1)
	requireRepairedEvent(t, carried, repaired[0])
	require.Equal(t, "plan-B", repaired[0].PlanID)
}

func testDebtReplacementCovers(t *testing.T, b *bundle) {
	// Scenario: prod's plan-1 serves m.a@v1 with the debt [6, 7) accepted
	// at hour 7. plan-2's m.a@v2 was backfilled over [0, 8), so when it is
	// promoted at hour 8 the gap is no longer served: the promotion repairs
	// v1's debt at its Now, with a gap_repaired event (under the plan that
	// accepted the debt, its data naming the promotion and plan-2), and
	// carries nothing. A write that later covers the range on v1 stamps
	// nothing again.
	promoteWithDebts(t, b, "prod", "", "plan-1", hour(7), []state.SnapshotRef{sref("m.a", "v1")},
		newDebt("m.a", "v1", hours(6, 7)))
	add(t, b, vkey("m.a", "v2"), set(hours(0, 8)))
	promote(t, b, "prod", "plan-1", "plan-2", hour(8), sref("m.a", "v2"))

	d := onlyDebt(t, b, state.DebtFilter{})
	require.False(t, d.Open())
	require.True(t, hour(8).Equal(d.RepairedAt), "repaired at %v, want the promotion's Now", d.RepairedAt)
	require.True(t, d.SupersededAt.IsZero(), "a debt the promotion closed was superseded")
	require.Equal(t, "plan-1", d.PlanID)
	events := listEvents(t, b, state.EventGapRepaired, state.EventGapSuperseded, state.EventGapCarried)
	require.Len(t, events, 1)
	ev := events[0]
	require.Equal(t, state.EventGapRepaired, ev.Kind)
	require.True(t, hour(8).Equal(ev.At))
	require.Equal(t, "prod", ev.Environment)
	require.Equal(t, "m.a", ev.Model)
	require.Equal(t, "plan-1", ev.PlanID)
	require.JSONEq(t, fmt.Sprintf(`{"debt_id": %d, "range": %s, "accepted_at": %q, "repaired_at": %q, "latency_seconds": 3600,
		"policy": %q, "repaired_by": "promotion", "plan_id": "plan-2"}`,
		d.ID, rangeJSON(hours(6, 7)), hour(7).Format(time.RFC3339), hour(8).Format(time.RFC3339), d.Policy), string(ev.Data))

	addAt(t, b, vkey("m.a", "v1"), set(hours(0, 7)), hour(9))
	requireDebt(t, d, onlyDebt(t, b, state.DebtFilter{}))
	require.Len(t, listEvents(t, b, state.EventGapRepaired), 1)
}

func testDebtCarriedPartly(t *testing.T, b *bundle) {
	// Scenario: prod's plan-1 serves m.a@v1 with the debt [4, 8) and m.b@v1
	// with the debt [2, 4). plan-2 serves m.a@v2, computed over [0, 5) and
	// [6, 7), and m.b@v2, computed over [0, 4). Promoting it repairs m.b's
	// debt (v2 covers it) and supersedes m.a's, carried to v2 for only
	// what v2 misses: [5, 6) and [7, 8), one debt each, in range order,
	// both named by the gap_superseded event and each recorded by a
	// gap_carried event. Writing [5, 6) on v2 repairs the first only.
	promoteWithDebts(t, b, "prod", "", "plan-1", hour(8), []state.SnapshotRef{sref("m.a", "v1"), sref("m.b", "v1")},
		newDebt("m.a", "v1", hours(4, 8)), newDebt("m.b", "v1", hours(2, 4)))
	old := onlyDebt(t, b, state.DebtFilter{Model: "m.a"})
	add(t, b, vkey("m.a", "v2"), set(hours(0, 5), hours(6, 7)))
	add(t, b, vkey("m.b", "v2"), set(hours(0, 4)))
	promote(t, b, "prod", "plan-1", "plan-2", hour(9), sref("m.a", "v2"), sref("m.b", "v2"))

	b1 := onlyDebt(t, b, state.DebtFilter{Model: "m.b"})
	require.True(t, hour(9).Equal(b1.RepairedAt), "m.b's debt: repaired at %v", b1.RepairedAt)
	debts := listDebts(t, b, state.DebtFilter{Model: "m.a"})
	require.Len(t, debts, 3)
	old.SupersededAt = hour(9)
	requireDebt(t, old, debts[0])
	first := carriedDebt(old, debts[1].ID, "v2", "plan-2", hours(5, 6), hour(9))
	second := carriedDebt(old, debts[2].ID, "v2", "plan-2", hours(7, 8), hour(9))
	requireDebt(t, first, debts[1])
	requireDebt(t, second, debts[2])

	superseded := listEvents(t, b, state.EventGapSuperseded)
	require.Len(t, superseded, 1)
	require.JSONEq(t, fmt.Sprintf(`{"debt_id": %d, "range": %s, "version": "v1", "carried_to": [%d, %d]}`,
		old.ID, rangeJSON(hours(4, 8)), first.ID, second.ID), string(superseded[0].Data))
	carriedEvents := listEvents(t, b, state.EventGapCarried)
	require.Len(t, carriedEvents, 2)
	requireCarriedEvent(t, first, carriedEvents[0])
	requireCarriedEvent(t, second, carriedEvents[1])

	addAt(t, b, vkey("m.a", "v2"), set(hours(5, 6)), hour(10))
	require.Equal(t, []int64{second.ID}, debtIDs(listDebts(t, b, state.DebtFilter{OpenOnly: true})))
}

func testDebtSettlementAtomic(t *testing.T, b *bundle) {
	// Scenario: prod's plan-1 serves m.a@v1 with the debt [6, 7) and m.b@v1
	// with the debt [2, 4); m.a@v2 misses [6, 7), m.b@v2 covers [2, 4).
	// Promotions of plan-2 (m.a@v2, m.b@v2) that would carry m.a's debt
	// and repair m.b's fail: one whose Check fails, one whose Check result
	// holds an event the store refuses (after the settlement was computed),
	// one built against a stale plan. None settles, carries or records
	// anything: the debts, the events and the environment are as before.
	// A valid promotion of the same plan then does settle both.
	before := promoteWithDebts(t, b, "prod", "", "plan-1", hour(7), []state.SnapshotRef{sref("m.a", "v1"), sref("m.b", "v1")},
		newDebt("m.a", "v1", hours(6, 7)), newDebt("m.b", "v1", hours(2, 4)))
	add(t, b, vkey("m.a", "v2"), set(hours(0, 6)))
	add(t, b, vkey("m.b", "v2"), set(hours(0, 4)))
	debts := listDebts(t, b, state.DebtFilter{})
	snaps := []state.SnapshotRef{sref("m.a", "v2"), sref("m.b", "v2")}

	for name, p := range map[string]state.PromoteParams{
		"check error": {ExpectedPlanID: "plan-1", Check: func(context.Context, state.Reader) (state.CheckResult, error) {
			return state.CheckResult{}, errGap
		}},
		"refused event": {ExpectedPlanID: "plan-1", Check: returning(state.CheckResult{Events: []state.Event{{At: hour(8)}}})},
		"stale plan":    {ExpectedPlanID: "plan-0"},
	} {
		p.Environment, p.PlanID, p.Snapshots, p.Now = "prod", "plan-2", snaps, hour(8)
		_, err := b.store.Promote(b.ctx, p)
		require.Errorf(t, err, "%s: the promotion succeeded", name)
		got := listDebts(t, b, state.DebtFilter{})
		require.Lenf(t, got, len(debts), "%s: debts", name)
		for i := range debts {
			requireDebt(t, debts[i], got[i])
		}
		require.Emptyf(t, listEvents(t, b), "%s: events recorded", name)
		requireEnv(t, before, getEnv(t, b, "prod"))
	}

	promote(t, b, "prod", "plan-1", "plan-2", hour(8), snaps...)
	require.Len(t, listDebts(t, b, state.DebtFilter{}), 3)
	require.False(t, onlyDebt(t, b, state.DebtFilter{PlanID: "plan-1", Model: "m.a"}).Open())
	require.False(t, onlyDebt(t, b, state.DebtFilter{PlanID: "plan-1", Model: "m.b"}).Open())
	require.True(t, onlyDebt(t, b, state.DebtFilter{PlanID: "plan-2"}).Open())
}

func testDebtCarryRace(t *testing.T, b *bundle) {
	// Scenario: prod serves m.r@vA with the open debt [0, 4). At the very
	// moment a deploy promotes m.r@vB, on which nothing was recorded, the
	// scheduler records [0, 4) on vB. Whichever commits first, the two
	// must not miss each other: the promotion either sees the coverage and
	// repairs vA's debt, or carries it to vB and the write then repairs
	// the carried debt. Never is a debt left open over a covered range of
	// the version served, and every repaired debt has exactly one
	// gap_repaired event. Each round races fresh versions, in an
	// environment of its own.
	const rounds = 30
	for round := range rounds {
		env := fmt.Sprintf("env-%d", round)
		va, vb := fmt.Sprintf("a%d", round), fmt.Sprintf("b%d", round)
		promoteWithDebts(t, b, env, "", "plan-a", hour(4), []state.SnapshotRef{sref("m.r", va)}, newDebt("m.r", va, hours(0, 4)))
		errs := make([]error, 2)
		race(2, func(i int) {
			if i == 0 {
				_, errs[i] = b.store.Promote(b.ctx, state.PromoteParams{
					Environment: env, ExpectedPlanID: "plan-a", PlanID: "plan-b", Snapshots: []state.SnapshotRef{sref("m.r", vb)}, Now: hour(5),
				})
				return
			}
			errs[i] = b.store.AddIntervals(b.ctx, state.IntervalsParams{Key: vkey("m.r", vb), Ranges: set(hours(0, 4)), Now: hour(6)})
		})
		require.NoError(t, errs[0], "round %d: promotion", round)
		require.NoError(t, errs[1], "round %d: interval write", round)
		require.Emptyf(t, listDebts(t, b, state.DebtFilter{Environment: env, OpenOnly: true}),
			"round %d: a debt was left open over a covered range", round)
		debts := listDebts(t, b, state.DebtFilter{Environment: env})
		repaired, err := b.store.ListEvents(b.ctx, state.EventFilter{Kinds: []string{state.EventGapRepaired}, Environment: env})
		require.NoError(t, err)
		require.Lenf(t, repaired, 1, "round %d: gap_repaired events", round)
		switch len(debts) {
		case 1: // the write committed first: the promotion repaired vA's debt
			require.Truef(t, hour(5).Equal(debts[0].RepairedAt), "round %d: repaired at %v", round, debts[0].RepairedAt)
		case 2: // the promotion committed first: the write repaired the carried debt
			require.Falsef(t, debts[0].SupersededAt.IsZero(), "round %d: vA's debt was not superseded", round)
			require.Equalf(t, debts[0].ID, debts[1].CarriedFrom, "round %d", round)
			require.Truef(t, hour(6).Equal(debts[1].RepairedAt), "round %d: carried debt repaired at %v", round, debts[1].RepairedAt)
		default:
			require.Failf(t, "unexpected debts", "round %d: %+v", round, debts)
		}
	}
}

func testDebtListFilters(t *testing.T, b *bundle) {
	// Scenario: debts across two environments, three plans and two models,
	// one of them repaired. Every filter field narrows the list, alone and
	// combined; OpenOnly drops the repaired debt; results are in id order.
	snaps := []state.SnapshotRef{sref("m.a", "v1"), sref("m.b", "v1")}
	promoteWithDebts(t, b, "prod", "", "p1", hour(4), snaps, newDebt("m.a", "v1", hours(0, 4)), newDebt("m.b", "v1", hours(0, 4)))
	promoteWithDebts(t, b, "dev", "", "p2", hour(5), snaps, newDebt("m.a", "v1", hours(1, 5)))
	promoteWithDebts(t, b, "prod", "p1", "p3", hour(6), snaps, newDebt("m.b", "v1", hours(4, 6)))
	addAt(t, b, vkey("m.b", "v1"), set(hours(0, 5)), hour(7)) // repairs prod's m.b debt of p1 only
	all := listDebts(t, b, state.DebtFilter{})
	require.Len(t, all, 4)
	id := debtIDs(all)
	require.IsIncreasing(t, id)
	require.False(t, all[1].Open())

	for _, c := range []struct {
		name string
		f    state.DebtFilter
		want []int64
	}{
		{"none", state.DebtFilter{}, id},
		{"environment", state.DebtFilter{Environment: "prod"}, []int64{id[0], id[1], id[3]}},
		{"model", state.DebtFilter{Model: "m.a"}, []int64{id[0], id[2]}},
		{"plan", state.DebtFilter{PlanID: "p3"}, []int64{id[3]}},
		{"open only", state.DebtFilter{OpenOnly: true}, []int64{id[0], id[2], id[3]}},
		{"unknown environment", state.DebtFilter{Environment: "nowhere"}, nil},
		{"combined", state.DebtFilter{Environment: "prod", Model: "m.b", OpenOnly: true}, []int64{id[3]}},
		{"combined with plan", state.DebtFilter{Environment: "prod", Model: "m.b", PlanID: "p1"}, []int64{id[1]}},
	} {
		require.Equal(t, c.want, nilIfEmpty(debtIDs(listDebts(t, b, c.f))), c.name)
	}
}

func testDebtAddNeedsNow(t *testing.T, b *bundle) {
	// Scenario: an interval write without Now could complete a debt with no
	// time to stamp as its repair; time is injected, never read from a
	// clock, so the store refuses the write and records nothing.
	k := vkey("m.a", "v1")
	promoteWithDebts(t, b, "prod", "", "plan-1", hour(4), []state.SnapshotRef{sref("m.a", "v1")}, newDebt("m.a", "v1", hours(0, 4)))
	require.Error(t, b.store.AddIntervals(b.ctx, state.IntervalsParams{Key: k, Ranges: set(hours(0, 4))}))
	requireIntervals(t, b, k, interval.Set{})
	require.True(t, onlyDebt(t, b, state.DebtFilter{}).Open())
}

func testDebtRace(t *testing.T, b *bundle) {
	// Scenario: a deploy accepts a gap on a version no interval was ever
	// recorded for, at the very moment the scheduler records that range.
	// Whichever commits first, the two must not miss each other: the
	// promotion either sees the coverage and records the debt repaired, or
	// the write sees the debt and repairs it. Never is the debt left open
	// over a covered range, and it has exactly one gap_repaired event. Each
	// round races a fresh version, in an environment of its own.
	const rounds = 30
	for round := range rounds {
		env, version := fmt.Sprintf("env-%d", round), fmt.Sprintf("v%d", round)
		k := vkey("m.r", version)
		errs := make([]error, 2)
		race(2, func(i int) {
			if i == 0 {
				_, errs[i] = b.store.Promote(b.ctx, state.PromoteParams{
					Environment: env, PlanID: "plan-" + version, Snapshots: []state.SnapshotRef{sref("m.r", version)}, Now: hour(4),
					Check: func(ctx context.Context, r state.Reader) (state.CheckResult, error) {
						got, err := r.GetIntervals(ctx, []state.VersionKey{k})
						if err != nil {
							return state.CheckResult{}, err
						}
						gap := got[k].Missing(hours(0, 4))
						if gap.IsEmpty() {
							return state.CheckResult{}, nil
						}
						return state.CheckResult{Debts: []state.Debt{newDebt("m.r", version, gap.Span())}}, nil
					},
				})
				return
			}
			errs[i] = b.store.AddIntervals(b.ctx, state.IntervalsParams{Key: k, Ranges: set(hours(0, 4)), Now: hour(5)})
		})
		require.NoError(t, errs[0], "round %d: promotion", round)
		require.NoError(t, errs[1], "round %d: interval write", round)
		debts := listDebts(t, b, state.DebtFilter{Environment: env})
		if len(debts) == 0 {
			continue // the write committed before the check read: no gap to accept
		}
		require.Len(t, debts, 1)
		require.Falsef(t, debts[0].Open(), "round %d: the debt was left open over a covered range", round)
		repaired, err := b.store.ListEvents(b.ctx, state.EventFilter{Kinds: []string{state.EventGapRepaired}, Environment: env})
		require.NoError(t, err)
		require.Lenf(t, repaired, 1, "round %d: gap_repaired events", round)
	}
}

func testDebtInvalidate(t *testing.T, b *bundle) {
	// Scenario: dev serves m.a@v1 and m.b@v1 with a debt on each; m.b's is
	// repaired by the scheduler. prod serves m.a@v1 with a debt of its own.
	// Invalidating dev at hour 6 supersedes, in the same transaction, only
	// dev's open debt (stamped at hour 6, not repaired), with one
	// gap_superseded event for it: under dev, its model, no plan, reason
	// "invalidated", naming the debt, its range and version, carried
	// nowhere. dev's repaired debt is left as it was, and prod's debt,
	// in another environment, stays open: coverage arriving later repairs
	// prod's debt and not dev's superseded one. Invalidating dev again
	// supersedes nothing more, and invalidating an unknown environment
	// changes nothing.
	snaps := []state.SnapshotRef{sref("m.a", "v1"), sref("m.b", "v1")}
	promoteWithDebts(t, b, "dev", "", "dev-1", hour(4), snaps,
		newDebt("m.a", "v1", hours(2, 4)), newDebt("m.b", "v1", hours(2, 4)))
	promoteWithDebts(t, b, "prod", "", "prod-1", hour(4), []state.SnapshotRef{sref("m.a", "v1")},
		newDebt("m.a", "v1", hours(3, 4)))
	addAt(t, b, vkey("m.b", "v1"), set(hours(0, 4)), hour(5))
	repaired := onlyDebt(t, b, state.DebtFilter{Environment: "dev", Model: "m.b"})
	require.False(t, repaired.Open())
	prodBefore := onlyDebt(t, b, state.DebtFilter{Environment: "prod"})
	open := onlyDebt(t, b, state.DebtFilter{Environment: "dev", Model: "m.a"})
	require.True(t, open.Open())
	eventsBefore := listEvents(t, b)

	require.ErrorIs(t, b.store.Invalidate(b.ctx, state.InvalidateParams{Environment: "nowhere", Now: hour(6)}), state.ErrNotFound)
	require.Equal(t, len(eventsBefore), len(listEvents(t, b)))
	require.NoError(t, b.store.Invalidate(b.ctx, state.InvalidateParams{Environment: "dev", Now: hour(6)}))

	superseded := onlyDebt(t, b, state.DebtFilter{Environment: "dev", Model: "m.a"})
	want := open
	want.SupersededAt = hour(6)
	requireDebt(t, want, superseded)
	require.False(t, superseded.Open())
	requireDebt(t, repaired, onlyDebt(t, b, state.DebtFilter{Environment: "dev", Model: "m.b"}))
	requireDebt(t, prodBefore, onlyDebt(t, b, state.DebtFilter{Environment: "prod"}))
	require.Empty(t, listDebts(t, b, state.DebtFilter{Environment: "dev", OpenOnly: true}))

	events := listEvents(t, b, state.EventGapSuperseded)
	require.Len(t, events, 1)
	ev := events[0]
	require.Equal(t, "dev", ev.Environment)
	require.Equal(t, "m.a", ev.Model)
	require.Empty(t, ev.PlanID)
	require.Equal(t, state.ReasonInvalidated, ev.Reason)
	require.True(t, hour(6).Equal(ev.At), "event at %v", ev.At)
	require.JSONEq(t, fmt.Sprintf(`{"debt_id": %d, "range": %s, "version": "v1"}`, open.ID, rangeJSON(hours(2, 4))), string(ev.Data))
	require.Len(t, listEvents(t, b), len(eventsBefore)+1, "Invalidate appended another event")

	require.NoError(t, b.store.Invalidate(b.ctx, state.InvalidateParams{Environment: "dev", Now: hour(7)}))
	require.Len(t, listEvents(t, b, state.EventGapSuperseded), 1)
	requireDebt(t, want, onlyDebt(t, b, state.DebtFilter{Environment: "dev", Model: "m.a"}))

	addAt(t, b, vkey("m.a", "v1"), set(hours(0, 4)), hour(8))
	require.False(t, onlyDebt(t, b, state.DebtFilter{Environment: "prod"}).Open(), "prod's debt was not repaired")
	stillSuperseded := onlyDebt(t, b, state.DebtFilter{Environment: "dev", Model: "m.a"})
	require.True(t, stillSuperseded.RepairedAt.IsZero(), "a superseded debt was repaired")
}

func testDebtRemoveEnvironment(t *testing.T, b *bundle) {
	// Scenario: dev (plan dev-1, generation 1) serves m.a@v1 and m.b@v1
	// with a debt on each; m.b's is repaired by the scheduler. prod serves
	// m.a@v1 with a debt of its own. Removing dev at hour 6, pinned to
	// generation 1, in one transaction: deletes its row, supersedes only
	// dev's open debt (stamped at hour 6) with one gap_superseded event
	// (under dev, its model, no plan, reason "removed", naming the debt,
	// its range and version), records hour 6 as the last-served time of
	// dev's versions, and appends the environment_removing event last (at
	// hour 6, dev, plan dev-1, the caller's data), which it returns with
	// its id. dev's repaired debt and prod's open debt are left as they
	// were; coverage arriving later repairs prod's debt, not dev's.
	snaps := []state.SnapshotRef{sref("m.a", "v1"), sref("m.b", "v1")}
	dev := promoteWithDebts(t, b, "dev", "", "dev-1", hour(4), snaps,
		newDebt("m.a", "v1", hours(2, 4)), newDebt("m.b", "v1", hours(2, 4)))
	promoteWithDebts(t, b, "prod", "", "prod-1", hour(4), []state.SnapshotRef{sref("m.a", "v1")},
		newDebt("m.a", "v1", hours(3, 4)))
	addAt(t, b, vkey("m.b", "v1"), set(hours(0, 4)), hour(5))
	repaired := onlyDebt(t, b, state.DebtFilter{Environment: "dev", Model: "m.b"})
	prodBefore := onlyDebt(t, b, state.DebtFilter{Environment: "prod"})
	open := onlyDebt(t, b, state.DebtFilter{Environment: "dev", Model: "m.a"})
	require.True(t, open.Open())
	eventsBefore := listEvents(t, b)

	removal, err := b.store.RemoveEnvironment(b.ctx, state.RemoveEnvironmentParams{Name: "dev", Generation: dev.Generation,
		Now: hour(6), Data: json.RawMessage(`{"views": ["v"]}`)})
	require.NoError(t, err)
	_, err = b.store.GetEnvironment(b.ctx, "dev")
	require.ErrorIs(t, err, state.ErrNotFound)

	superseded := onlyDebt(t, b, state.DebtFilter{Environment: "dev", Model: "m.a"})
	want := open
	want.SupersededAt = hour(6)
	requireDebt(t, want, superseded)
	requireDebt(t, repaired, onlyDebt(t, b, state.DebtFilter{Environment: "dev", Model: "m.b"}))
	requireDebt(t, prodBefore, onlyDebt(t, b, state.DebtFilter{Environment: "prod"}))
	require.Empty(t, listDebts(t, b, state.DebtFilter{Environment: "dev", OpenOnly: true}))
	requireLastServed(t, b, []state.VersionKey{vkey("m.a", "v1"), vkey("m.b", "v1")},
		map[state.VersionKey]time.Time{vkey("m.a", "v1"): hour(6), vkey("m.b", "v1"): hour(6)})

	events := listEvents(t, b)
	require.Len(t, events, len(eventsBefore)+2, "one gap_superseded and one environment_removing event")
	ev := events[len(eventsBefore)]
	require.Equal(t, state.EventGapSuperseded, ev.Kind)
	require.Equal(t, "dev", ev.Environment)
	require.Equal(t, "m.a", ev.Model)
	require.Empty(t, ev.PlanID)
	require.Equal(t, state.ReasonRemoved, ev.Reason)
	require.True(t, hour(6).Equal(ev.At), "event at %v", ev.At)
	require.JSONEq(t, fmt.Sprintf(`{"debt_id": %d, "range": %s, "version": "v1"}`, open.ID, rangeJSON(hours(2, 4))), string(ev.Data))
	last := events[len(events)-1]
	require.Equal(t, state.EventEnvironmentRemoving, last.Kind)
	require.Equal(t, last.ID, removal.ID)
	require.Equal(t, "dev", last.Environment)
	require.Equal(t, "dev-1", last.PlanID)
	require.True(t, hour(6).Equal(last.At), "event at %v", last.At)
	require.JSONEq(t, `{"views": ["v"]}`, string(last.Data))
	require.Equal(t, last.Kind, removal.Kind)
	require.Equal(t, last.PlanID, removal.PlanID)

	addAt(t, b, vkey("m.a", "v1"), set(hours(0, 4)), hour(8))
	require.False(t, onlyDebt(t, b, state.DebtFilter{Environment: "prod"}).Open(), "prod's debt was not repaired")
	require.True(t, onlyDebt(t, b, state.DebtFilter{Environment: "dev", Model: "m.a"}).RepairedAt.IsZero(), "a superseded debt was repaired")
}

func testDebtRemoveEnvironmentStale(t *testing.T, b *bundle) {
	// Scenario: the janitor read dev at generation 1, with an open debt;
	// dev was promoted again (generation 2, the debt carried over by
	// nothing: the same snapshots) before the removal. The removal, pinned
	// to generation 1, fails with ErrConflictingPlan and writes nothing: dev
	// is still there at generation 2, its debt open, no event appended and
	// no last-served time recorded. Without Now, and for an unknown
	// environment, it writes nothing either.
	snaps := []state.SnapshotRef{sref("m.a", "v1")}
	e1 := promoteWithDebts(t, b, "dev", "", "dev-1", hour(4), snaps, newDebt("m.a", "v1", hours(2, 4)))
	e2 := promote(t, b, "dev", "dev-1", "dev-2", hour(5), snaps...)
	open := onlyDebt(t, b, state.DebtFilter{Environment: "dev"})
	require.True(t, open.Open())
	eventsBefore := listEvents(t, b)

	_, err := b.store.RemoveEnvironment(b.ctx, state.RemoveEnvironmentParams{Name: "dev", Generation: e1.Generation, Now: hour(6)})
	require.ErrorIs(t, err, state.ErrConflictingPlan)
	_, err = b.store.RemoveEnvironment(b.ctx, state.RemoveEnvironmentParams{Name: "dev", Generation: e2.Generation})
	require.Error(t, err)
	require.NotErrorIs(t, err, state.ErrConflictingPlan)
	_, err = b.store.RemoveEnvironment(b.ctx, state.RemoveEnvironmentParams{Name: "nowhere", Generation: 1, Now: hour(6)})
	require.ErrorIs(t, err, state.ErrNotFound)

	requireEnv(t, e2, getEnv(t, b, "dev"))
	requireDebt(t, open, onlyDebt(t, b, state.DebtFilter{Environment: "dev"}))
	require.Equal(t, eventsBefore, listEvents(t, b))
	requireLastServed(t, b, []state.VersionKey{vkey("m.a", "v1")}, map[state.VersionKey]time.Time{})
}
