// Package cadence answers the scheduler's questions about one model: which
// intervals are due at an execution time, which of them are missing from the
// covered state, what work that means once lookback is added, how to split
// it into batches, and how many scheduler advances separate two frontiers.
//
// The cron decides when an interval is due; the interval unit decides how big
// it is; lookback widens the work but never the schedule. Everything here is
// computed on merged ranges: no function expands a range into its buckets,
// so cost and memory grow with the number of gaps, not with history length.
// All times are UTC.
package cadence

import (
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/gapless-dev/gapless/cron"
	"github.com/gapless-dev/gapless/interval"
)

// ErrInvalidSpec is wrapped by Spec.Validate for every problem it finds.
var ErrInvalidSpec = errors.New("invalid schedule spec")

// Spec is what the scheduler needs to know about one model.
type Spec struct {
	// Start is the first instant of the model's history. Intervals start at
	// Unit.Floor(Start).
	Start time.Time
	// End, if not zero, is the exclusive end of the model's history: nothing
	// at or after End is ever due. Callers pass a unit-aligned End.
	End time.Time
	// Cron decides when intervals become due.
	Cron cron.Schedule
	// Unit is the size of one interval.
	Unit interval.Unit
	// Lookback is how many buckets before each missing range are recomputed
	// with it. Negative values count as 0.
	Lookback int
	// AllowPartials lets the newest due interval end at the cron firing
	// instead of the last unit boundary before it.
	AllowPartials bool
	// Location is the time zone Cron is read in (SQLMesh's cron_tz); nil
	// is UTC. It moves the firings only: intervals stay aligned to the
	// unit in UTC.
	Location *time.Location
}

// Validate reports every problem with s in one error wrapping
// ErrInvalidSpec: a zero Cron, an invalid Unit, a zero Start, an End not
// after Start, a negative Lookback, and any error from cron.CheckUnit (a unit
// coarser than the cron without AllowPartials, or a cron firing more often
// than every five minutes), which stays reachable with errors.Is.
//
// The other methods never fail: on a spec that does not validate they return
// empty results rather than panic.
func (s Spec) Validate() error {
	var errs []error
	if s.Cron.IsZero() {
		errs = append(errs, errors.New("no cron"))
	}
	if !s.Unit.Valid() {
		_, err := interval.ParseUnit(string(s.Unit))
		errs = append(errs, err)
	}
	if s.Start.IsZero() {
		errs = append(errs, errors.New("no start"))
	}
	if !s.End.IsZero() && !s.End.After(s.Start) {
		errs = append(errs, fmt.Errorf("end %s is not after start %s", s.End.UTC().Format(time.RFC3339), s.Start.UTC().Format(time.RFC3339)))
	}
	if s.Lookback < 0 {
		errs = append(errs, fmt.Errorf("negative lookback %d", s.Lookback))
	}
	if !s.Cron.IsZero() && s.Unit.Valid() {
		if err := cron.CheckUnit(s.Cron, s.Unit, s.AllowPartials); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrInvalidSpec, errors.Join(errs...))
}

// origin is the start of the model's first interval, Unit.Floor(Start).
func (s Spec) origin() time.Time { return s.Unit.Floor(s.Start) }

// dueEnd maps a cron firing t to the end of what is due once it has fired:
// t itself with AllowPartials, else the last unit boundary at or before t;
// capped at End. It is monotone non-decreasing in t.
func (s Spec) dueEnd(t time.Time) time.Time {
	if !s.AllowPartials {
		t = s.Unit.Floor(t)
	}
	if !s.End.IsZero() && t.After(s.End) {
		t = s.End.UTC()
	}
	return t
}

// Bound returns the exclusive end of everything due at exec: the last cron
// firing at or before exec (Cron.Prev, inclusive), floored to the unit unless
// AllowPartials, capped at End.
//
// Example: cron "0 12 * * *" on a day unit. At 10:00 on the 5th the last
// firing was the 4th 12:00, so the bound is the 4th 00:00 and the newest due
// day is the 3rd; from 12:00 on the 5th the bound is the 5th 00:00 and the
// 4th is due.
//
// For a zero Cron Bound is the zero time (nothing is ever due).
func (s Spec) Bound(exec time.Time) time.Time {
	p := s.prev(exec)
	if p.IsZero() {
		return time.Time{}
	}
	return s.dueEnd(p)
}

// DueAt returns the newest interval due at exec: the unit bucket that ends at
// Bound(exec) or, when the bound falls inside a bucket (AllowPartials, or a
// mid-bucket End), the part of that bucket before the bound; clipped to the
// model's origin. It reports false when nothing is due yet.
func (s Spec) DueAt(exec time.Time) (interval.Range, bool) {
	b := s.Bound(exec)
	lo := s.Unit.Floor(b)
	if lo.Equal(b) {
		lo = s.Unit.Add(b, -1)
	}
	if o := s.origin(); lo.Before(o) {
		lo = o
	}
	r := interval.NewRange(lo, b)
	if r.Empty() {
		return interval.Range{}, false
	}
	return r, true
}

// Result is what is missing for one model at one execution time.
type Result struct {
	// Missing is [Unit.Floor(Start), Bound(exec)) minus the covered state.
	Missing interval.Set
	// Buckets counts the unit buckets in Missing; a partial bucket counts
	// as one (see interval.Set.Buckets).
	Buckets int
	// Work is Missing with each range widened backwards to the start of the
	// bucket it starts in and then by Lookback more buckets, clipped to
	// Unit.Floor(Start), and merged. It is what a run would execute; it
	// equals Missing when Lookback is 0 and the covered state is aligned.
	Work interval.Set
	// WorkBuckets counts the unit buckets in Work.
	WorkBuckets int
}

// Missing computes what is due at exec and not in covered.
//
// Lookback widens Work but never Missing or Buckets: lookback recomputes
// data, it does not make more intervals due. Covered ranges outside the due
// window are ignored. Cost and allocations are proportional to the number of
// ranges of covered inside the window (the gaps), never to the number of
// buckets; bucket counts are arithmetic.
func (s Spec) Missing(covered interval.Set, exec time.Time) Result {
	window := interval.NewRange(s.origin(), s.Bound(exec))
	if window.Empty() || !s.Unit.Valid() {
		return Result{}
	}
	missing := covered.Missing(window)
	res := Result{Missing: missing, Buckets: missing.Buckets(s.Unit), Work: missing.ExtendBack(s.Unit, s.Lookback, window.Start)}
	res.WorkBuckets = res.Work.Buckets(s.Unit)
	return res
}

// Batches splits work into the ranges a run executes, lazily and in order:
// each range of work is cut at unit boundaries into pieces of batchSize
// buckets (the first piece of a range that starts mid-bucket counts that
// partial bucket as one; the last piece may be shorter). batchSize <= 0, or
// an invalid unit, yields each range of work whole. Batches never cross a
// gap. Memory is constant: nothing is materialised per bucket or per batch.
func Batches(work interval.Set, unit interval.Unit, batchSize int) iter.Seq[interval.Range] {
	return func(yield func(interval.Range) bool) {
		for r := range work.All() {
			if batchSize <= 0 || !unit.Valid() {
				if !yield(r) {
					return
				}
				continue
			}
			for start := r.Start; start.Before(r.End); {
				end := unit.Add(unit.Floor(start), batchSize)
				if end.After(r.End) {
					end = r.End
				}
				if !yield(interval.Range{Start: start, End: end}) {
					return
				}
				start = end
			}
		}
	}
}

// BatchCount is the number of ranges Batches(work, unit, batchSize) yields,
// computed arithmetically: per range, ceil(buckets / batchSize).
func BatchCount(work interval.Set, unit interval.Unit, batchSize int) int {
	if batchSize <= 0 || !unit.Valid() {
		return work.Len()
	}
	n := 0
	for r := range work.All() {
		n += (unit.Buckets(r) + batchSize - 1) / batchSize
	}
	return n
}

// Advances counts the scheduler advances between two frontiers of the
// model, from and to.
//
// Each cron firing T moves the model's due end to e(T) = Bound(T): T floored
// to the unit (or T itself with AllowPartials), capped at End. The advances
// from frontier f0 to frontier f1 are
//
//	|{ distinct e(T) : max(f0, origin) < e(T) <= f1 }|
//	  + 1 if f1 is strictly after the last such end (or after f0 when there
//	      is none): a partial advance, such as a frontier that a manual run
//	      or AllowPartials left inside a unit.
//
// where origin = Unit.Floor(Start). It is 0 when f1 <= f0. It counts cron
// due ends, never buckets and never lookback-widened work: on an hourly unit
// "0 */2 * * *" moves 10:00 -> 12:00 in one advance; "0 12 * * *" on a day
// unit moves the 4th -> the 5th in one advance; "*/5 * * * *" on a
// five_minute unit moves 10:00 -> 11:00 in twelve.
//
// Cost: one cron search per advance counted (about 100ns each), independent
// of how many firings fall between two due ends.
func (s Spec) Advances(from, to time.Time) int {
	from, to = from.UTC(), to.UTC()
	if !to.After(from) || s.Cron.IsZero() || !s.Unit.Valid() {
		return 0
	}
	if o := s.origin(); from.Before(o) {
		from = o
	}
	n := 0
	last := from
	for e, ok := s.nextDueEnd(from); ok && !e.After(to); e, ok = s.nextDueEnd(e) {
		n++
		last = e
	}
	if to.After(last) {
		n++
	}
	return n
}

// nextDueEnd returns the smallest due end e(T) over all cron firings T that
// is strictly after f, and false if there is none (End reached).
//
// Without AllowPartials e(T) > f exactly when T reaches b, the first unit
// boundary after f, so the answer is the floor of the first firing at or
// after b; firings between due ends are skipped in one search. With
// AllowPartials e(T) = T, so it is the first firing after f.
func (s Spec) nextDueEnd(f time.Time) (time.Time, bool) {
	t, ok := s.nextFiring(f)
	if !ok {
		return time.Time{}, false
	}
	return s.dueEnd(t), true
}

// nextFiring is the cron firing T at which nextDueEnd(f) is reached: the
// first firing whose due end e(T) is strictly after f.
func (s Spec) nextFiring(f time.Time) (time.Time, bool) {
	if !s.End.IsZero() && !f.Before(s.End) {
		return time.Time{}, false
	}
	var t time.Time
	if s.AllowPartials {
		t = s.next(f)
	} else {
		b := s.Unit.Add(s.Unit.Floor(f), 1)
		t = s.next(b.Add(-time.Nanosecond))
	}
	if t.IsZero() {
		return time.Time{}, false
	}
	return t, true
}

// NextDue returns when the model's next interval becomes due after exec:
// the first cron firing after exec that moves the due end past Bound(exec)
// (and past the start of the model's first interval, for a model that
// starts later). It reports false when none ever will (End reached) or the
// spec has no cron or unit. Like Advances, it costs one cron search.
//
// Example: "@hourly" on an hour unit at 05:30: 06:00, when [05:00, 06:00)
// becomes due. "0 12 * * *" on a day unit at 10:00 on the 5th: 12:00 that
// day, when the 4th becomes due.
func (s Spec) NextDue(exec time.Time) (time.Time, bool) {
	if s.Cron.IsZero() || !s.Unit.Valid() {
		return time.Time{}, false
	}
	f := s.Bound(exec)
	if o := s.origin(); f.Before(o) {
		f = o
	}
	return s.nextFiring(f)
}
