package ingest_test

import (
	"testing"

	"github.com/gapless-dev/gapless/state/statetest"
)

// Scenario: the seed's bug 1 end to end. With the state store's RecordSwap
// promoting whatever builds instead of the generation named (mutant
// swap-without-generation-predicate, statetest.MutantEnv), pass A's late
// promotion of the retired generation 2, after 2's swap committed in the
// warehouse, would record 3 as serving while the warehouse serves 2:
// TestSeedResyncDuringSwapLosesNoRow, run in a child process against that
// mutant (SQLite state, DuckDB warehouse, the variant whose swap commits),
// must fail.
func TestSeedSuiteCatchesStoreMutants(t *testing.T) {
	t.Parallel()
	statetest.RequireChildFails(t, "swap-without-generation-predicate",
		"TestSeedResyncDuringSwapLosesNoRow/sqlite_state/duckdb_warehouse/swap_commits")
}
