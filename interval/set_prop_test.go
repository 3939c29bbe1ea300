package interval

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// The properties below compare Set against a naive model: a bool per slot of
// a small 5-minute grid. Every generated boundary lies on the grid, so a slot
// is in a Set exactly when the slot's start instant is.

const (
	gridSlots = 48
	gridStep  = 5 * time.Minute
)

var gridOrigin = time.Date(2024, 2, 28, 22, 0, 0, 0, time.UTC)

type model [gridSlots]bool

func slotTime(i int) time.Time { return gridOrigin.Add(time.Duration(i) * gridStep) }

func slotRange(a, b int) Range { return NewRange(slotTime(a), slotTime(b)) }

// genRange draws a grid range, possibly empty or reversed.
func genRange(t *rapid.T, label string) (Range, int, int) {
	a := rapid.IntRange(0, gridSlots).Draw(t, label+"_a")
	b := rapid.IntRange(0, gridSlots).Draw(t, label+"_b")
	return slotRange(a, b), a, b
}

// genSet draws a Set from a few random grid ranges and returns its model.
func genSet(t *rapid.T, label string) (Set, model) {
	n := rapid.IntRange(0, 6).Draw(t, label+"_n")
	var m model
	rs := make([]Range, 0, n)
	for i := range n {
		r, a, b := genRange(t, label+"_r"+string(rune('0'+i)))
		rs = append(rs, r)
		for k := a; k < b; k++ {
			m[k] = true
		}
	}
	s := NewSet(rs...)
	require.NoError(t, s.check())
	return s, m
}

// fromModel builds the canonical ranges of a model by walking its slots.
func fromModel(m model) []Range {
	var out []Range
	for i := 0; i < gridSlots; {
		if !m[i] {
			i++
			continue
		}
		j := i
		for j < gridSlots && m[j] {
			j++
		}
		out = append(out, slotRange(i, j))
		i = j
	}
	return out
}

// requireMatches checks the Set invariant and that s holds exactly m.
func requireMatches(t *rapid.T, s Set, m model, op string) {
	require.NoError(t, s.check(), op)
	require.Equal(t, fromModel(m), s.Ranges(), op)
}

func TestSetAgreesWithBucketModel(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		s, ms := genSet(rt, "s")
		o, mo := genSet(rt, "o")
		w, wa, wb := genRange(rt, "within")
		requireMatches(rt, s, ms, "NewSet")

		var union, diff, inter, missing, interW, diffW model
		for i := range gridSlots {
			in := i >= wa && i < wb
			union[i] = ms[i] || mo[i]
			diff[i] = ms[i] && !mo[i]
			inter[i] = ms[i] && mo[i]
			missing[i] = in && !ms[i]
			interW[i] = in && ms[i]
			diffW[i] = !in && ms[i]
		}
		requireMatches(rt, s.Union(o), union, "Union")
		requireMatches(rt, s.Subtract(o), diff, "Subtract")
		requireMatches(rt, s.Intersect(o), inter, "Intersect")
		requireMatches(rt, s.Missing(w), missing, "Missing")
		requireMatches(rt, s.IntersectRange(w), interW, "IntersectRange")
		requireMatches(rt, s.SubtractRange(w), diffW, "SubtractRange")
		requireMatches(rt, s.Add(w), func() model {
			m := ms
			for i := wa; i < wb; i++ {
				m[i] = true
			}
			return m
		}(), "Add")
		require.Equal(rt, s.Union(o).Ranges(), o.Union(s).Ranges(), "Union commutes")
		require.True(rt, s.Intersect(o).Equal(o.Intersect(s)), "Intersect commutes")
		require.Equal(rt, fromModel(ms) == nil && fromModel(mo) == nil, s.IsEmpty() && o.IsEmpty())
		require.Equal(rt, slicesEqual(fromModel(ms), fromModel(mo)), s.Equal(o), "Equal")

		// Covers: every slot of within is in the model.
		covers := true
		for i := wa; i < wb; i++ {
			covers = covers && ms[i]
		}
		require.Equal(rt, covers, s.Covers(w), "Covers %v", w)

		// FirstGap: the first missing slot of within and the run after it.
		gap, ok := s.FirstGap(w)
		first := -1
		for i := wa; i < wb; i++ {
			if !ms[i] {
				first = i
				break
			}
		}
		require.Equal(rt, first >= 0, ok, "FirstGap found")
		if ok {
			end := first
			for end < wb && !ms[end] {
				end++
			}
			require.Equal(rt, slotRange(first, end), gap, "FirstGap")
		}

		// TrailingSuffix: the slots after the last covered slot of within.
		suffix, ok := s.TrailingSuffix(w)
		wantOK := wa < wb && !ms[wb-1]
		require.Equal(rt, wantOK, ok, "TrailingSuffix found")
		x := wa
		if ok {
			for i := wb - 1; i >= wa; i-- {
				if ms[i] {
					x = i + 1
					break
				}
			}
			require.Equal(rt, slotRange(x, wb), suffix, "TrailingSuffix")
		}

		// OnlyTrailingGap: every missing slot of within is after every
		// covered one.
		onlyTrailing := true
		seenMissing := false
		for i := wa; i < wb; i++ {
			if !ms[i] {
				seenMissing = true
			} else if seenMissing {
				onlyTrailing = false
			}
		}
		gap2, ok2 := s.OnlyTrailingGap(w)
		require.Equal(rt, onlyTrailing, ok2, "OnlyTrailingGap ok")
		if ok2 && wantOK {
			require.Equal(rt, suffix, gap2)
		}
		if ok2 && !wantOK {
			require.True(rt, gap2.Empty())
		}
	})
}

func slicesEqual(a, b []Range) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !a[i].Equal(b[i]) {
			return false
		}
	}
	return true
}

// TestSetOperationsDoNotMutate checks immutability over random inputs.
func TestSetOperationsDoNotMutate(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		s, _ := genSet(rt, "s")
		o, _ := genSet(rt, "o")
		sb, ob := s.Ranges(), o.Ranges()
		_ = s.Union(o)
		_ = s.Subtract(o)
		_ = s.Intersect(o)
		_ = o.Union(s)
		require.Equal(rt, sb, s.Ranges())
		require.Equal(rt, ob, o.Ranges())
	})
}

// TestExtendBackAgreesWithBucketModel widens every run of a model slot by
// slot and compares with ExtendBack.
func TestExtendBackAgreesWithBucketModel(t *testing.T) {
	t.Parallel()
	const pad = 60 // slots before the grid that widening can reach
	rapid.Check(t, func(rt *rapid.T) {
		s, ms := genSet(rt, "s")
		u := rapid.SampledFrom([]Unit{FiveMinute, QuarterHour, Hour}).Draw(rt, "unit")
		n := rapid.IntRange(-1, 3).Draw(rt, "n")
		floorSlot := rapid.IntRange(-pad, gridSlots).Draw(rt, "notBefore")

		var want [pad + gridSlots]bool
		for _, r := range fromModel(ms) {
			a := int(r.Start.Sub(gridOrigin) / gridStep)
			b := int(r.End.Sub(gridOrigin) / gridStep)
			start := int(u.Add(u.Floor(r.Start), -max(n, 0)).Sub(gridOrigin) / gridStep)
			if a >= floorSlot {
				start = max(start, floorSlot)
			} else {
				start = a
			}
			for k := start; k < b; k++ {
				want[k+pad] = true
			}
		}
		var wantRanges []Range
		for i := 0; i < len(want); {
			if !want[i] {
				i++
				continue
			}
			j := i
			for j < len(want) && want[j] {
				j++
			}
			wantRanges = append(wantRanges, slotRange(i-pad, j-pad))
			i = j
		}
		got := s.ExtendBack(u, n, slotTime(floorSlot))
		require.NoError(rt, got.check())
		require.Equal(rt, wantRanges, got.Ranges())
	})
}
