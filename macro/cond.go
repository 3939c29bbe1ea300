package macro

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// cval is the value of a condition or @EVAL operand.
type cval struct {
	kind  ckind
	num   float64
	isInt bool
	str   string
	b     bool
}

type ckind int

const (
	cNull ckind = iota
	cNum
	cStr
	cBool
)

func (v cval) truthy() bool {
	switch v.kind {
	case cBool:
		return v.b
	case cNum:
		return v.num != 0
	case cStr:
		return v.str != ""
	}
	return false
}

// sql is the value as a SQL literal.
func (v cval) sql() string {
	switch v.kind {
	case cBool:
		if v.b {
			return "TRUE"
		}
		return "FALSE"
	case cNum:
		if v.isInt && math.Abs(v.num) < 1e15 {
			return strconv.FormatInt(int64(v.num), 10)
		}
		s := strconv.FormatFloat(v.num, 'g', -1, 64)
		if !strings.ContainsAny(s, ".eEn") {
			s += ".0"
		}
		return s
	case cStr:
		return "'" + strings.ReplaceAll(v.str, "'", "''") + "'"
	}
	return "NULL"
}

// condParser evaluates an expanded SQL expression made of literals,
// comparisons, BETWEEN, IN, IS [NOT] NULL, AND, OR, NOT, arithmetic and
// string concatenation, as SQLMesh's @IF, @EVAL and @FILTER conditions are
// (SQLMesh runs them through SQLGlot's executor on literals).
type condParser struct {
	nodes []node
	i     int
	off   int // the macro call, for errors
}

func evalCond(nodes []node, off int) (cval, error) {
	p := &condParser{nodes: significant(nodes), off: off}
	if len(p.nodes) == 0 {
		return cval{}, p.errf("the condition is empty")
	}
	v, err := p.or()
	if err != nil {
		return cval{}, err
	}
	if p.i < len(p.nodes) {
		return cval{}, p.errf("cannot evaluate %q in %q", clip(text(p.nodes[p.i:p.i+1])), clip(text(p.nodes)))
	}
	return v, nil
}

func (p *condParser) errf(format string, args ...any) error {
	return &Error{Offset: p.off, Code: CodeEval, Msg: "cannot evaluate the condition: " + fmt.Sprintf(format, args...) +
		" (conditions are evaluated before the query runs: use literals, macro variables, comparisons, AND, OR, NOT, BETWEEN, IN)"}
}

func (p *condParser) peekWord(w string) bool {
	return p.i < len(p.nodes) && p.nodes[p.i].isTok(tWord, w)
}

func (p *condParser) peekOp(ops ...string) string {
	if p.i >= len(p.nodes) || p.nodes[p.i].kind != nLeaf || p.nodes[p.i].tok.Kind != tOp {
		return ""
	}
	for _, o := range ops {
		if p.nodes[p.i].tok.Text == o {
			return o
		}
	}
	return ""
}

func (p *condParser) or() (cval, error) {
	l, err := p.and()
	for err == nil && p.peekWord("or") {
		p.i++
		var r cval
		if r, err = p.and(); err == nil {
			l = logic(l, r, false)
		}
	}
	return l, err
}

func (p *condParser) and() (cval, error) {
	l, err := p.not()
	for err == nil && p.peekWord("and") {
		p.i++
		var r cval
		if r, err = p.not(); err == nil {
			l = logic(l, r, true)
		}
	}
	return l, err
}

// logic is SQL's three-valued AND (and) or OR.
func logic(l, r cval, and bool) cval {
	if l.kind == cNull || r.kind == cNull {
		if and && ((l.kind != cNull && !l.truthy()) || (r.kind != cNull && !r.truthy())) {
			return cval{kind: cBool}
		}
		if !and && ((l.kind != cNull && l.truthy()) || (r.kind != cNull && r.truthy())) {
			return cval{kind: cBool, b: true}
		}
		return cval{}
	}
	if and {
		return cval{kind: cBool, b: l.truthy() && r.truthy()}
	}
	return cval{kind: cBool, b: l.truthy() || r.truthy()}
}

func (p *condParser) not() (cval, error) {
	if p.peekWord("not") {
		p.i++
		v, err := p.not()
		if err != nil || v.kind == cNull {
			return v, err
		}
		return cval{kind: cBool, b: !v.truthy()}, nil
	}
	return p.cmp()
}

func (p *condParser) cmp() (cval, error) {
	l, err := p.add()
	if err != nil {
		return l, err
	}
	if op := p.peekOp("=", "==", "!=", "<>", "<", ">", "<=", ">="); op != "" {
		p.i++
		r, err := p.add()
		if err != nil {
			return r, err
		}
		return p.compare(l, r, op)
	}
	negate := false
	if p.peekWord("not") && p.i+1 < len(p.nodes) && (p.nodes[p.i+1].isTok(tWord, "between") || p.nodes[p.i+1].isTok(tWord, "in")) {
		negate = true
		p.i++
	}
	var res cval
	switch {
	case p.peekWord("between"):
		p.i++
		lo, err := p.add()
		if err != nil {
			return lo, err
		}
		if !p.peekWord("and") {
			return cval{}, p.errf("BETWEEN needs AND")
		}
		p.i++
		hi, err := p.add()
		if err != nil {
			return hi, err
		}
		a, err := p.compare(l, lo, ">=")
		if err != nil {
			return a, err
		}
		b, err := p.compare(l, hi, "<=")
		if err != nil {
			return b, err
		}
		res = logic(a, b, true)
	case p.peekWord("in"):
		p.i++
		if p.i >= len(p.nodes) || p.nodes[p.i].bracket() != "(" {
			return cval{}, p.errf("IN needs a parenthesised list")
		}
		list := p.nodes[p.i]
		p.i++
		res = cval{kind: cBool}
		for _, it := range splitArgs(list.kids) {
			v, err := evalCond(it, p.off)
			if err != nil {
				return v, err
			}
			eq, err := p.compare(l, v, "=")
			if err != nil {
				return eq, err
			}
			res = logic(res, eq, false)
		}
	case p.peekWord("is"):
		p.i++
		not := false
		if p.peekWord("not") {
			not = true
			p.i++
		}
		var is bool
		switch {
		case p.peekWord("null"):
			is = l.kind == cNull
		case p.peekWord("true"):
			is = l.kind == cBool && l.b
		case p.peekWord("false"):
			is = l.kind == cBool && !l.b
		default:
			return cval{}, p.errf("IS must be followed by NULL, TRUE or FALSE")
		}
		p.i++
		return cval{kind: cBool, b: is != not}, nil
	default:
		return l, nil
	}
	if negate && res.kind != cNull {
		res.b = !res.b
	}
	return res, nil
}

func (p *condParser) compare(l, r cval, op string) (cval, error) {
	if l.kind == cNull || r.kind == cNull {
		return cval{}, nil
	}
	var c int
	switch {
	case l.kind == cNum && r.kind == cNum:
		c = cmp3(l.num < r.num, l.num > r.num)
	case l.kind == cStr && r.kind == cStr:
		c = strings.Compare(l.str, r.str)
	case l.kind == cBool && r.kind == cBool:
		c = cmp3(!l.b && r.b, l.b && !r.b)
	default:
		if op == "=" || op == "==" {
			return cval{kind: cBool}, nil
		}
		if op == "!=" || op == "<>" {
			return cval{kind: cBool, b: true}, nil
		}
		return cval{}, p.errf("cannot compare %s with %s", l.sql(), r.sql())
	}
	var b bool
	switch op {
	case "=", "==":
		b = c == 0
	case "!=", "<>":
		b = c != 0
	case "<":
		b = c < 0
	case ">":
		b = c > 0
	case "<=":
		b = c <= 0
	case ">=":
		b = c >= 0
	}
	return cval{kind: cBool, b: b}, nil
}

func cmp3(less, greater bool) int {
	switch {
	case less:
		return -1
	case greater:
		return 1
	}
	return 0
}

func (p *condParser) add() (cval, error) {
	l, err := p.mul()
	for err == nil {
		op := p.peekOp("+", "-", "||")
		if op == "" {
			break
		}
		p.i++
		var r cval
		if r, err = p.mul(); err != nil {
			break
		}
		l, err = p.arith(l, r, op)
	}
	return l, err
}

func (p *condParser) mul() (cval, error) {
	l, err := p.unary()
	for err == nil {
		op := p.peekOp("*", "/", "%")
		if op == "" {
			break
		}
		p.i++
		var r cval
		if r, err = p.unary(); err != nil {
			break
		}
		l, err = p.arith(l, r, op)
	}
	return l, err
}

func (p *condParser) arith(l, r cval, op string) (cval, error) {
	if l.kind == cNull || r.kind == cNull {
		return cval{}, nil
	}
	if op == "||" {
		return cval{kind: cStr, str: plain(l) + plain(r)}, nil
	}
	if l.kind != cNum || r.kind != cNum {
		return cval{}, p.errf("%s %s %s: arithmetic needs numbers", l.sql(), op, r.sql())
	}
	out := cval{kind: cNum, isInt: l.isInt && r.isInt}
	switch op {
	case "+":
		out.num = l.num + r.num
	case "-":
		out.num = l.num - r.num
	case "*":
		out.num = l.num * r.num
	case "/":
		if r.num == 0 {
			return cval{}, p.errf("division by zero")
		}
		out.num = l.num / r.num
		out.isInt = out.isInt && out.num == math.Trunc(out.num)
	case "%":
		if r.num == 0 {
			return cval{}, p.errf("division by zero")
		}
		out.num = math.Mod(l.num, r.num)
	}
	return out, nil
}

// plain is a value's text without quotes.
func plain(v cval) string {
	if v.kind == cStr {
		return v.str
	}
	return strings.Trim(v.sql(), "'")
}

func (p *condParser) unary() (cval, error) {
	if op := p.peekOp("-", "+"); op != "" {
		p.i++
		v, err := p.unary()
		if err != nil || v.kind == cNull {
			return v, err
		}
		if v.kind != cNum {
			return cval{}, p.errf("%s%s: a sign needs a number", op, v.sql())
		}
		if op == "-" {
			v.num = -v.num
		}
		return v, nil
	}
	return p.primary()
}

func (p *condParser) primary() (cval, error) {
	if p.i >= len(p.nodes) {
		return cval{}, p.errf("the expression %q ends early", clip(text(p.nodes)))
	}
	n := p.nodes[p.i]
	p.i++
	switch {
	case n.bracket() == "(":
		return evalCond(n.kids, p.off)
	case n.kind != nLeaf:
		return cval{}, p.errf("%q is not a value", clip(text([]node{n})))
	}
	t := n.tok
	switch t.Kind {
	case tNum:
		f, err := strconv.ParseFloat(t.Text, 64)
		if err != nil {
			return cval{}, p.errf("%q is not a number", t.Text)
		}
		return cval{kind: cNum, num: f, isInt: !strings.ContainsAny(t.Text, ".eE")}, nil
	case tString:
		return cval{kind: cStr, str: stringContent(t.Text)}, nil
	case tWord:
		switch strings.ToLower(t.Text) {
		case "true":
			return cval{kind: cBool, b: true}, nil
		case "false":
			return cval{kind: cBool}, nil
		case "null":
			return cval{}, nil
		case "date", "timestamp":
			// A typed literal compares as its text (ISO dates order as text).
			if p.i < len(p.nodes) && p.nodes[p.i].isTok(tString, "") {
				s := stringContent(p.nodes[p.i].tok.Text)
				p.i++
				return cval{kind: cStr, str: s}, nil
			}
		}
		return cval{}, p.errf("%s is a column or keyword, not a value", t.Text)
	}
	return cval{}, p.errf("%q is not a value", t.Text)
}
