package duckdb

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/gapless-dev/gapless/warehouse"
)

// CreateSchema creates schema if it does not exist yet.
func (e *Engine) CreateSchema(ctx context.Context, schema string) error {
	const op = "create schema"
	if err := checkIdent("schema", schema); err != nil {
		return fail(op, schema, err)
	}
	q := "CREATE SCHEMA IF NOT EXISTS " + quoteIdent(schema)
	return fail(op, schema, e.write(ctx, func(s *session) error {
		_, err := s.exec(ctx, q)
		return err
	}))
}

// CreateTable creates an empty table with p.Columns, in order. It fails when
// a table or view of that name exists. Column types are SQL text, so they
// must pass a strict grammar (words, numbers, quoted strings and names,
// balanced brackets with commas inside): DECIMAL(12,2) and
// STRUCT("a b" INTEGER) pass, "INTEGER); DROP TABLE x; --" does not.
func (e *Engine) CreateTable(ctx context.Context, p warehouse.CreateTableParams) error {
	const op = "create table"
	object := p.Table.String()
	q, err := createTableSQL(p)
	if err != nil {
		return fail(op, object, err)
	}
	if _, err := e.CheckLayout(p.Layout); err != nil {
		return fail(op, object, err)
	}
	return fail(op, object, e.write(ctx, func(s *session) error {
		defer e.shared.cols.forget(p.Table)
		if p.Layout.HasComments() {
			return s.inTx(ctx, func() error { return execAll(ctx, s, append([]string{q}, commentsOf(p.Table, p.Layout)...)) })
		}
		_, err := s.exec(ctx, q)
		return err
	}))
}

// createTableSQL is the CREATE TABLE statement of p, its names and types
// checked (see CreateTable).
func createTableSQL(p warehouse.CreateTableParams) (string, error) {
	if err := checkTable(p.Table); err != nil {
		return "", err
	}
	if len(p.Columns) == 0 {
		return "", invalidf("a table needs at least one column")
	}
	defs := make([]string, len(p.Columns))
	for i, c := range p.Columns {
		if err := checkIdent("column", c.Name); err != nil {
			return "", err
		}
		if err := checkType(c.Type); err != nil {
			return "", fmt.Errorf("column %q: %w", c.Name, err)
		}
		defs[i] = quoteIdent(c.Name) + " " + c.Type
	}
	return "CREATE TABLE " + quoteTable(p.Table) + " (" + strings.Join(defs, ", ") + ")", nil
}

// CreateTableAs creates a table from p.Query: with its rows when WithData,
// with its columns only otherwise. It fails when a table or view of that
// name exists. Without data and with p.Columns that are plain (see
// plainColumns), the table is made from p.Columns, and p.Query is not
// bound: a CREATE TABLE without a query plans in a fraction of the time.
// Either way the table is then empty as made (see columnCache.made).
func (e *Engine) CreateTableAs(ctx context.Context, p warehouse.CreateTableAsParams) error {
	const op = "create table as"
	object := p.Table.String()
	if err := checkTable(p.Table); err != nil {
		return fail(op, object, err)
	}
	if err := checkSQL("query", p.Query); err != nil {
		return fail(op, object, err)
	}
	if _, err := e.CheckLayout(p.Layout); err != nil {
		return fail(op, object, err)
	}
	comments := commentsOf(p.Table, p.Layout)
	q := "CREATE TABLE " + quoteTable(p.Table) + " AS\n" + body(p.Query) + "\n"
	fromColumns := "" // CREATE TABLE of p.Columns, when they are given and plain
	if !p.WithData {
		q = "CREATE TABLE " + quoteTable(p.Table) + " AS SELECT * FROM (\n" + body(p.Query) + "\n) AS gapless_q LIMIT 0"
		if plainColumns(p.Columns) {
			if create, err := createTableSQL(warehouse.CreateTableParams{Table: p.Table, Columns: p.Columns}); err == nil {
				fromColumns = create
			}
		}
	}
	return fail(op, object, e.write(ctx, func(s *session) error {
		if fromColumns != "" && ctx.Err() == nil {
			if _, err := s.exec(ctx, fromColumns); err == nil {
				e.shared.cols.forget(p.Table)
				e.shared.cols.markMade(p.Table, slices.Clone(p.Columns))
				if err := commentMade(ctx, s, p.Table, comments); err != nil {
					e.shared.cols.forget(p.Table)
					return err
				}
				return nil
			}
			// Nothing was made (the statement is its own transaction):
			// the query decides, and says why if it fails too.
		}
		_, err := s.exec(ctx, q)
		e.shared.cols.forget(p.Table)
		if err == nil && !p.WithData {
			e.shared.cols.markMade(p.Table, nil)
		}
		if err != nil {
			return err
		}
		if err := commentMade(ctx, s, p.Table, comments); err != nil {
			e.shared.cols.forget(p.Table)
			return err
		}
		return nil
	}))
}

// plainColumns reports whether cols can make a table in place of the
// query they were derived for: there are some, their names are distinct as
// DuckDB compares names (CREATE TABLE AS would rename a duplicate; CREATE
// TABLE refuses it), and each type is a plain one spelt as DESCRIBE spells
// it (plainName), so that the table's types are exactly those named and a
// first build can compare them with the query's by name.
func plainColumns(cols []warehouse.Column) bool {
	if len(cols) == 0 {
		return false
	}
	seen := make(map[string]bool, len(cols))
	for _, c := range cols {
		key := foldASCII(c.Name)
		if seen[key] || !isPlainName(c.Type) {
			return false
		}
		seen[key] = true
	}
	return true
}

// CreateOrReplaceView creates p.View as p.Query, or re-points it if it
// exists; the new query may have different columns. It fails, changing
// nothing, when a table has that name. DuckDB binds a view's names when it
// is queried, so a view over a table keeps working across ReplaceTable.
func (e *Engine) CreateOrReplaceView(ctx context.Context, p warehouse.ViewParams) error {
	const op = "create or replace view"
	object := p.View.String()
	if err := checkTable(p.View); err != nil {
		return fail(op, object, err)
	}
	if err := checkSQL("query", p.Query); err != nil {
		return fail(op, object, err)
	}
	q := "CREATE OR REPLACE VIEW " + quoteTable(p.View) + " AS\n" + body(p.Query) + "\n"
	return fail(op, object, e.write(ctx, func(s *session) error {
		defer e.shared.cols.forget(p.View)
		_, err := s.exec(ctx, q)
		return err
	}))
}

// DropTable drops table t. It succeeds when neither t nor its schema
// exists, and fails, dropping nothing, when t is a view.
func (e *Engine) DropTable(ctx context.Context, t warehouse.Table) error {
	return e.drop(ctx, "drop table", "TABLE", t)
}

// DropView drops view t. It succeeds when neither t nor its schema exists,
// and fails, dropping nothing, when t is a table.
func (e *Engine) DropView(ctx context.Context, t warehouse.Table) error {
	return e.drop(ctx, "drop view", "VIEW", t)
}

func (e *Engine) drop(ctx context.Context, op, kind string, t warehouse.Table) error {
	object := t.String()
	if err := checkTable(t); err != nil {
		return fail(op, object, err)
	}
	q := "DROP " + kind + " IF EXISTS " + quoteTable(t)
	return fail(op, object, e.write(ctx, func(s *session) error {
		defer e.shared.cols.forget(t)
		_, err := s.exec(ctx, q)
		return err
	}))
}

// TableExists reports whether a table or view named t exists. Names are
// matched as DuckDB's catalog matches them: ASCII letters case-insensitively,
// everything else exactly.
func (e *Engine) TableExists(ctx context.Context, t warehouse.Table) (bool, error) {
	const op = "table exists"
	object := t.String()
	if err := checkTable(t); err != nil {
		return false, fail(op, object, err)
	}
	var found bool
	err := e.read(ctx, func(s *session) error {
		res, err := s.query(ctx, tablesSQL, t.Schema, t.Name)
		if err != nil {
			return err
		}
		for _, row := range res.Rows {
			if sameTable(row, t) {
				found = true
			}
		}
		return nil
	})
	return found, fail(op, object, err)
}

// TablesExist reports, for each table of tables, whether a table or view of
// that name exists, as TableExists would, reading the catalog once per
// schema: a lookup in DuckDB's catalog functions scans every entry (about
// 30 ms at 10,000 tables; the listing about 50 ms, see
// BenchmarkCatalogLookup), so N lookups cost N scans and one listing costs
// one. Names are matched by DuckDB's rule (ASCII letters
// case-insensitively), by folding both sides.
func (e *Engine) TablesExist(ctx context.Context, tables []warehouse.Table) ([]bool, error) {
	const op = "tables exist"
	found := make([]bool, len(tables))
	if len(tables) == 0 {
		return found, nil
	}
	var schemas []string
	seen := map[string]bool{}
	for _, t := range tables {
		if err := checkTable(t); err != nil {
			return nil, fail(op, t.String(), err)
		}
		if k := foldASCII(t.Schema); !seen[k] {
			seen[k] = true
			schemas = append(schemas, t.Schema)
		}
	}
	object := tables[0].String()
	if len(tables) > 1 {
		object = fmt.Sprintf("%s and %d more tables", object, len(tables)-1)
	}
	present := map[string]bool{}
	err := e.read(ctx, func(s *session) error {
		for _, schema := range schemas {
			res, err := s.query(ctx, schemaTablesSQL, schema)
			if err != nil {
				return err
			}
			for _, row := range res.Rows {
				sch, _ := row[0].(string)
				name, _ := row[1].(string)
				if asciiFoldEqual(sch, schema) {
					present[foldASCII(sch)+"\x00"+foldASCII(name)] = true
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, fail(op, object, err)
	}
	for i, t := range tables {
		found[i] = present[foldASCII(t.Schema)+"\x00"+foldASCII(t.Name)]
	}
	return found, nil
}

// schemaTablesSQL lists the candidate tables and views of one schema;
// TablesExist then applies DuckDB's exact rule (see tablesSQL).
const schemaTablesSQL = `SELECT table_schema, table_name FROM information_schema.tables
WHERE table_catalog = current_database() AND lower(table_schema) = lower($1)`

// tablesSQL finds candidate tables and views; sameTable then applies
// DuckDB's exact rule. lower() folds more than DuckDB's catalog does, so the
// candidates are a superset.
const tablesSQL = `SELECT table_schema, table_name FROM information_schema.tables
WHERE table_catalog = current_database() AND lower(table_schema) = lower($1) AND lower(table_name) = lower($2)`

func sameTable(row []any, t warehouse.Table) bool {
	schema, _ := row[0].(string)
	name, _ := row[1].(string)
	return asciiFoldEqual(schema, t.Schema) && asciiFoldEqual(name, t.Name)
}

// Columns returns the columns of table or view t in order, with their types
// as DuckDB spells them (BIGINT, VARCHAR, DECIMAL(12,2), TIMESTAMP WITH TIME
// ZONE, ...): text that CreateTable accepts back. It fails when t does not
// exist.
func (e *Engine) Columns(ctx context.Context, t warehouse.Table) ([]warehouse.Column, error) {
	const op = "columns"
	object := t.String()
	if err := checkTable(t); err != nil {
		return nil, fail(op, object, err)
	}
	var cols []warehouse.Column
	err := e.read(ctx, func(s *session) error {
		var err error
		cols, err = columns(ctx, s, t)
		return err
	})
	return cols, fail(op, object, err)
}

const columnsSQL = `SELECT table_schema, table_name, column_name, data_type FROM information_schema.columns
WHERE table_catalog = current_database() AND lower(table_schema) = lower($1) AND lower(table_name) = lower($2)
ORDER BY ordinal_position`

// exactColumnsSQL is the fast path of columns: an exact-name lookup in
// duckdb_columns(), about 3x cheaper than columnsSQL. gapless always spells
// its own tables exactly, and InsertInterval asks on every batch.
const exactColumnsSQL = `SELECT schema_name, table_name, column_name, data_type FROM duckdb_columns()
WHERE database_name = current_database() AND schema_name = $1 AND table_name = $2
ORDER BY column_index`

// columns reads t's columns on s (inside the caller's transaction, if any).
// It tries the exact name first and falls back to DuckDB's case-insensitive
// rule, so both paths give the same answer.
func columns(ctx context.Context, s *session, t warehouse.Table) ([]warehouse.Column, error) {
	res, err := s.query(ctx, exactColumnsSQL, t.Schema, t.Name)
	if err != nil {
		return nil, err
	}
	if len(res.Rows) == 0 {
		res, err = s.query(ctx, columnsSQL, t.Schema, t.Name)
		if err != nil {
			return nil, err
		}
	}
	var cols []warehouse.Column
	for _, row := range res.Rows {
		if !sameTable(row, t) {
			continue
		}
		name, _ := row[2].(string)
		typ, _ := row[3].(string)
		cols = append(cols, warehouse.Column{Name: name, Type: typ})
	}
	if len(cols) == 0 {
		return nil, &stmtError{sql: columnsSQL, err: fmt.Errorf("%w: %s", warehouse.ErrNotFound, t)}
	}
	return cols, nil
}

// CreateOrReplaceViews creates or re-points every view of views, in order,
// in one write transaction. DuckDB's MVCC serves readers the snapshot that
// was committed when their statement began, so a reader sees every old
// definition or every new one, never a mix. Every name and query is
// checked before anything runs; a failing statement (a query that does not
// bind, a table holding a view's name) rolls the whole batch back, so on
// any failure no view has changed. The error names the view that failed.
// An empty batch takes no lock and runs nothing. A batch that names one
// view twice (by DuckDB's catalog rule: ASCII letters case-insensitively)
// is refused, since which definition should win would be a guess.
func (e *Engine) CreateOrReplaceViews(ctx context.Context, views []warehouse.ViewParams) error {
	const op = "create or replace views"
	if len(views) == 0 {
		return nil
	}
	stmts := make([]string, len(views))
	seen := make(map[string]int, len(views))
	for i, v := range views {
		object := v.View.String()
		if err := checkTable(v.View); err != nil {
			return fail(op, object, err)
		}
		if err := checkSQL("query", v.Query); err != nil {
			return fail(op, object, err)
		}
		key := foldASCII(v.View.Schema) + "\x00" + foldASCII(v.View.Name)
		if j, dup := seen[key]; dup {
			return fail(op, object, invalidf("view %s is in the batch twice (positions %d and %d)", object, j, i))
		}
		seen[key] = i
		stmts[i] = "CREATE OR REPLACE VIEW " + quoteTable(v.View) + " AS\n" + body(v.Query) + "\n"
	}
	names := make([]warehouse.Table, len(views))
	for i, v := range views {
		names[i] = v.View
	}
	failed := views[0].View.String()
	if len(views) > 1 {
		// Until a statement fails, a failure (the lock, the commit) is the
		// whole batch's.
		failed = fmt.Sprintf("%s and %d more views", failed, len(views)-1)
	}
	err := e.write(ctx, func(s *session) error {
		defer e.shared.cols.forget(names...)
		return s.inTx(ctx, func() error {
			for i, q := range stmts {
				if _, err := s.exec(ctx, q); err != nil {
					failed = views[i].View.String()
					return err
				}
			}
			return nil
		})
	})
	return fail(op, failed, err)
}

// foldASCII lower-cases ASCII letters only, as DuckDB's catalog compares
// names (see asciiFoldEqual).
func foldASCII(s string) string {
	return strings.Map(func(r rune) rune {
		if 'A' <= r && r <= 'Z' {
			return r + ('a' - 'A')
		}
		return r
	}, s)
}
