package invariants_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/internal/invariants"
)

func TestViolatedPanicsNamingTheInvariant(t *testing.T) {
	require.PanicsWithValue(t, "invariant violated: sets are sorted: range 1 before range 0",
		func() { invariants.Violated("sets are sorted", errors.New("range 1 before range 0")) })
}

// The suite runs with -race, so every test there runs with the checks on.
func TestEnabledUnderRace(t *testing.T) {
	if !raceBuild {
		t.Skip("not a race build")
	}
	require.True(t, invariants.Enabled)
}
