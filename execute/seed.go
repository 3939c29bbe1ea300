package execute

import (
	"context"
	"encoding/csv"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/model"
	"github.com/gapless-dev/gapless/snapshot"
	"github.com/gapless-dev/gapless/warehouse"
)

// Seed column types inferred from a CSV, in order of preference.
const (
	typeBigint    = "BIGINT"
	typeDouble    = "DOUBLE PRECISION" // both engines spell it so
	typeBoolean   = "BOOLEAN"
	typeTimestamp = "TIMESTAMP"
	typeVarchar   = "VARCHAR"
)

var timestampLayouts = []string{time.RFC3339Nano, "2006-01-02 15:04:05", "2006-01-02T15:04:05", "2006-01-02"}

// loadSeed fills a SEED snapshot's table from its CSV.
//
// Invariant: a SEED version's content is fixed (the CSV hash is part of the
// version), so once the version has recorded intervals its table is
// complete and is left alone. Otherwise the table holds no rows (Prepare
// made it empty) or all of them (an earlier load committed, and its record
// did not): InsertRows is all or nothing, so nothing in between. An empty
// table with the CSV's columns is filled in place, so that the models
// already made over it (a VIEW reads it, on PostgreSQL by identity) keep
// it; a complete one is kept; any other table is dropped, created and
// filled, so a table that is not this version's is never reused.
func (x *Executor) loadSeed(ctx context.Context, t *Template, covered interval.Set) (int64, error) {
	m := t.Snapshot.Model
	exists, err := x.Engine.TableExists(ctx, t.Table)
	if err != nil {
		return 0, err
	}
	if exists && !covered.IsEmpty() {
		return 0, nil
	}
	cols, rows, err := ReadSeed(x.seedPath(m), m.Columns)
	if err != nil {
		return 0, fmt.Errorf("seed %s: %w", m.Name, err)
	}
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = c.Name
	}
	if exists {
		keep, held, err := x.seedTableFits(ctx, t.Table, cols)
		if err != nil {
			return 0, err
		}
		switch {
		case keep && held == 0:
			if len(rows) == 0 {
				return 0, nil
			}
			return x.fillSeed(ctx, t.Table, cols, names, rows, m.BatchSize)
		case keep && held == int64(len(rows)):
			return held, nil
		}
	}
	if err := x.Engine.DropTable(ctx, t.Table); err != nil {
		return 0, err
	}
	if err := x.Engine.CreateTable(ctx, warehouse.CreateTableParams{Table: t.Table, Columns: cols}); err != nil {
		return 0, err
	}
	if len(rows) == 0 {
		return 0, nil
	}
	return x.fillSeed(ctx, t.Table, cols, names, rows, m.BatchSize)
}

// fillSeed inserts rows into the empty table, all or nothing. With a
// batch_size smaller than the CSV, the rows go batchSize at a time into a
// staging table beside it (so that no statement binds more than batchSize
// rows), then into the table in one INSERT ... SELECT: readers of the table
// see it empty or whole, never half-loaded. The staging table is dropped
// whatever happens.
func (x *Executor) fillSeed(ctx context.Context, table warehouse.Table, cols []warehouse.Column, names []string, rows [][]any, batchSize int) (n int64, err error) {
	if batchSize <= 0 || len(rows) <= batchSize {
		return x.Engine.InsertRows(ctx, warehouse.InsertRowsParams{Table: table, Columns: names, Rows: rows})
	}
	staging := warehouse.Table{Schema: table.Schema, Name: snapshot.FitIdent("__gapless_seed_load__" + table.Name)}
	if err := x.Engine.DropTable(ctx, staging); err != nil {
		return 0, err
	}
	if err := x.Engine.CreateTable(ctx, warehouse.CreateTableParams{Table: staging, Columns: cols}); err != nil {
		return 0, fmt.Errorf("creating the seed's staging table: %w", err)
	}
	defer func() {
		if derr := x.Engine.DropTable(context.WithoutCancel(ctx), staging); derr != nil && err == nil {
			err = fmt.Errorf("dropping the seed's staging table: %w", derr)
		}
	}()
	for lo := 0; lo < len(rows); lo += batchSize {
		hi := min(lo+batchSize, len(rows))
		if _, err := x.Engine.InsertRows(ctx, warehouse.InsertRowsParams{Table: staging, Columns: names, Rows: rows[lo:hi]}); err != nil {
			return 0, fmt.Errorf("seed rows %d to %d: %w", lo+1, hi, err)
		}
	}
	quoted := make([]string, len(names))
	for i, c := range names {
		quoted[i] = x.Engine.QuoteIdent(c)
	}
	list := strings.Join(quoted, ", ")
	if _, err := x.Engine.Query(ctx, "INSERT INTO "+x.Engine.QuoteTable(table)+" ("+list+") SELECT "+list+" FROM "+x.Engine.QuoteTable(staging)); err != nil {
		return 0, fmt.Errorf("moving the seed's rows into %s: %w", table, err)
	}
	return int64(len(rows)), nil
}

// seedTableFits reports whether table has exactly the CSV's column names,
// in order, and how many rows it holds.
func (x *Executor) seedTableFits(ctx context.Context, table warehouse.Table, cols []warehouse.Column) (bool, int64, error) {
	have, err := x.Engine.Columns(ctx, table)
	if err != nil {
		return false, 0, err
	}
	if len(have) != len(cols) {
		return false, 0, nil
	}
	for i := range have {
		if !strings.EqualFold(have[i].Name, cols[i].Name) {
			return false, 0, nil
		}
	}
	res, err := x.Engine.Query(ctx, "SELECT count(*) FROM "+x.Engine.QuoteTable(table))
	if err != nil {
		return false, 0, err
	}
	if len(res.Rows) != 1 || len(res.Rows[0]) != 1 {
		return false, 0, fmt.Errorf("counting the rows of %s: unexpected result %v", table, res.Rows)
	}
	var n int64
	switch v := res.Rows[0][0].(type) {
	case int64:
		n = v
	case int32:
		n = int64(v)
	case int:
		n = int64(v)
	default:
		return false, 0, fmt.Errorf("counting the rows of %s: unexpected %T", table, v)
	}
	return true, n, nil
}

// ReadSeed reads a CSV with a header row. Column types come from declared
// (matched by name, case-insensitively) or are inferred from the values:
// BIGINT, DOUBLE PRECISION, BOOLEAN, TIMESTAMP, else VARCHAR (names both
// engines accept). Values are converted to Go values of that type; an
// empty field is NULL.
func ReadSeed(path string, declared []model.Column) ([]warehouse.Column, [][]any, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("opening %s: %w", path, err)
	}
	defer f.Close() //nolint:errcheck // opened only to read: a close error loses nothing
	r := csv.NewReader(f)
	records, err := r.ReadAll()
	if err != nil {
		return nil, nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if len(records) == 0 {
		return nil, nil, fmt.Errorf("%s has no header row", path)
	}
	header, body := records[0], records[1:]
	cols := make([]warehouse.Column, len(header))
	for i, h := range header {
		name := strings.TrimSpace(h)
		cols[i] = warehouse.Column{Name: name, Type: inferType(body, i)}
		for _, d := range declared {
			if strings.EqualFold(d.Name, name) {
				cols[i].Type = d.Type
			}
		}
	}
	rows := make([][]any, len(body))
	for ri, rec := range body {
		if len(rec) != len(cols) {
			return nil, nil, fmt.Errorf("%s line %d: %d fields, the header has %d", path, ri+2, len(rec), len(cols))
		}
		row := make([]any, len(rec))
		for ci, v := range rec {
			row[ci] = convert(v, cols[ci].Type)
		}
		rows[ri] = row
	}
	return cols, rows, nil
}

func inferType(rows [][]string, col int) string {
	typ := ""
	for _, rec := range rows {
		if col >= len(rec) || rec[col] == "" {
			continue
		}
		typ = widen(typ, valueType(rec[col]))
	}
	if typ == "" {
		return typeVarchar
	}
	return typ
}

func valueType(v string) string {
	if _, err := strconv.ParseInt(v, 10, 64); err == nil {
		return typeBigint
	}
	if _, err := strconv.ParseFloat(v, 64); err == nil {
		return typeDouble
	}
	if _, err := strconv.ParseBool(strings.ToLower(v)); err == nil && !strings.ContainsAny(v, "01") {
		return typeBoolean
	}
	if _, ok := parseTimestamp(v); ok {
		return typeTimestamp
	}
	return typeVarchar
}

// widen combines the types of two values of one column: BIGINT and DOUBLE
// make DOUBLE; any other mix is VARCHAR.
func widen(a, b string) string {
	switch {
	case a == "" || a == b:
		return b
	case (a == typeBigint && b == typeDouble) || (a == typeDouble && b == typeBigint):
		return typeDouble
	default:
		return typeVarchar
	}
}

func parseTimestamp(v string) (time.Time, bool) {
	for _, l := range timestampLayouts {
		if t, err := time.Parse(l, v); err == nil {
			return t.UTC(), true
		}
	}
	return time.Time{}, false
}

// convert turns a CSV field into a value for a column of type typ; a value
// that does not parse is passed as text for the engine to cast (and reject).
func convert(v, typ string) any {
	if v == "" {
		return nil
	}
	up := strings.ToUpper(typ)
	switch {
	case strings.Contains(up, "INT"):
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			return n
		}
	case strings.HasPrefix(up, "DOUBLE"), strings.HasPrefix(up, "FLOAT"), strings.HasPrefix(up, "REAL"):
		if n, err := strconv.ParseFloat(v, 64); err == nil {
			return n
		}
	case strings.HasPrefix(up, "BOOL"):
		if b, err := strconv.ParseBool(strings.ToLower(v)); err == nil {
			return b
		}
	case strings.HasPrefix(up, "TIMESTAMP"):
		if t, ok := parseTimestamp(v); ok {
			return t
		}
	}
	return v
}
