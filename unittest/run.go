package unittest

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	// The embedded DuckDB driver: every test gets its own in-memory
	// database from it.
	_ "github.com/duckdb/duckdb-go/v2"

	"github.com/gapless-dev/gapless/config"
	sqldialect "github.com/gapless-dev/gapless/dialect"
	"github.com/gapless-dev/gapless/macro"
	"github.com/gapless-dev/gapless/model"
	"github.com/gapless-dev/gapless/model/suggest"
	"github.com/gapless-dev/gapless/project"
)

// Options are how Run runs tests.
type Options struct {
	// Now is what CURRENT_TIMESTAMP and its kind read in a test that sets
	// no execution_time (SQLMesh reads the real clock there); zero is the
	// real clock.
	Now time.Time
}

// Status is a test's outcome.
type Status string

// The outcomes of a test.
const (
	Passed Status = "ok"
	// Failed: the model ran and returned other rows than expected.
	Failed Status = "FAIL"
	// Errored: the test could not run (bad input, SQL error, unknown
	// model, ...).
	Errored Status = "ERROR"
)

// Result is one test's outcome.
type Result struct {
	Test   *Test
	Status Status
	// Mismatches are the outputs whose rows differ (Failed).
	Mismatches []*Mismatch
	// Err is why the test could not run (Errored): an *Error naming the
	// file, line and test.
	Err      error
	Duration time.Duration
}

// Report is the outcome of a Run, one Result per test in the order given.
type Report struct {
	Results  []Result
	Duration time.Duration
}

// Count is how many results have status s.
func (r Report) Count(s Status) int {
	n := 0
	for _, res := range r.Results {
		if res.Status == s {
			n++
		}
	}
	return n
}

// OK reports whether every test passed.
func (r Report) OK() bool { return r.Count(Passed) == len(r.Results) }

// Run runs tests against the models of pr, each on its own in-memory
// DuckDB database, and reports every outcome. It never touches the
// project's warehouse. Tests run one after another; a test that cannot run
// is an Errored result, not an error of Run.
func Run(ctx context.Context, pr *project.Project, tests []*Test, opts Options) Report {
	start := time.Now()
	cat := newCatalog(pr)
	defer cat.close()
	var rep Report
	for _, t := range tests {
		t0 := time.Now()
		res := runOne(ctx, pr, cat, t, opts)
		res.Test, res.Duration = t, time.Since(t0)
		rep.Results = append(rep.Results, res)
	}
	rep.Duration = time.Since(start)
	return rep
}

func runOne(ctx context.Context, pr *project.Project, cat *catalog, t *Test, opts Options) Result {
	tr, err := newTestRun(ctx, pr, cat, t, opts)
	if err != nil {
		return Result{Status: Errored, Err: err}
	}
	defer tr.close()
	mm, err := tr.run(ctx)
	if err != nil {
		return Result{Status: Errored, Err: err}
	}
	if len(mm) > 0 {
		return Result{Status: Failed, Mismatches: mm}
	}
	return Result{Status: Passed}
}

// testRun is one test being run: its database and its model.
type testRun struct {
	t    *Test
	pr   *project.Project
	m    *model.Model
	cat  *catalog
	db   *sql.DB
	conn *sql.Conn
	vars macro.Vars
	now  time.Time
}

func (tr *testRun) errorf(line int, format string, args ...any) error {
	if line == 0 {
		line = tr.t.Line
	}
	return &Error{File: tr.t.File, Line: line, Test: tr.t.Name, Msg: fmt.Sprintf(format, args...)}
}

func (tr *testRun) wrap(line int, err error, format string, args ...any) error {
	if line == 0 {
		line = tr.t.Line
	}
	return &Error{File: tr.t.File, Line: line, Test: tr.t.Name, Msg: fmt.Sprintf(format, args...) + ": " + err.Error(), Err: err}
}

func newTestRun(ctx context.Context, pr *project.Project, cat *catalog, t *Test, opts Options) (*testRun, error) {
	tr := &testRun{t: t, pr: pr, cat: cat}
	m, ok := pr.Models[modelName(pr, t.Model)]
	if !ok {
		return nil, tr.errorf(0, "model %s: no such model in %s%s", t.Model, pr.Dir, closest(t.Model, slices.Sorted(maps.Keys(pr.Models))))
	}
	if m.Query == "" || m.Kind == model.KindSeed || m.Kind == model.KindExternal {
		return nil, tr.errorf(0, "model %s is a %s model, which has no query to test", t.Model, m.Kind)
	}
	tr.m = m
	vars, now, err := tr.timeVars(opts)
	if err != nil {
		return nil, err
	}
	tr.vars, tr.now = vars, now
	db, err := openMemory()
	if err != nil {
		return nil, tr.wrap(0, err, "opening the test database")
	}
	tr.db = db
	if tr.conn, err = db.Conn(ctx); err != nil {
		_ = db.Close()
		return nil, tr.wrap(0, err, "opening the test database")
	}
	return tr, nil
}

func (tr *testRun) close() {
	_ = tr.conn.Close()
	_ = tr.db.Close()
}

// openMemory opens a new, private in-memory DuckDB database, in UTC, on
// one thread (test data is small).
func openMemory() (*sql.DB, error) {
	db, err := sql.Open("duckdb", "")
	if err != nil {
		return nil, fmt.Errorf("opening an in-memory DuckDB: %w", err)
	}
	db.SetMaxOpenConns(1)
	for _, s := range []string{"SET TimeZone = 'UTC'", "SET threads = 1"} {
		if _, err := db.Exec(s); err != nil {
			_ = db.Close()
			return nil, fmt.Errorf("%s: %w", s, err)
		}
	}
	return db, nil
}

// timeVars are the macro values of the test's vars, as SQLMesh sets them:
// start and end default to 1970-01-01, execution_time too; an end written
// as a date means the whole day (end is inclusive).
func (tr *testRun) timeVars(opts Options) (macro.Vars, time.Time, error) {
	epoch := time.Unix(0, 0).UTC()
	v := macro.Vars{Start: epoch, End: epoch.AddDate(0, 0, 1), Execution: epoch, ThisModel: quoteTable(tr.m.Name)}
	now := opts.Now
	if now.IsZero() {
		now = time.Now()
	}
	for _, x := range tr.t.Vars {
		switch x.Name {
		case "start", "end", "execution_time":
		default:
			continue
		}
		t, isDate, err := parseVarTime(x.Value)
		if err != nil {
			return v, now, tr.errorf(x.Line, "vars %s: %v", x.Name, err)
		}
		switch x.Name {
		case "start":
			v.Start = t
		case "end":
			if isDate {
				t = t.AddDate(0, 0, 1)
			}
			v.End = t
		case "execution_time":
			v.Execution, now = t, t
		}
	}
	for _, x := range tr.t.Vars {
		if x.Name == "start" {
			if _, ok := varNamed(tr.t.Vars, "end"); !ok && !v.End.After(v.Start) {
				v.End = v.Start.AddDate(0, 0, 1)
			}
		}
	}
	return v, now, nil
}

// modelName is the project's name for a name written in a test: a
// catalog-qualified name (as SQLMesh's create_test writes,
// "db"."schema"."table") names the model schema.table when the project has
// it, since gapless models live in the warehouse's one catalog.
func modelName(pr *project.Project, name string) string {
	if _, ok := pr.Models[name]; ok {
		return name
	}
	if parts := tableParts(name); len(parts) == 3 {
		if short := parts[1] + "." + parts[2]; pr.Models[short] != nil {
			return short
		}
	}
	return name
}

func varNamed(vs []Var, name string) (Var, bool) {
	for _, v := range vs {
		if v.Name == name {
			return v, true
		}
	}
	return Var{}, false
}

// parseVarTime reads a time variable: a date, a timestamp (with or
// without a zone, then converted to UTC) or epoch milliseconds.
func parseVarTime(v any) (time.Time, bool, error) {
	switch x := v.(type) {
	case int64:
		return time.UnixMilli(x).UTC(), false, nil
	case uint64:
		return time.UnixMilli(int64(x)).UTC(), false, nil //nolint:gosec // epoch milliseconds fit
	case string:
		s := strings.TrimSpace(x)
		isDate := plainDate.MatchString(s)
		if isDate && len(s) != len("2006-01-02") {
			t, err := time.Parse("2006-1-2", s)
			return t, true, err
		}
		t, err := model.ParseTime(s)
		if err != nil {
			return time.Time{}, false, fmt.Errorf("not a date or timestamp: %q", s)
		}
		return t.UTC(), isDate, nil
	}
	return time.Time{}, false, fmt.Errorf("not a date or timestamp: %v", v)
}

func closest(word string, names []string) string {
	if s, ok := suggest.Closest(word, names); ok {
		return "; did you mean " + s + "?"
	}
	return ""
}

// run creates the inputs, renders the model's query and checks every
// output, returning the mismatches.
func (tr *testRun) run(ctx context.Context) ([]*Mismatch, error) {
	if err := tr.createInputs(ctx); err != nil {
		return nil, err
	}
	rendered, err := tr.render(ctx)
	if err != nil {
		return nil, err
	}
	tree, err := tr.parse(ctx, rendered)
	if err != nil {
		return nil, err
	}
	var out []*Mismatch
	for _, o := range tr.t.Outputs {
		q, ordered := rendered, tree.ordered
		what := "query"
		if o.CTE != "" {
			what = "CTE " + o.CTE
			q, ordered, err = tr.cteQuery(ctx, tree, o)
			if err != nil {
				return nil, err
			}
		}
		mm, err := tr.check(ctx, o, what, q, ordered)
		if err != nil {
			return nil, err
		}
		if mm != nil {
			out = append(out, mm)
		}
	}
	return out, nil
}

// render is the model's query with its macros substituted, for the test's
// time variables, and the clock functions frozen at the execution time.
// The test's other vars are macro variables: they win over the
// configuration's, so the model's query is expanded again from its file
// with them. @STAR and @UNION read the columns of the test's tables.
func (tr *testRun) render(ctx context.Context) (string, error) {
	dialect := renderDialect(tr.m.Dialect)
	query := tr.m.Query
	// A model written in a dialect that is not an engine's was rewritten
	// for the project's engine when the project loaded; the test runs on
	// DuckDB, so it is expanded and rewritten again from its file.
	if user := tr.userVars(); len(user) > 0 || !sqldialect.Engine(string(tr.m.Dialect)) {
		q, err := tr.expandWith(user, dialect)
		if err != nil {
			return "", err
		}
		query = q
	}
	v := tr.vars
	v.Env = &macro.Env{Columns: func(table string) ([]macro.Column, error) {
		cols, err := tr.describe(ctx, "SELECT * FROM "+table)
		if err != nil {
			return nil, err
		}
		out := make([]macro.Column, len(cols))
		for i, c := range cols {
			out[i] = macro.Column{Name: c.Name, Type: c.Type}
		}
		return out, nil
	}}
	s, err := macro.Render(query, v, dialect)
	if err != nil {
		var me *macro.Error
		if errors.As(err, &me) {
			pos := tr.m.PosOf(me.Offset)
			return "", tr.wrap(0, err, "rendering model %s (%s:%d)", tr.m.Name, pos.File, pos.Line)
		}
		return "", tr.wrap(0, err, "rendering model %s", tr.m.Name)
	}
	return frozenTime(s, tr.now), nil
}

// renderDialect is the dialect macro.Render renders literals for: the
// model's, or DuckDB's for a dialect it does not know (the literals it
// writes are standard SQL, the same in every dialect).
func renderDialect(d model.Dialect) string {
	switch d {
	case model.DialectDuckDB, model.DialectPostgres, model.DialectTrino:
		return string(d)
	}
	return string(model.DialectDuckDB)
}

// userVars are the test's vars other than the time ones.
func (tr *testRun) userVars() map[string]any {
	out := map[string]any{}
	for _, v := range tr.t.Vars {
		switch v.Name {
		case "start", "end", "execution_time", "latest":
		default:
			out[v.Name] = v.Value
		}
	}
	return out
}

// expandWith expands the model's query as written in its file with the
// configuration's variables overridden by user, and the project's macro
// library, and carries it over from the model's dialect to DuckDB's, where
// tests run.
func (tr *testRun) expandWith(user map[string]any, dialect string) (string, error) {
	cfg, err := config.Load(tr.pr.Dir)
	if err != nil {
		return "", tr.wrap(0, err, "reading the configuration for vars")
	}
	path := tr.m.Path
	if !filepath.IsAbs(path) {
		path = filepath.Join(tr.pr.Dir, path)
	}
	src, err := os.ReadFile(path)
	if err != nil {
		return "", tr.wrap(0, err, "reading model %s for vars", tr.m.Name)
	}
	written, err := model.ParseFile(tr.m.Path, src, cfg.ModelDefaults)
	if err != nil {
		return "", tr.wrap(0, err, "reading model %s for vars", tr.m.Name)
	}
	if written.Name != tr.m.Name {
		return "", tr.errorf(0, "vars: model %s is not the first model of %s, whose query cannot be expanded again with the test's vars", tr.m.Name, tr.m.Path)
	}
	lib, err := macro.LoadDir(tr.pr.Dir)
	if err != nil {
		return "", tr.wrap(0, err, "loading the project's macros for vars")
	}
	vars := map[string]any{}
	maps.Copy(vars, cfg.Variables)
	maps.Copy(vars, user)
	q, _, err := macro.Expand(written.Query, &macro.Env{Variables: vars, Library: lib}, dialect)
	if err != nil {
		return "", tr.wrap(0, err, "expanding the macros of model %s with the test's vars", tr.m.Name)
	}
	if q, _, err = sqldialect.Transpile(q, string(written.Dialect), sqldialect.DuckDB); err != nil {
		return "", tr.wrap(0, err, "carrying model %s over from dialect %s to DuckDB", tr.m.Name, written.Dialect)
	}
	return q, nil
}

// createInputs creates every input as a table named as the model reads it,
// and an empty one for a model that reads itself without input. A table
// the model reads without an input is an error, as in SQLMesh.
func (tr *testRun) createInputs(ctx context.Context) error {
	given := map[string]bool{}
	for i, in := range tr.t.Inputs {
		tr.t.Inputs[i].Table = modelName(tr.pr, in.Table)
		given[tr.t.Inputs[i].Table] = true
	}
	for _, p := range tr.pr.Graph.Parents(tr.m.Name) {
		if !given[p] {
			return tr.errorf(0, "incomplete test: missing input %s, which model %s reads (inputs: %s)",
				p, tr.m.Name, strings.Join(slices.Sorted(maps.Keys(given)), ", "))
		}
	}
	for _, in := range tr.t.Inputs {
		if err := tr.createInput(ctx, in); err != nil {
			return err
		}
	}
	if !given[tr.m.Name] && tr.readsItself() {
		cols := toColumns(tr.m.Columns)
		if err := tr.createTable(ctx, tr.m.Name, cols); err != nil {
			return tr.wrap(0, err, "creating the empty table of %s (the model reads itself)", tr.m.Name)
		}
	}
	return nil
}

func (tr *testRun) readsItself() bool {
	if strings.Contains(strings.ToLower(tr.m.Query), "@this_model") {
		return true
	}
	q := tr.pr.Queries[tr.m.Name]
	if q == nil {
		return false
	}
	for _, ref := range q.Tables {
		if ref.Schema+"."+ref.Name == tr.m.Name {
			return true
		}
	}
	return false
}

func toColumns(cs []model.Column) []Column {
	out := make([]Column, len(cs))
	for i, c := range cs {
		out[i] = Column{Name: strings.ToLower(c.Name), Type: c.Type}
	}
	return out
}

// createTable creates name (its schema, and its catalog attached as an
// in-memory database when named) with cols.
func (tr *testRun) createTable(ctx context.Context, name string, cols []Column) error {
	parts := tableParts(name)
	if len(parts) == 3 {
		var n int
		if err := tr.conn.QueryRowContext(ctx, "SELECT count(*) FROM duckdb_databases() WHERE database_name = ?", parts[0]).Scan(&n); err != nil {
			return fmt.Errorf("listing databases: %w", err)
		}
		if n == 0 {
			if _, err := tr.conn.ExecContext(ctx, "ATTACH ':memory:' AS "+quoteIdent(parts[0])); err != nil {
				return fmt.Errorf("attaching catalog %s: %w", parts[0], err)
			}
		}
	}
	if len(parts) >= 2 {
		schema := quoteIdent(parts[len(parts)-2])
		if len(parts) == 3 {
			schema = quoteIdent(parts[0]) + "." + schema
		}
		if _, err := tr.conn.ExecContext(ctx, "CREATE SCHEMA IF NOT EXISTS "+schema); err != nil {
			return fmt.Errorf("creating schema %s: %w", schema, err)
		}
	}
	defs := make([]string, len(cols))
	for i, c := range cols {
		defs[i] = quoteIdent(c.Name) + " " + c.Type
	}
	if _, err := tr.conn.ExecContext(ctx, "CREATE TABLE "+quoteTable(name)+" ("+strings.Join(defs, ", ")+")"); err != nil {
		return fmt.Errorf("creating table %s: %w", name, err)
	}
	return nil
}

// createInput creates one input table. Its columns are the upstream's
// known columns (declared, a seed's CSV header, or what its query
// produces), with the types the test gives winning; a row naming a column
// the upstream does not have is an error. Without known columns, the
// columns are those the rows name, typed from their values.
func (tr *testRun) createInput(ctx context.Context, in Input) error {
	known, err := tr.cat.known(ctx, in.Table)
	if err != nil {
		return tr.wrap(in.Line, err, "input %s: reading its columns from the project", in.Table)
	}
	cols := slices.Clone(known)
	for _, c := range in.Columns {
		if i := slices.IndexFunc(cols, func(k Column) bool { return k.Name == c.Name }); i >= 0 {
			cols[i].Type = c.Type
		} else if known == nil {
			cols = append(cols, c)
		} else {
			return tr.errorf(in.Line, "input %s: columns gives %s, which %s does not have (columns: %s)%s",
				in.Table, c.Name, in.Table, columnNames(known), closest(c.Name, names(known)))
		}
	}
	if in.Query != "" {
		return tr.createFromQuery(ctx, in, known, cols)
	}
	if known != nil {
		for _, r := range in.Rows {
			var unknown []string
			for _, c := range r.Cells {
				if !slices.ContainsFunc(cols, func(k Column) bool { return k.Name == c.Column }) {
					unknown = append(unknown, c.Column)
				}
			}
			if len(unknown) > 0 {
				return tr.errorf(r.Line, "input %s: unknown column(s) %s: %s has columns %s%s", in.Table,
					strings.Join(unknown, ", "), in.Table, columnNames(known), closest(unknown[0], names(known)))
			}
		}
	} else {
		cols, err = tr.inferColumns(ctx, in, cols)
		if err != nil {
			return err
		}
	}
	if err := tr.createTable(ctx, in.Table, cols); err != nil {
		return tr.wrap(in.Line, err, "input %s", in.Table)
	}
	return tr.insertRows(ctx, in.Table, cols, in.Rows, "input "+in.Table)
}

func (tr *testRun) createFromQuery(ctx context.Context, in Input, known, cols []Column) error {
	if len(cols) == 0 {
		if err := tr.createTable(ctx, in.Table, []Column{{Name: "__gapless_placeholder", Type: "INTEGER"}}); err != nil {
			return tr.wrap(in.Line, err, "input %s", in.Table)
		}
		q := "CREATE OR REPLACE TABLE " + quoteTable(in.Table) + " AS " + in.Query
		if _, err := tr.conn.ExecContext(ctx, q); err != nil {
			return tr.wrap(in.Line, err, "input %s: running its query", in.Table)
		}
		return nil
	}
	produced, err := tr.describe(ctx, in.Query)
	if err != nil {
		return tr.wrap(in.Line, err, "input %s: running its query", in.Table)
	}
	if known != nil {
		var unknown []string
		for _, c := range produced {
			if !slices.ContainsFunc(cols, func(k Column) bool { return k.Name == strings.ToLower(c.Name) }) {
				unknown = append(unknown, c.Name)
			}
		}
		if len(unknown) > 0 {
			return tr.errorf(in.Line, "input %s: its query returns unknown column(s) %s: %s has columns %s",
				in.Table, strings.Join(unknown, ", "), in.Table, columnNames(known))
		}
	}
	if err := tr.createTable(ctx, in.Table, cols); err != nil {
		return tr.wrap(in.Line, err, "input %s", in.Table)
	}
	if _, err := tr.conn.ExecContext(ctx, "INSERT INTO "+quoteTable(in.Table)+" BY NAME "+in.Query); err != nil {
		return tr.wrap(in.Line, err, "input %s: inserting its query's rows", in.Table)
	}
	return nil
}

// describe is the columns query returns, without running it.
func (tr *testRun) describe(ctx context.Context, query string) ([]Column, error) {
	return describeOn(ctx, tr.conn, query)
}

type queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

func describeOn(ctx context.Context, q queryer, query string) ([]Column, error) {
	rows, err := q.QueryContext(ctx, "SELECT column_name, column_type FROM (DESCRIBE "+query+")")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Column
	for rows.Next() {
		var c Column
		if err := rows.Scan(&c.Name, &c.Type); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// inferColumns types the columns the rows name from their values, as
// SQLMesh does when the upstream's types are unknown: integers BIGINT,
// decimals DOUBLE, booleans BOOLEAN, unquoted YAML dates and timestamps
// DATE and TIMESTAMP, other strings VARCHAR; lists and mappings as DuckDB
// types their literals. A column whose every value is NULL cannot be
// typed: its type must be given.
func (tr *testRun) inferColumns(ctx context.Context, in Input, given []Column) ([]Column, error) {
	cols := given
	var order []string
	for _, r := range in.Rows {
		for _, c := range r.Cells {
			if !slices.Contains(order, c.Column) {
				order = append(order, c.Column)
			}
		}
	}
	for _, name := range order {
		if slices.ContainsFunc(cols, func(k Column) bool { return k.Name == name }) {
			continue
		}
		typ := ""
		for _, r := range in.Rows {
			c, ok := r.Get(name)
			if !ok || c.Value == nil {
				continue
			}
			t, err := tr.valueType(ctx, c)
			if err != nil {
				return nil, tr.wrap(r.Line, err, "input %s: column %s", in.Table, name)
			}
			typ = unify(typ, t)
		}
		if typ == "" {
			return nil, tr.errorf(in.Line, "input %s: cannot infer the type of column %s, whose every value is null: "+
				"give it in the test (columns: {%s: TYPE}) or declare the columns of %s", in.Table, name, name, in.Table)
		}
		cols = append(cols, Column{Name: name, Type: typ})
	}
	return cols, nil
}

func (tr *testRun) valueType(ctx context.Context, c Cell) (string, error) {
	switch v := c.Value.(type) {
	case bool:
		return "BOOLEAN", nil
	case int64, uint64:
		return "BIGINT", nil
	case float64:
		return "DOUBLE", nil
	case string:
		switch c.Kind {
		case KindDate:
			return "DATE", nil
		case KindTimestamp:
			if plainTimestamp.FindStringSubmatch(v)[3] != "" {
				return "TIMESTAMPTZ", nil
			}
			return "TIMESTAMP", nil
		}
		return "VARCHAR", nil
	}
	var t string
	if err := tr.conn.QueryRowContext(ctx, "SELECT typeof("+literal(c.Value)+")").Scan(&t); err != nil {
		return "", fmt.Errorf("typing %s: %w", literal(c.Value), err)
	}
	return t, nil
}

// unify is the type of a column holding values of types a and b.
func unify(a, b string) string {
	switch {
	case a == "" || a == b:
		return b
	case (a == "BIGINT" && b == "DOUBLE") || (a == "DOUBLE" && b == "BIGINT"):
		return "DOUBLE"
	case (a == "DATE" && strings.HasPrefix(b, "TIMESTAMP")) || (b == "DATE" && strings.HasPrefix(a, "TIMESTAMP")):
		if a == "DATE" {
			return b
		}
		return a
	}
	return "VARCHAR"
}

// insertRows inserts rows into table, columns the rows omit being NULL. A
// value that cannot be read as its column's type is an error at its row's
// line.
func (tr *testRun) insertRows(ctx context.Context, table string, cols []Column, rows []Row, what string) error {
	if len(rows) == 0 {
		return nil
	}
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = quoteIdent(c.Name)
	}
	head := "INSERT INTO " + quoteTable(table) + " (" + strings.Join(names, ", ") + ") VALUES "
	tuple := func(r Row) string {
		vals := make([]string, len(cols))
		for i, c := range cols {
			vals[i] = "NULL"
			if cell, ok := r.Get(c.Name); ok {
				vals[i] = literal(cell.Value)
			}
		}
		return "(" + strings.Join(vals, ", ") + ")"
	}
	tuples := make([]string, len(rows))
	for i, r := range rows {
		tuples[i] = tuple(r)
	}
	if _, err := tr.conn.ExecContext(ctx, head+strings.Join(tuples, ", ")); err == nil {
		return nil
	}
	// Find the row at fault, to name its line.
	for _, r := range rows {
		if _, err := tr.conn.ExecContext(ctx, head+tuple(r)); err != nil {
			return tr.wrap(r.Line, err, "%s: the row cannot be stored as columns %s", what, columnList(cols))
		}
	}
	return tr.errorf(0, "%s: the rows cannot be stored as columns %s", what, columnList(cols))
}

func columnList(cols []Column) string {
	parts := make([]string, len(cols))
	for i, c := range cols {
		parts[i] = c.Name + " " + c.Type
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

func columnNames(cols []Column) string { return strings.Join(names(cols), ", ") }

func names(cols []Column) []string {
	out := make([]string, len(cols))
	for i, c := range cols {
		out[i] = c.Name
	}
	return out
}

// tree is a rendered query as DuckDB's parser reads it.
type tree struct {
	raw     map[string]any // json_serialize_sql's answer
	ordered bool           // the outermost query has an ORDER BY
	ctes    []string       // top-level CTE names, as written
}

func (tr *testRun) parse(ctx context.Context, rendered string) (*tree, error) {
	var js string
	if err := tr.conn.QueryRowContext(ctx, "SELECT json_serialize_sql(CAST(? AS VARCHAR))::VARCHAR", rendered).Scan(&js); err != nil {
		return nil, tr.wrap(0, err, "parsing the query of model %s", tr.m.Name)
	}
	var raw map[string]any
	if err := json.Unmarshal([]byte(js), &raw); err != nil {
		return nil, tr.wrap(0, err, "parsing the query of model %s", tr.m.Name)
	}
	if failed, _ := raw["error"].(bool); failed {
		return nil, tr.errorf(0, "the query of model %s does not parse on DuckDB: %v", tr.m.Name, raw["error_message"])
	}
	node := stmtNode(raw)
	t := &tree{raw: raw, ordered: hasOrder(node)}
	for _, e := range cteEntries(node) {
		if k, ok := e["key"].(string); ok {
			t.ctes = append(t.ctes, k)
		}
	}
	return t, nil
}

func stmtNode(raw map[string]any) map[string]any {
	stmts, _ := raw["statements"].([]any)
	if len(stmts) == 0 {
		return nil
	}
	s, _ := stmts[0].(map[string]any)
	n, _ := s["node"].(map[string]any)
	return n
}

func hasOrder(node map[string]any) bool {
	mods, _ := node["modifiers"].([]any)
	for _, m := range mods {
		if mm, ok := m.(map[string]any); ok && mm["type"] == "ORDER_MODIFIER" {
			return true
		}
	}
	return false
}

func cteEntries(node map[string]any) []map[string]any {
	cm, _ := node["cte_map"].(map[string]any)
	entries, _ := cm["map"].([]any)
	out := make([]map[string]any, 0, len(entries))
	for _, e := range entries {
		if m, ok := e.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

// cteQuery is the SQL of one CTE run by itself, with the CTEs it may read:
// the CTE's own query node, given every top-level CTE of the model.
func (tr *testRun) cteQuery(ctx context.Context, t *tree, o Output) (string, bool, error) {
	node := stmtNode(t.raw)
	var target map[string]any
	for _, e := range cteEntries(node) {
		if k, _ := e["key"].(string); strings.EqualFold(k, o.CTE) {
			v, _ := e["value"].(map[string]any)
			q, _ := v["query"].(map[string]any)
			target, _ = q["node"].(map[string]any)
		}
	}
	if target == nil {
		return "", false, tr.errorf(o.Line, "no CTE named %s in model %s (CTEs: %s)%s", o.CTE, tr.m.Name,
			strings.Join(t.ctes, ", "), closest(o.CTE, t.ctes))
	}
	// Deep copy through JSON, then give the CTE's node the outer CTEs.
	b, err := json.Marshal(t.raw)
	if err != nil {
		return "", false, tr.wrap(o.Line, err, "CTE %s", o.CTE)
	}
	var cp map[string]any
	if err := json.Unmarshal(b, &cp); err != nil {
		return "", false, tr.wrap(o.Line, err, "CTE %s", o.CTE)
	}
	outer := stmtNode(cp)
	var inner map[string]any
	for _, e := range cteEntries(outer) {
		if k, _ := e["key"].(string); strings.EqualFold(k, o.CTE) {
			v, _ := e["value"].(map[string]any)
			q, _ := v["query"].(map[string]any)
			inner, _ = q["node"].(map[string]any)
		}
	}
	own := cteEntries(inner)
	all := make([]any, 0)
	for _, e := range cteEntries(outer) {
		all = append(all, e)
	}
	for _, e := range own {
		all = append(all, e)
	}
	cm, _ := outer["cte_map"].(map[string]any)
	innerCopy := map[string]any{}
	maps.Copy(innerCopy, inner)
	newMap := map[string]any{}
	maps.Copy(newMap, cm)
	newMap["map"] = all
	innerCopy["cte_map"] = newMap
	stmts, _ := cp["statements"].([]any)
	s0, _ := stmts[0].(map[string]any)
	s0["node"] = innerCopy
	out, err := json.Marshal(cp)
	if err != nil {
		return "", false, tr.wrap(o.Line, err, "CTE %s", o.CTE)
	}
	var q string
	if err := tr.conn.QueryRowContext(ctx, "SELECT json_deserialize_sql(CAST(? AS VARCHAR)::JSON)", string(out)).Scan(&q); err != nil {
		return "", false, tr.wrap(o.Line, err, "CTE %s: building its query", o.CTE)
	}
	return q, hasOrder(target), nil
}

// catalog knows the columns of the project's models, for typing inputs:
// declared columns, a seed's CSV columns, or what a model's query returns
// on empty parents. It works on an in-memory database of its own.
type catalog struct {
	pr   *project.Project
	mu   sync.Mutex
	db   *sql.DB
	cols map[string][]Column
	done map[string]bool
	err  error
}

func newCatalog(pr *project.Project) *catalog {
	return &catalog{pr: pr, cols: map[string][]Column{}, done: map[string]bool{}}
}

func (c *catalog) close() {
	if c.db != nil {
		_ = c.db.Close()
	}
}

// known is the columns of the model name, or nil when they are not known
// (not a model, or a query that cannot be described).
func (c *catalog) known(ctx context.Context, name string) ([]Column, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.pr.Models[name]; !ok {
		return nil, nil
	}
	if c.db == nil && c.err == nil {
		c.db, c.err = openMemory()
	}
	if c.err != nil {
		return nil, c.err
	}
	return c.columns(ctx, name), nil
}

func (c *catalog) columns(ctx context.Context, name string) []Column {
	if c.done[name] {
		return c.cols[name]
	}
	c.done[name] = true
	m := c.pr.Models[name]
	var cols []Column
	switch {
	case m == nil:
		return nil
	case len(m.Columns) > 0:
		cols = toColumns(m.Columns)
	case m.Kind == model.KindSeed:
		path := m.SeedPath
		if !filepath.IsAbs(path) {
			path = filepath.Join(c.pr.Dir, filepath.Dir(m.Path), path)
		}
		cols, _ = describeOn(ctx, c.db, "SELECT * FROM read_csv_auto("+quoteString(path)+")")
	case m.Query != "":
		for _, p := range c.pr.Graph.Parents(name) {
			if c.columns(ctx, p) == nil {
				return nil
			}
		}
		epoch := time.Unix(0, 0).UTC()
		dialect := renderDialect(m.Dialect)
		q, err := macro.Render(m.Query, macro.Vars{Start: epoch, End: epoch.AddDate(0, 0, 1), Execution: epoch, ThisModel: quoteTable(m.Name)}, dialect)
		if err != nil {
			return nil
		}
		cols, _ = describeOn(ctx, c.db, frozenTime(q, epoch))
	}
	for i := range cols {
		cols[i].Name = strings.ToLower(cols[i].Name)
	}
	if cols != nil {
		if err := c.create(ctx, name, cols); err != nil {
			return nil
		}
	}
	c.cols[name] = cols
	return cols
}

func (c *catalog) create(ctx context.Context, name string, cols []Column) error {
	parts := tableParts(name)
	if len(parts) == 2 {
		if _, err := c.db.ExecContext(ctx, "CREATE SCHEMA IF NOT EXISTS "+quoteIdent(parts[0])); err != nil {
			return err
		}
	}
	defs := make([]string, len(cols))
	for i, col := range cols {
		defs[i] = quoteIdent(col.Name) + " " + col.Type
	}
	_, err := c.db.ExecContext(ctx, "CREATE TABLE "+quoteTable(name)+" ("+strings.Join(defs, ", ")+")")
	return err
}
