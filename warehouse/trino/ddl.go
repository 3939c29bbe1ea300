package trino

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/gapless-dev/gapless/warehouse"
)

// Table types as information_schema.tables names them.
const (
	typeTable = "BASE TABLE"
	typeView  = "VIEW"
)

// column is a catalog column: its folded name and Trino's spelling of its
// type (information_schema.columns.data_type: "bigint", "varchar",
// "timestamp(6)", "decimal(12,2)", "timestamp(6) with time zone", ...).
type column = warehouse.Column

// columnsOf reads t's columns (a table's or a view's) as Trino spells
// their types, from the columns of SELECT * FROM t LIMIT 0, which Trino
// answers from the table's metadata without reading it (a third of the
// time information_schema.columns takes): none when the table or its
// schema does not exist.
func (e *Engine) columnsOf(ctx context.Context, t warehouse.Table) ([]column, error) {
	q := "SELECT * FROM " + quoteTable(t) + " LIMIT 0"
	rows, err := e.db.QueryContext(ctx, q)
	if err != nil {
		if n := errorName(err); n == "TABLE_NOT_FOUND" || n == "SCHEMA_NOT_FOUND" {
			return nil, nil
		}
		return nil, &stmtError{sql: q, err: serverError(err)}
	}
	defer rows.Close()
	cts, err := rows.ColumnTypes()
	if err != nil {
		return nil, &stmtError{sql: q, err: serverError(err)}
	}
	if rows.Next() {
		return nil, &stmtError{sql: q, err: errors.New("LIMIT 0 returned a row")}
	}
	if err := rows.Err(); err != nil {
		return nil, &stmtError{sql: q, err: serverError(err)}
	}
	cols := make([]column, len(cts))
	for i, ct := range cts {
		cols[i] = column{Name: ct.Name(), Type: spelledType(ct)}
	}
	return cols, nil
}

// unbounded is the length the client reports for an unbounded varchar.
const unbounded = 2147483647

// spelledType spells a result column's type as Trino does in
// information_schema.columns ("bigint", "varchar", "varchar(3)",
// "timestamp(6)", "timestamp(6) with time zone", "decimal(12,2)",
// "array(varchar)", ...), from what the client reports.
func spelledType(ct *sql.ColumnType) string {
	name := ct.DatabaseTypeName()
	switch name {
	case "VARCHAR", "CHAR":
		if n, ok := ct.Length(); ok && n != unbounded {
			return fmt.Sprintf("%s(%d)", strings.ToLower(name), n)
		}
		return strings.ToLower(name)
	case "DECIMAL":
		if p, s, ok := ct.DecimalSize(); ok {
			return fmt.Sprintf("decimal(%d,%d)", p, s)
		}
	case "TIMESTAMP", "TIME":
		if p, _, ok := ct.DecimalSize(); ok {
			return fmt.Sprintf("%s(%d)", strings.ToLower(name), p)
		}
	case "TIMESTAMP WITH TIME ZONE", "TIME WITH TIME ZONE":
		if p, _, ok := ct.DecimalSize(); ok {
			base, _ := strings.CutSuffix(strings.ToLower(name), " with time zone")
			return fmt.Sprintf("%s(%d) with time zone", base, p)
		}
	}
	return strings.ToLower(name)
}

// targetTable returns the columns of t, the target of a write: an error
// wrapping warehouse.ErrNotFound when nothing has the name. It does not
// tell a view from a table (that costs a second catalog query): a write
// into a view fails in Trino, and writeError then says so.
func (e *Engine) targetTable(ctx context.Context, t warehouse.Table) ([]column, error) {
	cols, err := e.columnsOf(ctx, t)
	if err != nil {
		return nil, err
	}
	if len(cols) == 0 {
		return nil, fmt.Errorf("%w: %s", warehouse.ErrNotFound, t)
	}
	return cols, nil
}

// writeError explains the failure of a write into t: when t is a view (or
// has gone), the error wraps warehouse.ErrNotATable (or ErrNotFound).
func (e *Engine) writeError(ctx context.Context, t warehouse.Table, err error) error {
	if ctx.Err() != nil || trinoError(err) == nil {
		return err
	}
	kinds, _, kerr := e.kinds(ctx, []warehouse.Table{t})
	if kerr != nil {
		return err
	}
	switch k := kinds[foldTable(t)]; k {
	case typeTable:
		return err
	case "":
		return fmt.Errorf("%w: %s: %w", warehouse.ErrNotFound, t, err)
	default:
		return fmt.Errorf("%w: %s is a %s: %w", warehouse.ErrNotATable, t, strings.ToLower(k), err)
	}
}

// findColumn returns the column of cols named name (folded, as Trino
// matches names).
func findColumn(cols []column, name string) (column, bool) {
	f := fold(name)
	for _, c := range cols {
		if c.Name == f {
			return c, true
		}
	}
	return column{}, false
}

// CreateSchema creates schema if it does not exist. Creating one that
// exists, also while another session creates it, succeeds.
func (e *Engine) CreateSchema(ctx context.Context, schema string) error {
	const op = "create schema"
	if err := e.begin(ctx); err != nil {
		return fail(op, schema, "", err)
	}
	if err := checkIdent(kindSchema, schema); err != nil {
		return fail(op, schema, "", err)
	}
	unlock, err := e.locks.lock(ctx, schemaKey(schema))
	if err != nil {
		return fail(op, schema, "", err)
	}
	defer unlock()
	stmt := "CREATE SCHEMA IF NOT EXISTS " + quoteIdent(schema)
	if _, err := e.exec(ctx, stmt); err != nil {
		if ok, cerr := e.schemaExists(ctx, schema); cerr == nil && ok {
			return nil
		}
		return fail(op, schema, stmt, err)
	}
	return nil
}

// schemaExists reports whether schema exists (folded).
func (e *Engine) schemaExists(ctx context.Context, schema string) (bool, error) {
	q := "SELECT count(*) FROM information_schema.schemata WHERE schema_name = " + quoteString(fold(schema))
	var n int64
	err := e.queryRows(ctx, q, func(r *sql.Rows) error { return r.Scan(&n) })
	return n > 0, err
}

// CreateTable creates an empty Iceberg table with the given columns. It
// fails when the name is taken. Every column type must be exactly one type
// name: Trino's spelling (as Columns returns it: "bigint", "varchar",
// "timestamp(6)", "decimal(12,2)", "timestamp(6) with time zone", ...) or a
// common portable one, mapped (see normalizeType). Anything else is
// refused with warehouse.ErrInvalidType before any DDL runs. Iceberg stores
// tinyint and smallint as integer, char(n) and varchar(n) as varchar, and
// every timestamp and time at precision 6: Columns then reports those.
func (e *Engine) CreateTable(ctx context.Context, p warehouse.CreateTableParams) error {
	const op = "create table"
	obj := p.Table.String()
	if err := e.begin(ctx); err != nil {
		return fail(op, obj, "", err)
	}
	stmt, err := e.createTableSQL(ctx, p)
	if err != nil {
		return fail(op, obj, "", err)
	}
	if _, err := e.CheckLayout(p.Layout); err != nil {
		return fail(op, obj, "", err)
	}
	stmt += tableComment(p.Layout) + withClause(p.Layout)
	unlock, err := e.locks.lock(ctx, tableKey(p.Table))
	if err != nil {
		return fail(op, obj, "", err)
	}
	defer unlock()
	if _, err = e.exec(ctx, stmt); err != nil {
		return fail(op, obj, stmt, err)
	}
	stmt, err = e.commentMade(ctx, p.Table, columnComments(p.Table, p.Layout))
	return fail(op, obj, stmt, err)
}

// createTableSQL is the CREATE TABLE statement of p, its names and types
// checked (see CreateTable).
func (e *Engine) createTableSQL(ctx context.Context, p warehouse.CreateTableParams) (string, error) {
	if err := checkQualified(kindTable, p.Table); err != nil {
		return "", err
	}
	if len(p.Columns) == 0 {
		return "", fmt.Errorf("%w: no columns", warehouse.ErrInvalidArgument)
	}
	types := make([]string, len(p.Columns))
	for i, c := range p.Columns {
		if err := checkIdent(kindColumn, c.Name); err != nil {
			return "", err
		}
		t, err := normalizeType(c.Type)
		if err != nil {
			return "", fmt.Errorf("column %q: %w", c.Name, err)
		}
		types[i] = t
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
		b.WriteString(types[i])
	}
	b.WriteString("\n)")
	return b.String(), nil
}

// maxTypeBytes bounds a column type's text.
const maxTypeBytes = 512

// typeAliases are the portable spellings gapless and the conformance suite
// use that Trino does not know, mapped to Trino's. Timestamps without a
// precision get 6, what Iceberg stores (Trino's own default would be 3).
var typeAliases = map[string]string{
	"text":                        "varchar",
	"string":                      "varchar",
	"character varying":           "varchar",
	"timestamp":                   "timestamp(6)",
	"timestamp without time zone": "timestamp(6)",
	"timestamptz":                 "timestamp(6) with time zone",
	"timestamp with time zone":    "timestamp(6) with time zone",
	"double precision":            "double",
	"float8":                      "double",
	"float":                       "double",
	"float4":                      "real",
	"int":                         "integer",
	"int4":                        "integer",
	"int8":                        "bigint",
	"int2":                        "smallint",
	"bool":                        "boolean",
	"numeric":                     "decimal",
}

// simpleType matches the type names that need no check by the server: one
// of Trino's scalar types, with its parameters.
var simpleType = regexp.MustCompile(`^(boolean|tinyint|smallint|integer|bigint|real|double|date|varbinary|uuid|json|varchar|char|` +
	`(var)?char\(\d{1,10}\)|decimal|decimal\(\d{1,2}(,\d{1,2})?\)|time(\(\d{1,2}\))?( with time zone)?|timestamp(\(\d{1,2}\))?( with time zone)?)$`)

// normalizeType checks that typ is lexically one type name (letters,
// digits, underscores, spaces, balanced parentheses with commas inside,
// and double-quoted field names: no literal, comment, operator or
// statement end can hide in it) and returns Trino's spelling of it, with
// the portable aliases mapped.
func normalizeType(typ string) (string, error) {
	t := strings.TrimSpace(typ)
	switch {
	case t == "":
		return "", fmt.Errorf("%w: empty", warehouse.ErrInvalidType)
	case len(t) > maxTypeBytes:
		return "", fmt.Errorf("%w: %d bytes, more than %d", warehouse.ErrInvalidType, len(t), maxTypeBytes)
	case !utf8.ValidString(t):
		return "", fmt.Errorf("%w %q: not valid UTF-8", warehouse.ErrInvalidType, typ)
	}
	var b strings.Builder
	depth, inQuote, space := 0, false, false
	last := rune(0) // the last rune written
	for _, r := range t {
		if inQuote {
			if r == 0 {
				return "", fmt.Errorf("%w %q: a NUL byte", warehouse.ErrInvalidType, typ)
			}
			if r == '"' {
				inQuote = false
			}
			b.WriteRune(r)
			last = r
			continue
		}
		if unicode.IsSpace(r) {
			space = true
			continue
		}
		if space && last != 0 && last != '(' && last != ',' && r != ')' && r != ',' && r != '(' {
			b.WriteByte(' ')
		}
		space = false
		switch {
		case r == '"':
			inQuote = true
		case r == '(':
			depth++
		case r == ')':
			depth--
			if depth < 0 {
				return "", fmt.Errorf("%w %q: unbalanced parentheses", warehouse.ErrInvalidType, typ)
			}
		case r == ',':
			if depth == 0 {
				return "", fmt.Errorf("%w %q: a comma outside parentheses", warehouse.ErrInvalidType, typ)
			}
		case r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			r = unicode.ToLower(r)
		default:
			return "", fmt.Errorf("%w %q: the character %q is not part of a type name", warehouse.ErrInvalidType, typ, r)
		}
		b.WriteRune(r)
		last = r
	}
	if inQuote {
		return "", fmt.Errorf("%w %q: an unterminated quoted name", warehouse.ErrInvalidType, typ)
	}
	if depth != 0 {
		return "", fmt.Errorf("%w %q: unbalanced parentheses", warehouse.ErrInvalidType, typ)
	}
	n := b.String()
	if a, ok := typeAliases[n]; ok {
		return a, nil
	}
	for _, prefix := range []string{"numeric(", "character varying("} {
		if rest, ok := strings.CutPrefix(n, prefix); ok {
			return map[string]string{"numeric(": "decimal(", "character varying(": "varchar("}[prefix] + rest, nil
		}
	}
	if rest, ok := strings.CutPrefix(n, "timestamp("); ok {
		if p, ok := strings.CutSuffix(rest, ") without time zone"); ok {
			return "timestamp(" + p + ")", nil
		}
	}
	return n, nil
}

// checkTypes makes the server parse every type that is not a plain scalar
// (arrays, maps, rows, a misspelling) as a type and nothing else, in one
// statement: CAST(NULL AS <type>) accepts exactly a type. A type it does
// not know is refused with warehouse.ErrInvalidType.
func (e *Engine) checkTypes(ctx context.Context, types []string) error {
	var casts []string
	for _, t := range types {
		if !simpleType.MatchString(t) {
			casts = append(casts, "CAST(NULL AS "+t+")")
		}
	}
	if len(casts) == 0 {
		return nil
	}
	q := "SELECT " + strings.Join(casts, ", ")
	err := e.queryRows(ctx, q, func(*sql.Rows) error { return nil })
	if err == nil {
		return nil
	}
	if te := trinoError(err); te != nil && te.ErrorType == "USER_ERROR" {
		return fmt.Errorf("%w: %s", warehouse.ErrInvalidType, te.Message)
	}
	return err
}

// CreateTableAs creates an Iceberg table from a query (CREATE TABLE ... AS
// (query) WITH [NO] DATA): with WithData false it gets the query's columns
// and no rows, and the query is planned but not run. It fails when the name
// is taken. The Columns hint is not used: the query's own columns are.
func (e *Engine) CreateTableAs(ctx context.Context, p warehouse.CreateTableAsParams) error {
	const op = "create table as"
	obj := p.Table.String()
	if err := e.begin(ctx); err != nil {
		return fail(op, obj, "", err)
	}
	if err := checkQualified(kindTable, p.Table); err != nil {
		return fail(op, obj, "", err)
	}
	q, err := trimQuery(p.Query)
	if err != nil {
		return fail(op, obj, "", err)
	}
	if _, err := e.CheckLayout(p.Layout); err != nil {
		return fail(op, obj, "", err)
	}
	stmt := "CREATE TABLE " + quoteTable(p.Table) + tableComment(p.Layout) + withClause(p.Layout) + " AS " + subquery(q)
	if p.WithData {
		stmt += " WITH DATA"
	} else {
		stmt += " WITH NO DATA"
	}
	unlock, err := e.locks.lock(ctx, tableKey(p.Table))
	if err != nil {
		return fail(op, obj, "", err)
	}
	defer unlock()
	if _, err = e.exec(ctx, stmt); err != nil {
		return fail(op, obj, stmt, err)
	}
	stmt, err = e.commentMade(ctx, p.Table, columnComments(p.Table, p.Layout))
	return fail(op, obj, stmt, err)
}

// TableExists reports whether a table or view is named t (names folded, as
// Trino matches them). A missing schema is "no".
func (e *Engine) TableExists(ctx context.Context, t warehouse.Table) (bool, error) {
	found, err := e.tablesExist(ctx, "table exists", []warehouse.Table{t})
	if err != nil {
		return false, err
	}
	return found[0], nil
}

// TablesExist reports, for each of tables, what TableExists reports, in
// one information_schema query (schemas and names pushed down as IN
// lists). An invalid name fails the whole call.
func (e *Engine) TablesExist(ctx context.Context, tables []warehouse.Table) ([]bool, error) {
	return e.tablesExist(ctx, "tables exist", tables)
}

func (e *Engine) tablesExist(ctx context.Context, op string, tables []warehouse.Table) ([]bool, error) {
	obj := batchObject(tables)
	if err := e.begin(ctx); err != nil {
		return nil, fail(op, obj, "", err)
	}
	for _, t := range tables {
		if err := checkQualified(kindTable, t); err != nil {
			return nil, fail(op, t.String(), "", err)
		}
	}
	kinds, q, err := e.kinds(ctx, tables)
	if err != nil {
		return nil, fail(op, obj, q, err)
	}
	found := make([]bool, len(tables))
	for i, t := range tables {
		found[i] = kinds[foldTable(t)] != ""
	}
	return found, nil
}

// kinds returns the table type of every one of tables that exists, by
// folded name, in one query (also returned).
func (e *Engine) kinds(ctx context.Context, tables []warehouse.Table) (map[warehouse.Table]string, string, error) {
	out := map[warehouse.Table]string{}
	if len(tables) == 0 {
		return out, "", nil
	}
	schemas, names := map[string]bool{}, map[string]bool{}
	var sl, nl []string
	for _, t := range tables {
		f := foldTable(t)
		if !schemas[f.Schema] {
			schemas[f.Schema] = true
			sl = append(sl, quoteString(f.Schema))
		}
		if !names[f.Name] {
			names[f.Name] = true
			nl = append(nl, quoteString(f.Name))
		}
	}
	q := "SELECT table_schema, table_name, table_type FROM information_schema.tables WHERE table_schema IN (" +
		strings.Join(sl, ", ") + ") AND table_name IN (" + strings.Join(nl, ", ") + ")"
	err := e.queryRows(ctx, q, func(r *sql.Rows) error {
		var s, n, k string
		if err := r.Scan(&s, &n, &k); err != nil {
			return err
		}
		out[warehouse.Table{Schema: s, Name: n}] = k
		return nil
	})
	return out, q, err
}

// batchObject names a batch of tables in an error not about one of them.
func batchObject(tables []warehouse.Table) string {
	switch len(tables) {
	case 0:
		return "no tables"
	case 1:
		return tables[0].String()
	}
	return fmt.Sprintf("%s and %d more", tables[0], len(tables)-1)
}

// Columns returns t's columns in order, names folded and types as Trino
// spells them (information_schema.columns). A missing t is an error
// wrapping warehouse.ErrNotFound; a view's columns are the view's.
func (e *Engine) Columns(ctx context.Context, t warehouse.Table) ([]warehouse.Column, error) {
	const op = "columns"
	obj := t.String()
	if err := e.begin(ctx); err != nil {
		return nil, fail(op, obj, "", err)
	}
	if err := checkQualified(kindTable, t); err != nil {
		return nil, fail(op, obj, "", err)
	}
	cols, err := e.columnsOf(ctx, t)
	if err != nil {
		return nil, fail(op, obj, "", err)
	}
	if len(cols) == 0 {
		return nil, fail(op, obj, "", fmt.Errorf("%w: %s", warehouse.ErrNotFound, t))
	}
	return cols, nil
}

// DropTable drops table t if it exists; a missing table or schema is not
// an error. A view of that name is not dropped: the error wraps
// warehouse.ErrNotATable.
func (e *Engine) DropTable(ctx context.Context, t warehouse.Table) error {
	return e.drop(ctx, "drop table", "DROP TABLE IF EXISTS ", kindTable, t)
}

// DropView drops view t if it exists; a missing view or schema is not an
// error. A table of that name is not dropped: Trino refuses, and so does
// the call.
func (e *Engine) DropView(ctx context.Context, t warehouse.Table) error {
	return e.drop(ctx, "drop view", "DROP VIEW IF EXISTS ", kindView, t)
}

func (e *Engine) drop(ctx context.Context, op, stmt string, k kind, t warehouse.Table) error {
	obj := t.String()
	if err := e.begin(ctx); err != nil {
		return fail(op, obj, "", err)
	}
	if err := checkQualified(k, t); err != nil {
		return fail(op, obj, "", err)
	}
	unlock, err := e.locks.lock(ctx, tableKey(t))
	if err != nil {
		return fail(op, obj, "", err)
	}
	defer unlock()
	stmt += quoteTable(t)
	_, err = e.exec(ctx, stmt)
	if err != nil && k == kindTable && strings.Contains(errorMessage(err), "but a view with that name exists") {
		err = fmt.Errorf("%w: %s is a view: %w", warehouse.ErrNotATable, t, err)
	}
	return fail(op, obj, stmt, err)
}

// errTableInTheWay is the error of a view replace whose name is a
// table's.
var errTableInTheWay = errors.New("a table has this name; a view cannot replace it")
