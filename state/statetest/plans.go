package statetest

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/state"
)

func planTests() []test {
	return []test{
		{"SaveAndGet", testPlanSaveGet},
		{"SaveIsIdempotentPerPayload", testPlanSaveIdempotent},
		{"GetMissing", testPlanGetMissing},
		{"RejectsInvalidPayload", testPlanInvalidPayload},
		{"ApplicationHistoryInOrder", testPlanApplications},
		{"ApplicationOfUnknownPlan", testPlanApplicationUnknown},
		{"ListFiltersAndOrder", testPlanList},
		{"ListRejectsNegativeLimit", testPlanListNegativeLimit},
		{"DeleteKeepsServedAndRecentPlans", testPlanDelete},
		{"DeleteAfterTheEnvironmentIsRemoved", testPlanDeleteAfterRemoval},
		{"DeleteRequiresBefore", testPlanDeleteRequiresBefore},
	}
}

const planPayload = `{"format": 1, "environment": "prod", "models": ["a", "b"], "bounds": {"start": "2024-01-01T00:00:00Z"}}`

func testPlanSaveGet(t *testing.T, b *bundle) {
	// Scenario: a saved plan is read back with its environment, creation
	// time and an equivalent JSON payload.
	p := state.Plan{ID: "plan-1", Environment: "prod", Payload: json.RawMessage(planPayload), CreatedAt: hour(5)}
	require.NoError(t, b.store.SavePlan(b.ctx, p))
	got, err := b.store.GetPlan(b.ctx, "plan-1")
	require.NoError(t, err)
	require.Equal(t, "plan-1", got.ID)
	require.Equal(t, "prod", got.Environment)
	require.True(t, got.CreatedAt.Equal(hour(5)), "CreatedAt %v", got.CreatedAt)
	require.JSONEq(t, planPayload, string(got.Payload))
}

func testPlanSaveIdempotent(t *testing.T, b *bundle) {
	// Scenario: saving a plan id again with the same payload is a no-op
	// that keeps the first record; with a different payload it is an error
	// and the first record stays.
	p := state.Plan{ID: "plan-1", Environment: "prod", Payload: json.RawMessage(planPayload), CreatedAt: hour(5)}
	require.NoError(t, b.store.SavePlan(b.ctx, p))
	again := p
	again.CreatedAt = hour(9)
	require.NoError(t, b.store.SavePlan(b.ctx, again))

	other := p
	other.Payload = json.RawMessage(`{"format": 1, "models": ["c"]}`)
	require.Error(t, b.store.SavePlan(b.ctx, other))

	got, err := b.store.GetPlan(b.ctx, "plan-1")
	require.NoError(t, err)
	require.JSONEq(t, planPayload, string(got.Payload))
	require.True(t, got.CreatedAt.Equal(hour(5)), "CreatedAt %v", got.CreatedAt)
}

func testPlanGetMissing(t *testing.T, b *bundle) {
	// Scenario: a plan that was never saved is not found.
	_, err := b.store.GetPlan(b.ctx, "plan-missing")
	require.ErrorIs(t, err, state.ErrNotFound)
}

func testPlanInvalidPayload(t *testing.T, b *bundle) {
	// Scenario: a payload that is not JSON, or a plan without an id, is
	// refused and nothing is saved.
	require.Error(t, b.store.SavePlan(b.ctx, state.Plan{ID: "plan-1", Environment: "prod", Payload: json.RawMessage(`{"oops"`)}))
	require.Error(t, b.store.SavePlan(b.ctx, state.Plan{ID: "", Environment: "prod", Payload: json.RawMessage(`{}`)}))
	_, err := b.store.GetPlan(b.ctx, "plan-1")
	require.ErrorIs(t, err, state.ErrNotFound)
}

func testPlanApplications(t *testing.T, b *bundle) {
	// Scenario: the stages of two plans' applies are recorded interleaved.
	// Each plan's history comes back in recording order with increasing
	// ids, its details and times intact; an unknown plan has none.
	for _, id := range []string{"plan-1", "plan-2"} {
		require.NoError(t, b.store.SavePlan(b.ctx, state.Plan{ID: id, Environment: "prod", Payload: json.RawMessage(`{}`)}))
	}
	steps := []state.Application{
		{PlanID: "plan-1", Stage: "backfill", Status: "started", At: hour(1)},
		{PlanID: "plan-2", Stage: "backfill", Status: "started", At: hour(1)},
		{PlanID: "plan-1", Stage: "backfill", Status: "finished", At: hour(2), Detail: json.RawMessage(`{"intervals": 24}`)},
		{PlanID: "plan-2", Stage: "backfill", Status: "failed", At: hour(2), Detail: json.RawMessage(`{"error": "boom"}`)},
		{PlanID: "plan-1", Stage: "promote", Status: "finished", At: hour(3)},
	}
	var lastID int64
	recorded := map[string][]state.Application{}
	for _, a := range steps {
		got, err := b.store.RecordApplication(b.ctx, a)
		require.NoError(t, err)
		require.Greater(t, got.ID, lastID)
		lastID = got.ID
		recorded[a.PlanID] = append(recorded[a.PlanID], got)
	}
	for id, want := range recorded {
		got, err := b.store.ListApplications(b.ctx, id)
		require.NoError(t, err)
		require.Len(t, got, len(want))
		for i := range want {
			require.Equal(t, want[i].ID, got[i].ID)
			require.Equal(t, id, got[i].PlanID)
			require.Equal(t, want[i].Stage, got[i].Stage)
			require.Equal(t, want[i].Status, got[i].Status)
			require.True(t, want[i].At.Equal(got[i].At), "At %v, want %v", got[i].At, want[i].At)
			if len(want[i].Detail) == 0 {
				require.Empty(t, got[i].Detail)
			} else {
				require.JSONEq(t, string(want[i].Detail), string(got[i].Detail))
			}
		}
	}
	none, err := b.store.ListApplications(b.ctx, "plan-missing")
	require.NoError(t, err)
	require.Empty(t, none)
}

func testPlanApplicationUnknown(t *testing.T, b *bundle) {
	// Scenario: history cannot be recorded for a plan that was never saved
	// (ErrNotFound), nor with invalid JSON detail.
	_, err := b.store.RecordApplication(b.ctx, state.Application{PlanID: "plan-missing", Stage: "backfill", Status: "started", At: hour(1)})
	require.ErrorIs(t, err, state.ErrNotFound)
	require.NoError(t, b.store.SavePlan(b.ctx, state.Plan{ID: "plan-1", Environment: "prod", Payload: json.RawMessage(`{}`)}))
	_, err = b.store.RecordApplication(b.ctx, state.Application{PlanID: "plan-1", Stage: "backfill", Status: "started", Detail: json.RawMessage(`{`)})
	require.Error(t, err)
	got, err := b.store.ListApplications(b.ctx, "plan-1")
	require.NoError(t, err)
	require.Empty(t, got)
}

// planIDs returns the ids of plans, in order.
func planIDs(plans []state.Plan) []string {
	ids := make([]string, len(plans))
	for i, p := range plans {
		ids[i] = p.ID
	}
	return ids
}

func testPlanList(t *testing.T, b *bundle) {
	// Scenario: six plans of prod and dev, saved in no particular order,
	// two of them (p-b, p-a) created at the same instant, one (p-zero)
	// without a creation time. ListPlans returns them newest first, ties in
	// id order, each with its environment, creation time and payload. Every
	// filter narrows the list, alone and combined: Environment, CreatedAfter
	// (strictly after: a plan created at that instant is left out; a zero
	// CreatedAt is never after anything) and Limit (the newest ones). A plan
	// saved without ever being applied or promoted is listed.
	plans := []state.Plan{
		{ID: "p-c", Environment: "prod", CreatedAt: hour(1)},
		{ID: "p-b", Environment: "dev", CreatedAt: hour(3)},
		{ID: "p-zero", Environment: "prod"},
		{ID: "p-d", Environment: "prod", CreatedAt: hour(5)},
		{ID: "p-a", Environment: "prod", CreatedAt: hour(3)},
		{ID: "p-e", Environment: "dev", CreatedAt: hour(2)},
	}
	for _, p := range plans {
		p.Payload = json.RawMessage(fmt.Sprintf(`{"id": %q, "models": ["a"]}`, p.ID))
		require.NoError(t, b.store.SavePlan(b.ctx, p))
	}

	all, err := b.store.ListPlans(b.ctx, state.PlanFilter{})
	require.NoError(t, err)
	require.Equal(t, []string{"p-d", "p-a", "p-b", "p-e", "p-c", "p-zero"}, planIDs(all))
	byID := map[string]state.Plan{}
	for _, p := range plans {
		byID[p.ID] = p
	}
	for _, got := range all {
		want := byID[got.ID]
		require.Equal(t, want.Environment, got.Environment, got.ID)
		require.True(t, want.CreatedAt.Equal(got.CreatedAt), "%s: CreatedAt %v, want %v", got.ID, got.CreatedAt, want.CreatedAt)
		require.JSONEq(t, fmt.Sprintf(`{"id": %q, "models": ["a"]}`, got.ID), string(got.Payload))
	}

	for _, c := range []struct {
		name string
		f    state.PlanFilter
		want []string
	}{
		{"environment", state.PlanFilter{Environment: "prod"}, []string{"p-d", "p-a", "p-c", "p-zero"}},
		{"other environment", state.PlanFilter{Environment: "dev"}, []string{"p-b", "p-e"}},
		{"unknown environment", state.PlanFilter{Environment: "nowhere"}, nil},
		{"created after", state.PlanFilter{CreatedAfter: hour(2)}, []string{"p-d", "p-a", "p-b"}},
		{"created after, within the hour", state.PlanFilter{CreatedAfter: hour(2).Add(-time.Microsecond)}, []string{"p-d", "p-a", "p-b", "p-e"}},
		{"created after the newest", state.PlanFilter{CreatedAfter: hour(5)}, nil},
		{"limit", state.PlanFilter{Limit: 3}, []string{"p-d", "p-a", "p-b"}},
		{"limit beyond the count", state.PlanFilter{Limit: 100}, []string{"p-d", "p-a", "p-b", "p-e", "p-c", "p-zero"}},
		{"environment and created after", state.PlanFilter{Environment: "prod", CreatedAfter: hour(1)}, []string{"p-d", "p-a"}},
		{"all three", state.PlanFilter{Environment: "dev", CreatedAfter: hour(1), Limit: 1}, []string{"p-b"}},
	} {
		got, err := b.store.ListPlans(b.ctx, c.f)
		require.NoError(t, err, c.name)
		require.Equal(t, c.want, nilIfEmptyStrings(planIDs(got)), c.name)
	}
}

// nilIfEmptyStrings is ids, or nil when it is empty.
func nilIfEmptyStrings(ids []string) []string {
	if len(ids) == 0 {
		return nil
	}
	return ids
}

func testPlanListNegativeLimit(t *testing.T, b *bundle) {
	// Scenario: a negative limit is an error, not "no limit".
	require.NoError(t, b.store.SavePlan(b.ctx, state.Plan{ID: "plan-1", Environment: "prod", Payload: json.RawMessage(`{}`), CreatedAt: hour(1)}))
	_, err := b.store.ListPlans(b.ctx, state.PlanFilter{Limit: -1})
	require.Error(t, err)
	got, err := b.store.ListPlans(b.ctx, state.PlanFilter{})
	require.NoError(t, err)
	require.Equal(t, []string{"plan-1"}, planIDs(got))
}

func testPlanDelete(t *testing.T, b *bundle) {
	// Scenario: seven plans. prod serves p-cur, promoted after p-prev (its
	// previous plan); dev serves d-cur. p-old is older and finished; p-new
	// was created after the cutoff; p-busy is old but has an application
	// record after it; p-edge was created exactly at the cutoff. Asked to
	// delete all of them (and an unknown id) before the cutoff, DeletePlans
	// deletes p-old alone, with its application history, and says so: the
	// served, previous and recently active plans stay, whatever the caller
	// asked, readable with their histories.
	for _, p := range []state.Plan{
		{ID: "p-old", Environment: "prod", CreatedAt: hour(1)},
		{ID: "p-prev", Environment: "prod", CreatedAt: hour(1)},
		{ID: "p-cur", Environment: "prod", CreatedAt: hour(2)},
		{ID: "d-cur", Environment: "dev", CreatedAt: hour(1)},
		{ID: "p-busy", Environment: "prod", CreatedAt: hour(1)},
		{ID: "p-edge", Environment: "prod", CreatedAt: hour(5)},
		{ID: "p-new", Environment: "prod", CreatedAt: hour(7)},
	} {
		p.Payload = json.RawMessage(fmt.Sprintf(`{"id": %q}`, p.ID))
		require.NoError(t, b.store.SavePlan(b.ctx, p))
	}
	for _, a := range []state.Application{
		{PlanID: "p-old", Stage: "finalize", Status: "finished", At: hour(2)},
		{PlanID: "p-busy", Stage: "backfill", Status: "started", At: hour(6)},
		{PlanID: "p-cur", Stage: "finalize", Status: "finished", At: hour(2)},
	} {
		_, err := b.store.RecordApplication(b.ctx, a)
		require.NoError(t, err)
	}
	ref := state.SnapshotRef{Name: "a", Fingerprint: "f", Version: "v"}
	promote(t, b, "prod", "", "p-prev", hour(1), ref)
	promote(t, b, "prod", "p-prev", "p-cur", hour(2), ref)
	promote(t, b, "dev", "", "d-cur", hour(1), ref)

	deleted, err := b.store.DeletePlans(b.ctx, state.DeletePlansParams{
		IDs:    []string{"p-old", "p-prev", "p-cur", "d-cur", "p-busy", "p-edge", "p-new", "p-unknown"},
		Before: hour(5),
	})
	require.NoError(t, err)
	require.Equal(t, []string{"p-old"}, deleted)

	_, err = b.store.GetPlan(b.ctx, "p-old")
	require.ErrorIs(t, err, state.ErrNotFound)
	apps, err := b.store.ListApplications(b.ctx, "p-old")
	require.NoError(t, err)
	require.Empty(t, apps, "the deleted plan's history goes with it")
	left, err := b.store.ListPlans(b.ctx, state.PlanFilter{})
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"p-prev", "p-cur", "d-cur", "p-busy", "p-edge", "p-new"}, planIDs(left))
	apps, err = b.store.ListApplications(b.ctx, "p-busy")
	require.NoError(t, err)
	require.Len(t, apps, 1)

	// Once prod moves on twice, p-prev is neither served nor previous:
	// deleting it now deletes it. Deleting again deletes nothing.
	promote(t, b, "prod", "p-cur", "p-new", hour(8), ref)
	deleted, err = b.store.DeletePlans(b.ctx, state.DeletePlansParams{IDs: []string{"p-prev", "p-cur"}, Before: hour(5)})
	require.NoError(t, err)
	require.Equal(t, []string{"p-prev"}, deleted, "p-cur is prod's previous plan now")
	deleted, err = b.store.DeletePlans(b.ctx, state.DeletePlansParams{IDs: []string{"p-prev"}, Before: hour(5)})
	require.NoError(t, err)
	require.Empty(t, deleted)
	deleted, err = b.store.DeletePlans(b.ctx, state.DeletePlansParams{Before: hour(5)})
	require.NoError(t, err)
	require.Empty(t, deleted)
}

func testPlanDeleteAfterRemoval(t *testing.T, b *bundle) {
	// Scenario: dev serves d2 after d1 and is removed. Its plans are no
	// longer any environment's current or previous plan: both can be
	// deleted.
	for _, id := range []string{"d1", "d2"} {
		require.NoError(t, b.store.SavePlan(b.ctx, state.Plan{ID: id, Environment: "dev", Payload: json.RawMessage(`{}`), CreatedAt: hour(1)}))
	}
	ref := state.SnapshotRef{Name: "a", Fingerprint: "f", Version: "v"}
	promote(t, b, "dev", "", "d1", hour(1), ref)
	dev := promote(t, b, "dev", "d1", "d2", hour(2), ref)
	deleted, err := b.store.DeletePlans(b.ctx, state.DeletePlansParams{IDs: []string{"d1", "d2"}, Before: hour(5)})
	require.NoError(t, err)
	require.Empty(t, deleted, "dev serves d2, after d1")
	_, err = b.store.RemoveEnvironment(b.ctx, state.RemoveEnvironmentParams{Name: "dev", Generation: dev.Generation, Now: hour(3)})
	require.NoError(t, err)
	deleted, err = b.store.DeletePlans(b.ctx, state.DeletePlansParams{IDs: []string{"d1", "d2"}, Before: hour(5)})
	require.NoError(t, err)
	require.Equal(t, []string{"d1", "d2"}, deleted)
}

func testPlanDeleteRequiresBefore(t *testing.T, b *bundle) {
	// Scenario: a deletion without its cutoff is refused (time is
	// injected) and deletes nothing.
	require.NoError(t, b.store.SavePlan(b.ctx, state.Plan{ID: "p1", Environment: "prod", Payload: json.RawMessage(`{}`), CreatedAt: hour(1)}))
	_, err := b.store.DeletePlans(b.ctx, state.DeletePlansParams{IDs: []string{"p1"}})
	require.ErrorIs(t, err, state.ErrNoNow)
	_, err = b.store.GetPlan(b.ctx, "p1")
	require.NoError(t, err)
}
