package cron

import (
	"fmt"
	"math"
	"math/bits"
	"time"

	"github.com/gapless-dev/gapless/interval"
)

// Unit returns the interval unit that the schedule's cadence implies: the
// coarsest unit whose Nominal() is at most the smallest gap between two
// consecutive firings. @weekly and daily crons give day, @monthly gives
// month, @yearly year, "*/5 * * * *" and "*/10 * * * *" five_minute and
// "0 */2 * * *" hour. A schedule whose firings can be less than five minutes
// apart yields a *Error wrapping ErrTooFrequent.
//
// The smallest gap is exact within a day (from the minute and hour fields)
// and, across days, taken from every firing day between 2000 and 2031: that
// window holds every kind of month (weekday of the 1st, leap February) and
// every pair of consecutive ones, which is all the day fields depend on. The
// answer is computed once per Schedule.
func (s Schedule) Unit() (interval.Unit, error) {
	if s.c == nil {
		return "", invalid("", "zero Schedule", nil)
	}
	s.c.unitOnce.Do(s.c.computeGap)
	if s.c.gapErr != nil {
		return "", s.c.gapErr
	}
	var best interval.Unit
	for _, u := range interval.Units() {
		if u.Nominal() <= s.c.gap {
			best = u
		}
	}
	return best, nil
}

// CheckUnit validates an explicit interval_unit against a schedule. A unit
// finer than or equal to the cron's Unit() is always fine (a run processes
// several buckets). A coarser one means every run but the last of a bucket
// would see a partial bucket; it is rejected with a *Error wrapping
// ErrUnitTooCoarse that names both units, unless allowPartials is set. Errors
// from Unit() are returned as they are, and an invalid explicit unit yields
// an error wrapping interval.ErrUnknownUnit.
func CheckUnit(s Schedule, explicit interval.Unit, allowPartials bool) error {
	derived, err := s.Unit()
	if err != nil {
		return err
	}
	if !explicit.Valid() {
		_, err := interval.ParseUnit(string(explicit))
		return fmt.Errorf("interval_unit for cron %q: %w", s.String(), err)
	}
	if derived.Less(explicit) && !allowPartials {
		return &Error{
			Expr: s.String(),
			Kind: ErrUnitTooCoarse,
			Detail: fmt.Sprintf("interval_unit %s is coarser than %s, the unit of the cron's cadence, so runs would see partial %s intervals; use interval_unit %s or finer, or set allow_partials",
				explicit, derived, explicit, derived),
		}
	}
	return nil
}

// computeGap sets c.gap to the smallest gap between consecutive firings (see
// Unit), or c.gapErr if it is below five minutes.
func (c *compiled) computeGap() {
	const noGap = math.MaxInt64
	minutesGap := int64(noGap) // in minutes

	firstM, lastM := bits.TrailingZeros64(c.minutes), 63-bits.LeadingZeros64(c.minutes)
	firstH, lastH := bits.TrailingZeros32(c.hours), 31-bits.LeadingZeros32(c.hours)

	// Consecutive firings inside one hour.
	if d := minBitDistance(c.minutes); d > 0 {
		minutesGap = min(minutesGap, int64(d))
	}
	// The last firing of an hour and the first of the next matching hour.
	if d := minBitDistance(uint64(c.hours)); d > 0 {
		minutesGap = min(minutesGap, int64(d*60+firstM-lastM))
	}
	// The last firing of a day and the first of the next firing day.
	firstOfDay, lastOfDay := int64(firstH*60+firstM), int64(lastH*60+lastM)
	day, prevDay := int64(0), int64(-1) // days since 2000-01-01
	for y := 2000; y <= 2031; y++ {
		for m := time.January; m <= time.December; m++ {
			if c.months&(1<<m) != 0 {
				days := c.dayMask(y, m) &^ 1
				for days != 0 {
					dd := bits.TrailingZeros64(days)
					abs := day + int64(dd-1)
					if prevDay >= 0 {
						minutesGap = min(minutesGap, (abs-prevDay)*24*60+firstOfDay-lastOfDay)
					}
					prevDay = abs
					days &= days - 1
				}
			}
			day += int64(daysIn(y, m))
		}
	}
	if minutesGap == noGap {
		// At most one firing in 32 years; 5-field crons cannot do that, but
		// the answer would be "yearly or rarer".
		c.gap = math.MaxInt64
		return
	}
	c.gap = time.Duration(minutesGap) * time.Minute
	if c.gap < interval.FiveMinute.Nominal() {
		c.gapErr = &Error{
			Expr:   c.expr,
			Kind:   ErrTooFrequent,
			Detail: fmt.Sprintf("consecutive firings can be %v apart; the finest interval unit is five_minute", c.gap),
		}
	}
}

// minBitDistance is the smallest distance between two set bits of x, or 0 if
// fewer than two bits are set.
func minBitDistance(x uint64) int {
	best := 0
	prev := -1
	for x != 0 {
		b := bits.TrailingZeros64(x)
		if prev >= 0 && (best == 0 || b-prev < best) {
			best = b - prev
		}
		prev = b
		x &= x - 1
	}
	return best
}
