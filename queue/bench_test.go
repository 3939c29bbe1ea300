package queue_test

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/queue"
)

type benchArgs struct{ N int }

func (benchArgs) Kind() string { return "queue_bench" }

// BenchmarkInsertToRun measures the latency from an Insert call to its
// job's handler starting, one job at a time: each insert follows the
// previous job's start, so it lands within the fetch cooldown of the last
// fetch and the fetcher wakes at the cooldown's end. ns/op is the mean;
// p50-ms and max-ms the distribution.
//
// "defaults" is gapless's Config (FetchCooldown 5ms, FetchPollInterval
// 200ms); "cooldown-1ms" River's least cooldown; "other-client" inserts
// through a second, insert-only Queue on the database (another process, as
// the CLI), whose jobs the working client finds by polling.
func BenchmarkInsertToRun(b *testing.B) {
	for _, drv := range []struct {
		name string
		cfg  func(testing.TB) queue.Config
	}{{"sqlite", sqliteConfig}, {"postgres", postgresConfig}} {
		for _, v := range []struct {
			name     string
			cooldown time.Duration
			other    bool
		}{{"defaults", 0, false}, {"cooldown-1ms", time.Millisecond, false}, {"other-client", 0, true}} {
			b.Run(drv.name+"/"+v.name, func(b *testing.B) {
				cfg := drv.cfg(b)
				cfg.FetchCooldown = v.cooldown
				cfg.Logger = slog.New(slog.DiscardHandler)
				ctx := context.Background()
				var enq queue.Enqueuer
				if v.other {
					ins, err := queue.Open(ctx, cfg)
					require.NoError(b, err)
					enq = ins
				}
				ran := make(chan time.Time, 1)
				w := queue.NewWorkers()
				queue.AddWorker(w, func(context.Context, *queue.Job[benchArgs]) error {
					ran <- time.Now()
					return nil
				}, queue.WorkerOptions{})
				cfg.Workers = w
				q, err := queue.Open(ctx, cfg)
				require.NoError(b, err)
				require.NoError(b, q.Start(ctx))
				b.Cleanup(func() { require.NoError(b, q.Stop(ctx)) })
				if enq == nil {
					enq = q
				}

				lat := make([]time.Duration, 0, b.N)
				b.ResetTimer()
				for i := range b.N {
					t0 := time.Now()
					_, err := enq.Insert(ctx, benchArgs{N: i}, nil)
					require.NoError(b, err)
					lat = append(lat, (<-ran).Sub(t0))
				}
				b.StopTimer()
				slices.Sort(lat)
				b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
				b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "max-ms")
			})
		}
	}
}
