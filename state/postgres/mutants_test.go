package postgres_test

import (
	"testing"

	"github.com/gapless-dev/gapless/internal/pgtest"
	"github.com/gapless-dev/gapless/state/statetest"
)

// Scenario: as on SQLite (state/sqlite TestStoreSuiteCatchesMutants), each
// mutant of the sources state machine (statetest.Mutants) runs its
// scenarios of TestConformance on PostgreSQL in a child process, which
// must fail on exactly that scenario: the transitions are shared, the
// row locks and the SQL under them are not.
func TestStoreSuiteCatchesMutants(t *testing.T) {
	t.Parallel()
	pgtest.Require(t) // a child skipping every scenario would pass
	statetest.CatchesMutants(t, "TestConformance")
}
