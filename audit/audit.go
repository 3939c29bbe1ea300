// Package audit holds SQLMesh-style audits: the built-in ones (not_null,
// unique_values, accepted_range, ...), user audits defined in a project's
// audits/*.sql, and the binding of a model's audits (...) calls to them.
//
// An audit is a query over @this_model that returns the offending rows:
// none means it passes. A blocking audit (the default) that fails stops its
// batch from being recorded; a non-blocking one (blocking false in its
// definition, or a call with the _non_blocking suffix) only warns.
package audit

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gapless-dev/gapless/config"
	"github.com/gapless-dev/gapless/macro"
	"github.com/gapless-dev/gapless/model"
	"github.com/gapless-dev/gapless/model/suggest"
	"github.com/gapless-dev/gapless/sqlparse"
)

// Dir is the folder of a project that holds user audits.
const Dir = "audits"

// NonBlockingSuffix, appended to an audit's name in a call, makes that call
// warn instead of failing (as in SQLMesh).
const NonBlockingSuffix = "_non_blocking"

// Library is the user audits of a project, by name.
type Library struct {
	defs map[string]model.AuditDef
	// Macros are the project's SQL macro functions (macros/*.sql), which
	// audit queries may call as model queries do; nil: none.
	Macros *macro.Library
	// Variables are the configuration's macro variables, which audit
	// queries read as model queries do (@name, @VAR('name')).
	Variables map[string]any
}

// NewLibrary makes a library of defs. Names must be unique: a second
// definition of a name is an error naming both places.
func NewLibrary(defs []model.AuditDef) (*Library, error) {
	l := &Library{defs: map[string]model.AuditDef{}}
	for _, d := range defs {
		if first, dup := l.defs[d.Name]; dup {
			return nil, &model.Error{Pos: d.Pos, Code: model.CodeDuplicateAttribute,
				Msg: fmt.Sprintf("audit %s is defined twice (first at %s)", d.Name, first.Pos)}
		}
		l.defs[d.Name] = d
	}
	return l, nil
}

// LoadDir reads every *.sql file under projectDir/audits (recursively, in
// lexical order) into a library. A project without the folder has an empty
// library. Paths in positions are relative to projectDir.
func LoadDir(projectDir string) (*Library, error) {
	root := filepath.Join(projectDir, Dir)
	var defs []model.AuditDef
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && path == root {
				return fs.SkipDir
			}
			return err
		}
		if d.IsDir() || !strings.EqualFold(filepath.Ext(path), ".sql") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("reading audit file: %w", err)
		}
		rel, rerr := filepath.Rel(projectDir, path)
		if rerr != nil {
			rel = path
		}
		got, err := model.ParseAuditFile(filepath.ToSlash(rel), src)
		if err != nil {
			return err
		}
		defs = append(defs, got...)
		return nil
	})
	if err != nil {
		return nil, err
	}
	l, err := NewLibrary(defs)
	if err != nil {
		return nil, err
	}
	// A Python macro's refusal is the project load's to report; the SQL
	// macros load all the same.
	var lerrs *macro.LibraryErrors
	if l.Macros, err = macro.LoadDir(projectDir); err != nil && !errors.As(err, &lerrs) {
		return nil, fmt.Errorf("reading the project's macros for its audits: %w", err)
	}
	cfg, err := config.Load(projectDir)
	if err != nil {
		return nil, fmt.Errorf("reading the project's variables for its audits: %w", err)
	}
	l.Variables = cfg.Variables
	return l, nil
}

// Names returns the library's audit names, sorted.
func (l *Library) Names() []string {
	if l == nil {
		return nil
	}
	out := make([]string, 0, len(l.defs))
	for n := range l.defs {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// Bound is one audit call of a model resolved to its definition, with its
// arguments checked and substituted: ready to render for an interval.
type Bound struct {
	// Name is the audit's name as the model calls it (with a
	// _non_blocking suffix if written so).
	Name  string
	Model string
	// Blocking says a failure fails the batch; otherwise it warns.
	Blocking bool
	// Call is where the model's audits (...) names it; Def is where the
	// audit is defined (zero for a built-in).
	Call model.Pos
	Def  model.Pos

	queryPos model.Pos // where a SQL audit's query starts
	builtin  string    // the built-in's name, or ""
	args     args      // the built-in's arguments
	query    string    // a SQL audit's query, arguments substituted
	macros   *macro.Library
	vars     map[string]any
}

// Builtin reports whether b is one of the built-in audits.
func (b Bound) Builtin() bool { return b.builtin != "" }

// Bind resolves every audit call of m, in order: an inline audit of m's
// file first, then a user audit of lib, then a built-in, each by the name
// as written or, failing that, without a _non_blocking suffix. Skipped
// audits (skip true) are left out. The error, an *model.Error at the call,
// names the model and the audit: an unknown audit (with a did-you-mean), an
// unknown or missing argument.
func Bind(m *model.Model, lib *Library) ([]Bound, error) {
	var out []Bound
	for _, call := range m.Audits {
		b, skip, err := bind(m, lib, call)
		if err != nil {
			return nil, err
		}
		if !skip {
			out = append(out, b)
		}
	}
	return out, nil
}

func bind(m *model.Model, lib *Library, call model.AuditRef) (Bound, bool, error) {
	// blocking := false (or true) at the use site is a special argument of
	// every audit, as in SQLMesh; it overrides the definition.
	var useSite *bool
	var rest []model.AuditArg
	for _, a := range call.Args {
		if a.Name != "blocking" {
			rest = append(rest, a)
			continue
		}
		switch v := strings.ToLower(strings.Trim(strings.TrimSpace(a.SQL), "'")); v {
		case "true", "false":
			on := v == "true"
			useSite = &on
		default:
			return Bound{}, false, &model.Error{Pos: a.Pos, Code: model.CodeBadValue,
				Msg: fmt.Sprintf("model %s, audit %s: blocking must be true or false, not %s", m.Name, call.Name, a.SQL)}
		}
	}
	call.Args = rest
	b, skip, err := bindCall(m, lib, call)
	if useSite != nil {
		b.Blocking = *useSite
	}
	return b, skip, err
}

func bindCall(m *model.Model, lib *Library, call model.AuditRef) (Bound, bool, error) {
	b := Bound{Name: call.Name, Model: m.Name, Blocking: true, Call: call.Pos}
	if lib != nil {
		b.macros, b.vars = lib.Macros, lib.Variables
	}
	name := call.Name
	def, bi, found := lookup(m, lib, name)
	if !found && strings.HasSuffix(name, NonBlockingSuffix) {
		name = strings.TrimSuffix(name, NonBlockingSuffix)
		def, bi, found = lookup(m, lib, name)
		b.Blocking = false
	}
	fail := func(format string, a ...any) error {
		return &model.Error{Pos: call.Pos, Code: model.CodeBadValue,
			Msg: fmt.Sprintf("model %s, audit %s: ", m.Name, call.Name) + fmt.Sprintf(format, a...)}
	}
	if !found {
		known := slices.Concat(BuiltinNames(), lib.Names())
		for _, d := range m.InlineAudits {
			known = append(known, d.Name)
		}
		e := &model.Error{Pos: call.Pos, Code: model.CodeUnknownAttribute,
			Msg: fmt.Sprintf("model %s: unknown audit %s", m.Name, call.Name)}
		if s, ok := suggest.Closest(call.Name, known); ok {
			e.Msg += ": did you mean " + s + "?"
		} else {
			e.Msg += " (not built in, not in " + Dir + "/ and not defined in the model's file)"
		}
		return b, false, e
	}
	if bi != nil {
		b.builtin = name
		b.args = args{}
		known := make([]string, len(bi.params), len(bi.params)+1)
		for i, p := range bi.params {
			known[i] = p.name
		}
		// Every built-in takes SQLMesh's condition: only the rows where it
		// holds are audited.
		known = append(known, ConditionArg)
		for _, a := range call.Args {
			if !slices.Contains(known, a.Name) {
				msg := "unknown argument " + a.Name
				if s, ok := suggest.Closest(a.Name, known); ok {
					msg += ": did you mean " + s + "?"
				}
				return b, false, fail("%s (its arguments: %s)", msg, strings.Join(known, ", "))
			}
			if strings.TrimSpace(a.SQL) == "" {
				return b, false, fail("argument %s is empty", a.Name)
			}
			b.args[a.Name] = a.SQL
		}
		for _, p := range bi.params {
			if _, ok := b.args[p.name]; ok {
				continue
			}
			if p.required {
				return b, false, fail("missing argument %s (write %s(%s := ...))", p.name, name, p.name)
			}
			b.args[p.name] = p.def
		}
		// Build once for DuckDB to report a bad argument (an empty list)
		// now rather than when it runs.
		if _, err := bi.query(b.args, "duckdb"); err != nil {
			return b, false, fail("%v", err)
		}
		return b, false, nil
	}
	if def.Skip {
		return b, true, nil
	}
	b.Def, b.queryPos = def.Pos, def.QueryPos
	b.Blocking = b.Blocking && def.Blocking
	q, err := substitute(def, call, b.macros, b.vars)
	if err != nil {
		return b, false, fail("%v", err)
	}
	b.query = q
	return b, false, nil
}

// lookup finds name among m's inline audits, lib and the built-ins.
func lookup(m *model.Model, lib *Library, name string) (model.AuditDef, *builtin, bool) {
	for _, d := range m.InlineAudits {
		if d.Name == name {
			return d, nil, true
		}
	}
	if lib != nil {
		if d, ok := lib.defs[name]; ok {
			return d, nil, true
		}
	}
	if bi, ok := builtins[name]; ok {
		return model.AuditDef{}, &bi, true
	}
	return model.AuditDef{}, nil, false
}

// substitute replaces each @arg of def's query with the call's value for
// it, or the definition's default. A reference that is neither an argument,
// a macro variable (@start_ds, @this_model, ...), one of the
// configuration's variables (variables) nor a call of a macro function
// (@EACH(...), or one of macros, the project's) is a missing argument; an
// argument the query never uses is an unknown one. An argument wins over a
// variable of the same name.
func substitute(def model.AuditDef, call model.AuditRef, macros *macro.Library, variables map[string]any) (string, error) {
	vals := map[string]string{}
	for _, d := range def.Defaults {
		vals[d.Name] = d.SQL
	}
	given := map[string]bool{}
	for _, a := range call.Args {
		vals[a.Name] = a.SQL
		given[a.Name] = true
	}
	vars := macro.Names()
	refs := scanRefs(def.Query)
	used := map[string]bool{}
	var b strings.Builder
	last := 0
	for _, r := range refs {
		if slices.Contains(vars, r.name) {
			continue
		}
		v, ok := vals[r.name]
		if !ok && isCall(def.Query, r) && macro.IsFunction(r.name, macros) {
			continue
		}
		if _, isVar := variables[r.name]; !ok && isVar {
			continue
		}
		if !ok {
			line := def.QueryPos.Line + strings.Count(def.Query[:r.off], "\n")
			return "", fmt.Errorf("missing argument %s (the audit's query uses @%s on %s:%d)", r.name, r.name, def.QueryPos.File, line)
		}
		used[r.name] = true
		b.WriteString(def.Query[last:r.off])
		b.WriteString(v)
		last = r.off + r.len
	}
	b.WriteString(def.Query[last:])
	for _, a := range call.Args {
		if !used[a.Name] {
			var params []string
			for _, r := range refs {
				if !slices.Contains(vars, r.name) && !slices.Contains(params, r.name) {
					params = append(params, r.name)
				}
			}
			list := "none"
			if len(params) > 0 {
				list = strings.Join(params, ", ")
			}
			return "", fmt.Errorf("unknown argument %s: the audit defined at %s uses no @%s (its arguments: %s)", a.Name, def.Pos, a.Name, list)
		}
	}
	_ = given
	return b.String(), nil
}

// isCall reports whether r, in sql, is called: a '(' follows its name.
func isCall(sql string, r ref) bool {
	rest := strings.TrimLeft(sql[r.off+r.len:], " \t")
	return strings.HasPrefix(rest, "(")
}

// ref is an @name reference in SQL: name lower case, off the '@', len with it.
type ref struct {
	name     string
	off, len int
}

// scanRefs finds every @name outside strings, quoted identifiers and
// comments.
func scanRefs(sql string) []ref {
	var out []ref
	for i := 0; i < len(sql); i++ {
		if end := macro.SkipOpaque(sql, i); end > i {
			i = end - 1
			continue
		}
		if sql[i] != '@' {
			continue
		}
		j := i + 1
		for j < len(sql) && isWord(sql[j]) {
			j++
		}
		if j > i+1 && !isDigit(sql[i+1]) && (i == 0 || !isWord(sql[i-1])) {
			out = append(out, ref{name: strings.ToLower(sql[i+1 : j]), off: i, len: j - i})
		}
		i = j - 1
	}
	return out
}

func isWord(c byte) bool {
	return c == '_' || isDigit(c) || (c|0x20 >= 'a' && c|0x20 <= 'z')
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// ConditionArg is the argument every built-in audit takes (as in SQLMesh):
// a boolean SQL expression; the audit looks only at the rows where it
// holds.
const ConditionArg = "condition"

// Relation is what an audit reads as its model.
type Relation struct {
	// This replaces @this_model: the table, or a parenthesised query of
	// the rows audited (a batch's interval); Aliased is the same with an
	// alias, used wherever the audit does not alias @this_model itself.
	This, Aliased string
	// Table is the quoted physical table: a reference to the model by its
	// own name (FROM schema.table, as SQLMesh's examples write) reads it,
	// as SQLMesh points it at the audited snapshot's table.
	Table string
}

// Query is b's SQL for the engine's dialect, with @this_model (every
// reference to it) replaced by r.This (r.Aliased where the audit gives it
// no alias), the model's own name by r.Table, and the other macro
// variables rendered with v.
func (b Bound) Query(r Relation, v macro.Vars, dialect string) (string, error) {
	relation, aliased := r.This, r.Aliased
	q := b.query
	if b.builtin != "" {
		var err error
		if q, err = builtins[b.builtin].query(b.args, dialect); err != nil {
			return "", fmt.Errorf("audit %s: %w", b.Name, err)
		}
		if c, ok := b.args[ConditionArg]; ok && !strings.EqualFold(strings.TrimSpace(c), "true") {
			relation = "(SELECT * FROM " + r.Aliased + " WHERE " + c + ")"
			aliased = relation + " AS gapless_audited"
		}
	}
	var s strings.Builder
	last := 0
	for _, r := range scanRefs(q) {
		if r.name != "this_model" {
			continue
		}
		s.WriteString(q[last:r.off])
		if hasAlias(q[r.off+r.len:]) {
			s.WriteString(relation)
		} else {
			s.WriteString(aliased)
		}
		last = r.off + r.len
	}
	s.WriteString(q[last:])
	q = s.String()
	if r.Table != "" {
		q = replaceName(q, b.Model, r.Table)
	}
	v.ThisModel = relation
	if v.Env == nil && (b.macros != nil || b.vars != nil) {
		v.Env = &macro.Env{Library: b.macros, Variables: b.vars}
	}
	out, err := macro.Render(q, v, dialect)
	if err != nil {
		return "", fmt.Errorf("audit %s: %w", b.Name, err)
	}
	return strings.TrimRight(strings.TrimSpace(out), ";"), nil
}

// clauseWords follow a table in FROM without being its alias.
var clauseWords = []string{"WHERE", "GROUP", "ORDER", "LIMIT", "HAVING", "JOIN", "LEFT", "RIGHT", "INNER", "FULL", "CROSS",
	"ON", "UNION", "EXCEPT", "INTERSECT", "WINDOW", "QUALIFY", "NATURAL", "USING", "OFFSET", "FETCH", "SELECT", "POSITIONAL",
	"ANTI", "SEMI", "ASOF", "LATERAL", "TABLESAMPLE", "USING"}

// hasAlias reports whether rest, the SQL after a table reference, starts
// with an alias for it (AS x, or a bare identifier that is not a clause).
func hasAlias(rest string) bool {
	rest = strings.TrimLeft(rest, " \t\r\n")
	i := 0
	for i < len(rest) && isWord(rest[i]) {
		i++
	}
	if i > 0 {
		w := strings.ToUpper(rest[:i])
		return w == "AS" || !slices.Contains(clauseWords, w)
	}
	return strings.HasPrefix(rest, `"`)
}

// CheckParse renders b (over a stand-in table, for a sample day) and parses
// it with p, DuckDB's own parser: an audit whose query does not parse is
// refused before anything runs. The error is an *model.Error at the
// audit's definition (its call, for a built-in), naming the model and the
// audit.
func (b Bound) CheckParse(ctx context.Context, p *sqlparse.Parser) error {
	day := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	q, err := b.Query(Relation{This: "gapless_audit_this_model", Aliased: "gapless_audit_this_model"}, macro.Vars{Start: day, End: day.AddDate(0, 0, 1), Execution: day}, "duckdb")
	if err != nil {
		return &model.Error{Pos: b.Call, Code: model.CodeBadValue, Msg: fmt.Sprintf("model %s, audit %s: %v", b.Model, b.Name, err), Err: err}
	}
	if _, err := p.Parse(ctx, q); err != nil {
		if ctx.Err() != nil {
			return err
		}
		pos := b.Call
		if !b.Builtin() {
			pos = b.queryPos
			var se *sqlparse.SyntaxError
			if errors.As(err, &se) {
				// The line of the error in the query as written (arguments
				// substituted may move columns, not lines).
				if line, _ := se.Position(q); line > 1 {
					pos.Line, pos.Col = pos.Line+line-1, 1
				}
			}
		}
		return &model.Error{Pos: pos, Code: model.CodeSyntax,
			Msg: fmt.Sprintf("model %s, audit %s: the audit's query does not parse: %v", b.Model, b.Name, err), Err: err}
	}
	return nil
}

// replaceName replaces every bare reference to name ("schema.table", any
// case, not inside strings, quoted identifiers or comments, not part of a
// longer dotted name) in sql by with.
func replaceName(sql, name, with string) string {
	var b strings.Builder
	last := 0
	for i := 0; i < len(sql); i++ {
		if end := macro.SkipOpaque(sql, i); end > i {
			i = end - 1
			continue
		}
		if !isWord(sql[i]) || (i > 0 && (isWord(sql[i-1]) || sql[i-1] == '.' || sql[i-1] == '@')) {
			continue
		}
		j := i
		for j < len(sql) && (isWord(sql[j]) || sql[j] == '.') {
			j++
		}
		if strings.EqualFold(sql[i:j], name) && (j >= len(sql) || sql[j] != '"') {
			b.WriteString(sql[last:i])
			b.WriteString(with)
			last = j
		}
		i = j - 1
	}
	b.WriteString(sql[last:])
	return b.String()
}
