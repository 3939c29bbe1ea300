package macro

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gapless-dev/gapless/model/suggest"
)

// Vars are the values Render substitutes.
//
// Start and End bound the half-open interval [Start, End) being computed.
// Execution is the run's execution time. All three are used in UTC. A zero
// time means "not available": referring to a variable built on it is an
// error, never a silent 0001-01-01.
type Vars struct {
	Start, End, Execution time.Time
	// ThisModel replaces @this_model verbatim: the already-quoted reference
	// to the table the model writes to (for example "gapless__a"."a__b__1f2e").
	ThisModel string
	// Env, when set, gives Render the project's variables, @DEF
	// definitions and relation columns (see Env). Nil: built-in operators
	// and time variables only.
	Env *Env
}

// Code classifies an *Error.
type Code string

// The categories of *Error.
const (
	// CodeUnknownVariable: @name is not a supported variable.
	CodeUnknownVariable Code = "unknown_variable"
	// CodeReserved: the SQL uses an identifier with PlaceholderPrefix, which
	// ForParse reserves so that placeholders cannot collide with user SQL.
	CodeReserved Code = "reserved_identifier"
	// CodeMissingValue: Vars lacks the value a variable needs (a zero time,
	// an empty ThisModel, End not after Start, a year outside 1..9999).
	CodeMissingValue Code = "missing_value"
	// CodeUnknownMacro: @name(...) is neither a built-in operator nor
	// defined with @DEF.
	CodeUnknownMacro Code = "unknown_macro"
	// CodeArity: a macro called with the wrong number of arguments.
	CodeArity Code = "arity"
	// CodeUnbalanced: a macro call whose parenthesis is never closed.
	CodeUnbalanced Code = "unbalanced"
	// CodeSyntax: a macro's arguments do not have the form it needs.
	CodeSyntax Code = "syntax"
	// CodeMisuse: a macro function used as a variable or the reverse
	// (including @DEF used anywhere but as a statement of its own).
	CodeMisuse Code = "misuse"
	// CodePython: a Python macro, which gapless cannot run.
	CodePython Code = "python_macro"
	// CodeRecursion: expansion nests too deep.
	CodeRecursion Code = "recursion"
	// CodeEval: a condition (@IF, @EVAL, @FILTER, ...) cannot be evaluated.
	CodeEval Code = "eval"
)

// Error is a problem with a macro variable. Offset is the byte offset in the
// SQL given to Render, ForParse or Find; map it to a file position with
// model.(*Model).PosOf.
type Error struct {
	Offset int
	Name   string // the variable, without '@' ("" for CodeReserved)
	Code   Code
	Msg    string
}

// Error implements error.
func (e *Error) Error() string {
	return fmt.Sprintf("byte %d: %s", e.Offset, e.Msg)
}

// ErrUnknownDialect is wrapped by Render's error for a dialect it cannot
// render literals for.
var ErrUnknownDialect = errors.New("macro: unknown dialect")

// Placeholders used by ForParse.
const (
	// PlaceholderPrefix starts every placeholder. User SQL may not contain
	// an identifier with this prefix (compared case-insensitively).
	PlaceholderPrefix = "__gapless_macro_"
	// ThisModelPlaceholder is the table reference that replaces @this_model.
	ThisModelPlaceholder = PlaceholderPrefix + "this_model"
)

// Placeholder is the identifier ForParse substitutes for variable name
// (lower case, without '@'): PlaceholderPrefix + name.
func Placeholder(name string) string { return PlaceholderPrefix + strings.ToLower(name) }

// IsPlaceholderTable reports whether a table name found by the SQL parser is
// the @this_model placeholder, which a dependency extractor must drop: it is
// the model itself. Surrounding double quotes and case are ignored.
func IsPlaceholderTable(name string) bool {
	return strings.EqualFold(unquote(name), ThisModelPlaceholder)
}

// IsPlaceholder reports whether an identifier found by the SQL parser is any
// ForParse placeholder (value variables appear as column references).
func IsPlaceholder(name string) bool {
	n := unquote(name)
	return len(n) >= len(PlaceholderPrefix) && strings.EqualFold(n[:len(PlaceholderPrefix)], PlaceholderPrefix)
}

func unquote(name string) string {
	if len(name) >= 2 && name[0] == '"' && name[len(name)-1] == '"' {
		return name[1 : len(name)-1]
	}
	return name
}

// bound says which time a variable is built on.
type bound int

const (
	boundStart bound = iota
	boundEnd
	boundExecution
	boundThisModel
)

// form says how a variable renders.
type form int

const (
	formTimestamp  form = iota // TIMESTAMP '2024-01-01 00:00:00'
	formDateString             // '2024-01-01'
	formDate                   // DATE '2024-01-01'
	formMillis                 // 1704067200000
	formTable                  // Vars.ThisModel
)

type variable struct {
	bound bound
	form  form
}

// variables maps every supported name to its meaning. The names follow
// SQLMesh: a prefix (start, end, execution) and a suffix.
var variables = func() map[string]variable {
	bounds := map[string]bound{"start": boundStart, "end": boundEnd, "execution": boundExecution}
	suffixes := map[string]form{
		"ts": formTimestamp, "dt": formTimestamp,
		"ds": formDateString, "date": formDate,
		"ms": formMillis, "millis": formMillis,
	}
	out := map[string]variable{"this_model": {bound: boundThisModel, form: formTable}}
	for p, b := range bounds {
		for s, f := range suffixes {
			out[p+"_"+s] = variable{bound: b, form: f}
		}
	}
	return out
}()

// primaryNames are suggested first and listed in messages.
var primaryNames = []string{
	"start_ts", "end_ts", "start_ds", "end_ds", "start_ms", "end_ms", "execution_ts", "this_model",
}

// sqlmeshOnly reports whether name is one of SQLMesh's predefined variables
// that gapless does not provide.
func sqlmeshOnly(name string) bool {
	switch name {
	case "runtime_stage", "gateway", "this_env", "model_kind_name":
		return true
	}
	prefix, suffix, ok := strings.Cut(name, "_")
	switch prefix {
	case "start", "end", "execution":
		return ok && (suffix == "epoch" || suffix == "tstz")
	}
	return false
}

// Names returns every supported variable name (without '@'), sorted.
func Names() []string {
	out := make([]string, 0, len(variables))
	for n := range variables {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Find returns every macro variable reference in sql, in order. It fails with
// an *Error on the first unknown variable (with a did-you-mean) or the first
// identifier that uses PlaceholderPrefix.
func Find(sql string) ([]Ref, error) {
	refs, words := scan(sql)
	for _, w := range words {
		if IsPlaceholder(w.Text) {
			return nil, &Error{Offset: w.Offset, Code: CodeReserved, Msg: fmt.Sprintf(
				"identifier %s is reserved: names starting with %s are gapless's macro placeholders",
				w.Text, PlaceholderPrefix)}
		}
	}
	for _, r := range refs {
		if _, ok := variables[r.Name]; ok {
			continue
		}
		candidates := append(append([]string{}, primaryNames...), Names()...)
		msg := "unknown macro variable @" + r.Name
		if sqlmeshOnly(r.Name) {
			msg = "macro variable @" + r.Name + " is a SQLMesh variable that gapless does not support" +
				" (variables include @" + strings.Join(primaryNames, ", @") + ")"
		} else if s, ok := suggest.Closest(r.Name, candidates); ok {
			msg += ": did you mean @" + s + "?"
		} else {
			msg += " (variables include @" + strings.Join(primaryNames, ", @") + ")"
		}
		return nil, &Error{Offset: r.Offset, Name: r.Name, Code: CodeUnknownVariable, Msg: msg}
	}
	return refs, nil
}

// Render evaluates every macro of sql (built-in operators, and with v.Env
// the project's variables and @DEF functions; "@DEF(...);" statements
// opening sql define more) and substitutes every time variable with its
// value from v, as a literal of the given dialect ("duckdb", "postgres" or
// "trino").
//
// Renderings, the same for every dialect (standard SQL typed literals, which
// all accept; Trino reads '... 23:59:59.999999' as a timestamp(6); the
// dialect is still checked so that a new dialect cannot slip through
// unrendered):
//
//	@start_ts, @start_dt   TIMESTAMP '2024-01-01 00:00:00'
//	@start_ds              '2024-01-01'           (a string, as in SQLMesh)
//	@start_date            DATE '2024-01-01'
//	@start_ms, @start_millis  1704067200000       (epoch milliseconds; negative ones in parentheses)
//	@this_model            v.ThisModel, verbatim
//
// and likewise for end_* and execution_*. Fractional seconds appear (to the
// microsecond) only when non-zero.
//
// End values are inclusive, as in SQLMesh: for the interval [Start, End),
// @end_ts and @end_dt are End minus one microsecond ('... 23:59:59.999999'
// for a daily interval), @end_ds and @end_date are the date of that instant
// (the interval's last day, not the next one), and @end_ms is End's epoch
// milliseconds minus one. So "ts BETWEEN @start_ts AND @end_ts" selects
// exactly the interval. Start values are Start itself; execution values are
// Execution itself. Times are truncated to the microsecond (milliseconds for
// *_ms) before use.
//
// A value is padded with a space where it would otherwise fuse with an
// adjacent identifier character. Errors are *Error (unknown variable or
// macro, wrong arity, unbalanced call, reserved identifier, missing value,
// ...) or wrap ErrUnknownDialect.
func Render(sql string, v Vars, dialect string) (string, error) {
	switch strings.ToLower(dialect) {
	case "duckdb", "postgres", "trino":
	default:
		return "", fmt.Errorf("%w %q (dialects: duckdb, postgres, trino)", ErrUnknownDialect, dialect)
	}
	out, _, err := run(sql, &evaluator{env: v.Env, mode: modeRender, vars: v, dialect: strings.ToLower(dialect)})
	return out, err
}

// sentinel is what ForParse gives the time variables where a condition
// must be decided (@IF(@start_ds > ...)): SQLMesh's load-time values.
var sentinel = Vars{
	Start:     time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC),
	End:       time.Date(1970, 1, 2, 0, 0, 0, 0, time.UTC),
	Execution: time.Date(1970, 1, 2, 0, 0, 0, 0, time.UTC),
	ThisModel: ThisModelPlaceholder,
}

// Expand evaluates every macro of sql that does not depend on the interval
// being computed: @DEF variables and functions (leading "@DEF(...);"
// statements of sql itself, then env's library), configuration variables,
// and the built-in operators. Time variables (@start_ds, @this_model, ...)
// are kept as written, and so is a built-in call that needs their values
// (an @IF whose condition reads @start_ds) or columns env cannot give
// (@STAR, @UNION without Env.Columns), with its arguments expanded: Render
// finishes them, needing no library. The result is what a snapshot stores
// and executes; it keeps sql's line count (expansions are padded with the
// newlines they replaced) so that a line in it is a line in the file. The
// Mapper brings offsets in the result back to sql (inside an expansion, to
// the start of the macro call).
func Expand(sql string, env *Env, dialect string) (string, Mapper, error) {
	return run(sql, &evaluator{env: env, mode: modeExpand, dialect: strings.ToLower(dialect)})
}

// run evaluates sql with ev and renders the result.
func run(sql string, ev *evaluator) (string, Mapper, error) {
	_, words := scan(sql)
	for _, w := range words {
		if IsPlaceholder(w.Text) {
			return "", Mapper{}, &Error{Offset: w.Offset, Code: CodeReserved, Msg: fmt.Sprintf(
				"identifier %s is reserved: names starting with %s are gapless's macro placeholders",
				w.Text, PlaceholderPrefix)}
		}
	}
	nodes, err := parseTree(lex(sql))
	if err != nil {
		return "", Mapper{}, err
	}
	nodes, env, err := leadingDefs(nodes, ev.env)
	if err != nil {
		return "", Mapper{}, err
	}
	ev.env = env
	out, err := ev.expand(nodes)
	if err != nil {
		return "", Mapper{}, err
	}
	s, m := emit(sql, flatten(out))
	return s, m, nil
}

// leadingDefs defines the "@DEF(...);" statements that open nodes (as a
// model file has them between MODEL (...); and the query) and returns the
// rest.
func leadingDefs(nodes []node, env *Env) ([]node, *Env, error) {
	i := 0
	var lib *Library
	for {
		j := i
		for j < len(nodes) && nodes[j].kind == nLeaf && nodes[j].tok.trivia() {
			j++
		}
		if j >= len(nodes) || nodes[j].kind != nCall || nodes[j].tok.name() != "def" {
			break
		}
		k := j + 1
		for k < len(nodes) && nodes[k].kind == nLeaf && nodes[k].tok.trivia() {
			k++
		}
		if k < len(nodes) && !nodes[k].isTok(tSemi, "") {
			break // not a statement: the evaluator refuses it
		}
		d, err := parseDef(nodes[j])
		if err != nil {
			return nil, nil, err
		}
		if lib == nil {
			var base *Library
			if env != nil {
				base = env.Library
			}
			lib = base.clone()
		}
		lib.defs[d.Name] = d
		i = min(k+1, len(nodes))
	}
	if lib == nil {
		return nodes, env, nil
	}
	out := &Env{}
	if env != nil {
		*out = *env
	}
	out.Library = lib
	return nodes[i:], out, nil
}

// emit renders toks, mapping back to sql: a token not generated, and
// later in sql than every token before it, is copied as written; the
// rest is generated text, with whitespace and comments made single spaces.
// Each run of generated text (and the text of sql it replaces) is an edit
// of the Mapper, padded with the newlines of what it replaces, and with a
// space where it would fuse with an identifier character beside it.
func emit(sql string, toks []tok) (string, Mapper) {
	var b strings.Builder
	m := Mapper{origLen: len(sql), edits: []edit{}}
	lastEnd := 0
	genStart := -1
	closeEdit := func(next int, nextText string) {
		if genStart < 0 {
			genStart = b.Len()
		}
		missing := strings.Count(sql[lastEnd:next], "\n") - strings.Count(b.String()[genStart:], "\n")
		for range missing {
			b.WriteByte('\n')
		}
		if b.Len() > genStart && nextText != "" && isWordByte(nextText[0]) && !isSpace(b.String()[b.Len()-1]) {
			b.WriteByte(' ')
		}
		m.edits = append(m.edits, edit{orig: lastEnd, origLen: next - lastEnd, new: genStart, newLen: b.Len() - genStart})
		genStart = -1
	}
	for _, t := range toks {
		end := t.Off + len(t.Text)
		if !t.Gen && t.Off >= lastEnd && end <= len(sql) && sql[t.Off:end] == t.Text {
			if genStart >= 0 || t.Off > lastEnd {
				closeEdit(t.Off, t.Text)
			}
			b.WriteString(t.Text)
			lastEnd = end
			continue
		}
		txt := t.Text
		if t.Kind == tWS || t.Kind == tComment {
			txt = " "
		}
		if txt == "" {
			continue
		}
		if genStart < 0 {
			genStart = b.Len()
			if genStart > 0 {
				if last := b.String()[genStart-1]; (isWordByte(last) || last == '@') && !strings.ContainsRune(" \t\n\r,;)]", rune(txt[0])) {
					b.WriteByte(' ')
				}
			}
		}
		b.WriteString(txt)
	}
	if genStart >= 0 || lastEnd < len(sql) {
		closeEdit(len(sql), "")
	}
	m.newLen = b.Len()
	if len(m.edits) == 0 {
		m.edits = nil
	}
	return b.String(), m
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func (v Vars) render(r Ref) (string, error) {
	spec := variables[r.Name]
	missing := func(format string, args ...any) error {
		return &Error{Offset: r.Offset, Name: r.Name, Code: CodeMissingValue,
			Msg: "@" + r.Name + ": " + fmt.Sprintf(format, args...)}
	}
	if spec.form == formTable {
		if v.ThisModel == "" {
			return "", missing("no table reference given (Vars.ThisModel is empty)")
		}
		return v.ThisModel, nil
	}
	var t time.Time
	switch spec.bound {
	case boundStart, boundEnd:
		if v.Start.IsZero() || v.End.IsZero() {
			return "", missing("the interval is not set (Vars.Start and Vars.End are needed)")
		}
		if !v.End.After(v.Start) {
			return "", missing("the interval is empty: end %s is not after start %s",
				v.End.UTC().Format(time.RFC3339Nano), v.Start.UTC().Format(time.RFC3339Nano))
		}
		t = v.Start
		if spec.bound == boundEnd {
			t = v.End
		}
	case boundExecution:
		if v.Execution.IsZero() {
			return "", missing("the execution time is not set (Vars.Execution)")
		}
		t = v.Execution
	}
	t = t.UTC()
	inclusiveEnd := spec.bound == boundEnd
	if spec.form == formMillis {
		ms := t.Truncate(time.Millisecond).UnixMilli()
		if inclusiveEnd {
			ms--
		}
		s := strconv.FormatInt(ms, 10)
		if ms < 0 {
			// Parenthesised so that "x-@start_ms" cannot become a comment.
			s = "(" + s + ")"
		}
		return s, nil
	}
	t = t.Truncate(time.Microsecond)
	if inclusiveEnd {
		t = t.Add(-time.Microsecond)
	}
	if y := t.Year(); y < 1 || y > 9999 {
		return "", missing("year %d is outside 1..9999", y)
	}
	switch spec.form {
	case formDateString:
		return "'" + t.Format("2006-01-02") + "'", nil
	case formDate:
		return "DATE '" + t.Format("2006-01-02") + "'", nil
	default:
		layout := "2006-01-02 15:04:05"
		if t.Nanosecond() != 0 {
			layout += ".000000"
		}
		return "TIMESTAMP '" + t.Format(layout) + "'", nil
	}
}

// ForParse rewrites sql so that a DuckDB-compatible parser accepts it: each
// value variable becomes the column reference Placeholder(name) (e.g.
// __gapless_macro_start_ds) and @this_model becomes the table reference
// ThisModelPlaceholder. Placeholders are padded with a space where they would
// fuse with an adjacent identifier character. Because Find rejects user
// identifiers with PlaceholderPrefix, a placeholder can never be mistaken for
// user SQL.
//
// The Mapper translates byte offsets in the rewritten SQL back to sql.
// Limitation: a variable used where only a literal is allowed (for example
// "DATE @start_ds") parses as a literal but not as a column reference.
func ForParse(sql string) (string, Mapper, error) {
	return ForParseEnv(sql, nil)
}

// ForParseEnv is ForParse with the project's variables and @DEF library:
// every macro is expanded as Render would, except that time variables
// become placeholders (and, inside a condition, SQLMesh's load-time values,
// 1970-01-01), and @STAR and @UNION without Env.Columns become stand-ins
// that parse and name the same tables (@STAR(t, a) is a.*, @UNION is the
// union of SELECT * FROM each table).
func ForParseEnv(sql string, env *Env) (string, Mapper, error) {
	return run(sql, &evaluator{env: env, mode: modeParse, vars: sentinel})
}

// Mapper translates byte offsets in ForParse's output back to its input. The
// zero Mapper is the identity.
type Mapper struct {
	edits           []edit // in increasing order of both orig and new
	origLen, newLen int
}

// edit records that sql[orig:orig+origLen] became out[new:new+newLen].
type edit struct {
	orig, origLen, new, newLen int
}

// Original maps an offset in the rewritten SQL to the original SQL. Offsets
// inside a placeholder map to the '@' of its variable; offsets elsewhere map
// to the same character in the original. Out-of-range offsets are clamped
// to [0, length], so the result is always a valid offset into the original
// (or its end). For the zero Mapper the result is the input, floored at 0.
func (m Mapper) Original(offset int) int {
	offset = max(offset, 0)
	if m.edits == nil {
		if m.newLen > 0 || m.origLen > 0 {
			return min(offset, m.origLen)
		}
		return offset
	}
	offset = min(offset, m.newLen)
	// The last edit starting at or before offset.
	i := sort.Search(len(m.edits), func(i int) bool { return m.edits[i].new > offset }) - 1
	if i < 0 {
		return offset
	}
	e := m.edits[i]
	if offset < e.new+e.newLen {
		return e.orig
	}
	return e.orig + e.origLen + (offset - (e.new + e.newLen))
}
