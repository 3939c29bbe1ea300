package model

import (
	"strings"
)

// Statement is one SQL statement of a model file other than its query: a
// pre-statement (before the query) or a post-statement (after it), kept as
// written, macros included, without its ';'. Pos is where it begins.
type Statement struct {
	SQL string
	Pos Pos
}

// AuditRef is one entry of a model's audits (...) attribute: the audit's
// name as written (lower case) and its arguments, each kept as SQL text.
type AuditRef struct {
	Name string
	Args []AuditArg `json:",omitzero"`
	Pos  Pos
}

// AuditArg is one argument of an audit call, name := value (or name = value),
// or one default of an AUDIT definition. SQL is the value as written.
type AuditArg struct {
	Name string
	SQL  string
	Pos  Pos `json:",omitzero"`
}

// AuditDef is an audit defined in SQL: an AUDIT (...) header and the query
// that follows it, in a model file (an inline audit) or in audits/*.sql.
// The query returns the offending rows; none means the audit passes.
//
// Invariant kept by the parser: Name is lower case and non-empty; Query is
// non-empty and is exactly the file's text at QueryPos.
type AuditDef struct {
	Name string
	// Blocking is false when the header says blocking false: a failure
	// then only warns.
	Blocking bool
	// Skip is set by skip true: the audit is defined but never runs.
	Skip    bool    `json:",omitzero"`
	Dialect Dialect `json:",omitzero"`
	// Defaults are argument values used when a call does not give them.
	Defaults []AuditArg `json:",omitzero"`
	Query    string
	QueryPos Pos
	// Pos is where the AUDIT keyword is.
	Pos Pos
}

// span is a statement's place in the file: [off, end) with surrounding
// whitespace trimmed and the ';' excluded.
type span struct{ off, end int }

// splitStatements cuts src[from:] into ';'-separated statements, aware of
// SQL's strings ('...', E'...'), quoted identifiers ("...", `...`, [...] is
// not one), dollar-quoted strings ($tag$...$tag$), comments (-- and /* */)
// and parentheses (a ';' inside them does not end a statement). Statements
// holding only whitespace and comments are dropped. It never fails: an
// unterminated construct runs to the end of the file, where the SQL parser
// will report it.
func splitStatements(src []byte, from int) []span {
	var out []span
	start, depth := from, 0
	emit := func(end int) {
		s := string(src[start:end])
		if _, ok := hasSQL(s); ok {
			// Leading comments stay with their statement.
			body := strings.TrimLeft(s, " \t\r\n\f\v")
			off := len(s) - len(body)
			body = strings.TrimRight(body, " \t\r\n\f\v")
			out = append(out, span{off: start + off, end: start + off + len(body)})
		}
	}
	i := from
	for i < len(src) {
		c := src[i]
		switch {
		case c == '\'' || c == '"' || c == '`':
			i = skipQuoted(src, i, c)
			continue
		case c == '-' && i+1 < len(src) && src[i+1] == '-':
			for i < len(src) && src[i] != '\n' {
				i++
			}
			continue
		case c == '/' && i+1 < len(src) && src[i+1] == '*':
			end := strings.Index(string(src[i+2:]), "*/")
			if end < 0 {
				i = len(src)
			} else {
				i += 2 + end + 2
			}
			continue
		case c == '$':
			if j, ok := skipDollar(src, i); ok {
				i = j
				continue
			}
		case c == '(':
			depth++
		case c == ')':
			if depth > 0 {
				depth--
			}
		case c == ';' && depth == 0:
			emit(i)
			start = i + 1
		}
		i++
	}
	emit(len(src))
	return out
}

// skipQuoted returns the offset just past the literal opened by q at i; a
// doubled q stands for one.
func skipQuoted(src []byte, i int, q byte) int {
	i++
	for i < len(src) {
		if src[i] == q {
			if i+1 < len(src) && src[i+1] == q {
				i += 2
				continue
			}
			return i + 1
		}
		i++
	}
	return len(src)
}

// skipDollar skips a PostgreSQL dollar-quoted string $tag$...$tag$ starting
// at i, reporting false when src[i:] does not open one.
func skipDollar(src []byte, i int) (int, bool) {
	j := i + 1
	for j < len(src) && (src[j] == '_' || isDigit(src[j]) || (src[j]|0x20 >= 'a' && src[j]|0x20 <= 'z')) {
		j++
	}
	if j >= len(src) || src[j] != '$' || (j > i+1 && isDigit(src[i+1])) {
		return 0, false
	}
	tag := string(src[i : j+1])
	end := strings.Index(string(src[j+1:]), tag)
	if end < 0 {
		return len(src), true
	}
	return j + 1 + end + len(tag), true
}

// firstWord is the leading keyword of a statement (upper case), "(" for a
// parenthesised one, or "@NAME" for one that opens with a macro call.
func firstWord(s string) string {
	off, ok := hasSQL(s)
	if !ok {
		return ""
	}
	s = s[off:]
	if s[0] == '(' {
		return "("
	}
	i := 0
	if s[0] == '@' {
		i = 1
	}
	for i < len(s) && (s[i] == '_' || isDigit(s[i]) || (s[i]|0x20 >= 'a' && s[i]|0x20 <= 'z')) {
		i++
	}
	return strings.ToUpper(s[:i])
}

// queryStatementWords are the words a model's query statement begins with,
// as SQLMesh recognises a query among the statements of a file.
var queryStatementWords = []string{"SELECT", "WITH", "FROM", "VALUES", "TABLE", "(", "PIVOT", "UNPIVOT"}

// isAuditHeader reports whether the statement opens with AUDIT (.
func isAuditHeader(s string) bool {
	if firstWord(s) != "AUDIT" {
		return false
	}
	off, _ := hasSQL(s)
	rest := s[off+len("AUDIT"):]
	if off2, ok := hasSQL(rest); ok {
		return rest[off2] == '('
	}
	return false
}

// CodeSessionStatement: a pre- or post-statement (or a before_all /
// after_all one) whose effect lasts only for the session that runs it.
const CodeSessionStatement Code = "session_statement"

// SessionScoped reports why sql, one statement, has an effect that lasts
// only for the database session that runs it, or "" when its effect
// outlasts the session (a table, a row, an index, a grant, an attached
// database, a loaded extension).
//
// gapless runs a model's statements and its write on the engine's
// connection pool, each statement on whichever connection is free (Trino
// has no lasting session at all), so a session-scoped statement would
// either change nothing the write sees or leak into an unrelated later
// statement. Such statements are refused, naming what they are, rather
// than run to no effect:
//   - SET and RESET (a session setting, SET SESSION on Trino, SET LOCAL),
//     and DuckDB's PRAGMA name = value and PRAGMA enable_/disable_...;
//   - USE (the session's current catalog or schema);
//   - CREATE [OR REPLACE] [LOCAL|GLOBAL] TEMP|TEMPORARY ... (an object that
//     lives as long as the session);
//   - transaction control (BEGIN, START TRANSACTION, COMMIT, ROLLBACK,
//     END, ABORT, SAVEPOINT, RELEASE), which would span connections;
//   - prepared statements, cursors and session state: PREPARE, EXECUTE,
//     DEALLOCATE, DECLARE, DISCARD, LISTEN, UNLISTEN, LOCK.
//
// It looks at the leading keywords only, after comments; a statement that
// still opens with a macro call (@IF ...) is judged once rendered.
func SessionScoped(sql string) string {
	words := leadingWords(sql, 6)
	if len(words) == 0 {
		return ""
	}
	switch words[0] {
	case "SET", "RESET":
		return words[0] + " changes a setting of the session that runs it"
	case "USE":
		return "USE changes the current catalog or schema of the session that runs it"
	case "PRAGMA":
		if len(words) > 1 && (strings.HasPrefix(words[1], "ENABLE_") || strings.HasPrefix(words[1], "DISABLE_")) ||
			strings.Contains(sql, "=") {
			return "PRAGMA sets an option of the session that runs it"
		}
		return ""
	case "BEGIN", "START", "COMMIT", "ROLLBACK", "END", "ABORT", "SAVEPOINT", "RELEASE":
		return words[0] + " controls a transaction, which would span several sessions"
	case "PREPARE", "EXECUTE", "DEALLOCATE", "DECLARE", "DISCARD", "LISTEN", "UNLISTEN", "LOCK":
		return words[0] + " acts on state of the session that runs it"
	case "CREATE":
		rest := words[1:]
		if len(rest) >= 2 && rest[0] == "OR" && rest[1] == "REPLACE" {
			rest = rest[2:]
		}
		if len(rest) > 0 && (rest[0] == "LOCAL" || rest[0] == "GLOBAL") {
			rest = rest[1:]
		}
		if len(rest) > 0 && (rest[0] == "TEMP" || rest[0] == "TEMPORARY") {
			return "CREATE " + rest[0] + " makes an object that lasts only as long as the session that runs it"
		}
	}
	return ""
}

// leadingWords are the first n words of sql (upper case), after leading
// whitespace and comments: runs of letters, digits and '_' (a macro call
// keeps its '@'); anything else ends the list.
func leadingWords(sql string, n int) []string {
	off, ok := hasSQL(sql)
	if !ok {
		return nil
	}
	s := sql[off:]
	var out []string
	for len(out) < n {
		s = strings.TrimLeft(s, " \t\r\n\f\v")
		i := 0
		if i < len(s) && s[i] == '@' {
			i++
		}
		for i < len(s) && (s[i] == '_' || isDigit(s[i]) || (s[i]|0x20 >= 'a' && s[i]|0x20 <= 'z')) {
			i++
		}
		if i == 0 || (i == 1 && s[0] == '@') {
			break
		}
		out = append(out, strings.ToUpper(s[:i]))
		s = s[i:]
	}
	return out
}

// The markers of SQLMesh's on-virtual-update block, each a statement of
// its own.
const (
	virtualUpdateBegin = "ON_VIRTUAL_UPDATE_BEGIN"
	virtualUpdateEnd   = "ON_VIRTUAL_UPDATE_END"
)

// takeVirtualUpdate moves the statements between ON_VIRTUAL_UPDATE_BEGIN;
// and ON_VIRTUAL_UPDATE_END; out of m's pre- and post-statements into
// m.OnVirtualUpdate, dropping the markers. A marker without its partner,
// a block inside a block, or an empty block is an error at the marker.
func takeVirtualUpdate(m *Model) error {
	var err error
	if m.PreStatements, err = splitVirtualUpdate(m, m.PreStatements); err != nil {
		return err
	}
	m.PostStatements, err = splitVirtualUpdate(m, m.PostStatements)
	return err
}

func splitVirtualUpdate(m *Model, sts []Statement) ([]Statement, error) {
	var rest []Statement
	var open *Statement
	count := 0
	for i := range sts {
		st := sts[i]
		word := strings.ToUpper(strings.TrimSpace(st.SQL))
		switch {
		case word == virtualUpdateBegin && open != nil:
			return nil, errorf(st.Pos, CodeSyntax, "%s inside the block opened on line %d: close it with %s; first", virtualUpdateBegin, open.Pos.Line, virtualUpdateEnd)
		case word == virtualUpdateBegin:
			open, count = &sts[i], 0
		case word == virtualUpdateEnd && open == nil:
			return nil, errorf(st.Pos, CodeSyntax, "%s without %s; before it", virtualUpdateEnd, virtualUpdateBegin)
		case word == virtualUpdateEnd:
			if count == 0 {
				return nil, errorf(open.Pos, CodeSyntax, "empty %s block: write the statements to run after the virtual update between the markers", virtualUpdateBegin)
			}
			open = nil
		case open != nil:
			m.OnVirtualUpdate = append(m.OnVirtualUpdate, st)
			count++
		default:
			rest = append(rest, st)
		}
	}
	if open != nil {
		return nil, errorf(open.Pos, CodeSyntax, "%s; is never closed: end the block with %s;", virtualUpdateBegin, virtualUpdateEnd)
	}
	return rest, nil
}
