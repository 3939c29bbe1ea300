package model

import (
	"bytes"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// tokKind is the lexical class of a header token.
type tokKind int

const (
	tokEOF    tokKind = iota
	tokIdent          // bare word: name, kind, INCREMENTAL_BY_TIME_RANGE, true
	tokQuoted         // "double-quoted identifier"
	tokString         // 'single-quoted string'
	tokNumber         // 12, -3, 4.5
	tokPunct          // any other single character: ( ) [ ] , ; . etc.
)

// token is one lexeme of the header. off and end are byte offsets into the
// source, so src[off:end] is the token as written. val is the decoded value:
// the unquoted, unescaped text for strings and quoted identifiers, the text
// itself otherwise.
type token struct {
	kind tokKind
	off  int
	end  int
	val  string
}

// describe renders a token for an error message.
func (t token) describe(src []byte) string {
	switch t.kind {
	case tokEOF:
		return "end of file"
	case tokString:
		return "string " + string(src[t.off:t.end])
	default:
		return "'" + string(src[t.off:t.end]) + "'"
	}
}

// lexer turns the header into tokens on demand. It is lazy on purpose: the
// query after the header is SQL of any dialect and must never be lexed with
// these rules, so the parser pulls exactly the tokens it needs.
//
// Comments ("--" to end of line, "/* ... */" not nested) and whitespace are
// skipped. Strings are single-quoted (a quote inside is doubled);
// quoted identifiers are double-quoted with "" likewise.
type lexer struct {
	src []byte
	off int
	// lines holds the byte offset at which each line starts; lines[0] == 0.
	lines []int
	path  string
}

func newLexer(path string, src []byte) *lexer {
	lines := []int{0}
	for i, b := range src {
		if b == '\n' {
			lines = append(lines, i+1)
		}
	}
	return &lexer{src: src, lines: lines, path: path}
}

// pos converts a byte offset into a 1-based line and byte column. Offsets
// past the end are clamped to the end.
func (lx *lexer) pos(off int) Pos {
	off = min(max(off, 0), len(lx.src))
	// The line is the last one starting at or before off.
	i := sort.Search(len(lx.lines), func(i int) bool { return lx.lines[i] > off }) - 1
	return Pos{File: lx.path, Line: i + 1, Col: off - lx.lines[i] + 1}
}

// skipSpace skips whitespace and comments. It reports an unterminated block
// comment, pointing at its opening "/*".
func (lx *lexer) skipSpace() error {
	for lx.off < len(lx.src) {
		c := lx.src[lx.off]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			lx.off++
		case c == '-' && lx.peekByte(1) == '-':
			nl := indexByteFrom(lx.src, lx.off, '\n')
			if nl < 0 {
				lx.off = len(lx.src)
			} else {
				lx.off = nl + 1
			}
		case c == '/' && lx.peekByte(1) == '*':
			end := bytes.Index(lx.src[lx.off+2:], []byte("*/"))
			if end < 0 {
				return errorf(lx.pos(lx.off), CodeUnterminated, "unterminated /* comment")
			}
			lx.off += 2 + end + 2
		case c == 0xEF && lx.peekByte(1) == 0xBB && lx.peekByte(2) == 0xBF:
			// A UTF-8 byte order mark, as some Windows editors write.
			lx.off += 3
		default:
			return nil
		}
	}
	return nil
}

func (lx *lexer) peekByte(ahead int) byte {
	if lx.off+ahead < len(lx.src) {
		return lx.src[lx.off+ahead]
	}
	return 0
}

func indexByteFrom(b []byte, from int, c byte) int {
	for i := from; i < len(b); i++ {
		if b[i] == c {
			return i
		}
	}
	return -1
}

func isIdentStart(r rune) bool {
	return r == '_' || unicode.IsLetter(r)
}

func isIdentPart(r rune) bool {
	return r == '_' || r == '$' || unicode.IsLetter(r) || unicode.IsDigit(r)
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// next returns the next token, or an *Error for an unterminated string,
// quoted identifier or comment.
func (lx *lexer) next() (token, error) {
	if err := lx.skipSpace(); err != nil {
		return token{}, err
	}
	start := lx.off
	if start >= len(lx.src) {
		return token{kind: tokEOF, off: start, end: start}, nil
	}
	c := lx.src[start]
	switch {
	case c == '\'':
		val, err := lx.quoted('\'', "string")
		return token{kind: tokString, off: start, end: lx.off, val: val}, err
	case c == '"':
		val, err := lx.quoted('"', "quoted identifier")
		return token{kind: tokQuoted, off: start, end: lx.off, val: val}, err
	case isDigit(c) || (c == '-' && isDigit(lx.peekByte(1))):
		lx.off++
		for lx.off < len(lx.src) && (isDigit(lx.src[lx.off]) || lx.src[lx.off] == '.') {
			lx.off++
		}
		return lx.tok(tokNumber, start), nil
	}
	r, size := utf8.DecodeRune(lx.src[start:])
	if isIdentStart(r) {
		lx.off += size
		for lx.off < len(lx.src) {
			r, size := utf8.DecodeRune(lx.src[lx.off:])
			if !isIdentPart(r) {
				break
			}
			lx.off += size
		}
		return lx.tok(tokIdent, start), nil
	}
	// Anything else is one punctuation token; a whole rune, so that an error
	// message never shows half a UTF-8 sequence (invalid bytes go one by one).
	lx.off += size
	return lx.tok(tokPunct, start), nil
}

func (lx *lexer) tok(k tokKind, start int) token {
	return token{kind: k, off: start, end: lx.off, val: string(lx.src[start:lx.off])}
}

// quoted reads a literal delimited by q, where a doubled q stands for one q.
// lx.off is at the opening quote; on success it ends past the closing one.
func (lx *lexer) quoted(q byte, what string) (string, error) {
	start := lx.off
	var b strings.Builder
	i := start + 1
	for i < len(lx.src) {
		c := lx.src[i]
		if c == q {
			if i+1 < len(lx.src) && lx.src[i+1] == q {
				b.WriteByte(q)
				i += 2
				continue
			}
			lx.off = i + 1
			return b.String(), nil
		}
		b.WriteByte(c)
		i++
	}
	lx.off = len(lx.src)
	return "", errorf(lx.pos(start), CodeUnterminated, "unterminated %s", what)
}

// hasSQL reports whether s contains anything other than whitespace and
// comments, and if so the byte offset of the first such character. It only
// looks at the start of s, so it is safe on SQL of any dialect.
func hasSQL(s string) (int, bool) {
	lx := newLexer("", []byte(s)) // its lines too: an error locates itself
	if err := lx.skipSpace(); err != nil {
		// An unterminated comment swallows the rest: nothing but comment.
		return 0, false
	}
	return lx.off, lx.off < len(s)
}
