package plan

import (
	"fmt"
	"reflect"
	"strings"
	"time"
	"unicode"

	"github.com/gapless-dev/gapless/model"
)

// renderHeader renders a model's MODEL (...) header as it takes effect:
// one attribute per line, in a fixed order, with the project's defaults
// applied and attributes at their zero value left out. It is what a plan
// diffs to show a header change, so two models render equal iff their
// headers mean the same. An attribute this renderer does not know (a field
// added to model.Model later) is still rendered, by its field name, so no
// header change goes unshown.
func renderHeader(m *model.Model) string {
	var lines []string
	add := func(format string, args ...any) { lines = append(lines, fmt.Sprintf(format, args...)) }
	add("name %s", m.Name)
	if props := kindProperties(m); props != "" {
		add("kind %s (%s)", m.Kind, props)
	} else {
		add("kind %s", m.Kind)
	}
	if m.Dialect != "" {
		add("dialect %s", m.Dialect)
	}
	if m.Cron != "" {
		add("cron %s", quote(m.Cron))
	}
	if m.IntervalUnit != "" {
		add("interval_unit %s", m.IntervalUnit)
	}
	if !m.Start.IsZero() {
		add("start %s", quote(headerTime(m.Start)))
	}
	if !m.End.IsZero() {
		add("end %s", quote(headerTime(m.End)))
	}
	if m.AllowPartials {
		add("allow_partials true")
	}
	if !m.Enabled {
		add("enabled false")
	}
	if m.Owner != "" {
		add("owner %s", quote(m.Owner))
	}
	if m.Description != "" {
		add("description %s", quote(m.Description))
	}
	if len(m.Tags) > 0 {
		add("tags [%s]", strings.Join(m.Tags, ", "))
	}
	if len(m.Grain) > 0 {
		add("grain (%s)", strings.Join(m.Grain, ", "))
	}
	if len(m.Columns) > 0 {
		cols := make([]string, len(m.Columns))
		for i, c := range m.Columns {
			cols[i] = c.Name + " " + c.Type
		}
		add("columns (%s)", strings.Join(cols, ", "))
	}
	lines = append(lines, otherAttributes(m)...)
	return "MODEL (\n  " + strings.Join(lines, ",\n  ") + "\n);\n"
}

// kindProperties renders the properties of the model's kind.
func kindProperties(m *model.Model) string {
	var ps []string
	if m.TimeColumn != "" {
		ps = append(ps, "time_column "+m.TimeColumn)
	}
	switch len(m.UniqueKey) {
	case 0:
	case 1:
		ps = append(ps, "unique_key "+m.UniqueKey[0])
	default:
		ps = append(ps, "unique_key ("+strings.Join(m.UniqueKey, ", ")+")")
	}
	if m.Lookback != 0 {
		ps = append(ps, fmt.Sprintf("lookback %d", m.Lookback))
	}
	if m.BatchSize != 0 {
		ps = append(ps, fmt.Sprintf("batch_size %d", m.BatchSize))
	}
	if m.BatchConcurrency != 0 {
		ps = append(ps, fmt.Sprintf("batch_concurrency %d", m.BatchConcurrency))
	}
	if m.ForwardOnly {
		ps = append(ps, "forward_only true")
	}
	if m.SeedPath != "" {
		ps = append(ps, "path "+quote(m.SeedPath))
	}
	if m.Kind.IsSCDType2() {
		ps = append(ps, m.SCD.String())
	}
	if m.InsertOverwrite {
		ps = append(ps, "insert_overwrite true")
	}
	return strings.Join(ps, ", ")
}

// renderedFields are the model.Model fields renderHeader spells out, or
// leaves out on purpose (the query, and where the model was read from).
var renderedFields = map[string]bool{
	"Name": true, "Kind": true, "Dialect": true, "TimeColumn": true, "Lookback": true, "BatchSize": true,
	"BatchConcurrency": true, "ForwardOnly": true, "UniqueKey": true, "SeedPath": true, "Columns": true, "SCD": true, "InsertOverwrite": true,
	"Cron": true, "IntervalUnit": true, "IntervalUnitExplicit": true, "Start": true, "End": true,
	"AllowPartials": true, "Enabled": true, "Owner": true, "Description": true, "Tags": true, "Grain": true,
	"Query": true, "Path": true, "QueryPos": true, "HeaderPos": true,
}

// otherAttributes renders every other exported, non-zero field of m as
// "snake_name value".
func otherAttributes(m *model.Model) []string {
	v := reflect.ValueOf(m).Elem()
	t := v.Type()
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() || renderedFields[f.Name] || v.Field(i).IsZero() {
			continue
		}
		out = append(out, fmt.Sprintf("%s %v", snake(f.Name), v.Field(i).Interface()))
	}
	return out
}

// snake turns a Go field name into a header attribute name: TimeFormat ->
// time_format.
func snake(s string) string {
	var b strings.Builder
	for i, r := range s {
		if unicode.IsUpper(r) {
			if i > 0 {
				b.WriteByte('_')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}

// quote renders a SQL string literal.
func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// headerTime renders a start or end as a model file spells it: a date at
// midnight, else RFC 3339.
func headerTime(t time.Time) string {
	t = t.UTC()
	if t.Equal(t.Truncate(24 * time.Hour)) {
		return t.Format(time.DateOnly)
	}
	return t.Format(time.RFC3339Nano)
}
