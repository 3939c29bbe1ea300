package postgres_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/internal/pgtest"
	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/state/postgres"
)

func TestOpenMigratesToTheNewestEmbeddedVersion(t *testing.T) {
	t.Parallel()
	b := setup(t)
	v, err := b.store.SchemaVersion(context.Background())
	require.NoError(t, err)
	require.Positive(t, postgres.NewestSchemaVersion())
	require.Equal(t, postgres.NewestSchemaVersion(), v)

	// Opening again is a no-op.
	again := open(t, b.url)
	v, err = again.SchemaVersion(context.Background())
	require.NoError(t, err)
	require.Equal(t, postgres.NewestSchemaVersion(), v)
}

func TestOpenRacingProcessesMigrateOnce(t *testing.T) {
	// Scenario: four processes start at once against an empty database.
	// Exactly one applies each migration; the others wait for it and then
	// find nothing to do. Had two migrated, one would have failed on
	// CREATE TABLE, or goose would have recorded a version twice.
	t.Parallel()
	u := pgtest.NewDatabase(t)
	const processes = 4
	start := make(chan struct{})
	stores := make([]*postgres.Store, processes)
	errs := make([]error, processes)
	var wg sync.WaitGroup
	for i := range processes {
		wg.Go(func() {
			<-start
			stores[i], errs[i] = postgres.Open(context.Background(), u)
		})
	}
	close(start)
	wg.Wait()
	for i := range processes {
		require.NoError(t, errs[i], "process %d", i)
		t.Cleanup(func() { require.NoError(t, stores[i].Close()) })
	}
	require.Zero(t, queryInt(t, u, `
		SELECT count(*) FROM (
			SELECT version_id FROM gapless_schema_version GROUP BY version_id HAVING count(*) > 1
		) twice`))
	require.Equal(t, postgres.NewestSchemaVersion(),
		queryInt(t, u, `SELECT max(version_id) FROM gapless_schema_version`))
}

func TestOpenRefusesASchemaNewerThanItKnows(t *testing.T) {
	// Scenario: a newer gapless migrated the state database; this older
	// binary must refuse to run against it rather than misread it, and must
	// not touch it.
	t.Parallel()
	b := setup(t)
	newer := postgres.NewestSchemaVersion() + 7
	exec(t, b.url, `INSERT INTO gapless_schema_version (version_id, is_applied) VALUES ($1, true)`, newer)

	s, err := postgres.Open(context.Background(), b.url)
	require.ErrorIs(t, err, state.ErrSchemaTooNew)
	require.Nil(t, s)
	require.ErrorContains(t, err, fmt.Sprintf("version %d", newer))
	require.ErrorContains(t, err, fmt.Sprintf("knows is %d", postgres.NewestSchemaVersion()))
	require.Equal(t, newer, queryInt(t, b.url, `SELECT max(version_id) FROM gapless_schema_version`))
}

func TestOpenHonoursSearchPath(t *testing.T) {
	// Scenario: two gapless deployments share one database, each in its own
	// schema named by search_path in its URL. The schemas are created on
	// first use and the deployments never see each other's state.
	t.Parallel()
	u := pgtest.NewDatabase(t)
	ctx := context.Background()
	blue := open(t, withParam(t, u, "search_path", `"Blue Team", public`))
	green := open(t, withParam(t, u, "search_path", "green"))

	_, err := blue.Promote(ctx, state.PromoteParams{
		Environment: "prod", PlanID: "p1", Snapshots: []state.SnapshotRef{ref("a.b", "v1")}, Now: t0,
	})
	require.NoError(t, err)
	_, err = green.GetEnvironment(ctx, "prod")
	require.ErrorIs(t, err, state.ErrNotFound)

	require.Equal(t, int64(1), queryInt(t, u, `SELECT count(*) FROM "Blue Team".environments`))
	require.Equal(t, int64(0), queryInt(t, u, `SELECT count(*) FROM green.environments`))
	require.Equal(t, int64(0), queryInt(t, u,
		`SELECT count(*) FROM pg_tables WHERE schemaname = 'public' AND tablename = 'environments'`))
}

func TestOpenRejectsABadURL(t *testing.T) {
	t.Parallel()
	_, err := postgres.Open(context.Background(), "postgres://%zz")
	require.Error(t, err)
}
