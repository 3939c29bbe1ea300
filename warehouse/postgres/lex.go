package postgres

import (
	"fmt"
	"strings"

	"github.com/gapless-dev/gapless/warehouse"
)

// trimQuery cuts what follows a query's last token: whitespace, semicolons
// and comments, so that a model query ending in "; -- done" can be wrapped
// in a subquery. It lexes just enough of PostgreSQL's syntax (quoted
// strings and identifiers, E-string escapes, dollar quotes, nested block
// comments) to tell a comment or semicolon from one inside a literal.
//
// It is a convenience, not a guard: whatever it leaves is sent through the
// extended protocol, where the server runs exactly one statement or
// nothing. Anything it cannot lex to the end (an unterminated literal or
// comment) is left in place for the server to reject.
func trimQuery(q string) (string, error) {
	end := significantEnd(q)
	if end == 0 {
		return "", fmt.Errorf("%w: empty query", warehouse.ErrInvalidArgument)
	}
	return q[:end], nil
}

// significantEnd returns the offset just after the last byte of q that is
// neither whitespace, a semicolon, nor inside a comment.
func significantEnd(q string) int {
	last := 0
	for i := 0; i < len(q); {
		c := q[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v' || c == ';':
			i++
		case strings.HasPrefix(q[i:], "--"):
			nl := strings.IndexByte(q[i:], '\n')
			if nl < 0 {
				return last
			}
			i += nl + 1
		case strings.HasPrefix(q[i:], "/*"):
			end, ok := blockCommentEnd(q, i)
			if !ok {
				return len(q)
			}
			i = end
		case c == '\'':
			escapes := i > 0 && (q[i-1] == 'e' || q[i-1] == 'E') && (i == 1 || !identByte(q[i-2]))
			end, ok := quotedEnd(q, i, '\'', escapes)
			if !ok {
				return len(q)
			}
			i, last = end, end
		case c == '"':
			end, ok := quotedEnd(q, i, '"', false)
			if !ok {
				return len(q)
			}
			i, last = end, end
		case c == '$' && (i == 0 || !identByte(q[i-1])):
			tag, isTag := dollarTag(q[i:])
			if !isTag {
				i, last = i+1, i+1
				continue
			}
			closing := strings.Index(q[i+len(tag):], tag)
			if closing < 0 {
				return len(q)
			}
			i = i + len(tag) + closing + len(tag)
			last = i
		default:
			i, last = i+1, i+1
		}
	}
	return last
}

// blockCommentEnd returns the offset after the (nestable) comment opening at
// q[start:].
func blockCommentEnd(q string, start int) (int, bool) {
	depth := 0
	for i := start; i < len(q)-1; {
		switch {
		case q[i] == '/' && q[i+1] == '*':
			depth++
			i += 2
		case q[i] == '*' && q[i+1] == '/':
			depth--
			i += 2
			if depth == 0 {
				return i, true
			}
		default:
			i++
		}
	}
	return 0, false
}

// quotedEnd returns the offset after the literal or identifier opening at
// q[start] with quote; a doubled quote stands for itself, and with escapes
// (E-strings) so does a backslash-escaped byte.
func quotedEnd(q string, start int, quote byte, escapes bool) (int, bool) {
	for i := start + 1; i < len(q); i++ {
		switch {
		case escapes && q[i] == '\\':
			i++
		case q[i] == quote:
			if i+1 < len(q) && q[i+1] == quote {
				i++
				continue
			}
			return i + 1, true
		}
	}
	return 0, false
}

// dollarTag returns the opening tag ("$$" or "$name$") when s starts with
// one. "$1" (a parameter) is not a tag.
func dollarTag(s string) (string, bool) {
	for i := 1; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '$':
			return s[:i+1], true
		case c >= '0' && c <= '9':
			if i == 1 {
				return "", false
			}
		case identByte(c):
		default:
			return "", false
		}
	}
	return "", false
}

// identByte reports whether c can continue an unquoted identifier (any
// non-ASCII byte can: PostgreSQL accepts letters beyond ASCII).
func identByte(c byte) bool {
	return c == '_' || c == '$' || c >= 0x80 ||
		(c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
}
