package trino

import (
	"context"
	"crypto/rand"
	"database/sql/driver"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gapless-dev/gapless/warehouse"
)

// maxStatementBytes bounds the text of one INSERT: Trino refuses a query
// longer than query.max-length (1,000,000 characters by default).
const maxStatementBytes = 900_000

// InsertRows appends literal rows (a SEED model's) to p.Table, all or
// nothing, and returns how many it inserted.
//
// Each value is rendered by the engine as a string literal (or X'...' for
// a varbinary column) and cast to its column's type in the statement:
//
//	INSERT INTO t (c1, ...) SELECT CAST(v1 AS <c1's type>), ... FROM (VALUES ('1', 'a'), ...) AS v(v1, ...)
//
// so a value that does not fit its column fails the statement, which then
// inserts nothing. Rows that fit in one statement (under Trino's
// query.max-length) are one INSERT, one Iceberg commit. More are first
// loaded, in several statements, into a staging table beside the target
// (gapless_stage_<random>, same columns), then moved in with one INSERT ...
// SELECT, and the staging table is dropped whatever happens: the target
// still changes in one commit.
//
// Values: nil, strings (valid UTF-8), []byte, bool, every integer and
// float type, time.Time (its UTC wall-clock time, or the date, or the
// instant at UTC, by the column's type), json.Number, and anything that is
// a driver.Valuer or a fmt.Stringer of one of these.
func (e *Engine) InsertRows(ctx context.Context, p warehouse.InsertRowsParams) (int64, error) {
	const op = "insert rows"
	obj := p.Table.String()
	if err := e.begin(ctx); err != nil {
		return 0, fail(op, obj, "", err)
	}
	if err := checkQualified(kindTable, p.Table); err != nil {
		return 0, fail(op, obj, "", err)
	}
	if err := checkColumns("column", p.Columns); err != nil {
		return 0, fail(op, obj, "", err)
	}
	if len(p.Columns) == 0 && len(p.Rows) > 0 {
		return 0, fail(op, obj, "", fmt.Errorf("%w: rows without columns", warehouse.ErrInvalidArgument))
	}
	for i, r := range p.Rows {
		if len(r) != len(p.Columns) {
			return 0, fail(op, obj, "", fmt.Errorf("%w: row %d has %d values for %d columns", warehouse.ErrInvalidArgument, i+1, len(r), len(p.Columns)))
		}
	}
	if len(p.Rows) == 0 {
		return 0, nil
	}
	unlock, err := e.locks.lock(ctx, tableKey(p.Table))
	if err != nil {
		return 0, fail(op, obj, "", err)
	}
	defer unlock()
	tcols, err := e.targetTable(ctx, p.Table)
	if err != nil {
		return 0, fail(op, obj, "", err)
	}
	cols := make([]column, len(p.Columns))
	for i, name := range p.Columns {
		c, ok := findColumn(tcols, name)
		if !ok {
			return 0, fail(op, obj, "", fmt.Errorf("%w: no column %q in %s", warehouse.ErrInvalidArgument, name, p.Table))
		}
		cols[i] = c
	}
	// Render every row first: a value that cannot be rendered fails the
	// call before anything is sent.
	rendered := make([]string, len(p.Rows))
	for i, r := range p.Rows {
		vals := make([]string, len(r))
		for j, v := range r {
			lit, err := literal(v, cols[j].Type)
			if err != nil {
				return 0, fail(op, obj, "", fmt.Errorf("%w: row %d, column %q: %w", warehouse.ErrInvalidArgument, i+1, cols[j].Name, err))
			}
			vals[j] = lit
		}
		rendered[i] = "(" + strings.Join(vals, ", ") + ")"
	}
	limit := maxStatementBytes
	if n := e.maxStatement.Load(); n > 0 {
		limit = int(n)
	}
	chunks := chunkRows(rendered, limit)
	if len(chunks) == 1 {
		stmt := insertValues(p.Table, cols, chunks[0])
		n, err := e.exec(ctx, stmt)
		if err != nil {
			return 0, fail(op, obj, stmt, e.writeError(ctx, p.Table, err))
		}
		return n, nil
	}
	n, err := e.insertStaged(ctx, p.Table, cols, chunks)
	if err != nil {
		return 0, fail(op, obj, "", e.writeError(ctx, p.Table, err))
	}
	return n, nil
}

// insertStaged loads chunks into a staging table beside t and moves them
// into t with one statement; the staging table is dropped afterwards,
// also on failure.
func (e *Engine) insertStaged(ctx context.Context, t warehouse.Table, cols []column, chunks [][]string) (int64, error) {
	var b [8]byte
	_, _ = rand.Read(b[:])
	stage := warehouse.Table{Schema: t.Schema, Name: "gapless_stage_" + hex.EncodeToString(b[:])}
	defs := make([]string, len(cols))
	for i, c := range cols {
		defs[i] = quoteIdent(c.Name) + " " + c.Type
	}
	if _, err := e.exec(ctx, "CREATE TABLE "+quoteTable(stage)+" ("+strings.Join(defs, ", ")+")"); err != nil {
		return 0, err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		_, _ = e.exec(cctx, "DROP TABLE IF EXISTS "+quoteTable(stage))
	}()
	for _, chunk := range chunks {
		if _, err := e.exec(ctx, insertValues(stage, cols, chunk)); err != nil {
			return 0, err
		}
	}
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = quoteIdent(c.Name)
	}
	return e.exec(ctx, "INSERT INTO "+quoteTable(t)+" ("+strings.Join(names, ", ")+") SELECT "+strings.Join(names, ", ")+" FROM "+quoteTable(stage))
}

// insertValues is the INSERT of rendered rows into t's cols.
func insertValues(t warehouse.Table, cols []column, rows []string) string {
	names := make([]string, len(cols))
	casts := make([]string, len(cols))
	aliases := make([]string, len(cols))
	for i, c := range cols {
		names[i] = quoteIdent(c.Name)
		aliases[i] = fmt.Sprintf("v%d", i+1)
		casts[i] = "CAST(" + aliases[i] + " AS " + c.Type + ")"
	}
	return "INSERT INTO " + quoteTable(t) + " (" + strings.Join(names, ", ") + ")\nSELECT " + strings.Join(casts, ", ") +
		"\nFROM (VALUES\n" + strings.Join(rows, ",\n") + "\n) AS v(" + strings.Join(aliases, ", ") + ")"
}

// chunkRows splits rendered rows into groups whose text stays under limit.
func chunkRows(rows []string, limit int) [][]string {
	var chunks [][]string
	start, size := 0, 0
	for i, r := range rows {
		if i > start && size+len(r)+2 > limit {
			chunks = append(chunks, rows[start:i])
			start, size = i, 0
		}
		size += len(r) + 2
	}
	return append(chunks, rows[start:])
}

// literal renders v for a column of type typ: NULL, X'...' for varbinary,
// else a string literal that CAST(... AS typ) reads back as v.
func literal(v any, typ string) (string, error) {
	if v == nil {
		return "NULL", nil
	}
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.Pointer && rv.IsNil() {
		return "NULL", nil
	}
	binary := typ == "varbinary"
	switch x := v.(type) {
	case string:
		if binary {
			return "X'" + hex.EncodeToString([]byte(x)) + "'", nil
		}
		return stringLiteral(x)
	case []byte:
		if binary {
			return "X'" + hex.EncodeToString(x) + "'", nil
		}
		return stringLiteral(string(x))
	case bool:
		return textFor(strconv.FormatBool(x), binary)
	case int:
		return textFor(strconv.FormatInt(int64(x), 10), binary)
	case int8:
		return textFor(strconv.FormatInt(int64(x), 10), binary)
	case int16:
		return textFor(strconv.FormatInt(int64(x), 10), binary)
	case int32:
		return textFor(strconv.FormatInt(int64(x), 10), binary)
	case int64:
		return textFor(strconv.FormatInt(x, 10), binary)
	case uint:
		return textFor(strconv.FormatUint(uint64(x), 10), binary)
	case uint8:
		return textFor(strconv.FormatUint(uint64(x), 10), binary)
	case uint16:
		return textFor(strconv.FormatUint(uint64(x), 10), binary)
	case uint32:
		return textFor(strconv.FormatUint(uint64(x), 10), binary)
	case uint64:
		return textFor(strconv.FormatUint(x, 10), binary)
	case float32:
		return textFor(floatText(float64(x), 32, typ), binary)
	case float64:
		return textFor(floatText(x, 64, typ), binary)
	case *big.Int:
		return textFor(x.String(), binary)
	case json.Number:
		return textFor(x.String(), binary)
	case time.Time:
		return textFor(timeLiteralText(x, typ), binary)
	case driver.Valuer:
		val, err := x.Value()
		if err != nil {
			return "", fmt.Errorf("reading %T: %w", v, err)
		}
		return literal(val, typ)
	case fmt.Stringer:
		return textFor(x.String(), binary)
	}
	return "", fmt.Errorf("values of type %T cannot be inserted", v)
}

// textFor is a string literal, or its bytes for a varbinary column.
func textFor(s string, binary bool) (string, error) {
	if binary {
		return "X'" + hex.EncodeToString([]byte(s)) + "'", nil
	}
	return stringLiteral(s)
}

func stringLiteral(s string) (string, error) {
	if !utf8.ValidString(s) {
		return "", fmt.Errorf("a string that is not valid UTF-8")
	}
	return quoteString(s), nil
}

// floatText spells f so that CAST(varchar AS typ) reads it back: Java's
// spelling of the infinities and NaN, and no exponent for a decimal column.
func floatText(f float64, bits int, typ string) string {
	switch {
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	case math.IsNaN(f):
		return "NaN"
	case strings.HasPrefix(typ, "decimal"):
		return strconv.FormatFloat(f, 'f', -1, bits)
	}
	return strconv.FormatFloat(f, 'g', -1, bits)
}

// timeLiteralText spells t for a column of type typ: a date, an instant at UTC
// (with time zone), or the UTC wall-clock time.
func timeLiteralText(t time.Time, typ string) string {
	u := t.UTC()
	switch {
	case typ == "date":
		return u.Format("2006-01-02")
	case strings.HasSuffix(typ, "with time zone"):
		return u.Format("2006-01-02 15:04:05.999999999") + " UTC"
	}
	return u.Format("2006-01-02 15:04:05.999999999")
}
