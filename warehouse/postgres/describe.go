package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/gapless-dev/gapless/warehouse"
)

// describeTable is the session-local table Describe plans the query into.
var describeTable = warehouse.Table{Schema: "pg_temp", Name: "gapless_describe"}

// errDescribed ends Describe's transaction, which is always rolled back.
var errDescribed = errors.New("described")

// Describe returns the columns p.Query produces, in one transaction that
// is always rolled back:
//
//	CREATE SCHEMA IF NOT EXISTS s; CREATE TABLE s.t (...);  -- per missing stand-in
//	CREATE TEMP TABLE gapless_describe AS (query) WITH NO DATA;
//
// and then the temporary table's columns, spelled as Columns spells them.
// WITH NO DATA plans the query and runs none of it, and the types are
// exactly those CreateTableAs gives a table made from it. PostgreSQL's DDL
// is transactional: the rollback leaves no stand-in, no schema and no
// temporary table, and no other session ever sees them.
func (e *Engine) Describe(ctx context.Context, p warehouse.DescribeParams) ([]warehouse.Column, error) {
	const op, obj = "describe", "query"
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
	plan := "CREATE TEMP TABLE " + quoteTable(describeTable) + " AS " + subquery(q) + " WITH NO DATA"
	var cols []warehouse.Column
	err = e.inTx(ctx, func(tx pgx.Tx) error {
		for i, st := range p.StandIns {
			_, found, err := resolve(ctx, tx, st.Table)
			if err != nil {
				return err
			}
			if found {
				continue
			}
			if _, err := exec(ctx, tx, "CREATE SCHEMA IF NOT EXISTS "+quoteIdent(st.Table.Schema)); err != nil {
				return err
			}
			if _, err := exec(ctx, tx, creates[i]); err != nil {
				return err
			}
		}
		if _, err := exec(ctx, tx, plan); err != nil {
			var pe *pgconn.PgError
			if errors.As(err, &pe) && pe.Hint != "" {
				// The server's suggestion ("Perhaps you meant to reference
				// the column ...") is not part of its error's text.
				return &stepError{sql: plan, err: fmt.Errorf("%w (HINT: %s)", err, pe.Hint)}
			}
			return err
		}
		rel, found, err := resolve(ctx, tx, describeTable)
		if err != nil {
			return err
		}
		if !found {
			return &stepError{sql: resolveSQL, err: warehouse.ErrNotFound}
		}
		got, err := columnsOf(ctx, tx, rel.oid)
		if err != nil {
			return err
		}
		cols = make([]warehouse.Column, len(got))
		for i, c := range got {
			cols[i] = c.Column
		}
		return errDescribed
	})
	if errors.Is(err, errDescribed) {
		return cols, nil
	}
	if err == nil {
		err = errors.New("the description's transaction committed") // cannot happen: fn always fails
	}
	return nil, failStep(op, obj, err)
}
