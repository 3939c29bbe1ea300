package state_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/state"
)

func TestDeriveSourceState(t *testing.T) {
	// Scenario: every combination the store can hold maps to the state the
	// rules of DeriveSourceState give, the first that holds winning: a park
	// over everything, then a build in flight, then a build owed (nothing
	// served, or requested), else PRIMED.
	for _, tc := range []struct {
		name              string
		building, serving int64
		requested         bool
		parked            string
		want              state.SourceState
	}{
		{"new source", 0, 0, true, "", state.SourcePendingBackfill},
		{"nothing served, nothing requested", 0, 0, false, "", state.SourcePendingBackfill},
		{"first build", 1, 0, false, "", state.SourceBackfilling},
		{"primed", 0, 1, false, "", state.SourcePrimed},
		{"resync requested while serving", 0, 1, true, "", state.SourcePendingBackfill},
		{"rebuilding while serving", 2, 1, false, "", state.SourceBackfilling},
		{"rebuilding with a request pending", 2, 1, true, "", state.SourceBackfilling},
		{"parked while serving", 0, 1, false, "file removed", state.SourceNeedsResync},
		{"parked with a build in flight", 2, 1, false, "file removed", state.SourceNeedsResync},
		{"parked before serving", 0, 0, true, "unsupported", state.SourceNeedsResync},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, state.DeriveSourceState(tc.building, tc.serving, tc.requested, tc.parked))
			s := state.Source{Building: tc.building, Serving: tc.serving, BuildRequested: tc.requested, ParkedReason: tc.parked}
			require.Equal(t, tc.want, s.State())
		})
	}
}
