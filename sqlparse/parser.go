// Package sqlparse parses model queries with DuckDB's own SQL parser and
// extracts what gapless needs from them: the base tables a query reads (its
// dependencies), a canonical text for fingerprints, and the top-level
// projections for change classification.
//
// Parsing goes through DuckDB's json_serialize_sql() on a private in-memory
// DuckDB database that is used only as a parser: no table is ever created
// in it, and no user SQL is ever executed. Dependencies are read off the
// parse tree, never found with regular expressions.
//
// # Dialects
//
// Parse takes no dialect argument. DuckDB's parser is derived from
// PostgreSQL's and accepts DuckDB SQL and nearly all PostgreSQL query syntax
// (:: casts, ILIKE, INTERVAL '1 day', DISTINCT ON, LATERAL, window
// functions, dollar quoting), so the same parser serves models written for
// either warehouse. Two consequences for PostgreSQL models are documented
// where they apply: identifiers are matched case-insensitively (TableRef),
// and the canonical form does not distinguish "Col" from Col (Query.Canonical).
package sqlparse

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	// Registers the "duckdb" database/sql driver.
	_ "github.com/duckdb/duckdb-go/v2"
)

// PlaceholderPrefix starts every identifier that macro.ForParse substitutes
// for a macro before the query reaches Parse: value variables become column
// references named PlaceholderPrefix+name, and @this_model becomes a table
// named PlaceholderPrefix+"this_model". A table whose name starts with this
// prefix is never reported in Query.Tables, so a model's reference to itself
// is not a dependency.
const PlaceholderPrefix = "__gapless_macro_"

// Sentinel errors returned (wrapped) by Parse. Callers branch on them with
// errors.Is; syntax errors are reported as *SyntaxError instead.
var (
	// ErrEmpty means the input holds no statement (only whitespace or
	// comments).
	ErrEmpty = errors.New("sqlparse: no statement in input")
	// ErrMultipleStatements means the input holds more than one statement;
	// a model body must be exactly one query.
	ErrMultipleStatements = errors.New("sqlparse: more than one statement")
	// ErrNotAQuery means the statement is not a query: INSERT, CREATE,
	// PRAGMA, EXPLAIN, DESCRIBE, SHOW, SUMMARIZE, ... It is also returned
	// for a PIVOT whose column values are not listed (PIVOT t ON k USING
	// sum(v), which DuckDB runs as several statements; PIVOT t ON k IN
	// ('a', 'b') USING sum(v) is a query), and for several statements of
	// which one is not a query, since DuckDB refuses those before counting.
	ErrNotAQuery = errors.New("sqlparse: statement is not a query")
	// ErrUnsupported means DuckDB accepted the statement but produced a
	// parse tree this package cannot read (for example a literal that
	// overflows to Infinity, which DuckDB serialises as invalid JSON).
	ErrUnsupported = errors.New("sqlparse: unsupported parse tree")
)

// SyntaxError is DuckDB's parser rejecting the input, or the input not being
// valid text (a NUL byte or invalid UTF-8).
//
// Offset is a byte offset into the exact string given to Parse, in
// [0, len(sql)], or -1 when DuckDB reported no position. An Offset equal to
// len(sql) means "at end of input".
type SyntaxError struct {
	Message string
	Offset  int
}

// Error implements error.
func (e *SyntaxError) Error() string {
	if e.Offset < 0 {
		return "sqlparse: syntax error: " + e.Message
	}
	return fmt.Sprintf("sqlparse: syntax error at byte %d: %s", e.Offset, e.Message)
}

// Position converts Offset into a 1-based line and column within src, the
// string that was given to Parse. Lines are separated by '\n'; the column
// counts Unicode code points. It returns (0, 0) when Offset is unknown or
// outside src.
func (e *SyntaxError) Position(src string) (line, col int) {
	if e.Offset < 0 || e.Offset > len(src) {
		return 0, 0
	}
	before := src[:e.Offset]
	line = strings.Count(before, "\n") + 1
	lineStart := strings.LastIndexByte(before, '\n') + 1
	col = utf8.RuneCountInString(before[lineStart:]) + 1
	return line, col
}

// TableRef is one base table a query reads.
//
// Catalog, Schema and Name are lower-cased: DuckDB matches identifiers
// case-insensitively even when they are quoted, and gapless matches model
// names the same way. (PostgreSQL folds only unquoted identifiers, so two
// PostgreSQL tables that differ only in the case of a quoted name are not
// told apart.) Catalog and Schema are empty when the reference does not
// spell them out; resolving defaults is the caller's job.
//
// Offset is the byte offset in the parsed input of the first occurrence of
// the reference, or -1 if DuckDB did not record one.
type TableRef struct {
	Catalog string
	Schema  string
	Name    string
	Offset  int
}

// String renders the reference as dotted, lower-cased parts, omitting empty
// leading parts.
func (t TableRef) String() string {
	switch {
	case t.Catalog != "":
		return t.Catalog + "." + t.Schema + "." + t.Name
	case t.Schema != "":
		return t.Schema + "." + t.Name
	default:
		return t.Name
	}
}

// FunctionRef is a table function called in a FROM clause, such as
// read_csv('x.csv') or range(10). Table functions are not dependencies on
// other models; they are exposed so that callers can allow or forbid them.
// Name is lower-cased and includes the schema when one was written
// ("myschema.fn"). Offset is as for TableRef.
type FunctionRef struct {
	Name   string
	Offset int
}

// FileRef is a string literal used as a table, which DuckDB resolves by a
// replacement scan (FROM 'data/events.parquet'). Path keeps its case.
// Offset is as for TableRef.
type FileRef struct {
	Path   string
	Offset int
}

// Projection is one entry of the top-level select list.
type Projection struct {
	// Name is the alias if one is given, else the last part of a column
	// reference (t.a -> "a"), else "" (DuckDB derives a name at bind time).
	Name string
	// Canonical is the expression's parse tree as deterministic JSON, with
	// source positions and the alias removed. Two projections compute the
	// same thing as far as the parser can tell iff their Canonical strings
	// are equal.
	Canonical string
}

// Query is the result of parsing one model query. It is immutable after
// Parse returns and safe to share between goroutines.
type Query struct {
	// Tables lists every base table the query reads, deduplicated and
	// sorted by (Catalog, Schema, Name). References to CTEs are excluded
	// where the CTE is in scope: a CTE name shadows tables in the main
	// query of its WITH clause, in the CTEs declared after it, and (for a
	// recursive CTE) in its own body; the same name outside that scope is a
	// real table. Names starting with PlaceholderPrefix are excluded.
	Tables []TableRef
	// Occurrences lists every reference to a base table that Tables
	// summarises, one per place it is written, in offset order (unknown
	// offsets, -1, first). RewriteTables uses them.
	Occurrences []TableRef
	// TableFunctions lists the table functions called in FROM clauses,
	// deduplicated by name and sorted.
	TableFunctions []FunctionRef
	// Files lists string literals used as tables, deduplicated and sorted.
	Files []FileRef
	// Canonical is DuckDB's rendering of the parse tree back to SQL
	// (json_deserialize_sql(json_serialize_sql(q))). It is insensitive to
	// whitespace, comments and keyword case, and it is what fingerprints
	// hash. It is valid DuckDB SQL but is not meant to be executed; it
	// drops identifier quotes DuckDB does not need, so "Col" and Col (which
	// differ in PostgreSQL) canonicalise equal. If DuckDB cannot render a
	// tree it accepted, Canonical falls back to "ast:" followed by the
	// parse tree as deterministic JSON with positions removed. Canonical
	// depends on the DuckDB version, and it is not always a fixpoint
	// (parsing a canonical VALUES query wraps it once more), so compare
	// canonical forms of sources, never of earlier canonical forms.
	Canonical string
	// Projections is the top-level select list in order. For a top-level
	// set operation (UNION, ...) it is the select list of the leftmost
	// SELECT, which names the output columns. VALUES lists appear as
	// SELECT * over the list.
	Projections []Projection
	// Star reports whether the top-level select list contains a star
	// expression (*, t.*, * EXCLUDE (...), COLUMNS(...)).
	Star bool
	// SetOperation reports whether the top-level query is a UNION,
	// INTERSECT or EXCEPT.
	SetOperation bool

	// shape is what AdditiveOnly compares, computed on first use: most
	// queries are never compared, and it costs as much as parsing.
	shape *lazyShape
}

// lazyShape computes a Query's selectShape once, on demand. It keeps
// DuckDB's JSON text rather than the decoded tree, which is several times
// larger in memory; a plan holds one Query per model.
type lazyShape struct {
	once  sync.Once
	src   string
	tree  string
	funcs funcCatalog
	shape *selectShape // nil unless the top-level query is a plain SELECT
	// readsOnce holds the query's Reads, computed on first use.
	readsOnce readsCache
}

func (l *lazyShape) get() *selectShape {
	if l == nil {
		return nil
	}
	l.once.Do(func() {
		stmt, err := decodeStatement(l.src, l.tree)
		if err != nil {
			return // Parse decoded the same text; cannot happen
		}
		normalised, _ := normalise(stmt).(map[string]any)
		node, _ := asObject(normalised["node"])
		if stringField(node, "type") == "SELECT_NODE" {
			l.shape = newSelectShape(normalised, node, l.funcs)
		}
	})
	return l.shape
}

// Parser parses SQL with DuckDB's parser. It holds one in-memory DuckDB
// database used only for parsing. A Parser is safe for concurrent use; Close
// it when done.
type Parser struct {
	db        *sql.DB
	parse     *sql.Stmt // serialises and renders the canonical text
	serialize *sql.Stmt // serialises only; used when rendering fails
	render    *sql.Stmt // renders a serialised tree
	funcs     funcCatalog
}

// parseQuery serialises the input to JSON and, when that yields a
// statement list, renders the canonical SQL in the same round trip. The
// CASE guards json_deserialize_sql, which raises on an error document; it
// tests the text DuckDB writes rather than extracting JSON fields, which
// costs a third of the query. Should a DuckDB release change that text,
// Parse notices the missing rendering and asks for it separately
// (renderQuery), so only speed depends on the prefix, never the result.
const parseQuery = `WITH s AS (SELECT json_serialize_sql(?::VARCHAR)::VARCHAR AS j)
SELECT j, CASE WHEN starts_with(j, '{"error":false,"statements":[{') THEN json_deserialize_sql(j::JSON)::VARCHAR END
FROM s`

const serializeQuery = `SELECT json_serialize_sql(?::VARCHAR)::VARCHAR`

const renderQuery = `SELECT json_deserialize_sql(?::JSON)::VARCHAR`

// Open starts a Parser on a fresh in-memory DuckDB database.
func Open() (*Parser, error) {
	ctx := context.Background()
	// One DuckDB worker thread: the database only parses, and a thread
	// pool would just compete with the caller for cores.
	db, err := sql.Open("duckdb", "?threads=1")
	if err != nil {
		return nil, fmt.Errorf("sqlparse: open in-memory duckdb: %w", err)
	}
	// Parsing is CPU-bound; keep one idle connection per processor so
	// concurrent callers do not reconnect on every call.
	db.SetMaxIdleConns(runtime.GOMAXPROCS(0))
	p := &Parser{db: db}
	if p.parse, err = db.PrepareContext(ctx, parseQuery); err != nil {
		return nil, errors.Join(fmt.Errorf("sqlparse: prepare parse statement: %w", err), db.Close())
	}
	if p.serialize, err = db.PrepareContext(ctx, serializeQuery); err != nil {
		return nil, errors.Join(fmt.Errorf("sqlparse: prepare serialize statement: %w", err), p.Close())
	}
	if p.render, err = db.PrepareContext(ctx, renderQuery); err != nil {
		return nil, errors.Join(fmt.Errorf("sqlparse: prepare render statement: %w", err), p.Close())
	}
	if p.funcs, err = processFuncCatalog(ctx, db); err != nil {
		return nil, errors.Join(err, p.Close())
	}
	return p, nil
}

// Close releases the DuckDB database. Parse fails after Close.
func (p *Parser) Close() error {
	var errs []error
	for _, s := range []*sql.Stmt{p.parse, p.serialize, p.render} {
		if s != nil {
			if err := s.Close(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := p.db.Close(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("sqlparse: close: %w", err)
	}
	return nil
}

// Parse parses src, which must hold exactly one query: a SELECT, a WITH
// query, a set operation, VALUES, or DuckDB's FROM-first shorthand
// (FROM t). A trailing semicolon is fine.
//
// Errors: *SyntaxError when DuckDB rejects the text (Offset points into
// src); ErrEmpty, ErrMultipleStatements or ErrNotAQuery (wrapped) for inputs
// of the wrong shape; ErrUnsupported (wrapped) for a tree this package
// cannot read; otherwise a wrapped database or context error. Parse never
// panics on any input.
func (p *Parser) Parse(ctx context.Context, src string) (*Query, error) {
	if err := checkText(src); err != nil {
		return nil, err
	}
	treeJSON, canonical, err := p.roundTrip(ctx, src)
	if err != nil {
		return nil, err
	}
	stmt, err := decodeStatement(src, treeJSON)
	if err != nil {
		return nil, err
	}
	node, ok := asObject(stmt["node"])
	if !ok {
		return nil, fmt.Errorf("%w: statement has no query node", ErrUnsupported)
	}
	if isShowStatement(node) {
		return nil, fmt.Errorf("%w: DESCRIBE, SHOW and SUMMARIZE are not model queries", ErrNotAQuery)
	}

	w := newRefWalker(src)
	w.walk(stmt, nil)

	if canonical == "" {
		if canonical, err = p.renderCanonical(ctx, treeJSON, stmt); err != nil {
			return nil, err
		}
	}
	q := &Query{
		Tables:         w.sortedTables(),
		Occurrences:    w.sortedOccurrences(),
		TableFunctions: w.sortedFunctions(),
		Files:          w.sortedFiles(),
		Canonical:      canonical,
		SetOperation:   stringField(node, "type") == "SET_OPERATION_NODE",
		shape:          &lazyShape{src: src, tree: treeJSON, funcs: p.funcs},
	}
	if sel := leftmostSelect(node); sel != nil {
		q.Projections, q.Star = projections(sel)
	}
	return q, nil
}

// renderCanonical asks DuckDB to render a tree that the combined query did
// not render. If DuckDB cannot (a round-trip limitation), the canonical
// form falls back to the normalised tree.
func (p *Parser) renderCanonical(ctx context.Context, treeJSON string, stmt map[string]any) (string, error) {
	var canon sql.NullString
	err := p.render.QueryRowContext(ctx, treeJSON).Scan(&canon)
	if ctxErr := ctx.Err(); ctxErr != nil {
		return "", fmt.Errorf("sqlparse: render canonical form: %w", ctxErr)
	}
	if err == nil && canon.Valid && canon.String != "" {
		return canon.String, nil
	}
	return "ast:" + marshalCanonical(normalise(stmt)), nil
}

// checkText rejects input DuckDB would silently misread: DuckDB reads its
// input as a C string, so a NUL byte would truncate the query and drop every
// reference after it, and a VARCHAR must be valid UTF-8.
func checkText(src string) error {
	if i := strings.IndexByte(src, 0); i >= 0 {
		return &SyntaxError{Message: "NUL byte in input", Offset: i}
	}
	if !utf8.ValidString(src) {
		for i, r := range src {
			if r == utf8.RuneError {
				if _, size := utf8.DecodeRuneInString(src[i:]); size == 1 {
					return &SyntaxError{Message: "invalid UTF-8", Offset: i}
				}
			}
		}
	}
	return nil
}

// roundTrip returns DuckDB's JSON for src and, when DuckDB could render it
// back, the canonical SQL ("" otherwise). A JSON error document is not an
// error here; decodeStatement interprets it.
func (p *Parser) roundTrip(ctx context.Context, src string) (treeJSON, canonical string, err error) {
	var canon sql.NullString
	err = p.parse.QueryRowContext(ctx, src).Scan(&treeJSON, &canon)
	if err == nil {
		return treeJSON, canon.String, nil
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		return "", "", fmt.Errorf("sqlparse: parse: %w", ctxErr)
	}
	// Rendering raised (a DuckDB round-trip limitation) or serialising did.
	// Serialise alone to tell the two apart; the canonical text then falls
	// back to the normalised tree.
	renderErr := err
	if err := p.serialize.QueryRowContext(ctx, src).Scan(&treeJSON); err != nil {
		return "", "", fmt.Errorf("sqlparse: parse: %w", errors.Join(err, renderErr))
	}
	return treeJSON, "", nil
}

// decodeStatement decodes DuckDB's JSON document for src and returns its
// single statement, or the error the document describes.
func decodeStatement(src, treeJSON string) (map[string]any, error) {
	dec := json.NewDecoder(strings.NewReader(treeJSON))
	dec.UseNumber() // keep literals exact: they take part in comparisons
	var root map[string]any
	if err := dec.Decode(&root); err != nil {
		return nil, fmt.Errorf("%w: decoding DuckDB's parse tree: %w", ErrUnsupported, err)
	}
	if failed, _ := root["error"].(bool); failed {
		return nil, documentError(src, root)
	}
	stmts, ok := root["statements"].([]any)
	if !ok {
		return nil, fmt.Errorf("%w: parse tree has no statement list", ErrUnsupported)
	}
	switch len(stmts) {
	case 0:
		return nil, ErrEmpty
	case 1:
	default:
		return nil, fmt.Errorf("%w: found %d", ErrMultipleStatements, len(stmts))
	}
	stmt, ok := asObject(stmts[0])
	if !ok {
		return nil, fmt.Errorf("%w: statement is not an object", ErrUnsupported)
	}
	return stmt, nil
}

// documentError turns json_serialize_sql's error document into an error.
// "not implemented" is DuckDB refusing to serialise a statement that is not
// a SELECT; every other error type comes from the parser itself.
func documentError(src string, root map[string]any) error {
	msg := stringField(root, "error_message")
	if stringField(root, "error_type") == "not implemented" {
		return fmt.Errorf("%w: %s", ErrNotAQuery, msg)
	}
	offset := -1
	if pos, err := strconv.Atoi(stringField(root, "position")); err == nil {
		offset = byteOffset(src, pos)
	}
	return &SyntaxError{Message: msg, Offset: offset}
}

// byteOffset converts DuckDB's error position, which counts Unicode code
// points (unlike query_location in the tree, which counts bytes), into a
// byte offset into src. It returns -1 for a position outside src.
func byteOffset(src string, codePoints int) int {
	if codePoints < 0 {
		return -1
	}
	n := 0
	for i := range src {
		if n == codePoints {
			return i
		}
		n++
	}
	if n == codePoints {
		return len(src)
	}
	return -1
}

// isShowStatement reports whether node is DuckDB's rewrite of DESCRIBE,
// SHOW or SUMMARIZE (a SELECT * directly over a SHOW_REF).
func isShowStatement(node map[string]any) bool {
	from, ok := asObject(node["from_table"])
	return ok && stringField(node, "type") == "SELECT_NODE" && stringField(from, "type") == "SHOW_REF"
}

// leftmostSelect returns the SELECT_NODE that names a query's output
// columns: the node itself, or for a set operation its leftmost SELECT.
func leftmostSelect(node map[string]any) map[string]any {
	for range 10_000 { // bound the descent; trees are far shallower
		switch stringField(node, "type") {
		case "SELECT_NODE":
			return node
		case "SET_OPERATION_NODE":
			left, ok := asObject(node["left"])
			if !ok {
				return nil
			}
			node = left
		default:
			return nil
		}
	}
	return nil
}

// projections describes a SELECT_NODE's select list.
func projections(sel map[string]any) ([]Projection, bool) {
	items, _ := sel["select_list"].([]any)
	out := make([]Projection, 0, len(items))
	star := false
	for _, item := range items {
		expr, _ := asObject(item)
		if stringField(expr, "class") == "STAR" {
			star = true
		}
		out = append(out, Projection{
			Name:      projectionName(expr),
			Canonical: marshalCanonical(normalise(withoutKey(expr, "alias"))),
		})
	}
	return out, star
}

// projectionName is the alias, else the last part of a column reference.
func projectionName(expr map[string]any) string {
	if alias := stringField(expr, "alias"); alias != "" {
		return alias
	}
	if stringField(expr, "class") == "COLUMN_REF" {
		if parts, ok := expr["column_names"].([]any); ok && len(parts) > 0 {
			last, _ := parts[len(parts)-1].(string)
			return last
		}
	}
	return ""
}
