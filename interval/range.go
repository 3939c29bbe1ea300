package interval

import (
	"time"
)

// Range is the half-open time range [Start, End).
//
// A Range with End <= Start is empty and contains no instant. Ranges built by
// this package are always in UTC; a Range built by hand may carry another
// location, and every function here converts it to UTC before use.
type Range struct {
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
}

// NewRange returns [start, end) with both ends converted to UTC.
func NewRange(start, end time.Time) Range {
	return Range{Start: start.UTC(), End: end.UTC()}
}

// utc returns r with both ends in UTC and without monotonic readings.
func (r Range) utc() Range { return Range{Start: r.Start.UTC(), End: r.End.UTC()} }

// Empty reports whether r contains no instant, i.e. End <= Start.
func (r Range) Empty() bool { return !r.Start.Before(r.End) }

// Contains reports whether Start <= t < End.
func (r Range) Contains(t time.Time) bool {
	return !t.Before(r.Start) && t.Before(r.End)
}

// Duration is End - Start, or 0 for an empty range. Like time.Time.Sub it
// saturates for ranges longer than about 292 years.
func (r Range) Duration() time.Duration {
	if r.Empty() {
		return 0
	}
	return r.End.Sub(r.Start)
}

// Equal reports whether r and o denote the same instants: both empty, or the
// same Start and End.
func (r Range) Equal(o Range) bool {
	if r.Empty() || o.Empty() {
		return r.Empty() && o.Empty()
	}
	return r.Start.Equal(o.Start) && r.End.Equal(o.End)
}

// String formats r as "[start, end)" with RFC 3339 UTC timestamps
// (fractional seconds appear only when present).
func (r Range) String() string {
	return "[" + r.Start.UTC().Format(time.RFC3339Nano) + ", " + r.End.UTC().Format(time.RFC3339Nano) + ")"
}

// Intersect returns the instants that r and o share; the result may be empty.
func (r Range) Intersect(o Range) Range {
	out := Range{Start: later(r.Start, o.Start), End: earlier(r.End, o.End)}.utc()
	if out.Empty() {
		return Range{}
	}
	return out
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
