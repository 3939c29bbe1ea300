// Package cron parses the cron expressions of model files and answers the
// questions the scheduler asks of them: when is the next or previous firing,
// and which interval unit does the cadence imply.
//
// Parsing and field semantics are delegated to github.com/adhocore/gronx;
// this package does not interpret cron fields itself, beyond two strictness
// gates that reject input gronx would silently misread (letters in the
// minute, hour and day-of-month fields; L, W and # parts with trailing
// junk). At Parse time it asks
// gronx's own field checker which minutes, hours and months each field
// matches, and (lazily) which days of each kind of month the day-of-month and
// day-of-week fields match together. Next and Prev then search those bitmaps,
// which is equivalent to asking gronx "is this minute due?" minute by minute,
// but costs a few bit operations per month instead of string parsing per
// candidate instant. The equivalence is tested against gronx directly.
//
// Supported: the five standard fields (minute hour day-of-month month
// day-of-week), with whatever gronx accepts inside a field (lists, ranges,
// steps, month and weekday names, L, W, #), and the macros @hourly, @daily,
// @weekly, @monthly and @yearly. Everything else (a seconds or year field,
// @reboot, other macros) is rejected. All times are UTC.
package cron

import (
	"fmt"
	"math/bits"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/adhocore/gronx"
)

// macros are the @-forms gapless accepts, mapped to five-field expressions.
var macros = map[string]string{
	"@hourly":  "0 * * * *",
	"@daily":   "0 0 * * *",
	"@weekly":  "0 0 * * 0",
	"@monthly": "0 0 1 * *",
	"@yearly":  "0 0 1 1 *",
}

// Schedule is a parsed cron expression. It is a small immutable value that
// is safe to copy and to use from several goroutines. The zero Schedule never
// fires: Next and Prev return the zero time and Unit returns an error.
type Schedule struct {
	c *compiled
}

// compiled is what Parse derives from an expression. Everything but the lazy
// caches is fixed at Parse time.
type compiled struct {
	expr string   // as given to Parse, trimmed
	segs []string // gronx segments: second, minute, hour, dom, month, dow

	minutes uint64 // bit m set: minute m matches (0..59)
	hours   uint32 // bit h set: hour h matches (0..23)
	months  uint16 // bit m set: month m matches (1..12)

	// days caches which days of a month match the day-of-month and
	// day-of-week fields together. That answer depends only on the month,
	// the weekday of its 1st and, for February, whether the year is a leap
	// year, so it is cached per such kind of month: index month-1, weekday
	// of the 1st, leap (0 or 1, only ever 1 for February). A stored value has
	// bit 0 set to mark it computed; bits 1..31 are the matching days.
	days [12][7][2]atomic.Uint64

	unitOnce sync.Once
	gap      time.Duration // smallest gap between consecutive firings
	gapErr   error
}

// Parse parses a five-field cron expression or one of the macros @hourly,
// @daily, @weekly, @monthly and @yearly. It returns a *Error wrapping
// ErrInvalid, quoting expr, for anything else, including expressions that
// gronx accepts but gapless does not (seconds, years, other macros) and
// expressions that can never fire (such as "0 0 30 2 *").
//
// A Schedule is immutable (its lazy caches are computed once, safely for
// concurrent use), so Parse compiles each distinct expression once per
// process and hands out the same Schedule afterwards: a project of 10,000
// models with a handful of crons compiles, and derives the unit of, a
// handful of schedules, however often the models are validated, planned
// or scheduled. Only valid expressions are kept, at most compiledCap.
func Parse(expr string) (Schedule, error) {
	trimmed := strings.TrimSpace(expr)
	if s, ok := compiledCache.Load(trimmed); ok {
		return s.(Schedule), nil
	}
	s, err := compile(expr, trimmed)
	if err != nil {
		return Schedule{}, err
	}
	if compiledCount.Add(1) <= compiledCap {
		if prev, loaded := compiledCache.LoadOrStore(trimmed, s); loaded {
			compiledCount.Add(-1)
			return prev.(Schedule), nil
		}
	}
	return s, nil
}

// compiledCap bounds compiledCache: a process that parses more distinct
// valid expressions (a fuzzer, say) compiles the rest every time.
const compiledCap = 4096

var (
	// compiledCache maps a trimmed expression to its Schedule (see Parse).
	compiledCache sync.Map
	// compiledCount is how many entries compiledCache holds or is about to.
	compiledCount atomic.Int64
)

// compile is Parse without the cache: expr as given (for errors), trimmed
// as parsed.
func compile(expr, trimmed string) (Schedule, error) {
	fields := strings.Fields(trimmed)
	if len(fields) == 1 && strings.HasPrefix(fields[0], "@") {
		m, ok := macros[strings.ToLower(fields[0])]
		if !ok {
			return Schedule{}, invalid(expr, "unsupported macro; use @hourly, @daily, @weekly, @monthly, @yearly or five fields", nil)
		}
		fields = strings.Fields(m)
	}
	if len(fields) != 5 {
		detail := fmt.Sprintf("has %d fields, want 5 (minute hour day-of-month month day-of-week)", len(fields))
		if len(fields) == 6 || len(fields) == 7 {
			detail += "; seconds and year fields are not supported"
		}
		return Schedule{}, invalid(expr, detail, nil)
	}
	// gronx replaces month and weekday names anywhere in the expression
	// ("MON * * * *" would fire at minute 1); names belong only to the
	// month and day-of-week fields.
	for i, name := range []string{"minute", "hour", "day-of-month"} {
		if strings.ContainsFunc(strings.ToUpper(fields[i]), func(r rune) bool {
			return r >= 'A' && r <= 'Z' && !(i == 2 && (r == 'L' || r == 'W'))
		}) {
			return Schedule{}, invalid(expr, fmt.Sprintf("%s field %q contains letters", name, fields[i]), nil)
		}
	}
	segs, err := gronx.Segments(strings.Join(fields, " "))
	if err != nil {
		return Schedule{}, invalid(expr, "cannot split into fields", err)
	}
	if len(segs) != 6 {
		return Schedule{}, invalid(expr, fmt.Sprintf("cannot split into fields (got %d)", len(segs)), nil)
	}
	c := &compiled{expr: trimmed, segs: segs}
	if err := c.compileFields(); err != nil {
		return Schedule{}, invalid(expr, "", err)
	}
	if !c.firesAtAll() {
		return Schedule{}, invalid(expr, "never fires", nil)
	}
	return Schedule{c: c}, nil
}

// fieldSpec describes how to probe one cron field with gronx's checker: the
// segment position, the values the field ranges over, and an instant at
// which that field has a given value.
type fieldSpec struct {
	name   string
	pos    int
	lo, hi int
	at     func(v int) time.Time
}

var fieldSpecs = []fieldSpec{
	{"minute", 1, 0, 59, func(v int) time.Time { return time.Date(2001, 1, 1, 0, v, 0, 0, time.UTC) }},
	{"hour", 2, 0, 23, func(v int) time.Time { return time.Date(2001, 1, 1, v, 0, 0, 0, time.UTC) }},
	// January 2001 has 31 days and starts on a Monday, so days 1..31 and
	// 1..7 reach every day-of-month and every weekday.
	{"day-of-month", 3, 1, 31, func(v int) time.Time { return time.Date(2001, 1, v, 0, 0, 0, 0, time.UTC) }},
	{"month", 4, 1, 12, func(v int) time.Time { return time.Date(2001, time.Month(v), 1, 0, 0, 0, 0, time.UTC) }},
	{"day-of-week", 5, 1, 7, func(v int) time.Time { return time.Date(2001, 1, v, 0, 0, 0, 0, time.UTC) }},
}

// Parts using the L, W and # modifiers must have exactly these shapes. gronx
// reads only the number in front of the modifier and ignores what follows
// (it takes "1W-3" for "1W"), so without this gate such garbage would be
// accepted silently.
var (
	domModifier = regexp.MustCompile(`^(L|[0-9]{1,2}W)$`)
	dowModifier = regexp.MustCompile(`^([0-7]L|[0-7]#[1-5])$`)
)

// checkModifier rejects a day-of-month or day-of-week part that uses L, W or
// # in a shape gronx would misread. Other fields reject these letters
// themselves.
func checkModifier(f fieldSpec, part string) error {
	if !strings.ContainsAny(part, "LW#") {
		return nil
	}
	switch {
	case f.pos == 3 && !domModifier.MatchString(part):
		return fmt.Errorf("%s part %q: want L or nW", f.name, part)
	case f.pos == 5 && !dowModifier.MatchString(part):
		return fmt.Errorf("%s part %q: want nL or n#k (k 1..5)", f.name, part)
	}
	return nil
}

// compileFields validates every comma-separated part of every field with
// gronx's checker at every value the field can take, so that an error hidden
// behind an earlier matching part (as in "*,99") is still reported, and
// records the minute, hour and month bitmaps. It fails if a field matches no
// value at all.
func (c *compiled) compileFields() error {
	chk := &gronx.SegmentChecker{}
	for _, f := range fieldSpecs {
		var mask uint64
		for part := range strings.SplitSeq(c.segs[f.pos], ",") {
			if err := checkModifier(f, part); err != nil {
				return err
			}
			for v := f.lo; v <= f.hi; v++ {
				chk.SetRef(f.at(v))
				due, err := chk.CheckDue(part, f.pos)
				if err != nil {
					return fmt.Errorf("%s field %q: %w", f.name, c.segs[f.pos], err)
				}
				if due {
					mask |= 1 << v
				}
			}
		}
		// Day-of-month and day-of-week parts like L or 1#2 depend on the
		// month; firesAtAll checks those fields together.
		if mask == 0 && f.pos != 3 && f.pos != 5 {
			return fmt.Errorf("%s field %q matches no value", f.name, c.segs[f.pos])
		}
		switch f.pos {
		case 1:
			c.minutes = mask
		case 2:
			c.hours = uint32(mask)
		case 4:
			c.months = uint16(mask)
		}
	}
	return nil
}

// firesAtAll reports whether some allowed month has a matching day in some
// kind of month. Every kind (month, weekday of the 1st, leap February)
// occurs in every 400-year Gregorian cycle, so this is exactly "fires at
// least once in any 400 consecutive years".
func (c *compiled) firesAtAll() bool {
	for m := 1; m <= 12; m++ {
		if c.months&(1<<m) == 0 {
			continue
		}
		for w := range 7 {
			for leap := range 2 {
				if leap == 1 && m != 2 {
					continue
				}
				if c.kindMask(m, w, leap)&^1 != 0 {
					return true
				}
			}
		}
	}
	return false
}

// reprYear[m-1][w][leap] is a year whose month m starts on weekday w (and, for
// February, is a leap year iff leap == 1). Month structure is all that the
// day fields can depend on, so such a year stands for every year like it.
var reprYear = func() (out [12][7][2]int) {
	// 2000..2027 holds all 14 kinds of year (7 weekdays x leap or not).
	for y := 2000; y <= 2027; y++ {
		for m := time.January; m <= time.December; m++ {
			w := int(time.Date(y, m, 1, 0, 0, 0, 0, time.UTC).Weekday())
			leap := 0
			if m == time.February && isLeap(y) {
				leap = 1
			}
			if out[m-1][w][leap] == 0 {
				out[m-1][w][leap] = y
			}
		}
	}
	return out
}()

func isLeap(y int) bool { return y%4 == 0 && (y%100 != 0 || y%400 == 0) }

func daysIn(y int, m time.Month) int {
	return time.Date(y, m+1, 0, 0, 0, 0, 0, time.UTC).Day()
}

// dayMask returns the days (bits 1..31) of month m of year y on which the
// day-of-month and day-of-week fields match; bit 0 is always set and carries
// no meaning. The month field is not applied.
func (c *compiled) dayMask(y int, m time.Month) uint64 {
	w := int(time.Date(y, m, 1, 0, 0, 0, 0, time.UTC).Weekday())
	leap := 0
	if m == time.February && isLeap(y) {
		leap = 1
	}
	return c.kindMask(int(m), w, leap)
}

// kindMask computes (once, then caches) the day mask of a kind of month by
// asking gronx, for every day of a representative month, whether the
// day-of-month and day-of-week fields are due together. Concurrent callers
// may both compute it; they store the same value.
func (c *compiled) kindMask(m, w, leap int) uint64 {
	slot := &c.days[m-1][w][leap]
	if v := slot.Load(); v != 0 {
		return v
	}
	y := reprYear[m-1][w][leap]
	if isAny(c.segs[3]) && isAny(c.segs[5]) {
		// gronx skips "*" and "?" fields, so every day is due.
		v := uint64(1)<<(daysIn(y, time.Month(m))+1) - 1
		slot.Store(v)
		return v
	}
	g := &gronx.Gronx{C: &gronx.SegmentChecker{}}
	segs := []string{"*", "*", "*", c.segs[3], "*", c.segs[5]}
	v := uint64(1)
	for d := 1; d <= daysIn(y, time.Month(m)); d++ {
		g.C.SetRef(time.Date(y, time.Month(m), d, 0, 0, 0, 0, time.UTC))
		if due, err := g.SegmentsDue(segs); err == nil && due {
			v |= 1 << d
		}
	}
	slot.Store(v)
	return v
}

func isAny(seg string) bool { return seg == "*" || seg == "?" }

// maxMonths bounds every search: a parsed schedule fires at least once in any
// 400 consecutive years (see firesAtAll), so searching one more year than
// that always finds a firing.
const maxMonths = 401 * 12

// String returns the expression as given to Parse (trimmed).
func (s Schedule) String() string {
	if s.c == nil {
		return ""
	}
	return s.c.expr
}

// MarshalText encodes s as its expression, so that a Schedule inside a plan
// or model serialises as a plain string.
func (s Schedule) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText parses text with Parse, so decoding rejects what Parse
// rejects (with a *Error).
func (s *Schedule) UnmarshalText(text []byte) error {
	p, err := Parse(string(text))
	if err != nil {
		return err
	}
	*s = p
	return nil
}

// IsZero reports whether s is the zero Schedule (not produced by Parse).
func (s Schedule) IsZero() bool { return s.c == nil }

// Next returns the first firing strictly after t, in UTC. Firings are on
// whole minutes. It returns the zero time only for the zero Schedule. The
// cost is a few bit operations per calendar month searched.
func (s Schedule) Next(t time.Time) time.Time {
	if s.c == nil {
		return time.Time{}
	}
	return s.c.next(t)
}

// Prev returns the last firing at or before t (inclusive), in UTC. It returns
// the zero time only for the zero Schedule.
func (s Schedule) Prev(t time.Time) time.Time {
	if s.c == nil {
		return time.Time{}
	}
	return s.c.prev(t)
}

func (c *compiled) next(t time.Time) time.Time {
	t = t.UTC().Truncate(time.Minute).Add(time.Minute)
	y, mo, d := t.Date()
	h, mi := t.Hour(), t.Minute()
	for range maxMonths {
		if c.months&(1<<mo) != 0 {
			// Days from d on; bit 0 (the computed marker) is below d.
			days := c.dayMask(y, mo) &^ (1<<d - 1)
			for days != 0 {
				dd := bits.TrailingZeros64(days)
				if dd != d {
					h, mi = 0, 0
				}
				if hh, mm, ok := c.firstTimeFrom(h, mi); ok {
					return time.Date(y, mo, dd, hh, mm, 0, 0, time.UTC)
				}
				days &= days - 1
				h, mi = 0, 0
			}
		}
		mo++
		if mo > time.December {
			mo, y = time.January, y+1
		}
		d, h, mi = 1, 0, 0
	}
	return time.Time{}
}

// firstTimeFrom returns the first matching (hour, minute) at or after h:mi
// within one day.
func (c *compiled) firstTimeFrom(h, mi int) (int, int, bool) {
	hours := c.hours &^ (1<<h - 1)
	for hours != 0 {
		hh := bits.TrailingZeros32(hours)
		from := 0
		if hh == h {
			from = mi
		}
		if mins := c.minutes &^ (1<<from - 1); mins != 0 {
			return hh, bits.TrailingZeros64(mins), true
		}
		hours &= hours - 1
	}
	return 0, 0, false
}

func (c *compiled) prev(t time.Time) time.Time {
	t = t.UTC().Truncate(time.Minute)
	y, mo, d := t.Date()
	h, mi := t.Hour(), t.Minute()
	for range maxMonths {
		if c.months&(1<<mo) != 0 {
			// Days up to d, without bit 0.
			days := c.dayMask(y, mo) & (1<<(d+1) - 1) &^ 1
			for days != 0 {
				dd := 63 - bits.LeadingZeros64(days)
				if dd != d {
					h, mi = 23, 59
				}
				if hh, mm, ok := c.lastTimeUpTo(h, mi); ok {
					return time.Date(y, mo, dd, hh, mm, 0, 0, time.UTC)
				}
				days &^= 1 << dd
				h, mi = 23, 59
			}
		}
		mo--
		if mo < time.January {
			mo, y = time.December, y-1
		}
		d, h, mi = 31, 23, 59
	}
	return time.Time{}
}

// lastTimeUpTo returns the last matching (hour, minute) at or before h:mi
// within one day.
func (c *compiled) lastTimeUpTo(h, mi int) (int, int, bool) {
	hours := c.hours & (1<<(h+1) - 1)
	for hours != 0 {
		hh := 31 - bits.LeadingZeros32(hours)
		upTo := 59
		if hh == h {
			upTo = mi
		}
		if mins := c.minutes & (1<<(upTo+1) - 1); mins != 0 {
			return hh, 63 - bits.LeadingZeros64(mins), true
		}
		hours &^= 1 << hh
	}
	return 0, 0, false
}
