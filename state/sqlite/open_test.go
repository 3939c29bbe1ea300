package sqlite_test

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/state/sqlite"
)

// day is the range the tests record: 2024-01-01, UTC.
var day = interval.NewRange(
	time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2024, 1, 2, 0, 0, 0, 0, time.UTC))

func TestOpenCreatesTheStateFolder(t *testing.T) {
	t.Parallel()
	// Scenario: a project without .gapless/ gets the folder and the file at
	// the first Open; the file is migrated to a positive version.
	project := t.TempDir()
	st, err := sqlite.Open(t.Context(), sqlite.DefaultPath(project))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, st.Close()) })
	require.FileExists(t, filepath.Join(project, ".gapless", "state.db"))
	require.Equal(t, filepath.Join(project, ".gapless", "state.db"), st.Path())
	v, err := st.SchemaVersion(t.Context())
	require.NoError(t, err)
	require.Positive(t, v)
}

func TestOpenRejectsBadPaths(t *testing.T) {
	t.Parallel()
	// Scenario: an empty path, a path with '?' (which the driver would read
	// as parameters) and a path under a regular file fail with an error.
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(file, []byte("x"), 0o600))
	for _, p := range []string{"", filepath.Join(dir, "a?b.db"), filepath.Join(file, "state.db")} {
		st, err := sqlite.Open(t.Context(), p)
		require.Errorf(t, err, "path %q", p)
		require.Nil(t, st)
	}
}

func TestReopenKeepsStateAndSchema(t *testing.T) {
	t.Parallel()
	// Scenario: a store is closed and reopened twice; its intervals are
	// still there, and reopening migrates nothing again.
	path := filepath.Join(t.TempDir(), "state.db")
	key := state.VersionKey{Name: "m.a", Version: "v1"}
	st, err := sqlite.Open(t.Context(), path)
	require.NoError(t, err)
	require.NoError(t, st.AddIntervals(t.Context(), state.IntervalsParams{Key: key, Ranges: interval.NewSet(day), Now: day.Start}))
	v1, err := st.SchemaVersion(t.Context())
	require.NoError(t, err)
	require.NoError(t, st.Close())
	rows1 := migrationRows(t, path)

	for range 2 {
		st, err = sqlite.Open(t.Context(), path)
		require.NoError(t, err)
		got, err := st.GetIntervals(t.Context(), []state.VersionKey{key})
		require.NoError(t, err)
		require.True(t, interval.NewSet(day).Equal(got[key]))
		v2, err := st.SchemaVersion(t.Context())
		require.NoError(t, err)
		require.Equal(t, v1, v2)
		require.NoError(t, st.Close())
	}
	require.Equal(t, rows1, migrationRows(t, path))
}

// rawDB opens path without the store, for tests that tamper with it.
func rawDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	return db
}

// migrationRows counts goose's bookkeeping rows.
func migrationRows(t *testing.T, path string) int {
	t.Helper()
	db := rawDB(t, path)
	defer db.Close()
	var n int
	require.NoError(t, db.QueryRowContext(t.Context(), `SELECT COUNT(*) FROM gapless_schema_migrations`).Scan(&n))
	return n
}

func fileHash(t *testing.T, path string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return sha256.Sum256(b)
}

func TestRefusesSchemaFromTheFuture(t *testing.T) {
	t.Parallel()
	// Scenario: a newer gapless migrated the file to a version this one
	// does not know. Open fails with ErrSchemaTooNew, naming both versions,
	// and the file is byte for byte unchanged, its data intact.
	path := filepath.Join(t.TempDir(), "state.db")
	key := state.VersionKey{Name: "m.a", Version: "v1"}
	st, err := sqlite.Open(t.Context(), path)
	require.NoError(t, err)
	require.NoError(t, st.AddIntervals(t.Context(), state.IntervalsParams{Key: key, Ranges: interval.NewSet(day), Now: day.Start}))
	newest, err := st.SchemaVersion(t.Context())
	require.NoError(t, err)
	require.NoError(t, st.Close())

	future := newest + 1000
	db := rawDB(t, path)
	_, err = db.ExecContext(t.Context(), `INSERT INTO gapless_schema_migrations (version_id, is_applied) VALUES (?, 1)`, future)
	require.NoError(t, err)
	require.NoError(t, db.Close())
	before := fileHash(t, path)

	st, err = sqlite.Open(t.Context(), path)
	require.ErrorIs(t, err, state.ErrSchemaTooNew)
	require.Nil(t, st)
	require.Contains(t, err.Error(), strconv.FormatInt(future, 10))
	require.Contains(t, err.Error(), strconv.FormatInt(newest, 10))
	require.Equal(t, before, fileHash(t, path), "a refused open must not modify the file")

	db = rawDB(t, path)
	defer db.Close()
	var n int
	require.NoError(t, db.QueryRowContext(t.Context(), `SELECT COUNT(*) FROM intervals`).Scan(&n))
	require.Equal(t, 1, n)
}

func TestConcurrentOpensOfAFreshFile(t *testing.T) {
	t.Parallel()
	// Scenario: 8 processes' worth of stores open one new file at the same
	// moment, so all of them race to migrate it. Every Open succeeds, every
	// store reports the newest version, and each migration ran once.
	path := filepath.Join(t.TempDir(), "state.db")
	const n = 8
	stores := make([]*sqlite.Store, n)
	errs := make([]error, n)
	gun := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-gun
			stores[i], errs[i] = sqlite.Open(t.Context(), path)
		})
	}
	close(gun)
	wg.Wait()
	var versions []int64
	for i := range n {
		require.NoError(t, errs[i])
		v, err := stores[i].SchemaVersion(t.Context())
		require.NoError(t, err)
		versions = append(versions, v)
		require.NoError(t, stores[i].Close())
	}
	for _, v := range versions {
		require.Equal(t, versions[0], v)
	}
	db := rawDB(t, path)
	defer db.Close()
	var dup int
	require.NoError(t, db.QueryRowContext(t.Context(), `
		SELECT COUNT(*) FROM (SELECT version_id FROM gapless_schema_migrations GROUP BY version_id HAVING COUNT(*) > 1)`).Scan(&dup))
	require.Zero(t, dup, "a migration was recorded twice")
}

func TestClosedStoreFails(t *testing.T) {
	t.Parallel()
	// Scenario: calls on a closed store return errors; none panics.
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "state.db"))
	require.NoError(t, err)
	require.NoError(t, st.Close())
	key := state.VersionKey{Name: "m.a", Version: "v1"}
	require.Error(t, st.AddIntervals(t.Context(), state.IntervalsParams{Key: key, Ranges: interval.NewSet(day), Now: day.Start}))
	_, err = st.GetIntervals(t.Context(), []state.VersionKey{key})
	require.Error(t, err)
	_, err = st.ListEnvironments(t.Context())
	require.Error(t, err)
}

func TestQueuedWriterGivesUpWithItsContext(t *testing.T) {
	t.Parallel()
	// Scenario: a promotion's Check is in progress, so the promotion holds
	// the write lock. A writer whose context ends while it waits behind it
	// returns the context's error instead of waiting on; the promotion then
	// commits, and the abandoned write left nothing.
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "state.db"))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, st.Close()) })

	checking, release := make(chan struct{}), make(chan struct{})
	promoted := make(chan error, 1)
	go func() {
		_, err := st.Promote(t.Context(), state.PromoteParams{
			Environment: "prod", PlanID: "plan-1", Now: day.Start,
			Check: func(context.Context, state.Reader) (state.CheckResult, error) {
				close(checking)
				<-release
				return state.CheckResult{}, nil
			},
		})
		promoted <- err
	}()
	<-checking

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	key := state.VersionKey{Name: "m.a", Version: "v1"}
	err = st.AddIntervals(ctx, state.IntervalsParams{Key: key, Ranges: interval.NewSet(day), Now: day.Start})
	require.ErrorIs(t, err, context.Canceled)

	close(release)
	require.NoError(t, <-promoted)
	got, err := st.GetIntervals(t.Context(), []state.VersionKey{key})
	require.NoError(t, err)
	require.True(t, got[key].IsEmpty())
}
