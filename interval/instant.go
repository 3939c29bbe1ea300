package interval

import "time"

// instant is how a Set stores a point in time: whole seconds since the Unix
// epoch plus nanoseconds in [0, 1e9). Unlike time.Time it holds no pointer,
// so slices of spans cost the garbage collector nothing and compare with two
// integer comparisons, and it still represents every time.Time exactly
// (within ±292 billion years).
type instant struct {
	sec, nsec int64
}

func at(t time.Time) instant { return instant{sec: t.Unix(), nsec: int64(t.Nanosecond())} }

// time converts back; the result is in UTC without a monotonic reading.
func (i instant) time() time.Time { return time.Unix(i.sec, i.nsec).UTC() }

func (i instant) before(j instant) bool {
	return i.sec < j.sec || (i.sec == j.sec && i.nsec < j.nsec)
}

func (i instant) after(j instant) bool { return j.before(i) }

func maxInstant(i, j instant) instant {
	if i.before(j) {
		return j
	}
	return i
}

func minInstant(i, j instant) instant {
	if j.before(i) {
		return j
	}
	return i
}

// span is the half-open [lo, hi) in instants; non-empty when lo < hi.
type span struct {
	lo, hi instant
}

func spanOf(r Range) span { return span{lo: at(r.Start), hi: at(r.End)} }

func (s span) empty() bool { return !s.lo.before(s.hi) }

func (s span) rng() Range { return Range{Start: s.lo.time(), End: s.hi.time()} }
