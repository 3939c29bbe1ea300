// Package project loads a gapless project folder: its model files, their
// parsed SQL, the dependency graph between them and a snapshot of each.
//
// Loading is all-or-nothing: either every model parses, every reference
// resolves and the graph is acyclic, or Load returns every problem it found,
// each located at a file, line and column, and nothing else.
package project

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gapless-dev/gapless/dag"
	"github.com/gapless-dev/gapless/dialect"
	"github.com/gapless-dev/gapless/macro"
	"github.com/gapless-dev/gapless/model"
	"github.com/gapless-dev/gapless/model/suggest"
	"github.com/gapless-dev/gapless/snapshot"
	"github.com/gapless-dev/gapless/source"
	"github.com/gapless-dev/gapless/sqlparse"
)

// ModelsDir is the folder, inside a project, that holds the model files.
const ModelsDir = "models"

// Project is a loaded, validated project.
//
// Invariant: every model in Models is a node of Graph and has a snapshot in
// Snapshots; every reference in a model's SQL is a model of the project.
//
// A source (package source) is a node of Graph too: Models holds its
// stand-in, an EXTERNAL model with Source set, so that it plans,
// fingerprints and deploys as a declared table; Sources holds its
// definition. Sources are shared by every environment.
type Project struct {
	Dir       string
	Models    map[string]*model.Model
	Sources   map[string]*source.Definition
	Queries   map[string]*Query // nil for EXTERNAL and SEED models; offsets into the model's text
	Graph     *dag.Graph
	Snapshots map[string]*snapshot.Snapshot
}

// Errors is every problem found while loading, in file order. Each element
// is usually a *model.Error, whose text starts with file:line:col.
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

// LoadModels reads every *.sql file under dir/models (recursively, in lexical
// order), parses each with defaults, parses its query with p, resolves
// references between models, and builds the graph and snapshots.
func LoadModels(ctx context.Context, dir string, defaults model.Defaults, p *sqlparse.Parser) (*Project, error) {
	return loadModels(ctx, dir, defaults, Options{Parser: func() (*sqlparse.Parser, error) { return p, nil }})
}

// loadModels is LoadModels with opts (see LoadWith). It saves opts.Cache
// once every file is parsed, even when some failed: the next load then
// parses only what changed since.
func loadModels(ctx context.Context, dir string, defaults model.Defaults, opts Options) (*Project, error) {
	files, err := modelFiles(filepath.Join(dir, ModelsDir))
	if err != nil {
		return nil, err
	}
	pr := &Project{Dir: dir, Models: map[string]*model.Model{}, Sources: map[string]*source.Definition{}, Queries: map[string]*Query{}}
	var errs Errors
	lib, err := macro.LoadDir(dir)
	var lerrs *macro.LibraryErrors
	switch {
	case errors.As(err, &lerrs):
		errs = append(errs, lerrs.Errs...)
	case err != nil:
		return nil, err
	}
	var openErr error // the parser's, set at most once, before loadAll returns
	ld := &loader{dir: dir, engine: opts.Engine, defaults: defaults, cache: opts.Cache, macros: &macro.Env{Variables: opts.Variables, Library: lib}, parser: sync.OnceValues(func() (*sqlparse.Parser, error) {
		if opts.Parser == nil {
			openErr = errors.New("project: loading needs a SQL parser")
			return nil, openErr
		}
		p, err := opts.Parser()
		if err != nil {
			openErr = fmt.Errorf("starting the SQL parser: %w", err)
		}
		return p, openErr
	})}
	answers := ld.loadAll(ctx, files)
	opts.Cache.save()
	if openErr != nil {
		return nil, openErr
	}
	for _, l := range answers {
		m, q, err := l.m, l.q, l.err
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !m.Enabled {
			continue
		}
		if other, dup := pr.Models[m.Name]; dup {
			errs = append(errs, &model.Error{Pos: m.HeaderPos, Code: model.CodeInvalid,
				Msg: fmt.Sprintf("model %s is already defined in %s", m.Name, other.HeaderPos)})
			continue
		}
		pr.Models[m.Name] = m
		if q != nil {
			pr.Queries[m.Name] = q
		}
	}
	lookupEnv := opts.LookupEnv
	if lookupEnv == nil {
		lookupEnv = os.LookupEnv
	}
	defs, err := source.LoadDir(dir, lookupEnv)
	var serrs source.Errors
	switch {
	case errors.As(err, &serrs):
		errs = append(errs, serrs...)
	case err != nil:
		return nil, err
	}
	for _, d := range defs {
		if err := pr.addSource(d, defaults); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, pr.addExternals(opts, defaults)...)
	if len(errs) > 0 {
		return nil, errs
	}
	edges, errs := pr.resolve()
	if len(errs) > 0 {
		return nil, errs
	}
	g, err := dag.New(edges)
	if err != nil {
		return nil, pr.describeGraphError(err)
	}
	pr.Graph = g
	inheritStarts(g, pr.Models)
	inputs := map[string]snapshot.Input{}
	for name, m := range pr.Models {
		in := snapshot.Input{Model: m}
		if q := pr.Queries[name]; q != nil {
			in.Canonical = q.Canonical
			in.Refs = snapshotRefs(q.Occurrences)
		}
		if m.Kind == model.KindSeed {
			h, err := seedHash(dir, m)
			if err != nil {
				return nil, err
			}
			in.SeedHash = h
		}
		inputs[name] = in
	}
	pr.Snapshots, err = snapshot.BuildAll(g, inputs)
	if err != nil {
		return nil, err
	}
	return pr, nil
}

// inheritStarts settles the start of every model that has none of its own
// (nor model_defaults.start), deterministically, from the project alone:
//   - the earliest start of the models it reads, as SQLMesh infers a
//     missing start from the parents (in topological order, so an
//     inherited start is inherited further): a FULL or VIEW over
//     incremental models starts where its history does;
//   - else, for a kind built whole (SEED, FULL, VIEW), whose start only
//     dates the record of its builds and never changes its rows, the
//     earliest start in the project. Such a start is not passed on to an
//     incremental model: its history must start where its author said.
//
// An incremental model left without a start is refused when a plan is
// checked, naming its file. SQLMesh would fall back to "yesterday": a start
// that depends on the day the plan is made.
func inheritStarts(g *dag.Graph, models map[string]*model.Model) {
	var earliest time.Time
	for _, name := range g.Order() {
		m := models[name]
		if m.Start.IsZero() && m.Kind != model.KindExternal {
			for _, p := range g.Parents(name) {
				if ps := models[p].Start; !ps.IsZero() && (m.Start.IsZero() || ps.Before(m.Start)) {
					m.Start = ps
				}
			}
		}
		if !m.Start.IsZero() && (earliest.IsZero() || m.Start.Before(earliest)) {
			earliest = m.Start
		}
	}
	for _, m := range models {
		if m.Start.IsZero() && (m.Kind == model.KindSeed || m.Kind == model.KindFull || m.Kind == model.KindView) {
			m.Start = earliest
		}
	}
}

// modelFiles lists *.sql files under root, sorted, so load order (and thus
// error order) is the same on every machine.
func modelFiles(root string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.EqualFold(filepath.Ext(path), ".sql") {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing model files in %s: %w", root, err)
	}
	slices.Sort(files)
	return files, nil
}

// loadOne parses one model file and, for kinds with a query, its SQL. SQL
// errors are reported at the file's line and column.
// loaded is loadOne's answer for one file.
type loaded struct {
	m   *model.Model
	q   *Query
	err error
}

// loader is what loading each file needs: the project folder, the model
// defaults, the parser (opened on first use) and the parse cache.
type loader struct {
	dir      string
	defaults model.Defaults
	parser   func() (*sqlparse.Parser, error)
	cache    *QueryCache
	// macros is the project's macro environment: the configuration's
	// variables and the @DEF library of macros/*.sql.
	macros *macro.Env
	// engine is the project's engine dialect (Options.Engine), which a
	// query in another dialect is rewritten for.
	engine string
}

// loadAll runs loadOne on every file, on as many goroutines as there are
// processors (parsing is CPU-bound and the parser is safe for concurrent
// use), and returns the answers in files' order, so that what LoadModels
// reports does not depend on the scheduling.
func (ld *loader) loadAll(ctx context.Context, files []string) []loaded {
	out := make([][]loaded, len(files))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(files)) {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < len(files); i = int(next.Add(1) - 1) {
				out[i] = ld.loadFile(ctx, files[i])
			}
		})
	}
	wg.Wait()
	return slices.Concat(out...)
}

func (ld *loader) loadOne(ctx context.Context, rel string, src []byte) (*model.Model, *Query, error) {
	m, err := model.ParseFile(rel, src, ld.defaults)
	if err != nil {
		return nil, nil, err
	}
	if err := rootSeedPath(m); err != nil {
		return nil, nil, err
	}
	if m.Query == "" {
		return m, nil, nil
	}
	// Macro functions, @DEF definitions and variables are expanded once,
	// here: the model keeps the expanded query (time variables, and the
	// built-ins that need them, are left for execution), so that its
	// fingerprint covers what the macros produce and executing a snapshot
	// needs no macro library. Lines are kept; positions are reported in
	// the file as written.
	written := *m
	env, err := modelMacros(m, ld.macros)
	if err != nil {
		return nil, nil, err
	}
	if err := refuseStatements(m); err != nil {
		return nil, nil, err
	}
	expanded, expMap, err := macro.Expand(m.Query, env, string(m.Dialect))
	if err != nil {
		return nil, nil, macroError(&written, macro.Mapper{}, err)
	}
	m.Query = expanded
	tmap, err := transpile(m, &written, expMap, ld.engine)
	if err != nil {
		return nil, nil, err
	}
	sqlText, mapper, err := macro.ForParse(m.Query)
	if err != nil {
		if me := (*macro.Error)(nil); errors.As(err, &me) {
			me.Offset = tmap.Original(me.Offset)
		}
		return nil, nil, macroError(&written, expMap, err)
	}
	q, err := ld.parse(ctx, sqlText)
	if err != nil {
		var se *sqlparse.SyntaxError
		if errors.As(err, &se) && se.Offset >= 0 {
			return nil, nil, &model.Error{Pos: written.PosOf(expMap.Original(tmap.Original(mapper.Original(se.Offset)))), Code: model.CodeSyntax,
				Msg: "SQL syntax error: " + se.Message, Err: err}
		}
		return nil, nil, &model.Error{Pos: m.QueryPos, Code: model.CodeSyntax, Msg: "SQL: " + err.Error(), Err: err}
	}
	// Keep reference offsets pointing into the model's own text (a copy:
	// the cache keeps the parser's offsets).
	out := &Query{Canonical: q.Canonical, Tables: slices.Clone(q.Tables), Occurrences: slices.Clone(q.Occurrences)}
	if macro.HasCalls(m.Query) {
		// A macro kept for execution (an @IF on the interval, @STAR)
		// chose one form of the query for parsing; the canonical form must
		// still change with any of its branches. The "ast:" prefix marks
		// it as not SQL: a change to such a model is judged breaking.
		out.Canonical = "ast:" + q.Canonical + "\n-- macros kept for execution: " + strings.Join(strings.Fields(m.Query), " ")
	}
	if !dialect.Engine(string(m.Dialect)) {
		out.Canonical = dialectCanonical(m, expanded)
	}
	for _, refs := range [][]sqlparse.TableRef{out.Tables, out.Occurrences} {
		for i := range refs {
			if refs[i].Offset >= 0 {
				refs[i].Offset = mapper.Original(refs[i].Offset)
			}
		}
	}
	return m, out, nil
}

// modelMacros is the macro environment of m's query: the project's, plus
// the @DEF statements written before the query, which it takes out of
// m.PreStatements (they define macros; they are not SQL to run). The other
// pre- and post-statements are expanded as the query is (time variables
// kept for execution).
func modelMacros(m *model.Model, env *macro.Env) (*macro.Env, error) {
	var pre []model.Statement
	for _, st := range m.PreStatements {
		if !macro.IsDef(st.SQL) {
			pre = append(pre, st)
			continue
		}
		next, err := env.WithDefs(st.Pos.File, st.Pos.Line, st.Pos.Col, st.SQL)
		if err != nil {
			var fe *macro.FileError
			if errors.As(err, &fe) {
				return nil, &model.Error{Pos: model.Pos{File: fe.File, Line: fe.Line, Col: fe.Col}, Code: model.CodeSyntax,
					Msg: strings.TrimPrefix(fe.Error(), fmt.Sprintf("%s:%d:%d: ", fe.File, fe.Line, fe.Col)), Err: err}
			}
			return nil, err
		}
		env = next
	}
	m.PreStatements = pre
	for _, sts := range [][]model.Statement{m.PreStatements, m.PostStatements, m.OnVirtualUpdate} {
		for i := range sts {
			out, _, err := macro.Expand(sts[i].SQL, env, string(m.Dialect))
			if err != nil {
				var me *macro.Error
				if errors.As(err, &me) {
					return nil, &model.Error{Pos: posIn(sts[i], me.Offset), Code: model.CodeSyntax, Msg: me.Msg, Err: err}
				}
				return nil, &model.Error{Pos: sts[i].Pos, Code: model.CodeSyntax, Msg: err.Error(), Err: err}
			}
			sts[i].SQL = out
		}
	}
	return env, nil
}

// refuseStatements refuses a model whose pre- or post-statements hold one
// whose effect lasts only for a database session (model.SessionScoped:
// SET, USE, CREATE TEMP ..., transaction control), naming its file:line
// and why. gapless runs the statements and the model's write on the
// engine's connection pool, a connection each (Trino keeps no session), so
// such a statement would not reach the write it is meant for: refusing it
// keeps the model from being built as if it had run. The statements are
// the ones left after @DEF (see modelMacros), macros expanded; one still
// opening with a macro call is judged again once rendered, at execution.
func refuseStatements(m *model.Model) error {
	for _, sts := range []struct {
		where string
		list  []model.Statement
	}{{"pre-statement", m.PreStatements}, {"post-statement", m.PostStatements}, {"on-virtual-update statement", m.OnVirtualUpdate}} {
		for _, st := range sts.list {
			if why := model.SessionScoped(st.SQL); why != "" {
				return &model.Error{Pos: st.Pos, Code: model.CodeSessionStatement,
					Msg: fmt.Sprintf("model %s: %s %q: %s; gapless runs each statement on its own pooled connection, "+
						"so its effect would not reach the model's query: write the setting into the query or the warehouse's "+
						"configuration, or use a persistent object instead of a temporary one", m.Name, sts.where, firstWords(st.SQL), why)}
			}
		}
	}
	return nil
}

// firstWords is the start of a statement, for a message.
func firstWords(sql string) string {
	f := strings.Fields(sql)
	if len(f) > 4 {
		f = append(f[:4], "…")
	}
	return strings.Join(f, " ")
}

// posIn is the file position of byte off of statement st.
func posIn(st model.Statement, off int) model.Pos {
	off = min(max(off, 0), len(st.SQL))
	before := st.SQL[:off]
	p := st.Pos
	if nl := strings.LastIndexByte(before, '\n'); nl >= 0 {
		p.Line += strings.Count(before, "\n")
		p.Col = off - nl
	} else {
		p.Col += off
	}
	return p
}

// macroError is a macro problem of the model as written (offsets mapped
// through expMap from the expanded query), at its file position.
func macroError(written *model.Model, expMap macro.Mapper, err error) error {
	var me *macro.Error
	if errors.As(err, &me) {
		return &model.Error{Pos: written.PosOf(expMap.Original(me.Offset)), Code: model.CodeSyntax, Msg: me.Msg, Err: err}
	}
	return &model.Error{Pos: written.QueryPos, Code: model.CodeSyntax, Msg: err.Error(), Err: err}
}

// parse is the cache's answer for src, or else the parser's, which the
// cache then learns. Failures are not cached: the next load reports them
// afresh.
func (ld *loader) parse(ctx context.Context, src string) (Query, error) {
	if q, ok := ld.cache.lookup(src); ok {
		return q, nil
	}
	p, err := ld.parser()
	if err != nil {
		return Query{}, err
	}
	sq, err := p.Parse(ctx, src)
	if err != nil {
		return Query{}, err
	}
	q := Query{Tables: sq.Tables, Occurrences: sq.Occurrences, Canonical: sq.Canonical}
	ld.cache.store(src, q)
	return q, nil
}

// addSource adds d to the project: its definition, and its stand-in model
// (see Project). A model or EXTERNAL table of the same name is an error
// naming both files.
func (pr *Project) addSource(d *source.Definition, defaults model.Defaults) error {
	if m, dup := pr.Models[d.Name]; dup {
		what := "model"
		if m.Kind == model.KindExternal {
			what = "EXTERNAL model"
		}
		return &model.Error{Pos: d.Pos, Code: model.CodeInvalid, Msg: fmt.Sprintf(
			"source %s (%s) has the name of the %s in %s: a table is either landed by a source or defined by a model; rename or remove one",
			d.Name, d.File, what, m.HeaderPos)}
	}
	m, err := standIn(d, defaults)
	if err != nil {
		return err
	}
	pr.Models[d.Name], pr.Sources[d.Name] = m, d
	return nil
}

// standIn is the EXTERNAL model a source stands in the graph as: parsed as
// an EXTERNAL model declaring the source's columns, with the project's model
// defaults (dialect, owner), so that nothing of the connector (how and from
// where it lands) is part of its fingerprint, and changing it rebuilds
// nothing. Its start is the source's, which models that read it inherit.
func standIn(d *source.Definition, defaults model.Defaults) (*model.Model, error) {
	m, err := model.ParseFile(d.File, []byte("MODEL (name "+d.Name+", kind EXTERNAL, columns (x INT));"), defaults)
	if err != nil {
		return nil, fmt.Errorf("source %s (%s): %w", d.Name, d.File, err)
	}
	m.Columns = slices.Clone(d.Columns)
	m.Source = true
	m.Path = d.File
	m.HeaderPos, m.KindPos, m.QueryPos = d.Pos, d.Pos, d.Pos
	if !d.Start.IsZero() {
		m.Start = d.Start
	}
	return m, nil
}

// resolve maps every table a model's query reads to a model of the project.
// A reference that names no model (and no EXTERNAL declaration) is an error
// at the reference's position, with a did-you-mean when a model name is
// close.
func (pr *Project) resolve() (map[string][]string, Errors) {
	names := make([]string, 0, len(pr.Models))
	for n := range pr.Models {
		names = append(names, n)
	}
	slices.Sort(names)
	edges := make(map[string][]string, len(pr.Models))
	var errs Errors
	for _, name := range names {
		edges[name] = nil
		m := pr.Models[name]
		q := pr.Queries[name]
		errs = append(errs, pr.signalEdges(m, edges)...)
		if q == nil {
			continue
		}
		for _, ref := range q.Tables {
			target := ref.Schema + "." + ref.Name
			if t, ok := pr.Models[target]; ok && ref.Schema != "" {
				if t.Source && len(t.Columns) == 0 {
					errs = append(errs, sourceWithoutColumns(m, ref, pr.Sources[target]))
					continue
				}
				if target != name {
					edges[name] = append(edges[name], target)
				} else if err := selfRead(m, ref); err != nil {
					errs = append(errs, err)
				}
				continue
			}
			errs = append(errs, pr.unknownRef(m, ref, names))
		}
	}
	slices.SortFunc(errs, func(a, b error) int { return cmp.Compare(a.Error(), b.Error()) })
	return edges, errs
}

// sourceWithoutColumns is the error of a model reading a source that
// declares no columns: until ingestion lands the table, nothing else says
// what the model reads.
func sourceWithoutColumns(m *model.Model, ref sqlparse.TableRef, d *source.Definition) error {
	pos := m.QueryPos
	if ref.Offset >= 0 {
		pos = m.PosOf(ref.Offset)
	}
	return &model.Error{Pos: pos, Code: model.CodeInvalid, Msg: fmt.Sprintf(
		"model %s reads source %s, which declares no columns: declare them in %s (columns: {name: TYPE, ...})", m.Name, d.Name, d.File)}
}

// selfRead checks a model that reads its own table: only an incremental
// model can (each run reads what earlier runs wrote), and it must declare
// its columns, since its table has to exist before its first query runs.
func selfRead(m *model.Model, ref sqlparse.TableRef) error {
	pos := m.QueryPos
	if ref.Offset >= 0 {
		pos = m.PosOf(ref.Offset)
	}
	switch {
	case m.Kind.IsIncremental() && m.Kind != model.KindIncrementalByTimeRange && m.Kind != model.KindIncrementalByUniqueKey:
		return &model.Error{Pos: pos, Code: model.CodeInvalid, Msg: fmt.Sprintf(
			"model %s reads itself, which gapless allows only INCREMENTAL_BY_TIME_RANGE and INCREMENTAL_BY_UNIQUE_KEY models so far (each %s batch rebuilds the table from its query and the table's rows)", m.Name, m.Kind)}
	case m.Kind != model.KindIncrementalByTimeRange && m.Kind != model.KindIncrementalByUniqueKey:
		return &model.Error{Pos: pos, Code: model.CodeInvalid, Msg: fmt.Sprintf(
			"model %s reads itself, which only an incremental model can (a %s model is rebuilt from its query alone)", m.Name, m.Kind)}
	case len(m.Columns) == 0:
		return &model.Error{Pos: pos, Code: model.CodeInvalid, Msg: fmt.Sprintf(
			"model %s reads itself: declare its columns (columns (name TYPE, ...)) so that its table exists before its first query runs", m.Name)}
	}
	return nil
}

func (pr *Project) unknownRef(m *model.Model, ref sqlparse.TableRef, names []string) error {
	pos := m.QueryPos
	if ref.Offset >= 0 {
		pos = m.PosOf(ref.Offset)
	}
	msg := fmt.Sprintf("model %s reads %s, which is neither a model, a source nor a declared EXTERNAL table", m.Name, ref)
	if ref.Schema == "" {
		msg = fmt.Sprintf("model %s reads %s without a schema; write schema.table (models, sources and EXTERNAL tables are schema-qualified)", m.Name, ref)
	}
	if guess, ok := suggest.Closest(strings.TrimPrefix(ref.String(), ref.Catalog+"."), names); ok {
		msg += fmt.Sprintf("; did you mean %s?", guess)
	}
	return &model.Error{Pos: pos, Code: model.CodeInvalid, Msg: msg}
}

// describeGraphError adds each model's file to a cycle report.
func (pr *Project) describeGraphError(err error) error {
	var ce *dag.CycleError
	if !errors.As(err, &ce) {
		return err
	}
	parts := make([]string, len(ce.Cycle))
	for i, n := range ce.Cycle {
		parts[i] = fmt.Sprintf("%s (%s)", n, pr.Models[n].HeaderPos.File)
	}
	first := pr.Models[ce.Cycle[0]]
	return Errors{&model.Error{Pos: first.HeaderPos, Code: model.CodeInvalid,
		Msg: "dependency cycle: " + strings.Join(parts, " -> "), Err: err}}
}

// seedHash hashes a SEED model's CSV file, so that editing the CSV changes
// the model's data hash and version.
func seedHash(dir string, m *model.Model) (string, error) {
	path := m.SeedPath
	if !filepath.IsAbs(path) {
		path = filepath.Join(dir, filepath.Dir(m.Path), path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", Errors{&model.Error{Pos: m.HeaderPos, Code: model.CodeInvalid,
			Msg: fmt.Sprintf("seed %s: cannot read %s: %v", m.Name, m.SeedPath, err), Err: err}}
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// snapshotRefs is occ as a snapshot keeps it (snapshot.Snapshot.Refs):
// never nil, so that a query that reads no table still says so and its
// execution needs no parse.
func snapshotRefs(occ []sqlparse.TableRef) []snapshot.TableRef {
	out := make([]snapshot.TableRef, len(occ))
	for i, o := range occ {
		out[i] = snapshot.TableRef{Catalog: o.Catalog, Schema: o.Schema, Name: o.Name, Offset: o.Offset}
	}
	return out
}
