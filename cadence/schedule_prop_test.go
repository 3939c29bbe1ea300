package cadence

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/gapless-dev/gapless/interval"
)

// The properties below compare Spec with naive models that walk time slot by
// slot or firing by firing. Every cron used fires on multiples of five
// minutes, so all bounds fall on a 5-minute slot grid.

const slot = 5 * time.Minute

var (
	propOrigin = time.Date(2024, 2, 28, 0, 0, 0, 0, time.UTC)
	propCrons  = []string{"*/5 * * * *", "*/15 * * * *", "0,30 * * * *", "@hourly", "0 */2 * * *", "30 1 * * *", "5,50 * * * *", "@daily"}
	propUnits  = []interval.Unit{interval.FiveMinute, interval.QuarterHour, interval.HalfHour, interval.Hour, interval.Day}
)

const propSlots = 3 * 24 * 12 // three days

func slotAt(i int) time.Time { return propOrigin.Add(time.Duration(i) * slot) }

func genSpec(t *rapid.T) Spec {
	return Spec{
		Start:         propOrigin,
		Cron:          mustCron(t, rapid.SampledFrom(propCrons).Draw(t, "cron")),
		Unit:          rapid.SampledFrom(propUnits).Draw(t, "unit"),
		Lookback:      rapid.IntRange(0, 4).Draw(t, "lookback"),
		AllowPartials: rapid.Bool().Draw(t, "partials"),
	}
}

// runs returns the maximal runs [a, b) of true slots.
func runs(m []bool) [][2]int {
	var out [][2]int
	for i := 0; i < len(m); {
		if !m[i] {
			i++
			continue
		}
		j := i
		for j < len(m) && m[j] {
			j++
		}
		out = append(out, [2]int{i, j})
		i = j
	}
	return out
}

// bucketsOfRuns counts, per run, the distinct unit buckets its slots touch.
func bucketsOfRuns(u interval.Unit, rs [][2]int) int {
	n := 0
	for _, r := range rs {
		var last time.Time
		for i := r[0]; i < r[1]; i++ {
			if b := u.Floor(slotAt(i)); i == r[0] || !b.Equal(last) {
				n++
				last = b
			}
		}
	}
	return n
}

func rangesOfRuns(rs [][2]int) []interval.Range {
	var out []interval.Range
	for _, r := range rs {
		out = append(out, interval.NewRange(slotAt(r[0]), slotAt(r[1])))
	}
	return out
}

func TestMissingAgreesWithSlotModel(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		s := genSpec(rt)
		covered := make([]bool, propSlots)
		var cov []interval.Range
		for i := range rapid.IntRange(0, 8).Draw(rt, "ncovered") {
			a := rapid.IntRange(0, propSlots).Draw(rt, "a"+string(rune('0'+i)))
			l := rapid.IntRange(0, propSlots/4).Draw(rt, "l"+string(rune('0'+i)))
			b := min(a+l, propSlots)
			cov = append(cov, interval.NewRange(slotAt(a), slotAt(b)))
			for k := a; k < b; k++ {
				covered[k] = true
			}
		}
		exec := slotAt(rapid.IntRange(0, propSlots).Draw(rt, "exec")).Add(time.Duration(rapid.IntRange(0, 299).Draw(rt, "execsec")) * time.Second)

		bound := s.Bound(exec)
		require.False(rt, bound.After(exec), "nothing after exec is due")
		if !s.AllowPartials {
			require.True(rt, s.Unit.Aligned(bound))
		}
		boundSlot := int(bound.Sub(propOrigin) / slot)
		require.True(rt, slotAt(boundSlot).Equal(bound) || boundSlot < 0)

		missing := make([]bool, propSlots)
		for i := 0; i < boundSlot && i < propSlots; i++ {
			missing[i] = !covered[i]
		}
		missingRuns := runs(missing)

		work := make([]bool, propSlots)
		for _, r := range missingRuns {
			ws := s.Unit.Add(s.Unit.Floor(slotAt(r[0])), -s.Lookback)
			if ws.Before(propOrigin) {
				ws = propOrigin
			}
			for i := int(ws.Sub(propOrigin) / slot); i < r[1]; i++ {
				work[i] = true
			}
		}
		workRuns := runs(work)

		res := s.Missing(interval.NewSet(cov...), exec)
		require.Equal(rt, rangesOfRuns(missingRuns), res.Missing.Ranges(), "missing")
		require.Equal(rt, bucketsOfRuns(s.Unit, missingRuns), res.Buckets, "buckets")
		require.Equal(rt, rangesOfRuns(workRuns), res.Work.Ranges(), "work")
		require.Equal(rt, bucketsOfRuns(s.Unit, workRuns), res.WorkBuckets, "work buckets")
		require.True(rt, res.Missing.Subtract(res.Work).IsEmpty(), "work covers missing")

		// Batches tile the work exactly, each within its batch size.
		size := rapid.IntRange(0, 5).Draw(rt, "batch")
		var tiled []interval.Range
		batches := 0
		for b := range Batches(res.Work, s.Unit, size) {
			batches++
			require.False(rt, b.Empty())
			if size > 0 {
				require.LessOrEqual(rt, s.Unit.Buckets(b), size)
			}
			tiled = append(tiled, b)
		}
		require.True(rt, interval.NewSet(tiled...).Equal(res.Work))
		require.Equal(rt, batches, BatchCount(res.Work, s.Unit, size))
	})
}

// naiveAdvances walks every cron firing after from and collects the distinct
// due ends in (max(from, origin), to], then adds the partial advance.
func naiveAdvances(s Spec, from, to time.Time) int {
	if !to.After(from) {
		return 0
	}
	if o := s.Unit.Floor(s.Start); from.Before(o) {
		from = o
	}
	seen := map[time.Time]bool{}
	last := from
	// Past limit a firing's due end is beyond to, unless End caps it; once
	// the due end reaches End it stays there.
	limit := s.Unit.Add(to, 2)
	for t := s.Cron.Next(from); ; t = s.Cron.Next(t) {
		e := s.Bound(t)
		if e.After(to) {
			break
		}
		if e.After(from) {
			seen[e] = true
			if e.After(last) {
				last = e
			}
		}
		if (!s.End.IsZero() && !e.Before(s.End)) || !t.Before(limit) {
			break
		}
	}
	n := len(seen)
	if to.After(last) {
		n++
	}
	return n
}

func TestAdvancesAgreesWithFiringWalk(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		s := genSpec(rt)
		if rapid.Bool().Draw(rt, "hasEnd") {
			s.End = slotAt(rapid.IntRange(1, propSlots).Draw(rt, "end"))
		}
		from := slotAt(rapid.IntRange(-10, propSlots).Draw(rt, "from"))
		to := slotAt(rapid.IntRange(-10, propSlots).Draw(rt, "to"))
		if rapid.Bool().Draw(rt, "aligned") {
			from, to = s.Unit.Floor(from), s.Unit.Floor(to)
		}
		require.Equal(rt, naiveAdvances(s, from, to), s.Advances(from, to), "%+v %v -> %v", s, from, to)

		// Advances are additive over an intermediate due end.
		if mid := s.Bound(to); mid.After(from) && mid.Before(to) && mid.After(propOrigin) {
			require.Equal(rt, s.Advances(from, to), s.Advances(from, mid)+s.Advances(mid, to))
		}
	})
}
