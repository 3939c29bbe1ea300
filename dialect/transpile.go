package dialect

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Mapper maps byte offsets of Transpile's output back to the text it was
// given. The zero Mapper is the identity (no rewrite).
type Mapper struct {
	anchors []anchor // sorted by out
	srcLen  int
}

type anchor struct{ out, src int }

// Original returns the offset in the written text of byte off of the
// rewritten text: exact inside text copied as written (white space,
// comments, words), the start of the construct inside a rewrite.
func (m Mapper) Original(off int) int {
	if len(m.anchors) == 0 {
		return off
	}
	i, found := slices.BinarySearchFunc(m.anchors, off, func(a anchor, o int) int { return a.out - o })
	if !found {
		i--
	}
	if i < 0 {
		return off
	}
	a := m.anchors[i]
	next := len(m.anchors) > i+1 && m.anchors[i+1].src > a.src
	d := off - a.out
	if next {
		d = min(d, m.anchors[i+1].src-a.src-1)
	}
	return min(a.src+max(d, 0), m.srcLen)
}

// Transpile returns src, written in dialect from, as SQL of the engine
// dialect to (DuckDB, Postgres or Trino; "" is DuckDB), and the mapping of
// its offsets back to src.
//
// Invariants: the result means what src means in from, or the error is an
// *Error naming the construct, both dialects and its offset in src; a
// query in an engine dialect (Engine(from)) is returned as written; the
// result has the newlines of src at the same places relative to the
// tokens around them, so that a line of the result is the same line of
// src; SQLMesh macro calls (@name, @NAME(...)) are kept, their arguments
// rewritten as SQL.
func Transpile(src, from, to string) (string, Mapper, error) {
	if to == "" {
		to = DuckDB
	}
	if Engine(from) {
		return src, Mapper{}, nil
	}
	if !Known(from) {
		return "", Mapper{}, &Error{Construct: "dialect " + from, From: from, To: to, Msg: "not a dialect SQLMesh knows"}
	}
	if !Engine(to) {
		return "", Mapper{}, fmt.Errorf("dialect: the target %q is not an engine dialect (duckdb, postgres, trino)", to)
	}
	toks, err := Tokenize(src, from)
	if err != nil {
		var te *Error
		if errors.As(err, &te) {
			te.To = to
		}
		return "", Mapper{}, err
	}
	t := &transpiler{from: from, to: to, tr: traitsOf(from)}
	root := group(toks)
	if err := t.seq(root); err != nil {
		return "", Mapper{}, err
	}
	return t.out.String(), Mapper{anchors: t.anchors, srcLen: len(src)}, nil
}

// Canonical is the text the fingerprint of a model in dialect from covers:
// its tokens with comments dropped, white space collapsed and bare words in
// upper case, so that layout and comments do not change it, and nothing
// Transpile writes does (a better rewrite in a later gapless release
// rebuilds nothing). An untokenizable src is returned as written.
func Canonical(src, from string) string {
	toks, err := Tokenize(src, from)
	if err != nil {
		return src
	}
	var b strings.Builder
	space := false
	for _, tk := range toks {
		switch tk.Kind {
		case Space, Comment:
			space = b.Len() > 0
			continue
		case Word:
			tk.Text = strings.ToUpper(tk.Text)
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		b.WriteString(tk.Text)
	}
	return b.String()
}

// node is a token, or a parenthesized group of nodes (open and close are
// the parentheses; close is zero for a group left open at the end).
type node struct {
	tok   Token
	kids  []node
	close *Token
	group bool
}

// group nests toks by parentheses. A stray ")" stays a plain token: the
// engine's parser reports it.
func group(toks []Token) []node {
	var stack [][]node
	var opens []Token
	cur := []node{}
	for _, tk := range toks {
		switch {
		case tk.Kind == Punct && tk.Text == "(":
			stack = append(stack, cur)
			opens = append(opens, tk)
			cur = []node{}
		case tk.Kind == Punct && tk.Text == ")" && len(stack) > 0:
			closeTok := tk
			g := node{tok: opens[len(opens)-1], kids: cur, close: &closeTok, group: true}
			cur = append(stack[len(stack)-1], g)
			stack, opens = stack[:len(stack)-1], opens[:len(opens)-1]
		default:
			cur = append(cur, node{tok: tk})
		}
	}
	for len(stack) > 0 {
		g := node{tok: opens[len(opens)-1], kids: cur, group: true}
		cur = append(stack[len(stack)-1], g)
		stack, opens = stack[:len(stack)-1], opens[:len(opens)-1]
	}
	return cur
}

// transpiler writes the rewritten query.
type transpiler struct {
	from, to string
	tr       traits
	out      strings.Builder
	anchors  []anchor
	// flat, when set, writes white space without newlines and drops line
	// comments: for an argument written twice (DIV0's divisor), whose
	// second copy must not add lines.
	flat bool
}

// emit writes text, which stands for the src bytes from offset src on.
func (t *transpiler) emit(text string, src int) {
	if text == "" {
		return
	}
	if n := len(t.anchors); n == 0 || t.anchors[n-1].src != src || t.anchors[n-1].out != t.out.Len() {
		t.anchors = append(t.anchors, anchor{out: t.out.Len(), src: src})
	}
	t.out.WriteString(text)
}

// refuse is the error for construct at off.
func (t *transpiler) refuse(off int, construct, format string, args ...any) error {
	return &Error{Offset: off, Construct: construct, From: t.from, To: t.to, Msg: fmt.Sprintf(format, args...)}
}

// significant is the index of the first node at or after i that is not
// white space or a comment, or len(ns).
func significant(ns []node, i int) int {
	for i < len(ns) && !ns[i].group && (ns[i].tok.Kind == Space || ns[i].tok.Kind == Comment) {
		i++
	}
	return i
}

// prevSignificant is the index of the last node before i that is not white
// space or a comment, or -1.
func prevSignificant(ns []node, i int) int {
	i--
	for i >= 0 && !ns[i].group && (ns[i].tok.Kind == Space || ns[i].tok.Kind == Comment) {
		i--
	}
	return i
}

// isWord reports whether n is the bare word w (case-insensitive).
func isWord(n node, w string) bool {
	return !n.group && n.tok.Kind == Word && strings.EqualFold(n.tok.Text, w)
}

// isPunct reports whether n is the punctuation p.
func isPunct(n node, p string) bool { return !n.group && n.tok.Kind == Punct && n.tok.Text == p }

// seq writes the rewritten ns.
func (t *transpiler) seq(ns []node) error {
	for i := 0; i < len(ns); i++ {
		n := ns[i]
		if n.group {
			if err := t.group(n); err != nil {
				return err
			}
			continue
		}
		next, err := t.token(ns, i)
		if err != nil {
			return err
		}
		i = next
	}
	return nil
}

// group writes a parenthesized group.
func (t *transpiler) group(n node) error {
	t.emit("(", n.tok.Off)
	if err := t.seq(n.kids); err != nil {
		return err
	}
	if n.close != nil {
		t.emit(")", n.close.Off)
	}
	return nil
}

// token writes ns[i] (a token, not a group), with whatever follows it that
// its rewrite takes, and returns the index of the last node it consumed.
func (t *transpiler) token(ns []node, i int) (int, error) {
	tk := ns[i].tok
	switch tk.Kind {
	case Space:
		text := tk.Text
		if t.flat {
			text = strings.Map(func(r rune) rune {
				if r == '\n' || r == '\r' {
					return ' '
				}
				return r
			}, text)
		}
		t.emit(text, tk.Off)
	case Comment:
		switch {
		case t.flat && !strings.HasPrefix(tk.Text, "/*"):
			t.emit(" ", tk.Off)
		case t.flat:
			t.emit(strings.ReplaceAll(tk.Text, "\n", " "), tk.Off)
		case strings.HasPrefix(tk.Text, "#"):
			t.emit("--"+tk.Text[1:], tk.Off)
		default:
			t.emit(tk.Text, tk.Off)
		}
	case String:
		s, err := t.stringLiteral(tk)
		if err != nil {
			return i, err
		}
		t.emit(s, tk.Off)
	case Ident:
		s, err := t.identifier(tk)
		if err != nil {
			return i, err
		}
		t.emit(s, tk.Off)
	case Number:
		t.emit(tk.Text, tk.Off)
	case Word:
		return t.word(ns, i)
	case Punct:
		return t.punct(ns, i)
	}
	return i, nil
}

// identifier writes a quoted identifier in the target's double quotes.
// BigQuery's `project.dataset.table` is three identifiers. For PostgreSQL,
// where a quoted name keeps its case and an unquoted one is folded to
// lower case, a quoted identifier of a dialect whose names ignore case
// (BigQuery, Spark, MySQL, T-SQL, ...) is folded to lower case, and so is
// Snowflake's all-upper-case "ID" (Snowflake's folding of the unquoted
// id); ClickHouse's and the PostgreSQL family's keep their case.
func (t *transpiler) identifier(tk Token) (string, error) {
	q := tk.Text[0]
	if q == '"' && t.tr.identQuote == '"' && !t.tr.brackets && !(t.to == Postgres && t.tr.family == "snowflake") {
		return tk.Text, nil // already the target's quoting
	}
	inner := tk.Text[1 : len(tk.Text)-1]
	switch q {
	case '`':
		inner = strings.ReplaceAll(inner, "``", "`")
	case '"':
		inner = strings.ReplaceAll(inner, `""`, `"`)
	}
	parts := []string{inner}
	if t.tr.splitBacktick && q == '`' {
		parts = strings.Split(inner, ".")
	}
	for i, p := range parts {
		if p == "" {
			return "", t.refuse(tk.Off, tk.Text, "an empty identifier part")
		}
		switch {
		case t.to != Postgres, t.tr.family == "postgres", t.tr.family == "clickhouse":
		case t.tr.family == "snowflake":
			if p == strings.ToUpper(p) { // "ID" is the unquoted ID, id
				p = strings.ToLower(p)
			}
		default:
			p = strings.ToLower(p)
		}
		parts[i] = `"` + strings.ReplaceAll(p, `"`, `""`) + `"`
	}
	return strings.Join(parts, "."), nil
}

// stringLiteral writes a string literal as a standard one ('...', quotes
// doubled), its escapes decoded as the source dialect reads them. A value
// holding a newline, tab or carriage return is written as a concatenation
// with chr(n), so that the rewritten query keeps its lines.
func (t *transpiler) stringLiteral(tk Token) (string, error) {
	text := tk.Text
	raw, bytesLit := false, false
	switch text[0] {
	case 'r', 'R':
		raw, text = true, text[1:]
	case 'b', 'B':
		bytesLit = true
	}
	if bytesLit {
		return "", t.refuse(tk.Off, firstLine(tk.Text, 16), "a bytes literal has no common spelling; write it as a string and convert it")
	}
	var body string
	backslash := t.tr.backslash && !raw
	switch {
	case strings.HasPrefix(text, "$$"):
		body, backslash = text[2:len(text)-2], false
	case len(text) >= 6 && t.tr.bigqueryLex && (strings.HasPrefix(text, "'''") || strings.HasPrefix(text, `"""`)):
		body = text[3 : len(text)-3]
	default:
		q := text[0]
		body = text[1 : len(text)-1]
		if !backslash {
			body = strings.ReplaceAll(body, string([]byte{q, q}), string(q))
		}
	}
	if !backslash && text[0] == '\'' && !strings.HasPrefix(text, "'''") {
		return text, nil // already standard
	}
	var parts []string // alternating string pieces and chr(n) calls
	var cur strings.Builder
	flush := func() { parts = append(parts, "'"+strings.ReplaceAll(cur.String(), "'", "''")+"'"); cur.Reset() }
	for i := 0; i < len(body); i++ {
		c := body[i]
		if backslash && c == '\\' && i+1 < len(body) {
			i++
			switch e := body[i]; e {
			case '\\', '\'', '"', '`', '?':
				cur.WriteByte(e)
			case 'n', 't', 'r':
				flush()
				parts = append(parts, map[byte]string{'n': "chr(10)", 't': "chr(9)", 'r': "chr(13)"}[e])
			case '%', '_':
				if t.tr.family == "mysql" { // MySQL keeps \% and \_ for LIKE
					cur.WriteByte('\\')
				}
				cur.WriteByte(e)
			default:
				return "", t.refuse(tk.Off, firstLine(tk.Text, 16), "the escape \\%c in a string has no common spelling; write the character itself", e)
			}
			continue
		}
		if q := text[0]; backslash && c == q && i+1 < len(body) && body[i+1] == q {
			i++ // a doubled quote
		}
		cur.WriteByte(c)
	}
	flush()
	if len(parts) == 1 {
		return parts[0], nil
	}
	kept := parts[:0]
	for _, p := range parts {
		if p != "''" {
			kept = append(kept, p)
		}
	}
	return "(" + strings.Join(kept, " || ") + ")", nil
}
