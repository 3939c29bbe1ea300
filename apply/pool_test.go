package apply_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/apply"
	"github.com/gapless-dev/gapless/execute/executetest"
	"github.com/gapless-dev/gapless/plan"
)

// poolFiles is eight independent hourly models and one daily child reading
// all of them.
func poolFiles() map[string]string {
	files := map[string]string{}
	var union string
	for i := range 8 {
		files[fmt.Sprintf("models/p%d.sql", i)] = fmt.Sprintf(`MODEL (name pool.p%d, kind INCREMENTAL_BY_TIME_RANGE (time_column ts, batch_size 6), cron '@hourly', start '2024-01-01');
SELECT g.ts AS ts, %d AS src FROM generate_series(@start_ts, @end_ts, INTERVAL 1 HOUR) AS g(ts)`, i, i)
		if i > 0 {
			union += " UNION ALL "
		}
		union += fmt.Sprintf("SELECT ts, src FROM pool.p%d", i)
	}
	files["models/child.sql"] = `MODEL (name pool.child, kind INCREMENTAL_BY_TIME_RANGE (time_column day), cron '@daily', start '2024-01-01');
SELECT date_trunc('day', ts) AS day, count(*) AS n FROM (` + union + `) AS u WHERE ts BETWEEN @start_ts AND @end_ts GROUP BY 1`
	return files
}

// Scenario: more workers than models, and fewer workers than models. In
// both, every batch is computed exactly once, no more models run at once
// than there are workers, and the child starts only after all eight parents
// finished.
func TestBackfillPoolHandsOutEachBatchOnce(t *testing.T) {
	t.Parallel()
	for _, workers := range []int{16, 2} {
		t.Run(fmt.Sprintf("workers=%d", workers), func(t *testing.T) {
			t.Parallel()
			b := executetest.Setup(t, false, poolFiles())
			p := b.Plan(t, "p1", plan.Prod, at(2024, 1, 3, 0), plan.Options{})
			var (
				mu               sync.Mutex
				active, peak     int
				batches          = map[string]int{}
				finished         = map[string]bool{}
				childSawFinished int
			)
			_, err := apply.Apply(b.Ctx, apply.Params{
				Plan: p, Store: b.Store, Engine: b.Engine, Parser: b.Parser, ProjectDir: b.Dir, Workers: workers,
				Logger: quiet, Clock: clockwork.NewFakeClockAt(at(2024, 1, 3, 0)),
				Hooks: apply.Hooks{BeforeModel: func(_ context.Context, model string) error {
					mu.Lock()
					defer mu.Unlock()
					active++
					peak = max(peak, active)
					if model == "pool.child" {
						childSawFinished = len(finished)
					}
					return nil
				}},
				OnEvent: func(e apply.Event) {
					mu.Lock()
					defer mu.Unlock()
					switch ev := e.(type) {
					case apply.BatchCommitted:
						batches[ev.Batch.Model+" "+ev.Batch.Interval.String()]++
					case apply.ModelFinished:
						active--
						finished[ev.Model] = true
					}
				},
			})
			require.NoError(t, err)
			require.Len(t, batches, 8*8+1, "eight parents in eight 6-hour batches, the child in one")
			for k, n := range batches {
				require.Equal(t, 1, n, k)
			}
			require.LessOrEqual(t, peak, workers)
			require.Equal(t, 8, childSawFinished)
			require.Equal(t, []string{"2024-01-01 192", "2024-01-02 192"},
				b.Rows(t, "SELECT strftime(day, '%Y-%m-%d'), n FROM pool.child"))
		})
	}
}
