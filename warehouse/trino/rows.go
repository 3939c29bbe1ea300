package trino

import (
	"context"
	"crypto/rand"
	"database/sql/driver"
	"encoding/hex"
	"encoding/json"
	"errors"
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
// The engine renders the rows as one JSON array of arrays of strings (each
// value's text, or null), in a string literal, and casts each value to its
// column's type in the statement:
//
//	INSERT INTO t (c1, ...) SELECT CAST(v1 AS <c1's type>), ...
//	FROM UNNEST(CAST(json_parse('[["1","a"],...]') AS array(row(varchar, ...)))) AS v(v1, ...)
//
// (a varbinary column gets its bytes in hex, read with from_hex). Trino
// parses one string literal in no time, where a VALUES list of thousands
// of rows takes it tens of seconds to plan. A value that does not fit its
// column fails the statement, which then inserts nothing. Rows that fit in
// one statement (under Trino's query.max-length) are one INSERT, one
// Iceberg commit. More are first loaded, in several statements, into a
// staging table beside the target (gapless_stage_<random>, same columns),
// then moved in with one INSERT ... SELECT, and the staging table is
// dropped whatever happens: the target still changes in one commit.
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
	vals := make([]any, len(p.Columns))
	for i, r := range p.Rows {
		for j, v := range r {
			text, err := valueText(v, cols[j].Type)
			if err != nil {
				return 0, fail(op, obj, "", fmt.Errorf("%w: row %d, column %q: %w", warehouse.ErrInvalidArgument, i+1, cols[j].Name, err))
			}
			vals[j] = text
		}
		b, err := json.Marshal(vals)
		if err != nil {
			return 0, fail(op, obj, "", fmt.Errorf("%w: row %d: %w", warehouse.ErrInvalidArgument, i+1, err))
		}
		rendered[i] = string(b)
	}
	limit := maxStatementBytes
	if n := e.maxStatement.Load(); n > 0 {
		limit = int(n)
	}
	chunks := chunkRows(rendered, limit)
	if len(chunks) == 1 {
		stmt := insertJSON(p.Table, cols, chunks[0])
		n, err := e.exec(ctx, stmt)
		if err != nil {
			return 0, fail(op, obj, shorten(stmt), e.writeError(ctx, p.Table, err))
		}
		return n, nil
	}
	n, err := e.insertStaged(ctx, p.Table, cols, chunks)
	if err != nil {
		return 0, fail(op, obj, "", e.writeError(ctx, p.Table, err))
	}
	return n, nil
}

// shorten cuts a statement of rendered rows for an error message.
func shorten(stmt string) string {
	const most = 2000
	if len(stmt) <= most {
		return stmt
	}
	cut := most
	for cut > 0 && !utf8.RuneStart(stmt[cut]) {
		cut--
	}
	return stmt[:cut] + fmt.Sprintf("... (%d more bytes)", len(stmt)-cut)
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
		if _, err := e.exec(ctx, insertJSON(stage, cols, chunk)); err != nil {
			var se *stmtError
			if errors.As(err, &se) {
				se.sql = shorten(se.sql)
			}
			return 0, err
		}
	}
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = quoteIdent(c.Name)
	}
	return e.exec(ctx, "INSERT INTO "+quoteTable(t)+" ("+strings.Join(names, ", ")+") SELECT "+strings.Join(names, ", ")+" FROM "+quoteTable(stage))
}

// insertJSON is the INSERT of rows (each a JSON array of strings and
// nulls) into t's cols.
func insertJSON(t warehouse.Table, cols []column, rows []string) string {
	names := make([]string, len(cols))
	exprs := make([]string, len(cols))
	aliases := make([]string, len(cols))
	fields := make([]string, len(cols))
	for i, c := range cols {
		names[i] = quoteIdent(c.Name)
		aliases[i] = fmt.Sprintf("v%d", i+1)
		fields[i] = "varchar"
		if c.Type == "varbinary" {
			exprs[i] = "from_hex(" + aliases[i] + ")"
		} else {
			exprs[i] = "CAST(" + aliases[i] + " AS " + c.Type + ")"
		}
	}
	data := "[" + strings.Join(rows, ",") + "]"
	return "INSERT INTO " + quoteTable(t) + " (" + strings.Join(names, ", ") + ")\nSELECT " + strings.Join(exprs, ", ") +
		"\nFROM UNNEST(CAST(json_parse(" + quoteString(data) + ") AS array(row(" + strings.Join(fields, ", ") + ")))) AS v(" + strings.Join(aliases, ", ") + ")"
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

// valueText is v's text for a column of type typ, which CAST(text AS typ)
// reads back as v (hex for a varbinary column, read by from_hex), or nil
// for NULL.
func valueText(v any, typ string) (any, error) {
	if v == nil {
		return nil, nil
	}
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.Pointer && rv.IsNil() {
		return nil, nil
	}
	binary := typ == "varbinary"
	text := func(s string) (any, error) {
		if binary {
			return hex.EncodeToString([]byte(s)), nil
		}
		if !utf8.ValidString(s) {
			return nil, errors.New("a string that is not valid UTF-8")
		}
		return s, nil
	}
	switch x := v.(type) {
	case string:
		return text(x)
	case []byte:
		if binary {
			return hex.EncodeToString(x), nil
		}
		return text(string(x))
	case bool:
		return text(strconv.FormatBool(x))
	case int:
		return text(strconv.FormatInt(int64(x), 10))
	case int8:
		return text(strconv.FormatInt(int64(x), 10))
	case int16:
		return text(strconv.FormatInt(int64(x), 10))
	case int32:
		return text(strconv.FormatInt(int64(x), 10))
	case int64:
		return text(strconv.FormatInt(x, 10))
	case uint:
		return text(strconv.FormatUint(uint64(x), 10))
	case uint8:
		return text(strconv.FormatUint(uint64(x), 10))
	case uint16:
		return text(strconv.FormatUint(uint64(x), 10))
	case uint32:
		return text(strconv.FormatUint(uint64(x), 10))
	case uint64:
		return text(strconv.FormatUint(x, 10))
	case float32:
		return text(floatText(float64(x), 32, typ))
	case float64:
		return text(floatText(x, 64, typ))
	case *big.Int:
		return text(x.String())
	case json.Number:
		return text(x.String())
	case time.Time:
		return text(timeLiteralText(x, typ))
	case driver.Valuer:
		val, err := x.Value()
		if err != nil {
			return nil, fmt.Errorf("reading %T: %w", v, err)
		}
		return valueText(val, typ)
	case fmt.Stringer:
		return text(x.String())
	}
	return nil, fmt.Errorf("values of type %T cannot be inserted", v)
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
