package statetest

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/state"
)

func eventTests() []test {
	return []test{
		{"AppendAssignsIncreasingIDs", testEventsAppend},
		{"Filters", testEventsFilters},
		{"PagingWithAfterIDAndLimit", testEventsPaging},
		{"BadBatchAppendsNothing", testEventsBadBatch},
	}
}

func testEventsAppend(t *testing.T, b *bundle) {
	// Scenario: events appended in two calls get increasing ids, and come
	// back with every field intact; an empty append is a no-op.
	first, err := b.store.AppendEvents(b.ctx,
		state.Event{At: hour(1), Kind: state.EventPlanApplied, Environment: "prod", PlanID: "plan-1"},
		state.Event{At: hour(2), Kind: state.EventGapAccepted, Environment: "prod", Model: "m.a", PlanID: "plan-1",
			Reason: "trailing-gap(2)", Data: json.RawMessage(`{"bound": "2h", "gap": ["2024-01-01T00:00:00Z", "2024-01-01T02:00:00Z"]}`)},
	)
	require.NoError(t, err)
	require.Len(t, first, 2)
	require.Positive(t, first[0].ID)
	require.Greater(t, first[1].ID, first[0].ID)
	second, err := b.store.AppendEvents(b.ctx, state.Event{At: hour(3), Kind: state.EventGapRepaired, Model: "m.a"})
	require.NoError(t, err)
	require.Greater(t, second[0].ID, first[1].ID)

	none, err := b.store.AppendEvents(b.ctx)
	require.NoError(t, err)
	require.Empty(t, none)

	got, err := b.store.ListEvents(b.ctx, state.EventFilter{})
	require.NoError(t, err)
	want := append(first, second...)
	require.Len(t, got, len(want))
	for i := range want {
		requireEvent(t, want[i], got[i])
	}
}

// requireEvent asserts two events are equal, comparing Data as JSON.
func requireEvent(t *testing.T, want, got state.Event) {
	t.Helper()
	require.True(t, want.At.Equal(got.At), "At %v, want %v", got.At, want.At)
	if len(want.Data) == 0 {
		require.Empty(t, got.Data)
	} else {
		require.JSONEq(t, string(want.Data), string(got.Data))
	}
	want.At, want.Data, got.Data = got.At, nil, nil
	require.Equal(t, want, got)
}

// eventIDs returns the ids of events.
func eventIDs(events []state.Event) []int64 {
	ids := make([]int64, len(events))
	for i, e := range events {
		ids[i] = e.ID
	}
	return ids
}

func testEventsFilters(t *testing.T, b *bundle) {
	// Scenario: every filter field narrows the history, alone and combined,
	// and results are in id order.
	ev, err := b.store.AppendEvents(b.ctx,
		state.Event{At: hour(0), Kind: state.EventPromotionAccepted, Environment: "prod", PlanID: "p1"},
		state.Event{At: hour(0), Kind: state.EventPromotionRejected, Environment: "dev", PlanID: "p2", Reason: "incumbent moved"},
		state.Event{At: hour(1), Kind: state.EventGapAccepted, Environment: "prod", Model: "m.a", PlanID: "p1"},
		state.Event{At: hour(2), Kind: state.EventGapRepaired, Environment: "prod", Model: "m.a"},
		state.Event{At: hour(2), Kind: state.EventGapAccepted, Environment: "dev", Model: "m.b", PlanID: "p2"},
	)
	require.NoError(t, err)
	id := eventIDs(ev)
	for _, c := range []struct {
		name string
		f    state.EventFilter
		want []int64
	}{
		{"none", state.EventFilter{}, id},
		{"one kind", state.EventFilter{Kinds: []string{state.EventGapAccepted}}, []int64{id[2], id[4]}},
		{"two kinds", state.EventFilter{Kinds: []string{state.EventGapRepaired, state.EventPromotionAccepted}}, []int64{id[0], id[3]}},
		{"unknown kind", state.EventFilter{Kinds: []string{"nope"}}, nil},
		{"environment", state.EventFilter{Environment: "dev"}, []int64{id[1], id[4]}},
		{"model", state.EventFilter{Model: "m.a"}, []int64{id[2], id[3]}},
		{"plan", state.EventFilter{PlanID: "p1"}, []int64{id[0], id[2]}},
		{"after", state.EventFilter{AfterID: id[2]}, []int64{id[3], id[4]}},
		{"limit", state.EventFilter{Limit: 2}, []int64{id[0], id[1]}},
		{"combined", state.EventFilter{Kinds: []string{state.EventGapAccepted, state.EventGapRepaired}, Environment: "prod", Model: "m.a", AfterID: id[2]}, []int64{id[3]}},
	} {
		got, err := b.store.ListEvents(b.ctx, c.f)
		require.NoError(t, err, c.name)
		require.Equal(t, c.want, nilIfEmpty(eventIDs(got)), c.name)
	}
}

func nilIfEmpty(ids []int64) []int64 {
	if len(ids) == 0 {
		return nil
	}
	return ids
}

func testEventsPaging(t *testing.T, b *bundle) {
	// Scenario: a reader pages through 25 events seven at a time, resuming
	// after the last id it saw, and sees each event exactly once, in order.
	var all []state.Event
	for i := range 25 {
		ev, err := b.store.AppendEvents(b.ctx, state.Event{At: hour(i), Kind: state.EventPlanApplied})
		require.NoError(t, err)
		all = append(all, ev...)
	}
	var seen []int64
	var after int64
	for {
		page, err := b.store.ListEvents(b.ctx, state.EventFilter{AfterID: after, Limit: 7})
		require.NoError(t, err)
		require.LessOrEqual(t, len(page), 7)
		if len(page) == 0 {
			break
		}
		seen = append(seen, eventIDs(page)...)
		after = page[len(page)-1].ID
	}
	require.Equal(t, eventIDs(all), seen)
}

func testEventsBadBatch(t *testing.T, b *bundle) {
	// Scenario: a batch with an event without a kind, or with data that is
	// not JSON, is refused whole: not even its valid events are recorded.
	// A negative limit is refused.
	for _, bad := range []state.Event{
		{At: hour(0)},
		{At: hour(0), Kind: state.EventPlanApplied, Data: json.RawMessage(`{"x"`)},
	} {
		_, err := b.store.AppendEvents(b.ctx, state.Event{At: hour(0), Kind: state.EventPlanApplied}, bad)
		require.Errorf(t, err, "%+v", bad)
	}
	got, err := b.store.ListEvents(b.ctx, state.EventFilter{})
	require.NoError(t, err)
	require.Empty(t, got)
	_, err = b.store.ListEvents(b.ctx, state.EventFilter{Limit: -1})
	require.Error(t, err)
}
