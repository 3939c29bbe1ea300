package unittest

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gapless-dev/gapless/macro"
)

// quoteIdent quotes a DuckDB identifier.
func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// quoteString is a SQL string literal.
func quoteString(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// tableParts splits a table name as written (catalog.schema.table or
// schema.table) into its parts, unquoting double-quoted ones.
func tableParts(name string) []string {
	var parts []string
	var b strings.Builder
	quoted := false
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '"' && quoted && i+1 < len(name) && name[i+1] == '"':
			b.WriteByte('"')
			i++
		case c == '"':
			quoted = !quoted
		case c == '.' && !quoted:
			parts = append(parts, b.String())
			b.Reset()
		default:
			b.WriteByte(c)
		}
	}
	return append(parts, b.String())
}

// quoteTable quotes every part of a table name.
func quoteTable(name string) string {
	parts := tableParts(name)
	for i, p := range parts {
		parts[i] = quoteIdent(p)
	}
	return strings.Join(parts, ".")
}

// literal renders a Cell value as a DuckDB literal: a string stays a
// string literal, which DuckDB casts to the column's type on insert.
func literal(v any) string {
	switch x := v.(type) {
	case nil:
		return "NULL"
	case bool:
		if x {
			return "TRUE"
		}
		return "FALSE"
	case int64:
		return strconv.FormatInt(x, 10)
	case uint64:
		return strconv.FormatUint(x, 10)
	case int:
		return strconv.Itoa(x)
	case float64:
		switch {
		case math.IsNaN(x):
			return "'nan'::DOUBLE"
		case math.IsInf(x, 1):
			return "'inf'::DOUBLE"
		case math.IsInf(x, -1):
			return "'-inf'::DOUBLE"
		}
		s := strconv.FormatFloat(x, 'g', -1, 64)
		if !strings.ContainsAny(s, ".eEn") {
			s += ".0"
		}
		return s
	case string:
		return quoteString(x)
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = literal(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = quoteString(k) + ": " + literal(x[k])
		}
		return "{" + strings.Join(parts, ", ") + "}"
	}
	return quoteString(fmt.Sprint(v))
}

// frozenTime rewrites the SQL functions that read the clock
// (CURRENT_TIMESTAMP, CURRENT_DATE, CURRENT_TIME, now(), today(), ...) to
// literals of exec, as SQLMesh does for a test's execution_time: the
// query's answer then does not depend on when the test runs. Strings,
// quoted identifiers and comments are left alone, as is a name qualified
// by a dot (a column t.current_date).
func frozenTime(sql string, exec time.Time) string {
	exec = exec.UTC()
	ts := "CAST(" + quoteString(exec.Format("2006-01-02 15:04:05.999999")) + " AS TIMESTAMP)"
	date := "CAST(" + quoteString(exec.Format("2006-01-02")) + " AS DATE)"
	clock := "CAST(" + quoteString(exec.Format("15:04:05.999999")) + " AS TIME)"
	repl := map[string]string{
		"current_timestamp": ts, "now": ts, "get_current_timestamp": ts, "transaction_timestamp": ts,
		"localtimestamp": ts, "current_date": date, "today": date, "current_time": clock, "localtime": clock,
	}
	var b strings.Builder
	i := 0
	for i < len(sql) {
		if end := macro.SkipOpaque(sql, i); end > i {
			b.WriteString(sql[i:end])
			i = end
			continue
		}
		c := sql[i]
		switch {
		case isWord(c):
			j := i
			for j < len(sql) && isWord(sql[j]) {
				j++
			}
			word := sql[i:j]
			r, ok := repl[strings.ToLower(word)]
			prev := strings.TrimRight(sql[:i], " \t\r\n")
			if !ok || strings.HasSuffix(prev, ".") || (i > 0 && (sql[i-1] == '@' || sql[i-1] == '$')) {
				b.WriteString(word)
				i = j
				continue
			}
			k := j
			for k < len(sql) && strings.IndexByte(" \t\r\n", sql[k]) >= 0 {
				k++
			}
			hasParens := false
			if k < len(sql) && sql[k] == '(' {
				m := k + 1
				for m < len(sql) && strings.IndexByte(" \t\r\n", sql[m]) >= 0 {
					m++
				}
				if m < len(sql) && sql[m] == ')' {
					hasParens, j = true, m+1
				}
			}
			// now and today are functions: without parentheses they are
			// column names.
			if !hasParens && (strings.EqualFold(word, "now") || strings.EqualFold(word, "today") ||
				strings.EqualFold(word, "get_current_timestamp") || strings.EqualFold(word, "transaction_timestamp")) {
				b.WriteString(word)
				i += len(word)
				continue
			}
			b.WriteString(r)
			i = j
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String()
}

func isWord(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}
