package macro

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Column is one column of a relation, as @STAR and @UNION need them.
type Column struct {
	Name string
	Type string // "" when unknown
}

// Env is what macro functions see beyond the time variables of Vars: the
// project's variables, its macro library (@DEF definitions) and, for @STAR
// and @UNION, a way to learn a relation's columns.
//
// The zero Env (and a nil *Env) has no variables, no definitions and no
// columns: only the built-in operators and the time variables work.
type Env struct {
	// Variables are the configuration's `variables` (names in lower case):
	// string, int, int64, float64, bool, or []any of those. @name and
	// @VAR('name') read them.
	Variables map[string]any
	// Library holds the @DEF definitions in scope (nil for none).
	Library *Library
	// Columns returns the columns of a relation named as the query names
	// it. Nil means "not known here": Expand then keeps @STAR and @UNION
	// calls for Render, ForParse expands them to parseable stand-ins (see
	// ForParseEnv), and Render fails naming the call.
	Columns func(table string) ([]Column, error)
}

// Def is one @DEF definition: a variable (Params nil) or a SQL macro
// function.
type Def struct {
	Name   string   // lower case
	Params []string // lower case; nil for a variable
	IsFunc bool
	body   []node
	// Where it was defined: File:Line (Line 0 when unknown).
	File string
	Line int
}

// Where is "file:line" of the definition (or "the query" when unknown).
func (d *Def) Where() string {
	if d.File == "" {
		return "the query"
	}
	if d.Line == 0 {
		return d.File
	}
	return fmt.Sprintf("%s:%d", d.File, d.Line)
}

// PythonMacro is a macro a macros/*.py file defines, which gapless refuses.
type PythonMacro struct {
	Name string
	File string
	Line int
}

// Library is a set of @DEF definitions. Later definitions of a name
// replace earlier ones, as in SQLMesh (a model's own @DEF replaces a
// project one).
type Library struct {
	defs   map[string]*Def
	python map[string]PythonMacro
}

// Lookup returns the definition of name (case-insensitive).
func (l *Library) Lookup(name string) (*Def, bool) {
	if l == nil {
		return nil, false
	}
	d, ok := l.defs[strings.ToLower(name)]
	return d, ok
}

// Names lists the defined names, sorted.
func (l *Library) Names() []string {
	if l == nil {
		return nil
	}
	out := make([]string, 0, len(l.defs))
	for n := range l.defs {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func (l *Library) clone() *Library {
	out := &Library{defs: map[string]*Def{}, python: map[string]PythonMacro{}}
	if l != nil {
		for k, v := range l.defs {
			out.defs[k] = v
		}
		for k, v := range l.python {
			out.python[k] = v
		}
	}
	return out
}

// FileError is a problem in a file of @DEF statements (macros/*.sql or a
// model's pre-statement), located at its line and column.
type FileError struct {
	File      string
	Line, Col int
	Err       error
}

func (e *FileError) Error() string {
	msg := e.Err.Error()
	var me *Error
	if errors.As(e.Err, &me) {
		msg = me.Msg
	}
	return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Col, msg)
}

// Unwrap returns the underlying error (usually an *Error).
func (e *FileError) Unwrap() error { return e.Err }

// lineCol is the 1-based line and column of byte off in src, counting from
// (line, col) at src's start.
func lineCol(src string, off, line, col int) (int, int) {
	off = min(max(off, 0), len(src))
	before := src[:off]
	if nl := strings.LastIndexByte(before, '\n'); nl >= 0 {
		return line + strings.Count(before, "\n"), off - nl
	}
	return line, col + off
}

// WithDefs returns a copy of e whose library adds the @DEF statements of
// sql (one or more "@DEF(...);" statements, nothing else). file, line and
// col locate sql's first byte, for messages. e may be nil.
func (e *Env) WithDefs(file string, line, col int, sql string) (*Env, error) {
	out := &Env{}
	if e != nil {
		*out = *e
	}
	lib := out.Library.clone()
	if err := lib.addStatements(file, line, col, sql, false); err != nil {
		return nil, err
	}
	out.Library = lib
	return out, nil
}

// addStatements defines every @DEF statement of src. With leading set,
// it stops at the first statement that is not a @DEF and returns nothing
// about it (see splitLeadingDefs); otherwise anything else is an error.
func (l *Library) addStatements(file string, line, col int, src string, _ bool) error {
	nodes, err := parseTree(lex(src))
	if err != nil {
		return fileErr(file, line, col, src, err)
	}
	for _, st := range statements(nodes) {
		sig := significant(st)
		if len(sig) == 0 {
			continue
		}
		if len(sig) != 1 || sig[0].kind != nCall || sig[0].tok.name() != "def" {
			off := sig[0].tok.Off
			return fileErr(file, line, col, src, &Error{Offset: off, Code: CodeSyntax,
				Msg: "only @DEF(name, value); statements may be here (found " + clip(text(st)) + ")"})
		}
		d, err := parseDef(sig[0])
		if err != nil {
			return fileErr(file, line, col, src, err)
		}
		d.File = file
		d.Line, _ = lineCol(src, sig[0].tok.Off, line, col)
		l.defs[d.Name] = d
	}
	return nil
}

func fileErr(file string, line, col int, src string, err error) error {
	var me *Error
	if !errors.As(err, &me) {
		return fmt.Errorf("%s: %w", file, err)
	}
	l, c := lineCol(src, me.Offset, line, col)
	return &FileError{File: file, Line: l, Col: c, Err: err}
}

func clip(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// statements splits nodes at top-level semicolons.
func statements(nodes []node) [][]node {
	var out [][]node
	cur := []node{}
	for _, n := range nodes {
		if n.isTok(tSemi, "") {
			out = append(out, cur)
			cur = []node{}
			continue
		}
		cur = append(cur, n)
	}
	return append(out, cur)
}

// parseDef reads @DEF(name, value) or @DEF(name, params -> body).
func parseDef(call node) (*Def, error) {
	args := callArgs(call)
	if len(args) != 2 {
		return nil, &Error{Offset: call.tok.Off, Name: "def", Code: CodeArity,
			Msg: fmt.Sprintf("@DEF takes 2 arguments (a name and a value or a lambda), got %d", len(args))}
	}
	name := significant(args[0])
	if len(name) != 1 || !(name[0].isTok(tWord, "") || name[0].isTok(tQIdent, "")) {
		return nil, &Error{Offset: call.tok.Off, Name: "def", Code: CodeSyntax,
			Msg: "@DEF's first argument must be a name, got " + clip(text(args[0]))}
	}
	d := &Def{Name: strings.ToLower(identName(name[0].tok))}
	if _, ok := builtins[d.Name]; ok || d.Name == "def" {
		return nil, &Error{Offset: call.tok.Off, Name: d.Name, Code: CodeSyntax,
			Msg: fmt.Sprintf("@DEF(%s, ...) redefines the built-in macro @%s: choose another name", d.Name, strings.ToUpper(d.Name))}
	}
	if lam, ok, err := asLambda(args[1]); err != nil {
		return nil, err
	} else if ok {
		d.IsFunc, d.Params, d.body = true, lam.params, lam.body
		return d, nil
	}
	d.body = trim(args[1])
	return d, nil
}

// identName is a word's text or a quoted identifier's content.
func identName(t tok) string {
	if t.Kind == tQIdent {
		_, s := quotedIdent(t.Text, 0)
		return s
	}
	return t.Text
}

// callArgs is a call's arguments, trimmed; none for "@f()".
func callArgs(call node) [][]node {
	args := splitArgs(call.kids)
	for i := range args {
		args[i] = trim(args[i])
	}
	if len(args) == 1 && len(args[0]) == 0 {
		return nil
	}
	return args
}

// LoadDir reads the macro library of a project: every macros/*.sql file
// (recursively, in lexical order) holds @DEF statements. A macros/*.py file
// that defines a Python macro (a function under @macro()) is an error naming
// the macro, the file and the line, and saying which SQL form replaces it.
// A missing macros/ folder is an empty library.
func LoadDir(projectDir string) (*Library, error) {
	lib := (&Library{}).clone()
	root := filepath.Join(projectDir, "macros")
	var files []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		if os.IsNotExist(err) {
			return lib, nil
		}
		return nil, fmt.Errorf("listing macro files in %s: %w", root, err)
	}
	slices.Sort(files)
	var errs []error
	for _, path := range files {
		rel, rerr := filepath.Rel(projectDir, path)
		if rerr != nil {
			rel = path
		}
		rel = filepath.ToSlash(rel)
		switch strings.ToLower(filepath.Ext(path)) {
		case ".sql":
			src, err := os.ReadFile(path)
			if err != nil {
				return nil, fmt.Errorf("reading macro file: %w", err)
			}
			if err := lib.addStatements(rel, 1, 1, string(src), false); err != nil {
				errs = append(errs, err)
			}
		case ".py":
			src, err := os.ReadFile(path)
			if err != nil {
				return nil, fmt.Errorf("reading macro file: %w", err)
			}
			for _, pm := range pythonMacros(rel, src) {
				lib.python[pm.Name] = pm
				errs = append(errs, &FileError{File: rel, Line: pm.Line, Col: 1, Err: &Error{Name: pm.Name, Code: CodePython,
					Msg: fmt.Sprintf("@%s is a Python macro: gapless cannot run Python macros; write it as a SQL macro function, @DEF(%s, (arg1, arg2) -> <SQL expression>); in a macros/*.sql file", pm.Name, pm.Name)}})
			}
		}
	}
	if len(errs) > 0 {
		return lib, &LibraryErrors{Errs: errs}
	}
	return lib, nil
}

// LibraryErrors is every problem LoadDir found, in file order.
type LibraryErrors struct{ Errs []error }

func (e *LibraryErrors) Error() string {
	msgs := make([]string, len(e.Errs))
	for i, err := range e.Errs {
		msgs[i] = err.Error()
	}
	return strings.Join(msgs, "\n")
}

// Unwrap exposes the individual errors.
func (e *LibraryErrors) Unwrap() []error { return e.Errs }

var (
	pyDecorator = regexp.MustCompile(`^\s*@macro\b`)
	pyDef       = regexp.MustCompile(`^\s*(?:async\s+)?def\s+([A-Za-z_][A-Za-z0-9_]*)\s*\(`)
	pyNamed     = regexp.MustCompile(`^\s*@macro\(\s*["']([A-Za-z_][A-Za-z0-9_]*)["']`)
)

// pythonMacros finds the functions a Python file registers with @macro().
func pythonMacros(file string, src []byte) []PythonMacro {
	var out []PythonMacro
	sc := bufio.NewScanner(bytes.NewReader(src))
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	pending, named := false, ""
	for line := 1; sc.Scan(); line++ {
		l := sc.Text()
		if pyDecorator.MatchString(l) {
			pending = true
			if m := pyNamed.FindStringSubmatch(l); m != nil {
				named = m[1]
			}
			continue
		}
		if m := pyDef.FindStringSubmatch(l); m != nil {
			if pending {
				name := m[1]
				if named != "" {
					name = named
				}
				out = append(out, PythonMacro{Name: strings.ToLower(name), File: file, Line: line})
			}
			pending, named = false, ""
		}
	}
	return out
}

// VariableValue checks that v is a value a `variables` entry may hold
// (string, bool, a number, or a list of those) and returns it normalised
// (ints as int64, lists as []any). It is what config uses to validate.
func VariableValue(v any) (any, error) {
	switch x := v.(type) {
	case string, bool, int64, float64:
		return x, nil
	case int:
		return int64(x), nil
	case uint64:
		if x > math.MaxInt64 {
			return nil, fmt.Errorf("number %d is too large", x)
		}
		return int64(x), nil
	case float32:
		return float64(x), nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			if _, isList := e.([]any); isList {
				return nil, fmt.Errorf("a list inside a list is not supported")
			}
			n, err := VariableValue(e)
			if err != nil {
				return nil, err
			}
			out[i] = n
		}
		return out, nil
	case nil:
		return nil, fmt.Errorf("a value is needed")
	default:
		return nil, fmt.Errorf("a %T is not supported (values are strings, numbers, booleans or lists of them)", v)
	}
}

// literal is the SQL literal of a variable value.
func literal(v any, dialect string) string {
	switch x := v.(type) {
	case string:
		return "'" + strings.ReplaceAll(x, "'", "''") + "'"
	case bool:
		if x {
			return "TRUE"
		}
		return "FALSE"
	case int64:
		return strconv.FormatInt(x, 10)
	case int:
		return strconv.Itoa(x)
	case float64:
		s := strconv.FormatFloat(x, 'g', -1, 64)
		if !strings.ContainsAny(s, ".eE") {
			s += ".0"
		}
		return s
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = literal(e, dialect)
		}
		return arrayLiteral(parts, dialect)
	}
	return "NULL"
}

func arrayLiteral(items []string, dialect string) string {
	s := "[" + strings.Join(items, ", ") + "]"
	if strings.ToLower(dialect) != "duckdb" && dialect != "" {
		return "ARRAY" + s
	}
	return s
}

// pythonMacro returns the Python macro of that name, if a macros/*.py file
// defines one.
func (l *Library) pythonMacro(name string) (PythonMacro, bool) {
	if l == nil {
		return PythonMacro{}, false
	}
	pm, ok := l.python[name]
	return pm, ok
}

// IsDef reports whether sql is one @DEF(...) statement (a trailing ';'
// allowed): a macro definition, not SQL to run.
func IsDef(sql string) bool {
	nodes, err := parseTree(lex(sql))
	if err != nil {
		return strings.HasPrefix(strings.ToLower(strings.TrimSpace(sql)), "@def(")
	}
	sig := significant(nodes)
	if len(sig) == 2 && sig[1].isTok(tSemi, "") {
		sig = sig[:1]
	}
	return len(sig) == 1 && sig[0].kind == nCall && sig[0].tok.name() == "def"
}

// HasCalls reports whether sql calls a macro (@name(...)) outside string
// literals, quoted identifiers and comments: for an Expand result, whether
// some built-in was kept for Render (it reads the interval, or columns not
// known when expanding).
func HasCalls(sql string) bool {
	toks := lex(sql)
	for i := 0; i+1 < len(toks); i++ {
		if toks[i].Kind == tMacro && toks[i+1].Kind == tOpen && toks[i+1].Text == "(" {
			return true
		}
	}
	return false
}
