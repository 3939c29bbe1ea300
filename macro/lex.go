package macro

import (
	"fmt"
	"strings"
)

// tokKind classifies a token of the macro lexer.
type tokKind int

const (
	tWS      tokKind = iota // whitespace
	tComment                // -- ... or /* ... */
	tString                 // '...', E'...', $tag$...$tag$
	tQIdent                 // "..."
	tWord                   // identifier or keyword
	tNum                    // number
	tMacro                  // @name
	tBrace                  // @{name}
	tOpen                   // ( or [
	tClose                  // ) or ]
	tComma                  // ,
	tSemi                   // ;
	tOp                     // any other punctuation (->, :=, <=, ...)
)

// tok is one token. Off is its byte offset in the text it was read from;
// Gen marks a token a macro produced (its Off is then where the macro was
// called, for error messages, not where its text comes from).
type tok struct {
	Kind tokKind
	Text string
	Off  int
	Gen  bool
}

// name is a macro token's name in lower case, without '@' and braces.
func (t tok) name() string {
	switch t.Kind {
	case tMacro:
		return strings.ToLower(t.Text[1:])
	case tBrace:
		return strings.ToLower(strings.TrimSpace(t.Text[2 : len(t.Text)-1]))
	}
	return strings.ToLower(t.Text)
}

// trivia reports whether the token is whitespace or a comment.
func (t tok) trivia() bool { return t.Kind == tWS || t.Kind == tComment }

// lex splits sql into tokens whose texts concatenate back to sql. It never
// fails: malformed input becomes tOp tokens or literals running to the end.
func lex(sql string) []tok {
	var out []tok
	n := len(sql)
	i := 0
	emit := func(k tokKind, end int) {
		out = append(out, tok{Kind: k, Text: sql[i:end], Off: i})
		i = end
	}
	for i < n {
		c := sql[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			j := i + 1
			for j < n && strings.IndexByte(" \t\n\r\f\v", sql[j]) >= 0 {
				j++
			}
			emit(tWS, j)
		case c == '-' && i+1 < n && sql[i+1] == '-':
			nl := strings.IndexByte(sql[i:], '\n')
			if nl < 0 {
				emit(tComment, n)
			} else {
				emit(tComment, i+nl)
			}
		case c == '/' && i+1 < n && sql[i+1] == '*':
			emit(tComment, skipBlockComment(sql, i))
		case c == '\'':
			emit(tString, skipString(sql, i, false))
		case (c == 'e' || c == 'E') && i+1 < n && sql[i+1] == '\'':
			emit(tString, skipString(sql, i+1, true))
		case c == '"':
			end, _ := quotedIdent(sql, i)
			emit(tQIdent, end)
		case c == '$' && (i == 0 || !isWordByte(sql[i-1])):
			end := skipDollar(sql, i)
			if end == i+1 {
				emit(tOp, end)
			} else {
				emit(tString, end)
			}
		case c == '@' && i+1 < n && sql[i+1] == '{':
			end := strings.IndexByte(sql[i:], '}')
			if end < 0 || !validName(strings.TrimSpace(sql[i+2:i+end])) {
				emit(tOp, i+1)
			} else {
				emit(tBrace, i+end+1)
			}
		case c == '@' && i+1 < n && isNameStart(sql[i+1]):
			j := i + 1
			for j < n && isNameByte(sql[j]) {
				j++
			}
			emit(tMacro, j)
		case isWordStart(c):
			j := i + 1
			for j < n && isWordByte(sql[j]) {
				j++
			}
			emit(tWord, j)
		case isDigit(c) || (c == '.' && i+1 < n && isDigit(sql[i+1])):
			j := i + 1
			for j < n && (isWordByte(sql[j]) || sql[j] == '.') {
				j++
			}
			emit(tNum, j)
		case c == '(' || c == '[':
			emit(tOpen, i+1)
		case c == ')' || c == ']':
			emit(tClose, i+1)
		case c == ',':
			emit(tComma, i+1)
		case c == ';':
			emit(tSemi, i+1)
		default:
			j := i + 1
			if i+1 < n {
				switch sql[i : i+2] {
				case "->", ":=", "<=", ">=", "<>", "!=", "||", "::", "==":
					j = i + 2
				}
			}
			emit(tOp, j)
		}
	}
	return out
}

func validName(s string) bool {
	if s == "" || !isNameStart(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if !isNameByte(s[i]) {
			return false
		}
	}
	return true
}

// node is a token, a bracketed group, or a macro call.
type node struct {
	kind  nodeKind
	tok   tok    // leaf: the token; group: the opening bracket; call: the @name token
	open  tok    // call: its opening parenthesis
	kids  []node // group or call: what is between the brackets
	close tok    // group or call: the closing bracket
}

type nodeKind int

const (
	nLeaf nodeKind = iota
	nGroup
	nCall
)

func leaf(t tok) node { return node{kind: nLeaf, tok: t} }

// isTok reports whether n is a leaf of kind k with the given text (any text
// when text is "").
func (n node) isTok(k tokKind, text string) bool {
	return n.kind == nLeaf && n.tok.Kind == k && (text == "" || strings.EqualFold(n.tok.Text, text))
}

// bracket is a group's opening bracket, "(" or "[" ("" for other nodes).
func (n node) bracket() string {
	if n.kind == nGroup {
		return n.tok.Text
	}
	return ""
}

// parseTree builds the node tree of toks. A macro call is an @name token
// directly followed by "(". A call that is never closed (or closed by the
// wrong bracket) is an *Error; an unbalanced bracket elsewhere is left to
// the SQL parser.
func parseTree(toks []tok) ([]node, error) {
	type frame struct {
		head  node // the group or call being built
		items []node
	}
	var stack []frame
	var top []node
	appendNode := func(n node) {
		if len(stack) > 0 {
			stack[len(stack)-1].items = append(stack[len(stack)-1].items, n)
		} else {
			top = append(top, n)
		}
	}
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		switch {
		case t.Kind == tMacro && i+1 < len(toks) && toks[i+1].Kind == tOpen && toks[i+1].Text == "(":
			stack = append(stack, frame{head: node{kind: nCall, tok: t, open: toks[i+1]}})
			i++
		case t.Kind == tOpen:
			stack = append(stack, frame{head: node{kind: nGroup, tok: t}})
		case t.Kind == tClose:
			if len(stack) == 0 {
				appendNode(leaf(t))
				continue
			}
			f := stack[len(stack)-1]
			want := ")"
			if f.head.kind == nGroup && f.head.tok.Text == "[" {
				want = "]"
			}
			if t.Text != want {
				if f.head.kind == nCall {
					return nil, &Error{Offset: f.head.tok.Off, Name: f.head.tok.name(), Code: CodeUnbalanced,
						Msg: fmt.Sprintf("unbalanced call: %s( is closed by %q at byte %d", f.head.tok.Text, t.Text, t.Off)}
				}
				appendNode(leaf(t))
				continue
			}
			stack = stack[:len(stack)-1]
			f.head.kids, f.head.close = f.items, t
			appendNode(f.head)
		default:
			appendNode(leaf(t))
		}
	}
	for len(stack) > 0 {
		f := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if f.head.kind == nCall {
			return nil, &Error{Offset: f.head.tok.Off, Name: f.head.tok.name(), Code: CodeUnbalanced,
				Msg: fmt.Sprintf("unbalanced call: %s( is never closed", f.head.tok.Text)}
		}
		// An unclosed bracket outside any call: keep its tokens flat.
		appendNode(leaf(f.head.tok))
		for _, k := range f.items {
			appendNode(k)
		}
	}
	return top, nil
}

// splitArgs splits nodes at top-level commas.
func splitArgs(nodes []node) [][]node {
	var out [][]node
	cur := []node{}
	for _, n := range nodes {
		if n.isTok(tComma, "") {
			out = append(out, cur)
			cur = []node{}
			continue
		}
		cur = append(cur, n)
	}
	return append(out, cur)
}

// trim drops leading and trailing trivia.
func trim(nodes []node) []node {
	for len(nodes) > 0 && nodes[0].kind == nLeaf && nodes[0].tok.trivia() {
		nodes = nodes[1:]
	}
	for len(nodes) > 0 && nodes[len(nodes)-1].kind == nLeaf && nodes[len(nodes)-1].tok.trivia() {
		nodes = nodes[:len(nodes)-1]
	}
	return nodes
}

// significant is nodes without trivia.
func significant(nodes []node) []node {
	var out []node
	for _, n := range nodes {
		if n.kind == nLeaf && n.tok.trivia() {
			continue
		}
		out = append(out, n)
	}
	return out
}

// text is the SQL text of nodes as written (generated tokens included).
func text(nodes []node) string {
	var b strings.Builder
	writeText(&b, nodes)
	return b.String()
}

func writeText(b *strings.Builder, nodes []node) {
	for _, n := range nodes {
		switch n.kind {
		case nLeaf:
			b.WriteString(n.tok.Text)
		case nGroup:
			b.WriteString(n.tok.Text)
			writeText(b, n.kids)
			b.WriteString(n.close.Text)
		case nCall:
			b.WriteString(n.tok.Text)
			b.WriteString(n.open.Text)
			writeText(b, n.kids)
			b.WriteString(n.close.Text)
		}
	}
}

// flatten is the tokens of nodes in order.
func flatten(nodes []node) []tok {
	var out []tok
	var walk func([]node)
	walk = func(ns []node) {
		for _, n := range ns {
			switch n.kind {
			case nLeaf:
				out = append(out, n.tok)
			case nGroup:
				out = append(out, n.tok)
				walk(n.kids)
				out = append(out, n.close)
			case nCall:
				out = append(out, n.tok, n.open)
				walk(n.kids)
				out = append(out, n.close)
			}
		}
	}
	walk(nodes)
	return out
}

// generated lexes s into nodes marked as produced by a macro called at off.
func generated(s string, off int) []node {
	toks := lex(s)
	for i := range toks {
		toks[i].Off, toks[i].Gen = off, true
	}
	nodes, err := parseTree(toks)
	if err != nil {
		// Only a macro call can be unbalanced; keep the tokens flat.
		nodes = make([]node, len(toks))
		for i, t := range toks {
			nodes[i] = leaf(t)
		}
	}
	return nodes
}

// restamp marks every token of nodes as generated at off (a copy).
func restamp(nodes []node, off int) []node {
	out := make([]node, len(nodes))
	for i, n := range nodes {
		n.tok.Off, n.tok.Gen = off, true
		if n.kind != nLeaf {
			n.open.Off, n.open.Gen = off, true
			n.close.Off, n.close.Gen = off, true
			n.kids = restamp(n.kids, off)
		}
		out[i] = n
	}
	return out
}

// markGen marks every token of nodes as generated, keeping offsets (a copy).
func markGen(nodes []node) []node {
	out := make([]node, len(nodes))
	for i, n := range nodes {
		n.tok.Gen = true
		if n.kind != nLeaf {
			n.open.Gen, n.close.Gen = true, true
			n.kids = markGen(n.kids)
		}
		out[i] = n
	}
	return out
}
