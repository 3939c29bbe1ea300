package interval

import (
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strings"
	"time"

	"github.com/gapless-dev/gapless/internal/invariants"
)

// Set is a set of instants held as sorted, merged ranges.
//
// Invariant, kept by every constructor and operation: the ranges are
// non-empty, sorted, and separated by a non-empty gap (ranges[i].End <
// ranges[i+1].Start), so overlapping and adjacent ranges are always merged
// and two Sets holding the same instants hold the same ranges. Memory is
// proportional to the number of ranges, never to the number of buckets they
// span: each range is stored as two pointer-free (seconds, nanoseconds)
// pairs, and the API converts to and from UTC time.Time at the edges.
//
// Set is an immutable value: operations return a new Set and never modify
// their receiver or arguments, so Sets may be shared between goroutines. The
// zero value is the empty set.
type Set struct {
	sp []span
}

// NewSet returns the set of instants covered by rs: empty ranges are
// dropped, and overlapping or adjacent ranges are merged. It costs O(n) for
// ranges already sorted by Start and O(n log n) otherwise.
func NewSet(rs ...Range) Set {
	tmp := make([]span, 0, len(rs))
	for _, r := range rs {
		if sp := spanOf(r); !sp.empty() {
			tmp = append(tmp, sp)
		}
	}
	return normalise(tmp)
}

// normalise sorts spans (all non-empty) by start if needed and merges them
// in place into a valid Set.
func normalise(tmp []span) Set {
	byStart := func(a, b span) int {
		switch {
		case a.lo.before(b.lo):
			return -1
		case b.lo.before(a.lo):
			return 1
		}
		return 0
	}
	if !slices.IsSortedFunc(tmp, byStart) {
		slices.SortFunc(tmp, byStart)
	}
	out := tmp[:0]
	for _, sp := range tmp {
		out = appendMerged(out, sp)
	}
	return fromSpans(out)
}

// fromSpans wraps already-normalised spans, keeping the zero Set for none.
// Every Set an operation returns is made here, so in invariants builds
// (internal/invariants) this is where the Set invariant is checked: O(n).
func fromSpans(sp []span) Set {
	if len(sp) == 0 {
		return Set{}
	}
	s := Set{sp: slices.Clip(sp)}
	if invariants.Enabled {
		s.mustBeValid()
	}
	return s
}

// appendMerged appends non-empty sp to out, whose last span must start at or
// before sp.lo, merging sp into that last span when they overlap or touch.
// It keeps out normalised.
func appendMerged(out []span, sp span) []span {
	if n := len(out); n > 0 && !sp.lo.after(out[n-1].hi) {
		out[n-1].hi = maxInstant(out[n-1].hi, sp.hi)
		return out
	}
	return append(out, sp)
}

// Ranges returns the set's ranges in order, in UTC (nil when empty). The
// slice is freshly allocated.
func (s Set) Ranges() []Range {
	if len(s.sp) == 0 {
		return nil
	}
	out := make([]Range, len(s.sp))
	for i, sp := range s.sp {
		out[i] = sp.rng()
	}
	return out
}

// All iterates over the set's ranges in order without allocating.
func (s Set) All() iter.Seq[Range] {
	return func(yield func(Range) bool) {
		for _, sp := range s.sp {
			if !yield(sp.rng()) {
				return
			}
		}
	}
}

// Len is the number of ranges (not buckets) in the set.
func (s Set) Len() int { return len(s.sp) }

// IsEmpty reports whether the set holds no instant.
func (s Set) IsEmpty() bool { return len(s.sp) == 0 }

// Frontier is the End of the last range: the instant from which nothing is
// covered. It is the zero time for an empty set.
func (s Set) Frontier() time.Time {
	if len(s.sp) == 0 {
		return time.Time{}
	}
	return s.sp[len(s.sp)-1].hi.time()
}

// Span is [first Start, last End), the smallest range holding the set; it is
// the empty Range{} for an empty set.
func (s Set) Span() Range {
	if len(s.sp) == 0 {
		return Range{}
	}
	return span{lo: s.sp[0].lo, hi: s.sp[len(s.sp)-1].hi}.rng()
}

// Equal reports whether s and o hold the same instants. Because both are
// normalised this is a range-by-range comparison.
func (s Set) Equal(o Set) bool { return slices.Equal(s.sp, o.sp) }

// String formats the set as its ranges separated by spaces, or "{}" if empty.
func (s Set) String() string {
	parts := make([]string, len(s.sp))
	for i, sp := range s.sp {
		parts[i] = sp.rng().String()
	}
	return "{" + strings.Join(parts, " ") + "}"
}

// Buckets is the sum over the set's ranges of u.Buckets(range): the number of
// buckets of u that a job would process if it ran each range separately. A
// bucket that two ranges only partly cover is counted once per range. O(n),
// no allocation.
func (s Set) Buckets(u Unit) int {
	n := 0
	for _, sp := range s.sp {
		n += u.bucketsIn(sp)
	}
	return n
}

// Add returns s with r added. O(n).
func (s Set) Add(r Range) Set { return s.Union(NewSet(r)) }

// Union returns the instants in s or in o, by a linear merge. O(n+m).
func (s Set) Union(o Set) Set {
	if len(o.sp) == 0 {
		return s
	}
	if len(s.sp) == 0 {
		return o
	}
	out := make([]span, 0, len(s.sp)+len(o.sp))
	i, j := 0, 0
	for i < len(s.sp) || j < len(o.sp) {
		var next span
		if j >= len(o.sp) || (i < len(s.sp) && !s.sp[i].lo.after(o.sp[j].lo)) {
			next, i = s.sp[i], i+1
		} else {
			next, j = o.sp[j], j+1
		}
		out = appendMerged(out, next)
	}
	return fromSpans(out)
}

// Subtract returns the instants in s that are not in o, by a linear sweep.
// O(n+m).
func (s Set) Subtract(o Set) Set {
	if len(s.sp) == 0 || len(o.sp) == 0 {
		return s
	}
	out := make([]span, 0, len(s.sp)+len(o.sp))
	j := 0
	for _, a := range s.sp {
		cur := a.lo
		// Spans of o that end at or before cur cannot touch a or any later
		// span of s.
		for j < len(o.sp) && !o.sp[j].hi.after(cur) {
			j++
		}
		k := j
		for k < len(o.sp) && o.sp[k].lo.before(a.hi) {
			if o.sp[k].lo.after(cur) {
				out = appendMerged(out, span{lo: cur, hi: o.sp[k].lo})
			}
			cur = maxInstant(cur, o.sp[k].hi)
			if !cur.before(a.hi) {
				break // o.sp[k] may reach into the next span of s: keep it
			}
			k++
		}
		if cur.before(a.hi) {
			out = appendMerged(out, span{lo: cur, hi: a.hi})
		}
		j = k
	}
	return fromSpans(out)
}

// SubtractRange returns the instants in s that are not in r. O(n).
func (s Set) SubtractRange(r Range) Set { return s.Subtract(NewSet(r)) }

// Intersect returns the instants in both s and o, by a linear sweep. O(n+m).
func (s Set) Intersect(o Set) Set {
	if len(s.sp) == 0 || len(o.sp) == 0 {
		return Set{}
	}
	var out []span
	i, j := 0, 0
	for i < len(s.sp) && j < len(o.sp) {
		a, b := s.sp[i], o.sp[j]
		if x := (span{lo: maxInstant(a.lo, b.lo), hi: minInstant(a.hi, b.hi)}); !x.empty() {
			out = appendMerged(out, x)
		}
		if a.hi.before(b.hi) {
			i++
		} else {
			j++
		}
	}
	return fromSpans(out)
}

// window returns the index range [lo, hi) of the spans that overlap w, which
// must be non-empty. O(log n).
func (s Set) window(w span) (int, int) {
	lo := s.firstEndingAfter(w.lo)
	hi, _ := slices.BinarySearchFunc(s.sp[lo:], w.hi, func(sp span, t instant) int {
		if sp.lo.before(t) {
			return -1
		}
		return 1
	})
	return lo, lo + hi
}

// IntersectRange returns the instants of s inside r. O(log n + k) for k
// ranges of s overlapping r.
func (s Set) IntersectRange(r Range) Set {
	w := spanOf(r)
	if w.empty() {
		return Set{}
	}
	lo, hi := s.window(w)
	if lo == hi {
		return Set{}
	}
	out := slices.Clone(s.sp[lo:hi])
	out[0].lo = maxInstant(out[0].lo, w.lo)
	out[len(out)-1].hi = minInstant(out[len(out)-1].hi, w.hi)
	return fromSpans(out)
}

// firstEndingAfter is the index of the first span whose end is after t
// (len if none): the only span that can contain t, and the first one that
// can overlap anything starting at t. O(log n).
func (s Set) firstEndingAfter(t instant) int {
	k, _ := slices.BinarySearchFunc(s.sp, t, func(sp span, t instant) int {
		if sp.hi.after(t) {
			return 1
		}
		return -1
	})
	return k
}

// Contains reports whether instant t is in the set. O(log n).
func (s Set) Contains(t time.Time) bool {
	i := at(t)
	k := s.firstEndingAfter(i)
	return k < len(s.sp) && !s.sp[k].lo.after(i)
}

// Covers reports whether every instant of r is in the set; an empty r is
// always covered. O(log n).
func (s Set) Covers(r Range) bool {
	w := spanOf(r)
	if w.empty() {
		return true
	}
	k := s.firstEndingAfter(w.lo)
	return k < len(s.sp) && !s.sp[k].lo.after(w.lo) && !s.sp[k].hi.before(w.hi)
}

// Missing returns the instants of within that are not in s (within minus s).
// O(log n + k) time for k ranges of s overlapping within, and at most one
// allocation (none when nothing is missing).
func (s Set) Missing(within Range) Set {
	w := spanOf(within)
	if w.empty() {
		return Set{}
	}
	lo, hi := s.window(w)
	var out []span // allocated at the first gap, sized for the worst case
	add := func(sp span) {
		if out == nil {
			out = make([]span, 0, hi-lo+1)
		}
		out = append(out, sp)
	}
	cur := w.lo
	for _, sp := range s.sp[lo:hi] {
		if sp.lo.after(cur) {
			add(span{lo: cur, hi: sp.lo})
		}
		cur = maxInstant(cur, sp.hi)
	}
	if cur.before(w.hi) {
		add(span{lo: cur, hi: w.hi})
	}
	return fromSpans(out)
}

// FirstGap returns the earliest maximal sub-range of within that is not in s,
// and false when s covers within (including an empty within). O(log n).
func (s Set) FirstGap(within Range) (Range, bool) {
	w := spanOf(within)
	if w.empty() {
		return Range{}, false
	}
	cur := w.lo
	k := s.firstEndingAfter(cur)
	if k < len(s.sp) && !s.sp[k].lo.after(cur) {
		cur = s.sp[k].hi // cur is covered; the gap starts where this span ends
		k++
	}
	if !cur.before(w.hi) {
		return Range{}, false
	}
	end := w.hi
	if k < len(s.sp) && s.sp[k].lo.before(end) {
		end = s.sp[k].lo
	}
	return span{lo: cur, hi: end}.rng(), true
}

// TrailingSuffix returns the maximal missing suffix [x, within.End) of within:
// x is the end of the last covered instant inside within, or within.Start if
// nothing inside within is covered. It returns false when within is empty or
// its last instant is covered (no missing suffix). Gaps before the last
// covered instant are not part of the suffix; see OnlyTrailingGap.
// O(log n).
func (s Set) TrailingSuffix(within Range) (Range, bool) {
	w := spanOf(within)
	if w.empty() {
		return Range{}, false
	}
	// Only the span ending after w.hi, if it starts before w.hi, can cover
	// the end of within; every span before it ends at or before w.hi.
	k := s.firstEndingAfter(w.hi)
	if k < len(s.sp) && s.sp[k].lo.before(w.hi) {
		return Range{}, false
	}
	x := w.lo
	if k > 0 {
		x = maxInstant(x, s.sp[k-1].hi)
	}
	if !x.before(w.hi) {
		return Range{}, false
	}
	return span{lo: x, hi: w.hi}.rng(), true
}

// OnlyTrailingGap reports whether everything of within that s misses forms a
// single contiguous suffix of within, with no internal or historical gap
// before it. gap is that suffix (TrailingSuffix); it is the empty Range{}
// when nothing is missing, which also reports true. It reports false when
// some missing instant lies before the last covered instant inside within.
// O(log n).
func (s Set) OnlyTrailingGap(within Range) (gap Range, ok bool) {
	w := spanOf(within)
	if w.empty() {
		return Range{}, true
	}
	suffix, has := s.TrailingSuffix(within)
	head := within
	if has {
		head.End = suffix.Start
	} else {
		suffix = Range{}
	}
	if !s.Covers(head) {
		return Range{}, false
	}
	return suffix, true
}

// ExtendBack returns s with the start of every range moved back to the start
// of the bucket of u it lies in and then n more buckets (n < 0 counts as 0),
// but not before notBefore, and overlapping results merged. This is how
// lookback turns missing ranges into work. Ends are unchanged; a range that
// already starts before notBefore keeps its start. O(n) time and at most one
// allocation; s itself is returned, without allocating, when nothing moves.
func (s Set) ExtendBack(u Unit, n int, notBefore time.Time) Set {
	n = max(n, 0)
	floor := at(notBefore)
	newStart := func(lo instant) instant {
		if start := u.addAt(u.floorAt(lo), -n); start.before(lo) {
			return maxInstant(start, minInstant(floor, lo))
		}
		return lo
	}
	// Nothing is allocated until some range actually moves.
	first := -1
	for i, sp := range s.sp {
		if newStart(sp.lo) != sp.lo {
			first = i
			break
		}
	}
	if first < 0 {
		return s
	}
	moved := make([]span, first, len(s.sp))
	copy(moved, s.sp[:first])
	for _, sp := range s.sp[first:] {
		moved = appendMerged(moved, span{lo: newStart(sp.lo), hi: sp.hi})
	}
	return fromSpans(moved)
}

// MarshalJSON encodes the set as a JSON array of {"start", "end"} ranges in
// order (RFC 3339 timestamps); the empty set is [].
func (s Set) MarshalJSON() ([]byte, error) {
	rs := s.Ranges()
	if rs == nil {
		rs = []Range{}
	}
	return json.Marshal(rs)
}

// UnmarshalJSON decodes an array of ranges and normalises it as NewSet does,
// so a hand-edited or merged document still yields a valid Set.
func (s *Set) UnmarshalJSON(b []byte) error {
	var rs []Range
	if err := json.Unmarshal(b, &rs); err != nil {
		return fmt.Errorf("interval set: %w", err)
	}
	*s = NewSet(rs...)
	return nil
}

// setInvariant names the Set invariant in a violation's panic.
const setInvariant = "interval.Set holds non-empty, sorted, disjoint, non-adjacent ranges"

// mustBeValid panics, naming the Set invariant, when s breaks it: a bug in
// this package, since every input is normalised first.
func (s Set) mustBeValid() {
	if err := s.check(); err != nil {
		invariants.Violated(setInvariant, err)
	}
}

// check verifies the Set invariant; tests call it after every operation,
// and fromSpans in invariants builds.
func (s Set) check() error {
	if s.sp != nil && len(s.sp) == 0 {
		return errors.New("an empty set is not the zero Set")
	}
	for i, sp := range s.sp {
		if sp.empty() {
			return fmt.Errorf("range %d %v is empty", i, sp.rng())
		}
		if sp.lo.nsec < 0 || sp.lo.nsec >= 1e9 || sp.hi.nsec < 0 || sp.hi.nsec >= 1e9 {
			return fmt.Errorf("range %d %+v has a bad nanosecond field", i, sp)
		}
		if i > 0 && !s.sp[i-1].hi.before(sp.lo) {
			return fmt.Errorf("ranges %d %v and %d %v overlap or touch", i-1, s.sp[i-1].rng(), i, sp.rng())
		}
	}
	return nil
}
