package model

import (
	"fmt"
	"strings"
	"time"

	"github.com/gapless-dev/gapless/interval"
)

// A time format is how a string-typed time column spells time, written as in
// SQLMesh: time_column (ds, '%Y-%m-%d'). gapless compares such a column
// with an interval's bounds as text, the bounds rendered in the format, so
// the format must sort as time does: its fields run from the year down,
// none skipped (%Y, then %m, %d, %H, %M, %S), each fixed-width and
// zero-padded, with constant text between them. Then for any two instants
// a < b, Format(a) <= Format(b) byte by byte, and equality only when both
// fall in the same unit of the format's finest field.

// timeField is one strftime directive gapless supports, in the only order a
// format may use them.
type timeField struct {
	directive byte
	width     int // digits, zero-padded
	name      string
	value     func(t time.Time) int
}

var timeFields = []timeField{
	{'Y', 4, "year", func(t time.Time) int { return t.Year() }},
	{'m', 2, "month", func(t time.Time) int { return int(t.Month()) }},
	{'d', 2, "day", func(t time.Time) int { return t.Day() }},
	{'H', 2, "hour", func(t time.Time) int { return t.Hour() }},
	{'M', 2, "minute", func(t time.Time) int { return t.Minute() }},
	{'S', 2, "second", func(t time.Time) int { return t.Second() }},
}

// timePart is literal text, or the field at index field of timeFields.
type timePart struct {
	text  string
	field int // -1 for text
}

// TimeFormat is a parsed, valid time format.
type TimeFormat struct {
	spec   string
	parts  []timePart
	fields int // how many of timeFields it uses (always a prefix)
}

// ParseTimeFormat checks spec (see the comment above) and returns it
// parsed. %% is a literal percent sign; every other character is literal
// text. Each error says what is wrong and how to write it.
func ParseTimeFormat(spec string) (TimeFormat, error) {
	var (
		parts  []timePart
		text   strings.Builder
		fields int
	)
	for i := 0; i < len(spec); i++ {
		c := spec[i]
		if c != '%' {
			text.WriteByte(c)
			continue
		}
		if i+1 >= len(spec) {
			return TimeFormat{}, fmt.Errorf("time format %q ends with a lone %%", spec)
		}
		i++
		d := spec[i]
		if d == '%' {
			text.WriteByte('%')
			continue
		}
		idx := -1
		for j, f := range timeFields {
			if f.directive == d {
				idx = j
			}
		}
		switch {
		case idx < 0:
			return TimeFormat{}, fmt.Errorf("time format %q uses %%%c, which gapless does not support: use %%Y %%m %%d %%H %%M %%S", spec, d)
		case idx < fields:
			return TimeFormat{}, fmt.Errorf("time format %q uses %%%c twice or out of order", spec, d)
		case idx > fields:
			want := timeFields[fields]
			return TimeFormat{}, fmt.Errorf("time format %q has %%%c (%s) before %%%c (%s): the column is compared as text, "+
				"so its format must run from the year down, none skipped (for example '%%Y-%%m-%%d')", spec, d, timeFields[idx].name, want.directive, want.name)
		}
		if text.Len() > 0 {
			parts = append(parts, timePart{text: text.String(), field: -1})
			text.Reset()
		}
		parts = append(parts, timePart{field: idx})
		fields++
	}
	if fields == 0 {
		return TimeFormat{}, fmt.Errorf("time format %q has no field: write at least %%Y (for example '%%Y-%%m-%%d')", spec)
	}
	if text.Len() > 0 {
		parts = append(parts, timePart{text: text.String(), field: -1})
	}
	return TimeFormat{spec: spec, parts: parts, fields: fields}, nil
}

// String is the format as written.
func (f TimeFormat) String() string { return f.spec }

// Format renders t (in UTC) in the format. Years before 1000 or after 9999
// do not fit %Y's four digits and do not sort; model times never are.
func (f TimeFormat) Format(t time.Time) string {
	t = t.UTC()
	var b strings.Builder
	for _, p := range f.parts {
		if p.field < 0 {
			b.WriteString(p.text)
			continue
		}
		fd := timeFields[p.field]
		fmt.Fprintf(&b, "%0*d", fd.width, fd.value(t))
	}
	return b.String()
}

// Resolves reports whether the format tells every boundary of unit u from
// the next one: a day format cannot bound hourly intervals, whose start and
// end would render the same.
func (f TimeFormat) Resolves(u interval.Unit) bool {
	need := 0 // index into timeFields of the finest field u needs
	switch u {
	case interval.Year:
		need = 0
	case interval.Month:
		need = 1
	case interval.Day:
		need = 2
	case interval.Hour:
		need = 3
	default: // five_minute, quarter_hour, half_hour
		need = 4
	}
	return f.fields > need
}

// finest names the finest field of f.
func (f TimeFormat) finest() string { return timeFields[f.fields-1].name }
