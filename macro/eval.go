package macro

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/gapless-dev/gapless/model/suggest"
)

// mode says what the evaluator does with the time variables.
type mode int

const (
	// modeRender substitutes their values.
	modeRender mode = iota
	// modeParse substitutes placeholders in SQL, and sentinel values
	// (1970-01-01) where a condition must be decided.
	modeParse
	// modeExpand keeps them as written; a built-in that needs their value
	// (or columns not known yet) is kept, with its arguments expanded, for
	// Render to finish.
	modeExpand
)

// errDefer is raised in modeExpand by a built-in that cannot be decided
// before execution.
var errDefer = errors.New("macro: decided at execution")

// maxDepth bounds nested expansion (a @DEF function calling itself).
const maxDepth = 64

// maxSteps bounds the work of one evaluation (a @DEF function calling
// itself twice would otherwise double at each level).
const maxSteps = 100_000

// maxBytes bounds what one @DEF function call expands to.
const maxBytes = 4 << 20

// value is what a macro variable or call stands for.
type value struct {
	nodes  []node  // SQL form (a single value)
	items  []value // a list's items
	isList bool
	def    *Def // a @DEF function
	self   bool // a lambda parameter kept as written (deferred calls)
}

func single(nodes []node) value { return value{nodes: nodes} }

// sqlNodes is the value as SQL: a list's items joined by ", ".
func (v value) sqlNodes(off int) []node {
	if !v.isList {
		return v.nodes
	}
	var out []node
	for i, it := range v.items {
		if i > 0 {
			out = append(out, generated(", ", off)...)
		}
		out = append(out, it.sqlNodes(off)...)
	}
	return out
}

// listItems is the value's items: a list's, a bracketed group's, or the
// value itself.
func (v value) listItems() []value {
	if v.isList {
		return v.items
	}
	sig := significant(v.nodes)
	if len(sig) == 1 && (sig[0].bracket() == "[" || sig[0].bracket() == "(") {
		var out []value
		for _, a := range splitArgs(sig[0].kids) {
			if a = trim(a); len(a) > 0 {
				out = append(out, single(a))
			}
		}
		return out
	}
	if len(sig) == 0 {
		return nil
	}
	return []value{v}
}

// name is the value's text as part of an identifier: a string's content,
// a quoted identifier's name, else its SQL text.
func (v value) name() string {
	sig := significant(v.nodes)
	if len(sig) == 1 && sig[0].kind == nLeaf {
		switch sig[0].tok.Kind {
		case tString:
			return stringContent(sig[0].tok.Text)
		case tQIdent:
			return identName(sig[0].tok)
		}
	}
	return strings.TrimSpace(text(v.sqlNodes(0)))
}

// stringContent is a quoted literal's content, doubled quotes undone.
func stringContent(s string) string {
	if len(s) >= 2 && s[0] == '\'' && s[len(s)-1] == '\'' {
		return strings.ReplaceAll(s[1:len(s)-1], "''", "'")
	}
	if len(s) >= 3 && (s[0] == 'e' || s[0] == 'E') {
		return stringContent(s[1:])
	}
	return s
}

type evaluator struct {
	env      *Env
	mode     mode
	vars     Vars
	dialect  string
	scopes   []map[string]value
	depth    int
	steps    int // macro calls and variables evaluated, bounded by maxSteps
	valueCtx int // >0 while a condition's operands are being expanded
}

func (ev *evaluator) lib() *Library {
	if ev.env == nil {
		return nil
	}
	return ev.env.Library
}

// lookup resolves a variable name: lambda and function parameters, then
// @DEF definitions, then configuration variables.
func (ev *evaluator) lookup(name string) (value, bool) {
	for i := len(ev.scopes) - 1; i >= 0; i-- {
		if v, ok := ev.scopes[i][name]; ok {
			return v, true
		}
	}
	if d, ok := ev.lib().Lookup(name); ok {
		if d.IsFunc {
			return value{def: d}, true
		}
		return value{nodes: d.body, def: nil}, true
	}
	if ev.env != nil {
		if v, ok := ev.env.Variables[name]; ok {
			return ev.fromConfig(v, 0), true
		}
	}
	return value{}, false
}

func (ev *evaluator) fromConfig(v any, off int) value {
	if l, ok := v.([]any); ok {
		out := value{isList: true}
		for _, e := range l {
			out.items = append(out.items, ev.fromConfig(e, off))
		}
		return out
	}
	return single(generated(literal(v, ev.dialect), off))
}

// expand expands every macro in nodes (SQL context).
func (ev *evaluator) expand(nodes []node) ([]node, error) {
	ev.depth++
	defer func() { ev.depth-- }()
	if ev.depth > maxDepth {
		off := 0
		if len(nodes) > 0 {
			off = nodes[0].tok.Off
		}
		return nil, &Error{Offset: off, Code: CodeRecursion,
			Msg: fmt.Sprintf("macro expansion nests more than %d deep (does a @DEF function call itself?)", maxDepth)}
	}
	nodes = ev.compound(nodes)
	var out []node
	dropComma := false
	for i := 0; i < len(nodes); i++ {
		n := nodes[i]
		if dropComma && n.kind == nLeaf && !n.tok.trivia() {
			dropComma = false
			if n.isTok(tComma, "") {
				continue
			}
		}
		switch n.kind {
		case nLeaf:
			if n.kids != nil {
				s, err := ev.compoundText(n.kids)
				if err != nil {
					return nil, err
				}
				out = append(out, generated(s, n.tok.Off)...)
				continue
			}
			switch n.tok.Kind {
			case tMacro, tBrace:
				v, err := ev.variable(n.tok)
				if err != nil {
					return nil, err
				}
				out = append(out, v...)
			default:
				out = append(out, n)
			}
		case nGroup:
			kids, err := ev.expand(n.kids)
			if err != nil {
				return nil, err
			}
			n.kids = kids
			out = append(out, n)
		case nCall:
			v, err := ev.call(n)
			if err != nil {
				return nil, err
			}
			res := v.sqlNodes(n.tok.Off)
			if stops, ok := clauseEnds[n.tok.name()]; ok {
				if len(significant(res)) == 0 {
					// A false clause operator drops its clause, and a
					// false @JOIN the join type written before it.
					if n.tok.name() == "join" {
						for k := lastSignificant(out); k >= 0 && out[k].kind == nLeaf && joinWords[strings.ToLower(out[k].tok.Text)]; k = lastSignificant(out) {
							out = out[:k]
						}
					}
					for i+1 < len(nodes) && !endsClause(nodes[i+1], stops) {
						i++
					}
				}
				out = append(out, res...)
				continue
			}
			if len(significant(res)) == 0 {
				// A call that yields nothing takes its list comma with it.
				if i := lastSignificant(out); i >= 0 && out[i].isTok(tComma, "") {
					out = append(out[:i], out[i+1:]...)
				} else {
					dropComma = true
				}
			}
			out = append(out, res...)
		}
	}
	return out, nil
}

// clauseEnds are, for each clause operator, the keywords that end its
// clause (besides ';' and the end of the enclosing parentheses).
var clauseEnds = func() map[string][]string {
	tail := []string{"union", "except", "intersect"}
	return map[string][]string{
		"with":     {"select"},
		"join":     append([]string{"join", "left", "right", "inner", "full", "cross", "natural", "where", "group", "having", "qualify", "window", "order", "limit"}, tail...),
		"where":    append([]string{"group", "having", "qualify", "window", "order", "limit", "offset"}, tail...),
		"group_by": append([]string{"having", "qualify", "window", "order", "limit", "offset"}, tail...),
		"having":   append([]string{"qualify", "window", "order", "limit", "offset"}, tail...),
		"order_by": append([]string{"limit", "offset"}, tail...),
		"limit":    append([]string{"offset"}, tail...),
	}
}()

var joinWords = map[string]bool{"left": true, "right": true, "inner": true, "full": true, "outer": true, "cross": true, "natural": true}

func endsClause(n node, stops []string) bool {
	if n.isTok(tSemi, "") {
		return true
	}
	if n.kind == nCall {
		_, isClause := clauseEnds[n.tok.name()]
		return isClause
	}
	if n.kind != nLeaf || n.tok.Kind != tWord {
		return false
	}
	for _, s := range stops {
		if strings.EqualFold(n.tok.Text, s) {
			return true
		}
	}
	return false
}

func lastSignificant(nodes []node) int {
	for i := len(nodes) - 1; i >= 0; i-- {
		if !(nodes[i].kind == nLeaf && nodes[i].tok.trivia()) {
			return i
		}
	}
	return -1
}

// compound joins identifier pieces written against each other, such as
// column_@x, @{x}_suffix or my_@{x}_col, into one generated identifier. A
// time variable (@start_ds, ...) is never joined: "a@start_ds" stays two
// tokens, as before macro functions existed.
func (ev *evaluator) compound(nodes []node) []node {
	var out []node
	for i := 0; i < len(nodes); i++ {
		j := i
		hasWord, hasRef := false, false
		for j < len(nodes) && nodes[j].kind == nLeaf && ev.joinable(nodes[j].tok) {
			if j > i && nodes[j-1].tok.Off+len(nodes[j-1].tok.Text) != nodes[j].tok.Off {
				break
			}
			if nodes[j].tok.Kind == tWord || nodes[j].tok.Kind == tNum {
				hasWord = true
			} else {
				hasRef = true
			}
			j++
		}
		if j-i >= 2 && hasWord && hasRef {
			out = append(out, node{kind: nLeaf, tok: tok{Kind: tWord, Text: "", Off: nodes[i].tok.Off, Gen: true}, kids: nodes[i:j]})
			i = j - 1
			continue
		}
		out = append(out, nodes[i])
	}
	return out
}

func (ev *evaluator) joinable(t tok) bool {
	switch t.Kind {
	case tWord, tNum:
		return true
	case tMacro, tBrace:
		_, isTime := variables[t.name()]
		return !isTime || t.Kind == tBrace && ev.mode != modeExpand
	}
	return false
}

// compoundText is the identifier that pieces (words and variable
// references written against each other) make.
func (ev *evaluator) compoundText(pieces []node) (string, error) {
	var b strings.Builder
	keep := false
	for _, p := range pieces {
		switch p.tok.Kind {
		case tMacro, tBrace:
			v, err := ev.varValue(p.tok, p.tok.name())
			if err != nil {
				return "", err
			}
			if v.self {
				keep = true
				b.WriteString(p.tok.Text)
				continue
			}
			b.WriteString(v.name())
		default:
			b.WriteString(p.tok.Text)
		}
		if b.Len() > maxBytes {
			return "", &Error{Offset: pieces[0].tok.Off, Code: CodeRecursion,
				Msg: fmt.Sprintf("an identifier built from macro variables is longer than %d bytes (does a @DEF function call itself?)", maxBytes)}
		}
	}
	if keep {
		return b.String(), nil
	}
	return asIdent(b.String()), nil
}

// variable is the SQL of @name or @{name} (or of a compound identifier).
func (ev *evaluator) variable(t tok) ([]node, error) {
	name := t.name()
	if _, isTime := variables[name]; isTime && ev.mode == modeExpand && ev.valueCtx == 0 && t.Kind == tMacro {
		if _, shadowed := ev.lookup(name); !shadowed {
			return []node{leaf(t)}, nil
		}
	}
	if t.Kind == tBrace {
		v, err := ev.varValue(t, name)
		if err != nil {
			return nil, err
		}
		if v.self {
			return generated(t.Text, t.Off), nil
		}
		return generated(asIdent(v.name()), t.Off), nil
	}
	v, err := ev.varValue(t, name)
	if err != nil {
		return nil, err
	}
	if v.self {
		return generated(t.Text, t.Off), nil
	}
	return restamp(v.sqlNodes(t.Off), t.Off), nil
}

// asIdent is s as an identifier: bare when it is a plain one, else quoted.
func asIdent(s string) string {
	if validIdent(s) {
		return s
	}
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}

func validIdent(s string) bool {
	if s == "" || !(isNameStart(s[0]) || s[0] >= 0x80) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if !isWordByte(s[i]) || s[i] == '$' {
			return false
		}
	}
	return true
}

// varValue resolves the variable that token t names.
func (ev *evaluator) varValue(t tok, name string) (value, error) {
	if ev.steps++; ev.steps > maxSteps {
		return value{}, &Error{Offset: t.Off, Name: name, Code: CodeRecursion,
			Msg: fmt.Sprintf("macro expansion takes more than %d steps (does a @DEF function call itself?)", maxSteps)}
	}
	if v, ok := ev.lookup(name); ok {
		if v.def != nil {
			return value{}, &Error{Offset: t.Off, Name: name, Code: CodeMisuse, Msg: fmt.Sprintf(
				"@%s is a macro function (defined with @DEF in %s), not a variable: call it as @%s(%s)",
				name, v.def.Where(), name, strings.Join(v.def.Params, ", "))}
		}
		if !v.isList && !v.self {
			exp, err := ev.expand(restamp(v.nodes, t.Off))
			if err != nil {
				return value{}, err
			}
			v.nodes = exp
		}
		return v, nil
	}
	if _, ok := variables[name]; ok {
		return ev.timeValue(t, name)
	}
	return value{}, ev.unknownVariable(t, name)
}

// timeValue is a predefined variable's SQL in the evaluator's mode.
func (ev *evaluator) timeValue(t tok, name string) (value, error) {
	ref := Ref{Name: name, Offset: t.Off, Len: len(t.Text)}
	switch {
	case ev.mode == modeRender:
		s, err := ev.vars.render(ref)
		if err != nil {
			return value{}, err
		}
		return single(generated(s, t.Off)), nil
	case ev.mode == modeParse && ev.valueCtx > 0:
		s, err := sentinel.render(ref)
		if err != nil {
			return value{}, err
		}
		return single(generated(s, t.Off)), nil
	case ev.mode == modeParse:
		if name == "this_model" {
			return single(generated(ThisModelPlaceholder, t.Off)), nil
		}
		return single(generated(Placeholder(name), t.Off)), nil
	case ev.valueCtx > 0:
		return value{}, errDefer
	default:
		return single([]node{leaf(tok{Kind: tMacro, Text: "@" + name, Off: t.Off, Gen: true})}), nil
	}
}

func (ev *evaluator) unknownVariable(t tok, name string) error {
	if name == "def" {
		return &Error{Offset: t.Off, Name: name, Code: CodeMisuse, Msg: "@DEF defines a macro variable or function, it is not a value: " +
			"write @DEF(name, value); or @DEF(name, (a, b) -> expression); as a statement before the query (or in macros/*.sql), then use @name"}
	}
	if _, ok := builtins[name]; ok {
		return &Error{Offset: t.Off, Name: name, Code: CodeMisuse, Msg: fmt.Sprintf(
			"@%s is a built-in macro function, not a variable: call it as @%s(...)", strings.ToUpper(name), strings.ToUpper(name))}
	}
	if pm, ok := ev.lib().pythonMacro(name); ok {
		return pythonError(t.Off, pm)
	}
	msg := "unknown macro variable @" + name
	candidates := append(append([]string{}, primaryNames...), Names()...)
	candidates = append(candidates, ev.userNames(false)...)
	if sqlmeshOnly(name) {
		msg = "macro variable @" + name + " is a SQLMesh variable that gapless does not support" +
			" (variables include @" + strings.Join(primaryNames, ", @") + ")"
	} else if s, ok := suggest.Closest(name, candidates); ok {
		msg += ": did you mean @" + s + "?"
	} else {
		msg += " (variables include @" + strings.Join(primaryNames, ", @") + ")"
	}
	return &Error{Offset: t.Off, Name: name, Code: CodeUnknownVariable, Msg: msg}
}

func pythonError(off int, pm PythonMacro) error {
	return &Error{Offset: off, Name: pm.Name, Code: CodePython, Msg: fmt.Sprintf(
		"@%s is a Python macro (%s:%d): gapless cannot run Python macros; write it as a SQL macro function, @DEF(%s, (arg1, arg2) -> <SQL expression>); in a macros/*.sql file",
		pm.Name, pm.File, pm.Line, pm.Name)}
}

// userNames lists the names defined by @DEF and configuration variables
// (functions when funcs is set, else variables).
func (ev *evaluator) userNames(funcs bool) []string {
	var out []string
	if l := ev.lib(); l != nil {
		for n, d := range l.defs {
			if d.IsFunc == funcs {
				out = append(out, n)
			}
		}
	}
	if !funcs && ev.env != nil {
		for n := range ev.env.Variables {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// call evaluates a macro call.
func (ev *evaluator) call(n node) (value, error) {
	name := n.tok.name()
	if ev.steps++; ev.steps > maxSteps {
		return value{}, &Error{Offset: n.tok.Off, Name: name, Code: CodeRecursion,
			Msg: fmt.Sprintf("macro expansion takes more than %d steps (does a @DEF function call itself?)", maxSteps)}
	}
	args := callArgs(n)
	if name == "def" {
		return value{}, &Error{Offset: n.tok.Off, Name: name, Code: CodeMisuse, Msg: "@DEF(...) defines a macro variable or function and must be a statement of its own before the query, ending with ';' (or be in macros/*.sql)"}
	}
	if b, ok := builtins[name]; ok {
		if err := b.checkArity(n, args); err != nil {
			return value{}, err
		}
		v, err := b.fn(ev, n, args)
		if errors.Is(err, errDefer) {
			if ev.valueCtx > 0 {
				return value{}, err
			}
			return ev.deferCall(n, args)
		}
		return v, err
	}
	if v, ok := ev.lookup(name); ok {
		if v.def == nil {
			return value{}, &Error{Offset: n.tok.Off, Name: name, Code: CodeMisuse, Msg: fmt.Sprintf(
				"@%s is a macro variable, not a function: write @%s without arguments", name, name)}
		}
		out, err := ev.callDef(n, v.def, args)
		if err == nil && len(text(out.nodes)) > maxBytes {
			return value{}, &Error{Offset: n.tok.Off, Name: name, Code: CodeRecursion,
				Msg: fmt.Sprintf("@%s expands to more than %d bytes (does a @DEF function call itself?)", name, maxBytes)}
		}
		return out, err
	}
	if _, ok := variables[name]; ok {
		return value{}, &Error{Offset: n.tok.Off, Name: name, Code: CodeMisuse, Msg: fmt.Sprintf(
			"@%s is a macro variable, not a function: write @%s without arguments", name, name)}
	}
	if pm, ok := ev.lib().pythonMacro(name); ok {
		return value{}, pythonError(n.tok.Off, pm)
	}
	candidates := append(builtinNames(), ev.userNames(true)...)
	msg := "unknown macro @" + name
	if s, ok := suggest.Closest(name, candidates); ok {
		msg += ": did you mean @" + s + "?"
	} else {
		msg += " (it is neither a built-in operator nor defined with @DEF; a Python macro must be rewritten as @DEF(" + name + ", (arg1, arg2) -> <SQL expression>); in macros/*.sql)"
	}
	return value{}, &Error{Offset: n.tok.Off, Name: name, Code: CodeUnknownMacro, Msg: msg}
}

// callDef applies a @DEF function to the call's arguments.
func (ev *evaluator) callDef(n node, d *Def, args [][]node) (value, error) {
	if len(args) != len(d.Params) {
		return value{}, &Error{Offset: n.tok.Off, Name: d.Name, Code: CodeArity, Msg: fmt.Sprintf(
			"@%s takes %d %s, got %d (defined in %s as @DEF(%s, (%s) -> ...))", d.Name, len(d.Params), plural(len(d.Params), "argument"),
			len(args), d.Where(), d.Name, strings.Join(d.Params, ", "))}
	}
	vals := make([]value, len(args))
	for i, a := range args {
		v, err := ev.argValue(a)
		if err != nil {
			return value{}, err
		}
		vals[i] = v
	}
	for _, v := range vals {
		ev.steps += size(v)
	}
	if ev.steps > maxSteps {
		return value{}, &Error{Offset: n.tok.Off, Name: d.Name, Code: CodeRecursion,
			Msg: fmt.Sprintf("macro expansion takes more than %d steps (does a @DEF function call itself?)", maxSteps)}
	}
	out, err := ev.apply(lambda{params: d.Params, body: restamp(d.body, n.tok.Off)}, vals)
	if err != nil {
		return value{}, err
	}
	return single(out), nil
}

// size is the number of tokens of a value.
func size(v value) int {
	n := len(flatten(v.nodes))
	for _, it := range v.items {
		n += size(it)
	}
	return n
}

func plural(n int, s string) string {
	if n == 1 {
		return s
	}
	return s + "s"
}

// argValue evaluates one argument: a call's result (a list stays a list),
// a bracketed list, or the expanded SQL.
func (ev *evaluator) argValue(a []node) (value, error) {
	sig := significant(a)
	if len(sig) == 1 && sig[0].kind == nCall {
		return ev.call(sig[0])
	}
	if len(sig) == 1 && sig[0].kind == nLeaf && sig[0].tok.Kind == tMacro {
		if v, ok := ev.lookup(sig[0].tok.name()); ok && v.isList {
			return v, nil
		}
	}
	if len(sig) == 1 && sig[0].bracket() == "[" {
		out := value{isList: true}
		for _, it := range splitArgs(sig[0].kids) {
			if it = trim(it); len(it) == 0 {
				continue
			}
			v, err := ev.argValue(it)
			if err != nil {
				return value{}, err
			}
			out.items = append(out.items, v)
		}
		return out, nil
	}
	exp, err := ev.expand(a)
	if err != nil {
		return value{}, err
	}
	return single(trim(exp)), nil
}

// lambda is "x -> body" or "(x, y) -> body".
type lambda struct {
	params []string
	body   []node
	off    int
}

// asLambda reads a lambda from an argument; ok is false when the argument
// has no top-level "->".
func asLambda(a []node) (lambda, bool, error) {
	a = trim(a)
	arrow := -1
	for i, n := range a {
		if n.isTok(tOp, "->") {
			arrow = i
			break
		}
	}
	if arrow < 0 {
		return lambda{}, false, nil
	}
	off := a[arrow].tok.Off
	left := significant(a[:arrow])
	var params []string
	bad := &Error{Offset: off, Code: CodeSyntax, Msg: "a lambda's parameters must be a name or names in parentheses, as in x -> ... or (x, y) -> ..., got " + clip(text(a[:arrow]))}
	switch {
	case len(left) == 1 && left[0].isTok(tWord, ""):
		params = []string{strings.ToLower(left[0].tok.Text)}
	case len(left) == 1 && left[0].bracket() == "(":
		for _, p := range splitArgs(left[0].kids) {
			ps := significant(p)
			if len(ps) != 1 || !ps[0].isTok(tWord, "") {
				return lambda{}, false, bad
			}
			params = append(params, strings.ToLower(ps[0].tok.Text))
		}
	default:
		return lambda{}, false, bad
	}
	return lambda{params: params, body: trim(a[arrow+1:]), off: off}, true, nil
}

// apply substitutes args for the lambda's parameters (written bare, as @x
// or inside identifiers) and expands the result.
func (ev *evaluator) apply(l lambda, args []value) ([]node, error) {
	scope := map[string]value{}
	for i, p := range l.params {
		scope[p] = args[i]
		ev.steps += size(args[i])
	}
	if ev.steps += len(l.body); ev.steps > maxSteps {
		return nil, &Error{Offset: l.off, Code: CodeRecursion,
			Msg: fmt.Sprintf("macro expansion takes more than %d steps (does a @DEF function call itself?)", maxSteps)}
	}
	body := substitute(markGen(l.body), scope)
	ev.scopes = append(ev.scopes, scope)
	defer func() { ev.scopes = ev.scopes[:len(ev.scopes)-1] }()
	out, err := ev.expand(body)
	if err != nil {
		return nil, err
	}
	return trim(out), nil
}

// substitute replaces bare words naming a parameter with its value, except
// where the word is qualified (after a '.') or names a function.
func substitute(nodes []node, scope map[string]value) []node {
	var out []node
	for i, n := range nodes {
		switch n.kind {
		case nLeaf:
			if n.tok.Kind == tWord {
				if v, ok := scope[strings.ToLower(n.tok.Text)]; ok && !v.self && !after(nodes, i, ".") && !before(nodes, i, "(") {
					out = append(out, restamp(v.sqlNodes(n.tok.Off), n.tok.Off)...)
					continue
				}
			}
			out = append(out, n)
		case nGroup:
			n.kids = substitute(n.kids, scope)
			out = append(out, n)
		case nCall:
			n.kids = substitute(n.kids, scope)
			out = append(out, n)
		}
	}
	return out
}

// after reports whether the significant node before nodes[i] is op.
func after(nodes []node, i int, op string) bool {
	for j := i - 1; j >= 0; j-- {
		if nodes[j].kind == nLeaf && nodes[j].tok.trivia() {
			continue
		}
		return nodes[j].isTok(tOp, op)
	}
	return false
}

// before reports whether nodes[i+1] is a group opened by bracket (a
// function call) or the op.
func before(nodes []node, i int, bracket string) bool {
	return i+1 < len(nodes) && nodes[i+1].bracket() == bracket
}

// deferCall keeps a built-in call for Render: its arguments expanded,
// lambda parameters kept as written.
func (ev *evaluator) deferCall(n node, args [][]node) (value, error) {
	var parts []string
	for _, a := range args {
		if l, ok, err := asLambda(a); err != nil {
			return value{}, err
		} else if ok {
			scope := map[string]value{}
			for _, p := range l.params {
				scope[p] = value{self: true}
			}
			ev.scopes = append(ev.scopes, scope)
			body, err := ev.expand(l.body)
			ev.scopes = ev.scopes[:len(ev.scopes)-1]
			if err != nil {
				return value{}, err
			}
			left := l.params[0]
			if len(l.params) > 1 {
				left = "(" + strings.Join(l.params, ", ") + ")"
			}
			parts = append(parts, left+" -> "+oneLine(body))
			continue
		}
		v, err := ev.argValue(a)
		if err != nil {
			return value{}, err
		}
		parts = append(parts, deferredArg(v))
	}
	return single(generated("@"+strings.ToUpper(n.tok.name())+"("+strings.Join(parts, ", ")+")", n.tok.Off)), nil
}

// deferredArg is an argument of a kept call: a list in brackets, so that
// Render sees the same list.
func deferredArg(v value) string {
	if !v.isList {
		return oneLine(v.nodes)
	}
	parts := make([]string, len(v.items))
	for i, it := range v.items {
		parts[i] = deferredArg(it)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// oneLine is the text of nodes with comments dropped and whitespace runs
// made single spaces.
func oneLine(nodes []node) string {
	var b strings.Builder
	for _, t := range flatten(nodes) {
		switch t.Kind {
		case tWS, tComment:
			b.WriteByte(' ')
		default:
			b.WriteString(t.Text)
		}
	}
	return strings.TrimSpace(b.String())
}
