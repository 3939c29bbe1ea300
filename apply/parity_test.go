package apply_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/apply"
	"github.com/gapless-dev/gapless/execute/executetest"
	"github.com/gapless-dev/gapless/plan"
	"github.com/gapless-dev/gapless/promotion"
	"github.com/gapless-dev/gapless/run"
)

// parityFiles is a project whose SQL both DuckDB and PostgreSQL run.
func parityFiles(hourExpr string) map[string]string {
	return map[string]string{
		"models/events.sql": `MODEL (
  name demo.events,
  kind INCREMENTAL_BY_TIME_RANGE (time_column ts, batch_size 12),
  cron '@hourly',
  start '2024-01-01'
);
SELECT g.ts AS ts, ` + hourExpr + ` AS h
FROM generate_series(@start_ts, @end_ts, INTERVAL '1 hour') AS g(ts)`,
		"models/daily.sql": `MODEL (
  name demo.daily,
  kind INCREMENTAL_BY_TIME_RANGE (time_column day),
  cron '@daily',
  start '2024-01-01'
);
SELECT date_trunc('day', e.ts) AS day, count(*) AS n, sum(e.h) AS hs
FROM demo.events AS e
WHERE e.ts BETWEEN @start_ts AND @end_ts
GROUP BY 1`,
		"models/totals.sql": `MODEL (name demo.totals, kind FULL, cron '@daily', start '2024-01-01');
SELECT count(*) AS days, sum(n) AS n FROM demo.daily`,
	}
}

// Scenario (parity): the same story on DuckDB+SQLite and on
// PostgreSQL+PostgreSQL gives the same intervals and the same served rows:
// a first apply, a scheduled run, a breaking change whose strict promotion
// loses to a run that advanced the incumbent, and the replan that wins.
func TestBackendParity(t *testing.T) {
	t.Parallel()
	type outcome struct {
		Intervals []string
		Rows      []string
		Gap       string
	}
	story := func(t *testing.T, b *executetest.Bundle) outcome {
		var out outcome
		snap := func() {
			served, _ := b.Served(t, plan.Prod)
			for _, n := range []string{"demo.events", "demo.daily", "demo.totals"} {
				out.Intervals = append(out.Intervals, n+" "+b.Intervals(t, n, served[n].Version))
			}
			out.Rows = append(out.Rows, b.Rows(t, "SELECT CAST(count(*) AS BIGINT), CAST(sum(h) AS BIGINT) FROM demo.events")...)
			out.Rows = append(out.Rows, b.Rows(t, "SELECT CAST(count(*) AS BIGINT), CAST(sum(hs) AS BIGINT) FROM demo.daily")...)
			out.Rows = append(out.Rows, b.Rows(t, "SELECT CAST(days AS BIGINT), CAST(n AS BIGINT) FROM demo.totals")...)
		}
		p1 := b.Plan(t, "p1", plan.Prod, at(2024, 1, 3, 0), plan.Options{})
		_, err := doApply(b, p1, at(2024, 1, 3, 0), apply.Hooks{}, nil)
		require.NoError(t, err)
		snap()
		_, err = runOnce(b.Ctx, b, plan.Prod, at(2024, 1, 4, 0), run.Hooks{})
		require.NoError(t, err)
		snap()

		executetest.WriteFiles(t, b.Dir, parityFiles("CAST(EXTRACT(HOUR FROM g.ts) AS INTEGER) + 1"))
		p2 := b.Plan(t, "p2", plan.Prod, at(2024, 1, 4, 0), plan.Options{})
		_, err = doApply(b, p2, at(2024, 1, 4, 3), apply.Hooks{AfterBackfill: func(ctx context.Context) error {
			_, err := runOnce(ctx, b, plan.Prod, at(2024, 1, 4, 3), run.Hooks{})
			return err
		}}, nil)
		var perr *promotion.Error
		require.ErrorAs(t, err, &perr)
		out.Gap = perr.Verdicts[0].Model + " " + perr.Verdicts[0].Missing.String()
		snap()

		p3 := b.Plan(t, "p3", plan.Prod, at(2024, 1, 4, 3), plan.Options{})
		_, err = doApply(b, p3, at(2024, 1, 4, 3), apply.Hooks{}, nil)
		require.NoError(t, err)
		snap()
		return out
	}

	embedded := story(t, executetest.Setup(t, false, parityFiles("CAST(EXTRACT(HOUR FROM g.ts) AS INTEGER)")))
	require.Equal(t, "demo.events {[2024-01-04T00:00:00Z, 2024-01-04T03:00:00Z)}", embedded.Gap)
	require.Equal(t, []string{"75 906", "3 900", "3 72"}, embedded.Rows[len(embedded.Rows)-3:],
		"after the replan: 75 hours of h+1, three days rolled up")
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		pg := story(t, executetest.SetupPostgres(t, false, parityFiles("CAST(EXTRACT(HOUR FROM g.ts) AS INTEGER)")))
		require.Equal(t, embedded, pg)
	})
}
