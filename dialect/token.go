package dialect

import (
	"fmt"
	"strings"
)

// Kind is a token's class.
type Kind uint8

// The token kinds.
const (
	Space   Kind = iota // white space
	Comment             // -- ..., /* ... */, or # ... where the dialect has it
	String              // a string literal as written, quotes and prefix included
	Ident               // a quoted identifier as written, quotes included
	Word                // a bare word: keyword, identifier or function name
	Number              // a numeric literal
	Punct               // an operator or punctuation: ( ) , . :: : || * ...
)

// Token is a piece of the query text. Off is its byte offset in the text.
type Token struct {
	Kind Kind
	Text string
	Off  int
}

// Error is a query Transpile or Tokenize cannot carry over. Offset is the
// byte offset, in the text given, of the construct.
type Error struct {
	Offset    int
	Construct string // as written, e.g. "SAFE_CAST" or "`"
	From, To  string // the model's dialect and the engine's
	Msg       string // why, and what to write instead
}

func (e *Error) Error() string {
	if e.To == "" {
		return fmt.Sprintf("%s (dialect %s): %s", e.Construct, e.From, e.Msg)
	}
	return fmt.Sprintf("%s (dialect %s, engine %s): %s", e.Construct, e.From, e.To, e.Msg)
}

// Tokenize splits src into tokens by dialect's lexical rules (dialect is
// one of Names; an unknown one lexes as standard SQL). The tokens' texts,
// concatenated, are src exactly. An unterminated string, quoted identifier
// or block comment is an *Error at its start.
func Tokenize(src, dialect string) ([]Token, error) {
	tr := traitsOf(dialect)
	var out []Token
	for i := 0; i < len(src); {
		n, kind, err := tr.next(src, i)
		if err != nil {
			err.From = dialect
			return nil, err
		}
		out = append(out, Token{Kind: kind, Text: src[i : i+n], Off: i})
		i += n
	}
	return out, nil
}

// next returns the length and kind of the token at src[i:].
func (tr traits) next(src string, i int) (int, Kind, *Error) {
	c := src[i]
	rest := src[i:]
	unterminated := func(what string) (int, Kind, *Error) {
		return 0, 0, &Error{Offset: i, Construct: firstLine(rest, 12), Msg: "unterminated " + what}
	}
	switch {
	case isSpace(c):
		n := 1
		for n < len(rest) && isSpace(rest[n]) {
			n++
		}
		return n, Space, nil
	case strings.HasPrefix(rest, "--"), c == '#' && tr.hashComment:
		n := strings.IndexByte(rest, '\n')
		if n < 0 {
			n = len(rest)
		}
		return n, Comment, nil
	case strings.HasPrefix(rest, "/*"):
		end := strings.Index(rest[2:], "*/")
		if end < 0 {
			return unterminated("comment")
		}
		return end + 4, Comment, nil
	case tr.bigqueryLex && (c == 'r' || c == 'R' || c == 'b' || c == 'B') && len(rest) > 1 && (rest[1] == '\'' || rest[1] == '"'):
		n, ok := quoted(rest[1:], tr.backslash && c != 'r' && c != 'R', true)
		if !ok {
			return unterminated("string")
		}
		return n + 1, String, nil
	case c == '\'' || (c == '"' && tr.dqString):
		n, ok := quoted(rest, tr.backslash, tr.bigqueryLex)
		if !ok {
			return unterminated("string")
		}
		return n, String, nil
	case c == '$' && tr.dollar && strings.HasPrefix(rest, "$$"):
		end := strings.Index(rest[2:], "$$")
		if end < 0 {
			return unterminated("$$ string")
		}
		return end + 4, String, nil
	case c == tr.identQuote || c == '"' || (c == '[' && tr.brackets):
		closer := c
		if c == '[' {
			closer = ']'
		}
		for j := 1; j < len(rest); j++ {
			if rest[j] == closer {
				if j+1 < len(rest) && rest[j+1] == closer && closer != ']' {
					j++ // a doubled quote inside the identifier
					continue
				}
				return j + 1, Ident, nil
			}
		}
		return unterminated("quoted identifier")
	case isWordStart(c):
		n := 1
		for n < len(rest) && isWordPart(rest[n]) {
			n++
		}
		return n, Word, nil
	case isDigit(c) || (c == '.' && len(rest) > 1 && isDigit(rest[1])):
		n := 1
		for n < len(rest) && (isDigit(rest[n]) || rest[n] == '.' || rest[n] == '_' ||
			((rest[n] == 'e' || rest[n] == 'E') && n+1 < len(rest) && (isDigit(rest[n+1]) || rest[n+1] == '+' || rest[n+1] == '-')) ||
			((rest[n] == '+' || rest[n] == '-') && (rest[n-1] == 'e' || rest[n-1] == 'E'))) {
			n++
		}
		return n, Number, nil
	}
	for _, op := range []string{"::", "||", "<=", ">=", "<>", "!=", "=>", "->>", "->", "<<", ">>", "==", ":="} {
		if strings.HasPrefix(rest, op) {
			return len(op), Punct, nil
		}
	}
	if c >= 0x80 { // a multi-byte character outside a string: keep it whole
		n := 1
		for n < len(rest) && rest[n]&0xC0 == 0x80 {
			n++
		}
		return n, Word, nil
	}
	return 1, Punct, nil
}

// quoted returns the length of the quoted literal at the start of s (its
// first byte is the quote), and whether it is terminated. A doubled quote
// stands for one; with backslash, a backslash escapes the next byte; with
// triple, ”' and """ open a literal closed by the same three.
func quoted(s string, backslash, triple bool) (int, bool) {
	q := s[0]
	if triple && len(s) >= 3 && s[1] == q && s[2] == q {
		delim := s[:3]
		for j := 3; j < len(s); j++ {
			if backslash && s[j] == '\\' {
				j++
				continue
			}
			if strings.HasPrefix(s[j:], delim) {
				return j + 3, true
			}
		}
		return 0, false
	}
	for j := 1; j < len(s); j++ {
		switch {
		case backslash && s[j] == '\\':
			j++
		case s[j] == q:
			if j+1 < len(s) && s[j+1] == q {
				j++
				continue
			}
			return j + 1, true
		}
	}
	return 0, false
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}
func isDigit(c byte) bool { return c >= '0' && c <= '9' }
func isWordStart(c byte) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}
func isWordPart(c byte) bool { return isWordStart(c) || isDigit(c) || c == '$' }

// firstLine is s up to its first newline, at most n bytes.
func firstLine(s string, n int) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > n {
		s = s[:n] + "…"
	}
	return s
}
