package model

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gapless-dev/gapless/cron"
	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/model/suggest"
)

// Defaults are model settings from the project configuration (the
// model_defaults section of gapless.yaml). Each one applies only where a model
// file is silent; a zero field means "no project default".
type Defaults struct {
	Dialect Dialect   // zero: DefaultDialect
	Cron    string    // zero: DefaultCron
	Start   time.Time // zero: no start
	Owner   string
	// Audits are called by every model, before the model's own (SQLMesh's
	// model_defaults.audits).
	Audits []AuditRef
}

// Built-in defaults, used when neither the model file nor the project sets a
// value. DefaultKind is SQLMesh's default too.
const (
	DefaultCron    = "@daily"
	DefaultDialect = DialectDuckDB
	DefaultKind    = KindView
)

// MaxIdentBytes is the longest identifier, in bytes, gapless uses: PostgreSQL's
// default max_identifier_length (NAMEDATALEN-1). PostgreSQL silently
// truncates longer names, so two of them could collide; gapless keeps every
// name within it on every engine, so that DuckDB and PostgreSQL deployments
// use the same names. The schema and table parts of a model name are served
// as is (users query them), so each must fit; names gapless derives from them
// (physical schemas and tables, environment schemas) are shortened with a
// hash instead (see snapshot.FitIdent).
const MaxIdentBytes = 63

// MaxBatchConcurrency bounds batch_concurrency: each concurrent batch holds a
// warehouse connection and its working memory.
const MaxBatchConcurrency = 64

// MaxCount bounds lookback, batch_size and batch_concurrency. Real values are small; the bound
// keeps interval arithmetic built on them far from integer overflow.
const MaxCount = 1_000_000

// ParseFile parses one model file: optional comments, a MODEL ( ... ); header
// in SQLMesh's syntax, then the query (the rest of the file, trimmed, with one
// trailing ';' removed).
//
// path is used for positions in errors and is stored in Model.Path; src is
// the file's content. defaults fill in what the header does not say.
//
// On success the returned Model satisfies the invariants documented on Model,
// and values are normalised so that equal meanings give equal Models:
//   - Name, kind names and attribute names are case-insensitive; Name is
//     stored in lower case, and each of its parts is a plain identifier
//     ([A-Za-z_][A-Za-z0-9_]*, quoting allowed) of at most MaxIdentBytes
//     bytes, with no "__" in the schema.
//   - Column identifiers (time_column, unique_key, grain, columns) are
//     folded to lower case when bare and kept exactly when double-quoted, so
//     SQL generated from them should always quote them.
//   - An empty list (tags [], grain ()) is nil, the same as none.
//   - Start and End are UTC; the kind defaults to VIEW (as in SQLMesh), the
//     cron to the project's or DefaultCron, the dialect to the project's or
//     DefaultDialect, and the interval unit to the cron's.
//   - lookback, batch_size, batch_concurrency, forward_only, time_column,
//     unique_key and path are properties of the kind, written inside its
//     parentheses.
//
// On failure the error is an *Error locating the first problem found; ParseFile
// never panics, whatever src holds.
func ParseFile(path string, src []byte, defaults Defaults) (*Model, error) {
	p := &parser{
		lx:   newLexer(path, src),
		src:  src,
		seen: map[string]token{},
		m:    &Model{Path: path, Enabled: true},
	}
	if err := p.header(); err != nil {
		return nil, err
	}
	if err := p.finish(defaults); err != nil {
		return nil, err
	}
	return p.m, nil
}

// parser is a recursive-descent parser over the header's tokens, with one
// token of lookahead in tok.
type parser struct {
	lx  *lexer
	src []byte
	tok token
	m   *Model

	// modelTok is the MODEL keyword; errors about the header as a whole
	// point at it.
	modelTok token
	// seen maps each attribute name (lower case) to its name token, to catch
	// duplicates and to point later checks at the attribute.
	seen map[string]token
	// valueTok maps an attribute name to the first token of its value.
	valueTok map[string]token
	kindTok  token
	// timeFormatTok is the format of time_column, when one is written.
	timeFormatTok token
	// semiEnd is the offset just past the ';' that ends the header.
	semiEnd int
	// prevEnd is the end offset of the token before tok: everything up to
	// it has been consumed.
	prevEnd int
}

func (p *parser) advance() error {
	t, err := p.lx.next()
	if err != nil {
		return err
	}
	p.prevEnd = p.tok.end
	p.tok = t
	return nil
}

func (p *parser) pos(t token) Pos { return p.lx.pos(t.off) }

func (p *parser) isPunct(s string) bool {
	return p.tok.kind == tokPunct && p.tok.val == s
}

func (p *parser) isWord(w string) bool {
	return p.tok.kind == tokIdent && strings.EqualFold(p.tok.val, w)
}

// unterminated is the error for a header that runs out (or into the query)
// before its closing ')'. It points at the MODEL keyword, where the reader
// must start looking.
func (p *parser) unterminated() error {
	return errorf(p.pos(p.modelTok), CodeUnterminated,
		"unterminated MODEL header: missing ')' to close MODEL (")
}

// unexpected reports the current token where something else was wanted. At
// end of file the header as a whole is unterminated.
func (p *parser) unexpected(want string) error {
	if p.tok.kind == tokEOF {
		return p.unterminated()
	}
	return errorf(p.pos(p.tok), CodeSyntax, "expected %s, found %s", want, p.tok.describe(p.src))
}

// header parses everything up to and including the ';' after MODEL ( ... ),
// then takes the rest of the file as the query.
func (p *parser) header() error {
	if err := p.advance(); err != nil {
		return err
	}
	if !p.isWord("MODEL") {
		if p.tok.kind == tokEOF {
			return errorf(p.pos(p.tok), CodeSyntax, "empty model file: expected a MODEL (...) header")
		}
		return errorf(p.pos(p.tok), CodeSyntax,
			"expected a MODEL (...) header at the start of the file, found %s", p.tok.describe(p.src))
	}
	p.modelTok = p.tok
	p.m.HeaderPos = p.pos(p.tok)
	if err := p.advance(); err != nil {
		return err
	}
	if !p.isPunct("(") {
		return p.unexpected("'(' after MODEL")
	}
	if err := p.advance(); err != nil {
		return err
	}
	if err := p.attributes(); err != nil {
		return err
	}
	closing := p.tok // the ')' of MODEL (
	if err := p.advance(); err != nil {
		return err
	}
	// SQLMesh accepts a header without its ';': the body then starts
	// right after the ')'.
	p.semiEnd = closing.end
	if p.isPunct(";") {
		p.semiEnd = p.tok.end
	}
	return p.takeBody()
}

// queryStarters are words that begin a SQL statement. Meeting one where an
// attribute should continue means the header's ')' is missing.
var queryStarters = []string{"SELECT", "WITH", "FROM", "VALUES", "INSERT", "CREATE", "TABLE"}

// attributes parses "attr value, attr value, ..." up to the closing ')' of
// the header, leaving p.tok on that ')'. A trailing comma is allowed.
func (p *parser) attributes() error {
	p.valueTok = map[string]token{}
	for {
		if p.isPunct(")") {
			return nil
		}
		name, err := p.attribute()
		if err != nil {
			return err
		}
		switch {
		case p.isPunct(","):
			if err := p.advance(); err != nil {
				return err
			}
		case p.isPunct(")"):
			return nil
		default:
			return p.afterValue(name)
		}
	}
}

// afterValue explains a token that follows an attribute's value but is
// neither ',' nor ')'.
func (p *parser) afterValue(attr string) error {
	startsQuery := p.tok.kind == tokIdent && containsFold(queryStarters, p.tok.val)
	if p.tok.kind == tokEOF || p.isPunct(";") || startsQuery {
		return p.unterminated()
	}
	if p.tok.kind == tokIdent && containsFold(attributeNames, p.tok.val) {
		return errorf(p.pos(p.tok), CodeSyntax, "missing ',' before attribute %s", strings.ToLower(p.tok.val))
	}
	return errorf(p.pos(p.tok), CodeSyntax,
		"unexpected %s after the value of %s; expected ',' or ')'", p.tok.describe(p.src), attr)
}

func containsFold(list []string, s string) bool {
	for _, x := range list {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}

// attributeNames are the header attributes gapless supports, in the order
// they are listed in messages.
var attributeNames = []string{
	"name", "kind", "cron", "interval_unit", "start", "end", "owner", "description",
	"tags", "grain", "allow_partials", "enabled", "dialect", "columns", "audits",
	"partitioned_by", "clustered_by", "column_descriptions", "physical_properties",
	"table_format", "storage_format",
}

// kindPropertyNames are kind properties; written at the top level they get a
// message saying where they belong.
var kindPropertyNames = []string{"time_column", "lookback", "batch_size", "batch_concurrency", "forward_only", "unique_key", "path"}

// sqlmeshOnlyAttributes are SQLMesh header attributes that gapless does not
// support. Naming them as such is kinder than "unknown attribute".
// The others are warned about or refused with a reason (attributes.go).
var sqlmeshOnlyAttributes = []string{"table_properties"}

// attribute parses one "name value" pair and returns the attribute's
// lower-case name.
func (p *parser) attribute() (string, error) {
	nameTok := p.tok
	if nameTok.kind != tokIdent {
		return "", p.unexpected("an attribute name")
	}
	name := strings.ToLower(nameTok.val)
	if done, err := p.sqlmeshOnly(nameTok, name); done {
		return name, err
	}
	switch {
	case containsFold(attributeNames, name), containsFold(honouredAttributes, name):
	case containsFold(kindPropertyNames, name):
		return "", errorf(p.pos(nameTok), CodeUnknownAttribute,
			"%s is a property of the kind, not of the model: write it inside kind %s ( ... )",
			name, kindsForProperty(name)[0])
	case containsFold(sqlmeshOnlyAttributes, name):
		return "", errorf(p.pos(nameTok), CodeUnknownAttribute,
			"attribute %s is a SQLMesh attribute that gapless does not support", name)
	default:
		if s, ok := suggest.Closest(name, attributeNames); ok {
			return "", errorf(p.pos(nameTok), CodeUnknownAttribute,
				"unknown attribute %s: did you mean %s?", nameTok.val, s)
		}
		return "", errorf(p.pos(nameTok), CodeUnknownAttribute,
			"unknown attribute %s (attributes: %s)", nameTok.val, strings.Join(attributeNames, ", "))
	}
	if first, dup := p.seen[name]; dup {
		return "", errorf(p.pos(nameTok), CodeDuplicateAttribute,
			"duplicate attribute %s (first set on line %d)", name, p.pos(first).Line)
	}
	p.seen[name] = nameTok
	if err := p.advance(); err != nil {
		return "", err
	}
	p.valueTok[name] = p.tok
	if p.tok.kind == tokEOF {
		return "", p.unterminated()
	}
	if p.isPunct(",") || p.isPunct(")") {
		return "", errorf(p.pos(p.tok), CodeSyntax, "attribute %s has no value", name)
	}
	return name, p.attributeValue(name)
}

// attributeValue parses the value of a supported attribute into p.m.
func (p *parser) attributeValue(name string) error {
	m := p.m
	var err error
	switch name {
	case "name":
		return p.modelName()
	case "kind":
		return p.kind()
	case "cron":
		var t token
		if t, err = p.stringValue(name); err == nil {
			m.Cron = strings.TrimSpace(t.val)
		}
	case "interval_unit":
		var t token
		if t, err = p.wordValue(name); err != nil {
			return err
		}
		u, perr := interval.ParseUnit(t.val)
		if perr != nil {
			e := wrapErr(p.pos(t), CodeBadValue, perr, "bad interval_unit %s", string(p.src[t.off:t.end]))
			if hint, ok := suggest.Closest(t.val, unitNames()); ok {
				e.Msg += "; did you mean " + hint + "?"
			}
			return e
		}
		m.IntervalUnit, m.IntervalUnitExplicit = u, true
	case "start":
		m.Start, err = p.timeValue(name)
	case "end":
		m.End, err = p.timeValue(name)
	case "owner":
		var t token
		if t, err = p.wordValue(name); err == nil {
			m.Owner = t.val
		}
	case "description":
		var t token
		if t, err = p.stringValue(name); err == nil {
			m.Description = t.val
		}
	case "tags":
		m.Tags, err = p.list(name, p.tag)
	case "grain":
		m.Grain, err = p.list(name, p.identifier)
	case "allow_partials":
		m.AllowPartials, err = p.boolValue(name)
	case "enabled":
		m.Enabled, err = p.boolValue(name)
	case "dialect":
		var t token
		if t, err = p.wordValue(name); err != nil {
			return err
		}
		d, derr := ParseDialect(t.val)
		if derr != nil {
			return wrapErr(p.pos(t), CodeBadValue, derr, "bad dialect")
		}
		m.Dialect = d
	case "columns":
		m.Columns, err = p.columns()
	case "audits":
		m.Audits, err = p.auditRefs()
	case "cron_tz", "signals", "stamp", "blueprints":
		err = p.sqlmeshValue(name)
	case "partitioned_by", "clustered_by", "column_descriptions", "physical_properties", "table_format", "storage_format":
		_, err = p.physicalAttribute(name)
	}
	return err
}

// stringValue consumes a single-quoted string, or a double-quoted one as
// SQLMesh also accepts in a header (description "...", cron "@daily").
func (p *parser) stringValue(attr string) (token, error) {
	t := p.tok
	if t.kind != tokString && t.kind != tokQuoted {
		return t, p.unexpected("a quoted string for " + attr)
	}
	return t, p.advance()
}

// wordValue consumes a quoted string or a bare word: interval_unit 'day' and
// interval_unit day are the same.
func (p *parser) wordValue(attr string) (token, error) {
	t := p.tok
	if t.kind != tokString && t.kind != tokIdent && t.kind != tokQuoted {
		return t, p.unexpected("a word or quoted string for " + attr)
	}
	return t, p.advance()
}

func (p *parser) timeValue(attr string) (time.Time, error) {
	t, err := p.stringValue(attr)
	if err != nil {
		return time.Time{}, err
	}
	v, err := ParseTime(t.val)
	if err != nil {
		return time.Time{}, &Error{Pos: p.pos(t), Code: CodeBadValue, Err: err,
			Msg: "bad " + attr + " " + string(p.src[t.off:t.end]) + ": " + timeProblem(err)}
	}
	return v, nil
}

// boolValue consumes true or false (bare or quoted, any case).
func (p *parser) boolValue(attr string) (bool, error) {
	t := p.tok
	if t.kind == tokIdent || t.kind == tokString || t.kind == tokNumber {
		switch strings.ToLower(t.val) {
		case "true":
			return true, p.advance()
		case "false":
			return false, p.advance()
		}
		return false, errorf(p.pos(t), CodeBadValue, "bad boolean for %s: %s; want true or false",
			attr, string(p.src[t.off:t.end]))
	}
	return false, p.unexpected("true or false for " + attr)
}

// intValue consumes a whole number in [lo, MaxCount].
func (p *parser) intValue(attr string, lo int) (int, error) {
	t := p.tok
	if t.kind != tokNumber && t.kind != tokIdent && t.kind != tokString {
		return 0, p.unexpected("a whole number for " + attr)
	}
	n, err := strconv.Atoi(t.val)
	if err != nil || n < lo || n > MaxCount {
		return 0, errorf(p.pos(t), CodeBadValue, "bad integer for %s: %s; want a whole number from %d to %d",
			attr, string(p.src[t.off:t.end]), lo, MaxCount)
	}
	return n, p.advance()
}

// identifier consumes a column identifier. Bare identifiers are folded to
// lower case (as both supported dialects fold or ignore their case); quoted
// ones keep their exact text, without the quotes. Code generating SQL from
// them should always quote.
func (p *parser) identifier(what string) (string, error) {
	t := p.tok
	switch t.kind {
	case tokIdent:
		return strings.ToLower(t.val), p.advance()
	case tokQuoted:
		if t.val == "" {
			return "", errorf(p.pos(t), CodeBadValue, "empty quoted identifier in %s", what)
		}
		return t.val, p.advance()
	}
	return "", p.unexpected("a column name in " + what)
}

// tag consumes one tag: a bare word or a string, kept as written.
func (p *parser) tag(what string) (string, error) {
	t := p.tok
	if t.kind != tokIdent && t.kind != tokString && t.kind != tokQuoted {
		return "", p.unexpected("a tag in " + what)
	}
	if strings.TrimSpace(t.val) == "" {
		return "", errorf(p.pos(t), CodeBadValue, "empty tag in %s", what)
	}
	return t.val, p.advance()
}

// list parses "[a, b]", "(a, b)" or a single item. Empty lists and a
// trailing comma are allowed; an empty list is returned as nil, so that
// "tags []" and no tags at all make the same Model.
func (p *parser) list(what string, item func(string) (string, error)) ([]string, error) {
	var closer string
	switch {
	case p.isPunct("("):
		closer = ")"
	case p.isPunct("["):
		closer = "]"
	default:
		v, err := item(what)
		if err != nil {
			return nil, err
		}
		return []string{v}, nil
	}
	if err := p.advance(); err != nil {
		return nil, err
	}
	var out []string
	for !p.isPunct(closer) {
		v, err := item(what)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
		if p.isPunct(",") {
			if err := p.advance(); err != nil {
				return nil, err
			}
			continue
		}
		if !p.isPunct(closer) {
			return nil, p.unexpected("',' or '" + closer + "' in " + what)
		}
	}
	return out, p.advance()
}

// modelName parses schema.table: two identifiers (bare or double-quoted)
// joined by a dot, or the same inside a single-quoted string. Both parts must
// be plain identifiers so that the names gapless derives from them (views,
// physical tables, environment schemas) need no escaping; each part must fit
// in MaxIdentBytes, since views are served under the model's own name and a
// longer one would be truncated (PostgreSQL) or differ between engines; the
// schema may not contain "__", which separates a schema from an environment
// name in "schema__env".
func (p *parser) modelName() error {
	first := p.tok
	var parts []string
	if first.kind == tokString {
		parts = strings.Split(first.val, ".")
		if err := p.advance(); err != nil {
			return err
		}
	} else {
		for {
			if p.tok.kind != tokIdent && p.tok.kind != tokQuoted {
				return p.unexpected("a model name schema.table")
			}
			parts = append(parts, p.tok.val)
			if err := p.advance(); err != nil {
				return err
			}
			if !p.isPunct(".") {
				break
			}
			if err := p.advance(); err != nil {
				return err
			}
		}
	}
	written := strings.TrimSpace(string(p.src[first.off:p.prevEnd]))
	if len(parts) != 2 {
		return errorf(p.pos(first), CodeBadName, "bad model name %s: want schema.table", written)
	}
	for _, part := range parts {
		if !isPlainIdent(part) {
			return errorf(p.pos(first), CodeBadName,
				"bad model name %s: %q is not a plain identifier (letters, digits and _, not starting with a digit)",
				written, part)
		}
	}
	schema, table := strings.ToLower(parts[0]), strings.ToLower(parts[1])
	for _, part := range [2]struct{ what, name string }{{"schema", schema}, {"table", table}} {
		if len(part.name) > MaxIdentBytes {
			return errorf(p.pos(first), CodeBadName,
				"bad model name %s: the %s name is %d bytes, longer than the %d-byte identifier limit "+
					"(PostgreSQL would truncate it); shorten it",
				written, part.what, len(part.name), MaxIdentBytes)
		}
	}
	if strings.Contains(schema, "__") {
		return errorf(p.pos(first), CodeBadName,
			"bad model name %s: a schema name may not contain \"__\" (gapless uses it for environment schemas)", written)
	}
	if strings.HasPrefix(table, "__gapless") {
		return errorf(p.pos(first), CodeBadName,
			"bad model name %s: table names starting with __gapless are reserved", written)
	}
	p.m.Name = schema + "." + table
	return nil
}

// isPlainIdent reports whether s is [A-Za-z_][A-Za-z0-9_]*.
func isPlainIdent(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		letter := c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
		if !letter && (i == 0 || !isDigit(c)) {
			return false
		}
	}
	return true
}

// columns parses "(name TYPE, name TYPE, ...)". A type is every token up to
// the next ',' or ')' outside parentheses and brackets, so DECIMAL(10, 2),
// VARCHAR[] and TIMESTAMP WITH TIME ZONE are all one type; its text is kept
// as written with runs of whitespace reduced to one space.
func (p *parser) columns() ([]Column, error) {
	if !p.isPunct("(") {
		return nil, p.unexpected("'(' to start columns (name TYPE, ...)")
	}
	if err := p.advance(); err != nil {
		return nil, err
	}
	var cols []Column
	seen := map[string]bool{}
	for !p.isPunct(")") {
		nameTok := p.tok
		name, err := p.identifier("columns")
		if err != nil {
			return nil, err
		}
		if seen[name] {
			return nil, errorf(p.pos(nameTok), CodeBadValue, "duplicate column %s", name)
		}
		seen[name] = true
		typ, err := p.columnType(name)
		if err != nil {
			return nil, err
		}
		cols = append(cols, Column{Name: name, Type: typ})
		if p.isPunct(",") {
			if err := p.advance(); err != nil {
				return nil, err
			}
		}
	}
	if len(cols) == 0 {
		return nil, errorf(p.pos(p.tok), CodeBadValue, "columns is empty; declare at least one column")
	}
	return cols, p.advance()
}

func (p *parser) columnType(col string) (string, error) {
	var b strings.Builder
	depth, prevEnd := 0, -1
	for {
		switch {
		case p.tok.kind == tokEOF:
			return "", p.unterminated()
		case depth == 0 && (p.isPunct(",") || p.isPunct(")")):
			if b.Len() == 0 {
				return "", errorf(p.pos(p.tok), CodeBadValue, "column %s has no type", col)
			}
			return b.String(), nil
		case p.isPunct("(") || p.isPunct("["):
			depth++
		case p.isPunct(")") || p.isPunct("]"):
			depth--
		case p.isPunct(";"):
			return "", p.unterminated()
		}
		if depth < 0 {
			return "", p.unexpected("a column type")
		}
		if prevEnd >= 0 && p.tok.off > prevEnd {
			b.WriteByte(' ')
		}
		b.Write(p.src[p.tok.off:p.tok.end])
		prevEnd = p.tok.end
		if err := p.advance(); err != nil {
			return "", err
		}
	}
}

// finish applies defaults and checks what single attributes cannot: required
// attributes, the cron and interval unit together, start before end, and
// that the kind fits the attributes and the query.
func (p *parser) finish(d Defaults) error {
	m := p.m
	headerPos := p.pos(p.modelTok)
	if m.Name == "" {
		return errorf(headerPos, CodeMissingName, "MODEL header has no name: add name schema.table")
	}
	if m.Kind == "" {
		m.Kind = DefaultKind
	}
	if err := p.checkKindAttributes(); err != nil {
		return err
	}
	if m.Dialect == "" {
		m.Dialect = DefaultDialect
		if d.Dialect != "" {
			dl, err := ParseDialect(string(d.Dialect))
			if err != nil {
				return wrapErr(headerPos, CodeBadValue, err, "bad default dialect from the project config")
			}
			m.Dialect = dl
		}
	}
	if m.KindPos == (Pos{}) {
		m.KindPos = headerPos
	}
	if err := p.checkSchedule(d, headerPos); err != nil {
		return err
	}
	if err := p.checkTimeFormat(); err != nil {
		return err
	}
	if _, ok := p.seen["start"]; !ok {
		m.Start = d.Start.UTC()
	}
	if !m.Start.IsZero() && !m.End.IsZero() && !m.End.After(m.Start) {
		return errorf(p.pos(p.valueTok["end"]), CodeInvalid, "end %s is not after start %s",
			formatTime(m.End), formatTime(m.Start))
	}
	if _, ok := p.seen["owner"]; !ok {
		m.Owner = d.Owner
	}
	if len(d.Audits) > 0 && m.Kind != KindExternal {
		m.Audits = append(slices.Clone(d.Audits), m.Audits...)
	}
	return p.checkQuery()
}

// checkSchedule validates the cron (the model's, the project default or
// DefaultCron) and settles the interval unit: the explicit one must fit the
// cron (see cron.CheckUnit), otherwise it is derived from the cron.
func (p *parser) checkSchedule(d Defaults, headerPos Pos) error {
	m := p.m
	cronPos, origin := headerPos, "default cron "
	if _, ok := p.seen["cron"]; ok {
		cronPos, origin = p.pos(p.valueTok["cron"]), "cron "
	} else if d.Cron != "" {
		m.Cron = strings.TrimSpace(d.Cron)
		origin = "project default cron "
	} else {
		m.Cron = DefaultCron
	}
	sched, err := cron.Parse(m.Cron)
	if err != nil {
		return cronWrap(cronPos, err, "bad "+origin+quoteSQL(m.Cron))
	}
	if m.IntervalUnitExplicit {
		if err := cron.CheckUnit(sched, m.IntervalUnit, m.AllowPartials); err != nil {
			return cronWrap(p.pos(p.valueTok["interval_unit"]), err,
				fmt.Sprintf("interval_unit %s does not fit %s%s", m.IntervalUnit, origin, quoteSQL(m.Cron)))
		}
		return nil
	}
	u, err := sched.Unit()
	if err != nil {
		return cronWrap(cronPos, err,
			fmt.Sprintf("cannot derive an interval unit from %s%s", origin, quoteSQL(m.Cron)))
	}
	m.IntervalUnit = u
	return nil
}

// checkTimeFormat refuses a time_column format too coarse for the interval
// unit: a '%Y-%m-%d' column cannot tell the hours of a day apart, so every
// hourly interval would select and replace nothing.
func (p *parser) checkTimeFormat() error {
	m := p.m
	if m.TimeColumnFormat == "" {
		return nil
	}
	f, err := ParseTimeFormat(m.TimeColumnFormat)
	if err != nil { // checked when parsed; kept for safety
		return wrapErr(p.pos(p.timeFormatTok), CodeBadValue, err, "bad time_column format")
	}
	if !f.Resolves(m.IntervalUnit) {
		return errorf(p.pos(p.timeFormatTok), CodeInvalid,
			"time_column format %s is too coarse for interval_unit %s: its finest field is the %s, so the bounds of "+
				"one interval would render alike; add the finer fields (for example '%%Y-%%m-%%d %%H:%%M:%%S')",
			quoteSQL(m.TimeColumnFormat), m.IntervalUnit, f.finest())
	}
	return nil
}

// externalForbidden are attributes about computing a model, which an
// EXTERNAL model never is.
var externalForbidden = []string{"cron", "interval_unit", "allow_partials", "start", "end"}

// checkKindAttributes checks the attributes that depend on the kind.
func (p *parser) checkKindAttributes() error {
	m := p.m
	if m.Kind != KindExternal {
		return nil
	}
	for _, a := range externalForbidden {
		if t, ok := p.seen[a]; ok {
			return errorf(p.pos(t), CodeInvalid,
				"attribute %s does not apply to an EXTERNAL model: gapless never computes it", a)
		}
	}
	if len(m.Columns) == 0 {
		return errorf(p.pos(p.kindTok), CodeInvalid,
			"EXTERNAL model %s must declare its columns: add columns (name TYPE, ...)", m.Name)
	}
	return nil
}

// checkQuery enforces that EXTERNAL models have no SQL after the header
// and SEED models no query (comments alone are fine, and are dropped), and
// that every other kind has a query.
func (p *parser) checkQuery() error {
	m := p.m
	switch m.Kind {
	case KindExternal, KindSeed:
		stray := m.Query != ""
		at := m.QueryPos
		if !stray && m.Kind == KindExternal && len(m.PreStatements) > 0 {
			stray, at = true, m.PreStatements[0].Pos
		}
		if stray {
			return errorf(at, CodeUnexpectedQuery,
				"a %s model takes no query, but SQL follows the MODEL header", m.Kind)
		}
		m.Query = ""
		m.QueryPos = p.lx.pos(p.semiEnd)
	default:
		if m.Query == "" {
			if len(m.PreStatements) > 0 {
				return errorf(m.PreStatements[0].Pos, CodeMissingQuery,
					"missing query: a %s model needs a query (SELECT, WITH, FROM or VALUES), and none of the %d statements after the MODEL header is one",
					m.Kind, len(m.PreStatements))
			}
			return errorf(p.lx.pos(p.semiEnd), CodeMissingQuery,
				"missing query: a %s model needs a query after the MODEL header", m.Kind)
		}
	}
	return nil
}

func unitNames() []string {
	var names []string
	for _, u := range interval.Units() {
		names = append(names, string(u))
	}
	return names
}

// cronWrap builds the *Error for a cron problem. The cron package's messages
// start with the quoted expression, which msg already shows; that prefix is
// dropped so the expression is not quoted twice.
func cronWrap(pos Pos, cause error, msg string) *Error {
	detail := cause.Error()
	var ce *cron.Error
	if errors.As(cause, &ce) {
		detail = strings.TrimPrefix(detail, fmt.Sprintf("cron %q: ", ce.Expr))
	}
	return &Error{Pos: pos, Code: CodeBadCron, Msg: msg + ": " + detail, Err: cause}
}

// quoteSQL renders s as a single-quoted literal, as it would be written in a
// model file.
func quoteSQL(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}
