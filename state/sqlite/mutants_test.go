package sqlite_test

import (
	"testing"

	"github.com/gapless-dev/gapless/state/statetest"
)

// Scenario: the conformance suite is the contract of the sources state
// machine, so it must fail stores that break it. Each mutant of the
// transitions the stores share (statetest.Mutants: a swap not pinned to
// its generation, a plan with a build in flight, a retire of whatever
// builds, an applied seq moving backward, a position staged twice) runs
// its scenarios of TestConformance on SQLite in a child process, which
// must fail on exactly that scenario.
func TestStoreSuiteCatchesMutants(t *testing.T) {
	t.Parallel()
	statetest.CatchesMutants(t, "TestConformance")
}
