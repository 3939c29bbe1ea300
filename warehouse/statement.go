package warehouse

import "strings"

// SplitLeadingWord returns sql's first keyword (letters and underscores,
// as written) and what follows it, after skipping whitespace, line
// comments (--) and nestable block comments (/* */), as DuckDB and
// PostgreSQL lex them. It returns "" and sql when sql does not start with
// a word (a parenthesis, a quote, an unterminated comment). Engines use it
// to name a statement in messages, never as the only check of what a
// statement is.
func SplitLeadingWord(sql string) (word, rest string) {
	i := skipSpace(sql, 0)
	j := i
	for j < len(sql) && (sql[j] >= 'a' && sql[j] <= 'z' || sql[j] >= 'A' && sql[j] <= 'Z' || sql[j] == '_') {
		j++
	}
	if j == i {
		return "", sql
	}
	return sql[i:j], sql[j:]
}

// PhysicalSchemaPrefix starts the name of every schema that holds
// gapless's physical tables (gapless__<schema>; see snapshot.PhysicalSchema).
const PhysicalSchemaPrefix = "gapless__"

// NamesPhysicalSchema reports whether sql mentions a physical schema: the
// prefix anywhere in its text, in any case, quoted or not. It errs on the
// side of yes (a string literal holding the prefix counts). It cannot see
// a physical table reached without its name: on PostgreSQL a write
// through a served view that is a plain SELECT of its table goes to that
// table.
func NamesPhysicalSchema(sql string) bool {
	return strings.Contains(strings.ToLower(sql), PhysicalSchemaPrefix)
}

// LeadingWord names sql's statement for a message: its first keyword,
// upper-cased, opening parentheses skipped; "the statement" when there is
// none.
func LeadingWord(sql string) string {
	i := skipSpace(sql, 0)
	for i < len(sql) && sql[i] == '(' {
		i = skipSpace(sql, i+1)
	}
	if w, _ := SplitLeadingWord(sql[i:]); w != "" {
		return strings.ToUpper(w)
	}
	return "the statement"
}

// skipSpace returns the offset of the first byte at or after i that is
// neither whitespace nor in a comment (len(sql) for an unterminated one).
func skipSpace(sql string, i int) int {
	for i < len(sql) {
		switch c := sql[i]; {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			i++
		case strings.HasPrefix(sql[i:], "--"):
			nl := strings.IndexByte(sql[i:], '\n')
			if nl < 0 {
				return len(sql)
			}
			i += nl + 1
		case strings.HasPrefix(sql[i:], "/*"):
			depth := 0
			for i < len(sql) {
				if strings.HasPrefix(sql[i:], "/*") {
					depth, i = depth+1, i+2
				} else if strings.HasPrefix(sql[i:], "*/") {
					depth, i = depth-1, i+2
					if depth == 0 {
						break
					}
				} else {
					i++
				}
			}
			if depth != 0 {
				return len(sql)
			}
		default:
			return i
		}
	}
	return i
}
