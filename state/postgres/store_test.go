package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/snapshot"
	"github.com/gapless-dev/gapless/state"
)

func TestFailedCheckLeavesNoTrace(t *testing.T) {
	// Scenario: the first promotion of an environment fails its no-gap
	// check. Nothing is left behind: not the environment, not the
	// placeholder row the promotion locked, and a later promotion starts at
	// generation 1 expecting "".
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	gap := errors.New("gap in a.x")
	_, err := b.store.Promote(ctx, state.PromoteParams{
		Environment: "prod", PlanID: "p1", Snapshots: []state.SnapshotRef{ref("a.x", "v1")}, Now: t0,
		Check: func(context.Context, state.Reader) (state.CheckResult, error) { return state.CheckResult{}, gap },
	})
	require.ErrorIs(t, err, gap)
	_, err = b.store.GetEnvironment(ctx, "prod")
	require.ErrorIs(t, err, state.ErrNotFound)
	envs, err := b.store.ListEnvironments(ctx)
	require.NoError(t, err)
	require.Empty(t, envs)
	require.Zero(t, queryInt(t, b.url, `SELECT count(*) FROM environments`))

	e, err := b.store.Promote(ctx, state.PromoteParams{Environment: "prod", PlanID: "p1", Snapshots: []state.SnapshotRef{ref("a.x", "v1")}, Now: t0})
	require.NoError(t, err)
	require.Equal(t, int64(1), e.Generation)
}

func TestBadInputIsRefusedWithoutPanicking(t *testing.T) {
	// Scenario: callers pass nil, empty and malformed values. Each call
	// returns an error (or, where the interface says so, a no-op) and
	// nothing panics or is written.
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	s := b.store
	k := state.VersionKey{Name: "a.x", Version: "v1"}

	require.Error(t, s.PushSnapshots(ctx, []*snapshot.Snapshot{nil}))
	require.Error(t, s.PushSnapshots(ctx, []*snapshot.Snapshot{{}}))
	require.NoError(t, s.PushSnapshots(ctx, nil))
	got, err := s.GetSnapshots(ctx, nil)
	require.NoError(t, err)
	require.Empty(t, got)

	require.Error(t, s.AddIntervals(ctx, state.IntervalsParams{Ranges: hours(0, 1), Now: t0}))
	require.Error(t, s.AddIntervals(ctx, state.IntervalsParams{Key: k, Ranges: hours(0, 1), Fence: &state.Fence{}, Now: t0}))
	require.Error(t, s.AddIntervals(ctx, state.IntervalsParams{Key: k, Ranges: hours(0, 1), Fence: &state.Fence{LeaseKey: "l", LeaseToken: "t"}}))

	_, err = s.Promote(ctx, state.PromoteParams{Environment: "prod", PlanID: "p"})
	require.Error(t, err, "no Now")
	_, err = s.Promote(ctx, state.PromoteParams{PlanID: "p", Now: t0})
	require.Error(t, err, "no environment")
	_, err = s.Promote(ctx, state.PromoteParams{Environment: "prod", Now: t0})
	require.Error(t, err, "no plan")
	_, err = s.Promote(ctx, state.PromoteParams{Environment: "prod", PlanID: "p", Now: t0,
		Snapshots: []state.SnapshotRef{ref("a.x", "v1"), ref("a.x", "v2")}})
	require.Error(t, err, "a model twice")
	require.Error(t, s.Finalize(ctx, state.FinalizeParams{Environment: "prod", PlanID: "p"}))
	require.Error(t, s.Invalidate(ctx, state.InvalidateParams{Environment: "prod"}))

	require.Error(t, s.SavePlan(ctx, state.Plan{ID: "p"}), "empty payload")
	require.Error(t, s.SavePlan(ctx, state.Plan{ID: "p", Payload: json.RawMessage(`{"a":`)}))
	require.Error(t, s.SavePlan(ctx, state.Plan{Payload: json.RawMessage(`{}`)}))
	_, err = s.RecordApplication(ctx, state.Application{PlanID: "p", Stage: "s", Status: "ok", Detail: json.RawMessage(`nope`)})
	require.Error(t, err)

	_, err = s.AcquireLease(ctx, state.AcquireLeaseParams{Key: "l", TTL: time.Minute})
	require.Error(t, err, "no Now")
	_, err = s.AcquireLease(ctx, state.AcquireLeaseParams{Key: "l", Now: t0})
	require.Error(t, err, "no TTL")
	_, err = s.AcquireLease(ctx, state.AcquireLeaseParams{Key: "l", TTL: time.Duration(1<<63 - 1), Now: time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)})
	require.NoError(t, err, "a huge TTL still fits in int64 microseconds from year 9999")
	_, err = s.AcquireLease(ctx, state.AcquireLeaseParams{TTL: time.Minute, Now: t0})
	require.Error(t, err, "no key")

	_, err = s.AppendEvents(ctx, state.Event{})
	require.Error(t, err, "no kind")
	_, err = s.ListEvents(ctx, state.EventFilter{Limit: -1})
	require.Error(t, err)

	rows, err := s.CountIntervalRows(ctx)
	require.NoError(t, err)
	require.Zero(t, rows)
	envs, err := s.ListEnvironments(ctx)
	require.NoError(t, err)
	require.Empty(t, envs)
}

func TestEventIDsBecomeVisibleInOrder(t *testing.T) {
	// Scenario: a reader tails the history with AfterID while writers
	// append. Because ids are drawn under a lock held until commit, an
	// event with a lower id is never committed after one with a higher id:
	// a tail that has seen id n never later finds an id below n.
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	procs := stores(t, b, 4)
	var after int64
	seen := 0
	var writersDone atomic.Int64
	errs := race(9, func(i int) error {
		if i == 8 {
			// Tail until every event is seen, or until the writers are all
			// done (one may have failed) and a last pass found nothing new.
			for seen < 8*20 {
				finished := writersDone.Load() == 8
				evs, err := b.store.ListEvents(ctx, state.EventFilter{AfterID: after})
				if err != nil {
					return err
				}
				for _, e := range evs {
					if e.ID <= after {
						return errors.New("an id went backwards")
					}
					after = e.ID
					seen++
				}
				// A gap below the cursor must never be filled later.
				all, err := b.store.ListEvents(ctx, state.EventFilter{})
				if err != nil {
					return err
				}
				below := 0
				for _, e := range all {
					if e.ID <= after {
						below++
					}
				}
				if below != seen {
					return fmt.Errorf("%d events at or below the cursor %d, the tail saw %d", below, after, seen)
				}
				if finished && len(evs) == 0 {
					return fmt.Errorf("the writers are done and the tail saw %d events", seen)
				}
			}
			return nil
		}
		defer writersDone.Add(1)
		for range 20 {
			if _, err := procs[i%4].AppendEvents(ctx, state.Event{At: t0, Kind: state.EventGapAccepted}); err != nil {
				return err
			}
		}
		return nil
	})
	require.Empty(t, winnersNot(errs))
}
