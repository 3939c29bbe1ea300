package trino

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/gapless-dev/gapless/warehouse"
)

// Describe returns the columns p.Query produces, without running it:
//
//	SELECT * FROM (query) LIMIT 0
//
// which Trino plans to an empty result that still carries the columns'
// names and types. Each type is spelled as Columns would spell the column
// of a table created from the query, which CreateTable accepts back:
// Iceberg stores tinyint and smallint as integer, char(n) and varchar(n)
// as varchar, and timestamps and times at precision 6, so those are
// reported that way.
//
// Trino has no transaction to roll stand-ins back with, so the stand-ins
// whose names nothing has yet are created for the description (with
// their schemas when missing) and dropped afterwards, also when the query
// fails or the context ends: nothing is left behind. Descriptions with
// stand-ins take turns inside the engine, and hold the locks of the
// stand-ins' names, so the engine's own writers of those names wait for
// them. (Another process could see a stand-in for the moment it exists.)
func (e *Engine) Describe(ctx context.Context, p warehouse.DescribeParams) ([]warehouse.Column, error) {
	const op, obj = "describe", "query"
	if err := e.begin(ctx); err != nil {
		return nil, fail(op, obj, "", err)
	}
	q, err := trimQuery(p.Query)
	if err != nil {
		return nil, fail(op, obj, "", err)
	}
	creates := make([]string, len(p.StandIns))
	for i, st := range p.StandIns {
		if creates[i], err = e.createTableSQL(ctx, st); err != nil {
			return nil, fail(op, st.Table.String(), "", err)
		}
	}
	plan := "SELECT * FROM " + subquery(q) + " AS q LIMIT 0"
	if len(p.StandIns) == 0 {
		cols, err := e.describeQuery(ctx, plan)
		return cols, fail(op, obj, plan, err)
	}

	return e.describeWithStandIns(ctx, p.StandIns, creates, plan)
}

// describeWithStandIns creates the stand-ins nothing has the name of,
// describes plan, and drops what it created, whatever happens.
func (e *Engine) describeWithStandIns(ctx context.Context, standIns []warehouse.CreateTableParams, creates []string, plan string) (cols []warehouse.Column, err error) {
	const op, obj = "describe", "query"
	e.standIns.Lock()
	defer e.standIns.Unlock()
	tables := make([]warehouse.Table, len(standIns))
	keys := make([]string, 0, 2*len(standIns))
	for i, st := range standIns {
		tables[i] = st.Table
		keys = append(keys, tableKey(st.Table), schemaKey(st.Table.Schema))
	}
	unlock, err := e.locks.lock(ctx, keys...)
	if err != nil {
		return nil, fail(op, obj, "", err)
	}
	defer unlock()
	kinds, kq, err := e.kinds(ctx, tables)
	if err != nil {
		return nil, fail(op, obj, kq, err)
	}
	var made []warehouse.Table
	var madeSchemas []string
	defer func() {
		// Clean up whatever happened: a cancelled context must not leave
		// the stand-ins behind.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if cerr := e.dropStandIns(cctx, made, madeSchemas); cerr != nil && err == nil {
			cols, err = nil, fail(op, obj, "", cerr)
		}
	}()
	created := map[warehouse.Table]bool{}
	schemas := map[string]bool{}
	for i, st := range standIns {
		f := foldTable(st.Table)
		if kinds[f] != "" || created[f] {
			continue // the real table or view is read
		}
		if !schemas[f.Schema] {
			exists, err := e.schemaExists(ctx, st.Table.Schema)
			if err != nil {
				return nil, fail(op, obj, "", err)
			}
			if !exists {
				stmt := "CREATE SCHEMA " + quoteIdent(st.Table.Schema)
				if _, err := e.exec(ctx, stmt); err != nil {
					return nil, fail(op, st.Table.String(), stmt, err)
				}
				madeSchemas = append(madeSchemas, st.Table.Schema)
			}
			schemas[f.Schema] = true
		}
		if _, err := e.exec(ctx, creates[i]); err != nil {
			return nil, fail(op, st.Table.String(), creates[i], err)
		}
		made = append(made, st.Table)
		created[f] = true
	}
	cols, err = e.describeQuery(ctx, plan)
	if err != nil {
		return nil, fail(op, obj, plan, err)
	}
	return cols, nil
}

// dropStandIns drops the stand-ins and then the schemas Describe created.
// A schema someone else put an object in meanwhile is kept.
func (e *Engine) dropStandIns(ctx context.Context, tables []warehouse.Table, schemas []string) error {
	var errs []error
	for _, t := range tables {
		if _, err := e.exec(ctx, "DROP TABLE IF EXISTS "+quoteTable(t)); err != nil {
			errs = append(errs, err)
		}
	}
	for _, s := range schemas {
		if _, err := e.exec(ctx, "DROP SCHEMA IF EXISTS "+quoteIdent(s)+" RESTRICT"); err != nil && errorName(err) != "SCHEMA_NOT_EMPTY" {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("dropping the description's stand-ins: %w", errors.Join(errs...))
	}
	return nil
}

// describeQuery runs plan (a LIMIT 0 query) and returns its columns.
func (e *Engine) describeQuery(ctx context.Context, plan string) ([]warehouse.Column, error) {
	rows, err := e.db.QueryContext(ctx, plan)
	if err != nil {
		return nil, &stmtError{sql: plan, err: serverError(err)}
	}
	defer rows.Close()
	cts, err := rows.ColumnTypes()
	if err != nil {
		return nil, &stmtError{sql: plan, err: serverError(err)}
	}
	if rows.Next() {
		return nil, &stmtError{sql: plan, err: errors.New("the description returned a row")}
	}
	if err := rows.Err(); err != nil {
		return nil, &stmtError{sql: plan, err: serverError(err)}
	}
	cols := make([]warehouse.Column, len(cts))
	for i, ct := range cts {
		cols[i] = warehouse.Column{Name: ct.Name(), Type: storedType(ct)}
	}
	return cols, nil
}

// storedType spells the type of a query's column as the Iceberg table made
// from it would report it (see Describe).
func storedType(ct *sql.ColumnType) string {
	switch t := spelledType(ct); {
	case t == "tinyint" || t == "smallint":
		return "integer"
	case strings.HasPrefix(t, "varchar") || strings.HasPrefix(t, "char"):
		return "varchar"
	case strings.HasPrefix(t, "timestamp(") && strings.HasSuffix(t, "with time zone"):
		return "timestamp(6) with time zone"
	case strings.HasPrefix(t, "timestamp("):
		return "timestamp(6)"
	case strings.HasPrefix(t, "time(") && !strings.HasSuffix(t, "with time zone"):
		return "time(6)"
	default:
		return storedNested(t)
	}
}

var (
	nestedChar      = regexp.MustCompile(`\b(var)?char\(\d+\)`)
	nestedSmallInt  = regexp.MustCompile(`\b(tinyint|smallint)\b`)
	nestedTimestamp = regexp.MustCompile(`\btimestamp\(\d+\)`)
	nestedTime      = regexp.MustCompile(`\btime\(\d+\)`)
)

// storedNested applies Iceberg's storage types inside a nested type
// (array(varchar(3)) is stored as array(varchar)); a scalar is returned
// as it is.
func storedNested(t string) string {
	t = nestedChar.ReplaceAllString(t, "varchar")
	t = nestedSmallInt.ReplaceAllString(t, "integer")
	t = nestedTimestamp.ReplaceAllString(t, "timestamp(6)")
	return nestedTime.ReplaceAllString(t, "time(6)")
}
