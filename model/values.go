package model

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gapless-dev/gapless/dialect"
	"github.com/gapless-dev/gapless/model/suggest"
)

// Sentinel errors wrapped by ParseTime and ParseDialect, for errors.Is.
var (
	ErrBadTime        = errors.New("bad time")
	ErrUnknownDialect = errors.New("unknown dialect")
)

// Dialects lists the dialects a model may declare: every name of
// dialect.Names (sqlglot's, which SQLMesh accepts).
var Dialects = func() []Dialect {
	out := make([]Dialect, len(dialect.Names))
	for i, n := range dialect.Names {
		out[i] = Dialect(n)
	}
	return out
}()

// ParseDialect returns the dialect named s, compared case-insensitively. The
// error for an unknown name wraps ErrUnknownDialect and suggests the closest
// known one.
func ParseDialect(s string) (Dialect, error) {
	if name, settings, ok := strings.Cut(s, ","); ok && dialect.Known(strings.ToLower(strings.TrimSpace(name))) {
		return "", fmt.Errorf("%w %q: dialect settings (%s) are not supported; write the dialect's name alone", ErrUnknownDialect, s, strings.TrimSpace(settings))
	}
	for _, d := range Dialects {
		if strings.EqualFold(string(d), strings.TrimSpace(s)) {
			return d, nil
		}
	}
	names := make([]string, len(Dialects))
	for i, d := range Dialects {
		names[i] = string(d)
	}
	if hint, ok := suggest.Closest(s, names); ok {
		return "", fmt.Errorf("%w %q: did you mean %s?", ErrUnknownDialect, s, hint)
	}
	return "", fmt.Errorf("%w %q (dialects: %s)", ErrUnknownDialect, s, strings.Join(names, ", "))
}

// timeLayouts are the accepted forms of a start or end value, besides RFC 3339.
const (
	layoutDate    = "2006-01-02"
	layoutMinutes = "2006-01-02 15:04"
	layoutSeconds = "2006-01-02 15:04:05"
)

// timeForms describes the accepted forms, for messages.
const timeForms = "want 'YYYY-MM-DD', 'YYYY-MM-DD HH:MM[:SS]' or RFC 3339"

// ParseTime parses a start or end value. Accepted forms, all read as UTC
// unless they carry an offset (RFC 3339), and always returned in UTC:
//
//	2024-01-01
//	2024-01-01 12:30        (also with a T instead of the space)
//	2024-01-01 12:30:15     (optionally with fractional seconds)
//	2024-01-01T12:30:15+02:00 or ...Z   (RFC 3339)
//
// The error wraps ErrBadTime.
func ParseTime(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	var layout string
	switch {
	case len(s) == len(layoutDate):
		layout = layoutDate
	case hasZone(s):
		if s[10] == ' ' {
			s = s[:10] + "T" + s[11:]
		}
		layout = time.RFC3339Nano
	default:
		if len(s) > 10 && s[10] == 'T' {
			s = s[:10] + " " + s[11:]
		}
		layout = layoutSeconds
		if len(s) == len(layoutMinutes) {
			layout = layoutMinutes
		}
	}
	t, err := time.Parse(layout, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%w %q: %w", ErrBadTime, s, err)
	}
	return t.UTC(), nil
}

// hasZone reports whether a date-time string ends in a zone: Z or ±hh:mm
// after the time of day.
func hasZone(s string) bool {
	if len(s) <= 10 {
		return false
	}
	tail := s[10:]
	return strings.HasSuffix(tail, "Z") || strings.HasSuffix(tail, "z") ||
		strings.ContainsAny(tail, "+") || strings.Contains(tail[1:], "-")
}

// timeProblem explains a ParseTime error in a few words: the out-of-range
// field when Go names one, otherwise the accepted forms.
func timeProblem(err error) string {
	var pe *time.ParseError
	if errors.As(err, &pe) && pe.Message != "" {
		return strings.TrimPrefix(pe.Message, ": ")
	}
	return timeForms
}

// formatTime renders a UTC time the way a model file would write it.
func formatTime(t time.Time) string {
	if t.Hour() == 0 && t.Minute() == 0 && t.Second() == 0 && t.Nanosecond() == 0 {
		return t.Format(layoutDate)
	}
	return t.Format(layoutSeconds)
}
