package postgres_test

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/gapless-dev/gapless/internal/pgtest"
	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/state/postgres"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// t0 is the injected "now" the tests start from; nothing reads a clock.
var t0 = time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC)

// bundle is what most tests need: a store on a fresh database of its own,
// and that database's URL (to open a second store, i.e. a second process).
type bundle struct {
	store *postgres.Store
	url   string
}

// setup opens a store on a fresh database; both are closed (and the
// database dropped) when t ends.
func setup(t testing.TB) bundle {
	t.Helper()
	u := migratedDatabase(t)
	return bundle{store: open(t, u), url: u}
}

// migratedDatabase is a fresh database already at the newest schema
// version: a copy of a template that Open migrated once (pgtest names it
// after the embedded migrations' hash), which is several times faster than
// migrating each test's database. Tests of migrating itself use
// pgtest.NewDatabase.
func migratedDatabase(t testing.TB) string {
	t.Helper()
	return pgtest.NewDatabaseFrom(t, "state_"+postgres.MigrationsDigest(), func(ctx context.Context, u string) error {
		s, err := postgres.Open(ctx, u)
		if err != nil {
			return err
		}
		return s.Close()
	})
}

// open opens another store on url, closed when t ends.
func open(t testing.TB, u string) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(context.Background(), u)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}

// withParam returns u with one more query parameter (a run-time setting such
// as search_path or lock_timeout, which pgx sends at connection start).
func withParam(t testing.TB, u, key, value string) string {
	t.Helper()
	parsed, err := url.Parse(u)
	require.NoError(t, err)
	q := parsed.Query()
	q.Set(key, value)
	// pgx decodes %XX escapes but not '+' as a space.
	parsed.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20")
	return parsed.String()
}

// exec runs one statement on url outside any store, as an operator would.
func exec(t testing.TB, u, sql string, args ...any) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, u)
	require.NoError(t, err)
	defer func() { require.NoError(t, conn.Close(ctx)) }()
	_, err = conn.Exec(ctx, sql, args...)
	require.NoError(t, err)
}

// queryInt runs a query returning one integer on url.
func queryInt(t testing.TB, u, sql string, args ...any) int64 {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, u)
	require.NoError(t, err)
	defer func() { require.NoError(t, conn.Close(ctx)) }()
	var n int64
	require.NoError(t, conn.QueryRow(ctx, sql, args...).Scan(&n))
	return n
}

// hours is the set [t0+from h, t0+to h).
func hours(from, to int) interval.Set {
	return interval.NewSet(interval.Range{
		Start: t0.Add(time.Duration(from) * time.Hour),
		End:   t0.Add(time.Duration(to) * time.Hour),
	})
}

func ref(name, version string) state.SnapshotRef {
	return state.SnapshotRef{Name: name, Fingerprint: "fp-" + name + "-" + version, Version: version}
}

func intervalsOf(t testing.TB, s state.Reader, k state.VersionKey) interval.Set {
	t.Helper()
	got, err := s.GetIntervals(context.Background(), []state.VersionKey{k})
	require.NoError(t, err)
	return got[k]
}
