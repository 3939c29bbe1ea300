package execute

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/gapless-dev/gapless/audit"
	"github.com/gapless-dev/gapless/cadence"
	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/model"
	"github.com/gapless-dev/gapless/model/suggest"
	"github.com/gapless-dev/gapless/project"
	"github.com/gapless-dev/gapless/snapshot"
	"github.com/gapless-dev/gapless/sqlparse"
	"github.com/gapless-dev/gapless/warehouse"
)

// CheckParams are what Check needs.
type CheckParams struct {
	// Engine describes the queries (warehouse.Engine.Describe): Check never
	// writes to it. At plan time it is a scratch engine of the warehouse's
	// dialect (see backend.OpenForPlanning); at apply, the warehouse.
	Engine warehouse.Engine
	Parser *sqlparse.Parser
	// ProjectDir is where SEED files are read from.
	ProjectDir string
	// Snapshots is every snapshot the environment will serve, in
	// topological order (plan.Plan.Snapshots).
	Snapshots []*snapshot.Snapshot
	// Check names the snapshots to check: those whose physical objects the
	// plan makes. The others are described only as far as a checked model
	// reads them.
	Check map[string]bool
	// Execution is the execution time macros see.
	Execution time.Time
}

// Check derives, in DAG order, the output columns of every model the
// checked ones depend on, and checks what can be known before anything is
// written:
//   - each checked model has a schedule (a start, its own, the project's or
//     inherited from what it reads);
//   - its query binds against its parents' columns (an unknown column is
//     reported at its first use in the model's file);
//   - declared columns are the ones the query produces;
//   - a time column is an output column of the query, of a DATE or
//     TIMESTAMP type, or text with a time_column format;
//   - a unique key names output columns.
//
// A model's columns come from its version's physical table when it exists
// (a reused version), from a SEED's CSV, from an EXTERNAL's or a
// self-reading model's declared columns, and otherwise from its query,
// described against empty stand-ins of its parents' derived columns
// (warehouse.Engine.Describe, which writes nothing). So a child is checked
// against parents that are not built yet, whatever their kind.
//
// It returns the derived columns by model and, when a check fails,
// project.Errors holding one *model.Error per problem, each naming the
// model's file, line and column; a model whose parent failed is not
// checked, the parent's error is reported once. Any other error (the
// engine's, a cancelled context) is returned as it is.
func Check(ctx context.Context, p CheckParams) (map[string][]warehouse.Column, error) {
	c := &checker{CheckParams: p, bySet: map[string]*snapshot.Snapshot{}, schemas: map[string][]warehouse.Column{}, failed: map[string]bool{}}
	var tables []warehouse.Table
	for _, s := range p.Snapshots {
		c.bySet[s.Name] = s
		if s.Model.Kind != model.KindExternal {
			tables = append(tables, PhysicalTable(s))
		}
	}
	// One question for every physical table, not one per model derived:
	// a catalog read costs about as much for one table as for a schema.
	found, err := p.Engine.TablesExist(ctx, tables)
	if err != nil {
		return nil, fmt.Errorf("checking the tables of %d models: %w", len(tables), err)
	}
	c.built = make(map[warehouse.Table]bool, len(tables))
	for i, t := range tables {
		c.built[t] = found[i]
	}
	if b, ok := p.Engine.(warehouse.BatchDescriber); ok {
		c.batch, c.described, c.rendered = b, map[string]warehouse.Described{}, map[string]string{}
	}
	// In passes: a pass checks every model whose parents' columns are
	// known and collects the queries it must describe (errPending); they
	// are described together, and the next pass goes on from there. The
	// models and errors are the same as checking one model at a time, in
	// the same order (errors are sorted by the model whose check found
	// them). Without a BatchDescriber there is one pass.
	var todo []int // the checked models not done, by index in Snapshots
	for i, s := range p.Snapshots {
		if p.Check[s.Name] {
			todo = append(todo, i)
		}
	}
	for {
		c.waiting = map[string]bool{}
		next := todo[:0]
		for _, i := range todo {
			s := p.Snapshots[i]
			c.at = i
			err := c.checkModel(ctx, s)
			if errors.Is(err, errPending) {
				next = append(next, i)
				continue
			}
			if err != nil {
				var me *model.Error
				if !errors.As(err, &me) {
					return nil, err // the engine or the state failed, not the project
				}
				c.addErr(me)
			}
		}
		todo = next
		if len(c.pending) == 0 {
			break
		}
		answers, err := c.batch.DescribeAll(ctx, c.pending)
		if err != nil {
			return nil, fmt.Errorf("describing the queries of %d models: %w", len(c.pending), err)
		}
		for i, q := range c.pending {
			c.described[describeKey(q)] = answers[i]
		}
		c.pending, c.pendingKeys = nil, nil
	}
	if err := c.checkAudits(ctx); err != nil {
		return nil, err
	}
	if len(c.errs) > 0 {
		order := make([]int, len(c.errs))
		for i := range order {
			order[i] = i
		}
		slices.SortStableFunc(order, func(a, b int) int { return c.errAt[a] - c.errAt[b] })
		sorted := make(project.Errors, len(order))
		for i, j := range order {
			sorted[i] = c.errs[j]
		}
		return c.schemas, sorted
	}
	return c.schemas, nil
}

type checker struct {
	CheckParams
	bySet   map[string]*snapshot.Snapshot
	schemas map[string][]warehouse.Column
	// failed marks models whose columns could not be derived; the error is
	// in errs once, and models that read them are skipped.
	failed map[string]bool
	errs   project.Errors
	// errAt is, for each of errs, the index in Snapshots of the checked
	// model whose check found it (at, when it was found).
	errAt []int
	at    int
	// built says which physical tables exist (read once, by Check).
	built map[warehouse.Table]bool
	// With a BatchDescriber: the answers of the queries described so far
	// (by describeKey), the queries the current pass waits for, and each
	// model's rendered query.
	batch       warehouse.BatchDescriber
	described   map[string]warehouse.Described
	pending     []warehouse.DescribeParams
	pendingKeys map[string]bool
	rendered    map[string]string
	// waiting marks, in the current pass, the models whose columns wait
	// for the next batch: a pass visits each model once, however many
	// read it.
	waiting map[string]bool
}

func (c *checker) addErr(me *model.Error) {
	c.errs = append(c.errs, me)
	c.errAt = append(c.errAt, c.at)
}

// errPending stops a model whose query (or a parent's) waits to be
// described in the next batch; the model is checked again after it.
var errPending = errors.New("waiting for a batch describe")

// describeKey identifies a describe request by everything its answer
// depends on: the query and each stand-in with its columns.
func describeKey(p warehouse.DescribeParams) string {
	var b strings.Builder
	b.WriteString(p.Query)
	for _, st := range p.StandIns {
		fmt.Fprintf(&b, "\x00%q.%q", st.Table.Schema, st.Table.Name)
		for _, col := range st.Columns {
			fmt.Fprintf(&b, "\x01%q %q", col.Name, col.Type)
		}
	}
	return b.String()
}

// describe answers p from the batch's answers, or queues it and returns
// errPending; without a BatchDescriber it asks the engine.
func (c *checker) describe(ctx context.Context, p warehouse.DescribeParams) ([]warehouse.Column, error) {
	if c.batch == nil {
		return c.Engine.Describe(ctx, p)
	}
	key := describeKey(p)
	if d, ok := c.described[key]; ok {
		return d.Columns, d.Err
	}
	if !c.pendingKeys[key] {
		if c.pendingKeys == nil {
			c.pendingKeys = map[string]bool{}
		}
		c.pendingKeys[key] = true
		c.pending = append(c.pending, p)
	}
	return nil, errPending
}

// errParentFailed stops a model whose parent's columns could not be
// derived; the parent's own error is reported instead.
var errParentFailed = errors.New("a parent failed")

func (c *checker) checkModel(ctx context.Context, s *snapshot.Snapshot) error {
	m := s.Model
	if m.Kind != model.KindExternal {
		if _, err := cadence.ForModel(m); err != nil {
			return scheduleError(m, err)
		}
	}
	cols, err := c.schema(ctx, s)
	if errors.Is(err, errParentFailed) {
		return nil
	}
	if errors.Is(err, errPending) {
		return err
	}
	if err != nil {
		return err
	}
	if err := checkLayout(c.Engine, m, cols); err != nil { // execute/physical.go
		return err
	}
	switch m.Kind {
	case model.KindSCDType2ByTime, model.KindSCDType2ByColumn, model.KindIncrementalByPartition, model.KindIncrementalUnmanaged:
		return CheckKind(m, cols) // execute/kinds.go
	case model.KindIncrementalByTimeRange:
		return checkTimeColumn(m, cols)
	case model.KindIncrementalByUniqueKey:
		for _, k := range m.UniqueKey {
			if _, ok := findColumn(cols, k); !ok {
				return &model.Error{Pos: m.KindPos, Code: model.CodeInvalid, Msg: fmt.Sprintf(
					"model %s: unique_key %s is not a column of its query (%s)%s", m.Name, k, columnNames(cols), didYouMean(k, cols))}
			}
		}
	}
	return nil
}

// schema derives s's columns once (see Check). A project error of a model
// that is not checked is recorded in c.errs here, and its reader gets
// errParentFailed; a checked model's own error is returned, for Check to
// record. Either way s is marked failed, and later readers get
// errParentFailed.
func (c *checker) schema(ctx context.Context, s *snapshot.Snapshot) ([]warehouse.Column, error) {
	if cols, ok := c.schemas[s.Name]; ok {
		return cols, nil
	}
	if c.failed[s.Name] {
		return nil, errParentFailed
	}
	if c.waiting[s.Name] {
		return nil, errPending
	}
	cols, err := c.derive(ctx, s)
	if errors.Is(err, errPending) {
		c.waiting[s.Name] = true
		return nil, err // derived in a later pass
	}
	if err != nil {
		var me *model.Error
		if errors.As(err, &me) && !c.Check[s.Name] {
			// An unchecked parent: report its problem here, once; the
			// checked model reading it is skipped.
			c.addErr(me)
			c.failed[s.Name] = true
			return nil, errParentFailed
		}
		if errors.As(err, &me) {
			c.failed[s.Name] = true
		}
		return nil, err
	}
	c.schemas[s.Name] = cols
	return cols, nil
}

func (c *checker) derive(ctx context.Context, s *snapshot.Snapshot) ([]warehouse.Column, error) {
	m := s.Model
	if m.Kind == model.KindExternal {
		return declared(m), nil
	}
	phys := PhysicalTable(s)
	if c.built[phys] {
		cols, err := c.Engine.Columns(ctx, phys)
		if err != nil {
			return nil, fmt.Errorf("model %s: reading its table's columns: %w", s.Name, err)
		}
		return cols, nil
	}
	if m.Kind == model.KindSeed {
		cols, _, err := ReadSeed(seedFile(c.ProjectDir, m), m.Columns)
		if err != nil {
			return nil, &model.Error{Pos: m.KindPos, Code: model.CodeInvalid, Msg: fmt.Sprintf("seed %s: %v", m.Name, err), Err: err}
		}
		return cols, nil
	}
	spec, err := cadence.ForModel(m)
	if err != nil {
		return nil, scheduleError(m, err)
	}
	set := make(map[string]*snapshot.Snapshot, len(s.Parents)+1)
	set[s.Name] = s
	var standIns []warehouse.CreateTableParams
	for _, name := range s.Parents {
		parent, ok := c.bySet[name]
		if !ok {
			return nil, fmt.Errorf("model %s reads %s, which is not in the plan's snapshots", s.Name, name)
		}
		set[name] = parent
		pcols, err := c.schema(ctx, parent)
		if err != nil {
			return nil, err
		}
		table := PhysicalTable(parent)
		if parent.Model.Kind == model.KindExternal {
			table = externalTable(parent.Model)
		}
		standIns = append(standIns, warehouse.CreateTableParams{Table: table, Columns: pcols})
	}
	madeFromDeclared := m.Kind.IsIncremental() && len(m.Columns) > 0
	if madeFromDeclared {
		// A model that reads itself finds its table made from its declared
		// columns, as Prepare makes it.
		standIns = append(standIns, warehouse.CreateTableParams{Table: phys, Columns: declared(m)})
	}
	sql, ok := c.rendered[s.Name]
	if !ok {
		t, err := TemplateOf(ctx, c.Parser, c.Engine, s, set)
		if err != nil {
			return nil, &model.Error{Pos: m.QueryPos, Code: model.CodeSyntax, Msg: err.Error(), Err: err}
		}
		first := spec.Unit.Floor(spec.Start)
		sql, err = t.Render(interval.NewRange(first, spec.Unit.Add(first, 1)), c.Execution)
		if err != nil {
			return nil, &model.Error{Pos: m.QueryPos, Code: model.CodeInvalid, Msg: fmt.Sprintf("model %s: %v", m.Name, err), Err: err}
		}
		if c.rendered != nil {
			c.rendered[s.Name] = sql
		}
	}
	cols, err := c.describe(ctx, warehouse.DescribeParams{Query: sql, StandIns: standIns})
	if errors.Is(err, errPending) {
		return nil, err
	}
	if err != nil {
		// A statement the engine refused is the query's problem; anything
		// else (no connection, a cancelled context) is not the project's.
		var we *warehouse.Error
		statementFailed := errors.As(err, &we) && we.SQL != "" &&
			!errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
		if !statementFailed {
			return nil, fmt.Errorf("model %s: describing its query: %w", s.Name, err)
		}
		return nil, queryError(m, we)
	}
	if madeFromDeclared {
		if err := declaredMatch(m, cols); err != nil {
			return nil, err
		}
		cols = declared(m)
	}
	return withKindColumns(m, cols) // execute/kinds.go
}

// externalTable is the table an EXTERNAL model declares: its own name,
// which queries read as written.
func externalTable(m *model.Model) warehouse.Table {
	return warehouse.Table{Schema: m.Schema(), Name: m.Table()}
}

func declared(m *model.Model) []warehouse.Column {
	out := make([]warehouse.Column, len(m.Columns))
	for i, c := range m.Columns {
		out[i] = warehouse.Column{Name: c.Name, Type: c.Type}
	}
	return out
}

// scheduleError is a model without a usable schedule, at its header
// (cadence.ForModel's error is one already).
func scheduleError(m *model.Model, err error) *model.Error {
	var me *model.Error
	if errors.As(err, &me) {
		return me
	}
	return &model.Error{Pos: m.HeaderPos, Code: model.CodeInvalid, Err: err, Msg: err.Error()}
}

// timeType classifies a column type as an engine spells it (DuckDB's
// upper-case names or PostgreSQL's format_type): "time" for DATE and the
// TIMESTAMP family, "text" for string types, "" otherwise.
func timeType(typ string) string {
	t := strings.ToLower(strings.Join(strings.Fields(typ), " "))
	switch {
	case t == "date", strings.HasPrefix(t, "timestamp"), t == "datetime":
		return "time"
	case t == "text", t == "string", t == "name", t == `"char"`, t == "bpchar",
		strings.HasPrefix(t, "varchar"), strings.HasPrefix(t, "character"), strings.HasPrefix(t, "char"):
		return "text"
	}
	return ""
}

// checkTimeColumn checks the time column of m against its query's columns.
func checkTimeColumn(m *model.Model, cols []warehouse.Column) error {
	col, ok := findColumn(cols, m.TimeColumn)
	if !ok {
		return &model.Error{Pos: m.TimeColumnPos, Code: model.CodeInvalid, Msg: fmt.Sprintf(
			"model %s: time_column %s is not a column of its query (%s)%s",
			m.Name, m.TimeColumn, columnNames(cols), didYouMean(m.TimeColumn, cols))}
	}
	switch timeType(col.Type) {
	case "time":
		return nil
	case "text":
		if m.TimeColumnFormat != "" {
			return nil
		}
		return &model.Error{Pos: m.TimeColumnPos, Code: model.CodeInvalid, Msg: fmt.Sprintf(
			"model %s: time column %s is %s, text that gapless cannot compare with an interval's bounds as time: "+
				"give its format as in SQLMesh, time_column (%s, '%%Y-%%m-%%d'), or make it a DATE or TIMESTAMP in the query",
			m.Name, m.TimeColumn, col.Type, m.TimeColumn)}
	}
	return &model.Error{Pos: m.TimeColumnPos, Code: model.CodeInvalid, Msg: fmt.Sprintf(
		"model %s: time column %s is %s; it must be a DATE or TIMESTAMP, or text with its format (time_column (%s, '%%Y-%%m-%%d'))",
		m.Name, m.TimeColumn, col.Type, m.TimeColumn)}
}

// declaredMatch compares the columns a query produces with the model's
// declared ones, by name as the engines compare them (ASCII case folded).
func declaredMatch(m *model.Model, cols []warehouse.Column) error {
	var missing, extra []string
	for _, d := range m.Columns {
		if _, ok := findColumn(cols, d.Name); !ok {
			missing = append(missing, d.Name)
		}
	}
	for _, c := range cols {
		if !slices.ContainsFunc(m.Columns, func(d model.Column) bool { return strings.EqualFold(d.Name, c.Name) }) {
			extra = append(extra, c.Name)
		}
	}
	if len(missing) == 0 && len(extra) == 0 {
		return nil
	}
	var parts []string
	if len(missing) > 0 {
		parts = append(parts, "declares "+strings.Join(missing, ", ")+", which the query does not produce")
	}
	if len(extra) > 0 {
		parts = append(parts, "does not declare "+strings.Join(extra, ", ")+", which the query produces")
	}
	return &model.Error{Pos: m.HeaderPos, Code: model.CodeInvalid, Err: ErrColumnsMismatch, Msg: fmt.Sprintf(
		"model %s: columns (...) %s; make them agree", m.Name, strings.Join(parts, " and "))}
}

func findColumn(cols []warehouse.Column, name string) (warehouse.Column, bool) {
	for _, c := range cols {
		if strings.EqualFold(c.Name, name) {
			return c, true
		}
	}
	return warehouse.Column{}, false
}

func columnNames(cols []warehouse.Column) string {
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = c.Name
	}
	return "its columns: " + strings.Join(names, ", ")
}

func didYouMean(name string, cols []warehouse.Column) string {
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = c.Name
	}
	if guess, ok := suggest.Closest(name, names); ok {
		return "; did you mean " + guess + "?"
	}
	return ""
}

// unknownColumnPatterns find the column an engine could not bind: DuckDB's
// binder and PostgreSQL's "column ... does not exist".
var unknownColumnPatterns = []*regexp.Regexp{
	regexp.MustCompile(`(?i)referenced column "([^"]+)" not found`),
	regexp.MustCompile(`(?i)does not have a column named "([^"]+)"`),
	regexp.MustCompile(`(?i)column "([^"]+)" does not exist`),
	regexp.MustCompile(`(?i)column ([A-Za-z_][A-Za-z0-9_$]*(?:\.[A-Za-z_][A-Za-z0-9_$]*)*) does not exist`),
}

// candidatesRe tidies DuckDB's "Candidate bindings: : ..." (an empty
// table prefix) into "Candidate bindings: ...".
var candidatesRe = regexp.MustCompile(`(:)(?:\s*:)+\s*`)

// queryError turns a query the engine could not describe into an error in
// the model's file: an unknown column at its first use in the query, with
// the engine's hint (its candidates); anything else at the query's start,
// with the engine's message (not the rendered SQL, which is not what the
// user wrote).
func queryError(m *model.Model, we *warehouse.Error) *model.Error {
	msg := ""
	if we.Err != nil {
		msg = we.Err.Error() // the engine's own message, without the SQL
	}
	for _, re := range unknownColumnPatterns {
		sub := re.FindStringSubmatch(msg)
		if sub == nil {
			continue
		}
		col := sub[1]
		name := col
		if i := strings.LastIndexByte(col, '.'); i >= 0 {
			name = col[i+1:]
		}
		pos := m.QueryPos
		if off := findIdent(m.Query, name); off >= 0 {
			pos = m.PosOf(off)
		}
		text := fmt.Sprintf("model %s: unknown column %s in its query", m.Name, name)
		if hint := candidatesRe.ReplaceAllString(engineHint(msg), "$1 "); hint != "" {
			text += " (" + hint + ")"
		}
		return &model.Error{Pos: pos, Code: model.CodeInvalid, Msg: text, Err: we}
	}
	return &model.Error{Pos: m.QueryPos, Code: model.CodeInvalid, Err: we,
		Msg: fmt.Sprintf("model %s: its query does not bind: %s", m.Name, firstLine(msg))}
}

// engineHint is the engine's suggestion, if it gave one: DuckDB's
// "Candidate bindings: ..." line or PostgreSQL's HINT (which the
// PostgreSQL engine's Describe puts in its message).
func engineHint(msg string) string {
	for _, line := range strings.Split(msg, "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(strings.ToLower(line), "candidate bindings:") {
			return line
		}
		if _, hint, ok := strings.Cut(line, "HINT: "); ok {
			return strings.TrimSuffix(strings.TrimSpace(hint), ")")
		}
	}
	return ""
}

// firstLine is the first paragraph of msg, on one line: the engine's
// sentence, without the SQL excerpt engines append after a blank line.
func firstLine(msg string) string {
	para, _, _ := strings.Cut(strings.TrimSpace(msg), "\n\n")
	var keep []string
	for _, l := range strings.Split(para, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "LINE ") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, " ")
}

// findIdent returns the offset in q of the first use of name as an
// identifier (bare, case-insensitive, or double-quoted, exact), outside
// strings and comments, or -1.
func findIdent(q, name string) int {
	isWord := func(c byte) bool {
		return c == '_' || c == '$' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
	}
	for i := 0; i < len(q); {
		switch {
		case strings.HasPrefix(q[i:], "--"):
			nl := strings.IndexByte(q[i:], '\n')
			if nl < 0 {
				return -1
			}
			i += nl + 1
		case strings.HasPrefix(q[i:], "/*"):
			end := strings.Index(q[i+2:], "*/")
			if end < 0 {
				return -1
			}
			i += end + 4
		case q[i] == '\'':
			j := i + 1
			for j < len(q) && (q[j] != '\'' || (j+1 < len(q) && q[j+1] == '\'')) {
				if q[j] == '\'' {
					j++
				}
				j++
			}
			i = j + 1
		case q[i] == '"':
			end := strings.IndexByte(q[i+1:], '"')
			if end < 0 {
				return -1
			}
			if q[i+1:i+1+end] == name {
				return i
			}
			i += end + 2
		case isWord(q[i]):
			j := i
			for j < len(q) && isWord(q[j]) {
				j++
			}
			if strings.EqualFold(q[i:j], name) && (i == 0 || q[i-1] != '@') {
				return i
			}
			i = j
		default:
			i++
		}
	}
	return -1
}

// checkAudits resolves the audits of every checked model and parses their
// queries, adding an *model.Error for each problem (an unknown audit, a
// missing or unknown argument, a query that does not parse), so a plan
// fails before it writes anything. The audits/ folder is read only when a
// checked model calls an audit.
func (c *checker) checkAudits(ctx context.Context) error {
	var lib *audit.Library
	for i, s := range c.Snapshots {
		if !c.Check[s.Name] || len(s.Model.Audits) == 0 {
			continue
		}
		c.at = i
		if lib == nil {
			var err error
			if lib, err = audit.LoadDir(c.ProjectDir); err != nil {
				var me *model.Error
				if !errors.As(err, &me) {
					return err
				}
				c.addErr(me)
				return nil
			}
		}
		bound, err := audit.Bind(s.Model, lib)
		if err != nil {
			var me *model.Error
			if !errors.As(err, &me) {
				return err
			}
			c.addErr(me)
			continue
		}
		if c.Parser == nil {
			continue
		}
		for _, b := range bound {
			if err := b.CheckParse(ctx, c.Parser); err != nil {
				var me *model.Error
				if !errors.As(err, &me) {
					return err
				}
				c.addErr(me)
			}
		}
	}
	return nil
}
