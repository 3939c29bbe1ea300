package apply_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/apply"
	"github.com/gapless-dev/gapless/execute/executetest"
	"github.com/gapless-dev/gapless/plan"
)

// BenchmarkPromotion measures the promotion of an environment of 1,000
// models: the promote stage (the state transaction with the no-gap check)
// plus the view updates and finalisation, timed from the end of the
// backfill to the end of the apply. Each iteration changes one model
// ("one_changed": one view to repoint) or every model ("all_changed").
//
//	go test -run '^$' -bench Promotion -benchtime 3x ./apply/
func BenchmarkPromotion(b *testing.B) {
	const models = 1000
	files := func(rev int, all bool) map[string]string {
		out := map[string]string{}
		for i := range models {
			v := 0
			if i == 0 || all {
				v = rev
			}
			out[fmt.Sprintf("models/m%04d.sql", i)] = fmt.Sprintf("MODEL (name bench.m%04d, kind VIEW, start '2024-01-01');\nSELECT %d AS x", i, v)
		}
		return out
	}
	for _, c := range []struct {
		backend string
		all     bool
	}{{"duckdb+sqlite", false}, {"duckdb+sqlite", true}, {"postgres+postgres", false}, {"postgres+postgres", true}} {
		backend := c.backend
		name := backend + "/one_changed"
		if c.all {
			name = backend + "/all_changed"
		}
		b.Run(name, func(b *testing.B) {
			setup := executetest.Setup
			if backend != "duckdb+sqlite" {
				setup = executetest.SetupPostgres
			}
			bu := setup(b, false, files(0, c.all))
			exec := at(2024, 1, 3, 0)
			p := bu.Plan(b, "p0", plan.Prod, exec, plan.Options{})
			_, err := doApply(bu, p, exec, apply.Hooks{}, nil)
			require.NoError(b, err)
			var promote, views time.Duration
			b.ResetTimer()
			b.StopTimer()
			for rev := 1; rev <= b.N; rev++ {
				executetest.WriteFiles(b, bu.Dir, files(rev, c.all))
				p := bu.Plan(b, fmt.Sprintf("p%d", rev), plan.Prod, exec, plan.Options{})
				var began, accepted time.Time
				_, err := doApply(bu, p, exec, apply.Hooks{AfterBackfill: func(context.Context) error {
					began = time.Now()
					b.StartTimer()
					return nil
				}}, func(e apply.Event) {
					if _, ok := e.(apply.PromotionAccepted); ok {
						accepted = time.Now()
					}
				})
				b.StopTimer()
				require.NoError(b, err)
				promote += accepted.Sub(began)
				views += time.Since(accepted)
			}
			b.ReportMetric(float64(promote.Milliseconds())/float64(b.N), "ms-promote/op")
			b.ReportMetric(float64(views.Milliseconds())/float64(b.N), "ms-views+finalize/op")
		})
	}
}
