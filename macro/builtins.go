package macro

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// builtin is one of SQLMesh's macro operators.
type builtin struct {
	min, max int      // argument counts; max -1 for any number
	params   []string // names for keyword arguments (name := value), in order
	fn       func(ev *evaluator, call node, args [][]node) (value, error)
}

// builtins are the operators gapless implements, by lower-case name.
var builtins map[string]builtin

func init() {
	builtins = map[string]builtin{
		"each":                   {min: 2, max: -1, fn: biEach},
		"if":                     {min: 2, max: 3, fn: biIf},
		"eval":                   {min: 1, max: 1, fn: biEval},
		"sql":                    {min: 1, max: 2, fn: biSQL},
		"reduce":                 {min: 2, max: -1, fn: biReduce},
		"filter":                 {min: 2, max: -1, fn: biFilter},
		"star":                   {min: 1, max: 7, params: []string{"relation", "alias", "exclude", "prefix", "suffix", "quote_identifiers", "except_"}, fn: biStar},
		"generate_surrogate_key": {min: 1, max: -1, fn: biSurrogateKey},
		"safe_add":               {min: 1, max: -1, fn: func(ev *evaluator, c node, a [][]node) (value, error) { return biSafe(ev, c, a, " + ") }},
		"safe_sub":               {min: 1, max: -1, fn: func(ev *evaluator, c node, a [][]node) (value, error) { return biSafe(ev, c, a, " - ") }},
		"safe_div":               {min: 2, max: 2, fn: biSafeDiv},
		"union":                  {min: 1, max: -1, fn: biUnion},
		"haversine_distance":     {min: 4, max: 5, params: []string{"lat1", "lon1", "lat2", "lon2", "unit"}, fn: biHaversine},
		"pivot":                  {min: 2, max: 11, params: []string{"column", "values", "alias", "agg", "cmp", "prefix", "suffix", "then_value", "else_value", "quote", "distinct"}, fn: biPivot},
		"and":                    {min: 0, max: -1, fn: func(ev *evaluator, c node, a [][]node) (value, error) { return biLogic(ev, c, a, "AND") }},
		"or":                     {min: 0, max: -1, fn: func(ev *evaluator, c node, a [][]node) (value, error) { return biLogic(ev, c, a, "OR") }},
		"var":                    {min: 1, max: 2, fn: biVar},
		"deduplicate":            {min: 3, max: 3, params: []string{"relation", "partition_by", "order_by"}, fn: biDeduplicate},
		"date_spine":             {min: 3, max: 3, params: []string{"datepart", "start_date", "end_date"}, fn: biDateSpine},
		"resolve_template":       {min: 1, max: 2, params: []string{"template", "mode"}, fn: biResolveTemplate},
	}
	for _, c := range clauseOps {
		builtins[c] = builtin{min: 1, max: 1, fn: biClause}
	}
}

// clauseOps are the SQL clause operators (@WHERE(cond) ..., ...).
var clauseOps = []string{"with", "join", "where", "group_by", "having", "order_by", "limit"}

// IsFunction reports whether name (without the @, in any case) is a macro
// function: a built-in operator, a clause operator, or a function of lib
// (nil: none). Callers that give @name a meaning of their own (an audit's
// arguments) leave these to the macro evaluator.
func IsFunction(name string, lib *Library) bool {
	n := strings.ToLower(name)
	if _, ok := builtins[n]; ok || slices.Contains(clauseOps, n) || n == "def" {
		return true
	}
	_, ok := lib.Lookup(n)
	return ok
}

func builtinNames() []string {
	out := make([]string, 0, len(builtins))
	for n := range builtins {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func (b builtin) checkArity(call node, args [][]node) error {
	n := len(args)
	if n >= b.min && (b.max < 0 || n <= b.max) {
		return nil
	}
	name := strings.ToUpper(call.tok.name())
	var want string
	switch {
	case b.max < 0:
		want = fmt.Sprintf("at least %d %s", b.min, plural(b.min, "argument"))
	case b.min == b.max:
		want = fmt.Sprintf("%d %s", b.min, plural(b.min, "argument"))
	default:
		want = fmt.Sprintf("%d to %d arguments", b.min, b.max)
	}
	return &Error{Offset: call.tok.Off, Name: call.tok.name(), Code: CodeArity, Msg: fmt.Sprintf("@%s takes %s, got %d", name, want, n)}
}

// bind maps keyword (name := value) and positional arguments to params:
// positional arguments fill, in order, the parameters no keyword argument
// names (so @STAR(foo, bar, exclude := [c], 'pre_') gives prefix 'pre_',
// as SQLMesh's documentation shows).
func bind(call node, args [][]node, params []string) (map[string][]node, error) {
	out := map[string][]node{}
	known := map[string]bool{}
	for _, p := range params {
		known[p] = true
	}
	var positional [][]node
	for _, a := range args {
		sig := significant(a)
		if len(sig) >= 2 && sig[0].isTok(tWord, "") && sig[1].isTok(tOp, ":=") {
			name := strings.ToLower(sig[0].tok.Text)
			if !known[name] {
				return nil, &Error{Offset: call.tok.Off, Name: call.tok.name(), Code: CodeSyntax, Msg: fmt.Sprintf(
					"@%s has no argument %s (arguments: %s)", strings.ToUpper(call.tok.name()), name, strings.Join(params, ", "))}
			}
			if _, dup := out[name]; dup {
				return nil, &Error{Offset: call.tok.Off, Name: call.tok.name(), Code: CodeSyntax, Msg: fmt.Sprintf(
					"@%s: argument %s is given twice", strings.ToUpper(call.tok.name()), name)}
			}
			for j := range a {
				if a[j].isTok(tOp, ":=") {
					out[name] = trim(a[j+1:])
					break
				}
			}
			continue
		}
		positional = append(positional, a)
	}
	next := 0
	for _, a := range positional {
		for next < len(params) && out[params[next]] != nil {
			next++
		}
		if next >= len(params) {
			return nil, &Error{Offset: call.tok.Off, Name: call.tok.name(), Code: CodeArity, Msg: fmt.Sprintf(
				"@%s takes at most %d arguments, got %d", strings.ToUpper(call.tok.name()), len(params), len(args))}
		}
		out[params[next]] = a
		next++
	}
	return out, nil
}

// itemsAndLambda splits @EACH/@REDUCE/@FILTER arguments: the items (one
// list argument or several arguments) and the lambda.
func (ev *evaluator) itemsAndLambda(call node, args [][]node, arity int) ([]value, lambda, error) {
	l, ok, err := asLambda(args[len(args)-1])
	if err != nil {
		return nil, lambda{}, err
	}
	name := strings.ToUpper(call.tok.name())
	if !ok {
		return nil, lambda{}, &Error{Offset: call.tok.Off, Name: call.tok.name(), Code: CodeSyntax, Msg: fmt.Sprintf(
			"@%s's last argument must be a lambda such as %s, got %s", name, map[int]string{1: "x -> x + 1", 2: "(x, y) -> x + y"}[arity], clip(text(args[len(args)-1])))}
	}
	if len(l.params) != arity {
		return nil, lambda{}, &Error{Offset: call.tok.Off, Name: call.tok.name(), Code: CodeArity, Msg: fmt.Sprintf(
			"@%s's lambda takes %d %s, got %d", name, arity, plural(arity, "parameter"), len(l.params))}
	}
	var items []value
	if len(args) == 2 {
		v, err := ev.argValue(args[0])
		if err != nil {
			return nil, lambda{}, err
		}
		items = v.listItems()
	} else {
		for _, a := range args[:len(args)-1] {
			v, err := ev.argValue(a)
			if err != nil {
				return nil, lambda{}, err
			}
			items = append(items, v)
		}
	}
	return items, l, nil
}

func biEach(ev *evaluator, call node, args [][]node) (value, error) {
	items, l, err := ev.itemsAndLambda(call, args, 1)
	if err != nil {
		return value{}, err
	}
	out := value{isList: true}
	for _, it := range items {
		r, err := ev.apply(l, []value{it})
		if err != nil {
			return value{}, err
		}
		if len(significant(r)) > 0 {
			out.items = append(out.items, single(r))
		}
	}
	return out, nil
}

func biReduce(ev *evaluator, call node, args [][]node) (value, error) {
	items, l, err := ev.itemsAndLambda(call, args, 2)
	if err != nil {
		return value{}, err
	}
	if len(items) == 0 {
		return value{}, nil
	}
	acc := items[0]
	for _, it := range items[1:] {
		r, err := ev.apply(l, []value{acc, it})
		if err != nil {
			return value{}, err
		}
		acc = single(r)
	}
	return acc, nil
}

func biFilter(ev *evaluator, call node, args [][]node) (value, error) {
	items, l, err := ev.itemsAndLambda(call, args, 1)
	if err != nil {
		return value{}, err
	}
	out := value{isList: true}
	for _, it := range items {
		ev.valueCtx++
		r, err := ev.apply(l, []value{it})
		ev.valueCtx--
		if err != nil {
			return value{}, err
		}
		c, err := evalCond(r, call.tok.Off)
		if err != nil {
			return value{}, err
		}
		if c.truthy() {
			out.items = append(out.items, it)
		}
	}
	return out, nil
}

// condition expands a condition argument and evaluates it.
func (ev *evaluator) condition(call node, a []node) (cval, error) {
	ev.valueCtx++
	exp, err := ev.expand(a)
	ev.valueCtx--
	if err != nil {
		return cval{}, err
	}
	return evalCond(exp, call.tok.Off)
}

func biIf(ev *evaluator, call node, args [][]node) (value, error) {
	c, err := ev.condition(call, args[0])
	if err != nil {
		return value{}, err
	}
	branch := 1
	if !c.truthy() {
		branch = 2
	}
	if branch >= len(args) {
		return value{}, nil
	}
	// The branch keeps its own tokens (only its macros are expanded), so
	// that positions inside it map back to the file.
	return ev.argValue(args[branch])
}

func biEval(ev *evaluator, call node, args [][]node) (value, error) {
	c, err := ev.condition(call, args[0])
	if err != nil {
		return value{}, err
	}
	return single(generated(c.sql(), call.tok.Off)), nil
}

// biSQL turns a string into SQL: @SQL('@{x}_col') is the identifier
// x_col. Variables inside the string are replaced by their text.
func biSQL(ev *evaluator, call node, args [][]node) (value, error) {
	v, err := ev.argValue(args[0])
	if err != nil {
		return value{}, err
	}
	src := v.name()
	var b strings.Builder
	for _, t := range lex(src) {
		if t.Kind == tMacro || t.Kind == tBrace {
			if lv, ok := ev.lookup(t.name()); ok && lv.def == nil && !lv.self {
				b.WriteString(lv.name())
				continue
			}
		}
		b.WriteString(t.Text)
	}
	nodes := generated(b.String(), call.tok.Off)
	out, err := ev.expand(nodes)
	if err != nil {
		return value{}, err
	}
	return single(out), nil
}

// operand is v's SQL, parenthesised unless it is a single token or group.
func operand(v value) string {
	s := strings.TrimSpace(oneLine(v.sqlNodes(0)))
	if len(significant(v.sqlNodes(0))) > 1 && !isCallLike(v.sqlNodes(0)) {
		return "(" + s + ")"
	}
	return s
}

// isCallLike reports whether nodes are a function call f(...) or a
// qualified name a.b.c.
func isCallLike(nodes []node) bool {
	sig := significant(nodes)
	if len(sig) == 2 && sig[0].isTok(tWord, "") && sig[1].bracket() == "(" {
		return true
	}
	for i, n := range sig {
		if i%2 == 1 && !n.isTok(tOp, ".") {
			return false
		}
		if i%2 == 0 && !(n.isTok(tWord, "") || n.isTok(tQIdent, "")) {
			return false
		}
	}
	return len(sig)%2 == 1
}

func (ev *evaluator) values(args [][]node) ([]value, error) {
	out := make([]value, len(args))
	for i, a := range args {
		v, err := ev.argValue(a)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

func biSafe(ev *evaluator, call node, args [][]node, op string) (value, error) {
	vals, err := ev.values(args)
	if err != nil {
		return value{}, err
	}
	var nulls, sums []string
	for _, v := range vals {
		o := operand(v)
		nulls = append(nulls, o+" IS NULL")
		sums = append(sums, "COALESCE("+oneLine(v.sqlNodes(0))+", 0)")
	}
	s := "CASE WHEN " + strings.Join(nulls, " AND ") + " THEN NULL ELSE " + strings.Join(sums, op) + " END"
	return single(generated(s, call.tok.Off)), nil
}

func biSafeDiv(ev *evaluator, call node, args [][]node) (value, error) {
	vals, err := ev.values(args)
	if err != nil {
		return value{}, err
	}
	s := "(" + operand(vals[0]) + " / NULLIF(" + oneLine(vals[1].sqlNodes(0)) + ", 0))"
	return single(generated(s, call.tok.Off)), nil
}

func biLogic(ev *evaluator, call node, args [][]node, op string) (value, error) {
	vals, err := ev.values(args)
	if err != nil {
		return value{}, err
	}
	var parts []string
	for _, v := range vals {
		s := oneLine(v.sqlNodes(0))
		if s == "" || strings.EqualFold(s, "NULL") {
			continue
		}
		parts = append(parts, operand(v))
	}
	if len(parts) == 0 {
		return single(generated("TRUE", call.tok.Off)), nil
	}
	return single(generated(strings.Join(parts, " "+op+" "), call.tok.Off)), nil
}

func biVar(ev *evaluator, call node, args [][]node) (value, error) {
	sig := significant(args[0])
	if len(sig) != 1 || !sig[0].isTok(tString, "") {
		return value{}, &Error{Offset: call.tok.Off, Name: "var", Code: CodeSyntax, Msg: "@VAR's first argument must be the variable's name in single quotes, as in @VAR('my_var'), got " + clip(text(args[0]))}
	}
	name := strings.ToLower(stringContent(sig[0].tok.Text))
	if ev.env != nil {
		if v, ok := ev.env.Variables[name]; ok {
			return ev.fromConfig(v, call.tok.Off), nil
		}
	}
	if len(args) == 2 {
		return ev.argValue(args[1])
	}
	return single(generated("NULL", call.tok.Off)), nil
}

func biSurrogateKey(ev *evaluator, call node, args [][]node) (value, error) {
	hash := "MD5"
	var fields []value
	for _, a := range args {
		sig := significant(a)
		if len(sig) >= 2 && sig[0].isTok(tWord, "hash_function") && sig[1].isTok(tOp, ":=") {
			v, err := ev.argValue(sig[2:])
			if err != nil {
				return value{}, err
			}
			hash = strings.ToUpper(v.name())
			continue
		}
		v, err := ev.argValue(a)
		if err != nil {
			return value{}, err
		}
		fields = append(fields, v)
	}
	if len(fields) == 0 {
		return value{}, &Error{Offset: call.tok.Off, Name: "generate_surrogate_key", Code: CodeArity, Msg: "@GENERATE_SURROGATE_KEY takes at least 1 column, got 0"}
	}
	textType := "TEXT"
	switch strings.ToLower(ev.dialect) {
	case "trino":
		textType = "VARCHAR"
	case "bigquery":
		textType = "STRING"
	}
	var parts []string
	for i, f := range fields {
		if i > 0 {
			parts = append(parts, "'|'")
		}
		parts = append(parts, "COALESCE(CAST("+oneLine(f.sqlNodes(0))+" AS "+textType+"), '_sqlmesh_surrogate_key_null_')")
	}
	s := hash + "(CONCAT(" + strings.Join(parts, ", ") + "))"
	switch strings.ToLower(ev.dialect) {
	case "trino":
		s = "LOWER(TO_HEX(" + hash + "(TO_UTF8(CONCAT(" + strings.Join(parts, ", ") + ")))))"
	case "bigquery":
		// BigQuery's MD5 returns BYTES; SQLMesh writes TO_HEX around it,
		// which package dialect carries over to the engine's hex digest.
		s = "TO_HEX(" + s + ")"
	}
	return single(generated(s, call.tok.Off)), nil
}

func biHaversine(ev *evaluator, call node, args [][]node) (value, error) {
	b, err := bind(call, args, builtins["haversine_distance"].params)
	if err != nil {
		return value{}, err
	}
	get := func(k string) (string, error) {
		v, err := ev.argValue(b[k])
		return operand(v), err
	}
	var ps [4]string
	for i, k := range []string{"lat1", "lon1", "lat2", "lon2"} {
		if ps[i], err = get(k); err != nil {
			return value{}, err
		}
	}
	rate := "1.0"
	if u, ok := b["unit"]; ok {
		v, err := ev.argValue(u)
		if err != nil {
			return value{}, err
		}
		switch v.name() {
		case "mi":
		case "km":
			rate = "1.60934"
		default:
			return value{}, &Error{Offset: call.tok.Off, Name: "haversine_distance", Code: CodeSyntax, Msg: fmt.Sprintf("@HAVERSINE_DISTANCE: invalid unit %s, expected 'mi' or 'km'", oneLine(v.sqlNodes(0)))}
		}
	}
	lat1, lon1, lat2, lon2 := ps[0], ps[1], ps[2], ps[3]
	s := fmt.Sprintf("7922 * ASIN(SQRT((POWER(SIN(RADIANS((%s - %s) / 2)), 2)) + (COS(RADIANS(%s)) * COS(RADIANS(%s)) * POWER(SIN(RADIANS((%s - %s) / 2)), 2)))) * %s",
		lat2, lat1, lat1, lat2, lon2, lon1, rate)
	return single(generated(s, call.tok.Off)), nil
}

// boolArg reads TRUE/FALSE.
func (ev *evaluator) boolArg(call node, a []node, def bool) (bool, error) {
	if a == nil {
		return def, nil
	}
	c, err := ev.condition(call, a)
	if err != nil {
		return false, err
	}
	return c.truthy(), nil
}

func biPivot(ev *evaluator, call node, args [][]node) (value, error) {
	b, err := bind(call, args, builtins["pivot"].params)
	if err != nil {
		return value{}, err
	}
	str := func(k, def string) (string, error) {
		if a, ok := b[k]; ok {
			v, err := ev.argValue(a)
			return v.name(), err
		}
		return def, nil
	}
	sqlOf := func(k, def string) (string, error) {
		if a, ok := b[k]; ok {
			v, err := ev.argValue(a)
			return oneLine(v.sqlNodes(0)), err
		}
		return def, nil
	}
	col, err := sqlOf("column", "")
	if err != nil {
		return value{}, err
	}
	vals, err := ev.argValue(b["values"])
	if err != nil {
		return value{}, err
	}
	alias, err := ev.boolArg(call, b["alias"], true)
	if err != nil {
		return value{}, err
	}
	quote, err := ev.boolArg(call, b["quote"], true)
	if err != nil {
		return value{}, err
	}
	distinct, err := ev.boolArg(call, b["distinct"], false)
	if err != nil {
		return value{}, err
	}
	agg, err := str("agg", "SUM")
	if err != nil {
		return value{}, err
	}
	cmp, err := str("cmp", "=")
	if err != nil {
		return value{}, err
	}
	prefix, err := str("prefix", "")
	if err != nil {
		return value{}, err
	}
	suffix, err := str("suffix", "")
	if err != nil {
		return value{}, err
	}
	thenV, err := sqlOf("then_value", "1")
	if err != nil {
		return value{}, err
	}
	elseV, err := sqlOf("else_value", "0")
	if err != nil {
		return value{}, err
	}
	out := value{isList: true}
	for _, v := range vals.listItems() {
		s := agg + "("
		if distinct {
			s += "DISTINCT "
		}
		s += "CASE WHEN " + col + " " + cmp + " " + oneLine(v.sqlNodes(0)) + " THEN " + thenV + " ELSE " + elseV + " END)"
		if alias {
			name := prefix + v.name() + suffix
			if quote {
				name = `"` + strings.ReplaceAll(name, `"`, `""`) + `"`
			} else {
				name = asIdent(name)
			}
			s += " AS " + name
		}
		out.items = append(out.items, single(generated(s, call.tok.Off)))
	}
	return out, nil
}

func biDeduplicate(ev *evaluator, call node, args [][]node) (value, error) {
	b, err := bind(call, args, builtins["deduplicate"].params)
	if err != nil {
		return value{}, err
	}
	rel, err := ev.expand(b["relation"])
	if err != nil {
		return value{}, err
	}
	parts, err := ev.argValue(b["partition_by"])
	if err != nil {
		return value{}, err
	}
	if !parts.isList {
		return value{}, &Error{Offset: call.tok.Off, Name: "deduplicate", Code: CodeSyntax, Msg: "@DEDUPLICATE: partition_by must be a list of columns, as in [id, CAST(ts AS DATE)]"}
	}
	orders, err := ev.argValue(b["order_by"])
	if err != nil {
		return value{}, err
	}
	if !orders.isList || len(orders.items) == 0 {
		return value{}, &Error{Offset: call.tok.Off, Name: "deduplicate", Code: CodeSyntax, Msg: "@DEDUPLICATE: order_by must be a non-empty list of strings, as in ['ts DESC', 'status ASC NULLS LAST']"}
	}
	var ps, os []string
	for _, p := range parts.items {
		ps = append(ps, oneLine(p.sqlNodes(0)))
	}
	for _, o := range orders.items {
		os = append(os, o.name())
	}
	out := generated("SELECT * FROM ", call.tok.Off)
	out = append(out, trim(rel)...)
	out = append(out, generated(" QUALIFY ROW_NUMBER() OVER (PARTITION BY "+strings.Join(ps, ", ")+" ORDER BY "+strings.Join(os, ", ")+") = 1", call.tok.Off)...)
	return single(out), nil
}

func biDateSpine(ev *evaluator, call node, args [][]node) (value, error) {
	b, err := bind(call, args, builtins["date_spine"].params)
	if err != nil {
		return value{}, err
	}
	get := func(k string) (value, error) { return ev.argValue(b[k]) }
	dp, err := get("datepart")
	if err != nil {
		return value{}, err
	}
	part := strings.ToLower(dp.name())
	switch part {
	case "day", "week", "month", "quarter", "year":
	default:
		return value{}, &Error{Offset: call.tok.Off, Name: "date_spine", Code: CodeSyntax, Msg: fmt.Sprintf("@DATE_SPINE: invalid datepart '%s', expected 'day', 'week', 'month', 'quarter' or 'year'", part)}
	}
	var ends [2]string
	var dates [2]time.Time
	for i, k := range []string{"start_date", "end_date"} {
		v, err := get(k)
		if err != nil {
			return value{}, err
		}
		sig := significant(v.nodes)
		if len(sig) == 1 && sig[0].isTok(tString, "") {
			d, err := time.Parse("2006-01-02", v.name())
			if err != nil {
				return value{}, &Error{Offset: call.tok.Off, Name: "date_spine", Code: CodeSyntax, Msg: fmt.Sprintf("@DATE_SPINE: %s %s is not a date in the format YYYY-MM-DD", k, oneLine(v.nodes))}
			}
			dates[i] = d
			ends[i] = "CAST(" + oneLine(v.nodes) + " AS DATE)"
		} else {
			ends[i] = oneLine(v.sqlNodes(0))
		}
	}
	if !dates[0].IsZero() && !dates[1].IsZero() && dates[0].After(dates[1]) {
		return value{}, &Error{Offset: call.tok.Off, Name: "date_spine", Code: CodeSyntax, Msg: fmt.Sprintf("@DATE_SPINE: start_date %s is after end_date %s", dates[0].Format("2006-01-02"), dates[1].Format("2006-01-02"))}
	}
	n, unit := "1", part
	if part == "quarter" {
		n, unit = "3", "month"
	}
	col := "date_" + part
	var s string
	switch strings.ToLower(ev.dialect) {
	case "trino":
		s = fmt.Sprintf("SELECT %s FROM UNNEST(SEQUENCE(%s, %s, INTERVAL '%s' %s)) AS _exploded(%s)", col, ends[0], ends[1], n, strings.ToUpper(unit), col)
	default:
		s = fmt.Sprintf("SELECT CAST(_exploded.%s AS DATE) AS %s FROM GENERATE_SERIES(%s, %s, INTERVAL '%s %s') AS _exploded(%s)", col, col, ends[0], ends[1], n, unit, col)
	}
	return single(generated(s, call.tok.Off)), nil
}

func biResolveTemplate(ev *evaluator, call node, args [][]node) (value, error) {
	b, err := bind(call, args, builtins["resolve_template"].params)
	if err != nil {
		return value{}, err
	}
	tv, err := ev.argValue(b["template"])
	if err != nil {
		return value{}, err
	}
	mode := "literal"
	if a, ok := b["mode"]; ok {
		mv, err := ev.argValue(a)
		if err != nil {
			return value{}, err
		}
		mode = strings.ToLower(mv.name())
	}
	if mode != "literal" && mode != "table" {
		return value{}, &Error{Offset: call.tok.Off, Name: "resolve_template", Code: CodeSyntax, Msg: "@RESOLVE_TEMPLATE: mode must be 'literal' or 'table', got '" + mode + "'"}
	}
	switch ev.mode {
	case modeExpand:
		return value{}, errDefer
	case modeParse:
		if mode == "table" {
			return single(generated(ThisModelPlaceholder, call.tok.Off)), nil
		}
		return single(generated(literal(tv.name(), ev.dialect), call.tok.Off)), nil
	}
	if ev.vars.ThisModel == "" {
		return value{}, &Error{Offset: call.tok.Off, Name: "resolve_template", Code: CodeMissingValue, Msg: "@RESOLVE_TEMPLATE needs @this_model, which is not set here (Vars.ThisModel is empty)"}
	}
	parts := splitName(ev.vars.ThisModel)
	var catalog, schema, table string
	switch len(parts) {
	case 1:
		table = parts[0]
	case 2:
		schema, table = parts[0], parts[1]
	default:
		catalog, schema, table = parts[len(parts)-3], parts[len(parts)-2], parts[len(parts)-1]
	}
	s := strings.NewReplacer("@{catalog_name}", catalog, "@{schema_name}", schema, "@{table_name}", table).Replace(tv.name())
	if mode == "table" {
		var q []string
		for _, p := range splitName(s) {
			q = append(q, `"`+strings.ReplaceAll(p, `"`, `""`)+`"`)
		}
		return single(generated(strings.Join(q, "."), call.tok.Off)), nil
	}
	return single(generated(literal(s, ev.dialect), call.tok.Off)), nil
}

// splitName splits a possibly quoted dotted name into its unquoted parts.
func splitName(s string) []string {
	var out []string
	var b strings.Builder
	inQuote := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' && inQuote && i+1 < len(s) && s[i+1] == '"':
			b.WriteByte('"')
			i++
		case c == '"':
			inQuote = !inQuote
		case c == '.' && !inQuote:
			out = append(out, b.String())
			b.Reset()
		default:
			b.WriteByte(c)
		}
	}
	return append(out, b.String())
}

// columns asks Env.Columns for a relation's columns; errDefer in
// modeExpand when it is not known.
func (ev *evaluator) columns(call node, rel string) ([]Column, bool, error) {
	if ev.env == nil || ev.env.Columns == nil {
		switch ev.mode {
		case modeExpand:
			return nil, false, errDefer
		case modeParse:
			return nil, false, nil
		}
		return nil, false, &Error{Offset: call.tok.Off, Name: call.tok.name(), Code: CodeMissingValue, Msg: fmt.Sprintf(
			"@%s needs the columns of %s, which are not known here", strings.ToUpper(call.tok.name()), rel)}
	}
	cols, err := ev.env.Columns(rel)
	if err != nil {
		return nil, false, &Error{Offset: call.tok.Off, Name: call.tok.name(), Code: CodeMissingValue, Msg: fmt.Sprintf(
			"@%s: reading the columns of %s: %v", strings.ToUpper(call.tok.name()), rel, err)}
	}
	return cols, true, nil
}

func biStar(ev *evaluator, call node, args [][]node) (value, error) {
	b, err := bind(call, args, builtins["star"].params)
	if err != nil {
		return value{}, err
	}
	relNodes, err := ev.expand(b["relation"])
	if err != nil {
		return value{}, err
	}
	rel := oneLine(relNodes)
	alias := ""
	if a, ok := b["alias"]; ok {
		v, err := ev.argValue(a)
		if err != nil {
			return value{}, err
		}
		alias = v.name()
	}
	excluded := map[string]bool{}
	for _, k := range []string{"exclude", "except_"} {
		if a, ok := b[k]; ok {
			v, err := ev.argValue(a)
			if err != nil {
				return value{}, err
			}
			for _, it := range v.listItems() {
				excluded[strings.ToLower(it.name())] = true
			}
		}
	}
	prefix, suffix := "", ""
	if a, ok := b["prefix"]; ok {
		v, err := ev.argValue(a)
		if err != nil {
			return value{}, err
		}
		prefix = v.name()
	}
	if a, ok := b["suffix"]; ok {
		v, err := ev.argValue(a)
		if err != nil {
			return value{}, err
		}
		suffix = v.name()
	}
	quoted, err := ev.boolArg(call, b["quote_identifiers"], true)
	if err != nil {
		return value{}, err
	}
	cols, known, err := ev.columns(call, rel)
	if err != nil {
		return value{}, err
	}
	table := alias
	if table == "" {
		parts := splitName(rel)
		table = parts[len(parts)-1]
	}
	q := func(s string) string {
		if quoted {
			return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
		}
		return s
	}
	if !known {
		// Parsing only: a stand-in that selects the relation's columns.
		if alias != "" {
			return single(generated(q(alias)+".*", call.tok.Off)), nil
		}
		return single(generated("*", call.tok.Off)), nil
	}
	allTyped := true
	var kept []Column
	for _, c := range cols {
		if excluded[strings.ToLower(c.Name)] {
			continue
		}
		kept = append(kept, c)
		if c.Type == "" {
			allTyped = false
		}
	}
	out := value{isList: true}
	for _, c := range kept {
		ref := q(table) + "." + q(c.Name)
		if allTyped {
			ref = "CAST(" + ref + " AS " + c.Type + ")"
		}
		out.items = append(out.items, single(generated(ref+" AS "+q(prefix+c.Name+suffix), call.tok.Off)))
	}
	return out, nil
}

func biUnion(ev *evaluator, call node, args [][]node) (value, error) {
	i := 0
	cond := true
	if sig := significant(args[0]); !isCallLike(args[0]) && !(len(sig) == 1 && sig[0].isTok(tString, "")) {
		c, err := ev.condition(call, args[0])
		if err != nil {
			return value{}, err
		}
		cond, i = c.truthy(), 1
	}
	kind := "ALL"
	if i < len(args) {
		if sig := significant(args[i]); len(sig) == 1 && sig[0].isTok(tString, "") {
			kind = strings.ToUpper(stringContent(sig[0].tok.Text))
			i++
		}
	}
	if kind != "ALL" && kind != "DISTINCT" {
		return value{}, &Error{Offset: call.tok.Off, Name: "union", Code: CodeSyntax, Msg: "@UNION: the union type must be 'ALL' or 'DISTINCT', got '" + kind + "'"}
	}
	if i >= len(args) {
		return value{}, &Error{Offset: call.tok.Off, Name: "union", Code: CodeArity, Msg: "@UNION needs at least one table after the condition and the type"}
	}
	var tables [][]node
	for _, a := range args[i:] {
		t, err := ev.expand(a)
		if err != nil {
			return value{}, err
		}
		tables = append(tables, trim(t))
	}
	// Columns common to every table (by name and type), in the first
	// table's order.
	var proj []string
	var common map[string]string
	for ti, t := range tables {
		cols, known, err := ev.columns(call, oneLine(t))
		if err != nil {
			return value{}, err
		}
		if !known {
			proj = nil
			common = nil
			break
		}
		m := map[string]string{}
		for _, c := range cols {
			m[strings.ToLower(c.Name)] = c.Type
		}
		if ti == 0 {
			common = m
			for _, c := range cols {
				proj = append(proj, c.Name)
			}
			continue
		}
		for k, typ := range common {
			if ot, ok := m[k]; !ok || !strings.EqualFold(ot, typ) {
				delete(common, k)
			}
		}
	}
	sel := "SELECT * FROM "
	if common != nil {
		var ps []string
		for _, c := range proj {
			typ, ok := common[strings.ToLower(c)]
			if !ok {
				continue
			}
			if typ == "" {
				ps = append(ps, c)
			} else {
				ps = append(ps, "CAST("+c+" AS "+typ+") AS "+c)
			}
		}
		if len(ps) == 0 {
			return value{}, &Error{Offset: call.tok.Off, Name: "union", Code: CodeSyntax, Msg: "@UNION: the tables have no column of the same name and type"}
		}
		sel = "SELECT " + strings.Join(ps, ", ") + " FROM "
	}
	if !cond {
		tables = tables[:1]
	}
	op := " UNION ALL "
	if kind == "DISTINCT" {
		op = " UNION "
	}
	var out []node
	for ti, t := range tables {
		if ti == 0 {
			out = append(out, generated(sel, call.tok.Off)...)
		} else {
			out = append(out, generated(op+sel, call.tok.Off)...)
		}
		out = append(out, t...)
	}
	return single(out), nil
}

// biClause is a SQL clause operator's condition; expand handles what
// follows it (see clause).
func biClause(ev *evaluator, call node, args [][]node) (value, error) {
	c, err := ev.condition(call, args[0])
	if err != nil {
		return value{}, err
	}
	if !c.truthy() {
		return value{}, nil
	}
	kw := strings.ToUpper(strings.ReplaceAll(call.tok.name(), "_", " "))
	return single(generated(kw, call.tok.Off)), nil
}

// SplitName splits a dotted relation name, each part possibly
// double-quoted, into its unquoted parts.
func SplitName(s string) []string { return splitName(strings.TrimSpace(s)) }
