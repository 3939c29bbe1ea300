package debt

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/state"
)

func TestSettleDebts(t *testing.T) {
	// Scenario: prod's promotion of plan-2 serves m.a@v2 (covering [0, 5)
	// and [6, 7)), m.b@v1 (unchanged) and m.c@v2 (covering [0, 9)), and no
	// longer serves m.d. Among prod's debts: m.a@v1 [4, 8) is superseded
	// and carried to v2 for [5, 6) and [7, 8); m.b@v1 is still served and
	// left alone; m.c@v1 [2, 4) and m.a@v0 [0, 1) are repaired; m.d@v1 is
	// superseded with nothing carried; a debt already repaired and one of
	// another environment are left alone. ReplacementKeys names exactly the served
	// versions to read, once each, sorted; a settlement whose replacement
	// was not read fails rather than guessing.
	t.Parallel()
	h := func(n int) time.Time { return time.Date(2024, 1, 1, n, 0, 0, 0, time.UTC) }
	r := func(a, b int) interval.Range { return interval.NewRange(h(a), h(b)) }
	ref := func(name, version string) state.SnapshotRef {
		return state.SnapshotRef{Name: name, Fingerprint: "fp-" + name + version, Version: version}
	}
	debt := func(id int64, env, model, version string, rg interval.Range) state.Debt {
		return state.Debt{ID: id, Environment: env, Model: model, Version: version, Range: rg, PlanID: "plan-1",
			Policy: "trailing-gap(3)", Bound: 3, Advances: 2, AcceptedAt: h(8)}
	}
	p := state.PromoteParams{
		Environment: "prod", ExpectedPlanID: "plan-1", PlanID: "plan-2", Now: h(10),
		Snapshots: []state.SnapshotRef{ref("m.c", "v2"), ref("m.a", "v2"), ref("m.b", "v1")},
	}
	repaired := debt(6, "prod", "m.a", "v1", r(0, 1))
	repaired.RepairedAt = h(9)
	open := []state.Debt{
		debt(1, "prod", "m.a", "v1", r(4, 8)),
		debt(2, "prod", "m.b", "v1", r(1, 2)),
		debt(3, "prod", "m.c", "v1", r(2, 4)),
		debt(4, "prod", "m.d", "v1", r(2, 4)),
		debt(5, "dev", "m.a", "v1", r(4, 8)),
		repaired,
		debt(7, "prod", "m.a", "v0", r(0, 1)),
	}
	keys := ReplacementKeys(p, open)
	require.Equal(t, []state.VersionKey{{Name: "m.a", Version: "v2"}, {Name: "m.c", Version: "v2"}}, keys)
	covered := map[state.VersionKey]interval.Set{
		{Name: "m.a", Version: "v2"}: interval.NewSet(r(0, 5), r(6, 7)),
		{Name: "m.c", Version: "v2"}: interval.NewSet(r(0, 9)),
	}

	got, err := Settle(p, open, covered)
	require.NoError(t, err)
	superseded := func(d state.Debt) state.Debt { d.SupersededAt = h(10); return d }
	carried := func(from int64, rg interval.Range) state.Debt {
		return state.Debt{Environment: "prod", Model: "m.a", Version: "v2", Range: rg, PlanID: "plan-2",
			Policy: "trailing-gap(3)", Bound: 3, Advances: 2, AcceptedAt: h(10), CarriedFrom: from}
	}
	repairedNow := func(d state.Debt) state.Debt { d.RepairedAt = h(10); return d }
	require.Equal(t, []Settlement{
		{Debt: superseded(open[0]), Carried: []state.Debt{carried(1, r(5, 6)), carried(1, r(7, 8))}},
		{Debt: repairedNow(open[2])},
		{Debt: superseded(open[3])},
		{Debt: repairedNow(open[6])},
	}, got)

	_, err = Settle(p, open, map[state.VersionKey]interval.Set{{Name: "m.c", Version: "v2"}: {}})
	require.ErrorContains(t, err, "m.a@v2 were not read")

	// Events need the carried debts' ids.
	_, err = SettlementEvents(got, "plan-2")
	require.Error(t, err)
	for i := range got {
		for j := range got[i].Carried {
			got[i].Carried[j].ID = int64(100 + 10*i + j)
		}
	}
	events, err := SettlementEvents(got, "plan-2")
	require.NoError(t, err)
	kinds := make([]string, len(events))
	for i, e := range events {
		kinds[i] = e.Kind
	}
	require.Equal(t, []string{
		state.EventGapSuperseded, state.EventGapCarried, state.EventGapCarried,
		state.EventGapRepaired,
		state.EventGapSuperseded,
		state.EventGapRepaired,
	}, kinds)
	require.JSONEq(t, `{"debt_id": 1, "range": {"start": "2024-01-01T04:00:00Z", "end": "2024-01-01T08:00:00Z"},
		"version": "v1", "carried_to": [100, 101]}`, string(events[0].Data))
	require.Equal(t, "plan-1", events[3].PlanID)
	require.JSONEq(t, `{"debt_id": 3, "range": {"start": "2024-01-01T02:00:00Z", "end": "2024-01-01T04:00:00Z"},
		"accepted_at": "2024-01-01T08:00:00Z", "repaired_at": "2024-01-01T10:00:00Z", "latency_seconds": 7200,
		"policy": "trailing-gap(3)", "repaired_by": "promotion", "plan_id": "plan-2"}`, string(events[3].Data))
}

func TestPrepareDebtsRefusesACarriedDebt(t *testing.T) {
	// Scenario: a Check returns a debt claiming to be carried from another;
	// only the store carries debts, so the promotion is refused.
	t.Parallel()
	now := time.Date(2024, 1, 1, 10, 0, 0, 0, time.UTC)
	p := state.PromoteParams{Environment: "prod", PlanID: "plan-1", Now: now,
		Snapshots: []state.SnapshotRef{{Name: "m.a", Fingerprint: "f", Version: "v1"}}}
	d := state.Debt{Model: "m.a", Version: "v1", Range: interval.NewRange(now.Add(-time.Hour), now), Bound: 1}
	got, err := Prepare(p, []state.Debt{d})
	require.NoError(t, err)
	require.Equal(t, "prod", got[0].Environment)
	d.CarriedFrom = 7
	_, err = Prepare(p, []state.Debt{d})
	require.ErrorContains(t, err, "carried_from")
}

// Scenario: an environment was invalidated with open debt and is promoted
// afresh (expected plan ""), even with the same version of the model: the
// earlier incarnation's debt is superseded, never carried or kept open.
func TestSettleDebtsOfAFreshEnvironmentSupersedes(t *testing.T) {
	t.Parallel()
	now := time.Date(2024, 1, 2, 0, 0, 0, 0, time.UTC)
	d := state.Debt{ID: 7, Environment: "dev", Model: "m", Version: "v1", PlanID: "old",
		Range: interval.NewRange(now.Add(-2*time.Hour), now.Add(-time.Hour)), AcceptedAt: now.Add(-time.Hour)}
	p := state.PromoteParams{Environment: "dev", ExpectedPlanID: "", PlanID: "new", Now: now,
		Snapshots: []state.SnapshotRef{{Name: "m", Fingerprint: "f", Version: "v1"}}}
	got, err := Settle(p, []state.Debt{d}, nil)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, now, got[0].Debt.SupersededAt)
	require.Empty(t, got[0].Carried)

	p.ExpectedPlanID = "old"
	got, err = Settle(p, []state.Debt{d}, nil)
	require.NoError(t, err)
	require.Empty(t, got, "a live environment still serving the version keeps the debt open")
}

func TestTrimCarried(t *testing.T) {
	// Scenario: a promotion supersedes m.a@v1's debt [4, 8) and carries
	// [5, 6) and [7, 8) to v2, while its own check accepted a trailing gap
	// of v2 over [7, 9). The overlap [7, 8) is tracked once, by the accepted
	// debt; [5, 6) is still carried. A repaired accepted debt takes nothing
	// over, and another version's debt is no match.
	t.Parallel()
	h := func(n int) time.Time { return time.Date(2024, 1, 1, n, 0, 0, 0, time.UTC) }
	r := func(a, b int) interval.Range { return interval.NewRange(h(a), h(b)) }
	carried := func(rg interval.Range) state.Debt {
		return state.Debt{Environment: "prod", Model: "m.a", Version: "v2", Range: rg, PlanID: "plan-2", CarriedFrom: 1}
	}
	settled := []Settlement{{Debt: state.Debt{ID: 1}, Carried: []state.Debt{carried(r(5, 6)), carried(r(7, 8))}}}
	repairedOwn := state.Debt{Model: "m.a", Version: "v2", Range: r(5, 6), RepairedAt: h(10)}
	otherVersion := state.Debt{Model: "m.a", Version: "v3", Range: r(0, 9)}
	own := state.Debt{Model: "m.a", Version: "v2", Range: r(7, 9)}
	got := TrimCarried(settled, []state.Debt{repairedOwn, otherVersion, own})
	require.Equal(t, []Settlement{{Debt: state.Debt{ID: 1}, Carried: []state.Debt{carried(r(5, 6))}}}, got)

	whole := []Settlement{{Debt: state.Debt{ID: 2}, Carried: []state.Debt{carried(r(5, 6))}}}
	require.Empty(t, TrimCarried(whole, []state.Debt{{Model: "m.a", Version: "v2", Range: r(4, 7)}})[0].Carried)
}
