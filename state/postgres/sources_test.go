package postgres_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/state/postgres"
)

func TestPlanGenerationHoldsTheSourceRowUntilItCommits(t *testing.T) {
	// Scenario: a planner has read raw.events with no build in flight and
	// has not written yet, when a second process plans a build of the same
	// source. The second must wait for the first (here, an impatient
	// process with lock_timeout=1ms gives up instead of waiting) rather
	// than read the same "no build in flight" and plan too; the first then
	// issues generation 1, and a plan after it is refused with
	// ErrBuildInFlight.
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	impatient := open(t, withParam(t, b.url, "lock_timeout", "1"))
	_, err := b.store.EnsureSources(ctx, state.EnsureSourcesParams{
		Sources: []state.SourceDefinition{{Name: "raw.events", Connector: "files", DefinitionHash: "h"}}, Now: t0,
	})
	require.NoError(t, err)
	pin := int64(7)
	plan := func(s *postgres.Store) (state.Generation, error) {
		return s.PlanGeneration(ctx, state.PlanGenerationParams{Source: "raw.events", Kind: state.GenerationBackfill, Pin: &pin, Now: t0})
	}

	var secondErr error
	ran := false
	postgres.SetAfterSourceReadHook(b.store, func() {
		if !ran {
			ran = true
			_, secondErr = plan(impatient)
		}
	})
	g, err := plan(b.store)
	postgres.SetAfterSourceReadHook(b.store, nil)
	require.NoError(t, err)
	require.Equal(t, int64(1), g.Generation)
	require.True(t, isLockTimeout(secondErr), "the second planner did not wait for the first: %v", secondErr)

	_, err = plan(impatient)
	require.ErrorIs(t, err, state.ErrBuildInFlight)
	s, err := b.store.GetSource(ctx, "raw.events")
	require.NoError(t, err)
	require.Len(t, s.Generations, 1)
	require.Equal(t, int64(1), s.Building)
}

func TestEnsureSourcesRegistersANewNameOnce(t *testing.T) {
	// Scenario: a registration has found no row for raw.events (there is
	// none to lock) and has not inserted it yet, when a second process
	// registers the same new name. The second must wait for the first
	// (the impatient process gives up instead) rather than also find none
	// and write a second fresh row over the first's; one source_registered
	// event is written, and registering again writes nothing.
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	impatient := open(t, withParam(t, b.url, "lock_timeout", "1"))
	ensure := func(s *postgres.Store) error {
		_, err := s.EnsureSources(ctx, state.EnsureSourcesParams{
			Sources: []state.SourceDefinition{{Name: "raw.events", Connector: "files", DefinitionHash: "h"}}, Now: t0,
		})
		return err
	}
	var secondErr error
	ran := false
	postgres.SetAfterSourceReadHook(b.store, func() {
		if !ran {
			ran = true
			secondErr = ensure(impatient)
		}
	})
	err := ensure(b.store)
	postgres.SetAfterSourceReadHook(b.store, nil)
	require.NoError(t, err)
	require.True(t, isLockTimeout(secondErr), "the second registration did not wait for the first: %v", secondErr)
	require.NoError(t, ensure(impatient))
	evs, err := b.store.ListEvents(ctx, state.EventFilter{Kinds: []string{state.EventSourceRegistered}})
	require.NoError(t, err)
	require.Len(t, evs, 1)
}
