// Package tablediff compares two tables of one warehouse, as SQLMesh's
// table_diff does: a schema diff (columns added, removed, retyped) and a row
// diff that joins the two tables on key columns (a model's grain, or keys
// the user names) and counts the rows only in one table, the rows in both,
// how many of those match in every compared column, each column's match
// rate, and a sample of the rows that differ.
//
// Invariants:
//   - it only reads: every statement goes through Engine.ReadOnlyQuery, so a
//     diff never changes the warehouse, whatever the --where text holds;
//   - identifiers are quoted with the engine's own quoting (QuoteIdent,
//     QuoteTable), so the same diff runs on DuckDB and PostgreSQL;
//   - the row diff runs only on keys that identify a row on both sides: a
//     key value found twice is refused with a *NotUniqueError counting the
//     duplicates, since a join on such keys multiplies rows and every count
//     after it would be wrong (unless the caller says to skip the check).
package tablediff

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/big"
	"slices"
	"strings"

	"github.com/gapless-dev/gapless/warehouse"
)

// DefaultLimit is how many sample rows each part of the sample holds
// unless told otherwise (SQLMesh's --limit default).
const DefaultLimit = 20

// DefaultDecimals is how many decimals floating-point and decimal columns
// are rounded to before they are compared (SQLMesh's --decimals default).
const DefaultDecimals = 3

// ErrNoKeys is returned when a row diff is asked for without key columns
// (a model without a grain, and no --on).
var ErrNoKeys = errors.New("no key columns to join the rows on")

// Side is one table of the comparison and the label it is reported under
// (an environment's name).
type Side struct {
	Name  string          `json:"name"`
	Table warehouse.Table `json:"table"`
}

// Params is one comparison.
type Params struct {
	Engine         warehouse.Engine
	Source, Target Side
	// Keys are the columns that identify a row on both sides; required.
	Keys []string
	// Where is a SQL condition applied to each side before the join, in
	// the engine's dialect; "" for every row.
	Where string
	// SkipColumns are left out of the schema diff and the comparison.
	SkipColumns []string
	// Limit is the number of rows of each sample part; 0 for none.
	Limit int
	// Decimals is what numeric columns of floating or decimal type are
	// rounded to before they are compared.
	Decimals int
	// Sample asks for the sample rows (three more reads).
	Sample bool
	// SkipKeyCheck skips the check that the keys are unique on each side
	// (SQLMesh's --skip-grain-check): one read less per side, and counts
	// of joined pairs rather than rows when a key repeats.
	SkipKeyCheck bool
}

// TypeChange is a column whose type differs between the sides.
type TypeChange struct {
	Name       string `json:"name"`
	SourceType string `json:"source_type"`
	TargetType string `json:"target_type"`
}

// SchemaDiff is the difference of the two tables' columns, seen from the
// source: Added are in the target only, Removed in the source only.
type SchemaDiff struct {
	Added    []warehouse.Column `json:"added"`
	Removed  []warehouse.Column `json:"removed"`
	Modified []TypeChange       `json:"modified"`
}

// Match reports whether both tables have the same columns with the same
// types (order aside).
func (d SchemaDiff) Match() bool {
	return len(d.Added) == 0 && len(d.Removed) == 0 && len(d.Modified) == 0
}

// ColumnStat is how often one compared column holds the same value on both
// sides of the joined rows (NULL matching NULL).
type ColumnStat struct {
	Name     string  `json:"name"`
	Matched  int64   `json:"matched"`
	Compared int64   `json:"compared"`
	MatchPct float64 `json:"match_pct"`
}

// Sample holds, each ordered by the keys and cut at Params.Limit, the
// joined rows that differ in some compared column (the keys, then
// <SOURCE>__c and <TARGET>__c for each column that differs somewhere), and
// the rows found on one side only.
type Sample struct {
	Differing  warehouse.Result `json:"differing"`
	SourceOnly warehouse.Result `json:"source_only"`
	TargetOnly warehouse.Result `json:"target_only"`
}

// RowDiff is the row comparison. FullMatch + PartialMatch = Joined;
// SourceOnly = SourceCount - Joined; TargetOnly = TargetCount - Joined.
type RowDiff struct {
	Keys         []string     `json:"keys"`
	SourceCount  int64        `json:"source_count"`
	TargetCount  int64        `json:"target_count"`
	Joined       int64        `json:"joined"`
	FullMatch    int64        `json:"full_match"`
	PartialMatch int64        `json:"partial_match"`
	SourceOnly   int64        `json:"source_only"`
	TargetOnly   int64        `json:"target_only"`
	Columns      []ColumnStat `json:"columns"`
	Sample       *Sample      `json:"sample,omitempty"`
}

// Pct is n as a percentage of the rows of both sides counted once per
// side, SQLMesh's denominator: a matched row counts twice (pass 2n), a row
// of one side once. Rounded to two decimals; 0 when both sides are empty.
func (r *RowDiff) Pct(n int64) float64 {
	total := r.SourceCount + r.TargetCount
	if total == 0 {
		return 0
	}
	return math.Round(float64(n)/float64(total)*10000) / 100
}

// Result is one comparison's answer.
type Result struct {
	Source Side       `json:"source"`
	Target Side       `json:"target"`
	Schema SchemaDiff `json:"schema"`
	Rows   *RowDiff   `json:"rows"`
}

// UnknownColumnError is a column named by the caller that a side does not
// have: a key either side lacks, or a skipped column neither side has
// (reported against the source).
type UnknownColumnError struct {
	Role    string // "key", "skipped column"
	Column  string
	Side    Side
	Columns []string // the side's columns
}

func (e *UnknownColumnError) Error() string {
	return fmt.Sprintf("%s %s: %s (%s) has no such column; its columns are %s",
		e.Role, e.Column, e.Side.Name, e.Side.Table, strings.Join(e.Columns, ", "))
}

// NotUniqueError is keys that do not identify a row on one side: Values key
// values appear more than once, in Rows rows.
type NotUniqueError struct {
	Side   Side
	Keys   []string
	Values int64
	Rows   int64
}

func (e *NotUniqueError) Error() string {
	return fmt.Sprintf("the keys (%s) are not unique in %s (%s): %d key values appear more than once, in %d rows; "+
		"rows are joined on the keys, so give key columns that identify one row (--on)",
		strings.Join(e.Keys, ", "), e.Side.Name, e.Side.Table, e.Values, e.Rows)
}

// Diff compares p.Source with p.Target: their schemas, then their rows
// joined on p.Keys. It reads only. It fails with ErrNoKeys without keys,
// *UnknownColumnError for a key or skipped column a side lacks, and
// *NotUniqueError when the keys repeat on a side.
func Diff(ctx context.Context, p Params) (*Result, error) {
	if len(p.Keys) == 0 {
		return nil, ErrNoKeys
	}
	if p.Decimals < 0 {
		return nil, fmt.Errorf("decimals must be 0 or more, not %d", p.Decimals)
	}
	if p.Limit < 0 {
		return nil, fmt.Errorf("limit must be 0 or more, not %d", p.Limit)
	}
	src, err := columns(ctx, p.Engine, p.Source)
	if err != nil {
		return nil, err
	}
	tgt, err := columns(ctx, p.Engine, p.Target)
	if err != nil {
		return nil, err
	}
	for _, s := range p.SkipColumns {
		_, inSrc := findColumn(s, columnNames(src))
		_, inTgt := findColumn(s, columnNames(tgt))
		if !inSrc && !inTgt {
			return nil, &UnknownColumnError{Role: "skipped column", Column: s, Side: p.Source, Columns: columnNames(src)}
		}
	}
	src, tgt = without(src, p.SkipColumns), without(tgt, p.SkipColumns)
	res := &Result{Source: p.Source, Target: p.Target, Schema: schemaDiff(src, tgt)}
	d := &differ{p: p, e: p.Engine}
	if d.keys, err = resolveKeys(p.Keys, src, tgt, p.Source, p.Target); err != nil {
		return nil, err
	}
	if !p.SkipKeyCheck {
		for _, side := range []Side{p.Source, p.Target} {
			if err := d.checkUnique(ctx, side); err != nil {
				return nil, err
			}
		}
	}
	d.src, d.tgt = src, tgt
	for _, c := range src {
		if slices.Contains(d.keys, c.Name) {
			continue
		}
		if i := slices.IndexFunc(tgt, func(t warehouse.Column) bool { return t.Name == c.Name }); i >= 0 && tgt[i].Type == c.Type {
			d.compared = append(d.compared, c)
		}
	}
	if res.Rows, err = d.rows(ctx); err != nil {
		return nil, err
	}
	if p.Sample && p.Limit > 0 {
		if res.Rows.Sample, err = d.sample(ctx, res.Rows); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// columns reads side's columns.
func columns(ctx context.Context, e warehouse.Engine, side Side) ([]warehouse.Column, error) {
	cols, err := e.Columns(ctx, side.Table)
	if err != nil {
		return nil, fmt.Errorf("reading the columns of %s (%s): %w", side.Name, side.Table, err)
	}
	return cols, nil
}

// without is cols without the skipped ones (names compared as the engines
// fold them, case-insensitively).
func without(cols []warehouse.Column, skip []string) []warehouse.Column {
	return slices.DeleteFunc(cols, func(c warehouse.Column) bool {
		return slices.ContainsFunc(skip, func(s string) bool { return strings.EqualFold(s, c.Name) })
	})
}

func columnNames(cols []warehouse.Column) []string {
	out := make([]string, len(cols))
	for i, c := range cols {
		out[i] = c.Name
	}
	return out
}

// findColumn finds name among names: exactly, or else case-insensitively
// when exactly one name matches so (both engines fold unquoted names).
func findColumn(name string, names []string) (string, bool) {
	if slices.Contains(names, name) {
		return name, true
	}
	found := ""
	for _, n := range names {
		if strings.EqualFold(n, name) {
			if found != "" {
				return "", false
			}
			found = n
		}
	}
	return found, found != ""
}

// resolveKeys spells every key as the tables do, refusing one a side lacks.
func resolveKeys(keys []string, src, tgt []warehouse.Column, s, t Side) ([]string, error) {
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		name, ok := findColumn(k, columnNames(src))
		if !ok {
			return nil, &UnknownColumnError{Role: "key", Column: k, Side: s, Columns: columnNames(src)}
		}
		if _, ok := findColumn(name, columnNames(tgt)); !ok {
			return nil, &UnknownColumnError{Role: "key", Column: k, Side: t, Columns: columnNames(tgt)}
		}
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out, nil
}

func schemaDiff(src, tgt []warehouse.Column) SchemaDiff {
	d := SchemaDiff{Added: []warehouse.Column{}, Removed: []warehouse.Column{}, Modified: []TypeChange{}}
	byName := func(cols []warehouse.Column, name string) (warehouse.Column, bool) {
		i := slices.IndexFunc(cols, func(c warehouse.Column) bool { return c.Name == name })
		if i < 0 {
			return warehouse.Column{}, false
		}
		return cols[i], true
	}
	for _, c := range tgt {
		if _, ok := byName(src, c.Name); !ok {
			d.Added = append(d.Added, c)
		}
	}
	for _, c := range src {
		t, ok := byName(tgt, c.Name)
		switch {
		case !ok:
			d.Removed = append(d.Removed, c)
		case t.Type != c.Type:
			d.Modified = append(d.Modified, TypeChange{Name: c.Name, SourceType: c.Type, TargetType: t.Type})
		}
	}
	return d
}

// differ builds the row diff's SQL for one comparison.
type differ struct {
	p        Params
	e        warehouse.Engine
	keys     []string
	src, tgt []warehouse.Column
	compared []warehouse.Column // non-key columns both sides have with one type
}

// rowMarker is the column each side's CTE adds to tell a row of that side
// from the NULLs of an outer join.
const rowMarker = "__gapless_row"

func (d *differ) q(name string) string { return d.e.QuoteIdent(name) }

func (d *differ) where() string {
	if strings.TrimSpace(d.p.Where) == "" {
		return ""
	}
	return " WHERE (" + d.p.Where + ")"
}

// ctes are the two sides, filtered, each with the row marker.
func (d *differ) ctes() string {
	side := func(alias string, s Side, cols []warehouse.Column) string {
		sel := make([]string, 0, len(cols)+1)
		sel = append(sel, "1 AS "+d.q(rowMarker))
		for _, c := range cols {
			sel = append(sel, d.q(c.Name))
		}
		return d.q(alias) + " AS (SELECT " + strings.Join(sel, ", ") + " FROM " + d.e.QuoteTable(s.Table) + d.where() + ")"
	}
	return "WITH " + side("s", d.p.Source, d.src) + ",\n" + side("t", d.p.Target, d.tgt) + "\n"
}

func (d *differ) col(alias, name string) string { return d.q(alias) + "." + d.q(name) }

// on is the join condition: every key equal (a NULL key joins nothing).
func (d *differ) on() string {
	parts := make([]string, len(d.keys))
	for i, k := range d.keys {
		parts[i] = d.col("s", k) + " = " + d.col("t", k)
	}
	return strings.Join(parts, " AND ")
}

// same is the condition that column c holds the same value on both sides
// of a joined row, NULL matching NULL, numbers compared after rounding.
func (d *differ) same(c warehouse.Column) string {
	s, t := d.col("s", c.Name), d.col("t", c.Name)
	if isNumericType(c.Type) {
		s, t = d.round(s), d.round(t)
	}
	return s + " IS NOT DISTINCT FROM " + t
}

func (d *differ) round(expr string) string {
	if d.e.Dialect() == "postgres" {
		// PostgreSQL rounds to n places only numeric, not double precision.
		return fmt.Sprintf("round(CAST(%s AS numeric), %d)", expr, d.p.Decimals)
	}
	return fmt.Sprintf("round(%s, %d)", expr, d.p.Decimals)
}

// isNumericType: floating-point and decimal types, as DuckDB and
// PostgreSQL spell them, which are compared after rounding.
func isNumericType(typ string) bool {
	t := strings.ToUpper(typ)
	for _, p := range []string{"FLOAT", "DOUBLE", "REAL", "DECIMAL", "NUMERIC"} {
		if strings.HasPrefix(t, p) {
			return true
		}
	}
	return false
}

// checkUnique refuses keys that repeat on side, counting the repeated
// values and the rows holding them.
func (d *differ) checkUnique(ctx context.Context, side Side) error {
	keys := make([]string, len(d.keys))
	for i, k := range d.keys {
		keys[i] = d.q(k)
	}
	sql := "SELECT count(*), CAST(coalesce(sum(n), 0) AS BIGINT) FROM (SELECT count(*) AS n FROM " +
		d.e.QuoteTable(side.Table) + d.where() + " GROUP BY " + strings.Join(keys, ", ") + " HAVING count(*) > 1) AS dup"
	res, err := d.e.ReadOnlyQuery(ctx, sql)
	if err != nil {
		return fmt.Errorf("checking that the keys (%s) are unique in %s (%s): %w", strings.Join(d.keys, ", "), side.Name, side.Table, err)
	}
	vals, err := ints(res, 2)
	if err != nil {
		return err
	}
	if vals[0] > 0 {
		return &NotUniqueError{Side: side, Keys: d.keys, Values: vals[0], Rows: vals[1]}
	}
	return nil
}

// rows counts the joined rows in one read.
func (d *differ) rows(ctx context.Context) (*RowDiff, error) {
	both := d.q("s_in") + " IS NOT NULL AND " + d.q("t_in") + " IS NOT NULL"
	inner := []string{d.col("s", rowMarker) + " AS " + d.q("s_in"), d.col("t", rowMarker) + " AS " + d.q("t_in")}
	allSame := []string{both}
	sel := []string{"count(" + d.q("s_in") + ")", "count(" + d.q("t_in") + ")", "count(CASE WHEN " + both + " THEN 1 END)"}
	var perCol []string
	for i, c := range d.compared {
		m := d.q(fmt.Sprintf("m%d", i))
		inner = append(inner, "CASE WHEN "+d.same(c)+" THEN 1 ELSE 0 END AS "+m)
		allSame = append(allSame, m+" = 1")
		perCol = append(perCol, "count(CASE WHEN "+both+" AND "+m+" = 1 THEN 1 END)")
	}
	sel = append(sel, "count(CASE WHEN "+strings.Join(allSame, " AND ")+" THEN 1 END)")
	sel = append(sel, perCol...)
	sql := d.ctes() + ", " + d.q("j") + " AS (SELECT " + strings.Join(inner, ", ") +
		" FROM " + d.q("s") + " FULL OUTER JOIN " + d.q("t") + " ON " + d.on() + ")\nSELECT " + strings.Join(sel, ", ") + " FROM " + d.q("j")
	res, err := d.e.ReadOnlyQuery(ctx, sql)
	if err != nil {
		return nil, fmt.Errorf("comparing the rows of %s and %s: %w", d.p.Source.Table, d.p.Target.Table, err)
	}
	v, err := ints(res, 4+len(d.compared))
	if err != nil {
		return nil, err
	}
	r := &RowDiff{Keys: d.keys, SourceCount: v[0], TargetCount: v[1], Joined: v[2], FullMatch: v[3], Columns: []ColumnStat{}}
	r.PartialMatch = r.Joined - r.FullMatch
	r.SourceOnly = r.SourceCount - r.Joined
	r.TargetOnly = r.TargetCount - r.Joined
	for i, c := range d.compared {
		st := ColumnStat{Name: c.Name, Matched: v[4+i], Compared: r.Joined}
		if r.Joined > 0 {
			st.MatchPct = math.Round(float64(st.Matched)/float64(r.Joined)*1000) / 10
		}
		r.Columns = append(r.Columns, st)
	}
	return r, nil
}

// sample reads the differing joined rows and the rows of one side only.
func (d *differ) sample(ctx context.Context, r *RowDiff) (*Sample, error) {
	order := make([]string, len(d.keys))
	keySel := make([]string, len(d.keys))
	for i, k := range d.keys {
		order[i] = d.col("s", k)
		keySel[i] = d.col("s", k) + " AS " + d.q(k)
	}
	limit := fmt.Sprintf(" LIMIT %d", d.p.Limit)
	out := &Sample{}

	sel := slices.Clone(keySel)
	var differs []string
	for i, c := range d.compared {
		differs = append(differs, "NOT ("+d.same(c)+")")
		if r.Columns[i].Matched == r.Columns[i].Compared {
			continue
		}
		sel = append(sel, d.col("s", c.Name)+" AS "+d.q(strings.ToUpper(d.p.Source.Name)+"__"+c.Name),
			d.col("t", c.Name)+" AS "+d.q(strings.ToUpper(d.p.Target.Name)+"__"+c.Name))
	}
	if len(differs) > 0 {
		sql := d.ctes() + "SELECT " + strings.Join(sel, ", ") + " FROM " + d.q("s") + " JOIN " + d.q("t") + " ON " + d.on() +
			" WHERE " + strings.Join(differs, " OR ") + " ORDER BY " + strings.Join(order, ", ") + limit
		if err := d.read(ctx, sql, &out.Differing); err != nil {
			return nil, err
		}
	} else {
		out.Differing = warehouse.Result{Columns: d.keys, Rows: [][]any{}}
	}
	only := func(this, other string, cols []warehouse.Column, dst *warehouse.Result) error {
		sel := make([]string, len(cols))
		ord := make([]string, len(d.keys))
		for i, c := range cols {
			sel[i] = d.col(this, c.Name)
		}
		for i, k := range d.keys {
			ord[i] = d.col(this, k)
		}
		sql := d.ctes() + "SELECT " + strings.Join(sel, ", ") + " FROM " + d.q(this) + " LEFT JOIN " + d.q(other) + " ON " + d.on() +
			" WHERE " + d.col(other, rowMarker) + " IS NULL ORDER BY " + strings.Join(ord, ", ") + limit
		return d.read(ctx, sql, dst)
	}
	if err := only("s", "t", d.src, &out.SourceOnly); err != nil {
		return nil, err
	}
	if err := only("t", "s", d.tgt, &out.TargetOnly); err != nil {
		return nil, err
	}
	return out, nil
}

func (d *differ) read(ctx context.Context, sql string, dst *warehouse.Result) error {
	res, err := d.e.ReadOnlyQuery(ctx, sql)
	if err != nil {
		return fmt.Errorf("sampling the rows of %s and %s: %w", d.p.Source.Table, d.p.Target.Table, err)
	}
	if res.Rows == nil {
		res.Rows = [][]any{}
	}
	*dst = *res
	return nil
}

// ints reads the first row of res as n integers.
func ints(res *warehouse.Result, n int) ([]int64, error) {
	if len(res.Rows) != 1 || len(res.Rows[0]) != n {
		return nil, fmt.Errorf("table diff: expected one row of %d counts, got %d rows", n, len(res.Rows))
	}
	out := make([]int64, n)
	for i, v := range res.Rows[0] {
		switch x := v.(type) {
		case int64:
			out[i] = x
		case int32:
			out[i] = int64(x)
		case int:
			out[i] = int64(x)
		case *big.Int:
			out[i] = x.Int64()
		case nil:
			out[i] = 0
		default:
			return nil, fmt.Errorf("table diff: count %d is a %T, not an integer", i, v)
		}
	}
	return out, nil
}
