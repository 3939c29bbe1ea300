package janitor_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/apply"
	"github.com/gapless-dev/gapless/backend"
	"github.com/gapless-dev/gapless/execute/executetest"
	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/janitor"
	"github.com/gapless-dev/gapless/plan"
	"github.com/gapless-dev/gapless/state"
)

var (
	at    = executetest.At
	quiet = slog.New(slog.DiscardHandler)
)

// hourly is an hourly incremental model starting 2024-01-01 whose v is
// the hour plus add.
func hourly(name string, add int) string {
	return fmt.Sprintf(`MODEL (
  name %s,
  kind INCREMENTAL_BY_TIME_RANGE (time_column ts),
  cron '@hourly',
  start '2024-01-01'
);
SELECT g.ts AS ts, CAST(EXTRACT(HOUR FROM g.ts) AS INTEGER) + %d AS v
FROM generate_series(@start_ts, @end_ts, INTERVAL '1 hour') AS g(ts)`, name, add)
}

// deploy plans the project for env and applies it at exec.
func deploy(t *testing.T, b *executetest.Bundle, id, env string, exec time.Time) {
	t.Helper()
	p := b.Plan(t, id, env, exec, plan.Options{AllowGaps: env != plan.Prod}) // as the CLI: only prod is checked
	_, err := apply.Apply(b.Ctx, apply.Params{Plan: p, Store: b.Store, Engine: b.Engine, Parser: b.Parser,
		ProjectDir: b.Dir, Clock: clockwork.NewFakeClockAt(exec), Logger: quiet})
	require.NoError(t, err)
}

// onBothBackends runs story on DuckDB with SQLite state and on PostgreSQL
// with PostgreSQL state.
func onBothBackends(t *testing.T, files map[string]string, story func(t *testing.T, b *executetest.Bundle)) {
	t.Helper()
	t.Run("duckdb+sqlite", func(t *testing.T) {
		t.Parallel()
		story(t, executetest.Setup(t, false, files))
	})
	t.Run("postgres+postgres", func(t *testing.T) {
		t.Parallel()
		story(t, executetest.SetupPostgres(t, false, files))
	})
}

// Scenario: dev serves a breaking change of demo.hits (its own version),
// with an open freshness debt on it (a trailing gap a policy accepted),
// and expires. The janitor, with snapshot_ttl 0, removes dev and deletes
// the intervals of dev's version, so nothing could ever repair that debt:
// the removal supersedes it, at the janitor's execution time, with its
// gap_superseded event (reason "removed"), in the transaction that deletes
// dev's row. prod's version and its intervals are untouched. Before
// RemoveEnvironment, the janitor deleted dev's row alone and the debt
// stayed open for ever.
func TestRemovingAnExpiredEnvironmentSupersedesItsOpenDebts(t *testing.T) {
	t.Parallel()
	onBothBackends(t, map[string]string{"models/hits.sql": hourly("demo.hits", 0)}, func(t *testing.T, b *executetest.Bundle) {
		deploy(t, b, "p1", plan.Prod, at(2024, 1, 1, 6))
		executetest.WriteFiles(t, b.Dir, map[string]string{"models/hits.sql": hourly("demo.hits", 1)})
		deploy(t, b, "d1", "dev", at(2024, 1, 1, 6))
		prodSnaps, _ := b.Served(t, plan.Prod)
		devSnaps, dev := b.Served(t, "dev")
		prodV, devV := prodSnaps["demo.hits"].Version, devSnaps["demo.hits"].Version
		require.NotEqual(t, prodV, devV)

		// dev's promotion accepted a trailing gap, beyond what was built,
		// and expires at 07:00.
		gap := interval.Range{Start: at(2024, 1, 1, 6), End: at(2024, 1, 1, 8)}
		_, err := b.Store.Promote(b.Ctx, state.PromoteParams{Environment: "dev", ExpectedPlanID: dev.PlanID, PlanID: dev.PlanID,
			Snapshots: dev.Snapshots, ExpiresAt: at(2024, 1, 1, 7), Now: at(2024, 1, 1, 6),
			Check: func(_ context.Context, _ state.Reader) (state.CheckResult, error) {
				return state.CheckResult{Debts: []state.Debt{{Model: "demo.hits", Version: devV, Range: gap,
					Policy: "trailing-gap", Bound: 1, Advances: 1}}}, nil
			}})
		require.NoError(t, err)
		open, err := b.Store.ListDebts(b.Ctx, state.DebtFilter{Environment: "dev", OpenOnly: true})
		require.NoError(t, err)
		require.Len(t, open, 1)

		exec := at(2024, 1, 2, 0)
		rep, err := janitor.Run(b.Ctx, &backend.Backend{Store: b.Store, Engine: b.Engine}, exec,
			janitor.Options{Grace: janitor.DefaultGrace, Log: quiet})
		require.NoError(t, err)
		require.Equal(t, []string{"dev"}, rep.Environments)
		require.Equal(t, []state.VersionKey{{Name: "demo.hits", Version: devV}}, rep.Versions)
		require.Equal(t, "{}", b.Intervals(t, "demo.hits", devV), "dev's version's intervals are deleted")
		require.NotEqual(t, "{}", b.Intervals(t, "demo.hits", prodV), "prod's are not")

		debts, err := b.Store.ListDebts(b.Ctx, state.DebtFilter{Environment: "dev"})
		require.NoError(t, err)
		require.Len(t, debts, 1)
		require.False(t, debts[0].Open(), "the removed environment's debt is not left open")
		require.Equal(t, exec, debts[0].SupersededAt)
		require.True(t, debts[0].RepairedAt.IsZero())
		evs, err := b.Store.ListEvents(b.Ctx, state.EventFilter{Kinds: []string{state.EventGapSuperseded}})
		require.NoError(t, err)
		require.Len(t, evs, 1)
		require.Equal(t, "dev", evs[0].Environment)
		require.Equal(t, state.ReasonRemoved, evs[0].Reason)
		require.True(t, strings.Contains(string(evs[0].Data), fmt.Sprintf(`"debt_id":%d`, debts[0].ID)) ||
			strings.Contains(string(evs[0].Data), fmt.Sprintf(`"debt_id": %d`, debts[0].ID)), string(evs[0].Data))
	})
}
