package postgres

import (
	"context"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/gapless-dev/gapless/warehouse"
)

// Query runs sql with args bound as parameters ($1, $2, …) and returns
// every row. time.Time arguments are sent in UTC. sql runs as exactly one
// statement (extended protocol); pgx's option arguments (exec modes, result
// formats, rewriters such as pgx.NamedArgs) are refused: args are values.
//
// Values come back as plain, comparable Go values, the same whatever the
// column's width:
//
//	smallint, integer, bigint, oid      int64
//	real, double precision              float64
//	numeric                             string, the exact decimal ("12.50",
//	                                    "NaN", "Infinity"): a float would
//	                                    round money; parse it if you need
//	                                    arithmetic. (sum() and avg() of
//	                                    integers are numeric in PostgreSQL.)
//	timestamptz, timestamp, date        time.Time in UTC (a timestamp is its
//	                                    wall clock read as UTC; a date is its
//	                                    midnight UTC); ±infinity is the
//	                                    string "infinity" / "-infinity"
//	text, varchar, char, name           string
//	boolean                             bool
//	uuid                                string, canonical form
//	bytea                               []byte
//	arrays                              []any of the above
//
// Anything else is what pgx decodes it to (json as map/slice values,
// interval as pgtype.Interval, an unknown type as its text).
func (e *Engine) Query(ctx context.Context, sql string, args ...any) (*warehouse.Result, error) {
	const op = "query"
	bound, err := bindArgs(args)
	if err != nil {
		return nil, fail(op, e.object, sql, err)
	}
	rows, err := e.pool.Query(ctx, sql, bound...)
	if err != nil {
		return nil, fail(op, e.object, sql, err)
	}
	res, err := readResult(rows)
	if err != nil {
		return nil, fail(op, e.object, sql, err)
	}
	return res, nil
}

// bindArgs converts Query's arguments to what pgx binds, refusing pgx's
// option arguments.
func bindArgs(args []any) ([]any, error) {
	bound := make([]any, len(args))
	for i, a := range args {
		switch a.(type) {
		case pgx.QueryExecMode, pgx.QueryResultFormats, pgx.QueryResultFormatsByOID, pgx.QueryRewriter:
			// pgx reads these leading arguments as options, not values:
			// QueryExecModeSimpleProtocol would run several statements,
			// and a rewriter rewrites the SQL.
			return nil, fmt.Errorf("%w: argument %d is a pgx option (%T), not a value", warehouse.ErrInvalidArgument, i+1, a)
		}
		bound[i] = bindValue(a)
	}
	return bound, nil
}

// readResult reads and closes rows, normalising the values (see Query).
func readResult(rows pgx.Rows) (*warehouse.Result, error) {
	defer rows.Close()
	fields := rows.FieldDescriptions()
	res := &warehouse.Result{Columns: make([]string, len(fields)), Types: make([]string, len(fields)), Rows: [][]any{}}
	types := rows.Conn().TypeMap()
	for i, f := range fields {
		res.Columns[i] = f.Name
		if t, ok := types.TypeForOID(f.DataTypeOID); ok {
			res.Types[i] = strings.ToUpper(t.Name)
		}
	}
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			return nil, err
		}
		for i, v := range vals {
			vals[i] = normalize(v)
		}
		res.Rows = append(res.Rows, vals)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return res, nil
}

// normalize maps pgx's decoded values onto the types Query documents.
func normalize(v any) any {
	switch x := v.(type) {
	case int8:
		return int64(x)
	case int16:
		return int64(x)
	case int32:
		return int64(x)
	case uint32:
		return int64(x)
	case float32:
		return float64(x)
	case time.Time:
		return x.UTC()
	case pgtype.InfinityModifier:
		return x.String()
	case pgtype.Numeric:
		return numericString(x)
	case [16]byte:
		return uuidString(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = normalize(e)
		}
		return out
	}
	return v
}

func numericString(n pgtype.Numeric) any {
	if !n.Valid {
		return nil
	}
	switch {
	case n.NaN:
		return "NaN"
	case n.InfinityModifier == pgtype.Infinity:
		return "Infinity"
	case n.InfinityModifier == pgtype.NegativeInfinity:
		return "-Infinity"
	}
	v, err := n.Value()
	if err != nil {
		// Value only fails on values pgx itself cannot render; keep the
		// raw value rather than lose it.
		return fmt.Sprintf("%v", n)
	}
	return v
}

func uuidString(b [16]byte) string {
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}
