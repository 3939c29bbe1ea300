package cron

import (
	"errors"
	"testing"
	"time"

	"github.com/adhocore/gronx"
)

// FuzzParse checks that any input either fails with a *Error wrapping
// ErrInvalid that quotes it, or yields a schedule whose Next, Prev and Unit
// are consistent with each other and with gronx, without panicking.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"0 12 * * *", "*/5 * * * *", "0 */2 * * *", "0 0 1,15 * *", "@weekly", "@monthly",
		"@yearly", "@hourly", "@daily", "@reboot", "* * * * *", "0 0 * * * *", "0 0 L * *",
		"0 0 15W * *", "0 0 * * 5L", "0 0 * * 1#2", "0 0 29 2 *", "0 0 30 2 *", "*,99 * * * *",
		"60/5 * * * *", "MON-FRI", "0 9 * JAN-MAR MON-FRI", "1-2-3 * * * *", "*/0 * * * *",
		"", "@", "? ? ? ? ?", "0 0 ? * 7", "5/15 1-23/4 */3 1-6/2 0-7/3",
	} {
		f.Add(seed)
	}
	refs := []time.Time{
		time.Date(2024, 2, 29, 23, 59, 30, 0, time.UTC),
		time.Date(1999, 12, 31, 23, 59, 0, 0, time.UTC),
		time.Date(2100, 3, 1, 0, 0, 0, 0, time.UTC),
	}
	f.Fuzz(func(t *testing.T, expr string) {
		s, err := Parse(expr)
		if err != nil {
			var ce *Error
			if !errors.As(err, &ce) || !errors.Is(err, ErrInvalid) || ce.Expr != expr {
				t.Fatalf("Parse(%q) returned an untyped error: %v", expr, err)
			}
			return
		}
		g := gronx.New()
		for _, at := range refs {
			n, p := s.Next(at), s.Prev(at)
			if !n.After(at) || p.After(at) || n.IsZero() || p.IsZero() {
				t.Fatalf("%q at %v: next %v prev %v", expr, at, n, p)
			}
			if !s.Prev(n).Equal(n) || !s.Next(p).Equal(n) {
				t.Fatalf("%q at %v: Next and Prev disagree (%v, %v)", expr, at, n, p)
			}
			g.C.SetRef(n)
			if due, err := g.SegmentsDue(s.c.segs); err != nil || !due {
				t.Fatalf("%q: gronx says %v is not due (%v)", expr, n, err)
			}
		}
		u, err := s.Unit()
		if err != nil {
			if !errors.Is(err, ErrTooFrequent) {
				t.Fatalf("%q: Unit: unexpected error %v", expr, err)
			}
			return
		}
		if !u.Valid() {
			t.Fatalf("%q: invalid unit %q", expr, u)
		}
	})
}
