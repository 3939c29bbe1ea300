package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/gapless-dev/gapless/warehouse"
)

// SQLSTATE codes the engine branches on.
const (
	codeUniqueViolation   = "23505"
	codeDuplicateSchema   = "42P06"
	codeInvalidTableDef   = "42P16" // e.g. "cannot drop columns from view"
	codeDatatypeMismatch  = "42804" // e.g. "cannot change data type of view column"
	codeSyntaxError       = "42601"
	codeUndefinedObject   = "42704"
	relkindTable          = "r"
	relkindPartitioned    = "p"
	relkindView           = "v"
	relkindMaterialized   = "m"
	relkindForeign        = "f"
	maxTypeNameLengthByte = 256
)

func pgCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// relation is a resolved table or view.
type relation struct {
	oid  uint32
	kind string // pg_class.relkind
}

func (r relation) isTable() bool { return r.kind == relkindTable || r.kind == relkindPartitioned }

const resolveSQL = `SELECT c.oid, c.relkind::text FROM pg_catalog.pg_class c WHERE c.oid = pg_catalog.to_regclass($1)`

// resolve finds t in the catalog. found is false when no relation has that
// name; names are matched exactly (they are passed quoted to to_regclass).
func resolve(ctx context.Context, db execer, t warehouse.Table) (rel relation, found bool, err error) {
	err = db.QueryRow(ctx, resolveSQL, quoteTable(t)).Scan(&rel.oid, &rel.kind)
	if errors.Is(err, pgx.ErrNoRows) {
		return relation{}, false, nil
	}
	if err != nil {
		return relation{}, false, &stepError{sql: resolveSQL, err: err}
	}
	return rel, true, nil
}

// mustResolveTable resolves t and requires it to be a table.
func mustResolveTable(ctx context.Context, db execer, t warehouse.Table) (relation, error) {
	rel, found, err := resolve(ctx, db, t)
	if err != nil {
		return relation{}, err
	}
	if !found {
		return relation{}, warehouse.ErrNotFound
	}
	if !rel.isTable() {
		return relation{}, fmt.Errorf("%w: relkind %q", warehouse.ErrNotATable, rel.kind)
	}
	return rel, nil
}

// checkQualified validates t and requires a schema: the engine always works
// on schema-qualified names, never on whatever search_path resolves.
func (e *Engine) checkQualified(t warehouse.Table) error {
	if t.Schema == "" {
		return fmt.Errorf("%w: table %q has no schema", warehouse.ErrInvalidIdentifier, t.Name)
	}
	return e.checkTable(t)
}

// subquery renders q (trimmed) as a parenthesised subquery, on lines of its
// own: a line comment the trimming missed still cannot swallow the closing
// parenthesis.
func subquery(q string) string { return "(\n" + q + "\n)" }

// CreateSchema creates schema if it does not exist. Two sessions creating
// the same schema at once can make PostgreSQL's IF NOT EXISTS fail with a
// unique violation; that race counts as success when the schema exists.
func (e *Engine) CreateSchema(ctx context.Context, schema string) error {
	const op = "create schema"
	if err := e.checkIdent("schema", schema); err != nil {
		return fail(op, schema, "", err)
	}
	sql := "CREATE SCHEMA IF NOT EXISTS " + quoteIdent(schema)
	_, err := execOne(ctx, e.pool, sql)
	if c := pgCode(err); c == codeUniqueViolation || c == codeDuplicateSchema {
		var exists bool
		const q = `SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = $1)`
		if qerr := e.pool.QueryRow(ctx, q, schema).Scan(&exists); qerr == nil && exists {
			return nil
		}
	}
	return fail(op, schema, sql, err)
}

// CreateTable creates an empty table with the given columns. It fails when
// the table exists. Every column type must be exactly one PostgreSQL type
// name (as Columns returns them, or as written in DDL: "bigint",
// "numeric(10,2)", "timestamp with time zone", "text[]"); anything else,
// say a DEFAULT clause or a comment, is refused with warehouse.ErrInvalidType before
// any DDL runs.
func (e *Engine) CreateTable(ctx context.Context, p warehouse.CreateTableParams) error {
	const op = "create table"
	obj := p.Table.String()
	sql, err := e.createTableSQL(ctx, p)
	if err != nil {
		return fail(op, obj, "", err)
	}
	if _, err := e.CheckLayout(p.Layout); err != nil {
		return fail(op, obj, "", err)
	}
	sql += withClause(p.Layout)
	if p.Layout.HasComments() {
		return failStep(op, obj, e.inTx(ctx, func(tx pgx.Tx) error {
			return execAll(ctx, tx, append([]string{sql}, commentsOf(p.Table, p.Layout)...))
		}))
	}
	_, err = execOne(ctx, e.pool, sql)
	return fail(op, obj, sql, err)
}

// createTableSQL is the CREATE TABLE statement of p, its names and types
// checked (see CreateTable).
func (e *Engine) createTableSQL(ctx context.Context, p warehouse.CreateTableParams) (string, error) {
	if err := e.checkQualified(p.Table); err != nil {
		return "", err
	}
	if len(p.Columns) == 0 {
		return "", fmt.Errorf("%w: no columns", warehouse.ErrInvalidArgument)
	}
	types := make([]string, len(p.Columns))
	for i, c := range p.Columns {
		if err := e.checkIdent("column", c.Name); err != nil {
			return "", err
		}
		types[i] = c.Type
	}
	if err := e.checkTypes(ctx, types); err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString("CREATE TABLE ")
	b.WriteString(quoteTable(p.Table))
	b.WriteString(" (\n")
	for i, c := range p.Columns {
		if i > 0 {
			b.WriteString(",\n")
		}
		b.WriteString("  ")
		b.WriteString(quoteIdent(c.Name))
		b.WriteString(" ")
		b.WriteString(strings.TrimSpace(c.Type))
	}
	b.WriteString("\n)")
	return b.String(), nil
}

// checkTypes makes sure each string is one type name and nothing else.
// Lexically: only letters, digits, underscores, spaces, dots, commas,
// balanced parentheses and brackets, and double-quoted identifiers; so no
// comment, literal, statement separator or dollar quote can hide in it.
// Then the server's to_regtype must resolve it (it parses the string as a
// type name and nothing more).
func (e *Engine) checkTypes(ctx context.Context, types []string) error {
	for _, t := range types {
		if err := lexType(t); err != nil {
			return fmt.Errorf("%w %q: %w", warehouse.ErrInvalidType, t, err)
		}
	}
	const q = `SELECT u.t FROM pg_catalog.unnest($1::text[]) AS u(t) WHERE pg_catalog.to_regtype(u.t) IS NULL`
	rows, err := e.pool.Query(ctx, q, types)
	if err != nil {
		return &stepError{sql: q, err: err}
	}
	unknown, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		if c := pgCode(err); c == codeSyntaxError || c == codeUndefinedObject {
			return fmt.Errorf("%w: %w", warehouse.ErrInvalidType, err)
		}
		return &stepError{sql: q, err: err}
	}
	if len(unknown) > 0 {
		return fmt.Errorf("%w: unknown type %q", warehouse.ErrInvalidType, unknown[0])
	}
	return nil
}

func lexType(t string) error {
	if strings.TrimSpace(t) == "" {
		return errors.New("empty")
	}
	if len(t) > maxTypeNameLengthByte {
		return errors.New("too long")
	}
	if !utf8.ValidString(t) {
		return errors.New("not valid UTF-8")
	}
	depth := 0
	inQuote := false
	for _, r := range t {
		if inQuote {
			// A doubled quote closes and reopens: the net effect of the
			// toggle is right.
			if r == '"' {
				inQuote = false
			} else if r == 0 {
				return errors.New("NUL byte")
			}
			continue
		}
		switch {
		case r == '"':
			inQuote = true
		case r == '(' || r == '[':
			depth++
		case r == ')' || r == ']':
			depth--
			if depth < 0 {
				return errors.New("unbalanced parentheses")
			}
		case r == ',':
			if depth == 0 {
				return errors.New("comma outside parentheses")
			}
		case r == ' ' || r == '.' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
		default:
			return fmt.Errorf("character %q not allowed", r)
		}
	}
	if inQuote {
		return errors.New("unterminated quoted identifier")
	}
	if depth != 0 {
		return errors.New("unbalanced parentheses")
	}
	return nil
}

// CreateTableAs creates a table from a query: with WithData false it gets
// the query's columns and no rows (CREATE TABLE AS … WITH NO DATA; the query
// is planned but not run). It fails when the table exists.
func (e *Engine) CreateTableAs(ctx context.Context, p warehouse.CreateTableAsParams) error {
	const op = "create table as"
	obj := p.Table.String()
	if err := e.checkQualified(p.Table); err != nil {
		return fail(op, obj, "", err)
	}
	q, err := trimQuery(p.Query)
	if err != nil {
		return fail(op, obj, "", err)
	}
	if _, err := e.CheckLayout(p.Layout); err != nil {
		return fail(op, obj, "", err)
	}
	sql := "CREATE TABLE " + quoteTable(p.Table) + withClause(p.Layout) + " AS " + subquery(q)
	if p.WithData {
		sql += " WITH DATA"
	} else {
		sql += " WITH NO DATA"
	}
	if p.Layout.HasComments() {
		return failStep(op, obj, e.inTx(ctx, func(tx pgx.Tx) error {
			return execAll(ctx, tx, append([]string{sql}, commentsOf(p.Table, p.Layout)...))
		}))
	}
	_, err = execOne(ctx, e.pool, sql)
	return fail(op, obj, sql, err)
}

// TableExists reports whether a table or view (including materialized,
// partitioned and foreign tables) is named t. Indexes, sequences and types
// of that name do not count.
func (e *Engine) TableExists(ctx context.Context, t warehouse.Table) (bool, error) {
	const op = "table exists"
	if err := e.checkQualified(t); err != nil {
		return false, fail(op, t.String(), "", err)
	}
	rel, found, err := resolve(ctx, e.pool, t)
	if err != nil {
		return false, failStep(op, t.String(), err)
	}
	if !found {
		return false, nil
	}
	switch rel.kind {
	case relkindTable, relkindPartitioned, relkindView, relkindMaterialized, relkindForeign:
		return true, nil
	}
	return false, nil
}

// TablesExist reports, for each table of tables, what TableExists reports,
// in one query: names are matched exactly, a missing schema is "no".
func (e *Engine) TablesExist(ctx context.Context, tables []warehouse.Table) ([]bool, error) {
	const op = "tables exist"
	found := make([]bool, len(tables))
	if len(tables) == 0 {
		return found, nil
	}
	names := make([]string, len(tables))
	for i, t := range tables {
		if err := e.checkQualified(t); err != nil {
			return nil, fail(op, t.String(), "", err)
		}
		names[i] = quoteTable(t)
	}
	object := tables[0].String()
	if len(tables) > 1 {
		object = fmt.Sprintf("%s and %d more tables", object, len(tables)-1)
	}
	rows, err := e.pool.Query(ctx, tablesExistSQL, names)
	if err != nil {
		return nil, fail(op, object, tablesExistSQL, err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[bool])
	if err != nil {
		return nil, fail(op, object, tablesExistSQL, err)
	}
	if len(got) != len(tables) {
		return nil, fail(op, object, tablesExistSQL, fmt.Errorf("%d answers for %d tables", len(got), len(tables)))
	}
	return got, nil
}

// tablesExistSQL answers, in the order of $1 (quoted qualified names), the
// question TableExists asks: is it a table or view of a kind it counts.
const tablesExistSQL = `SELECT coalesce((SELECT c.relkind::text IN ('r', 'p', 'v', 'm', 'f')
  FROM pg_catalog.pg_class c WHERE c.oid = pg_catalog.to_regclass(u.name)), false)
FROM unnest($1::text[]) WITH ORDINALITY AS u(name, i) ORDER BY u.i`

const columnsSQL = `SELECT a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod), a.atttypid
FROM pg_catalog.pg_attribute a
WHERE a.attrelid = $1 AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum`

// column is a catalog column with its type oid.
type column struct {
	warehouse.Column
	typeOID uint32
}

func columnsOf(ctx context.Context, db execer, oid uint32) ([]column, error) {
	rows, err := db.Query(ctx, columnsSQL, oid)
	if err != nil {
		return nil, &stepError{sql: columnsSQL, err: err}
	}
	cols, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (column, error) {
		var c column
		err := r.Scan(&c.Name, &c.Type, &c.typeOID)
		return c, err
	})
	if err != nil {
		return nil, &stepError{sql: columnsSQL, err: err}
	}
	return cols, nil
}

// Columns returns t's columns in ordinal order, each type spelled by
// format_type ("bigint", "timestamp without time zone", "numeric(10,2)").
// A missing t is an error wrapping warehouse.ErrNotFound.
func (e *Engine) Columns(ctx context.Context, t warehouse.Table) ([]warehouse.Column, error) {
	const op = "columns"
	obj := t.String()
	if err := e.checkQualified(t); err != nil {
		return nil, fail(op, obj, "", err)
	}
	rel, found, err := resolve(ctx, e.pool, t)
	if err != nil {
		return nil, failStep(op, obj, err)
	}
	if !found {
		return nil, fail(op, obj, resolveSQL, warehouse.ErrNotFound)
	}
	cols, err := columnsOf(ctx, e.pool, rel.oid)
	if err != nil {
		return nil, failStep(op, obj, err)
	}
	out := make([]warehouse.Column, len(cols))
	for i, c := range cols {
		out[i] = c.Column
	}
	return out, nil
}

// DropTable drops table t if it exists. It never cascades: when a view or
// anything else depends on t, it fails (SQLSTATE 2BP01) and drops nothing.
// gapless drops a physical table only once no environment's views read it,
// so a dependent here means something unexpected still reads the table,
// and silently dropping that reader would serve a gap.
func (e *Engine) DropTable(ctx context.Context, t warehouse.Table) error {
	return e.drop(ctx, "drop table", "DROP TABLE IF EXISTS ", t)
}

// DropView drops view t if it exists. Like DropTable it never cascades.
func (e *Engine) DropView(ctx context.Context, t warehouse.Table) error {
	return e.drop(ctx, "drop view", "DROP VIEW IF EXISTS ", t)
}

func (e *Engine) drop(ctx context.Context, op, stmt string, t warehouse.Table) error {
	obj := t.String()
	if err := e.checkQualified(t); err != nil {
		return fail(op, obj, "", err)
	}
	sql := stmt + quoteTable(t)
	_, err := execOne(ctx, e.pool, sql)
	return fail(op, obj, sql, err)
}

// CreateOrReplaceView points view p.View at p.Query.
//
// PostgreSQL's CREATE OR REPLACE VIEW keeps the view's identity (its grants
// and the views built on it stay) but cannot drop, rename or retype
// columns. When it refuses for that reason, the engine builds the new view
// beside the old one and swaps it in, in one transaction, rebuilding the
// views that depend on the old one and restoring grants and comments (see
// swapIn). Either way readers see the old view until the commit and the
// new one after it; on any failure the old view is untouched.
func (e *Engine) CreateOrReplaceView(ctx context.Context, p warehouse.ViewParams) error {
	const op = "create or replace view"
	obj := p.View.String()
	if err := e.checkQualified(p.View); err != nil {
		return fail(op, obj, "", err)
	}
	q, err := trimQuery(p.Query)
	if err != nil {
		return fail(op, obj, "", err)
	}
	v := newViewStmt(p.View, q)
	err = e.inTx(ctx, func(tx pgx.Tx) error {
		if err := lockName(ctx, tx, p.View); err != nil {
			return err
		}
		sp, err := tx.Begin(ctx)
		if err != nil {
			return err
		}
		_, rerr := execOne(ctx, sp, v.replaceSQL)
		if rerr == nil {
			return sp.Commit(ctx)
		}
		if err := sp.Rollback(ctx); err != nil {
			return err
		}
		return swapView(ctx, tx, v, rerr)
	})
	return failStep(op, obj, err)
}

// viewStmt is a view to create or replace, rendered.
type viewStmt struct {
	view       warehouse.Table
	body       string // " AS (<query>)"
	replaceSQL string // CREATE OR REPLACE VIEW <view> AS (<query>)
}

// newViewStmt renders view as q, a query already trimmed by trimQuery.
func newViewStmt(view warehouse.Table, q string) viewStmt {
	body := " AS " + subquery(q)
	return viewStmt{view: view, body: body, replaceSQL: "CREATE OR REPLACE VIEW " + quoteTable(view) + body}
}

// isColumnChange reports whether PostgreSQL refused a CREATE OR REPLACE
// VIEW because the new query drops, renames or retypes a column: the one
// refusal that building beside and swapping in can get past.
func isColumnChange(err error) bool {
	c := pgCode(err)
	return c == codeInvalidTableDef || c == codeDatatypeMismatch
}

// swapView finishes a CREATE OR REPLACE VIEW that PostgreSQL refused with
// rerr, inside tx, whose caller holds the advisory lock on v's name and has
// rolled the refused statement back. When the refusal is a column change of
// an existing view it builds the new view beside the old one and swaps it
// in (see swapIn, which empties search_path until the commit); any other
// refusal is returned as the failure of v.replaceSQL.
func swapView(ctx context.Context, tx pgx.Tx, v viewStmt, rerr error) error {
	if !isColumnChange(rerr) {
		return &stepError{sql: v.replaceSQL, err: rerr}
	}
	old, found, err := resolve(ctx, tx, v.view)
	if err != nil {
		return err
	}
	if !found || old.kind != relkindView {
		return &stepError{sql: v.replaceSQL, err: rerr}
	}
	tmp, err := tempName()
	if err != nil {
		return err
	}
	tmpTable := warehouse.Table{Schema: v.view.Schema, Name: tmp}
	if _, err := exec(ctx, tx, "CREATE VIEW "+quoteTable(tmpTable)+v.body); err != nil {
		return err
	}
	return swapIn(ctx, tx, v.view, old, tmp)
}
