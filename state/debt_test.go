package state

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/interval"
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
	ref := func(name, version string) SnapshotRef {
		return SnapshotRef{Name: name, Fingerprint: "fp-" + name + version, Version: version}
	}
	debt := func(id int64, env, model, version string, rg interval.Range) Debt {
		return Debt{ID: id, Environment: env, Model: model, Version: version, Range: rg, PlanID: "plan-1",
			Policy: "trailing-gap(3)", Bound: 3, Advances: 2, AcceptedAt: h(8)}
	}
	p := PromoteParams{
		Environment: "prod", ExpectedPlanID: "plan-1", PlanID: "plan-2", Now: h(10),
		Snapshots: []SnapshotRef{ref("m.c", "v2"), ref("m.a", "v2"), ref("m.b", "v1")},
	}
	repaired := debt(6, "prod", "m.a", "v1", r(0, 1))
	repaired.RepairedAt = h(9)
	open := []Debt{
		debt(1, "prod", "m.a", "v1", r(4, 8)),
		debt(2, "prod", "m.b", "v1", r(1, 2)),
		debt(3, "prod", "m.c", "v1", r(2, 4)),
		debt(4, "prod", "m.d", "v1", r(2, 4)),
		debt(5, "dev", "m.a", "v1", r(4, 8)),
		repaired,
		debt(7, "prod", "m.a", "v0", r(0, 1)),
	}
	keys := ReplacementKeys(p, open)
	require.Equal(t, []VersionKey{{"m.a", "v2"}, {"m.c", "v2"}}, keys)
	covered := map[VersionKey]interval.Set{
		{"m.a", "v2"}: interval.NewSet(r(0, 5), r(6, 7)),
		{"m.c", "v2"}: interval.NewSet(r(0, 9)),
	}

	got, err := SettleDebts(p, open, covered)
	require.NoError(t, err)
	superseded := func(d Debt) Debt { d.SupersededAt = h(10); return d }
	carried := func(from int64, rg interval.Range) Debt {
		return Debt{Environment: "prod", Model: "m.a", Version: "v2", Range: rg, PlanID: "plan-2",
			Policy: "trailing-gap(3)", Bound: 3, Advances: 2, AcceptedAt: h(10), CarriedFrom: from}
	}
	repairedNow := func(d Debt) Debt { d.RepairedAt = h(10); return d }
	require.Equal(t, []Settlement{
		{Debt: superseded(open[0]), Carried: []Debt{carried(1, r(5, 6)), carried(1, r(7, 8))}},
		{Debt: repairedNow(open[2])},
		{Debt: superseded(open[3])},
		{Debt: repairedNow(open[6])},
	}, got)

	_, err = SettleDebts(p, open, map[VersionKey]interval.Set{{"m.c", "v2"}: {}})
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
		EventGapSuperseded, EventGapCarried, EventGapCarried,
		EventGapRepaired,
		EventGapSuperseded,
		EventGapRepaired,
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
	p := PromoteParams{Environment: "prod", PlanID: "plan-1", Now: now,
		Snapshots: []SnapshotRef{{Name: "m.a", Fingerprint: "f", Version: "v1"}}}
	d := Debt{Model: "m.a", Version: "v1", Range: interval.NewRange(now.Add(-time.Hour), now), Bound: 1}
	got, err := PrepareDebts(p, []Debt{d})
	require.NoError(t, err)
	require.Equal(t, "prod", got[0].Environment)
	d.CarriedFrom = 7
	_, err = PrepareDebts(p, []Debt{d})
	require.ErrorContains(t, err, "carried_from")
}

// Scenario: an environment was invalidated with open debt and is promoted
// afresh (expected plan ""), even with the same version of the model: the
// earlier incarnation's debt is superseded, never carried or kept open.
func TestSettleDebtsOfAFreshEnvironmentSupersedes(t *testing.T) {
	t.Parallel()
	now := time.Date(2024, 1, 2, 0, 0, 0, 0, time.UTC)
	d := Debt{ID: 7, Environment: "dev", Model: "m", Version: "v1", PlanID: "old",
		Range: interval.NewRange(now.Add(-2*time.Hour), now.Add(-time.Hour)), AcceptedAt: now.Add(-time.Hour)}
	p := PromoteParams{Environment: "dev", ExpectedPlanID: "", PlanID: "new", Now: now,
		Snapshots: []SnapshotRef{{Name: "m", Fingerprint: "f", Version: "v1"}}}
	got, err := SettleDebts(p, []Debt{d}, nil)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, now, got[0].Debt.SupersededAt)
	require.Empty(t, got[0].Carried)

	p.ExpectedPlanID = "old"
	got, err = SettleDebts(p, []Debt{d}, nil)
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
	carried := func(rg interval.Range) Debt {
		return Debt{Environment: "prod", Model: "m.a", Version: "v2", Range: rg, PlanID: "plan-2", CarriedFrom: 1}
	}
	settled := []Settlement{{Debt: Debt{ID: 1}, Carried: []Debt{carried(r(5, 6)), carried(r(7, 8))}}}
	repairedOwn := Debt{Model: "m.a", Version: "v2", Range: r(5, 6), RepairedAt: h(10)}
	otherVersion := Debt{Model: "m.a", Version: "v3", Range: r(0, 9)}
	own := Debt{Model: "m.a", Version: "v2", Range: r(7, 9)}
	got := TrimCarried(settled, []Debt{repairedOwn, otherVersion, own})
	require.Equal(t, []Settlement{{Debt: Debt{ID: 1}, Carried: []Debt{carried(r(5, 6))}}}, got)

	whole := []Settlement{{Debt: Debt{ID: 2}, Carried: []Debt{carried(r(5, 6))}}}
	require.Empty(t, TrimCarried(whole, []Debt{{Model: "m.a", Version: "v2", Range: r(4, 7)}})[0].Carried)
}
