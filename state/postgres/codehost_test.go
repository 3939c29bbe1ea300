package postgres_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/internal/pgtest"
	"github.com/gapless-dev/gapless/state/internal/storekit"
	"github.com/gapless-dev/gapless/state/statetest"
)

// Scenario: two deploy attempts on prod are written running behind the
// store's back (an operator's SQL, or a StartDeploy whose check was
// wrong): the schema refuses the second with a unique violation of
// deploy_attempts_one_active, and a running attempt on another environment
// is accepted. held and rendered, the merge gate's states, count as active
// already.
func TestSchemaAdmitsOneActiveDeployPerEnvironment(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, b.url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	insert := `INSERT INTO deploy_attempts (id, env, trigger_kind, state, created_at_us, updated_at_us)
		VALUES ($1, $2, 'cli', $3, 1, 1)`
	_, err = conn.Exec(ctx, insert, "a", "prod", "running")
	require.NoError(t, err)
	for _, st := range []string{"running", "held", "rendered"} {
		_, err = conn.Exec(ctx, insert, "b-"+st, "prod", st)
		var pgErr *pgconn.PgError
		require.ErrorAs(t, err, &pgErr, st)
		require.Equal(t, "23505", pgErr.Code, st)
		require.Equal(t, "deploy_attempts_one_active", pgErr.ConstraintName, st)
	}
	_, err = conn.Exec(ctx, insert, "c", "staging", "running")
	require.NoError(t, err)
	_, err = conn.Exec(ctx, insert, "d", "prod", "pending")
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `UPDATE deploy_attempts SET state = 'running' WHERE id = 'd'`)
	require.ErrorContains(t, err, "deploy_attempts_one_active")
}

// Scenario: with StartDeploy's check of the environment's active attempts
// removed (the deploy-start-ignores-active mutant), racing starts on one
// environment still give exactly one running attempt, and the losers still
// get ErrDeployActive: on PostgreSQL their updates wait on the winner's
// uncommitted index entry and then fail the partial unique index, which
// the store reports as ErrDeployActive.
func TestRacingStartsAreExclusiveOnTheSchemaAlone(t *testing.T) {
	t.Parallel()
	pgtest.Require(t) // a child skipping the scenario would pass
	statetest.RequireChildPasses(t, storekit.MutantDeployStartIgnoresActive,
		"TestConformance/CodeHost/RacingStartsOnOneEnvironmentOneWins")
}
