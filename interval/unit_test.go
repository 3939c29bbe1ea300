package interval

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// ts parses an RFC 3339 timestamp for tests.
func ts(t testing.TB, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339Nano, s)
	require.NoError(t, err)
	return v.UTC()
}

func TestParseUnit(t *testing.T) {
	t.Parallel()
	for _, u := range Units() {
		got, err := ParseUnit(string(u))
		require.NoError(t, err)
		require.Equal(t, u, got)
	}
	got, err := ParseUnit("  Hour ")
	require.NoError(t, err)
	require.Equal(t, Hour, got)

	for _, bad := range []string{"", "hours", "minute", "week", "five minute"} {
		_, err := ParseUnit(bad)
		require.Error(t, err, bad)
		require.True(t, errors.Is(err, ErrUnknownUnit))
		require.Contains(t, err.Error(), "five_minute, quarter_hour, half_hour, hour, day, month, year")
	}
}

func TestUnitOrdering(t *testing.T) {
	t.Parallel()
	us := Units()
	require.Equal(t, []Unit{FiveMinute, QuarterHour, HalfHour, Hour, Day, Month, Year}, us)
	us[0] = "mutated"
	require.Equal(t, FiveMinute, Units()[0], "Units returns a copy")

	want := []time.Duration{5 * time.Minute, 15 * time.Minute, 30 * time.Minute, time.Hour, 24 * time.Hour, 28 * 24 * time.Hour, 365 * 24 * time.Hour}
	for i, u := range Units() {
		require.True(t, u.Valid())
		require.Equal(t, want[i], u.Nominal(), u)
		for j, v := range Units() {
			require.Equal(t, i < j, u.Less(v), "%s < %s", u, v)
			require.Equal(t, i < j, u.Nominal() < v.Nominal())
		}
	}
	require.False(t, Unit("").Valid())
	require.False(t, Unit("week").Valid())
	require.Equal(t, time.Duration(0), Unit("week").Nominal())
}

func TestUnitFloorCeilAdd(t *testing.T) {
	t.Parallel()
	cases := []struct {
		unit             Unit
		in               string
		floor, ceil      string
		add              int
		added            string // Add(in, add)
		addFloor, addNeg string // Add(floor, add), Add(floor, -add)
	}{
		{FiveMinute, "2024-03-10T10:07:30Z", "2024-03-10T10:05:00Z", "2024-03-10T10:10:00Z", 3, "2024-03-10T10:22:30Z", "2024-03-10T10:20:00Z", "2024-03-10T09:50:00Z"},
		{FiveMinute, "2024-03-10T10:05:00Z", "2024-03-10T10:05:00Z", "2024-03-10T10:05:00Z", 12, "2024-03-10T11:05:00Z", "2024-03-10T11:05:00Z", "2024-03-10T09:05:00Z"},
		{QuarterHour, "2024-12-31T23:59:59.5Z", "2024-12-31T23:45:00Z", "2025-01-01T00:00:00Z", 1, "2025-01-01T00:14:59.5Z", "2025-01-01T00:00:00Z", "2024-12-31T23:30:00Z"},
		{HalfHour, "2024-06-01T00:29:00Z", "2024-06-01T00:00:00Z", "2024-06-01T00:30:00Z", 2, "2024-06-01T01:29:00Z", "2024-06-01T01:00:00Z", "2024-05-31T23:00:00Z"},
		{Hour, "2024-02-29T23:00:01Z", "2024-02-29T23:00:00Z", "2024-03-01T00:00:00Z", 1, "2024-03-01T00:00:01Z", "2024-03-01T00:00:00Z", "2024-02-29T22:00:00Z"},
		{Day, "2024-02-28T12:00:00Z", "2024-02-28T00:00:00Z", "2024-02-29T00:00:00Z", 2, "2024-03-01T12:00:00Z", "2024-03-01T00:00:00Z", "2024-02-26T00:00:00Z"},
		{Day, "2023-12-31T00:00:00Z", "2023-12-31T00:00:00Z", "2023-12-31T00:00:00Z", 1, "2024-01-01T00:00:00Z", "2024-01-01T00:00:00Z", "2023-12-30T00:00:00Z"},
		{Day, "1969-12-31T23:59:59Z", "1969-12-31T00:00:00Z", "1970-01-01T00:00:00Z", 1, "1970-01-01T23:59:59Z", "1970-01-01T00:00:00Z", "1969-12-30T00:00:00Z"},
		{Month, "2024-12-15T08:00:00Z", "2024-12-01T00:00:00Z", "2025-01-01T00:00:00Z", 1, "2025-01-15T08:00:00Z", "2025-01-01T00:00:00Z", "2024-11-01T00:00:00Z"},
		{Month, "2024-01-31T10:00:00Z", "2024-01-01T00:00:00Z", "2024-02-01T00:00:00Z", 1, "2024-02-29T10:00:00Z", "2024-02-01T00:00:00Z", "2023-12-01T00:00:00Z"},
		{Month, "2023-01-31T10:00:00Z", "2023-01-01T00:00:00Z", "2023-02-01T00:00:00Z", 1, "2023-02-28T10:00:00Z", "2023-02-01T00:00:00Z", "2022-12-01T00:00:00Z"},
		{Month, "2024-03-01T00:00:00Z", "2024-03-01T00:00:00Z", "2024-03-01T00:00:00Z", -3, "2023-12-01T00:00:00Z", "2023-12-01T00:00:00Z", "2024-06-01T00:00:00Z"},
		{Month, "2024-01-01T00:00:00Z", "2024-01-01T00:00:00Z", "2024-01-01T00:00:00Z", 25, "2026-02-01T00:00:00Z", "2026-02-01T00:00:00Z", "2021-12-01T00:00:00Z"},
		{Year, "2024-02-29T06:00:00Z", "2024-01-01T00:00:00Z", "2025-01-01T00:00:00Z", 1, "2025-02-28T06:00:00Z", "2025-01-01T00:00:00Z", "2023-01-01T00:00:00Z"},
		{Year, "2024-02-29T06:00:00Z", "2024-01-01T00:00:00Z", "2025-01-01T00:00:00Z", 4, "2028-02-29T06:00:00Z", "2028-01-01T00:00:00Z", "2020-01-01T00:00:00Z"},
		{Year, "2000-01-01T00:00:00Z", "2000-01-01T00:00:00Z", "2000-01-01T00:00:00Z", 100, "2100-01-01T00:00:00Z", "2100-01-01T00:00:00Z", "1900-01-01T00:00:00Z"},
	}
	for _, c := range cases {
		t.Run(string(c.unit)+"/"+c.in, func(t *testing.T) {
			t.Parallel()
			in := ts(t, c.in)
			floor := c.unit.Floor(in)
			require.Equal(t, ts(t, c.floor), floor)
			require.Equal(t, ts(t, c.ceil), c.unit.Ceil(in))
			require.Equal(t, ts(t, c.added), c.unit.Add(in, c.add))
			require.Equal(t, ts(t, c.addFloor), c.unit.Add(floor, c.add))
			require.Equal(t, ts(t, c.addNeg), c.unit.Add(floor, -c.add))
			require.Equal(t, in.Equal(floor), c.unit.Aligned(in))
		})
	}
}

func TestUnitConvertsToUTC(t *testing.T) {
	t.Parallel()
	tokyo := time.FixedZone("JST", 9*3600)
	in := time.Date(2024, 1, 1, 5, 0, 0, 0, tokyo) // 2023-12-31T20:00Z
	require.Equal(t, ts(t, "2023-12-31T00:00:00Z"), Day.Floor(in))
	require.Equal(t, ts(t, "2023-12-01T00:00:00Z"), Month.Floor(in))
	require.Equal(t, time.UTC, Day.Add(in, 1).Location())
}

func TestUnitInvalidIsIdentity(t *testing.T) {
	t.Parallel()
	in := ts(t, "2024-01-01T10:07:00Z")
	var u Unit
	require.Equal(t, in, u.Floor(in))
	require.Equal(t, in, u.Ceil(in))
	require.Equal(t, in, u.Add(in, 5))
	require.Equal(t, 0, u.Buckets(NewRange(in, in.Add(time.Hour))))
}

func TestUnitBuckets(t *testing.T) {
	t.Parallel()
	cases := []struct {
		unit       Unit
		start, end string
		want       int
	}{
		{FiveMinute, "2024-01-01T00:00:00Z", "2024-01-01T00:00:00Z", 0},
		{FiveMinute, "2024-01-01T00:10:00Z", "2024-01-01T00:00:00Z", 0},
		{FiveMinute, "2024-01-01T00:00:00Z", "2024-01-01T01:00:00Z", 12},
		{FiveMinute, "2024-01-01T00:01:00Z", "2024-01-01T00:02:00Z", 1},
		{FiveMinute, "2024-01-01T00:04:00Z", "2024-01-01T00:06:00Z", 2},
		{FiveMinute, "2022-01-01T00:00:00Z", "2024-01-01T00:00:00Z", 730 * 288},
		{QuarterHour, "2024-01-01T00:00:00Z", "2024-01-02T00:00:00Z", 96},
		{HalfHour, "2024-01-01T00:00:00Z", "2024-01-01T00:30:00.000000001Z", 2},
		{Hour, "2024-03-31T00:00:00Z", "2024-04-01T00:00:00Z", 24},
		{Day, "2024-02-01T00:00:00Z", "2024-03-01T00:00:00Z", 29},
		{Day, "2023-02-01T00:00:00Z", "2023-03-01T00:00:00Z", 28},
		{Day, "2024-01-01T00:00:00Z", "2025-01-01T00:00:00Z", 366},
		{Day, "2023-12-31T23:00:00Z", "2024-01-01T01:00:00Z", 2},
		{Day, "1969-12-31T12:00:00Z", "1970-01-01T12:00:00Z", 2},
		{Month, "2024-01-01T00:00:00Z", "2025-01-01T00:00:00Z", 12},
		{Month, "2024-01-31T00:00:00Z", "2024-02-01T00:00:00Z", 1},
		{Month, "2024-11-15T00:00:00Z", "2025-02-01T00:00:00Z", 3},
		{Month, "2024-11-15T00:00:00Z", "2025-02-02T00:00:00Z", 4},
		{Month, "2024-12-01T00:00:00Z", "2025-01-01T00:00:00Z", 1},
		{Year, "2024-01-01T00:00:00Z", "2024-01-01T00:00:01Z", 1},
		{Year, "2023-12-31T00:00:00Z", "2024-01-01T00:00:01Z", 2},
		{Year, "2000-01-01T00:00:00Z", "2100-01-01T00:00:00Z", 100},
	}
	for _, c := range cases {
		r := NewRange(ts(t, c.start), ts(t, c.end))
		require.Equal(t, c.want, c.unit.Buckets(r), "%s %v", c.unit, r)
	}
}

// genTime draws an instant between 1960 and 2110 with second resolution and,
// sometimes, a fractional second.
func genTime(t *rapid.T, label string) time.Time {
	sec := rapid.Int64Range(-315619200, 4417977600).Draw(t, label)
	nsec := rapid.SampledFrom([]int64{0, 0, 0, 1, 500_000_000, 999_999_999}).Draw(t, label+"_ns")
	return time.Unix(sec, nsec).UTC()
}

func TestUnitPropertiesRapid(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		u := rapid.SampledFrom(Units()).Draw(rt, "unit")
		tm := genTime(rt, "t")
		n := rapid.IntRange(-500, 500).Draw(rt, "n")

		f := u.Floor(tm)
		next := u.Add(f, 1)
		require.False(rt, f.After(tm), "floor <= t")
		require.True(rt, tm.Before(next), "t < next bucket start")
		require.True(rt, u.Aligned(f))
		require.Equal(rt, f, u.Floor(f), "floor is idempotent")
		c := u.Ceil(tm)
		require.False(rt, c.Before(tm))
		require.True(rt, u.Aligned(c))
		require.Equal(rt, 1, u.Buckets(NewRange(f, next)), "one bucket")
		if !tm.Equal(f) {
			require.Equal(rt, next, c)
		}

		// Add keeps the bucket: Floor(Add(t, n)) == Add(Floor(t), n), and
		// Add on aligned instants is invertible.
		require.Equal(rt, u.Add(f, n), u.Floor(u.Add(tm, n)))
		require.Equal(rt, f, u.Add(u.Add(f, n), -n))
		if n >= 0 {
			require.Equal(rt, n, u.Buckets(NewRange(f, u.Add(f, n))))
		}
	})
}

// TestUnitBucketsMatchesWalk compares the arithmetic bucket count with a walk
// over bucket starts for short random ranges.
func TestUnitBucketsMatchesWalk(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		u := rapid.SampledFrom(Units()).Draw(rt, "unit")
		start := genTime(rt, "start")
		span := rapid.Int64Range(0, 40).Draw(rt, "span")
		extra := rapid.Int64Range(-3600, 3600).Draw(rt, "extra")
		end := u.Add(start, int(span)).Add(time.Duration(extra) * time.Second)
		r := NewRange(start, end)

		walk := 0
		for b := u.Floor(start); b.Before(end); b = u.Add(b, 1) {
			if u.Add(b, 1).After(start) && start.Before(end) { // [b, next) overlaps r
				walk++
			}
		}
		require.Equal(rt, walk, u.Buckets(r), "%s %v", u, r)
	})
}
