package interval

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/internal/invariants"
)

var day0 = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// d is [day0+a days, day0+b days).
func d(a, b int) Range {
	return NewRange(day0.AddDate(0, 0, a), day0.AddDate(0, 0, b))
}

func requireValid(t testing.TB, s Set) {
	t.Helper()
	require.NoError(t, s.check())
}

func TestRangeBasics(t *testing.T) {
	t.Parallel()
	r := d(0, 2)
	require.False(t, r.Empty())
	require.True(t, d(2, 2).Empty())
	require.True(t, d(3, 2).Empty())
	require.True(t, r.Contains(day0))
	require.False(t, r.Contains(day0.AddDate(0, 0, 2)), "end is exclusive")
	require.Equal(t, 48*time.Hour, r.Duration())
	require.Equal(t, time.Duration(0), d(3, 2).Duration())
	require.Equal(t, "[2024-01-01T00:00:00Z, 2024-01-03T00:00:00Z)", r.String())
	require.True(t, d(3, 2).Equal(d(5, 5)))
	require.Equal(t, d(1, 2), r.Intersect(d(1, 5)))
	require.True(t, r.Intersect(d(2, 5)).Empty())

	tokyo := time.FixedZone("JST", 9*3600)
	local := NewRange(time.Date(2024, 1, 1, 9, 0, 0, 0, tokyo), time.Date(2024, 1, 2, 9, 0, 0, 0, tokyo))
	require.Equal(t, d(0, 1), local)
	require.Equal(t, time.UTC, local.Start.Location())
}

func TestNewSetNormalises(t *testing.T) {
	t.Parallel()
	s := NewSet(d(5, 6), d(0, 1), d(1, 2), d(3, 3), d(4, 5), d(0, 1), d(8, 7), d(10, 12), d(11, 13))
	requireValid(t, s)
	require.Equal(t, []Range{d(0, 2), d(4, 6), d(10, 13)}, s.Ranges())
	require.Equal(t, 3, s.Len())
	require.False(t, s.IsEmpty())
	require.Equal(t, day0.AddDate(0, 0, 13), s.Frontier())
	require.Equal(t, d(0, 13), s.Span())
	require.Equal(t, "{[2024-01-01T00:00:00Z, 2024-01-03T00:00:00Z) [2024-01-05T00:00:00Z, 2024-01-07T00:00:00Z) [2024-01-11T00:00:00Z, 2024-01-14T00:00:00Z)}", s.String())
	require.Equal(t, 7, s.Buckets(Day))

	var zero Set
	require.True(t, zero.IsEmpty())
	require.True(t, zero.Frontier().IsZero())
	require.True(t, NewSet(d(1, 1)).Equal(zero))
	require.Nil(t, zero.Ranges())
	require.Equal(t, "{}", zero.String())
}

func TestSetIsImmutable(t *testing.T) {
	t.Parallel()
	in := []Range{d(0, 2), d(4, 6)}
	s := NewSet(in...)
	in[0] = d(50, 60)
	require.Equal(t, []Range{d(0, 2), d(4, 6)}, s.Ranges(), "NewSet copies its input")

	out := s.Ranges()
	out[0] = d(50, 60)
	require.Equal(t, []Range{d(0, 2), d(4, 6)}, s.Ranges(), "Ranges returns a copy")

	before := s.Ranges()
	_ = s.Add(d(2, 4))
	_ = s.Union(NewSet(d(1, 5)))
	_ = s.Subtract(NewSet(d(1, 5)))
	_ = s.Intersect(NewSet(d(1, 5)))
	_ = s.Missing(d(0, 10))
	require.Equal(t, before, s.Ranges())
}

func TestSetOperationsExamples(t *testing.T) {
	t.Parallel()
	s := NewSet(d(0, 2), d(4, 6), d(10, 13))

	require.Equal(t, []Range{d(0, 6), d(10, 13)}, s.Add(d(2, 4)).Ranges())
	require.Equal(t, []Range{d(0, 13)}, s.Union(NewSet(d(1, 11))).Ranges())
	require.Equal(t, []Range{d(0, 1), d(5, 6), d(10, 11), d(12, 13)}, s.Subtract(NewSet(d(1, 5), d(11, 12))).Ranges())
	require.Equal(t, []Range{d(0, 2), d(4, 5)}, s.SubtractRange(d(5, 20)).Ranges())
	require.Equal(t, []Range{d(1, 2), d(4, 6), d(10, 11)}, s.IntersectRange(d(1, 11)).Ranges())
	require.Equal(t, []Range{d(1, 2), d(12, 13)}, s.Intersect(NewSet(d(1, 3), d(12, 20))).Ranges())
	require.Equal(t, []Range{d(2, 4), d(6, 10), d(13, 15)}, s.Missing(d(1, 15)).Ranges())

	require.True(t, s.Covers(d(4, 6)))
	require.True(t, s.Covers(d(5, 5)), "empty range is covered")
	require.False(t, s.Covers(d(1, 3)))
	require.True(t, s.Contains(day0))
	require.False(t, s.Contains(day0.AddDate(0, 0, 2)))

	g, ok := s.FirstGap(d(0, 20))
	require.True(t, ok)
	require.Equal(t, d(2, 4), g)
	g, ok = s.FirstGap(d(5, 11))
	require.True(t, ok)
	require.Equal(t, d(6, 10), g)
	_, ok = s.FirstGap(d(10, 13))
	require.False(t, ok)

	suf, ok := s.TrailingSuffix(d(0, 20))
	require.True(t, ok)
	require.Equal(t, d(13, 20), suf)
	suf, ok = s.TrailingSuffix(d(7, 9))
	require.True(t, ok)
	require.Equal(t, d(7, 9), suf, "nothing covered: the whole range is the suffix")
	_, ok = s.TrailingSuffix(d(3, 13))
	require.False(t, ok)
}

func TestOnlyTrailingGap(t *testing.T) {
	t.Parallel()
	// Scenario: a plan was built when the incumbent covered [0, 10); the
	// scheduler has since extended it. A trailing-gap policy may accept the
	// tail the new snapshot lacks, but never a hole in the middle.
	backfilled := NewSet(d(0, 10))

	gap, ok := backfilled.OnlyTrailingGap(d(0, 12))
	require.True(t, ok)
	require.Equal(t, d(10, 12), gap)

	gap, ok = backfilled.OnlyTrailingGap(d(0, 10))
	require.True(t, ok, "nothing missing")
	require.True(t, gap.Empty())

	holed := backfilled.SubtractRange(d(3, 4))
	_, ok = holed.OnlyTrailingGap(d(0, 12))
	require.False(t, ok, "historical hole")
	_, ok = holed.OnlyTrailingGap(d(0, 10))
	require.False(t, ok, "internal hole with the end covered")
	gap, ok = holed.OnlyTrailingGap(d(4, 12))
	require.True(t, ok, "the hole is outside the range asked about")
	require.Equal(t, d(10, 12), gap)

	gap, ok = Set{}.OnlyTrailingGap(d(0, 3))
	require.True(t, ok, "all missing is one suffix")
	require.Equal(t, d(0, 3), gap)
}

func TestSetJSON(t *testing.T) {
	t.Parallel()
	s := NewSet(d(0, 2), d(4, 6))
	b, err := json.Marshal(s)
	require.NoError(t, err)
	require.JSONEq(t, `[{"start":"2024-01-01T00:00:00Z","end":"2024-01-03T00:00:00Z"},{"start":"2024-01-05T00:00:00Z","end":"2024-01-07T00:00:00Z"}]`, string(b))

	var back Set
	require.NoError(t, json.Unmarshal(b, &back))
	require.True(t, back.Equal(s))

	b, err = json.Marshal(Set{})
	require.NoError(t, err)
	require.Equal(t, "[]", string(b))

	// Unnormalised input is normalised.
	require.NoError(t, json.Unmarshal([]byte(`[{"start":"2024-01-02T00:00:00Z","end":"2024-01-03T00:00:00Z"},{"start":"2024-01-01T00:00:00Z","end":"2024-01-02T00:00:00Z"},{"start":"2024-01-09T00:00:00Z","end":"2024-01-08T00:00:00Z"}]`), &back))
	require.Equal(t, []Range{d(0, 2)}, back.Ranges())

	require.Error(t, json.Unmarshal([]byte(`{"start":1}`), &back))
}

func TestExtendBack(t *testing.T) {
	t.Parallel()
	s := NewSet(d(3, 4), d(6, 7), d(20, 21))
	require.Equal(t, []Range{d(2, 4), d(5, 7), d(19, 21)}, s.ExtendBack(Day, 1, day0).Ranges())
	require.Equal(t, []Range{d(1, 7), d(18, 21)}, s.ExtendBack(Day, 2, day0.AddDate(0, 0, 1)).Ranges(), "clipped and merged")
	require.Equal(t, s.Ranges(), s.ExtendBack(Day, 0, day0).Ranges(), "aligned and no lookback: unchanged")
	require.Equal(t, []Range{d(0, 4), d(5, 7), d(19, 21)}, NewSet(d(0, 4), d(6, 7), d(20, 21)).ExtendBack(Day, 1, day0.AddDate(0, 0, 2)).Ranges(),
		"a range starting before notBefore keeps its start")

	mid := NewSet(NewRange(day0.Add(36*time.Hour), day0.AddDate(0, 0, 3)))
	require.Equal(t, []Range{d(1, 3)}, mid.ExtendBack(Day, 0, day0).Ranges(), "snaps to the bucket start")
	require.Equal(t, []Range{d(0, 3)}, mid.ExtendBack(Month, 0, day0).Ranges())
}

// Every Set an operation returns comes from fromSpans, which checks the Set
// invariant in invariants builds (the race builds of the suite): spans that
// break it, built here as only a bug in this package could, panic naming
// it.
func TestFromSpansChecksTheSetInvariant(t *testing.T) {
	if !invariants.Enabled {
		t.Skip("the checks run in builds tagged invariants or race")
	}
	a, b, c, e := at(day0), at(day0.AddDate(0, 0, 1)), at(day0.AddDate(0, 0, 2)), at(day0.AddDate(0, 0, 3))
	for name, sp := range map[string][]span{
		"empty range":    {{lo: b, hi: b}},
		"reversed range": {{lo: b, hi: a}},
		"unsorted":       {{lo: b, hi: c}, {lo: a, hi: at(day0.Add(time.Hour))}},
		"overlapping":    {{lo: a, hi: c}, {lo: b, hi: e}},
		"adjacent":       {{lo: a, hi: b}, {lo: b, hi: c}},
		"bad nanosecond": {{lo: a, hi: instant{sec: b.sec, nsec: 1e9}}},
	} {
		t.Run(name, func(t *testing.T) {
			require.PanicsWithValue(t, "invariant violated: "+setInvariant+": "+Set{sp: sp}.check().Error(),
				func() { fromSpans(sp) }, name)
		})
	}
	require.PanicsWithValue(t, "invariant violated: "+setInvariant+": an empty set is not the zero Set",
		func() { Set{sp: []span{}}.mustBeValid() })
	require.NotPanics(t, func() { fromSpans([]span{{lo: a, hi: b}, {lo: c, hi: e}}) })
}
