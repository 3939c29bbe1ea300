package sqlite_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/state/internal/storekit"
	"github.com/gapless-dev/gapless/state/sqlite"
	"github.com/gapless-dev/gapless/state/statetest"
)

// Scenario: two deploy attempts on prod are written running behind the
// store's back (an operator's SQL, or a StartDeploy whose check was
// wrong): the schema refuses the second, naming its index, and a second
// running attempt on another environment is accepted. held and rendered,
// the merge gate's states, count as active already.
func TestSchemaAdmitsOneActiveDeployPerEnvironment(t *testing.T) {
	t.Parallel()
	path := sqlite.DefaultPath(t.TempDir())
	st, err := sqlite.Open(t.Context(), path)
	require.NoError(t, err)
	require.NoError(t, st.Close())
	db := rawDB(t, path)
	defer db.Close()
	insert := `INSERT INTO deploy_attempts (id, env, trigger_kind, state, created_at_us, updated_at_us)
		VALUES (?, ?, 'cli', ?, 1, 1)`
	_, err = db.ExecContext(t.Context(), insert, "a", "prod", "running")
	require.NoError(t, err)
	for _, st := range []string{"running", "held", "rendered"} {
		_, err = db.ExecContext(t.Context(), insert, "b-"+st, "prod", st)
		require.ErrorContains(t, err, "UNIQUE constraint failed", st)
	}
	_, err = db.ExecContext(t.Context(), insert, "c", "staging", "running")
	require.NoError(t, err)
	_, err = db.ExecContext(t.Context(), insert, "d", "prod", "pending")
	require.NoError(t, err)
	_, err = db.ExecContext(t.Context(), `UPDATE deploy_attempts SET state = 'running' WHERE id = 'd'`)
	require.ErrorContains(t, err, "UNIQUE constraint failed")
}

// Scenario: with StartDeploy's check of the environment's active attempts
// removed (the deploy-start-ignores-active mutant), racing starts on one
// environment still give exactly one running attempt, and the losers still
// get ErrDeployActive: the schema's index refuses their write, and the
// store reports it as such.
func TestRacingStartsAreExclusiveOnTheSchemaAlone(t *testing.T) {
	t.Parallel()
	statetest.RequireChildPasses(t, storekit.MutantDeployStartIgnoresActive,
		"TestConformance/CodeHost/RacingStartsOnOneEnvironmentOneWins")
}
