package execute

// The kinds SQLMesh users bring over besides the time-range and unique-key
// ones: SCD_TYPE_2_BY_TIME (SQLMesh's SCD_TYPE_2), SCD_TYPE_2_BY_COLUMN,
// INCREMENTAL_BY_PARTITION and INCREMENTAL_UNMANAGED.
//
// Scheduling: they are incremental (model.Kind.IsIncremental) and scheduled
// as INCREMENTAL_BY_UNIQUE_KEY is: a run computes the model's missing
// intervals in batches (all at once without batch_size), each batch's query
// rendered for its range, and records the batch's range once its write has
// committed. None of them is refreshed by time range: the range only feeds
// the macros (@start_ds, ...), as in SQLMesh.
//
// Writes: every batch builds the table's whole new content with one query
// over the existing table and the model's query, and swaps it in with the
// engine's atomic warehouse.Engine.ReplaceTable (SQLMesh does the same with
// replace_query for SCD type 2): a failure leaves the old table serving,
// intact. The write and the interval's record are two steps, so a crash
// between them leaves the rows written and the interval missing, and the
// next run computes that batch again with the same range:
//   - SCD type 2 and INCREMENTAL_BY_PARTITION: harmless. Applying the same
//     source rows to a history that already holds them changes nothing (an
//     unchanged row stays open, a closed one stays closed), and replacing
//     the same partitions again gives the same rows; on a first load
//     (nothing recorded yet) the existing rows are ignored altogether;
//   - INCREMENTAL_UNMANAGED (append): the rows are appended again, as in
//     SQLMesh, where the user manages such a table. Only the first batch
//     (nothing recorded yet) replaces the table, so a crash during a first
//     deploy is harmless; a crash during a later run duplicates that run's
//     rows, and the plan says so.
//
// Forward-only: all four are forward-only by default, as SQLMesh makes
// them (INCREMENTAL_BY_PARTITION always): a change keeps the version, the
// table and its history (snapshot.AssignVersions), and later runs apply
// the new query to it. The table keeps its columns: a column the query
// adds is not written, and one it drops fails the next run naming it.
// A model whose forward_only is false gets a new table on a breaking
// change, built from its first interval: its history starts again from
// the source, as in SQLMesh. gapless has no restatement, so SQLMesh's
// disable_restatement (true for SCD type 2 and unmanaged) has nothing to
// disable.
//
// Engines: every engine runs them, since each batch is one ReplaceTable,
// which every engine commits atomically (DuckDB and PostgreSQL in a
// transaction, Trino as one CREATE OR REPLACE TABLE ... AS, an Iceberg
// commit that may read the table it replaces).

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/gapless-dev/gapless/model"
	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/warehouse"
)

// isBroughtKind reports whether k is one of the kinds this file runs.
func isBroughtKind(k model.Kind) bool {
	return k.IsSCDType2() || k == model.KindIncrementalByPartition || k == model.KindIncrementalUnmanaged
}

// UnmanagedWarning is what a plan says about an INCREMENTAL_UNMANAGED
// model: its appends are not atomic with the record of their interval.
const UnmanagedWarning = "INCREMENTAL_UNMANAGED appends its rows at each run; a crash after the append and before its interval is recorded appends them again at the next run (as in SQLMesh, the table is the user's to manage)"

// CheckKind checks, before anything is written, that the columns m's
// kind's properties name are among cols, the model's columns (an SCD type 2 table's history
// columns are left out of them). Errors are *model.Error at the
// kind, naming the model, the property and the columns there are.
func CheckKind(m *model.Model, cols []warehouse.Column) error {
	if !isBroughtKind(m.Kind) {
		return nil
	}
	bad := func(format string, args ...any) error {
		return &model.Error{Pos: m.KindPos, Code: model.CodeInvalid, Msg: fmt.Sprintf("model %s: ", m.Name) + fmt.Sprintf(format, args...)}
	}
	if m.Kind.IsSCDType2() { // the query's own columns (see withKindColumns)
		var own []warehouse.Column
		for _, c := range cols {
			if !strings.EqualFold(c.Name, m.SCD.ValidFrom) && !strings.EqualFold(c.Name, m.SCD.ValidTo) {
				own = append(own, c)
			}
		}
		cols = own
	}
	need := func(prop, col string) error {
		if _, ok := findColumn(cols, col); !ok {
			return bad("%s %s is not a column of its query (%s)%s", prop, col, columnNames(cols), didYouMean(col, cols))
		}
		return nil
	}
	switch m.Kind {
	case model.KindSCDType2ByTime, model.KindSCDType2ByColumn:
		for _, k := range m.UniqueKey {
			if err := need("unique_key", k); err != nil {
				return err
			}
		}
		if m.SCD.UpdatedAt != "" {
			if err := need("updated_at_name", m.SCD.UpdatedAt); err != nil {
				return err
			}
		}
		for _, c := range m.SCD.Columns {
			if err := need("columns", c); err != nil {
				return err
			}
		}
	case model.KindIncrementalByPartition:
		if len(m.PartitionedBy) == 0 {
			return bad("kind %s needs the partitions it replaces: add partitioned_by (COLUMN, ...)", m.Kind)
		}
		fallthrough
	case model.KindIncrementalUnmanaged:
		for _, p := range m.PartitionedBy {
			if _, ok := findColumn(cols, p); !ok && (m.Kind == model.KindIncrementalByPartition || m.InsertOverwrite) {
				return bad("partitioned_by %s is not a column of its query (%s): partitions are replaced by the values of columns only", p, columnNames(cols))
			}
		}
	}
	return nil
}

// withKindColumns is the columns of m's table given cols, its query's
// output columns: for an SCD type 2 kind, cols and then valid_from and
// valid_to of the kind's time type (as Prepare makes the table), so that
// the models reading it are checked against the history columns too. A
// query that produces a history column itself is refused at the kind.
func withKindColumns(m *model.Model, cols []warehouse.Column) ([]warehouse.Column, error) {
	if !m.Kind.IsSCDType2() {
		return cols, nil
	}
	for _, c := range []string{m.SCD.ValidFrom, m.SCD.ValidTo} {
		if _, ok := findColumn(cols, c); ok {
			return nil, &model.Error{Pos: m.KindPos, Code: model.CodeInvalid, Msg: fmt.Sprintf(
				"model %s: its query produces column %s, which kind %s writes itself (valid_from_name / valid_to_name): rename one of them",
				m.Name, c, m.Kind)}
		}
	}
	return append(cols[:len(cols):len(cols)],
		warehouse.Column{Name: m.SCD.ValidFrom, Type: m.SCD.TimeDataType},
		warehouse.Column{Name: m.SCD.ValidTo, Type: m.SCD.TimeDataType}), nil
}

// kindBatch writes one batch of a model of one of the kinds this file runs,
// whose query rendered for the batch is sql, and returns the rows the table
// holds afterwards. It swaps the table's whole new content in at once
// (warehouse.Engine.ReplaceTable) and records nothing: the caller records
// the batch's interval after it returns.
func (x *Executor) kindBatch(ctx context.Context, t *Template, key state.VersionKey, sql string, exec time.Time) (int64, error) {
	m := t.Snapshot.Model
	got, err := x.Store.GetIntervals(ctx, []state.VersionKey{key})
	if err != nil {
		return 0, fmt.Errorf("reading intervals of %s: %w", m.Name, err)
	}
	first := got[key].IsEmpty()
	cols, err := x.Engine.Columns(ctx, t.Table)
	if err != nil {
		return 0, fmt.Errorf("reading the columns of %s: %w", m.Name, err)
	}
	b := kindSQL{q: x.Engine.QuoteIdent, target: x.Engine.QuoteTable(t.Table), cols: cols,
		query: strings.TrimRight(strings.TrimSpace(sql), ";"), first: first}
	var full string
	switch {
	case m.Kind.IsSCDType2():
		full, err = b.scdType2(m, exec)
	case m.Kind == model.KindIncrementalByPartition,
		m.Kind == model.KindIncrementalUnmanaged && m.InsertOverwrite && len(m.PartitionedBy) > 0:
		full, err = b.byPartition(m.PartitionedBy)
	case m.Kind == model.KindIncrementalUnmanaged && (m.InsertOverwrite || first):
		full = b.final(b.list("", b.names()) + " FROM (" + b.query + ") AS " + b.q("gl_new"))
	case m.Kind == model.KindIncrementalUnmanaged:
		full = b.final(b.list("", b.names()) + " FROM " + b.target +
			" UNION ALL SELECT " + b.list("", b.names()) + " FROM (" + b.query + ") AS " + b.q("gl_new"))
	default:
		return 0, fmt.Errorf("kind %s has no writer", m.Kind)
	}
	if err != nil {
		return 0, fmt.Errorf("model %s: %w", m.Name, err)
	}
	if err := x.Engine.ReplaceTable(ctx, warehouse.ReplaceTableParams{Table: t.Table, Query: full}); err != nil {
		return 0, &sqlError{sql: full, err: err}
	}
	return x.countRows(ctx, t)
}

// sqlError carries the statement a write failed with, for BatchError.SQL.
type sqlError struct {
	sql string
	err error
}

func (e *sqlError) Error() string { return e.err.Error() }
func (e *sqlError) Unwrap() error { return e.err }

// scdCreateQuery is the query an SCD type 2 model's table is made from
// (without rows): its query's columns, then valid_from and valid_to of the
// kind's time type.
func scdCreateQuery(e warehouse.Engine, m *model.Model, sql string) string {
	typ := m.SCD.TimeDataType
	return "SELECT " + e.QuoteIdent("gl_q") + ".*, CAST(NULL AS " + typ + ") AS " + e.QuoteIdent(m.SCD.ValidFrom) +
		", CAST(NULL AS " + typ + ") AS " + e.QuoteIdent(m.SCD.ValidTo) +
		" FROM (" + strings.TrimRight(strings.TrimSpace(sql), ";") + ") AS " + e.QuoteIdent("gl_q")
}

// kindSQL builds the statements of kindBatch for one table.
type kindSQL struct {
	q      func(string) string
	target string             // the table, quoted
	cols   []warehouse.Column // the table's columns, in order
	query  string             // the model's query for the batch
	first  bool               // nothing of the table is recorded yet
}

// names is the table's column names, in order.
func (b kindSQL) names() []string {
	out := make([]string, len(b.cols))
	for i, c := range b.cols {
		out[i] = c.Name
	}
	return out
}

// col is the table's spelling of column name (matched as the engines
// match unquoted names, ASCII case folded), or an error naming it.
func (b kindSQL) col(name string) (string, error) {
	if c, ok := findColumn(b.cols, name); ok {
		return c.Name, nil
	}
	return "", fmt.Errorf("column %s is not a column of the table (%s)", name, columnNames(b.cols))
}

// list renders names, each quoted and qualified by alias when one is
// given, comma-separated.
func (b kindSQL) list(alias string, names []string) string {
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = b.ref(alias, n)
	}
	return strings.Join(parts, ", ")
}

func (b kindSQL) ref(alias, name string) string {
	if alias == "" {
		return b.q(name)
	}
	return b.q(alias) + "." + b.q(name)
}

// final selects from rest (a "cols FROM ..." body, one row per table row)
// every table column cast to its table type, in the table's order, so that
// the swapped-in table keeps the table's columns and types.
func (b kindSQL) final(rest string) string {
	parts := make([]string, len(b.cols))
	for i, c := range b.cols {
		parts[i] = "CAST(" + b.q(c.Name) + " AS " + c.Type + ") AS " + b.q(c.Name)
	}
	return "SELECT " + strings.Join(parts, ", ") + " FROM (SELECT " + rest + ") AS " + b.q("gl_rows")
}

// byPartition replaces exactly the partitions (values of keys, NULL being
// a value) present in the query's rows; on a first load the query's rows
// are the table.
func (b kindSQL) byPartition(keys []string) (string, error) {
	names := b.names()
	newRows := "SELECT " + b.list("", names) + " FROM (" + b.query + ") AS " + b.q("gl_raw")
	body := "SELECT " + b.list("", names) + " FROM " + b.q("gl_new")
	if !b.first {
		conds := make([]string, len(keys))
		for i, k := range keys {
			c, err := b.col(k)
			if err != nil {
				return "", fmt.Errorf("partitioned_by: %w", err)
			}
			conds[i] = b.ref("gl_n", c) + " IS NOT DISTINCT FROM " + b.ref("gl_t", c)
		}
		body = "SELECT " + b.list("gl_t", names) + " FROM " + b.target + " AS " + b.q("gl_t") +
			" WHERE NOT EXISTS (SELECT 1 FROM " + b.q("gl_new") + " AS " + b.q("gl_n") + " WHERE " + strings.Join(conds, " AND ") + ")" +
			" UNION ALL " + body
	}
	out := b.final(b.list("", names) + " FROM (" + body + ") AS " + b.q("gl_parts"))
	return "WITH " + b.q("gl_new") + " AS (" + newRows + ") " + out, nil
}

// timeLiteral renders t as a literal of SQL type typ: its day for a DATE,
// with its UTC offset for a type with a time zone, without one otherwise.
func timeLiteral(t time.Time, typ string) string {
	u := strings.ToUpper(strings.TrimSpace(typ))
	s := t.UTC().Format("2006-01-02 15:04:05.999999")
	switch {
	case u == "DATE":
		s = t.UTC().Format(time.DateOnly)
	case strings.Contains(u, "TZ") || strings.Contains(u, "TIME ZONE"):
		s += "+00:00"
	}
	return "CAST('" + s + "' AS " + typ + ")"
}

// scdType2 is the whole new history of an SCD type 2 table, SQLMesh's
// algorithm (engine_adapter _scd_type_2) written as one query:
//   - rows already closed (valid_to set) stay as they are;
//   - the source's rows, one per unique key (SQLMesh keeps one with
//     DISTINCT ON; gapless keeps the latest updated_at for BY_TIME, any one
//     for BY_COLUMN), are matched by key with the open rows (valid_to NULL);
//   - an open row whose key's source row changed (BY_TIME: a later
//     updated_at; BY_COLUMN: a checked column IS DISTINCT FROM, NULLs
//     compared as values, both keys not NULL) is closed at the new
//     updated_at (BY_TIME) or the execution time (BY_COLUMN, or the
//     updated_at column when updated_at_name is set), and a new open row
//     is added with that valid_from;
//   - an open row whose key is gone from the source is closed at the
//     execution time when invalidate_hard_deletes is true, and stays open
//     otherwise;
//   - a key new to the table opens a row from 1970-01-01 00:00:00 (BY_TIME,
//     or updated_at with updated_at_as_valid_from; after a hard delete, from
//     the later of the deletion and updated_at), or for BY_COLUMN from the
//     execution time, except on the table's first load without
//     execution_time_as_valid_from, where it is 1970-01-01;
//   - an unchanged row stays as it is.
//
// On a first load (nothing recorded) the table's rows are ignored, so a
// first load that crashed before its record runs again from scratch.
func (b kindSQL) scdType2(m *model.Model, exec time.Time) (string, error) {
	p := m.SCD
	vf, err := b.col(p.ValidFrom)
	if err != nil {
		return "", err
	}
	vt, err := b.col(p.ValidTo)
	if err != nil {
		return "", err
	}
	var upd string
	if p.UpdatedAt != "" {
		if upd, err = b.col(p.UpdatedAt); err != nil {
			return "", err
		}
	}
	keys := make([]string, len(m.UniqueKey))
	for i, k := range m.UniqueKey {
		if keys[i], err = b.col(k); err != nil {
			return "", fmt.Errorf("unique_key: %w", err)
		}
	}
	all := b.names()
	var unmanaged []string
	for _, c := range all {
		if c != vf && c != vt {
			unmanaged = append(unmanaged, c)
		}
	}
	check := unmanaged
	if !p.AllColumns && m.Kind == model.KindSCDType2ByColumn {
		check = make([]string, len(p.Columns))
		for i, c := range p.Columns {
			if check[i], err = b.col(c); err != nil {
				return "", fmt.Errorf("columns: %w", err)
			}
		}
	}
	typ, _ := findColumn(b.cols, vf)
	T := typ.Type
	byTime := m.Kind == model.KindSCDType2ByTime
	q, r := b.q, b.ref
	epoch := timeLiteral(time.Unix(0, 0), T)
	execTS := timeLiteral(exec, T)
	if !byTime && upd != "" {
		execTS = "CAST(" + r("j", upd) + " AS " + T + ")"
	}
	none := ""
	if b.first {
		none = " AND 1 = 0"
	}

	// source: the query's rows, one per key.
	srcCols := make([]string, len(unmanaged))
	for i, c := range unmanaged {
		srcCols[i] = q(c)
		if byTime && c == upd {
			srcCols[i] = "CAST(" + q(c) + " AS " + T + ") AS " + q(c)
		}
	}
	order := ""
	if byTime {
		order = " ORDER BY " + r("gl_raw", upd) + " DESC NULLS LAST"
	}
	source := "SELECT TRUE AS " + q("_gl_exists") + ", " + strings.Join(srcCols, ", ") +
		" FROM (SELECT " + q("gl_raw") + ".*, ROW_NUMBER() OVER (PARTITION BY " + b.list("gl_raw", keys) + order + ") AS " + q("_gl_row") +
		" FROM (" + b.query + ") AS " + q("gl_raw") + ") AS " + q("gl_ranked") + " WHERE " + q("_gl_row") + " = 1"
	static := "SELECT " + b.list("", all) + " FROM " + b.target + " WHERE " + q(vt) + " IS NOT NULL" + none
	latest := "SELECT " + b.list("", all) + ", TRUE AS " + q("_gl_exists") + " FROM " + b.target + " WHERE " + q(vt) + " IS NULL" + none
	var dk []string
	for i, k := range keys {
		dk = append(dk, q(k)+" AS "+q(fmt.Sprintf("_gl_k%d", i)))
	}
	latestDeleted := "SELECT TRUE AS " + q("_gl_exists") + ", " + strings.Join(dk, ", ") + ", MAX(" + q(vt) + ") AS " + q(vt) +
		" FROM " + q("gl_static") + " GROUP BY " + b.list("", keys)

	prev := func(c string) string { return "_gl_t_" + c }
	var jcols []string
	jcols = append(jcols, r("s", "_gl_exists")+" AS "+q("_gl_exists"))
	for _, c := range all {
		jcols = append(jcols, r("l", c)+" AS "+q(prev(c)))
	}
	for _, c := range unmanaged {
		jcols = append(jcols, r("s", c)+" AS "+q(c))
	}
	var on []string
	for _, k := range keys {
		on = append(on, r("l", k)+" = "+r("s", k))
	}
	joined := "SELECT " + strings.Join(jcols, ", ") + " FROM " + q("gl_latest") + " AS " + q("l") +
		" FULL OUTER JOIN " + q("gl_source") + " AS " + q("s") + " ON " + strings.Join(on, " AND ")

	gone := r("j", "_gl_exists") + " IS NULL"
	var changed, insertFrom string
	if byTime {
		changed = r("j", upd) + " > " + r("j", prev(upd))
		insertFrom = r("j", upd)
	} else {
		var both, diff []string
		for _, k := range keys {
			both = append(both, r("j", prev(k))+" IS NOT NULL", r("j", k)+" IS NOT NULL")
		}
		for _, c := range check {
			diff = append(diff, r("j", c)+" IS DISTINCT FROM "+r("j", prev(c)))
		}
		changed = strings.Join(both, " AND ") + " AND (" + strings.Join(diff, " OR ") + ")"
		insertFrom = execTS
	}
	var validFrom, validTo string
	if byTime {
		start := epoch
		if p.UpdatedAtAsValidFrom {
			start = r("j", upd)
		}
		validFrom = "CASE WHEN " + r("j", prev(vf)) + " IS NULL AND " + r("d", "_gl_exists") + " IS NOT NULL THEN " +
			"CASE WHEN " + r("d", vt) + " > " + r("j", upd) + " THEN " + r("d", vt) + " ELSE " + r("j", upd) + " END " +
			"WHEN " + r("j", prev(vf)) + " IS NULL THEN " + start + " ELSE " + r("j", prev(vf)) + " END"
		validTo = "CASE WHEN " + changed + " THEN " + r("j", upd)
		if p.InvalidateHardDeletes {
			validTo += " WHEN " + gone + " THEN " + execTS
		}
		validTo += " ELSE " + r("j", prev(vt)) + " END"
	} else {
		start := execTS
		if b.first && !p.ExecutionTimeAsValidFrom {
			start = epoch
		}
		validFrom = "COALESCE(" + r("j", prev(vf)) + ", " + start + ")"
		cond := "(" + changed + ")"
		if p.InvalidateHardDeletes {
			cond = "(" + gone + " OR " + cond + ")"
		}
		validTo = "CASE WHEN " + cond + " THEN " + execTS + " ELSE " + r("j", prev(vt)) + " END"
	}
	ucols := map[string]string{vf: validFrom + " AS " + q(vf), vt: validTo + " AS " + q(vt)}
	icols := map[string]string{vf: insertFrom + " AS " + q(vf), vt: "CAST(NULL AS " + T + ") AS " + q(vt)}
	for _, c := range unmanaged {
		ucols[c] = "COALESCE(" + r("j", prev(c)) + ", " + r("j", c) + ") AS " + q(c)
		icols[c] = r("j", c) + " AS " + q(c)
	}
	inOrder := func(m map[string]string) string {
		parts := make([]string, len(all))
		for i, c := range all {
			parts[i] = m[c]
		}
		return strings.Join(parts, ", ")
	}
	var dOn []string
	for i, k := range keys {
		dOn = append(dOn, r("j", k)+" = "+r("d", fmt.Sprintf("_gl_k%d", i)))
	}
	updated := "SELECT " + inOrder(ucols) + " FROM " + q("gl_joined") + " AS " + q("j") +
		" LEFT JOIN " + q("gl_latest_deleted") + " AS " + q("d") + " ON " + strings.Join(dOn, " AND ")
	inserted := "SELECT " + inOrder(icols) + " FROM " + q("gl_joined") + " AS " + q("j") + " WHERE " + changed

	history := b.list("", all) + " FROM (SELECT " + b.list("", all) + " FROM " + q("gl_static") +
		" UNION ALL SELECT " + b.list("", all) + " FROM " + q("gl_updated") +
		" UNION ALL SELECT " + b.list("", all) + " FROM " + q("gl_inserted") + ") AS " + q("gl_history")
	ctes := []string{
		q("gl_source") + " AS (" + source + ")",
		q("gl_static") + " AS (" + static + ")",
		q("gl_latest") + " AS (" + latest + ")",
		q("gl_latest_deleted") + " AS (" + latestDeleted + ")",
		q("gl_joined") + " AS (" + joined + ")",
		q("gl_updated") + " AS (" + updated + ")",
		q("gl_inserted") + " AS (" + inserted + ")",
	}
	return "WITH " + strings.Join(ctes, ",\n") + "\n" + b.final(history), nil
}
