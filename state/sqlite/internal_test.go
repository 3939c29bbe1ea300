package sqlite

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
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
