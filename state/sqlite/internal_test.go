package sqlite

import (
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/state"
)

func TestGetIntervalsProbesTheIndexPerKey(t *testing.T) {
	t.Parallel()
	// Scenario: the one query that reads many keys' intervals walks the key
	// list and searches the intervals' primary key for each, rather than
	// scanning the table; and every connection runs with WAL, foreign keys
	// and the busy timeout.
	st, err := Open(t.Context(), filepath.Join(t.TempDir(), "state.db"))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, st.Close()) })

	joined := queryPlan(t, st, getIntervalsQuery, `[["a","b"]]`)
	require.Contains(t, joined, "SEARCH i USING INDEX", "plan: %s", joined)
	require.NotContains(t, joined, "SCAN i", "plan: %s", joined)
	for _, add := range []bool{true, false} {
		joined := queryPlan(t, st, windowQuery(add), "m", "v", 0, 1)
		require.NotContains(t, joined, "SCAN", "plan: %s", joined)
	}

	var mode string
	var fk, busy int
	require.NoError(t, st.db.QueryRowContext(t.Context(), `PRAGMA journal_mode`).Scan(&mode))
	require.NoError(t, st.db.QueryRowContext(t.Context(), `PRAGMA foreign_keys`).Scan(&fk))
	require.NoError(t, st.db.QueryRowContext(t.Context(), `PRAGMA busy_timeout`).Scan(&busy))
	require.Equal(t, "wal", mode)
	require.Equal(t, 1, fk)
	require.Equal(t, int(DefaultBusyTimeout.Milliseconds()), busy)
}

// queryPlan returns the EXPLAIN QUERY PLAN details of query, joined.
func queryPlan(t *testing.T, st *Store, query string, args ...any) string {
	t.Helper()
	rows, err := st.db.QueryContext(t.Context(), `EXPLAIN QUERY PLAN `+query, args...)
	require.NoError(t, err)
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, notUsed int
		var detail string
		require.NoError(t, rows.Scan(&id, &parent, &notUsed, &detail))
		plan = append(plan, detail)
	}
	require.NoError(t, rows.Err())
	return strings.Join(plan, "; ")
}

func TestBusyTimeoutOption(t *testing.T) {
	t.Parallel()
	// Scenario: WithBusyTimeout sets every connection's busy timeout.
	st, err := Open(t.Context(), filepath.Join(t.TempDir(), "state.db"), WithBusyTimeout(250*time.Millisecond), nil)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, st.Close()) })
	var busy int
	require.NoError(t, st.db.QueryRowContext(t.Context(), `PRAGMA busy_timeout`).Scan(&busy))
	require.Equal(t, 250, busy)
}

func TestListPlansWalksAnIndexInOrder(t *testing.T) {
	t.Parallel()
	// Scenario: both shapes of ListPlans' query, with an environment and
	// without, read a range of one index of migration 00003 in the query's
	// order: no scan of the table, no sort.
	st, err := Open(t.Context(), filepath.Join(t.TempDir(), "state.db"))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, st.Close()) })

	for _, c := range []struct {
		where []string
		args  []any
		index string
	}{
		{[]string{"environment = ?", "created_at_us > ?"}, []any{"prod", 1}, "plans_by_environment_creation"},
		{[]string{"environment = ?"}, []any{"prod"}, "plans_by_environment_creation"},
		{[]string{"created_at_us > ?"}, []any{1}, "plans_by_creation"},
	} {
		joined := queryPlan(t, st, listPlansQuery(c.where), c.args...)
		require.Contains(t, joined, c.index, "plan: %s", joined)
		require.NotContains(t, joined, "TEMP B-TREE", "plan: %s", joined)
	}
}

func TestRecordsAndLeasesCommitUnsyncedEverythingElseSynced(t *testing.T) {
	t.Parallel()
	// Scenario: on a store opened with the default sync, interval records,
	// a source generation's applied record and every lease write commit on
	// the pool whose connections run
	// synchronous=NORMAL, while a promotion, a removal of intervals and an
	// event commit on the synchronous=FULL one; opened WithSync(SyncFull),
	// every write commits synchronous=FULL.
	for _, sync := range []Sync{SyncNormal, SyncFull} {
		t.Run(sync.String(), func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			st, err := Open(ctx, filepath.Join(t.TempDir(), "state.db"), WithSync(sync))
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, st.Close()) })
			level := func(pool *sql.DB) int {
				var n int
				require.NoError(t, pool.QueryRowContext(ctx, `PRAGMA synchronous`).Scan(&n))
				return n
			}
			const normal, full = 1, 2
			var got []int
			st.committed = func(pool *sql.DB) { got = append(got, level(pool)) }
			wrote := func(name string, want int, write func() error) {
				t.Helper()
				got = nil
				require.NoError(t, write(), name)
				require.Equal(t, []int{want}, got, "%s: the synchronous level of its commit", name)
			}
			rec := normal
			if sync == SyncFull {
				rec = full
			}
			now := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
			key := state.VersionKey{Name: "m.a", Version: "v1"}
			hour := interval.NewSet(interval.NewRange(now, now.Add(time.Hour)))
			var l state.Lease
			wrote("AcquireLease", rec, func() (err error) {
				l, err = st.AcquireLease(ctx, state.AcquireLeaseParams{Key: "k", Owner: "o", TTL: time.Minute, Now: now})
				return err
			})
			wrote("RenewLease", rec, func() (err error) {
				l, err = st.RenewLease(ctx, state.RenewLeaseParams{Key: "k", Token: l.Token, TTL: time.Minute, Now: now})
				return err
			})
			wrote("TakeOverLease", rec, func() (err error) {
				l, err = st.TakeOverLease(ctx, state.TakeOverLeaseParams{Key: "k", Token: l.Token, ExpiresAt: l.ExpiresAt, Owner: "p", TTL: time.Minute, Now: now})
				return err
			})
			wrote("AddIntervals", rec, func() error {
				return st.AddIntervals(ctx, state.IntervalsParams{Key: key, Ranges: hour,
					Fence: &state.Fence{LeaseKey: "k", LeaseToken: l.Token}, Now: now})
			})
			wrote("EnsureSources", full, func() error {
				_, err := st.EnsureSources(ctx, state.EnsureSourcesParams{Now: now,
					Sources: []state.SourceDefinition{{Name: "raw.events", Connector: "files", DefinitionHash: "h"}}})
				return err
			})
			wrote("PlanGeneration", full, func() error {
				_, err := st.PlanGeneration(ctx, state.PlanGenerationParams{Source: "raw.events", Kind: state.GenerationBackfill, Chunks: 2, Now: now})
				return err
			})
			wrote("RecordApplied", rec, func() error {
				_, err := st.RecordApplied(ctx, state.RecordAppliedParams{Source: "raw.events", Generation: 1, Chunks: 1})
				return err
			})
			wrote("ReleaseLease", rec, func() error {
				return st.ReleaseLease(ctx, state.ReleaseLeaseParams{Key: "k", Token: l.Token})
			})
			wrote("Promote", full, func() error {
				_, err := st.Promote(ctx, state.PromoteParams{Environment: "prod", PlanID: "p1", Now: now,
					Snapshots: []state.SnapshotRef{{Name: key.Name, Fingerprint: "f", Version: key.Version}}})
				return err
			})
			wrote("RemoveIntervals", full, func() error {
				return st.RemoveIntervals(ctx, state.IntervalsParams{Key: key, Ranges: hour, Now: now})
			})
			wrote("AppendEvents", full, func() error {
				_, err := st.AppendEvents(ctx, state.Event{At: now, Kind: state.EventPlanApplied})
				return err
			})
		})
	}
}
