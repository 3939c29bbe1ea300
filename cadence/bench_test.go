package cadence

import (
	"fmt"
	"testing"
	"time"

	"github.com/gapless-dev/gapless/interval"
)

var benchExec = time.Date(2024, 3, 5, 10, 7, 0, 0, time.UTC)

// benchSpec is a five-minute model whose history starts years before
// benchExec: about 105,000 buckets per year.
func benchSpec(b *testing.B, years int, lookback int) Spec {
	return Spec{
		Start:    benchExec.AddDate(-years, 0, 0),
		Cron:     mustCron(b, "*/5 * * * *"),
		Unit:     interval.FiveMinute,
		Lookback: lookback,
	}
}

// coveredWithGaps covers the whole due window except gaps one-bucket holes
// spread evenly over it; shift moves the holes so that models differ.
func coveredWithGaps(s Spec, gaps, shift int) interval.Set {
	origin, bound := s.Unit.Floor(s.Start), s.Bound(benchExec)
	total := s.Unit.Buckets(interval.NewRange(origin, bound))
	rs := make([]interval.Range, 0, gaps+1)
	prev := origin
	for i := range gaps {
		hole := s.Unit.Add(origin, (i+1)*total/(gaps+1)+shift%7)
		rs = append(rs, interval.NewRange(prev, hole))
		prev = s.Unit.Add(hole, 1)
	}
	rs = append(rs, interval.NewRange(prev, bound))
	return interval.NewSet(rs...)
}

func BenchmarkMissing(b *testing.B) {
	for _, years := range []int{2, 4} {
		for _, gaps := range []int{0, 1000} {
			for _, lookback := range []int{0, 12} {
				s := benchSpec(b, years, lookback)
				covered := coveredWithGaps(s, gaps, 0)
				window := interval.NewRange(s.Unit.Floor(s.Start), s.Bound(benchExec))
				name := fmt.Sprintf("years=%d/gaps=%d/lookback=%d", years, gaps, lookback)
				b.Run(name, func(b *testing.B) {
					var res Result
					for b.Loop() {
						res = s.Missing(covered, benchExec)
					}
					if res.Buckets != gaps || res.Missing.Len() != gaps {
						b.Fatalf("missing %d buckets in %d ranges, want %d", res.Buckets, res.Missing.Len(), gaps)
					}
					b.ReportMetric(float64(s.Unit.Buckets(window)), "buckets/model")
				})
			}
		}
	}
}

// BenchmarkMissing1000Models runs Missing for 1,000 models per operation,
// each with its own covered state prepared outside the timer.
func BenchmarkMissing1000Models(b *testing.B) {
	const models = 1000
	for _, years := range []int{2, 4} {
		for _, gaps := range []int{0, 1000} {
			specs := make([]Spec, models)
			covered := make([]interval.Set, models)
			for i := range specs {
				specs[i] = benchSpec(b, years, i%3)
				covered[i] = coveredWithGaps(specs[i], gaps, i)
			}
			b.Run(fmt.Sprintf("years=%d/gaps=%d", years, gaps), func(b *testing.B) {
				total := 0
				for b.Loop() {
					total = 0
					for i := range specs {
						total += specs[i].Missing(covered[i], benchExec).Buckets
					}
				}
				if total != models*gaps {
					b.Fatalf("missing %d buckets, want %d", total, models*gaps)
				}
			})
		}
	}
}

// BenchmarkAdvances counts two years of five-minute advances: one cron
// search per advance.
func BenchmarkAdvances(b *testing.B) {
	s := benchSpec(b, 2, 0)
	from := s.Unit.Floor(s.Start)
	to := s.Bound(benchExec)
	var n int
	for b.Loop() {
		n = s.Advances(from, to)
	}
	b.ReportMetric(float64(n), "advances")
}
