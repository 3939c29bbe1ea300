// Package macro implements SQLMesh's macros in a model's query: the time
// variables (@start_ds, @end_ts, @this_model, ...), user variables
// (configuration `variables`, @DEF), SQL macro functions defined with
// @DEF(name, (a, b) -> ...) in a model or in macros/*.sql, and SQLMesh's
// built-in operators (@EACH, @IF, @EVAL, @SQL, @REDUCE, @FILTER, @STAR,
// @GENERATE_SURROGATE_KEY, @SAFE_ADD, @SAFE_SUB, @SAFE_DIV, @UNION,
// @HAVERSINE_DISTANCE, @PIVOT, @AND, @OR, @VAR, @DEDUPLICATE,
// @DATE_SPINE, @RESOLVE_TEMPLATE and the clause operators @WITH, @JOIN,
// @WHERE, @GROUP_BY, @HAVING, @ORDER_BY, @LIMIT). Python macros are
// refused.
//
// SQLMesh evaluates macros on SQLGlot's syntax tree; this package works on
// tokens grouped by balanced parentheses and brackets (lex.go), which is
// what the operators need: arguments are split at top-level commas, lists
// are [a, b] or (a, b), lambdas are x -> ... or (x, y) -> .... Conditions
// (@IF, @EVAL, @FILTER, the clause operators) are evaluated on literals by
// a small expression evaluator (cond.go), as SQLMesh evaluates them with
// SQLGlot's executor.
//
// Tokens are found by a small SQL scanner, not by a regular expression: an
// '@' inside a string literal ('...', E'...', $tag$...$tag$), a quoted
// identifier ("...") or a comment (-- ..., /* ... */, nested) is left alone.
// The scanner covers the lexical rules that DuckDB and PostgreSQL share; it
// never fails on malformed SQL (an unterminated literal or comment simply
// runs to the end), leaving syntax errors to the SQL parser.
//
// Three operations use it: Expand evaluates, when a project loads,
// everything that does not depend on the interval; Render substitutes
// values for execution; ForParse substitutes parseable placeholders so
// that the query can be parsed for dependencies, with a Mapper to bring
// error offsets back to the original text.
package macro

import "strings"

// Ref is one macro variable reference in a query.
type Ref struct {
	// Name is the variable's name in lower case, without the '@'.
	Name string
	// Offset is the byte offset of the '@'.
	Offset int
	// Len is the length in bytes of the reference as written ('@' and name).
	Len int
}

// word is an identifier the scanner met: bare (Quoted false, Text as
// written) or double-quoted (Quoted true, Text without the quotes).
type word struct {
	Text   string
	Offset int
	Quoted bool
}

// scan returns every @name reference and every identifier outside literals
// and comments, in order. It never fails and never panics.
func scan(sql string) (refs []Ref, words []word) {
	n := len(sql)
	i := 0
	for i < n {
		c := sql[i]
		switch {
		case c == '\'':
			i = skipString(sql, i, isEscapeString(sql, i))
		case c == '"':
			end, text := quotedIdent(sql, i)
			words = append(words, word{Text: text, Offset: i, Quoted: true})
			i = end
		case c == '-' && i+1 < n && sql[i+1] == '-':
			nl := strings.IndexByte(sql[i:], '\n')
			if nl < 0 {
				return refs, words
			}
			i += nl + 1
		case c == '/' && i+1 < n && sql[i+1] == '*':
			i = skipBlockComment(sql, i)
		case c == '$' && (i == 0 || !isWordByte(sql[i-1])):
			i = skipDollar(sql, i)
		case c == '@' && i+1 < n && isNameStart(sql[i+1]):
			j := i + 1
			for j < n && isNameByte(sql[j]) {
				j++
			}
			refs = append(refs, Ref{Name: strings.ToLower(sql[i+1 : j]), Offset: i, Len: j - i})
			i = j
		case isWordStart(c):
			j := i + 1
			for j < n && isWordByte(sql[j]) {
				j++
			}
			words = append(words, word{Text: sql[i:j], Offset: i})
			i = j
		case isDigit(c):
			// A number, including forms like 1e5 or 0x1F: its letters must
			// not be mistaken for an identifier.
			j := i + 1
			for j < n && (isWordByte(sql[j]) || sql[j] == '.') {
				j++
			}
			i = j
		default:
			i++
		}
	}
	return refs, words
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// isWordStart: a byte that can start an identifier. Bytes of multi-byte UTF-8
// sequences count as letters, as DuckDB and PostgreSQL allow non-ASCII
// identifiers.
func isWordStart(c byte) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80
}

// isWordByte: a byte that can continue an identifier ($ is allowed by
// PostgreSQL after the first character).
func isWordByte(c byte) bool { return isWordStart(c) || isDigit(c) || c == '$' }

// isNameStart: a byte that can start a macro variable name (ASCII only).
func isNameStart(c byte) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

// isNameByte: a byte of a macro variable name (ASCII only).
func isNameByte(c byte) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || isDigit(c)
}

// isEscapeString reports whether the quote at i opens a PostgreSQL/DuckDB
// escape string E'...', in which a backslash escapes the next character.
func isEscapeString(sql string, i int) bool {
	if i == 0 || (sql[i-1] != 'e' && sql[i-1] != 'E') {
		return false
	}
	return i == 1 || !isWordByte(sql[i-2])
}

// skipString returns the offset just past the string literal whose opening
// quote is at i, or len(sql) if it is unterminated. A doubled quote is an
// escaped one, and so is a backslashed quote when backslash is set.
func skipString(sql string, i int, backslash bool) int {
	for j := i + 1; j < len(sql); j++ {
		switch sql[j] {
		case '\\':
			if backslash {
				j++
			}
		case '\'':
			if j+1 < len(sql) && sql[j+1] == '\'' {
				j++
				continue
			}
			return j + 1
		}
	}
	return len(sql)
}

// quotedIdent returns the offset just past the quoted identifier opening at i
// and its unescaped text ("" stands for ").
func quotedIdent(sql string, i int) (int, string) {
	var b strings.Builder
	for j := i + 1; j < len(sql); j++ {
		if sql[j] == '"' {
			if j+1 < len(sql) && sql[j+1] == '"' {
				b.WriteByte('"')
				j++
				continue
			}
			return j + 1, b.String()
		}
		b.WriteByte(sql[j])
	}
	return len(sql), b.String()
}

// skipBlockComment returns the offset just past the /* ... */ comment opening
// at i. Comments nest, as in PostgreSQL and DuckDB.
func skipBlockComment(sql string, i int) int {
	depth := 0
	for j := i; j+1 < len(sql); {
		switch {
		case sql[j] == '/' && sql[j+1] == '*':
			depth++
			j += 2
		case sql[j] == '*' && sql[j+1] == '/':
			depth--
			j += 2
			if depth == 0 {
				return j
			}
		default:
			j++
		}
	}
	return len(sql)
}

// skipDollar handles a '$' at i. If it opens a dollar-quoted string
// ($$...$$ or $tag$...$tag$) it returns the offset past the closing tag (or
// len(sql)); otherwise (a parameter like $1, or a lone $) it returns i+1.
func skipDollar(sql string, i int) int {
	j := i + 1
	if j < len(sql) && isNameStart(sql[j]) {
		for j < len(sql) && isNameByte(sql[j]) {
			j++
		}
	}
	if j >= len(sql) || sql[j] != '$' {
		return i + 1
	}
	tag := sql[i : j+1]
	end := strings.Index(sql[j+1:], tag)
	if end < 0 {
		return len(sql)
	}
	return j + 1 + end + len(tag)
}

// SkipOpaque returns the offset just past the text opening at i that SQL
// reads as a unit whose inside is not code: a string literal ('...', E'...'
// with backslash escapes), a quoted identifier ("..."), a line or block
// comment, or a dollar-quoted string. It returns i when none opens there,
// and len(sql) for one left unterminated. Scanners that look for code
// (macro references, names) skip with it, so that they all agree on what is
// code.
func SkipOpaque(sql string, i int) int {
	if i < 0 || i >= len(sql) {
		return i
	}
	n := len(sql)
	switch c := sql[i]; {
	case c == '\'':
		return skipString(sql, i, isEscapeString(sql, i))
	case c == '"':
		end, _ := quotedIdent(sql, i)
		return end
	case c == '-' && i+1 < n && sql[i+1] == '-':
		if nl := strings.IndexByte(sql[i:], '\n'); nl >= 0 {
			return i + nl + 1
		}
		return n
	case c == '/' && i+1 < n && sql[i+1] == '*':
		return skipBlockComment(sql, i)
	case c == '$' && (i == 0 || !isWordByte(sql[i-1])):
		if end := skipDollar(sql, i); end > i+1 {
			return end
		}
	}
	return i
}
