// Package source holds the definitions of a project's sources: the tables
// gapless itself lands from outside (files, later queues and databases),
// one YAML file per source under sources/.
//
//	name: raw.events                 # the table models read: FROM raw.events
//	connector: files
//	files:
//	  path: landing/events/*.csv     # a glob relative to the project
//	  settle: 30s                    # a file is taken once unchanged this long
//	  replace_runs: landing/events/full/*/
//	apply: append                    # append | upsert (with unique_key) | replace
//	unique_key: [event_id]
//	time_column: event_ts
//	start: '2024-01-01'
//	watermark: {lateness: 10m}
//	columns: {event_id: BIGINT, event_ts: TIMESTAMP}   # optional
//
// A file is read as strictly as gapless.yaml (package config): an unknown
// key is an error at its line and column naming the closest key, ${VAR} is
// expanded from the environment in the connector's block, and every problem
// found after decoding names the file, line and column of the value. The
// package is plain data: it knows no warehouse and lands nothing.
package source

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/goccy/go-yaml/ast"

	"github.com/gapless-dev/gapless/config"
	"github.com/gapless-dev/gapless/internal/strictyaml"
	"github.com/gapless-dev/gapless/model"
	"github.com/gapless-dev/gapless/model/suggest"
)

// Dir is the folder, inside a project, that holds the source files.
const Dir = "sources"

// Connector names how a source's data arrives.
type Connector string

// The known connectors.
const (
	// ConnectorFiles is a landing folder of Parquet, CSV or newline-delimited
	// JSON files.
	ConnectorFiles Connector = "files"
)

// Connectors lists every known connector, in the order messages list them.
var Connectors = []Connector{ConnectorFiles}

// Apply is how a batch of a source's rows changes its table.
type Apply string

// The apply modes.
const (
	ApplyAppend  Apply = "append"  // rows are added
	ApplyUpsert  Apply = "upsert"  // rows replace those of the same unique_key
	ApplyReplace Apply = "replace" // each batch replaces the whole table
)

// Applies lists every apply mode.
var Applies = []Apply{ApplyAppend, ApplyUpsert, ApplyReplace}

// DefaultSettle is files.settle when the file does not set it.
const DefaultSettle = 30 * time.Second

// Definition is one parsed source file.
//
// Invariants kept by Parse: Name is "schema.table" in lower case, a valid
// model name; Connector is one of Connectors, and exactly its block is set
// (Files for ConnectorFiles); Apply is one of Applies, and UniqueKey is not
// empty when it is ApplyUpsert; TimeColumn is set; UniqueKey has no
// duplicates; when Columns are declared, TimeColumn and every UniqueKey
// column are among them.
type Definition struct {
	Name string
	// File is the source file's path relative to the project; Pos is where
	// its name is written (the position a conflict with it is reported at).
	File string
	Pos  model.Pos

	Connector Connector
	// Files is the files connector's block; nil for other connectors.
	Files *Files

	Apply      Apply
	UniqueKey  []string
	TimeColumn string
	// Start is the earliest time the source's data covers; zero when not
	// given.
	Start     time.Time
	Watermark Watermark
	// Columns are the declared columns, in file order; nil when not
	// declared.
	Columns []model.Column
}

// Files is the files connector's block.
type Files struct {
	// Path is a glob, relative to the project, of the files to land.
	Path string
	// Settle is how long a file's size and time must stay unchanged before
	// it is taken: DefaultSettle when not given, 0 allowed.
	Settle time.Duration
	// ReplaceRuns is a glob, relative to the project, of the folders whose
	// files together replace everything before them; "" when none.
	ReplaceRuns string
}

// Watermark is how far a source's data counts as complete.
type Watermark struct {
	// Lateness is subtracted from the greatest time applied; never negative.
	Lateness time.Duration
}

// Schema is the schema of the source's table.
func (d *Definition) Schema() string { s, _, _ := strings.Cut(d.Name, "."); return s }

// Table is the source's table name without its schema.
func (d *Definition) Table() string { _, t, _ := strings.Cut(d.Name, "."); return t }

// file mirrors a source file. Its yaml tags are the one list of known keys:
// the strict key check reads them by reflection. Each connector's block is
// a field named as the connector.
type file struct {
	Name       *string           `yaml:"name"`
	Connector  *string           `yaml:"connector"`
	Files      *filesBlock       `yaml:"files"`
	Apply      *string           `yaml:"apply"`
	UniqueKey  []string          `yaml:"unique_key"`
	TimeColumn *string           `yaml:"time_column"`
	Start      *string           `yaml:"start"`
	Watermark  *watermarkBlock   `yaml:"watermark"`
	Columns    map[string]string `yaml:"columns"`
}

type filesBlock struct {
	Path        *string `yaml:"path"`
	Settle      *string `yaml:"settle"`
	ReplaceRuns *string `yaml:"replace_runs"`
}

type watermarkBlock struct {
	Lateness *string `yaml:"lateness"`
}

// Error is a problem in a source file, located at a line and column (the
// same type as config.Error).
type Error = strictyaml.Error

// ErrBadDuration is wrapped by the error of a duration that does not parse.
var ErrBadDuration = errors.New("bad duration")

// Parse reads one source file. name is the file's path as errors name it
// (relative to the project); lookupEnv expands ${VAR} in the connector's
// block (nil sees no variables). The error is an *Error.
func Parse(name string, src []byte, lookupEnv func(string) (string, bool)) (*Definition, error) {
	if lookupEnv == nil {
		lookupEnv = func(string) (string, bool) { return "", false }
	}
	p := &parser{Doc: strictyaml.New(name), lookupEnv: lookupEnv}
	raw := &file{}
	if err := p.Decode(src, raw, "a source file"); err != nil {
		return nil, err
	}
	return p.build(raw)
}

type parser struct {
	*strictyaml.Doc
	lookupEnv func(string) (string, bool)
}

// top is the position of the file's start, for a missing top-level key.
var top = strictyaml.Pos{Line: 1, Col: 1}

func (p *parser) missing(format string, args ...any) *Error {
	return p.ErrAt("", top, nil, format, args...)
}

func (p *parser) build(raw *file) (*Definition, error) {
	d := &Definition{File: p.File}
	if raw.Name == nil || strings.TrimSpace(*raw.Name) == "" {
		return nil, p.missing("missing name: the table models read, as schema.table (name: raw.events)")
	}
	name, err := p.name(*raw.Name)
	if err != nil {
		return nil, err
	}
	d.Name = name
	np := p.ValPos["name"]
	d.Pos = model.Pos{File: p.File, Line: np.Line, Col: np.Col}

	if err := p.connector(d, raw); err != nil {
		return nil, err
	}

	d.Apply = ApplyAppend
	if raw.Apply != nil {
		a, ok := parseApply(*raw.Apply)
		if !ok {
			return nil, p.ValueErr("apply", nil, "apply %s is not an apply mode%s (modes: %s)",
				*raw.Apply, closest(*raw.Apply, Applies), list(Applies))
		}
		d.Apply = a
	}
	seen := map[string]bool{}
	for i, k := range raw.UniqueKey {
		key := fmt.Sprintf("unique_key[%d]", i)
		col, err := p.column(key, p.itemPos("unique_key", i), k)
		if err != nil {
			return nil, err
		}
		if seen[col] {
			return nil, p.ErrAt(key, p.itemPos("unique_key", i), nil, "unique_key names %s twice", col)
		}
		seen[col] = true
		d.UniqueKey = append(d.UniqueKey, col)
	}
	if d.Apply == ApplyUpsert && len(d.UniqueKey) == 0 {
		at := p.ValPos["apply"]
		if _, ok := p.ValPos["unique_key"]; ok {
			at = p.ValPos["unique_key"]
		}
		return nil, p.ErrAt("unique_key", at, nil, "apply upsert needs unique_key: the columns a row replaces the row of (unique_key: [id])")
	}

	if raw.TimeColumn == nil || strings.TrimSpace(*raw.TimeColumn) == "" {
		if raw.TimeColumn != nil {
			return nil, p.ValueErr("time_column", nil, "time_column is empty: name the column that says when a row happened")
		}
		return nil, p.missing("missing time_column: the column that says when a row happened (time_column: event_ts)")
	}
	if d.TimeColumn, err = p.column("time_column", p.ValPos["time_column"], *raw.TimeColumn); err != nil {
		return nil, err
	}

	if raw.Start != nil {
		t, err := model.ParseTime(*raw.Start)
		if err != nil {
			return nil, p.ValueErr("start", err, "start")
		}
		d.Start = t
	}
	if raw.Watermark != nil && raw.Watermark.Lateness != nil {
		if d.Watermark.Lateness, err = p.duration("watermark.lateness", *raw.Watermark.Lateness); err != nil {
			return nil, err
		}
	}
	if err := p.columns(d, raw.Columns); err != nil {
		return nil, err
	}
	return d, nil
}

// name checks a source's name with the rules of a model's name (it is the
// table models read), by parsing it as one.
func (p *parser) name(written string) (string, error) {
	s := strings.TrimSpace(written)
	schema, table, ok := strings.Cut(s, ".")
	if !ok {
		return "", p.ValueErr("name", nil, "name %s has no schema: write schema.table (name: raw.%s)", s, s)
	}
	if !plainIdent(schema) || !plainIdent(table) {
		return "", p.ValueErr("name", nil, "bad name %s: want schema.table, each a plain identifier (letters, digits and _, not starting with a digit)", s)
	}
	m, err := model.ParseFile(p.File, []byte("MODEL (name "+s+", kind EXTERNAL, columns (x INT));"), model.Defaults{})
	if err != nil {
		return "", p.ValueErr("name", nil, "%s", strings.Replace(modelMsg(err), "bad model name", "bad source name", 1))
	}
	return m.Name, nil
}

// connector reads connector and checks that exactly its block is given.
func (p *parser) connector(d *Definition, raw *file) error {
	if raw.Connector == nil || strings.TrimSpace(*raw.Connector) == "" {
		return p.missing("missing connector: how the source's data arrives (connectors: %s)", list(Connectors))
	}
	c, ok := parseConnector(*raw.Connector)
	if !ok {
		return p.ValueErr("connector", nil, "connector %s is not known%s (connectors: %s)",
			*raw.Connector, closest(*raw.Connector, Connectors), list(Connectors))
	}
	d.Connector = c
	// Each block names its connector; any other block than c's is a
	// mismatch (only files exists so far).
	blocks := map[Connector]bool{ConnectorFiles: raw.Files != nil}
	for _, b := range Connectors {
		if b != c && blocks[b] {
			return p.KeyErr(string(b), nil, "a %s block, but connector is %s: write the %s block, or connector: %s", b, c, c, b)
		}
	}
	switch c {
	case ConnectorFiles:
		if raw.Files == nil {
			return p.KeyErr("connector", nil, "connector files needs a files block (files: {path: landing/events/*.csv})")
		}
		f, err := p.files(raw.Files)
		if err != nil {
			return err
		}
		d.Files = f
	}
	return nil
}

func (p *parser) files(raw *filesBlock) (*Files, error) {
	f := &Files{Settle: DefaultSettle}
	if raw.Path == nil || strings.TrimSpace(*raw.Path) == "" {
		at := p.KeyPos["files"]
		if raw.Path != nil {
			at = p.ValPos["files.path"]
		}
		return nil, p.ErrAt("files.path", at, nil, "files needs path: a glob of the files to land, relative to the project (path: landing/events/*.csv)")
	}
	var err error
	if f.Path, err = p.glob("files.path", *raw.Path); err != nil {
		return nil, err
	}
	if raw.Settle != nil {
		if f.Settle, err = p.duration("files.settle", *raw.Settle); err != nil {
			return nil, err
		}
	}
	if raw.ReplaceRuns != nil {
		if f.ReplaceRuns, err = p.glob("files.replace_runs", *raw.ReplaceRuns); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// glob expands ${VAR} in the glob at key and checks it: a valid pattern,
// relative to the project and inside it.
func (p *parser) glob(key, written string) (string, error) {
	s, err := config.Expand(written, p.lookupEnv)
	if err != nil {
		return "", p.ValueErr(key, err, "%s", key)
	}
	s = strings.TrimSpace(s)
	if s == "" {
		return "", p.ValueErr(key, nil, "%s is empty", key)
	}
	if filepath.IsAbs(s) || path.IsAbs(s) {
		return "", p.ValueErr(key, nil, "%s %s is absolute: write it relative to the project", key, s)
	}
	clean := path.Clean(filepath.ToSlash(s))
	if clean == ".." || strings.HasPrefix(clean, "../") {
		return "", p.ValueErr(key, nil, "%s %s leaves the project: write a path inside it", key, s)
	}
	if _, err := path.Match(clean, ""); err != nil {
		return "", p.ValueErr(key, err, "%s %s is not a valid glob", key, s)
	}
	return s, nil
}

// duration reads a non-negative Go duration (30s, 10m, 1h30m, 0s) at key;
// a bare 0 is 0 too.
func (p *parser) duration(key, written string) (time.Duration, error) {
	node := p.ValNode[key]
	if node != nil && node.Type() == ast.IntegerType && strings.TrimSpace(written) == "0" {
		return 0, nil
	}
	bad := func() (time.Duration, error) {
		e := p.ValueErr(key, nil, "%s: want a duration such as 30s, 10m or 1h (0s for none), got %s", key, strings.TrimSpace(written))
		e.Err = ErrBadDuration
		return 0, e
	}
	if node != nil && node.Type() != ast.StringType {
		return bad()
	}
	d, err := time.ParseDuration(strings.TrimSpace(written))
	if err != nil || d < 0 {
		return bad()
	}
	return d, nil
}

// column checks a column name written at p.
func (p *parser) column(key string, at strictyaml.Pos, written string) (string, error) {
	s := strings.TrimSpace(written)
	if !plainIdent(s) {
		return "", p.ErrAt(key, at, nil, "%s: %q is not a column name (letters, digits and _, not starting with a digit)", key, written)
	}
	return strings.ToLower(s), nil
}

// columns reads the declared columns in file order; each type is checked as
// a model's declared column type is, by parsing it as one.
func (p *parser) columns(d *Definition, raw map[string]string) error {
	if raw == nil {
		if n := p.ValNode["columns"]; n != nil && n.Type() != ast.NullType {
			return p.ValueErr("columns", nil, "columns: want a mapping of column name to type ({event_id: BIGINT})")
		}
		return nil
	}
	if len(raw) == 0 {
		return p.ValueErr("columns", nil, "columns is empty: declare at least one column, or leave columns out")
	}
	names := make([]string, 0, len(raw))
	for n := range raw {
		names = append(names, n)
	}
	slices.SortFunc(names, func(a, b string) int {
		pa, pb := p.KeyPos["columns."+a], p.KeyPos["columns."+b]
		if pa.Line != pb.Line {
			return pa.Line - pb.Line
		}
		return pa.Col - pb.Col
	})
	seen := map[string]bool{}
	for _, n := range names {
		key := "columns." + n
		col, err := p.column(key, p.KeyPos[key], n)
		if err != nil {
			return err
		}
		if seen[col] {
			return p.KeyErr(key, nil, "column %s is declared twice", col)
		}
		seen[col] = true
		typ := strings.TrimSpace(raw[n])
		if typ == "" {
			return p.ValueErr(key, nil, "column %s has no type", col)
		}
		m, err := model.ParseFile(p.File, []byte("MODEL (name s.t, kind EXTERNAL, columns ("+col+" "+typ+"));"), model.Defaults{})
		if err != nil || len(m.Columns) != 1 {
			hint := ""
			if strings.Contains(typ, "(") && !strings.Contains(typ, ")") {
				hint = " (inside {...} a comma ends the value: quote a type that has one, 'DECIMAL(10, 2)')"
			}
			return p.ValueErr(key, nil, "column %s: bad type %s%s", col, typ, hint)
		}
		d.Columns = append(d.Columns, m.Columns[0])
	}
	has := func(c string) bool {
		return slices.ContainsFunc(d.Columns, func(x model.Column) bool { return x.Name == c })
	}
	if !has(d.TimeColumn) {
		return p.ValueErr("time_column", nil, "time_column %s is not a declared column (columns: %s)%s",
			d.TimeColumn, columnNames(d.Columns), closestColumn(d.TimeColumn, d.Columns))
	}
	for i, k := range d.UniqueKey {
		if !has(k) {
			return p.ErrAt(fmt.Sprintf("unique_key[%d]", i), p.itemPos("unique_key", i), nil,
				"unique_key %s is not a declared column (columns: %s)%s", k, columnNames(d.Columns), closestColumn(k, d.Columns))
		}
	}
	return nil
}

// itemPos is where the i-th item of the list at key is written (the list's
// own position when it cannot tell).
func (p *parser) itemPos(key string, i int) strictyaml.Pos {
	if seq, ok := p.ValNode[key].(*ast.SequenceNode); ok && i < len(seq.Values) {
		if t := seq.Values[i].GetToken(); t != nil && t.Position != nil {
			return strictyaml.Pos{Line: t.Position.Line, Col: t.Position.Column}
		}
	}
	return p.ValPos[key]
}

func parseConnector(s string) (Connector, bool) {
	for _, c := range Connectors {
		if strings.EqualFold(string(c), strings.TrimSpace(s)) {
			return c, true
		}
	}
	return "", false
}

func parseApply(s string) (Apply, bool) {
	for _, a := range Applies {
		if strings.EqualFold(string(a), strings.TrimSpace(s)) {
			return a, true
		}
	}
	return "", false
}

func list[T ~string](xs []T) string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = string(x)
	}
	return strings.Join(out, ", ")
}

func closest[T ~string](s string, xs []T) string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = string(x)
	}
	if c, ok := suggest.Closest(strings.ToLower(strings.TrimSpace(s)), out); ok {
		return ": did you mean " + c + "?"
	}
	return ""
}

func columnNames(cols []model.Column) string {
	out := make([]string, len(cols))
	for i, c := range cols {
		out[i] = c.Name
	}
	return strings.Join(out, ", ")
}

func closestColumn(s string, cols []model.Column) string {
	out := make([]string, len(cols))
	for i, c := range cols {
		out[i] = c.Name
	}
	if c, ok := suggest.Closest(s, out); ok {
		return "; did you mean " + c + "?"
	}
	return ""
}

func plainIdent(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		letter := c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
		if !letter && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// modelMsg is a model parse error's message without its file:line:col
// (the caller reports the YAML value's position instead).
func modelMsg(err error) string {
	var me *model.Error
	if errors.As(err, &me) {
		return me.Msg
	}
	return err.Error()
}

// Errors is every problem LoadDir found, in file order.
type Errors []error

func (e Errors) Error() string {
	msgs := make([]string, len(e))
	for i, err := range e {
		msgs[i] = err.Error()
	}
	return strings.Join(msgs, "\n")
}

// Unwrap exposes the individual errors to errors.Is and errors.As.
func (e Errors) Unwrap() []error { return e }

// LoadDir reads every *.yaml and *.yml file under dir/sources (recursively,
// in lexical order) with Parse, naming each by its path relative to dir. A
// project without a sources folder has no sources. Two files of one name
// are an error naming both. On any problem it returns Errors and no
// definition.
func LoadDir(dir string, lookupEnv func(string) (string, bool)) ([]*Definition, error) {
	root := filepath.Join(dir, Dir)
	var files []string
	err := filepath.WalkDir(root, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		ext := strings.ToLower(filepath.Ext(p))
		if !de.IsDir() && (ext == ".yaml" || ext == ".yml") {
			files = append(files, p)
		}
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing source files in %s: %w", root, err)
	}
	slices.Sort(files)
	var out []*Definition
	var errs Errors
	byName := map[string]*Definition{}
	for _, f := range files {
		rel, err := filepath.Rel(dir, f)
		if err != nil {
			rel = f
		}
		src, err := os.ReadFile(f)
		if err != nil {
			errs = append(errs, &Error{File: rel, Msg: "cannot read: " + err.Error(), Err: err})
			continue
		}
		d, err := Parse(rel, src, lookupEnv)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if other, dup := byName[d.Name]; dup {
			errs = append(errs, &Error{File: rel, Line: d.Pos.Line, Col: d.Pos.Col, Key: "name",
				Msg: fmt.Sprintf("source %s is already defined in %s:%d:%d", d.Name, other.File, other.Pos.Line, other.Pos.Col)})
			continue
		}
		byName[d.Name] = d
		out = append(out, d)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return out, nil
}

// WaitReason says why a model waits on the source name, which has published
// coverage up to completeThrough (zero: nothing yet): "waiting on raw.events
// (not landed yet)" or "waiting on raw.events (complete through
// 2024-01-02T10:00:00Z)". Plans, runs and status say it alike.
func WaitReason(name string, completeThrough time.Time) string {
	if completeThrough.IsZero() {
		return fmt.Sprintf("waiting on %s (not landed yet)", name)
	}
	return fmt.Sprintf("waiting on %s (complete through %s)", name, completeThrough.UTC().Format(time.RFC3339))
}
