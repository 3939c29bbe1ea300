// Package storekit is what both state stores (state/sqlite and
// state/postgres) share below the Store interface and nothing else uses:
// the microsecond encoding of instants and ranges, fence validation, lease
// tokens, the versions a change of an environment stops serving, and the
// transitions of the sources state machine (over SourceTx). It is
// internal to state/, so that the state package's public surface is the
// interface, its records and its sentinels.
package storekit

import (
	"fmt"
	"math"
	"time"

	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/state"
)

// Stores keep instants as int64 microseconds since the Unix epoch (UTC), in
// both backends, so that interval arithmetic in SQL (merging adjacent ranges,
// comparing with now) is integer arithmetic with one meaning everywhere.
// Interval boundaries are minute-aligned in practice, so nothing is lost.

// Micros converts t to microseconds since the epoch; the zero time maps to 0.
func Micros(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMicro()
}

// FromMicros is the inverse of Micros: 0 maps to the zero time.
func FromMicros(us int64) time.Time {
	if us == 0 {
		return time.Time{}
	}
	return time.UnixMicro(us).UTC()
}

// RangeMicros is a stored interval range [Start, End) in microseconds.
type RangeMicros struct{ Start, End int64 }

// Range returns r as an interval range (UTC, like SetFromMicros).
func (r RangeMicros) Range() interval.Range {
	return interval.Range{Start: time.UnixMicro(r.Start).UTC(), End: time.UnixMicro(r.End).UTC()}
}

// ToMicros converts a set to its stored form, in order.
func ToMicros(s interval.Set) []RangeMicros {
	out := make([]RangeMicros, 0, s.Len())
	for r := range s.All() {
		out = append(out, RangeMicros{Start: r.Start.UnixMicro(), End: r.End.UnixMicro()})
	}
	return out
}

// SetFromMicros builds a set from stored ranges (any order, merged on the
// way in).
func SetFromMicros(rs []RangeMicros) interval.Set {
	ranges := make([]interval.Range, len(rs))
	for i, r := range rs {
		ranges[i] = interval.Range{Start: time.UnixMicro(r.Start).UTC(), End: time.UnixMicro(r.End).UTC()}
	}
	return interval.NewSet(ranges...)
}

// minMicros and maxMicros bound the instants an int64 of microseconds can
// hold.
var (
	minMicros = time.UnixMicro(math.MinInt64 + 1)
	maxMicros = time.UnixMicro(math.MaxInt64)
)

// CheckMicros refuses, rather than lets the microsecond encoding round or
// wrap, a boundary of s that is not a whole microsecond or that does not fit
// in int64 microseconds: silently widening or narrowing a range would record
// rows as computed that were not, or drop the record of rows that were.
func CheckMicros(s interval.Set) error {
	for r := range s.All() {
		for _, t := range [2]time.Time{r.Start, r.End} {
			if t.Nanosecond()%1000 != 0 {
				return fmt.Errorf("boundary %s of range %v is not a whole microsecond", t.Format(time.RFC3339Nano), r)
			}
			if t.Before(minMicros) || t.After(maxMicros) {
				return fmt.Errorf("boundary %s of range %v is out of range", t.Format(time.RFC3339Nano), r)
			}
		}
	}
	return nil
}

// TimesArgs are a generation's Times as its columns times_seq,
// times_min_us and times_max_us: -1 and NULLs when not known, NULL times
// when no row holds one.
func TimesArgs(t *state.GenerationTimes) (seq int64, lo, hi any) {
	if t == nil {
		return -1, nil, nil
	}
	if t.Max.IsZero() {
		return t.Seq, nil, nil
	}
	return t.Seq, t.Min.UnixMicro(), t.Max.UnixMicro()
}

// ScanTimes is TimesArgs's inverse.
func ScanTimes(seq int64, lo, hi *int64) *state.GenerationTimes {
	if seq < 0 {
		return nil
	}
	t := &state.GenerationTimes{Seq: seq}
	if lo != nil && hi != nil {
		t.Min, t.Max = time.UnixMicro(*lo).UTC(), time.UnixMicro(*hi).UTC()
	}
	return t
}
