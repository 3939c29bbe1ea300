package execute_test

import (
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/execute"
	"github.com/gapless-dev/gapless/execute/executetest"
	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/warehouse"
)

// BenchmarkBackfillYearHourly measures the backfill's overhead: one year of
// hourly intervals of a simple incremental model on DuckDB (state in
// SQLite), against a single INSERT ... SELECT over the whole range. It
// reports ns/interval; compare the batched runs with "single".
//
//	go test -run '^$' -bench BackfillYearHourly -benchtime 1x ./execute/
func BenchmarkBackfillYearHourly(b *testing.B) {
	year := interval.NewRange(at(2023, 1, 1, 0), at(2024, 1, 1, 0))
	hours := interval.Hour.Buckets(year)
	for _, bs := range []int{0, 720, 1} {
		modelBatch := max(bs, 1) // the baseline does not use it
		name := fmt.Sprintf("batch_size=%d", bs)
		if bs == 0 {
			name = "single_insert_select"
		}
		b.Run(name, func(b *testing.B) {
			src := fmt.Sprintf(`MODEL (name bench.hourly, kind INCREMENTAL_BY_TIME_RANGE (time_column ts, batch_size %d), cron '@hourly', start '2023-01-01');
SELECT g.ts AS ts, epoch(g.ts)::BIGINT %% 97 AS v FROM generate_series(@start_ts, @end_ts, INTERVAL 1 HOUR) AS g(ts)`, modelBatch)
			bu := executetest.Setup(b, false, map[string]string{"models/hourly.sql": src})
			pr := bu.Load(b)
			tpls, err := execute.Templates(bu.Ctx, bu.Parser, bu.Engine, pr.Snapshots)
			require.NoError(b, err)
			tpl := tpls["bench.hourly"]
			exec := at(2024, 1, 1, 0)
			x := &execute.Executor{Engine: bu.Engine, Store: bu.Store, Now: func() time.Time { return exec },
				Logger: slog.New(slog.DiscardHandler)}
			key := state.VersionKey{Name: "bench.hourly", Version: tpl.Snapshot.Version}
			b.ResetTimer()
			for b.Loop() {
				b.StopTimer()
				require.NoError(b, bu.Engine.DropTable(bu.Ctx, tpl.Table))
				require.NoError(b, bu.Store.DeleteIntervals(bu.Ctx, []state.VersionKey{key}))
				require.NoError(b, x.Prepare(bu.Ctx, tpl, exec))
				b.StartTimer()
				if bs == 0 {
					// The baseline: one statement, no state write.
					sql, err := tpl.Render(year, exec)
					require.NoError(b, err)
					_, err = bu.Engine.InsertInterval(bu.Ctx, warehouse.InsertIntervalParams{Table: tpl.Table, TimeColumn: "ts",
						Start: year.Start, End: year.End, Query: sql})
					require.NoError(b, err)
					continue
				}
				res, err := x.Execute(bu.Ctx, execute.Work{Template: tpl, Ranges: interval.NewSet(year), Execution: exec})
				require.NoError(b, err)
				require.Equal(b, int64(hours), res.Rows)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(hours), "ns/interval")
		})
	}
}
