// Package interval holds gapless's time arithmetic: half-open UTC ranges,
// merged range sets, and the interval units that models are bucketed by.
//
// Nothing in this package knows about databases, models or cron; it is the
// foundation that the schedule, plan and state packages build on.
//
// Every function here works in UTC: inputs in another location are converted
// first, and every time.Time returned is in UTC without a monotonic reading.
package interval

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Unit is the size of one interval bucket of a model.
//
// The zero value is not a valid unit. The string form is the one used in model
// files (interval_unit five_minute ... year).
type Unit string

// The interval units a model can be bucketed by, from finest to coarsest.
const (
	FiveMinute  Unit = "five_minute"
	QuarterHour Unit = "quarter_hour"
	HalfHour    Unit = "half_hour"
	Hour        Unit = "hour"
	Day         Unit = "day"
	Month       Unit = "month"
	Year        Unit = "year"
)

// ErrUnknownUnit is wrapped by ParseUnit when a name is not one of Units().
var ErrUnknownUnit = errors.New("unknown interval unit")

// allUnits lists every valid unit from finest to coarsest; rank is the index.
var allUnits = [...]Unit{FiveMinute, QuarterHour, HalfHour, Hour, Day, Month, Year}

// Units returns every valid unit, finest first. The slice is a fresh copy.
func Units() []Unit {
	out := make([]Unit, len(allUnits))
	copy(out, allUnits[:])
	return out
}

// ParseUnit returns the unit named s (case and surrounding space ignored).
// An unknown name yields an error wrapping ErrUnknownUnit that quotes s and
// lists the valid names.
func ParseUnit(s string) (Unit, error) {
	u := Unit(strings.ToLower(strings.TrimSpace(s)))
	if u.Valid() {
		return u, nil
	}
	names := make([]string, len(allUnits))
	for i, v := range allUnits {
		names[i] = string(v)
	}
	return "", fmt.Errorf("%w %q: valid units are %s", ErrUnknownUnit, s, strings.Join(names, ", "))
}

// rank is the position of u in Units(), or -1 if u is not valid.
func (u Unit) rank() int {
	switch u {
	case FiveMinute:
		return 0
	case QuarterHour:
		return 1
	case HalfHour:
		return 2
	case Hour:
		return 3
	case Day:
		return 4
	case Month:
		return 5
	case Year:
		return 6
	}
	return -1
}

// Valid reports whether u is one of the seven units.
func (u Unit) Valid() bool { return u.rank() >= 0 }

// String returns the unit's model-file name.
func (u Unit) String() string { return string(u) }

// fixedSeconds is the exact length in seconds of a unit whose buckets all
// have the same length, or 0 for calendar units (month, year) and invalid
// units.
func (u Unit) fixedSeconds() int64 {
	switch u {
	case FiveMinute:
		return 5 * 60
	case QuarterHour:
		return 15 * 60
	case HalfHour:
		return 30 * 60
	case Hour:
		return 60 * 60
	case Day:
		return 24 * 60 * 60
	}
	return 0
}

// Nominal is the length used to compare units with each other and with the
// gap between cron firings: the exact length for fixed units, the shortest
// month (28 days) for month, and 365 days for year. Nominal is 0 for an
// invalid unit. For valid units it is strictly increasing in Units() order.
func (u Unit) Nominal() time.Duration {
	switch u {
	case Month:
		return 28 * 24 * time.Hour
	case Year:
		return 365 * 24 * time.Hour
	}
	return time.Duration(u.fixedSeconds()) * time.Second
}

// Compare orders units finest to coarsest: it returns -1 if u is finer than
// o, 0 if they are equal and +1 if u is coarser. Invalid units sort before
// every valid unit.
func (u Unit) Compare(o Unit) int {
	a, b := u.rank(), o.rank()
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Less reports whether u is strictly finer than o (see Compare).
func (u Unit) Less(o Unit) bool { return u.Compare(o) < 0 }

// floorDiv is a / b rounded towards negative infinity; b must be > 0.
func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && (a < 0) {
		q--
	}
	return q
}

// Floor returns the start of the bucket of u that contains t, in UTC, so that
// Floor(t) <= t < Add(Floor(t), 1). Fixed units are aligned to the clock
// (multiples of their length since midnight), month to the 1st at 00:00 and
// year to January 1st at 00:00. For an invalid unit Floor returns t in UTC.
func (u Unit) Floor(t time.Time) time.Time {
	t = t.UTC()
	if s := u.fixedSeconds(); s > 0 {
		sec := t.Unix()
		return time.Unix(floorDiv(sec, s)*s, 0).UTC()
	}
	switch u {
	case Month:
		return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
	case Year:
		return time.Date(t.Year(), time.January, 1, 0, 0, 0, 0, time.UTC)
	}
	return t
}

// Aligned reports whether t is the start of a bucket of u (Floor(t) == t).
func (u Unit) Aligned(t time.Time) bool { return u.Floor(t).Equal(t) }

// Ceil returns the smallest bucket start of u that is >= t: t itself (in UTC)
// when aligned, otherwise the start of the following bucket. For an invalid
// unit Ceil returns t in UTC.
func (u Unit) Ceil(t time.Time) time.Time {
	f := u.Floor(t)
	if f.Equal(t) || !u.Valid() {
		return t.UTC()
	}
	return u.Add(f, 1)
}

// Add moves t by n buckets of u (n may be negative), in UTC.
//
// For an aligned t the result is the bucket start n buckets away, with exact
// calendar math for month and year (Dec + 1 month is January of the next
// year; leap years have 366 days). For an unaligned t the offset inside the
// bucket is kept; for month and year the day of month is clamped to the
// length of the target month (Jan 31 + 1 month = Feb 28 or 29, Feb 29 + 1
// year = Feb 28). In every case Floor(Add(t, n)) == Add(Floor(t), n).
// For an invalid unit Add returns t in UTC.
func (u Unit) Add(t time.Time, n int) time.Time {
	t = t.UTC()
	if s := u.fixedSeconds(); s > 0 {
		return time.Unix(t.Unix()+int64(n)*s, int64(t.Nanosecond())).UTC()
	}
	var months int
	switch u {
	case Month:
		months = n
	case Year:
		months = 12 * n
	default:
		return t
	}
	y, m, d := t.Date()
	hh, mm, ss := t.Clock()
	// Work on a zero-based month index so that the carry into the year is a
	// floor division, which is correct for negative n as well.
	idx := int64(y)*12 + int64(m-1) + int64(months)
	ty := int(floorDiv(idx, 12))
	tm := time.Month(idx-int64(ty)*12) + 1
	if last := daysIn(ty, tm); d > last {
		d = last
	}
	return time.Date(ty, tm, d, hh, mm, ss, t.Nanosecond(), time.UTC)
}

// daysIn is the number of days of month m in year y (proleptic Gregorian).
func daysIn(y int, m time.Month) int {
	switch m {
	case time.February:
		if isLeap(y) {
			return 29
		}
		return 28
	case time.April, time.June, time.September, time.November:
		return 30
	}
	return 31
}

func isLeap(y int) bool { return y%4 == 0 && (y%100 != 0 || y%400 == 0) }

// index is the number of whole buckets of u between a fixed origin and the
// bucket containing i. Consecutive buckets have consecutive indexes, so the
// number of buckets in [Floor(a), Floor(b)) is index(b) - index(a). The second
// result reports whether i is aligned. u must be valid.
func (u Unit) index(i instant) (int64, bool) {
	if s := u.fixedSeconds(); s > 0 {
		q := floorDiv(i.sec, s)
		return q, q*s == i.sec && i.nsec == 0
	}
	t := i.time()
	y, m, d := t.Date()
	onDay := i.nsec == 0 && floorDiv(i.sec, 86400)*86400 == i.sec
	if u == Year {
		return int64(y), onDay && d == 1 && m == time.January
	}
	return int64(y)*12 + int64(m-1), onDay && d == 1
}

// Buckets returns how many buckets of u overlap r; a bucket only partly
// inside r counts as one. It is 0 for an empty range or an invalid unit. The
// count is computed arithmetically in O(1), never by walking the buckets.
func (u Unit) Buckets(r Range) int { return u.bucketsIn(spanOf(r)) }

func (u Unit) bucketsIn(sp span) int {
	if sp.empty() || !u.Valid() {
		return 0
	}
	first, _ := u.index(sp.lo)
	last, aligned := u.index(sp.hi)
	if !aligned {
		last++ // the bucket containing the end overlaps the span
	}
	return int(last - first)
}

// floorAt is Floor on instants, without leaving integers for fixed units.
func (u Unit) floorAt(i instant) instant {
	if s := u.fixedSeconds(); s > 0 {
		return instant{sec: floorDiv(i.sec, s) * s}
	}
	return at(u.Floor(i.time()))
}

// addAt is Add on instants, without leaving integers for fixed units.
func (u Unit) addAt(i instant, n int) instant {
	if s := u.fixedSeconds(); s > 0 {
		return instant{sec: i.sec + int64(n)*s, nsec: i.nsec}
	}
	return at(u.Add(i.time(), n))
}
