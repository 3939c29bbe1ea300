package dialect

import (
	"strings"
)

// A date format, parsed: fields and literal text.
type fmtElem struct {
	field byte   // 'Y' year (4 digits), 'm' month, 'd' day, 'H' hour (24), 'M' minute, 'S' second; 0 for literal
	lit   string // the literal text when field is 0
}

// formatParser parses a source dialect's format string; ok is false for a
// field it does not carry over.
type formatParser func(f string) ([]fmtElem, bool)

// javaFormat parses Spark's and Hive's (Java's) date patterns: yyyy MM dd
// HH mm ss and punctuation.
func javaFormat(f string) ([]fmtElem, bool) {
	var out []fmtElem
	for i := 0; i < len(f); {
		found := false
		for pat, field := range map[string]byte{"yyyy": 'Y', "MM": 'm', "dd": 'd', "HH": 'H', "mm": 'M', "ss": 'S'} {
			if strings.HasPrefix(f[i:], pat) && (i+len(pat) == len(f) || f[i+len(pat)] != pat[0]) {
				out = append(out, fmtElem{field: field})
				i += len(pat)
				found = true
				break
			}
		}
		if found {
			continue
		}
		if c := f[i]; isWordStart(c) || c == '\'' {
			return nil, false
		}
		out = append(out, fmtElem{lit: f[i : i+1]})
		i++
	}
	return out, true
}

// specFormat parses %-specifier formats with the given meaning of each
// specifier letter.
func specFormat(spec map[byte][]fmtElem) formatParser {
	return func(f string) ([]fmtElem, bool) {
		var out []fmtElem
		for i := 0; i < len(f); i++ {
			if f[i] != '%' {
				out = append(out, fmtElem{lit: f[i : i+1]})
				continue
			}
			if i+1 >= len(f) {
				return nil, false
			}
			i++
			if f[i] == '%' {
				out = append(out, fmtElem{lit: "%"})
				continue
			}
			es, ok := spec[f[i]]
			if !ok {
				return nil, false
			}
			out = append(out, es...)
		}
		return out, true
	}
}

var (
	ymd = []fmtElem{{field: 'Y'}, {lit: "-"}, {field: 'm'}, {lit: "-"}, {field: 'd'}}
	hms = []fmtElem{{field: 'H'}, {lit: ":"}, {field: 'M'}, {lit: ":"}, {field: 'S'}}
	// mysqlFormat is MySQL's DATE_FORMAT: %i is minutes, %s seconds.
	mysqlFormat = specFormat(map[byte][]fmtElem{'Y': {{field: 'Y'}}, 'm': {{field: 'm'}}, 'd': {{field: 'd'}},
		'H': {{field: 'H'}}, 'i': {{field: 'M'}}, 's': {{field: 'S'}}, 'S': {{field: 'S'}}, 'T': hms})
	// strftimeFormat is BigQuery's FORMAT_DATE and FORMAT_TIMESTAMP.
	strftimeFormat = specFormat(map[byte][]fmtElem{'Y': {{field: 'Y'}}, 'm': {{field: 'm'}}, 'd': {{field: 'd'}},
		'H': {{field: 'H'}}, 'M': {{field: 'M'}}, 'S': {{field: 'S'}}, 'F': ymd, 'T': hms})
)

// renderFormat writes elems as engine to's format string (without quotes).
func renderFormat(elems []fmtElem, to string) string {
	var b strings.Builder
	for _, e := range elems {
		if e.field == 0 {
			switch {
			case to == Postgres && isWordStart(e.lit[0]):
				b.WriteString(`"` + e.lit + `"`)
			case to != Postgres && e.lit == "%":
				b.WriteString("%%")
			default:
				b.WriteString(strings.ReplaceAll(e.lit, "'", "''"))
			}
			continue
		}
		switch to {
		case Postgres:
			b.WriteString(map[byte]string{'Y': "YYYY", 'm': "MM", 'd': "DD", 'H': "HH24", 'M': "MI", 'S': "SS"}[e.field])
		case Trino:
			b.WriteString(map[byte]string{'Y': "%Y", 'm': "%m", 'd': "%d", 'H': "%H", 'M': "%i", 'S': "%s"}[e.field])
		default:
			b.WriteString(map[byte]string{'Y': "%Y", 'm': "%m", 'd': "%d", 'H': "%H", 'M': "%M", 'S': "%S"}[e.field])
		}
	}
	return b.String()
}

// formatRule writes a date-formatting call whose format is argument fmtArg
// and value argument valArg as the engine's: DuckDB's strftime(x, f),
// Trino's date_format(x, f), PostgreSQL's to_char(x, f). The format must
// be a string literal of fields the parser knows.
func formatRule(parse formatParser, fmtArg, valArg int) rule {
	return func(t *transpiler, c call) error {
		if err := t.arity(c, 2); err != nil {
			return err
		}
		k := significant(c.args[fmtArg], 0)
		a := c.args[fmtArg]
		if k >= len(a) || a[k].group || a[k].tok.Kind != String || significant(a, k+1) != len(a) || strings.Contains(a[k].tok.Text, `\`) {
			return t.refuse(c.name.Off, strings.ToUpper(c.name.Text)+"(...)", "the format must be a plain string literal to be carried over")
		}
		lit := a[k].tok.Text
		elems, ok := parse(lit[1 : len(lit)-1])
		if !ok {
			return t.refuse(a[k].tok.Off, lit, "a field of this format has no common spelling (yyyy MM dd HH mm ss, or %%Y %%m %%d %%H %%M %%S, carry over)")
		}
		fn := map[string]string{DuckDB: "strftime", Trino: "date_format", Postgres: "to_char"}[t.to]
		t.emit(fn+"(", c.name.Off)
		if err := t.seq(c.args[valArg]); err != nil {
			return err
		}
		t.emit(", '"+renderFormat(elems, t.to)+"')", c.name.Off)
		t.keepLines(c.args[fmtArg], c.name.Off)
		return nil
	}
}
