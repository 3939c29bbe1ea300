package dialect

import (
	"strings"
)

// call is a function call being rewritten: its name, its parenthesized
// group, and the group's arguments split at its top-level commas.
type call struct {
	name Token
	g    node
	args [][]node
}

// rule rewrites one call.
type rule func(t *transpiler, c call) error

// families lists the source families a rule applies to; "*" is every
// family but the engines' own (postgres, presto).
type familyRule struct {
	families []string
	r        rule
}

// callRules are the function calls rewritten or refused, by upper-case
// name. Every rule is listed in the package README section of the
// project's README.
var callRules map[string][]familyRule

func init() {
	foreign := []string{"bigquery", "snowflake", "spark", "mysql", "tsql", "clickhouse", "other"}
	callRules = map[string][]familyRule{
		"CAST":      {{foreign, castRule("CAST")}, {[]string{"postgres", "presto"}, castRule("CAST")}},
		"SAFE_CAST": {{[]string{"bigquery"}, castRule("TRY_CAST")}},
		"TRY_CAST":  {{foreign, castRule("TRY_CAST")}, {[]string{"postgres", "presto"}, castRule("TRY_CAST")}},
		"IFF":       {{[]string{"snowflake", "tsql"}, ifRule}},
		"IIF":       {{[]string{"tsql"}, ifRule}},
		"IF":        {{[]string{"bigquery", "spark", "mysql", "clickhouse"}, ifRule}},
		"NVL":       {{append(foreign, "postgres"), coalesceRule(2)}},
		"IFNULL":    {{foreign, coalesceRule(2)}},
		"ISNULL":    {{[]string{"tsql"}, coalesceRule(2)}, {[]string{"spark", "mysql"}, isNullRule}},
		"NVL2":      {{append(foreign, "postgres"), nvl2Rule}},
		"ZEROIFNULL": {{[]string{"snowflake", "other"}, func(t *transpiler, c call) error {
			return t.template(c, 1, "COALESCE(", 0, ", 0)")
		}}},
		"NULLIFZERO": {{[]string{"snowflake", "other"}, func(t *transpiler, c call) error {
			return t.template(c, 1, "NULLIF(", 0, ", 0)")
		}}},
		"DIV0":              {{[]string{"snowflake"}, divideRule("0")}},
		"SAFE_DIVIDE":       {{[]string{"bigquery"}, divideRule("NULL")}},
		"CONCAT":            {{[]string{"bigquery", "snowflake", "spark", "mysql", "clickhouse"}, concatRule}},
		"CURRENT_DATE":      {{foreign, noArgsRule("CURRENT_DATE")}},
		"CURRENT_TIMESTAMP": {{foreign, noArgsRule("CURRENT_TIMESTAMP")}},
		"DATE_TRUNC":        {{[]string{"bigquery"}, truncBigQuery}, {[]string{"snowflake", "spark"}, truncPartFirst}},
		"TIMESTAMP_TRUNC":   {{[]string{"bigquery"}, truncBigQuery}},
		"DATETIME_TRUNC":    {{[]string{"bigquery"}, truncBigQuery}},
		"DATE_FORMAT":       {{[]string{"spark"}, formatRule(javaFormat, 1, 0)}, {[]string{"mysql"}, formatRule(mysqlFormat, 1, 0)}},
		"FORMAT_DATE":       {{[]string{"bigquery"}, formatRule(strftimeFormat, 0, 1)}},
		"FORMAT_TIMESTAMP":  {{[]string{"bigquery"}, formatRule(strftimeFormat, 0, 1)}},
		"FORMAT_DATETIME":   {{[]string{"bigquery"}, formatRule(strftimeFormat, 0, 1)}},
		"REGEXP_CONTAINS":   {{[]string{"bigquery"}, regexpContains}},
		"TO_HEX":            {{[]string{"bigquery"}, toHexRule}},
		"EXTRACT":           {{[]string{"bigquery", "snowflake", "spark", "mysql", "tsql"}, extractRule}},
	}
	refuse := func(families []string, why string, names ...string) {
		for _, n := range names {
			callRules[n] = append(callRules[n], familyRule{families, func(t *transpiler, c call) error {
				return t.refuse(c.name.Off, strings.ToUpper(c.name.Text)+"(...)", "%s", why)
			}})
		}
	}
	refuse([]string{"bigquery"}, "its namesake on the engine takes other arguments or returns another type; write the date arithmetic with + INTERVAL or a CAST",
		"DATE_ADD", "DATE_SUB", "DATE_DIFF", "DATETIME_ADD", "DATETIME_SUB", "DATETIME_DIFF", "TIMESTAMP_ADD", "TIMESTAMP_SUB", "TIMESTAMP_DIFF")
	refuse([]string{"bigquery"}, "BigQuery's hashes return BYTES, the engine's a hexadecimal string", "MD5", "SHA1", "SHA256", "SHA512")
	refuse([]string{"bigquery"}, "its format string or result differs on the engine", "FORMAT", "PARSE_DATE", "PARSE_TIMESTAMP", "PARSE_DATETIME")
	refuse([]string{"bigquery"}, "BigQuery's UNNEST joins and names its rows differently", "UNNEST")
	refuse([]string{"bigquery"}, "BigQuery's struct constructor has no common spelling", "STRUCT")
	refuse([]string{"bigquery", "snowflake", "spark", "mysql"}, "JSON functions' paths and results differ between engines",
		"JSON_EXTRACT", "JSON_EXTRACT_SCALAR", "JSON_VALUE", "JSON_QUERY", "GET_JSON_OBJECT", "JSON_EXTRACT_PATH_TEXT", "PARSE_JSON")
	refuse([]string{"snowflake"}, "DATEADD's result type differs on the engine (a DATE stays a DATE in Snowflake); write d + INTERVAL 'n' DAY with a CAST", "DATEADD", "TIMEADD", "TIMESTAMPADD")
	refuse([]string{"snowflake", "spark"}, "its argument order or counting differs on the engine; write date_diff('part', start, end) in the engine's dialect", "DATEDIFF", "TIMEDIFF", "TIMESTAMPDIFF")
	refuse([]string{"snowflake"}, "Snowflake's format strings differ from the engine's; use a CAST, or a model in the engine's dialect", "TO_CHAR", "TO_VARCHAR", "TO_DATE", "TO_TIMESTAMP")
	refuse([]string{"snowflake"}, "Snowflake's hash function differs from the engine's hash", "HASH")
	refuse([]string{"snowflake"}, "FLATTEN returns other columns than the engine's unnest", "FLATTEN")
	refuse([]string{"snowflake"}, "ARRAY_CONTAINS takes its arguments in the other order on the engine", "ARRAY_CONTAINS")
	refuse([]string{"spark"}, "EXPLODE is a generator with no common spelling", "EXPLODE", "POSEXPLODE", "INLINE")
	refuse([]string{"spark"}, "its arguments or result differ on the engine", "DATE_ADD", "DATE_SUB", "ADD_MONTHS", "FROM_UNIXTIME", "UNIX_TIMESTAMP", "TO_DATE")
	refuse([]string{"tsql"}, "LEN ignores trailing spaces in T-SQL and DATEADD/DATEDIFF/CONVERT take T-SQL arguments", "LEN", "DATEADD", "DATEDIFF", "CONVERT")
}

// rulesFor is the rule for name in t's source family, if any.
func (t *transpiler) ruleFor(name string) (rule, bool) {
	for _, fr := range callRules[name] {
		for _, f := range fr.families {
			if f == t.tr.family {
				return fr.r, true
			}
		}
	}
	return nil, false
}

// word writes the word ns[i] and whatever of what follows its rewrite
// takes; it returns the index of the last node consumed.
func (t *transpiler) word(ns []node, i int) (int, error) {
	tk := ns[i].tok
	up := strings.ToUpper(tk.Text)
	prev := prevSignificant(ns, i)
	qualified := prev >= 0 && (isPunct(ns[prev], ".") || isPunct(ns[prev], "@"))
	j := significant(ns, i+1)
	if !qualified && j < len(ns) && ns[j].group && !(j+1 < len(ns) && isPunct(ns[j+1], ".")) {
		if r, ok := t.ruleFor(up); ok {
			t.keepLines(ns[i+1:j], tk.Off)
			return j, r(t, call{name: tk, g: ns[j], args: splitArgs(ns[j].kids)})
		}
	}
	if !qualified {
		switch up {
		case "QUALIFY":
			if t.to != DuckDB {
				return i, t.refuse(tk.Off, "QUALIFY", "%s has no QUALIFY; filter the window function in an outer query", t.to)
			}
		case "ILIKE":
			if t.to == Trino {
				return i, t.refuse(tk.Off, "ILIKE", "Trino has no ILIKE; write lower(a) LIKE lower(b)")
			}
		case "PIVOT", "UNPIVOT":
			return i, t.refuse(tk.Off, up, "PIVOT names and orders its output columns differently on every engine; write the CASE expressions")
		case "TOP":
			if t.tr.family == "tsql" {
				return i, t.refuse(tk.Off, "TOP", "write LIMIT n at the end of the query")
			}
		case "LATERAL":
			if j < len(ns) && isWord(ns[j], "VIEW") {
				return i, t.refuse(tk.Off, "LATERAL VIEW", "LATERAL VIEW has no common spelling; unnest in a model in the engine's dialect")
			}
		case "STRUCT", "ARRAY", "MAP":
			if j < len(ns) && isPunct(ns[j], "<") {
				return i, t.refuse(tk.Off, up+"<...>", "typed %s literals and types have no common spelling", up)
			}
		case "DATETIME":
			if t.tr.family == "bigquery" && j < len(ns) && !ns[j].group && ns[j].tok.Kind == String {
				t.emit("TIMESTAMP", tk.Off)
				return i, nil
			}
		}
	}
	t.emit(tk.Text, tk.Off)
	return i, nil
}

// operandBefore reports whether the node before i ends an operand (so that
// a following [ is a subscript, not an array literal).
func operandBefore(ns []node, i int) bool {
	p := prevSignificant(ns, i)
	if p < 0 {
		return false
	}
	n := ns[p]
	if n.group || n.tok.Kind == Ident || n.tok.Kind == String || isPunct(n, "]") {
		return true
	}
	if n.tok.Kind != Word {
		return false
	}
	switch strings.ToUpper(n.tok.Text) {
	case "SELECT", "ARRAY", "IN", "AND", "OR", "NOT", "THEN", "ELSE", "WHEN", "CASE", "BY", "ON", "WHERE", "RETURN", "AS", "VALUES", "DISTINCT", "HAVING", "LIKE", "IS":
		return false
	}
	return true
}

// punct writes the punctuation ns[i], and what its rewrite takes.
func (t *transpiler) punct(ns []node, i int) (int, error) {
	tk := ns[i].tok
	switch tk.Text {
	case "*":
		j := significant(ns, i+1)
		if j < len(ns) && !ns[j].group && ns[j].tok.Kind == Word && starPosition(ns, i) {
			switch kw := strings.ToUpper(ns[j].tok.Text); kw {
			case "EXCEPT", "EXCLUDE", "REPLACE", "RENAME":
				k := significant(ns, j+1)
				if kw == "EXCEPT" && (k >= len(ns) || !ns[k].group || startsQuery(ns[k])) {
					break // a set operation
				}
				if t.to != DuckDB {
					return i, t.refuse(ns[j].tok.Off, "* "+kw, "%s has no * %s; list the columns", t.to, kw)
				}
				if kw == "RENAME" {
					return i, t.refuse(ns[j].tok.Off, "* RENAME", "list the columns, with their new names")
				}
				t.emit("*", tk.Off)
				for m := i + 1; m < j; m++ {
					if _, err := t.token(ns, m); err != nil {
						return m, err
					}
				}
				if kw == "EXCEPT" {
					kw = "EXCLUDE"
				}
				t.emit(kw, ns[j].tok.Off)
				return j, nil
			}
		}
	case "::":
		if t.to == Trino {
			return i, t.refuse(tk.Off, "::", "Trino has no :: cast; write CAST(x AS type)")
		}
		t.emit("::", tk.Off)
		return t.typeAt(ns, i+1, false)
	case ":":
		if t.tr.family == "snowflake" || t.tr.family == "spark" {
			return i, t.refuse(tk.Off, ":", "variant and JSON path access (col:field) has no common spelling")
		}
	case "/":
		if engine := engineDivision(t.to); t.tr.division != engine {
			return i, t.refuse(tk.Off, "/", "/ on two integers %s in %s and %s on %s; write the division in a model of the engine's dialect, with a CAST to say which you mean",
				divisionWord(t.tr.division), t.from, divisionWord(engine), t.to)
		}
	case "||":
		if t.tr.family == "mysql" {
			return i, t.refuse(tk.Off, "||", "|| is OR in MySQL; write OR, or CONCAT for strings")
		}
	case "[":
		switch t.tr.family {
		case "bigquery", "spark", "snowflake":
			if operandBefore(ns, i) {
				return i, t.refuse(tk.Off, "[", "array subscripts count from 0 in %s and from 1 on the engine; write the engine's subscript in a model of its dialect", t.from)
			}
		}
	}
	t.emit(tk.Text, tk.Off)
	return i, nil
}

// startsQuery reports whether group g holds a query (SELECT, WITH, ...).
func startsQuery(g node) bool {
	k := significant(g.kids, 0)
	return k < len(g.kids) && (isWord(g.kids[k], "SELECT") || isWord(g.kids[k], "WITH") || isWord(g.kids[k], "FROM") || isWord(g.kids[k], "VALUES"))
}

// splitArgs splits a group's nodes at its top-level commas; an empty group
// has no arguments.
func splitArgs(kids []node) [][]node {
	if significant(kids, 0) == len(kids) {
		return nil
	}
	var out [][]node
	start := 0
	for i, k := range kids {
		if isPunct(k, ",") {
			out = append(out, kids[start:i])
			start = i + 1
		}
	}
	return append(out, kids[start:])
}

// arg writes argument a, wrapped in parentheses when it is more than one
// operand, so that the precedence around it stays what it was.
func (t *transpiler) arg(a []node, off int) error {
	if simple(a) {
		return t.seq(a)
	}
	t.emit("(", off)
	if err := t.seq(a); err != nil {
		return err
	}
	t.emit(")", off)
	return nil
}

// simple reports whether a is one operand: a literal, a (qualified) name,
// a call, or a parenthesized group.
func simple(a []node) bool {
	var sig []node
	for _, n := range a {
		if n.group || (n.tok.Kind != Space && n.tok.Kind != Comment) {
			sig = append(sig, n)
		}
	}
	switch {
	case len(sig) == 1:
		return true
	case len(sig) == 2:
		return !sig[0].group && sig[0].tok.Kind == Word && sig[1].group
	}
	for i, n := range sig {
		if i%2 == 1 && !isPunct(n, ".") {
			return false
		}
		if i%2 == 0 && (n.group || (n.tok.Kind != Word && n.tok.Kind != Ident)) {
			return false
		}
	}
	return true
}

// argOff is the offset of the first significant node of a (for anchors).
func argOff(a []node, def int) int {
	if k := significant(a, 0); k < len(a) {
		return a[k].tok.Off
	}
	return def
}

// arity refuses c unless it has n arguments.
func (t *transpiler) arity(c call, n ...int) error {
	for _, want := range n {
		if len(c.args) == want {
			return nil
		}
	}
	return t.refuse(c.name.Off, strings.ToUpper(c.name.Text)+"(...)", "%d arguments, which this rewrite does not take", len(c.args))
}

// template writes a call with a fixed number of arguments as pieces:
// strings are written as they are, ints are the arguments, each written
// once, in the given order.
func (t *transpiler) template(c call, n int, pieces ...any) error {
	if err := t.arity(c, n); err != nil {
		return err
	}
	for _, p := range pieces {
		switch v := p.(type) {
		case string:
			t.emit(v, c.name.Off)
		case int:
			if err := t.arg(c.args[v], argOff(c.args[v], c.name.Off)); err != nil {
				return err
			}
		}
	}
	return nil
}

// castRule writes CAST-like calls under name, with their type rewritten.
// TRY_CAST and SAFE_CAST (NULL when the value does not convert) are
// refused on PostgreSQL, which has no such cast.
func castRule(name string) rule {
	return func(t *transpiler, c call) error {
		if name == "TRY_CAST" && t.to == Postgres {
			return t.refuse(c.name.Off, strings.ToUpper(c.name.Text), "PostgreSQL has no cast that yields NULL for a value that does not convert")
		}
		as := -1
		for i, k := range c.g.kids {
			if isWord(k, "AS") {
				as = i
				break
			}
		}
		if as < 0 {
			return t.refuse(c.name.Off, strings.ToUpper(c.name.Text), "a cast without AS type")
		}
		t.emit(name, c.name.Off)
		t.emit("(", c.g.tok.Off)
		if err := t.seq(c.g.kids[:as+1]); err != nil {
			return err
		}
		if _, err := t.typeAt(c.g.kids, as+1, true); err != nil {
			return err
		}
		if c.g.close != nil {
			t.emit(")", c.g.close.Off)
		}
		return nil
	}
}

// ifRule writes IF(c, a, b) and IFF(c, a, b) as a CASE.
func ifRule(t *transpiler, c call) error {
	return t.template(c, 3, "CASE WHEN ", 0, " THEN ", 1, " ELSE ", 2, " END")
}

// coalesceRule writes NVL(a, b), IFNULL(a, b) and ISNULL(a, b) as COALESCE.
func coalesceRule(n int) rule {
	return func(t *transpiler, c call) error {
		return t.template(c, n, "COALESCE(", 0, ", ", 1, ")")
	}
}

// isNullRule writes ISNULL(a) (MySQL, Spark) as (a IS NULL).
func isNullRule(t *transpiler, c call) error {
	return t.template(c, 1, "(", 0, " IS NULL)")
}

// nvl2Rule writes NVL2(a, b, c) as a CASE.
func nvl2Rule(t *transpiler, c call) error {
	return t.template(c, 3, "CASE WHEN ", 0, " IS NOT NULL THEN ", 1, " ELSE ", 2, " END")
}

// divideRule writes DIV0(a, b) and SAFE_DIVIDE(a, b): onZero when b is 0
// (DIV0: and a is not NULL; a NULL dividend stays NULL), else a / b. An
// argument written twice keeps to one line in its second copy.
func divideRule(onZero string) rule {
	return func(t *transpiler, c call) error {
		if err := t.arity(c, 2); err != nil {
			return err
		}
		if t.to != DuckDB {
			return t.refuse(c.name.Off, strings.ToUpper(c.name.Text), "/ divides integers exactly in %s and truncates on %s", t.from, t.to)
		}
		// An int piece is an argument's index, negative (-1 - index) for
		// a second copy of it.
		pieces := []any{"CASE WHEN ", 1, " = 0 THEN " + onZero + " ELSE ", 0, " / ", -2, " END"}
		if onZero != "NULL" {
			pieces = []any{"CASE WHEN ", 1, " = 0 AND ", 0, " IS NOT NULL THEN " + onZero + " ELSE ", -1, " / ", -2, " END"}
		}
		for _, p := range pieces {
			switch v := p.(type) {
			case string:
				t.emit(v, c.name.Off)
			case int:
				a := v
				if v < 0 {
					a = -v - 1
					t.flat = true
				}
				err := t.arg(c.args[a], c.name.Off)
				t.flat = false
				if err != nil {
					return err
				}
			}
		}
		return nil
	}
}

// concatRule writes CONCAT(a, b, ...), NULL when any argument is (in the
// source dialects that have this rule), as a || b || ..., which is NULL
// then on every engine (the engines' concat skips NULLs).
func concatRule(t *transpiler, c call) error {
	if len(c.args) == 0 {
		return t.arity(c, 1)
	}
	t.emit("(", c.name.Off)
	for i, a := range c.args {
		if i > 0 {
			t.emit(" || ", c.name.Off)
		}
		if err := t.arg(a, c.name.Off); err != nil {
			return err
		}
	}
	t.emit(")", c.name.Off)
	return nil
}

// noArgsRule writes CURRENT_DATE() as CURRENT_DATE; with an argument (a
// time zone) it refuses.
func noArgsRule(kw string) rule {
	return func(t *transpiler, c call) error {
		if len(c.args) != 0 {
			return t.refuse(c.name.Off, kw+"(...)", "%s with a time zone has no common spelling", kw)
		}
		t.emit(kw, c.name.Off)
		t.keepLines(c.g.kids, c.name.Off)
		return nil
	}
}

// truncParts maps a date part, as the source writes it, to the engines'
// date_trunc part; parts absent are refused (BigQuery's WEEK starts on
// Sunday, the engines' on Monday).
var truncParts = map[string]string{
	"MICROSECOND": "microsecond", "MILLISECOND": "millisecond", "SECOND": "second", "MINUTE": "minute",
	"HOUR": "hour", "DAY": "day", "MONTH": "month", "QUARTER": "quarter", "YEAR": "year",
	"ISOWEEK": "week", "WEEK(MONDAY)": "week",
	// Snowflake's and Spark's spellings (their weeks start on Monday).
	"WEEK": "week", "YYYY": "year", "YY": "year", "MM": "month", "MON": "month", "DD": "day",
	"MONTHS": "month", "DAYS": "day", "YEARS": "year", "HOURS": "hour", "MINUTES": "minute",
}

// partOf is the date_trunc part that a names (a bare word, a word with
// arguments like WEEK(MONDAY), or a string), and whether it is one.
func partOf(a []node) (string, bool) {
	var b strings.Builder
	for _, n := range a {
		switch {
		case n.group:
			b.WriteString(paramsText(n))
		case n.tok.Kind == Space || n.tok.Kind == Comment:
		case n.tok.Kind == String && len(n.tok.Text) >= 2 && (n.tok.Text[0] == '\'' || n.tok.Text[0] == '"'):
			b.WriteString(strings.ToUpper(n.tok.Text[1 : len(n.tok.Text)-1]))
		default:
			b.WriteString(strings.ToUpper(n.tok.Text))
		}
	}
	p, ok := truncParts[b.String()]
	return p, ok
}

// truncBigQuery writes BigQuery's DATE_TRUNC(x, PART) (and TIMESTAMP_,
// DATETIME_TRUNC) as date_trunc('part', x).
func truncBigQuery(t *transpiler, c call) error {
	if err := t.arity(c, 2); err != nil {
		return err
	}
	part, ok := partOf(c.args[1])
	if !ok || (part == "week" && strings.EqualFold(strings.TrimSpace(textOf(c.args[1])), "WEEK")) {
		return t.refuse(argOff(c.args[1], c.name.Off), strings.TrimSpace(textOf(c.args[1])), "this date part has no common meaning (BigQuery's WEEK starts on Sunday; write ISOWEEK for Monday)")
	}
	// BigQuery's DATE_TRUNC returns a DATE; the engines' date_trunc a
	// timestamp for a DATE.
	dateOnly := strings.EqualFold(c.name.Text, "DATE_TRUNC")
	if dateOnly {
		t.emit("CAST(", c.name.Off)
	}
	t.emit("date_trunc('"+part+"', ", c.name.Off)
	if err := t.seq(c.args[0]); err != nil {
		return err
	}
	t.emit(")", c.name.Off)
	if dateOnly {
		t.emit(" AS DATE)", c.name.Off)
	}
	t.keepLines(c.args[1], c.name.Off)
	return nil
}

// truncPartFirst writes Snowflake's and Spark's DATE_TRUNC(part, x), whose
// part may be a bare word, as date_trunc('part', x).
func truncPartFirst(t *transpiler, c call) error {
	if err := t.arity(c, 2); err != nil {
		return err
	}
	part, ok := partOf(c.args[0])
	if !ok {
		return t.refuse(argOff(c.args[0], c.name.Off), strings.TrimSpace(textOf(c.args[0])), "this date part has no common meaning")
	}
	t.emit("date_trunc('"+part+"', ", c.name.Off)
	if err := t.seq(c.args[1]); err != nil {
		return err
	}
	t.emit(")", c.name.Off)
	t.keepLines(c.args[0], c.name.Off)
	return nil
}

// textOf is a's text as written.
func textOf(a []node) string {
	var b strings.Builder
	for _, n := range a {
		if n.group {
			b.WriteString("(" + textOf(n.kids) + ")")
			continue
		}
		b.WriteString(n.tok.Text)
	}
	return b.String()
}

// regexpContains writes BigQuery's REGEXP_CONTAINS(s, re) as DuckDB's
// regexp_matches (both RE2); the other engines' regular expressions differ.
func regexpContains(t *transpiler, c call) error {
	if t.to != DuckDB {
		return t.refuse(c.name.Off, "REGEXP_CONTAINS", "%s's regular expressions are not RE2's", t.to)
	}
	return t.template(c, 2, "regexp_matches(", 0, ", ", 1, ")")
}

// extractRule refuses the EXTRACT parts that number differently on the
// engines (day of week, week) and writes the others as they are.
func extractRule(t *transpiler, c call) error {
	k := significant(c.g.kids, 0)
	if k < len(c.g.kids) && !c.g.kids[k].group {
		switch p := strings.ToUpper(c.g.kids[k].tok.Text); p {
		case "DAYOFWEEK", "DOW", "WEEK", "WEEKDAY", "DAYOFWEEKISO", "DOW_ISO", "YEAROFWEEK", "WEEKOFYEAR":
			return t.refuse(c.g.kids[k].tok.Off, "EXTRACT("+p, "%s numbers its weeks or weekdays differently from the engine; write isodow or week in a model in the engine's dialect", t.from)
		}
	}
	t.emit(c.name.Text, c.name.Off)
	return t.group(c.g)
}

// keepLines writes a newline for each one in ns, which a rewrite leaves
// out, so that the lines after it stay where they were.
func (t *transpiler) keepLines(ns []node, off int) {
	if n := strings.Count(textOf(ns), "\n"); n > 0 {
		t.emit(strings.Repeat("\n", n), off)
	}
}

// engineDivision is what / does to two integers on engine to.
func engineDivision(to string) byte {
	if to == DuckDB {
		return 'e'
	}
	return 't'
}

// divisionWord describes a division kind, for messages.
func divisionWord(d byte) string {
	switch d {
	case 'e':
		return "gives the exact quotient"
	case 't':
		return "truncates"
	}
	return "is not known to gapless"
}

// starPosition reports whether the * at ns[i] selects all columns (after
// SELECT, DISTINCT, a comma or a qualifier's dot), not a multiplication.
func starPosition(ns []node, i int) bool {
	p := prevSignificant(ns, i)
	return p < 0 || isPunct(ns[p], ",") || isPunct(ns[p], ".") || isWord(ns[p], "SELECT") || isWord(ns[p], "DISTINCT") || isWord(ns[p], "ALL")
}

// toHexRule writes BigQuery's TO_HEX(MD5(x)) and TO_HEX(SHA256(x)), the
// hexadecimal digests, as the engine's md5(x) and sha256(x), which return
// them (sha256 on DuckDB only; PostgreSQL's returns bytes). Any other
// TO_HEX is refused: the engines' spell hex digits in upper case.
func toHexRule(t *transpiler, c call) error {
	if len(c.args) == 1 {
		a := c.args[0]
		k := significant(a, 0)
		if k < len(a) && !a[k].group && a[k].tok.Kind == Word {
			fn := strings.ToLower(a[k].tok.Text)
			g := significant(a, k+1)
			if (fn == "md5" && t.to != Trino || fn == "sha256" && t.to == DuckDB) && g < len(a) && a[g].group && significant(a, g+1) == len(a) {
				t.emit(fn, a[k].tok.Off)
				return t.group(a[g])
			}
		}
	}
	return t.refuse(c.name.Off, "TO_HEX(...)", "only TO_HEX(MD5(x)) and TO_HEX(SHA256(x)) carry over (the engines' hex digits are upper case)")
}
