package trino

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gapless-dev/gapless/warehouse"
)

// This file lexes just enough of Trino's SQL to tell a comment, a string,
// a quoted identifier or a semicolon apart: 'strings' with '' escapes (also
// as U&'...' and X'...'), "identifiers" with "" escapes, `backquoted`
// ones, -- line comments and /* block comments */ (which do not nest in
// Trino). It is a convenience, not the guard: every statement still goes
// to Trino, which runs exactly one statement per request or none.

// tokKind is a token's kind.
type tokKind int

const (
	tokWord   tokKind = iota // an unquoted identifier or keyword
	tokQuoted                // a "quoted" or `backquoted` identifier
	tokString                // a 'string' literal
	tokNumber                // a number
	tokParam                 // a $n parameter
	tokPunct                 // any other single character
)

// token is one token of a statement.
type token struct {
	kind tokKind
	// text is the token as written; for words and quoted identifiers,
	// value is the identifier (unquoted, folded to lower case).
	text  string
	value string
	pos   int // byte offset in the statement
	depth int // parenthesis depth at the token (the parenthesis itself at the outer depth)
}

// lex splits q into tokens, skipping whitespace and comments. ok is false
// when q ends inside a literal, identifier or comment.
func lex(q string) (toks []token, ok bool) {
	depth := 0
	for i := 0; i < len(q); {
		c := q[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			i++
		case strings.HasPrefix(q[i:], "--"):
			nl := strings.IndexByte(q[i:], '\n')
			if nl < 0 {
				return toks, true
			}
			i += nl + 1
		case strings.HasPrefix(q[i:], "/*"):
			end := strings.Index(q[i+2:], "*/")
			if end < 0 {
				return toks, false
			}
			i += 2 + end + 2
		case c == '\'':
			end, closed := quotedEnd(q, i, '\'')
			toks = append(toks, token{kind: tokString, text: q[i:end], pos: i, depth: depth})
			if !closed {
				return toks, false
			}
			i = end
		case c == '"' || c == '`':
			end, closed := quotedEnd(q, i, c)
			text := q[i:end]
			val := ""
			if closed {
				val = fold(strings.ReplaceAll(text[1:len(text)-1], string([]byte{c, c}), string(c)))
			}
			toks = append(toks, token{kind: tokQuoted, text: text, value: val, pos: i, depth: depth})
			if !closed {
				return toks, false
			}
			i = end
		case c == '$' && i+1 < len(q) && isDigit(q[i+1]):
			j := i + 1
			for j < len(q) && isDigit(q[j]) {
				j++
			}
			toks = append(toks, token{kind: tokParam, text: q[i:j], pos: i, depth: depth})
			i = j
		case isDigit(c) || (c == '.' && i+1 < len(q) && isDigit(q[i+1])):
			j := i + 1
			for j < len(q) && (isDigit(q[j]) || q[j] == '.' || isWordByte(q[j])) {
				j++
			}
			toks = append(toks, token{kind: tokNumber, text: q[i:j], pos: i, depth: depth})
			i = j
		case isWordByte(c):
			j := i + 1
			for j < len(q) && (isWordByte(q[j]) || isDigit(q[j]) || q[j] == '@' || q[j] == ':' || q[j] == '$') {
				j++
			}
			// U&'...' and X'...' are strings with a prefix: the quote
			// starts the literal on the next turn.
			toks = append(toks, token{kind: tokWord, text: q[i:j], value: fold(q[i:j]), pos: i, depth: depth})
			i = j
		default:
			if c == ')' && depth > 0 {
				depth--
			}
			toks = append(toks, token{kind: tokPunct, text: q[i : i+1], pos: i, depth: depth})
			if c == '(' {
				depth++
			}
			i++
		}
	}
	return toks, true
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// isWordByte reports whether c may start an unquoted identifier (any
// non-ASCII byte may: Trino accepts letters beyond ASCII).
func isWordByte(c byte) bool {
	return c == '_' || c >= 0x80 || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

// quotedEnd returns the offset after the literal or identifier opening at
// q[start] with quote (a doubled quote stands for itself), and whether it
// is closed.
func quotedEnd(q string, start int, quote byte) (int, bool) {
	for i := start + 1; i < len(q); i++ {
		if q[i] == quote {
			if i+1 < len(q) && q[i+1] == quote {
				i++
				continue
			}
			return i + 1, true
		}
	}
	return len(q), false
}

// significantEnd returns the offset just after the last byte of q that is
// neither whitespace, a semicolon, nor inside a comment. An unterminated
// literal, identifier or comment counts as significant to the end.
func significantEnd(q string) int {
	toks, ok := lex(q)
	if !ok {
		return len(strings.TrimRight(q, " \t\n\r\f\v"))
	}
	end := 0
	for _, t := range toks {
		if t.kind == tokPunct && t.text == ";" {
			continue
		}
		end = t.pos + len(t.text)
	}
	return end
}

// trimQuery cuts what follows a query's last token (whitespace, semicolons
// and comments), so that a model query ending in "; -- done" can be
// wrapped in a subquery, and refuses an empty query.
func trimQuery(q string) (string, error) {
	end := significantEnd(q)
	if end == 0 {
		return "", fmt.Errorf("%w: empty query", warehouse.ErrInvalidArgument)
	}
	return q[:end], nil
}

// subquery renders q (trimmed) as a parenthesised subquery, on lines of its
// own, so that a line comment the trimming missed cannot swallow the
// closing parenthesis.
func subquery(q string) string { return "(\n" + q + "\n)" }

// rewriteParams turns PostgreSQL-style parameters ($1, $2, ...) into the
// client's positional ? placeholders, reordering (and repeating) args to
// match, so that SQL written for the other engines' Query runs here too.
// SQL without $n parameters is returned as it is.
func rewriteParams(q string, args []any) (string, []any, error) {
	toks, _ := lex(q)
	var b strings.Builder
	var out []any
	last := 0
	for _, t := range toks {
		if t.kind != tokParam {
			continue
		}
		n, err := strconv.Atoi(t.text[1:])
		if err != nil || n < 1 || n > len(args) {
			return "", nil, fmt.Errorf("%w: parameter %s has no argument (%d given)", warehouse.ErrInvalidArgument, t.text, len(args))
		}
		b.WriteString(q[last:t.pos])
		b.WriteByte('?')
		out = append(out, args[n-1])
		last = t.pos + len(t.text)
	}
	if out == nil {
		return q, args, nil
	}
	b.WriteString(q[last:])
	return b.String(), out, nil
}

// readKeywords are the statements that read: Trino runs them without
// writing. Everything else (writes, DDL, SET, USE, PREPARE, EXECUTE, CALL,
// transaction control, catalog management) is refused by ReadOnlyQuery.
var readKeywords = map[string]bool{"select": true, "values": true, "table": true, "show": true, "describe": true}

// checkRead refuses, with warehouse.ErrNotARead, SQL that is not exactly
// one read statement: several statements, a statement that does not start
// with a read keyword (after opening parentheses), a WITH whose main
// statement is not a query, and EXPLAIN ANALYZE (which runs its statement)
// of anything but a read. Plain EXPLAIN only plans, so it is a read.
func checkRead(q string) error {
	toks, _ := lex(q)
	for i, t := range toks {
		if t.kind == tokPunct && t.text == ";" && i < len(toks)-1 {
			return fmt.Errorf("%w: the SQL holds more than one statement", warehouse.ErrNotARead)
		}
	}
	return checkReadTokens(toks)
}

func checkReadTokens(toks []token) error {
	i := 0
	for i < len(toks) && toks[i].kind == tokPunct && toks[i].text == "(" {
		i++
	}
	if i == len(toks) {
		return fmt.Errorf("%w: no statement", warehouse.ErrNotARead)
	}
	first := toks[i]
	if first.kind != tokWord {
		return fmt.Errorf("%w: the statement starts with %q", warehouse.ErrNotARead, first.text)
	}
	switch {
	case readKeywords[first.value]:
		return nil
	case first.value == "with":
		return checkWithMain(toks[i+1:], first.depth)
	case first.value == "explain":
		return checkExplain(toks[i+1:])
	}
	return fmt.Errorf("%w: %s is not a read", warehouse.ErrNotARead, strings.ToUpper(first.text))
}

// checkWithMain finds the main statement of WITH ... (whose tokens follow
// the WITH at depth d): after the closing parenthesis of a CTE's body, the
// next token at depth d is a comma (another CTE), AS (the parenthesis
// closed a column list), or the main statement, which must be a query.
func checkWithMain(toks []token, d int) error {
	afterClose := false
	for i, t := range toks {
		if t.depth != d {
			continue
		}
		if afterClose {
			switch {
			case t.kind == tokPunct && t.text == ",":
			case t.kind == tokWord && t.value == "as":
			default:
				if t.kind == tokPunct && t.text == "(" {
					return checkReadTokens(toks[i:])
				}
				if t.kind == tokWord && (t.value == "select" || t.value == "values" || t.value == "table") {
					return nil
				}
				return fmt.Errorf("%w: the WITH query's main statement is %s", warehouse.ErrNotARead, strings.ToUpper(t.text))
			}
		}
		afterClose = t.kind == tokPunct && t.text == ")"
	}
	return fmt.Errorf("%w: a WITH without a main statement", warehouse.ErrNotARead)
}

// checkExplain reads what follows EXPLAIN. Trino's grammar is EXPLAIN
// [(options)] statement, which only plans, or EXPLAIN ANALYZE [VERBOSE]
// statement, which runs the statement: that one must be a read itself.
func checkExplain(toks []token) error {
	if len(toks) == 0 || toks[0].kind != tokWord || toks[0].value != "analyze" {
		return nil
	}
	i := 1
	if i < len(toks) && toks[i].kind == tokWord && toks[i].value == "verbose" {
		i++
	}
	return checkReadTokens(toks[i:])
}

// mentions reports whether q names an identifier whose folded value is
// name, as a word or a quoted identifier: a cheap test of whether a view's
// query may read another view.
func mentions(q, name string) bool {
	toks, _ := lex(q)
	name = fold(name)
	for _, t := range toks {
		if (t.kind == tokWord || t.kind == tokQuoted) && t.value == name {
			return true
		}
	}
	return false
}
