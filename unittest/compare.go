package unittest

import (
	"context"
	"database/sql"
	"encoding/hex"
	"fmt"
	"math/big"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/duckdb/duckdb-go/v2"
)

// Mismatch is how the rows of one output differ from the expected ones.
type Mismatch struct {
	// Output is "query" or "CTE name"; Line is where its expected rows
	// are written.
	Output string
	Line   int
	// Columns are the columns compared, in the query's order.
	Columns []string
	// Ordered says the query has an ORDER BY, so rows were compared by
	// position.
	Ordered bool
	// Missing are expected rows the query did not return; Unexpected are
	// rows it returned that were not expected; Changed pairs an expected
	// row with the returned row of the same key (or position) that
	// differs from it in some columns. Values are as the test's database
	// prints them ("NULL" for NULL).
	Missing, Unexpected [][]string
	Changed             []Changed
}

// Changed is an expected row and the returned row that stands for it.
type Changed struct {
	// Key names the row: the key columns' values ("item_id=1"), or its
	// position ("row 3") when rows are compared by position.
	Key     string
	Columns []ColumnDiff
}

// ColumnDiff is one column of a Changed row.
type ColumnDiff struct {
	Column, Expected, Actual string
}

// table is query rows as canonical text, one string per column.
type table struct {
	cols  []string
	types []string
	rows  [][]string
}

// query runs q and returns its rows as canonical text.
func (tr *testRun) query(ctx context.Context, q string) (*table, error) {
	rows, err := tr.conn.QueryContext(ctx, q)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cts, err := rows.ColumnTypes()
	if err != nil {
		return nil, err
	}
	t := &table{}
	for _, c := range cts {
		t.cols = append(t.cols, strings.ToLower(c.Name()))
		t.types = append(t.types, c.DatabaseTypeName())
	}
	for rows.Next() {
		vals := make([]any, len(cts))
		ptrs := make([]any, len(cts))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		row := make([]string, len(vals))
		for i, v := range vals {
			row[i] = canonical(v, t.types[i])
		}
		t.rows = append(t.rows, row)
	}
	return t, rows.Err()
}

// canonical is v as text that is equal for equal values of one type: dates
// as 2006-01-02, timestamps in UTC with microseconds only when non-zero,
// floating point numbers to 12 significant digits (SQLMesh compares them
// with a relative tolerance), NULL as NULL.
func canonical(v any, typ string) string {
	switch x := v.(type) {
	case nil:
		return "NULL"
	case time.Time:
		x = x.UTC()
		switch {
		case typ == "DATE":
			return x.Format("2006-01-02")
		case strings.HasPrefix(typ, "TIME") && !strings.HasPrefix(typ, "TIMESTAMP"):
			return x.Format("15:04:05.999999")
		case strings.Contains(typ, "TZ") || strings.Contains(typ, "WITH TIME ZONE"):
			return x.Format("2006-01-02 15:04:05.999999") + "+00"
		}
		return x.Format("2006-01-02 15:04:05.999999")
	case float64:
		return strconv.FormatFloat(x, 'g', 12, 64)
	case float32:
		return strconv.FormatFloat(float64(x), 'g', 7, 32)
	case duckdb.Decimal:
		f, _ := new(big.Rat).SetFrac(x.Value, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(x.Scale)), nil)).Float64()
		return strconv.FormatFloat(f, 'g', 15, 64)
	case []byte:
		if typ == "UUID" && len(x) == 16 {
			h := hex.EncodeToString(x)
			return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
		}
		return `\x` + hex.EncodeToString(x)
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = canonical(e, "")
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = k + ": " + canonical(x[k], "")
		}
		return "{" + strings.Join(parts, ", ") + "}"
	}
	return fmt.Sprint(v)
}

// check runs q (the model's query or one CTE's) and compares its rows with
// o's, returning nil when they match.
//
// As in SQLMesh: without partial every column the query returns is
// compared, a column an expected row omits being NULL; with partial only
// the columns the expected rows name. An expected column the query does
// not return is an error. Expected values are read as the type of the
// query's column (so '2024-01-01' equals a DATE, 2 equals 2.0). Rows are
// compared as a multiset, or by position when the query has an ORDER BY.
func (tr *testRun) check(ctx context.Context, o Output, what, q string, ordered bool) (*Mismatch, error) {
	actual, err := tr.query(ctx, q)
	if err != nil {
		return nil, tr.wrap(o.Line, err, "running the %s of model %s", what, tr.m.Name)
	}
	named, err := tr.expectedColumns(ctx, o)
	if err != nil {
		return nil, err
	}
	for _, c := range named {
		if !slices.Contains(actual.cols, c) {
			return nil, tr.errorf(o.Line, "%s of model %s: expected column %s is not a column the %s returns (columns: %s)%s",
				what, tr.m.Name, c, what, strings.Join(actual.cols, ", "), closest(c, actual.cols))
		}
	}
	var idx []int
	for i, c := range actual.cols {
		if !o.Partial || slices.Contains(named, c) {
			idx = append(idx, i)
		}
	}
	cols := make([]Column, len(idx))
	for j, i := range idx {
		cols[j] = Column{Name: actual.cols[i], Type: actual.types[i]}
		if cols[j].Type == "" {
			cols[j].Type = "VARCHAR"
		}
	}
	expected, err := tr.expectedRows(ctx, o, what, cols)
	if err != nil {
		return nil, err
	}
	got := make([][]string, len(actual.rows))
	for r, row := range actual.rows {
		got[r] = make([]string, len(idx))
		for j, i := range idx {
			got[r][j] = row[i]
		}
	}
	mm := diff(names(cols), expected, got, ordered, tr.keyColumns(o, names(cols)))
	if mm == nil {
		return nil, nil
	}
	mm.Output, mm.Line = what, o.Line
	return mm, nil
}

// expectedColumns are the columns o's rows or query name.
func (tr *testRun) expectedColumns(ctx context.Context, o Output) ([]string, error) {
	var out []string
	if o.Query != "" {
		cols, err := tr.describe(ctx, o.Query)
		if err != nil {
			return nil, tr.wrap(o.Line, err, "running the expected rows' query")
		}
		for _, c := range cols {
			out = append(out, strings.ToLower(c.Name))
		}
		return out, nil
	}
	for _, r := range o.Rows {
		for _, c := range r.Cells {
			if !slices.Contains(out, c.Column) {
				out = append(out, c.Column)
			}
		}
	}
	return out, nil
}

// expectedRows reads o's rows as cols' types, through a table of the
// test's database, and returns them as canonical text.
func (tr *testRun) expectedRows(ctx context.Context, o Output, what string, cols []Column) ([][]string, error) {
	const name = "__gapless_expected"
	if _, err := tr.conn.ExecContext(ctx, "DROP TABLE IF EXISTS "+name); err != nil {
		return nil, tr.wrap(o.Line, err, "preparing the expected rows")
	}
	defer func() { _, _ = tr.conn.ExecContext(context.WithoutCancel(ctx), "DROP TABLE IF EXISTS "+name) }()
	if err := tr.createTable(ctx, name, cols); err != nil {
		// A type DuckDB names but cannot create from its name (an ENUM):
		// compare that column as text.
		text := slices.Clone(cols)
		for i := range text {
			text[i].Type = "VARCHAR"
		}
		if err2 := tr.createTable(ctx, name, text); err2 != nil {
			return nil, tr.wrap(o.Line, err, "preparing the expected rows")
		}
	}
	if o.Query != "" {
		named, err := tr.expectedColumns(ctx, o)
		if err != nil {
			return nil, err
		}
		sel := make([]string, 0, len(named))
		for _, c := range named {
			if slices.ContainsFunc(cols, func(k Column) bool { return k.Name == c }) {
				sel = append(sel, quoteIdent(c))
			}
		}
		ins := "INSERT INTO " + name + " (" + strings.Join(sel, ", ") + ") SELECT " + strings.Join(sel, ", ") + " FROM (" + o.Query + ")"
		if _, err := tr.conn.ExecContext(ctx, ins); err != nil {
			return nil, tr.wrap(o.Line, err, "%s: the expected rows' query", what)
		}
	} else if err := tr.insertRows(ctx, name, cols, o.Rows, what+": expected rows"); err != nil {
		return nil, err
	}
	t, err := tr.query(ctx, "SELECT * FROM "+name+" ORDER BY rowid")
	if err != nil {
		return nil, tr.wrap(o.Line, err, "reading the expected rows")
	}
	return t.rows, nil
}

// keyColumns are the columns that identify a row of the model's query
// (its grain, else its unique key) among cols, for pairing rows in a diff.
func (tr *testRun) keyColumns(o Output, cols []string) []int {
	if o.CTE != "" {
		return nil
	}
	key := tr.m.Grain
	if len(key) == 0 {
		key = tr.m.UniqueKey
	}
	var out []int
	for _, k := range key {
		i := slices.Index(cols, strings.ToLower(k))
		if i < 0 {
			return nil
		}
		out = append(out, i)
	}
	return out
}

// diff compares expected and actual rows (canonical text), returning nil
// when they are equal: as multisets, or by position when ordered.
func diff(cols []string, expected, actual [][]string, ordered bool, key []int) *Mismatch {
	mm := &Mismatch{Columns: cols, Ordered: ordered}
	if ordered {
		n := min(len(expected), len(actual))
		for i := range n {
			if cd := columnDiffs(cols, expected[i], actual[i]); len(cd) > 0 {
				mm.Changed = append(mm.Changed, Changed{Key: "row " + strconv.Itoa(i+1), Columns: cd})
			}
		}
		mm.Missing = expected[n:]
		mm.Unexpected = actual[n:]
	} else {
		count := map[string]int{}
		for _, r := range actual {
			count[rowKey(r)]++
		}
		var missing [][]string
		for _, r := range expected {
			if k := rowKey(r); count[k] > 0 {
				count[k]--
			} else {
				missing = append(missing, r)
			}
		}
		var unexpected [][]string
		for _, r := range actual {
			if k := rowKey(r); count[k] > 0 {
				count[k]--
				unexpected = append(unexpected, r)
			}
		}
		mm.Missing, mm.Unexpected, mm.Changed = pair(cols, missing, unexpected, key)
	}
	if len(mm.Missing) == 0 && len(mm.Unexpected) == 0 && len(mm.Changed) == 0 {
		return nil
	}
	return mm
}

func rowKey(r []string) string { return strings.Join(r, "\x00") }

func columnDiffs(cols, e, a []string) []ColumnDiff {
	var out []ColumnDiff
	for i := range cols {
		if e[i] != a[i] {
			out = append(out, ColumnDiff{Column: cols[i], Expected: e[i], Actual: a[i]})
		}
	}
	return out
}

// pair matches each missing row with an unexpected row standing for it:
// the one with the same key columns, or, without a key, the one agreeing
// on the most columns (at least one, and never every column but none).
// What is left unpaired stays missing or unexpected.
func pair(cols []string, missing, unexpected [][]string, key []int) ([][]string, [][]string, []Changed) {
	used := make([]bool, len(unexpected))
	var leftMissing [][]string
	var changed []Changed
	for _, m := range missing {
		best, bestScore := -1, 0
		for j, u := range unexpected {
			if used[j] {
				continue
			}
			if key != nil {
				same := true
				for _, k := range key {
					same = same && m[k] == u[k]
				}
				if same {
					best = j
					break
				}
				continue
			}
			score := 0
			for i := range cols {
				if m[i] == u[i] {
					score++
				}
			}
			if score > bestScore && len(cols) > 1 {
				best, bestScore = j, score
			}
		}
		if best < 0 {
			leftMissing = append(leftMissing, m)
			continue
		}
		used[best] = true
		u := unexpected[best]
		var label []string
		keyIdx := key
		if keyIdx == nil {
			for i := range cols {
				if m[i] == u[i] {
					keyIdx = append(keyIdx, i)
				}
			}
		}
		for _, k := range keyIdx {
			label = append(label, cols[k]+"="+m[k])
		}
		changed = append(changed, Changed{Key: strings.Join(label, ", "), Columns: columnDiffs(cols, m, u)})
	}
	var leftUnexpected [][]string
	for j, u := range unexpected {
		if !used[j] {
			leftUnexpected = append(leftUnexpected, u)
		}
	}
	return leftMissing, leftUnexpected, changed
}

// compile-time check that *sql.Conn satisfies queryer.
var _ queryer = (*sql.Conn)(nil)
