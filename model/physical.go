package model

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// ColumnDescription is one column's description: from column_descriptions
// (col = 'text', ...) in the header, or from a comment on the line of a
// column in the query's final SELECT. Pos is where the column is named.
type ColumnDescription struct {
	Column string
	Text   string
	Pos    Pos `json:",omitzero"`
}

// Property is one physical_properties (key = value) entry. Key is folded to
// lower case; Value is the SQL text as written (a string keeps its quotes,
// an ARRAY[...] its brackets). Pos is where the key is written.
type Property struct {
	Key   string
	Value string
	Pos   Pos `json:",omitzero"`
}

// Descriptions are m's column descriptions: column_descriptions when the
// header has it (SQLMesh then ignores comments in the query), otherwise
// the comments on the lines of the final SELECT's columns (see
// InlineColumnComments). It never returns two descriptions of one column.
func (m *Model) Descriptions() []ColumnDescription {
	if m.ColumnDescriptionsSet {
		return m.ColumnDescriptions
	}
	if m.Query == "" {
		return nil
	}
	out := InlineColumnComments(m.Query)
	for i := range out {
		out[i].Pos = m.PosOf(out[i].Pos.Col)
	}
	return out
}

// expression consumes one SQL expression of a header list (a partitioned_by
// or clustered_by item) up to the ',' or closing bracket that ends it, and
// returns its text as written, tokens joined by single spaces where the file
// has space between them. A bare column name alone is folded to lower case,
// as identifier does; a quoted one loses its quotes.
func (p *parser) expression(what string) (string, error) {
	first := p.tok
	var b strings.Builder
	depth, prevEnd, n := 0, -1, 0
	for {
		switch {
		case p.tok.kind == tokEOF || p.isPunct(";"):
			return "", p.unterminated()
		case depth == 0 && (p.isPunct(",") || p.isPunct(")") || p.isPunct("]")):
			if n == 0 {
				return "", p.unexpected("an expression in " + what)
			}
			if n == 1 && first.kind == tokIdent {
				return strings.ToLower(first.val), nil
			}
			if n == 1 && first.kind == tokQuoted && first.val != "" {
				return first.val, nil
			}
			return b.String(), nil
		case p.isPunct("(") || p.isPunct("["):
			depth++
		case p.isPunct(")") || p.isPunct("]"):
			depth--
		}
		if prevEnd >= 0 && p.tok.off > prevEnd {
			b.WriteByte(' ')
		}
		b.Write(p.src[p.tok.off:p.tok.end])
		prevEnd = p.tok.end
		n++
		if err := p.advance(); err != nil {
			return "", err
		}
	}
}

// pairs parses "(key = value, ...)" calling item with the key's token and
// its name (identifier rules) once the '=' is consumed; item consumes the
// value. An empty list is allowed.
func (p *parser) pairs(what string, item func(key token, name string) error) error {
	if !p.isPunct("(") {
		return p.unexpected("'(' to start " + what + " (key = value, ...)")
	}
	if err := p.advance(); err != nil {
		return err
	}
	for !p.isPunct(")") {
		keyTok := p.tok
		name, err := p.identifier(what)
		if err != nil {
			return err
		}
		if !p.isPunct("=") {
			return p.unexpected("'=' after " + name + " in " + what)
		}
		if err := p.advance(); err != nil {
			return err
		}
		if err := item(keyTok, name); err != nil {
			return err
		}
		if p.isPunct(",") {
			if err := p.advance(); err != nil {
				return err
			}
			continue
		}
		if !p.isPunct(")") {
			return p.unexpected("',' or ')' in " + what)
		}
	}
	return p.advance()
}

// columnDescriptions parses column_descriptions (col = 'text', ...).
func (p *parser) columnDescriptions() error {
	seen := map[string]bool{}
	p.m.ColumnDescriptionsSet = true
	return p.pairs("column_descriptions", func(key token, name string) error {
		if seen[name] {
			return errorf(p.pos(key), CodeBadValue, "column_descriptions describes column %s twice", name)
		}
		seen[name] = true
		t, err := p.stringValue("column_descriptions " + name)
		if err != nil {
			return err
		}
		p.m.ColumnDescriptions = append(p.m.ColumnDescriptions, ColumnDescription{Column: name, Text: t.val, Pos: p.pos(key)})
		return nil
	})
}

// physicalProperties parses physical_properties (key = value, ...).
func (p *parser) physicalProperties() error {
	seen := map[string]bool{}
	return p.pairs("physical_properties", func(key token, name string) error {
		name = strings.ToLower(name)
		if seen[name] {
			return errorf(p.pos(key), CodeBadValue, "physical_properties sets %s twice", name)
		}
		seen[name] = true
		v, err := p.rawValue("physical_properties " + name)
		if err != nil {
			return err
		}
		p.m.PhysicalProperties = append(p.m.PhysicalProperties, Property{Key: name, Value: v, Pos: p.pos(key)})
		return nil
	})
}

// physicalAttribute parses the value of a physical attribute
// (partitioned_by, clustered_by, column_descriptions, physical_properties,
// table_format, storage_format) into p.m; handled is false for any other.
func (p *parser) physicalAttribute(name string) (handled bool, err error) {
	m := p.m
	switch name {
	case "partitioned_by":
		m.PartitionedBy, err = p.list(name, p.expression)
	case "clustered_by":
		m.ClusteredBy, err = p.list(name, p.expression)
	case "column_descriptions":
		err = p.columnDescriptions()
	case "physical_properties":
		err = p.physicalProperties()
	case "table_format", "storage_format":
		var t token
		if t, err = p.wordValue(name); err == nil {
			if name == "table_format" {
				m.TableFormat = strings.ToLower(t.val)
			} else {
				m.StorageFormat = strings.ToLower(t.val)
			}
		}
	default:
		return false, nil
	}
	return true, err
}

// InlineColumnComments returns the comments written on the line of a column
// of query's final SELECT, as SQLMesh registers them: "SELECT a, -- text"
// or "a /* text */," describes a; a comment on a line of its own describes
// nothing. The final SELECT is the first one outside brackets (after any
// WITH), which names the columns also when UNIONs follow. A column's name
// is its alias, or the name of a plain or qualified column (o.id is id,
// x::INT is x); an expression without one is skipped. Pos.Col of each
// result holds the byte offset in query where the column is named (callers
// map it to a file position); Line is unset.
func InlineColumnComments(query string) []ColumnDescription {
	toks := scanSQL(query)
	start := -1
	depth := 0
	for i, t := range toks {
		switch {
		case t.text == "(" || t.text == "[":
			depth++
		case t.text == ")" || t.text == "]":
			depth--
		case depth == 0 && t.kind == sqlWord && strings.EqualFold(t.text, "select"):
			start = i + 1
		}
		if start >= 0 {
			break
		}
	}
	if start < 0 {
		return nil
	}
	// Split the projections at commas outside brackets, up to the clause
	// that ends them.
	var items [][]sqlTok
	var cur []sqlTok
	depth = 0
	end := len(toks)
	for i := start; i < len(toks); i++ {
		t := toks[i]
		if depth == 0 && t.kind == sqlWord && isClauseEnd(t.text) || depth == 0 && t.text == ";" {
			end = i
			break
		}
		switch t.text {
		case "(", "[":
			depth++
		case ")", "]":
			depth--
		}
		if depth == 0 && t.text == "," && t.kind == sqlPunct {
			items = append(items, cur)
			cur = nil
			continue
		}
		cur = append(cur, t)
	}
	items = append(items, cur)
	_ = end
	var out []ColumnDescription
	seen := map[string]bool{}
	for i, item := range items {
		code := codeToks(item)
		if len(code) == 0 {
			continue
		}
		name, nameTok, ok := projectionName(code)
		if !ok || seen[name] {
			continue
		}
		last := code[len(code)-1]
		// The comment on the line where the item ends: inside the item
		// after its last token, or at the start of the next item (after the
		// comma) on that same line.
		var cands []sqlTok
		for _, t := range item {
			if t.kind == sqlComment && t.off > last.off {
				cands = append(cands, t)
			}
		}
		if i+1 < len(items) {
			for _, t := range items[i+1] {
				if t.kind != sqlComment {
					break
				}
				cands = append(cands, t)
			}
		}
		for _, c := range cands {
			if c.line != last.line {
				continue
			}
			if text := commentText(c.text); text != "" {
				seen[name] = true
				out = append(out, ColumnDescription{Column: name, Text: text, Pos: Pos{Col: nameTok.off}})
				break
			}
		}
	}
	return out
}

// isClauseEnd reports whether word ends a SELECT list.
func isClauseEnd(word string) bool {
	switch strings.ToLower(word) {
	case "from", "where", "group", "having", "qualify", "window", "order", "limit", "union", "intersect", "except", "into":
		return true
	}
	return false
}

func codeToks(item []sqlTok) []sqlTok {
	var out []sqlTok
	for _, t := range item {
		if t.kind != sqlComment {
			out = append(out, t)
		}
	}
	return out
}

// projectionName is the output column name of one projection's tokens.
func projectionName(code []sqlTok) (string, sqlTok, bool) {
	n := len(code)
	if n >= 2 && code[n-2].kind == sqlWord && strings.EqualFold(code[n-2].text, "as") {
		return identName(code[n-1])
	}
	// Cut a trailing cast: x::INT names x.
	for i := 0; i+1 < len(code); i++ {
		if code[i].text == ":" && code[i+1].text == ":" {
			code = code[:i]
			break
		}
	}
	n = len(code)
	if n == 0 {
		return "", sqlTok{}, false
	}
	// a, o.a, or an expression with an implicit alias: ... ) a
	if n == 1 || code[n-2].text == "." || code[n-2].kind == sqlWord || code[n-2].kind == sqlQuoted || code[n-2].text == ")" {
		if n >= 2 && code[n-2].kind == sqlWord && !isPlainWordBefore(code[:n-1]) {
			return "", sqlTok{}, false
		}
		return identName(code[n-1])
	}
	return "", sqlTok{}, false
}

// isPlainWordBefore reports whether an implicit alias follows a complete
// expression (not a keyword such as CASE ... END, which is an expression).
func isPlainWordBefore(before []sqlTok) bool {
	w := strings.ToLower(before[len(before)-1].text)
	return w != "distinct" && w != "all"
}

func identName(t sqlTok) (string, sqlTok, bool) {
	switch t.kind {
	case sqlWord:
		return strings.ToLower(t.text), t, true
	case sqlQuoted:
		if v := strings.ReplaceAll(t.text[1:len(t.text)-1], `""`, `"`); v != "" {
			return v, t, true
		}
	}
	return "", sqlTok{}, false
}

// commentText is a comment without its markers and surrounding space.
func commentText(c string) string {
	if strings.HasPrefix(c, "--") {
		return strings.TrimSpace(c[2:])
	}
	c = strings.TrimPrefix(c, "/*")
	c = strings.TrimSuffix(c, "*/")
	return strings.TrimSpace(c)
}

type sqlTokKind int

const (
	sqlPunct sqlTokKind = iota
	sqlWord
	sqlQuoted
	sqlString
	sqlComment
)

// sqlTok is one lexeme of a query, for InlineColumnComments only: words,
// quoted names, strings, comments and single punctuation characters, with
// the byte offset and the 1-based line where each starts.
type sqlTok struct {
	kind sqlTokKind
	text string
	off  int
	line int
}

// scanSQL splits query into sqlToks. It never fails: an unterminated string
// or comment runs to the end.
func scanSQL(q string) []sqlTok {
	var out []sqlTok
	line := 1
	for i := 0; i < len(q); {
		c := q[i]
		start, startLine := i, line
		switch {
		case c == '\n':
			line++
			i++
			continue
		case c == ' ' || c == '\t' || c == '\r':
			i++
			continue
		case c == '-' && i+1 < len(q) && q[i+1] == '-':
			j := strings.IndexByte(q[i:], '\n')
			if j < 0 {
				j = len(q) - i
			}
			i += j
			out = append(out, sqlTok{sqlComment, q[start:i], start, startLine})
			continue
		case c == '/' && i+1 < len(q) && q[i+1] == '*':
			j := strings.Index(q[i+2:], "*/")
			if j < 0 {
				i = len(q)
			} else {
				i += j + 4
			}
			line += strings.Count(q[start:i], "\n")
			out = append(out, sqlTok{sqlComment, q[start:i], start, startLine})
			continue
		case c == '\'' || c == '"' || c == '`':
			i++
			for i < len(q) {
				if q[i] == c {
					if i+1 < len(q) && q[i+1] == c {
						i += 2
						continue
					}
					i++
					break
				}
				i++
			}
			line += strings.Count(q[start:i], "\n")
			kind := sqlQuoted
			if c == '\'' {
				kind = sqlString
			}
			text := q[start:i]
			if c == '`' && len(text) >= 2 {
				text = `"` + text[1:len(text)-1] + `"`
			}
			out = append(out, sqlTok{kind, text, start, startLine})
			continue
		}
		r, size := utf8.DecodeRuneInString(q[i:])
		if r == '_' || r == '@' || r == '$' || unicode.IsLetter(r) || unicode.IsDigit(r) {
			for i < len(q) {
				r, size = utf8.DecodeRuneInString(q[i:])
				if r != '_' && r != '$' && r != '@' && !unicode.IsLetter(r) && !unicode.IsDigit(r) {
					break
				}
				i += size
			}
			out = append(out, sqlTok{sqlWord, q[start:i], start, startLine})
			continue
		}
		i += size
		out = append(out, sqlTok{sqlPunct, q[start:i], start, startLine})
	}
	return out
}
