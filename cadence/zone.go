package cadence

import "time"

// The cron read in Spec.Location (SQLMesh's cron_tz): the expression's
// fields are matched against the wall clock of that zone, and each firing is
// the UTC instant of that wall-clock time. Around a daylight-saving change a
// wall-clock time that occurs twice fires once, and one that does not occur
// fires at the instant Go's time.Date gives it (an hour on either side);
// firings stay strictly increasing.

// zoned reports whether s reads its cron in a zone other than UTC.
func (s Spec) zoned() bool { return s.Location != nil && s.Location != time.UTC }

// next is the first firing strictly after t, in UTC.
func (s Spec) next(t time.Time) time.Time {
	if !s.zoned() {
		return s.Cron.Next(t)
	}
	w := wall(t, s.Location)
	for range 4 {
		n := s.Cron.Next(w)
		if n.IsZero() {
			return n
		}
		if at := s.instant(n); at.After(t) {
			return at
		}
		w = n
	}
	return time.Time{}
}

// prev is the last firing at or before t (inclusive), in UTC.
func (s Spec) prev(t time.Time) time.Time {
	if !s.zoned() {
		return s.Cron.Prev(t)
	}
	w := wall(t, s.Location)
	for range 4 {
		p := s.Cron.Prev(w)
		if p.IsZero() {
			return p
		}
		if at := s.instant(p); !at.After(t) {
			return at
		}
		w = p.Add(-time.Minute)
	}
	return time.Time{}
}

// wall is t's wall clock in loc, written as a UTC time (what the cron
// package matches its fields against).
func wall(t time.Time, loc *time.Location) time.Time {
	l := t.In(loc)
	return time.Date(l.Year(), l.Month(), l.Day(), l.Hour(), l.Minute(), l.Second(), l.Nanosecond(), time.UTC)
}

// instant is the UTC instant of wall clock w (a UTC-written time) in s's zone.
func (s Spec) instant(w time.Time) time.Time {
	return time.Date(w.Year(), w.Month(), w.Day(), w.Hour(), w.Minute(), 0, 0, s.Location).UTC()
}
