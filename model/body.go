package model

import (
	"errors"
	"fmt"
	"strings"

	"github.com/gapless-dev/gapless/model/suggest"
)

// takeBody splits what follows the header into statements: inline AUDIT
// blocks (an AUDIT (...) header and the query after it), then, of the rest,
// the model's query (the first statement that is a query: SELECT, WITH,
// FROM, VALUES, ...), the pre-statements before it and the post-statements
// after it. A body of one statement that is not recognisably a query is
// taken as the query, as before pre- and post-statements existed, so the
// SQL parser reports what is wrong with it.
//
// Query stays a verbatim slice of the file at QueryPos; with no query it
// is "" and QueryPos is where the body starts.
func (p *parser) takeBody() error {
	m := p.m
	spans := splitStatements(p.src, p.semiEnd)
	var plain []span
	names := map[string]Pos{}
	for i := 0; i < len(spans); i++ {
		sp := spans[i]
		if !isAuditHeader(string(p.src[sp.off:sp.end])) {
			plain = append(plain, sp)
			continue
		}
		def, used, err := auditAt(p.lx.path, p.src, spans[i:])
		if err != nil {
			return err
		}
		i += used - 1
		if first, dup := names[def.Name]; dup {
			return errorf(def.Pos, CodeDuplicateAttribute, "duplicate inline audit %s (first defined on line %d)", def.Name, first.Line)
		}
		names[def.Name] = def.Pos
		m.InlineAudits = append(m.InlineAudits, def)
	}
	query := -1
	for i, sp := range plain {
		if containsFold(queryStatementWords, firstWord(string(p.src[sp.off:sp.end]))) {
			query = i
			break
		}
	}
	if query < 0 && len(plain) == 1 && !strings.HasPrefix(firstWord(string(p.src[plain[0].off:plain[0].end])), "@") {
		query = 0
	}
	m.QueryPos = p.lx.pos(p.semiEnd)
	for i, sp := range plain {
		st := Statement{SQL: string(p.src[sp.off:sp.end]), Pos: p.lx.pos(sp.off)}
		switch {
		case i == query:
			m.Query, m.QueryPos = st.SQL, st.Pos
		case query < 0 || i < query:
			m.PreStatements = append(m.PreStatements, st)
		default:
			m.PostStatements = append(m.PostStatements, st)
		}
	}
	return takeVirtualUpdate(m)
}

// auditAt parses the AUDIT block that starts spans[0]: its header and its
// query, which is either the rest of the same statement (a header without
// ';') or the next statement. It returns how many spans the block used.
func auditAt(path string, src []byte, spans []span) (AuditDef, int, error) {
	def, end, err := auditHeader(path, src, spans[0].off)
	if err != nil {
		return def, 0, err
	}
	used := 1
	q := span{off: min(end, spans[0].end), end: spans[0].end}
	if off, ok := hasSQL(string(src[q.off:q.end])); ok {
		q.off += off
	} else {
		if len(spans) < 2 || isAuditHeader(string(src[spans[1].off:spans[1].end])) {
			return def, 0, errorf(def.Pos, CodeMissingQuery,
				"audit %s has no query: write the SELECT that returns the offending rows after AUDIT (...);", def.Name)
		}
		q = spans[1]
		used = 2
	}
	lx := newLexer(path, src)
	def.Query = string(src[q.off:q.end])
	def.QueryPos = lx.pos(q.off)
	return def, used, nil
}

// auditAttributes are the AUDIT (...) header's attributes gapless knows.
var auditAttributes = []string{"name", "blocking", "dialect", "defaults", "description", "owner", "tags", "skip", "standalone"}

// auditHeader parses "AUDIT ( name n, blocking false, dialect d, defaults
// (a = 1) )" starting at off, returning the definition (without its query)
// and the offset just past the ')' (and a ';' right after it, if any).
func auditHeader(path string, src []byte, off int) (AuditDef, int, error) {
	lx := newLexer(path, src)
	lx.off = off
	p := &parser{lx: lx, src: src, seen: map[string]token{}, valueTok: map[string]token{}, m: &Model{}}
	def := AuditDef{Blocking: true}
	if err := p.advance(); err != nil {
		return def, 0, err
	}
	auditTok := p.tok
	def.Pos = p.pos(auditTok)
	if err := p.advance(); err != nil {
		return def, 0, err
	}
	if !p.isPunct("(") {
		return def, 0, p.unexpected("'(' after AUDIT")
	}
	if err := p.advance(); err != nil {
		return def, 0, err
	}
	for !p.isPunct(")") {
		nameTok := p.tok
		if nameTok.kind == tokEOF || p.isPunct(";") {
			return def, 0, errorf(def.Pos, CodeUnterminated, "unterminated AUDIT header: missing ')' to close AUDIT (")
		}
		if nameTok.kind != tokIdent {
			return def, 0, p.unexpected("an AUDIT attribute name")
		}
		name := strings.ToLower(nameTok.val)
		if !containsFold(auditAttributes, name) {
			msg := "unknown AUDIT attribute " + nameTok.val
			if s, ok := suggest.Closest(name, auditAttributes); ok {
				msg += ": did you mean " + s + "?"
			} else {
				msg += " (attributes: " + strings.Join(auditAttributes, ", ") + ")"
			}
			return def, 0, errorf(p.pos(nameTok), CodeUnknownAttribute, "%s", msg)
		}
		if first, dup := p.seen[name]; dup {
			return def, 0, errorf(p.pos(nameTok), CodeDuplicateAttribute,
				"duplicate AUDIT attribute %s (first set on line %d)", name, p.pos(first).Line)
		}
		p.seen[name] = nameTok
		if err := p.advance(); err != nil {
			return def, 0, err
		}
		if p.isPunct(",") || p.isPunct(")") || p.tok.kind == tokEOF {
			return def, 0, errorf(p.pos(nameTok), CodeSyntax, "AUDIT attribute %s has no value", name)
		}
		var err error
		switch name {
		case "name":
			t := p.tok
			if t.kind != tokIdent && t.kind != tokQuoted && t.kind != tokString {
				return def, 0, p.unexpected("an audit name")
			}
			def.Name = strings.ToLower(strings.TrimSpace(t.val))
			if def.Name == "" {
				return def, 0, errorf(p.pos(t), CodeBadValue, "empty audit name")
			}
			err = p.advance()
		case "blocking":
			def.Blocking, err = p.boolValue(name)
		case "skip":
			var skip bool
			if skip, err = p.boolValue(name); err == nil && skip {
				// A skipped audit is defined but never runs: treat
				// it as non-blocking and let callers drop it.
				def.Blocking = false
				def.Skip = true
			}
		case "dialect":
			var t token
			if t, err = p.wordValue(name); err == nil {
				def.Dialect = Dialect(strings.ToLower(t.val))
			}
		case "defaults":
			def.Defaults, err = p.auditArgs("defaults of audit "+def.Name, true)
		case "standalone":
			var sa bool
			if sa, err = p.boolValue(name); err == nil && sa {
				return def, 0, errorf(p.pos(nameTok), CodeUnknownAttribute,
					"standalone audits are not supported by gapless: attach the audit to a model with audits (...)")
			}
		default: // description, owner, tags: metadata, not kept
			err = p.skipValue(name)
		}
		if err != nil {
			return def, 0, err
		}
		if p.isPunct(",") {
			if err := p.advance(); err != nil {
				return def, 0, err
			}
			continue
		}
		if !p.isPunct(")") {
			return def, 0, p.unexpected("',' or ')' in the AUDIT header")
		}
	}
	if def.Name == "" {
		return def, 0, errorf(def.Pos, CodeMissingName, "AUDIT header has no name: add name <audit_name>")
	}
	end := p.tok.end
	// A ';' right after the ')' belongs to the header.
	if err := p.advance(); err == nil && p.isPunct(";") {
		end = p.tok.end
	}
	return def, end, nil
}

// skipValue consumes one attribute value (a word, string, number or a
// bracketed list) without keeping it.
func (p *parser) skipValue(attr string) error {
	_, err := p.rawValue(attr)
	return err
}

// rawValue consumes tokens up to the next ',' or ')' outside brackets and
// returns the text they span, as written.
func (p *parser) rawValue(what string) (string, error) {
	first := p.tok
	depth, last := 0, -1
	for {
		switch {
		case p.tok.kind == tokEOF:
			return "", p.unterminatedIn(what)
		case depth == 0 && (p.isPunct(",") || p.isPunct(")") || p.isPunct("]")):
			if last < 0 {
				return "", errorf(p.pos(p.tok), CodeBadValue, "%s has no value", what)
			}
			return string(p.src[first.off:last]), nil
		case p.isPunct("(") || p.isPunct("["):
			depth++
		case p.isPunct(")") || p.isPunct("]"):
			depth--
		case depth == 0 && p.isPunct(";"):
			return "", p.unterminatedIn(what)
		}
		last = p.tok.end
		if err := p.advance(); err != nil {
			return "", err
		}
	}
}

func (p *parser) unterminatedIn(what string) error {
	if p.modelTok.end > 0 {
		return p.unterminated()
	}
	return errorf(p.pos(p.tok), CodeUnterminated, "unterminated %s: missing ')'", what)
}

// auditRefs parses the audits attribute: "(call, call)", "[call, call]" or
// one call, where a call is a name with optional arguments,
// not_null(columns := (a, b)).
func (p *parser) auditRefs() ([]AuditRef, error) {
	closer := ""
	switch {
	case p.isPunct("("):
		closer = ")"
	case p.isPunct("["):
		closer = "]"
	default:
		r, err := p.auditCall()
		if err != nil {
			return nil, err
		}
		return []AuditRef{r}, nil
	}
	if err := p.advance(); err != nil {
		return nil, err
	}
	var out []AuditRef
	for !p.isPunct(closer) {
		r, err := p.auditCall()
		if err != nil {
			return nil, err
		}
		out = append(out, r)
		if p.isPunct(",") {
			if err := p.advance(); err != nil {
				return nil, err
			}
			continue
		}
		if !p.isPunct(closer) {
			return nil, p.unexpected("',' or '" + closer + "' in audits")
		}
	}
	return out, p.advance()
}

// auditCall parses one name or name(arg := value, ...).
func (p *parser) auditCall() (AuditRef, error) {
	t := p.tok
	if t.kind != tokIdent && t.kind != tokQuoted {
		return AuditRef{}, p.unexpected("an audit name in audits")
	}
	r := AuditRef{Name: strings.ToLower(t.val), Pos: p.pos(t)}
	if err := p.advance(); err != nil {
		return r, err
	}
	if !p.isPunct("(") {
		return r, nil
	}
	args, err := p.auditArgs("audit "+r.Name, false)
	r.Args = args
	return r, err
}

// auditArgs parses "(name := value, name = value, ...)" with p.tok on the
// '(' and leaves p.tok past the ')'. Values are kept as written. Names are
// lower case and unique.
func (p *parser) auditArgs(what string, defaults bool) ([]AuditArg, error) {
	if !p.isPunct("(") {
		return nil, p.unexpected("'(' to start the arguments of " + what)
	}
	if err := p.advance(); err != nil {
		return nil, err
	}
	var out []AuditArg
	seen := map[string]bool{}
	for !p.isPunct(")") {
		nameTok := p.tok
		if nameTok.kind != tokIdent && nameTok.kind != tokQuoted {
			if nameTok.kind == tokEOF {
				return nil, p.unterminatedIn(what)
			}
			return nil, errorf(p.pos(nameTok), CodeBadValue,
				"%s: expected an argument name (name := value), found %s", what, nameTok.describe(p.src))
		}
		// A quoted name ("values" := ...) is how SQLMesh writes an
		// argument that is a SQL keyword.
		name := strings.ToLower(nameTok.val)
		if err := p.advance(); err != nil {
			return nil, err
		}
		if p.isPunct(":") {
			if err := p.advance(); err != nil {
				return nil, err
			}
			if !p.isPunct("=") {
				return nil, p.unexpected("'=' after ':' in " + what)
			}
		}
		if !p.isPunct("=") {
			return nil, errorf(p.pos(nameTok), CodeBadValue,
				"%s: argument %s has no value: write %s := value", what, name, name)
		}
		if seen[name] {
			return nil, errorf(p.pos(nameTok), CodeDuplicateAttribute, "%s: argument %s is given twice", what, name)
		}
		seen[name] = true
		if err := p.advance(); err != nil {
			return nil, err
		}
		val, err := p.rawValue(what + " argument " + name)
		if err != nil {
			return nil, err
		}
		out = append(out, AuditArg{Name: name, SQL: val, Pos: p.pos(nameTok)})
		if p.isPunct(",") {
			if err := p.advance(); err != nil {
				return nil, err
			}
			continue
		}
		if !p.isPunct(")") {
			return nil, p.unexpected("',' or ')' in " + what)
		}
	}
	_ = defaults
	return out, p.advance()
}

// ParseAuditCall parses one audit call written outside a model file (an
// entry of the configuration's model_defaults.audits), as the audits
// attribute takes it: a name, or name(arg := value, ...). at is where the
// entry is written; the call and its arguments are placed there, and an
// error is an *Error there naming the problem.
func ParseAuditCall(at Pos, text string) (AuditRef, error) {
	p := &parser{lx: newLexer(at.File, []byte(text)), src: []byte(text), seen: map[string]token{}, m: &Model{}}
	place := func(err error) error {
		var me *Error
		if errors.As(err, &me) {
			return &Error{Pos: at, Code: me.Code, Msg: me.Msg, Err: me.Err}
		}
		return err
	}
	if err := p.advance(); err != nil {
		return AuditRef{}, place(err)
	}
	r, err := p.auditCall()
	if err != nil {
		return AuditRef{}, place(err)
	}
	if p.tok.kind != tokEOF {
		return AuditRef{}, &Error{Pos: at, Code: CodeSyntax,
			Msg: fmt.Sprintf("audit %s: unexpected %s after the call (one audit per entry)", r.Name, p.tok.describe(p.src))}
	}
	r.Pos = at
	for i := range r.Args {
		r.Args[i].Pos = at
	}
	return r, nil
}

// ParseAuditFile parses a file of audits/ (SQLMesh's layout): one or more
// blocks of an AUDIT (name n[, blocking false][, dialect d][, defaults
// (...)]) header and the query after it. Skipped audits (skip true) are
// kept with Skip set. Errors are *Error with the file, line and column.
func ParseAuditFile(path string, src []byte) ([]AuditDef, error) {
	spans := splitStatements(src, 0)
	if len(spans) == 0 {
		return nil, errorf(Pos{File: path, Line: 1, Col: 1}, CodeSyntax, "empty audit file: expected AUDIT (name ...); SELECT ...")
	}
	lx := newLexer(path, src)
	var out []AuditDef
	names := map[string]Pos{}
	for i := 0; i < len(spans); i++ {
		sp := spans[i]
		if !isAuditHeader(string(src[sp.off:sp.end])) {
			return nil, errorf(lx.pos(sp.off), CodeSyntax,
				"expected an AUDIT (name ...) header, found %q: each audit's query follows its own AUDIT header",
				firstLine(string(src[sp.off:sp.end])))
		}
		def, used, err := auditAt(path, src, spans[i:])
		if err != nil {
			return nil, err
		}
		i += used - 1
		if first, dup := names[def.Name]; dup {
			return nil, errorf(def.Pos, CodeDuplicateAttribute, "duplicate audit %s (first defined on line %d)", def.Name, first.Line)
		}
		names[def.Name] = def.Pos
		out = append(out, def)
	}
	return out, nil
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 60 {
		s = s[:60] + "..."
	}
	return s
}
