package cadence

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/cron"
	"github.com/gapless-dev/gapless/interval"
)

type tb interface {
	require.TestingT
	Helper()
}

func ts(t tb, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	require.NoError(t, err)
	return v.UTC()
}

func mustCron(t tb, expr string) cron.Schedule {
	t.Helper()
	s, err := cron.Parse(expr)
	require.NoError(t, err)
	return s
}

func rng(t tb, a, b string) interval.Range { return interval.NewRange(ts(t, a), ts(t, b)) }

func TestValidate(t *testing.T) {
	t.Parallel()
	good := Spec{Start: ts(t, "2024-01-01T00:00:00Z"), Cron: mustCron(t, "0 12 * * *"), Unit: interval.Day}
	require.NoError(t, good.Validate())

	bad := good
	bad.Unit = interval.Month
	err := bad.Validate()
	require.ErrorIs(t, err, ErrInvalidSpec)
	require.ErrorIs(t, err, cron.ErrUnitTooCoarse)
	bad.AllowPartials = true
	require.NoError(t, bad.Validate())

	err = Spec{End: ts(t, "2023-01-01T00:00:00Z"), Start: ts(t, "2024-01-01T00:00:00Z"), Unit: "week", Lookback: -1}.Validate()
	require.ErrorIs(t, err, ErrInvalidSpec)
	require.ErrorIs(t, err, interval.ErrUnknownUnit)
	for _, want := range []string{"no cron", "not after start", "negative lookback"} {
		require.ErrorContains(t, err, want)
	}

	frequent := good
	frequent.Cron = mustCron(t, "* * * * *")
	frequent.Unit = interval.FiveMinute
	require.ErrorIs(t, frequent.Validate(), cron.ErrTooFrequent)
}

func TestBound(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		cron     string
		unit     interval.Unit
		partials bool
		end      string
		exec     string
		want     string
	}{
		{"daily noon before firing: newest due day is the 3rd", "0 12 * * *", interval.Day, false, "", "2024-03-05T10:00:00Z", "2024-03-04T00:00:00Z"},
		{"daily noon just before firing", "0 12 * * *", interval.Day, false, "", "2024-03-05T11:59:59Z", "2024-03-04T00:00:00Z"},
		{"daily noon at firing: the 4th becomes due", "0 12 * * *", interval.Day, false, "", "2024-03-05T12:00:00Z", "2024-03-05T00:00:00Z"},
		{"daily noon after firing", "0 12 * * *", interval.Day, false, "", "2024-03-05T23:00:00Z", "2024-03-05T00:00:00Z"},
		{"daily noon with partials ends at the firing", "0 12 * * *", interval.Day, true, "", "2024-03-05T10:00:00Z", "2024-03-04T12:00:00Z"},
		{"capped at end", "0 12 * * *", interval.Day, false, "2024-03-03T00:00:00Z", "2024-03-05T12:00:00Z", "2024-03-03T00:00:00Z"},
		{"hourly", "@hourly", interval.Hour, false, "", "2024-03-05T10:30:00Z", "2024-03-05T10:00:00Z"},
		{"every two hours on an hour unit", "0 */2 * * *", interval.Hour, false, "", "2024-03-05T11:30:00Z", "2024-03-05T10:00:00Z"},
		{"five minutes", "*/5 * * * *", interval.FiveMinute, false, "", "2024-03-05T10:07:00Z", "2024-03-05T10:05:00Z"},
		{"five-minute cron on an hour unit", "*/5 * * * *", interval.Hour, false, "", "2024-03-05T10:07:00Z", "2024-03-05T10:00:00Z"},
		{"five-minute cron on an hour unit with partials", "*/5 * * * *", interval.Hour, true, "", "2024-03-05T10:07:00Z", "2024-03-05T10:05:00Z"},
		{"midnight cron on an hour unit", "@daily", interval.Hour, false, "", "2024-03-05T10:00:00Z", "2024-03-05T00:00:00Z"},
		{"monthly", "@monthly", interval.Month, false, "", "2024-03-15T00:00:00Z", "2024-03-01T00:00:00Z"},
		{"monthly on the 1st at midnight", "@monthly", interval.Month, false, "", "2024-01-01T00:00:00Z", "2024-01-01T00:00:00Z"},
		{"yearly", "@yearly", interval.Year, false, "", "2024-12-31T23:59:00Z", "2024-01-01T00:00:00Z"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := Spec{Start: ts(t, "2020-01-01T00:00:00Z"), Cron: mustCron(t, c.cron), Unit: c.unit, AllowPartials: c.partials}
			if c.end != "" {
				s.End = ts(t, c.end)
			}
			require.Equal(t, ts(t, c.want), s.Bound(ts(t, c.exec)))
		})
	}
	require.True(t, Spec{Unit: interval.Day}.Bound(time.Now()).IsZero(), "zero cron: nothing due")
}

// Scenario: a run at exec found nothing due; NextDue says when something
// will be: the first cron firing that makes a new interval due, for every
// kind of cron, a model that starts later, and none once End is reached.
func TestNextDue(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, cron string
		unit       interval.Unit
		partials   bool
		start, end string
		exec, want string
	}{
		{"hourly at half past: the next hour", "@hourly", interval.Hour, false, "", "", "2024-01-02T05:30:00Z", "2024-01-02T06:00:00Z"},
		{"hourly on the firing: the one after", "@hourly", interval.Hour, false, "", "", "2024-01-02T06:00:00Z", "2024-01-02T07:00:00Z"},
		{"daily noon before the firing: noon today", "0 12 * * *", interval.Day, false, "", "", "2024-03-05T10:00:00Z", "2024-03-05T12:00:00Z"},
		{"daily noon after the firing: noon tomorrow", "0 12 * * *", interval.Day, false, "", "", "2024-03-05T12:00:00Z", "2024-03-06T12:00:00Z"},
		{"five-minute cron on an hour unit: the next hour's first firing", "*/5 * * * *", interval.Hour, false, "", "", "2024-03-05T10:07:00Z", "2024-03-05T11:00:00Z"},
		{"five-minute cron with partials: the next firing", "*/5 * * * *", interval.Hour, true, "", "", "2024-03-05T10:07:00Z", "2024-03-05T10:10:00Z"},
		{"starts later: when its first day ends", "@daily", interval.Day, false, "2024-03-10T00:00:00Z", "", "2024-03-05T10:00:00Z", "2024-03-11T00:00:00Z"},
		{"end reached: never", "@daily", interval.Day, false, "", "2024-03-03T00:00:00Z", "2024-03-05T10:00:00Z", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := Spec{Start: ts(t, "2020-01-01T00:00:00Z"), Cron: mustCron(t, c.cron), Unit: c.unit, AllowPartials: c.partials}
			if c.start != "" {
				s.Start = ts(t, c.start)
			}
			if c.end != "" {
				s.End = ts(t, c.end)
			}
			exec := ts(t, c.exec)
			got, ok := s.NextDue(exec)
			if c.want == "" {
				require.False(t, ok, "got %s", got)
				return
			}
			require.True(t, ok)
			require.Equal(t, ts(t, c.want), got)
			// It is exactly when something new becomes due.
			require.Equal(t, s.Missing(interval.Set{}, exec).Missing, s.Missing(interval.Set{}, got.Add(-time.Second)).Missing)
			require.NotEqual(t, s.Missing(interval.Set{}, exec).Missing, s.Missing(interval.Set{}, got).Missing)
		})
	}
	_, ok := Spec{Unit: interval.Day}.NextDue(time.Now())
	require.False(t, ok, "zero cron: nothing ever due")
}

func TestDueAt(t *testing.T) {
	t.Parallel()
	s := Spec{Start: ts(t, "2024-03-01T06:00:00Z"), Cron: mustCron(t, "0 12 * * *"), Unit: interval.Day}

	r, ok := s.DueAt(ts(t, "2024-03-05T10:00:00Z"))
	require.True(t, ok)
	require.Equal(t, rng(t, "2024-03-03T00:00:00Z", "2024-03-04T00:00:00Z"), r)

	r, ok = s.DueAt(ts(t, "2024-03-05T12:00:00Z"))
	require.True(t, ok)
	require.Equal(t, rng(t, "2024-03-04T00:00:00Z", "2024-03-05T00:00:00Z"), r)

	_, ok = s.DueAt(ts(t, "2024-03-01T13:00:00Z"))
	require.False(t, ok, "the first day is not over yet")

	s.AllowPartials = true
	r, ok = s.DueAt(ts(t, "2024-03-05T13:00:00Z"))
	require.True(t, ok)
	require.Equal(t, rng(t, "2024-03-05T00:00:00Z", "2024-03-05T12:00:00Z"), r, "partial day")
}

func TestMissing(t *testing.T) {
	t.Parallel()
	start := "2024-03-01T00:00:00Z"
	cases := []struct {
		name        string
		lookback    int
		covered     []interval.Range
		exec        string
		missing     []interval.Range
		buckets     int
		work        []interval.Range
		workBuckets int
	}{
		{
			name:    "nothing covered",
			exec:    "2024-03-05T13:00:00Z",
			missing: []interval.Range{rng(t, start, "2024-03-05T00:00:00Z")}, buckets: 4,
			work: []interval.Range{rng(t, start, "2024-03-05T00:00:00Z")}, workBuckets: 4,
		},
		{
			name:    "before the daily firing the 4th is not due yet",
			covered: []interval.Range{rng(t, start, "2024-03-03T00:00:00Z")},
			exec:    "2024-03-05T11:00:00Z",
			missing: []interval.Range{rng(t, "2024-03-03T00:00:00Z", "2024-03-04T00:00:00Z")}, buckets: 1,
			work: []interval.Range{rng(t, "2024-03-03T00:00:00Z", "2024-03-04T00:00:00Z")}, workBuckets: 1,
		},
		{
			name:     "lookback widens the work, not the missing count",
			lookback: 1,
			covered:  []interval.Range{rng(t, start, "2024-03-03T00:00:00Z")},
			exec:     "2024-03-05T13:00:00Z",
			missing:  []interval.Range{rng(t, "2024-03-03T00:00:00Z", "2024-03-05T00:00:00Z")}, buckets: 2,
			work: []interval.Range{rng(t, "2024-03-02T00:00:00Z", "2024-03-05T00:00:00Z")}, workBuckets: 3,
		},
		{
			name:     "lookback is clipped to start",
			lookback: 10,
			covered:  []interval.Range{rng(t, start, "2024-03-03T00:00:00Z")},
			exec:     "2024-03-05T13:00:00Z",
			missing:  []interval.Range{rng(t, "2024-03-03T00:00:00Z", "2024-03-05T00:00:00Z")}, buckets: 2,
			work: []interval.Range{rng(t, start, "2024-03-05T00:00:00Z")}, workBuckets: 4,
		},
		{
			name:     "lookback merges nearby gaps and keeps distant ones apart",
			lookback: 1,
			covered: []interval.Range{
				rng(t, start, "2024-03-03T00:00:00Z"), rng(t, "2024-03-04T00:00:00Z", "2024-03-05T00:00:00Z"),
				rng(t, "2024-03-06T00:00:00Z", "2024-03-08T00:00:00Z"),
			},
			exec: "2024-03-10T13:00:00Z",
			missing: []interval.Range{
				rng(t, "2024-03-03T00:00:00Z", "2024-03-04T00:00:00Z"), rng(t, "2024-03-05T00:00:00Z", "2024-03-06T00:00:00Z"),
				rng(t, "2024-03-08T00:00:00Z", "2024-03-10T00:00:00Z"),
			},
			buckets:     4,
			work:        []interval.Range{rng(t, "2024-03-02T00:00:00Z", "2024-03-06T00:00:00Z"), rng(t, "2024-03-07T00:00:00Z", "2024-03-10T00:00:00Z")},
			workBuckets: 7,
		},
		{
			name:    "covered beyond the bound and before start is ignored",
			covered: []interval.Range{rng(t, "2024-02-01T00:00:00Z", "2024-03-02T00:00:00Z"), rng(t, "2024-03-04T00:00:00Z", "2024-04-01T00:00:00Z")},
			exec:    "2024-03-05T13:00:00Z",
			missing: []interval.Range{rng(t, "2024-03-02T00:00:00Z", "2024-03-04T00:00:00Z")}, buckets: 2,
			work: []interval.Range{rng(t, "2024-03-02T00:00:00Z", "2024-03-04T00:00:00Z")}, workBuckets: 2,
		},
		{
			name:    "exec before the first interval is due",
			exec:    "2024-03-01T13:00:00Z",
			missing: nil,
		},
		{
			name:    "fully covered",
			covered: []interval.Range{rng(t, start, "2024-03-05T00:00:00Z")},
			exec:    "2024-03-05T13:00:00Z",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := Spec{Start: ts(t, "2024-03-01T06:00:00Z"), Cron: mustCron(t, "0 12 * * *"), Unit: interval.Day, Lookback: c.lookback}
			covered := interval.NewSet(c.covered...)
			res := s.Missing(covered, ts(t, c.exec))
			require.Equal(t, c.missing, res.Missing.Ranges(), "missing")
			require.Equal(t, c.buckets, res.Buckets, "buckets")
			require.Equal(t, c.work, res.Work.Ranges(), "work")
			require.Equal(t, c.workBuckets, res.WorkBuckets, "work buckets")
		})
	}
}

func TestMissingWithEndAndPartials(t *testing.T) {
	t.Parallel()
	// Scenario: a model with allow_partials on a day unit and a noon cron
	// has yesterday complete and today's first half due after noon; a model
	// that ended on the 3rd never has anything due after that.
	s := Spec{Start: ts(t, "2024-03-01T00:00:00Z"), Cron: mustCron(t, "0 12 * * *"), Unit: interval.Day, AllowPartials: true, Lookback: 1}
	covered := interval.NewSet(rng(t, "2024-03-01T00:00:00Z", "2024-03-04T12:00:00Z"))
	res := s.Missing(covered, ts(t, "2024-03-05T13:00:00Z"))
	require.Equal(t, []interval.Range{rng(t, "2024-03-04T12:00:00Z", "2024-03-05T12:00:00Z")}, res.Missing.Ranges())
	require.Equal(t, 2, res.Buckets, "two partial days")
	require.Equal(t, []interval.Range{rng(t, "2024-03-03T00:00:00Z", "2024-03-05T12:00:00Z")}, res.Work.Ranges(),
		"lookback counts from the start of the bucket the gap starts in")
	require.Equal(t, 3, res.WorkBuckets)

	s = Spec{Start: ts(t, "2024-03-01T00:00:00Z"), End: ts(t, "2024-03-03T00:00:00Z"), Cron: mustCron(t, "0 12 * * *"), Unit: interval.Day}
	res = s.Missing(interval.Set{}, ts(t, "2024-04-05T13:00:00Z"))
	require.Equal(t, []interval.Range{rng(t, "2024-03-01T00:00:00Z", "2024-03-03T00:00:00Z")}, res.Missing.Ranges())
	require.Equal(t, 2, res.Buckets)
}

func TestMissingInvalidSpecIsEmpty(t *testing.T) {
	t.Parallel()
	exec := ts(t, "2024-03-05T13:00:00Z")
	require.Equal(t, Result{}, Spec{}.Missing(interval.Set{}, exec))
	require.Equal(t, Result{}, Spec{Start: exec.AddDate(0, 0, -3), Cron: mustCron(t, "@daily")}.Missing(interval.Set{}, exec))
}

func TestBatches(t *testing.T) {
	t.Parallel()
	work := interval.NewSet(
		rng(t, "2024-03-01T00:00:00Z", "2024-03-08T00:00:00Z"),
		rng(t, "2024-03-10T12:00:00Z", "2024-03-12T00:00:00Z"),
	)
	got := slices.Collect(Batches(work, interval.Day, 3))
	require.Equal(t, []interval.Range{
		rng(t, "2024-03-01T00:00:00Z", "2024-03-04T00:00:00Z"),
		rng(t, "2024-03-04T00:00:00Z", "2024-03-07T00:00:00Z"),
		rng(t, "2024-03-07T00:00:00Z", "2024-03-08T00:00:00Z"),
		rng(t, "2024-03-10T12:00:00Z", "2024-03-12T00:00:00Z"),
	}, got)
	require.Equal(t, len(got), BatchCount(work, interval.Day, 3))

	got = slices.Collect(Batches(work, interval.Day, 1))
	require.Len(t, got, 9)
	require.Equal(t, rng(t, "2024-03-10T12:00:00Z", "2024-03-11T00:00:00Z"), got[7], "partial first bucket is its own batch")
	require.Equal(t, 9, BatchCount(work, interval.Day, 1))

	require.Equal(t, work.Ranges(), slices.Collect(Batches(work, interval.Day, 0)), "0 = one batch per range")
	require.Equal(t, 2, BatchCount(work, interval.Day, 0))
	require.Empty(t, slices.Collect(Batches(interval.Set{}, interval.Day, 2)))

	// Stopping early stops the iteration.
	n := 0
	for range Batches(work, interval.Day, 1) {
		n++
		if n == 2 {
			break
		}
	}
	require.Equal(t, 2, n)
}

func TestAdvances(t *testing.T) {
	t.Parallel()
	start := "2024-01-01T00:00:00Z"
	cases := []struct {
		name     string
		cron     string
		unit     interval.Unit
		partials bool
		end      string
		from, to string
		want     int
	}{
		{"hourly one hour", "@hourly", interval.Hour, false, "", "2024-03-05T10:00:00Z", "2024-03-05T11:00:00Z", 1},
		{"hourly two hours", "@hourly", interval.Hour, false, "", "2024-03-05T10:00:00Z", "2024-03-05T12:00:00Z", 2},
		{"no move", "@hourly", interval.Hour, false, "", "2024-03-05T10:00:00Z", "2024-03-05T10:00:00Z", 0},
		{"backwards", "@hourly", interval.Hour, false, "", "2024-03-05T12:00:00Z", "2024-03-05T10:00:00Z", 0},
		{"hourly, frontier moved mid-hour by a manual run", "@hourly", interval.Hour, false, "", "2024-03-05T10:00:00Z", "2024-03-05T11:30:00Z", 2},
		{"every two hours on an hour unit is one advance, not two buckets", "0 */2 * * *", interval.Hour, false, "", "2024-03-05T10:00:00Z", "2024-03-05T12:00:00Z", 1},
		{"every two hours, four hours", "0 */2 * * *", interval.Hour, false, "", "2024-03-05T10:00:00Z", "2024-03-05T14:00:00Z", 2},
		{"every two hours from an odd frontier", "0 */2 * * *", interval.Hour, false, "", "2024-03-05T11:00:00Z", "2024-03-05T12:00:00Z", 1},
		{"every two hours to an odd frontier", "0 */2 * * *", interval.Hour, false, "", "2024-03-05T10:00:00Z", "2024-03-05T13:00:00Z", 2},
		{"daily noon, one day", "0 12 * * *", interval.Day, false, "", "2024-03-04T00:00:00Z", "2024-03-05T00:00:00Z", 1},
		{"daily noon, three days", "0 12 * * *", interval.Day, false, "", "2024-03-04T00:00:00Z", "2024-03-07T00:00:00Z", 3},
		{"daily noon with partials: up to noon", "0 12 * * *", interval.Day, true, "", "2024-03-04T00:00:00Z", "2024-03-04T12:00:00Z", 1},
		{"daily noon with partials: noon to midnight is partial", "0 12 * * *", interval.Day, true, "", "2024-03-04T12:00:00Z", "2024-03-05T00:00:00Z", 1},
		{"daily noon with partials: two firings", "0 12 * * *", interval.Day, true, "", "2024-03-04T00:00:00Z", "2024-03-05T12:00:00Z", 2},
		{"daily noon with partials: past a firing and a bit", "0 12 * * *", interval.Day, true, "", "2024-03-04T00:00:00Z", "2024-03-05T13:00:00Z", 3},
		{"five minutes on five_minute", "*/5 * * * *", interval.FiveMinute, false, "", "2024-03-05T10:00:00Z", "2024-03-05T11:00:00Z", 12},
		{"five-minute cron on an hour unit", "*/5 * * * *", interval.Hour, false, "", "2024-03-05T10:00:00Z", "2024-03-05T12:00:00Z", 2},
		{"five-minute cron on an hour unit with partials", "*/5 * * * *", interval.Hour, true, "", "2024-03-05T10:00:00Z", "2024-03-05T11:00:00Z", 12},
		{"five minutes over a leap year", "*/5 * * * *", interval.FiveMinute, false, "", "2024-01-01T00:00:00Z", "2025-01-01T00:00:00Z", 366 * 288},
		{"monthly over a leap year", "@monthly", interval.Month, false, "", "2024-01-01T00:00:00Z", "2025-01-01T00:00:00Z", 12},
		{"weekly cron on a day unit", "@weekly", interval.Day, false, "", "2024-03-03T00:00:00Z", "2024-03-17T00:00:00Z", 2},
		{"from before start counts from start", "@daily", interval.Day, false, "", "0001-01-01T00:00:00Z", "2024-01-04T00:00:00Z", 3},
		{"end stops advances", "@daily", interval.Day, false, "2024-01-06T00:00:00Z", "2024-01-04T00:00:00Z", "2024-01-06T00:00:00Z", 2},
		{"frontier beyond end is one partial advance", "@daily", interval.Day, false, "2024-01-06T00:00:00Z", "2024-01-04T00:00:00Z", "2024-01-08T00:00:00Z", 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			for _, lookback := range []int{0, 1, 7} {
				s := Spec{Start: ts(t, start), Cron: mustCron(t, c.cron), Unit: c.unit, AllowPartials: c.partials, Lookback: lookback}
				if c.end != "" {
					s.End = ts(t, c.end)
				}
				require.Equal(t, c.want, s.Advances(ts(t, c.from), ts(t, c.to)), "lookback %d", lookback)
			}
		})
	}
	require.Equal(t, 0, Spec{Unit: interval.Day}.Advances(time.Time{}, time.Now()), "zero cron")
}

func TestAdvancesMatchesSchedulerRuns(t *testing.T) {
	t.Parallel()
	// Scenario: a scheduler runs at every cron firing and moves the frontier
	// to Bound(firing) when that is further. Advances between the first and
	// last frontier equals the number of runs that moved it.
	for _, expr := range []string{"0 12 * * *", "0 */2 * * *", "*/5 * * * *", "@weekly", "0 0 1,15 * *"} {
		for _, unit := range []interval.Unit{interval.FiveMinute, interval.Hour, interval.Day} {
			s := Spec{Start: ts(t, "2024-01-01T00:00:00Z"), Cron: mustCron(t, expr), Unit: unit, Lookback: 2}
			first := s.Bound(ts(t, "2024-02-27T00:00:00Z"))
			frontier, moves := first, 0
			for at := s.Cron.Next(ts(t, "2024-02-27T00:00:00Z")); at.Before(ts(t, "2024-03-04T00:00:00Z")); at = s.Cron.Next(at) {
				if b := s.Bound(at); b.After(frontier) {
					frontier, moves = b, moves+1
				}
			}
			require.Equal(t, moves, s.Advances(first, frontier), "%s on %s", expr, unit)
		}
	}
}

// Not parallel: testing.AllocsPerRun refuses to run in a parallel test.
func TestMissingAllocationsDoNotGrowWithHistory(t *testing.T) {
	// Scenario: two five-minute models with the same 50 gaps, one with a
	// year of history and one with eight; Missing must allocate the same
	// for both, because it never expands buckets.
	exec := ts(t, "2024-03-05T10:07:00Z")
	allocs := func(years int) float64 {
		s := Spec{Start: exec.AddDate(-years, 0, 0), Cron: mustCron(t, "*/5 * * * *"), Unit: interval.FiveMinute, Lookback: 3}
		window := interval.NewRange(s.Unit.Floor(s.Start), s.Bound(exec))
		covered := interval.NewSet(window)
		for i := range 50 {
			hole := s.Unit.Add(window.Start, (i+1)*s.Unit.Buckets(window)/51)
			covered = covered.SubtractRange(interval.NewRange(hole, s.Unit.Add(hole, 1)))
		}
		res := s.Missing(covered, exec)
		require.Equal(t, 50, res.Buckets)
		require.Equal(t, 200, res.WorkBuckets)
		return testing.AllocsPerRun(20, func() { _ = s.Missing(covered, exec) })
	}
	short, long := allocs(1), allocs(8)
	require.Equal(t, short, long)
	require.LessOrEqual(t, long, 2.0)
}
