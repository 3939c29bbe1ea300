package duckdb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	duckdb "github.com/duckdb/duckdb-go/v2"

	"github.com/gapless-dev/gapless/warehouse"
)

// readStatements are the statement types ReadOnlyQuery runs. DuckDB
// parses DESCRIBE, SHOW, SUMMARIZE, FROM-first queries, VALUES and
// PRAGMA table_info into SELECT statements; EXPLAIN runs only planning,
// and EXPLAIN ANALYZE of a write fails in the read-only transaction.
var readStatements = map[duckdb.StmtType]bool{
	duckdb.STATEMENT_TYPE_SELECT:  true,
	duckdb.STATEMENT_TYPE_EXPLAIN: true,
}

// statementNames names the other statement types in refusals.
var statementNames = map[duckdb.StmtType]string{
	duckdb.STATEMENT_TYPE_INSERT:       "INSERT",
	duckdb.STATEMENT_TYPE_UPDATE:       "UPDATE",
	duckdb.STATEMENT_TYPE_DELETE:       "DELETE",
	duckdb.STATEMENT_TYPE_PREPARE:      "PREPARE",
	duckdb.STATEMENT_TYPE_CREATE:       "CREATE",
	duckdb.STATEMENT_TYPE_EXECUTE:      "EXECUTE",
	duckdb.STATEMENT_TYPE_ALTER:        "ALTER",
	duckdb.STATEMENT_TYPE_TRANSACTION:  "a transaction statement",
	duckdb.STATEMENT_TYPE_COPY:         "COPY",
	duckdb.STATEMENT_TYPE_ANALYZE:      "ANALYZE",
	duckdb.STATEMENT_TYPE_VARIABLE_SET: "SET",
	duckdb.STATEMENT_TYPE_CREATE_FUNC:  "CREATE FUNCTION",
	duckdb.STATEMENT_TYPE_DROP:         "DROP",
	duckdb.STATEMENT_TYPE_EXPORT:       "EXPORT",
	duckdb.STATEMENT_TYPE_PRAGMA:       "PRAGMA",
	duckdb.STATEMENT_TYPE_VACUUM:       "VACUUM",
	duckdb.STATEMENT_TYPE_CALL:         "CALL",
	duckdb.STATEMENT_TYPE_SET:          "SET",
	duckdb.STATEMENT_TYPE_LOAD:         "INSTALL or LOAD",
	duckdb.STATEMENT_TYPE_EXTENSION:    "an extension statement",
	duckdb.STATEMENT_TYPE_ATTACH:       "ATTACH",
	duckdb.STATEMENT_TYPE_DETACH:       "DETACH",
	duckdb.STATEMENT_TYPE_MULTI:        "several statements",
}

// ReadOnlyQuery runs q only if it is a read (see warehouse.Engine).
//
// Invariant: nothing q does outlives the call, and nothing but a read is
// ever prepared. Three checks, each enough for the common cases:
//   - DuckDB's parser alone (json_serialize_sql, which binds nothing and
//     so touches nothing) must find exactly one SELECT statement, or
//     EXPLAIN [ANALYZE] of one: DESCRIBE, SHOW, SUMMARIZE, FROM-first
//     queries, VALUES and PIVOT ... IN parse as SELECTs; every other
//     statement, and several statements, are refused before DuckDB
//     prepares them (preparing can act: EXPORT DATABASE creates its
//     folder when it is bound);
//   - the prepared statement's type must be SELECT or EXPLAIN;
//   - it runs in a READ ONLY transaction that is rolled back afterwards,
//     which refuses what hides inside a read (nextval, EXPLAIN ANALYZE
//     DELETE) but not COPY, ATTACH, SET or INSTALL, hence the checks
//     before.
//
// It never takes the engine's write lock.
func (e *Engine) ReadOnlyQuery(ctx context.Context, q string, args ...any) (*warehouse.Result, error) {
	const op = "read-only query"
	if err := checkSQL("query", q); err != nil {
		return nil, fail(op, e.object, err)
	}
	var res *warehouse.Result
	err := e.read(ctx, func(s *session) error {
		if _, err := s.exec(ctx, "BEGIN TRANSACTION READ ONLY"); err != nil {
			return err
		}
		qerr := parsesAsRead(ctx, s, q)
		if qerr == nil {
			res, qerr = s.queryGuarded(ctx, q, onlyReads, args...)
		}
		if _, err := s.exec(context.WithoutCancel(ctx), "ROLLBACK"); err != nil {
			s.discard() // the connection may still be in the transaction
			return errors.Join(qerr, fmt.Errorf("rolling back the read-only transaction: %w", err))
		}
		return qerr
	})
	if err != nil {
		return nil, fail(op, e.object, notARead(q, err))
	}
	return res, nil
}

// serializeSQL asks DuckDB's parser for q's statements without binding
// them (json_serialize_sql serialises SELECT statements only).
const serializeSQL = `SELECT json_serialize_sql(CAST($1 AS VARCHAR))::VARCHAR`

// parsesAsRead is ReadOnlyQuery's first check: q must parse as exactly
// one SELECT statement, or EXPLAIN [ANALYZE] followed by one. A syntax
// error is left for the prepare that follows to report in DuckDB's usual
// words (parsing precedes binding, so that prepare acts on nothing).
func parsesAsRead(ctx context.Context, s *session, q string) error {
	body := q
	if rest, ok := cutWord(q, "EXPLAIN"); ok {
		body = rest
		if rest, ok := cutWord(body, "ANALYZE"); ok {
			body = rest
		}
	}
	res, err := s.query(ctx, serializeSQL, body)
	if err != nil {
		return fmt.Errorf("parsing the statement: %w", err)
	}
	if len(res.Rows) != 1 || len(res.Rows[0]) != 1 {
		return fmt.Errorf("parsing the statement: json_serialize_sql returned %d rows", len(res.Rows))
	}
	doc, _ := res.Rows[0][0].(string)
	var parsed struct {
		Error      bool              `json:"error"`
		ErrorType  string            `json:"error_type"`
		Message    string            `json:"error_message"`
		Statements []json.RawMessage `json:"statements"`
	}
	if err := json.Unmarshal([]byte(doc), &parsed); err != nil {
		return fmt.Errorf("parsing the statement: decoding DuckDB's parse tree: %w", err)
	}
	switch {
	case parsed.Error && parsed.ErrorType == "parser":
		return nil
	case parsed.Error:
		return &stmtError{sql: q, err: fmt.Errorf("%w: %s", warehouse.ErrNotARead, notSelect(body))}
	case len(parsed.Statements) == 0:
		return &stmtError{sql: q, err: invalidf("the query holds no statement")}
	case len(parsed.Statements) > 1:
		return &stmtError{sql: q, err: fmt.Errorf("%w: the SQL holds %d statements", warehouse.ErrNotARead, len(parsed.Statements))}
	}
	return nil
}

// notSelect says why body, which DuckDB would not serialise, is not a
// read: a statement that does not start like a query is named by its
// keyword; one that does holds a write or a second statement.
func notSelect(body string) string {
	switch w := warehouse.LeadingWord(body); w {
	case "SELECT", "WITH", "VALUES", "FROM", "TABLE", "the statement":
		return "the SQL is not one SELECT: it writes, or holds a second statement that is not a SELECT"
	default:
		return w + " is not a read"
	}
}

// cutWord returns what follows q's leading keyword when it is word.
func cutWord(q, word string) (string, bool) {
	lead, rest := warehouse.SplitLeadingWord(q)
	if !strings.EqualFold(lead, word) {
		return q, false
	}
	return rest, true
}

// onlyReads is ReadOnlyQuery's guard: it refuses every statement type but
// a read's before the statement runs.
func onlyReads(typ duckdb.StmtType) (func(), error) {
	if readStatements[typ] {
		return func() {}, nil
	}
	name, ok := statementNames[typ]
	if !ok {
		name = fmt.Sprintf("a statement of type %d", typ)
	}
	return nil, fmt.Errorf("%w: the statement is %s", warehouse.ErrNotARead, name)
}

// notARead wraps warehouse.ErrNotARead around the two refusals that come
// from DuckDB itself: several statements in one string, and a write that
// the read-only transaction stopped.
// The SQL stays in the chain for the *warehouse.Error.
func notARead(q string, err error) error {
	if errors.Is(err, warehouse.ErrNotARead) {
		return err
	}
	if errors.Is(err, errMultipleStatements) {
		return &stmtError{sql: q, err: fmt.Errorf("%w: the SQL holds more than one statement", warehouse.ErrNotARead)}
	}
	var de *duckdb.Error
	if errors.As(err, &de) && de.Type == duckdb.ErrorTypeTransaction && strings.Contains(de.Msg, "read-only") {
		return fmt.Errorf("%w: it writes: %w", warehouse.ErrNotARead, err)
	}
	return err
}
