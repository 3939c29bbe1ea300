// Package unittest runs SQLMesh-style unit tests of a gapless project: the
// YAML files under tests/ that name a model, give rows for the tables it
// reads, and the rows its query (or one of its CTEs) must return.
//
// A test runs on its own in-memory DuckDB database: the inputs are created
// there as tables named as the model reads them, the model's query is
// rendered with the test's time variables and run, and its rows are
// compared with the expected ones. Nothing is read from or written to the
// project's warehouse; only Create (create_test) reads it, through the
// engine's read-only queries.
package unittest

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"
)

// normalizeName is a table name as written in a test (schema.table, or
// SQLMesh's fully qualified '"db"."schema"."table"') in gapless's form:
// lower case, unquoted parts joined by dots.
func normalizeName(s string) string {
	parts := tableParts(strings.TrimSpace(s))
	for i, p := range parts {
		parts[i] = strings.ToLower(p)
	}
	return strings.Join(parts, ".")
}

// TestsDir is the folder, inside a project, that holds the test files.
const TestsDir = "tests"

// Test is one unit test: a top-level key of a test file.
//
// Invariant kept by Load: Model is set and lower case, and there is at
// least one output (the query's or a CTE's).
type Test struct {
	Name string
	// File is the test file, relative to the project folder when it is
	// inside it; Line is where the test's name is written.
	File        string
	Line        int
	Model       string
	Description string
	// Schema is SQLMesh's fixture schema name; gapless accepts it and
	// ignores it: each test has a database of its own.
	Schema  string
	Inputs  []Input
	Outputs []Output
	// Vars are the test's variables as written: start, end and
	// execution_time set the time macros; any other is a user variable.
	Vars []Var
}

// Var is one entry of a test's vars.
type Var struct {
	Name  string
	Value any
	Line  int
}

// Input is the rows of one table the model reads.
type Input struct {
	// Table is the name as written (schema.table, lower case).
	Table string
	Line  int
	// Rows, or Query when the rows are the answer of a SQL query run on
	// the test's database.
	Rows  []Row
	Query string
	// Columns are types given in the test (columns: {name: TYPE}); they
	// win over the types known from the project.
	Columns []Column
}

// Output is the expected rows of the model's query (CTE "") or of one of
// its CTEs.
type Output struct {
	CTE     string
	Line    int
	Rows    []Row
	Query   string
	Partial bool
}

// Column is a column name and its SQL type.
type Column struct {
	Name, Type string
}

// Row is one row as written: its cells in the order written.
type Row struct {
	Line  int
	Cells []Cell
}

// Cell is one value of a row.
type Cell struct {
	Column string
	// Value is nil, bool, int64, uint64, float64, string, []any or
	// map[string]any.
	Value any
	// Kind says how an unquoted YAML scalar reads (a date or timestamp,
	// as YAML's timestamp type): it only guides type inference.
	Kind ValueKind
}

// ValueKind refines a string Value for type inference.
type ValueKind int

// The kinds of string values.
const (
	KindPlain ValueKind = iota
	KindDate
	KindTimestamp
)

// Get is the value of column c in r, and whether r has it.
func (r Row) Get(c string) (Cell, bool) {
	for _, cell := range r.Cells {
		if cell.Column == c {
			return cell, true
		}
	}
	return Cell{}, false
}

// Error is a problem with a test file or a test, located at a file and
// line; Test is "" for a problem with the file itself.
type Error struct {
	File string
	Line int
	Test string
	Msg  string
	Err  error
}

func (e *Error) Error() string {
	loc := e.File
	if e.Line > 0 {
		loc += ":" + strconv.Itoa(e.Line)
	}
	if e.Test != "" {
		return fmt.Sprintf("%s: test %s: %s", loc, e.Test, e.Msg)
	}
	return loc + ": " + e.Msg
}

// Unwrap is the underlying error, if any.
func (e *Error) Unwrap() error { return e.Err }

// Errors is every problem Load found, in file order.
type Errors []error

func (e Errors) Error() string {
	msgs := make([]string, len(e))
	for i, err := range e {
		msgs[i] = err.Error()
	}
	return strings.Join(msgs, "\n")
}

// Unwrap exposes each error to errors.Is and errors.As.
func (e Errors) Unwrap() []error { return e }

// Files lists the test files of the project at dir as SQLMesh finds them:
// tests/**/test*.yaml and tests/**/test*.yml, sorted. A project without a
// tests folder has none.
func Files(dir string) ([]string, error) {
	root := filepath.Join(dir, TestsDir)
	var files []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && path == root {
				return filepath.SkipDir
			}
			return err
		}
		name := d.Name()
		ext := strings.ToLower(filepath.Ext(name))
		if !d.IsDir() && strings.HasPrefix(name, "test") && (ext == ".yaml" || ext == ".yml") {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing test files in %s: %w", root, err)
	}
	slices.Sort(files)
	return files, nil
}

// Load reads every test file of the project at dir (see Files). It returns
// every test, in file order then in the order written, or Errors listing
// every problem found, each at its file and line. Two tests of one name
// are an error: a name selects one test.
func Load(dir string) ([]*Test, error) {
	files, err := Files(dir)
	if err != nil {
		return nil, err
	}
	var tests []*Test
	var errs Errors
	seen := map[string]*Test{}
	for _, f := range files {
		ts, err := LoadFile(dir, f)
		if err != nil {
			var fe Errors
			if errors.As(err, &fe) {
				errs = append(errs, fe...)
			} else {
				errs = append(errs, err)
			}
			continue
		}
		for _, t := range ts {
			if other, dup := seen[t.Name]; dup {
				errs = append(errs, &Error{File: t.File, Line: t.Line, Test: t.Name,
					Msg: fmt.Sprintf("a test of this name is already defined at %s:%d", other.File, other.Line)})
				continue
			}
			seen[t.Name] = t
			tests = append(tests, t)
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return tests, nil
}

// LoadFile reads the tests of one file (path absolute or relative to dir).
// Errors are Errors of *Error, each at a line of the file.
func LoadFile(dir, path string) ([]*Test, error) {
	if !filepath.IsAbs(path) {
		path = filepath.Join(dir, path)
	}
	rel := path
	if r, err := filepath.Rel(dir, path); err == nil && !strings.HasPrefix(r, "..") {
		rel = r
	}
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading test file: %w", err)
	}
	l := &fileLoader{dir: dir, file: rel}
	tests := l.parse(src)
	if len(l.errs) > 0 {
		return nil, l.errs
	}
	return tests, nil
}

type fileLoader struct {
	dir, file string
	test      string
	errs      Errors
}

func (l *fileLoader) fail(n ast.Node, format string, args ...any) {
	l.errs = append(l.errs, &Error{File: l.file, Line: line(n), Test: l.test, Msg: fmt.Sprintf(format, args...)})
}

func line(n ast.Node) int {
	if n == nil || n.GetToken() == nil || n.GetToken().Position == nil {
		return 0
	}
	return n.GetToken().Position.Line
}

func (l *fileLoader) parse(src []byte) []*Test {
	f, err := parser.ParseBytes(src, 0)
	if err != nil {
		e := &Error{File: l.file, Msg: "YAML: " + err.Error(), Err: err}
		var se *yaml.SyntaxError
		if errors.As(err, &se) {
			e.Msg = "YAML syntax error: " + se.GetMessage()
			if tk := se.GetToken(); tk != nil && tk.Position != nil {
				e.Line = tk.Position.Line
			}
		}
		l.errs = append(l.errs, e)
		return nil
	}
	var tests []*Test
	for _, doc := range f.Docs {
		if doc.Body == nil {
			continue
		}
		pairs, ok := mapping(doc.Body)
		if !ok {
			l.fail(doc.Body, "a test file is a mapping of test names to tests")
			continue
		}
		for _, p := range pairs {
			l.test = keyString(p)
			if t := l.parseTest(p); t != nil {
				tests = append(tests, t)
			}
			l.test = ""
		}
	}
	return tests
}

// mapping is n's key/value pairs when n is a mapping.
func mapping(n ast.Node) ([]*ast.MappingValueNode, bool) {
	n = deref(n)
	switch m := n.(type) {
	case *ast.MappingNode:
		return m.Values, true
	case *ast.MappingValueNode:
		return []*ast.MappingValueNode{m}, true
	}
	return nil, false
}

func deref(n ast.Node) ast.Node {
	for {
		switch v := n.(type) {
		case *ast.AnchorNode:
			n = v.Value
		case *ast.TagNode:
			n = v.Value
		default:
			return n
		}
	}
}

func keyString(p *ast.MappingValueNode) string {
	if s, ok := p.Key.(ast.ScalarNode); ok {
		return fmt.Sprint(s.GetValue())
	}
	return p.Key.String()
}

func isNull(n ast.Node) bool {
	_, ok := deref(n).(*ast.NullNode)
	return n == nil || ok
}

// scalarString is n's text when n is a scalar (a number reads as written).
func scalarString(n ast.Node) (string, bool) {
	switch v := deref(n).(type) {
	case *ast.StringNode:
		return v.Value, true
	case *ast.LiteralNode:
		return v.Value.Value, true
	case *ast.IntegerNode, *ast.FloatNode, *ast.BoolNode:
		return v.GetToken().Value, true
	}
	return "", false
}

func (l *fileLoader) parseTest(p *ast.MappingValueNode) *Test {
	t := &Test{Name: l.test, File: l.file, Line: line(p.Key)}
	pairs, ok := mapping(p.Value)
	if !ok {
		l.fail(p.Key, "a test is a mapping with model, inputs and outputs")
		return nil
	}
	nerr := len(l.errs)
	var outputs ast.Node
	for _, kv := range pairs {
		key := keyString(kv)
		switch key {
		case "model":
			s, ok := scalarString(kv.Value)
			if !ok || s == "" {
				l.fail(kv.Value, "model must be a model name")
				continue
			}
			t.Model = normalizeName(s)
		case "description":
			t.Description, _ = scalarString(kv.Value)
		case "schema":
			t.Schema, _ = scalarString(kv.Value)
		case "gateway":
			// One engine runs tests here: the embedded DuckDB.
		case "inputs":
			t.Inputs = l.parseInputs(kv.Value)
		case "outputs":
			outputs = kv.Value
		case "vars":
			vp, ok := mapping(kv.Value)
			if !ok && !isNull(kv.Value) {
				l.fail(kv.Value, "vars must be a mapping of variable names to values")
			}
			for _, v := range vp {
				val, _ := l.value(v.Value)
				t.Vars = append(t.Vars, Var{Name: strings.ToLower(keyString(v)), Value: val.Value, Line: line(v.Key)})
			}
		default:
			l.fail(kv.Key, "unknown test attribute %q (attributes: model, inputs, outputs, vars, description, schema)", key)
		}
	}
	if t.Model == "" {
		l.fail(p.Key, "missing required attribute model")
	}
	if outputs == nil || isNull(outputs) {
		l.fail(p.Key, "incomplete test: missing outputs")
	} else {
		t.Outputs = l.parseOutputs(outputs)
	}
	if len(l.errs) > nerr {
		return nil
	}
	return t
}

func (l *fileLoader) parseInputs(n ast.Node) []Input {
	if isNull(n) {
		return nil
	}
	pairs, ok := mapping(n)
	if !ok {
		l.fail(n, "inputs must be a mapping of table names to rows")
		return nil
	}
	var out []Input
	for _, kv := range pairs {
		name := normalizeName(keyString(kv))
		d := l.parseData(kv, name, false)
		in := Input{Table: name, Line: line(kv.Key), Rows: d.rows, Query: d.query, Columns: d.columns}
		if d.partial {
			l.fail(kv.Key, "input %s: partial applies to outputs only", name)
		}
		out = append(out, in)
	}
	return out
}

func (l *fileLoader) parseOutputs(n ast.Node) []Output {
	pairs, ok := mapping(n)
	if !ok {
		l.fail(n, "outputs must be a mapping with query and/or ctes")
		return nil
	}
	partialAll := false
	for _, kv := range pairs {
		if keyString(kv) == "partial" {
			partialAll = boolValue(kv.Value)
		}
	}
	var out []Output
	for _, kv := range pairs {
		switch key := keyString(kv); key {
		case "partial":
		case "query":
			d := l.parseData(kv, "query", true)
			out = append(out, Output{Line: line(kv.Key), Rows: d.rows, Query: d.query, Partial: partialAll || d.partial})
		case "ctes":
			cp, ok := mapping(kv.Value)
			if !ok {
				l.fail(kv.Value, "ctes must be a mapping of CTE names to rows")
				continue
			}
			for _, c := range cp {
				name := strings.ToLower(keyString(c))
				d := l.parseData(c, "CTE "+name, true)
				out = append(out, Output{CTE: name, Line: line(c.Key), Rows: d.rows, Query: d.query, Partial: partialAll || d.partial})
			}
		default:
			l.fail(kv.Key, "unknown outputs attribute %q (attributes: query, ctes, partial)", key)
		}
	}
	if len(out) == 0 {
		l.fail(n, "incomplete test: outputs must contain query or ctes")
	}
	return out
}

func boolValue(n ast.Node) bool {
	b, ok := deref(n).(*ast.BoolNode)
	return ok && b.Value
}

type data struct {
	rows    []Row
	query   string
	columns []Column
	partial bool
}

// parseData reads the rows of an input or output: a list of rows, or a
// mapping with rows (a list, or CSV text with format: csv), query, path,
// columns, partial.
func (l *fileLoader) parseData(kv *ast.MappingValueNode, what string, output bool) data {
	var d data
	v := deref(kv.Value)
	if seq, ok := v.(*ast.SequenceNode); ok {
		d.rows = l.rows(seq, what)
		return d
	}
	if isNull(v) {
		return d
	}
	pairs, ok := mapping(v)
	if !ok {
		l.fail(v, "%s: expected a list of rows or a mapping with rows or query", what)
		return d
	}
	var rowsNode ast.Node
	format, path, sep := "", "", ','
	for _, p := range pairs {
		switch key := keyString(p); key {
		case "rows":
			rowsNode = p.Value
		case "query":
			d.query, _ = scalarString(p.Value)
			if strings.TrimSpace(d.query) == "" {
				l.fail(p.Value, "%s: query must be SQL text", what)
			}
		case "format":
			format, _ = scalarString(p.Value)
		case "path":
			path, _ = scalarString(p.Value)
		case "partial":
			if !output {
				l.fail(p.Key, "%s: partial applies to outputs only", what)
			}
			d.partial = boolValue(p.Value)
		case "columns":
			cp, ok := mapping(p.Value)
			if !ok {
				l.fail(p.Value, "%s: columns must be a mapping of column names to types", what)
			}
			for _, c := range cp {
				typ, _ := scalarString(c.Value)
				d.columns = append(d.columns, Column{Name: strings.ToLower(keyString(c)), Type: typ})
			}
		case "csv_settings":
			cp, _ := mapping(p.Value)
			for _, c := range cp {
				switch ck := keyString(c); ck {
				case "sep", "delimiter":
					s, _ := scalarString(c.Value)
					if r := []rune(s); len(r) == 1 {
						sep = r[0]
					} else {
						l.fail(c.Value, "%s: csv_settings %s must be one character", what, ck)
					}
				case "skip_blank_lines":
					// Blank lines are always skipped.
				default:
					l.fail(c.Key, "%s: csv_settings %s is not supported (supported: sep, skip_blank_lines)", what, ck)
				}
			}
		default:
			l.fail(p.Key, "%s: unknown attribute %q (attributes: rows, query, format, path, columns, partial)", what, key)
		}
	}
	if d.query != "" && (rowsNode != nil || path != "") {
		l.fail(kv.Key, "%s: cannot set both query and rows", what)
		return d
	}
	switch format {
	case "", "yaml":
		switch {
		case path != "":
			d.rows = l.yamlFile(kv, what, path)
		case rowsNode != nil:
			seq, ok := deref(rowsNode).(*ast.SequenceNode)
			if !ok && !isNull(rowsNode) {
				l.fail(rowsNode, "%s: rows must be a list of rows (or CSV text with format: csv)", what)
			}
			if ok {
				d.rows = l.rows(seq, what)
			}
		}
	case "csv":
		text, at := "", line(rowsNode)
		switch {
		case path != "":
			b, err := os.ReadFile(l.resolve(path))
			if err != nil {
				l.fail(kv.Key, "%s: reading %s: %v", what, path, err)
				return d
			}
			text, at = string(b), 0
		case rowsNode != nil:
			var ok bool
			if text, ok = scalarString(rowsNode); !ok {
				l.fail(rowsNode, "%s: with format: csv, rows is CSV text (rows: |)", what)
				return d
			}
			if _, lit := deref(rowsNode).(*ast.LiteralNode); lit {
				at++ // the text starts on the line after "rows: |"
			}
		}
		d.rows = l.csvRows(kv, what, text, sep, at)
	default:
		l.fail(kv.Key, "%s: unsupported data format %q (formats: yaml, csv)", what, format)
	}
	if d.query == "" && d.rows == nil && rowsNode == nil && path == "" {
		l.fail(kv.Key, "%s: missing rows or query", what)
	}
	return d
}

func (l *fileLoader) resolve(path string) string {
	if filepath.IsAbs(path) {
		return path
	}
	return filepath.Join(l.dir, path)
}

func (l *fileLoader) yamlFile(kv *ast.MappingValueNode, what, path string) []Row {
	b, err := os.ReadFile(l.resolve(path))
	if err != nil {
		l.fail(kv.Key, "%s: reading %s: %v", what, path, err)
		return nil
	}
	f, err := parser.ParseBytes(b, 0)
	if err != nil || len(f.Docs) == 0 || f.Docs[0].Body == nil {
		l.fail(kv.Key, "%s: %s is not a YAML list of rows: %v", what, path, err)
		return nil
	}
	body := deref(f.Docs[0].Body)
	if pairs, ok := mapping(body); ok {
		for _, p := range pairs {
			if keyString(p) == "rows" {
				body = deref(p.Value)
			}
		}
	}
	seq, ok := body.(*ast.SequenceNode)
	if !ok {
		l.fail(kv.Key, "%s: %s is not a YAML list of rows", what, path)
		return nil
	}
	return l.rows(seq, what)
}

func (l *fileLoader) rows(seq *ast.SequenceNode, what string) []Row {
	out := []Row{}
	for _, item := range seq.Values {
		pairs, ok := mapping(item)
		if !ok {
			if isNull(item) {
				out = append(out, Row{Line: line(item)})
				continue
			}
			l.fail(item, "%s: a row is a mapping of column names to values", what)
			continue
		}
		r := Row{Line: line(item)}
		for _, p := range pairs {
			c, err := l.value(p.Value)
			if err != nil {
				l.fail(p.Value, "%s: %v", what, err)
			}
			c.Column = strings.ToLower(keyString(p))
			if _, dup := r.Get(c.Column); dup {
				l.fail(p.Key, "%s: column %s is given twice in one row", what, c.Column)
			}
			r.Cells = append(r.Cells, c)
		}
		if len(pairs) > 0 {
			r.Line = line(pairs[0].Key)
		}
		out = append(out, r)
	}
	return out
}

var (
	plainDate      = regexp.MustCompile(`^\d{4}-\d{1,2}-\d{1,2}$`)
	plainTimestamp = regexp.MustCompile(`^\d{4}-\d{1,2}-\d{1,2}([Tt]|[ \t]+)\d{1,2}:\d{2}:\d{2}(\.\d*)?([ \t]*(Z|[-+]\d{1,2}(:?\d{2})?))?$`)
)

// value reads one YAML value. An unquoted scalar that YAML reads as a
// timestamp keeps its text, marked as a date or a timestamp.
func (l *fileLoader) value(n ast.Node) (Cell, error) {
	switch v := deref(n).(type) {
	case *ast.NullNode:
		return Cell{}, nil
	case *ast.BoolNode:
		return Cell{Value: v.Value}, nil
	case *ast.IntegerNode:
		switch i := v.Value.(type) {
		case int64:
			return Cell{Value: i}, nil
		case uint64:
			if i <= math.MaxInt64 {
				return Cell{Value: int64(i)}, nil
			}
			return Cell{Value: i}, nil
		}
		return Cell{Value: v.Value}, nil
	case *ast.FloatNode:
		return Cell{Value: v.Value}, nil
	case *ast.StringNode:
		c := Cell{Value: v.Value}
		if v.Token.Type != token.DoubleQuoteType && v.Token.Type != token.SingleQuoteType {
			switch {
			case plainDate.MatchString(v.Value):
				c.Kind = KindDate
			case plainTimestamp.MatchString(v.Value):
				c.Kind = KindTimestamp
			}
		}
		return c, nil
	case *ast.LiteralNode:
		return Cell{Value: v.Value.Value}, nil
	}
	var out any
	if err := yaml.NodeToValue(n, &out); err != nil {
		return Cell{}, fmt.Errorf("reading a value: %w", err)
	}
	return Cell{Value: normalize(out)}, nil
}

// normalize turns decoded YAML into the Value forms Cell documents.
func normalize(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = normalize(e)
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = normalize(e)
		}
		return x
	case int:
		return int64(x)
	case uint64:
		if x <= math.MaxInt64 {
			return int64(x)
		}
	case float32:
		return float64(x)
	}
	return v
}

// csvRows reads CSV text (a header, then rows) as pandas does for SQLMesh:
// an empty field is NULL, numbers and booleans are read as such.
func (l *fileLoader) csvRows(kv *ast.MappingValueNode, what, text string, sep rune, at int) []Row {
	r := csv.NewReader(strings.NewReader(text))
	r.Comma = sep
	r.FieldsPerRecord = -1
	records, err := r.ReadAll()
	if err != nil {
		l.fail(kv.Key, "%s: CSV: %v", what, err)
		return nil
	}
	if len(records) == 0 {
		l.fail(kv.Key, "%s: CSV text has no header", what)
		return nil
	}
	header := records[0]
	out := []Row{}
	for i, rec := range records[1:] {
		if len(rec) == 1 && strings.TrimSpace(rec[0]) == "" {
			continue
		}
		ln := line(kv.Key)
		if at > 0 {
			ln = at + i + 1
		}
		if len(rec) != len(header) {
			l.errs = append(l.errs, &Error{File: l.file, Line: ln, Test: l.test,
				Msg: fmt.Sprintf("%s: CSV row %d has %d fields, the header %d", what, i+1, len(rec), len(header))})
			continue
		}
		row := Row{Line: ln}
		for j, f := range rec {
			row.Cells = append(row.Cells, Cell{Column: strings.ToLower(strings.TrimSpace(header[j])), Value: csvValue(f)})
		}
		out = append(out, row)
	}
	return out
}

func csvValue(f string) any {
	s := strings.TrimSpace(f)
	if s == "" {
		return nil
	}
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		return i
	}
	if x, err := strconv.ParseFloat(s, 64); err == nil {
		return x
	}
	switch s {
	case "True", "true", "TRUE":
		return true
	case "False", "false", "FALSE":
		return false
	}
	return f
}
