package trino

import (
	"context"
	"crypto/rand"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	trinoclient "github.com/trinodb/trino-go-client/trino"

	"github.com/gapless-dev/gapless/warehouse"
)

// timeKind is how an interval's bounds compare with a time column.
type timeKind int

const (
	timeNone timeKind = iota
	timeTimestamp
	timeTimestampTZ
	timeDate
	timeText
)

// timeKindOf classifies a column type as Columns spells it.
func timeKindOf(typ string) timeKind {
	switch {
	case typ == "date":
		return timeDate
	case strings.HasPrefix(typ, "timestamp") && strings.HasSuffix(typ, "with time zone"):
		return timeTimestampTZ
	case typ == "timestamp" || strings.HasPrefix(typ, "timestamp("):
		return timeTimestamp
	case typ == "varchar" || strings.HasPrefix(typ, "varchar(") || strings.HasPrefix(typ, "char"):
		return timeText
	}
	return timeNone
}

// timestampLiteral renders an instant as a Trino literal for a column of
// kind k: a TIMESTAMP of its UTC wall-clock time for timestamp and date
// columns (Trino compares a date with a timestamp as its midnight), a
// TIMESTAMP ... UTC for timestamp with time zone.
func timestampLiteral(t time.Time, k timeKind) string {
	s := t.UTC().Format("2006-01-02 15:04:05.999999999")
	if k == timeTimestampTZ {
		return "TIMESTAMP '" + s + " UTC'"
	}
	return "TIMESTAMP '" + s + "'"
}

// boundLiterals renders p's bounds for a time column of kind k.
func boundLiterals(p warehouse.InsertIntervalParams, k timeKind) (lo, hi string) {
	if k == timeText {
		return quoteString(p.Text.Start), quoteString(p.Text.End)
	}
	return timestampLiteral(p.Start, k), timestampLiteral(p.End, k)
}

// tagged starts a statement with a comment that names it uniquely, so that
// its query id can be found in system.runtime.queries afterwards (see
// addedRecords).
func tagged(op string) (tag, prefix string) {
	var b [12]byte
	_, _ = rand.Read(b[:])
	tag = "gapless " + op + " " + hex.EncodeToString(b[:])
	return tag, "/* " + tag + " */ "
}

// marker returns a column name none of cols has, for the engine's own
// helper column.
func marker(cols []column, base string) string {
	name := base
	for i := 2; ; i++ {
		if _, taken := findColumn(cols, name); !taken {
			return name
		}
		name = fmt.Sprintf("%s_%d", base, i)
	}
}

// InsertInterval replaces the rows of [Start, End) in the time column of
// p.Table with p.Query's rows in that range, in ONE statement, hence one
// Iceberg commit:
//
//	MERGE INTO t USING (
//	  SELECT q.c1, ..., CAST(NULL AS integer) AS m FROM (query) AS q
//	    WHERE CAST(q.tc AS <tc's type>) >= lo AND CAST(q.tc AS <tc's type>) < hi
//	  UNION ALL SELECT NULL, ..., 1
//	) AS s ON s.m = (CASE WHEN t.tc >= lo AND t.tc < hi THEN 1 END) AND t.tc >= lo AND t.tc < hi
//	WHEN MATCHED THEN DELETE
//	WHEN NOT MATCHED AND s.m IS NULL THEN INSERT (c1, ...) VALUES (s.c1, ...)
//
// Every row of the table in the range matches the one marker row (m = 1)
// and is deleted; no query row ever matches (m is NULL), so each is
// inserted. The ON clause is written so that Trino joins by hash and
// reads only the range of the table: a join on "s.m AND <range>" alone
// would compare every query row with every row of the range (a re-run of
// 14,000 rows took 11.5 s that way, 1.6 s this way). A reader sees
// the interval's old rows or its new ones, never neither and never both; a
// query that fails commits nothing. Query rows are filtered on their time
// as the table stores it (cast to the column's type), so rows with a NULL
// time or outside the range are not inserted and every inserted row is one
// a re-run deletes. Columns are the table's, taken from the query by name;
// a table column the query lacks fails the statement.
//
// The time column must be a timestamp (with or without time zone) or a
// date; with p.Text, a varchar compared with the text bounds as Trino
// compares varchar, byte by byte. Start and End are instants, rendered in
// UTC.
//
// It returns the rows inserted, which the MERGE's update count does not
// tell (it counts deleted plus inserted rows): one more query reads the
// commit's snapshot summary ('added-records') by the statement's query id
// (see execTracked and addedRecords).
//
// Writers of one table take turns inside the engine; a commit refused
// because another process committed first is retried. They take turns
// with p.Concurrent too: Iceberg refuses a MERGE's commit when another
// committed delete files since it began (position deletes carry no
// statistics of the time column, so any may hold rows of its range), so
// re-runs of disjoint ranges sent side by side conflict and use up their
// retries (measured: the suite's concurrent re-runs failed after 8). With
// p.Concurrent the path is the same: the rows are computed and written by one
// statement anyway.
func (e *Engine) InsertInterval(ctx context.Context, p warehouse.InsertIntervalParams) (int64, error) {
	const op = "insert interval"
	obj := p.Table.String()
	if err := e.begin(ctx); err != nil {
		return 0, fail(op, obj, "", err)
	}
	if err := checkQualified(kindTable, p.Table); err != nil {
		return 0, fail(op, obj, "", err)
	}
	if err := checkIdent(kindColumn, p.TimeColumn); err != nil {
		return 0, fail(op, obj, "", fmt.Errorf("time column: %w", err))
	}
	if !p.End.After(p.Start) {
		return 0, fail(op, obj, "", fmt.Errorf("%w: interval end %s is not after start %s",
			warehouse.ErrInvalidArgument, p.End.UTC().Format(time.RFC3339Nano), p.Start.UTC().Format(time.RFC3339Nano)))
	}
	if p.Text != nil {
		if p.Text.Start >= p.Text.End {
			return 0, fail(op, obj, "", fmt.Errorf("%w: text bounds [%q, %q) are empty", warehouse.ErrInvalidArgument, p.Text.Start, p.Text.End))
		}
		if !validText(p.Text.Start) || !validText(p.Text.End) {
			return 0, fail(op, obj, "", fmt.Errorf("%w: text bounds must be valid UTF-8 without NUL bytes", warehouse.ErrInvalidArgument))
		}
	}
	q, err := trimQuery(p.Query)
	if err != nil {
		return 0, fail(op, obj, "", err)
	}
	unlock, err := e.locks.lock(ctx, tableKey(p.Table))
	if err != nil {
		return 0, fail(op, obj, "", err)
	}
	defer unlock()
	cols, err := e.targetTable(ctx, p.Table)
	if err != nil {
		return 0, fail(op, obj, "", err)
	}
	tc, ok := findColumn(cols, p.TimeColumn)
	if !ok {
		return 0, fail(op, obj, "", fmt.Errorf("%w: no time column %q in %s", warehouse.ErrInvalidArgument, p.TimeColumn, p.Table))
	}
	k := timeKindOf(tc.Type)
	switch {
	case p.Text != nil && k != timeText:
		return 0, fail(op, obj, "", fmt.Errorf("%w: %q is %s, and text bounds need varchar", warehouse.ErrUnsupportedTimeColumn, tc.Name, tc.Type))
	case p.Text == nil && (k == timeNone || k == timeText):
		return 0, fail(op, obj, "", fmt.Errorf("%w: %q is %s", warehouse.ErrUnsupportedTimeColumn, tc.Name, tc.Type))
	}
	var inserted int64
	err = e.withRetry(ctx, obj, isCommitConflict, func() error {
		tag, stmt := intervalMerge(p, q, cols, tc, k)
		id, err := e.execTracked(ctx, stmt)
		if err != nil {
			return &stmtError{sql: stmt, err: err}
		}
		inserted, err = e.addedRecords(ctx, p.Table, id, tag)
		return err
	})
	if err != nil {
		return 0, fail(op, obj, "", e.writeError(ctx, p.Table, err))
	}
	return inserted, nil
}

// progressCallback and progressPeriod are the names of the client's
// named arguments that register a trino.ProgressUpdater for a statement.
const (
	progressCallback = "X-Trino-Progress-Callback"
	progressPeriod   = "X-Trino-Progress-Callback-Period"
)

// queryIDCapture is a trino.ProgressUpdater that keeps the first query id
// it is told, until frozen.
type queryIDCapture struct {
	mu     sync.Mutex
	id     string
	frozen bool
}

func (c *queryIDCapture) Update(p trinoclient.QueryProgressInfo) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.frozen && c.id == "" {
		c.id = p.QueryId
	}
}

func (c *queryIDCapture) freeze() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.frozen = true
	return c.id
}

// execTracked runs stmt and returns its query id, when the client told it
// ("" otherwise). The client reports a statement's progress, with its
// query id, to a ProgressUpdater passed as a named argument, from a
// goroutine of its own and without waiting (an update can be dropped).
// It keeps that updater on the connection for the statements after, so
// the statement runs on a connection of its own, the capture is frozen
// before the connection is given up, and the connection is then
// discarded (a Trino connection is a set of headers: a new one costs
// nothing).
func (e *Engine) execTracked(ctx context.Context, stmt string) (string, error) {
	conn, err := e.db.Conn(ctx)
	if err != nil {
		return "", serverError(err)
	}
	capture := &queryIDCapture{}
	defer func() {
		capture.freeze()
		_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		_ = conn.Close()
	}()
	if _, err := conn.ExecContext(ctx, stmt, sql.Named(progressCallback, capture), sql.Named(progressPeriod, time.Nanosecond)); err != nil {
		return "", serverError(err)
	}
	return capture.freeze(), nil
}

// intervalMerge renders InsertInterval's MERGE (see there), tagged.
func intervalMerge(p warehouse.InsertIntervalParams, q string, cols []column, tc column, k timeKind) (tag, stmt string) {
	lo, hi := boundLiterals(p, k)
	m := quoteIdent(marker(cols, "gapless_delete_marker"))
	names := make([]string, len(cols))
	fromQ := make([]string, len(cols))
	fromS := make([]string, len(cols))
	nulls := make([]string, len(cols))
	for i, c := range cols {
		names[i] = quoteIdent(c.Name)
		fromQ[i] = "q." + names[i]
		fromS[i] = "s." + names[i]
		nulls[i] = "NULL"
	}
	qtc := "CAST(q." + quoteIdent(tc.Name) + " AS " + tc.Type + ")"
	ttc := "t." + quoteIdent(tc.Name)
	inRange := ttc + " >= " + lo + " AND " + ttc + " < " + hi
	tag, prefix := tagged("insert-interval")
	var b strings.Builder
	b.WriteString(prefix)
	b.WriteString("MERGE INTO " + quoteTable(p.Table) + " AS t USING (\n")
	b.WriteString("SELECT " + strings.Join(fromQ, ", ") + ", CAST(NULL AS integer) AS " + m + "\nFROM " + subquery(q) + " AS q\n")
	b.WriteString("WHERE " + qtc + " >= " + lo + " AND " + qtc + " < " + hi + "\n")
	b.WriteString("UNION ALL SELECT " + strings.Join(nulls, ", ") + ", 1\n")
	// The equality is what makes Trino join by hash (the marker, 1, with
	// the target's rows in the range); the range again, outside the
	// CASE, is what it pushes into the target's scan.
	b.WriteString(") AS s ON s." + m + " = (CASE WHEN " + inRange + " THEN 1 END) AND " + inRange + "\n")
	b.WriteString("WHEN MATCHED THEN DELETE\n")
	b.WriteString("WHEN NOT MATCHED AND s." + m + " IS NULL THEN INSERT (" + strings.Join(names, ", ") + ") VALUES (" + strings.Join(fromS, ", ") + ")")
	return tag, b.String()
}

// addedRecords returns the rows the statement with query id id (tagged
// tag) added to t: the 'added-records' of the Iceberg snapshot whose
// trino_query_id is id. A statement that committed no snapshot, or one
// without added records, added none. Without an id (the client dropped
// every progress update), the statement is found by its tag in
// system.runtime.queries, where the coordinator keeps a finished query
// for at least 15 minutes: a dearer lookup.
func (e *Engine) addedRecords(ctx context.Context, t warehouse.Table, id, tag string) (int64, error) {
	snapshots := quoteTable(warehouse.Table{Schema: t.Schema, Name: t.Name + "$snapshots"})
	var q string
	if id != "" {
		q = "SELECT CAST(NULL AS varchar), CAST(element_at(summary, 'added-records') AS bigint) FROM " + snapshots +
			" WHERE element_at(summary, 'trino_query_id') = " + quoteString(id)
	} else {
		// The tag is split in the lookup's text, so that the lookup does
		// not find itself.
		half := len(tag) / 2
		q = "SELECT q.query_id, CAST(element_at(s.summary, 'added-records') AS bigint)\nFROM system.runtime.queries AS q LEFT JOIN " + snapshots +
			" AS s ON element_at(s.summary, 'trino_query_id') = q.query_id\nWHERE q.state = 'FINISHED' AND starts_with(q.query, '/* ' || " +
			quoteString(tag[:half]) + " || " + quoteString(tag[half:]) + " || ' */')"
	}
	found := 0
	var added int64
	err := e.queryRows(ctx, q, func(r *sql.Rows) error {
		var qid sql.NullString
		var n sql.NullInt64
		if err := r.Scan(&qid, &n); err != nil {
			return err
		}
		found++
		added += n.Int64
		return nil
	})
	if err != nil {
		return 0, err
	}
	if id == "" && found == 0 {
		return 0, &stmtError{sql: q, err: fmt.Errorf("the statement tagged %q committed, but the coordinator no longer lists it: its row count is unknown", tag)}
	}
	return added, nil
}

// validText reports whether s can be a Trino string literal.
func validText(s string) bool {
	return strings.IndexByte(s, 0) < 0 && utf8.ValidString(s)
}

// errDuplicateKeyMessage is the message of the fail() MergeByKey's source
// raises for a key the query returns twice.
const errDuplicateKeyMessage = "gapless: the merge query returns a key more than once"

// MergeByKey upserts p.Query's rows into p.Table by p.Key in ONE
// statement, hence one Iceberg commit, without needing any constraint on
// the table:
//
//	MERGE INTO t USING (
//	  SELECT q.c1, ... FROM (
//	    SELECT q.c1, ..., count(*) OVER (PARTITION BY q.k1, ...) AS n FROM (query) AS q
//	  ) AS q WHERE CASE WHEN q.n > 1 THEN fail('...') ELSE true END
//	) AS s ON (t.k1 IS NULL) = (s.k1 IS NULL) AND coalesce(t.k1, z1) = coalesce(s.k1, z1) AND ...
//	WHEN MATCHED THEN UPDATE SET c = s.c, ...
//	WHEN NOT MATCHED THEN INSERT (c1, ...) VALUES (s.c1, ...)
//
// Keys compare NULL-safely (a NULL key matches a NULL key): the pair of
// equalities is exactly IS NOT DISTINCT FROM, written so that Trino joins
// on it by hash (z is any constant of the key's type; the IS NULL
// equality keeps a real z apart from NULL). A key of a type without such a
// constant is compared with IS NOT DISTINCT FROM itself. A key the query
// returns twice (NULLs counting as equal) makes the statement fail
// (warehouse.ErrDuplicateKey) before anything commits. Columns are the
// table's, taken from the query by name. It returns the rows inserted or
// updated: the MERGE's update count.
func (e *Engine) MergeByKey(ctx context.Context, p warehouse.MergeParams) (int64, error) {
	const op = "merge by key"
	obj := p.Table.String()
	if err := e.begin(ctx); err != nil {
		return 0, fail(op, obj, "", err)
	}
	if err := checkQualified(kindTable, p.Table); err != nil {
		return 0, fail(op, obj, "", err)
	}
	if len(p.Key) == 0 {
		return 0, fail(op, obj, "", fmt.Errorf("%w: no key columns", warehouse.ErrInvalidArgument))
	}
	if err := checkColumns("key column", p.Key); err != nil {
		return 0, fail(op, obj, "", err)
	}
	seen := map[string]bool{}
	for _, k := range p.Key {
		if seen[fold(k)] {
			return 0, fail(op, obj, "", fmt.Errorf("%w: key column %q listed twice", warehouse.ErrInvalidArgument, k))
		}
		seen[fold(k)] = true
	}
	q, err := trimQuery(p.Query)
	if err != nil {
		return 0, fail(op, obj, "", err)
	}
	unlock, err := e.locks.lock(ctx, tableKey(p.Table))
	if err != nil {
		return 0, fail(op, obj, "", err)
	}
	defer unlock()
	cols, err := e.targetTable(ctx, p.Table)
	if err != nil {
		return 0, fail(op, obj, "", err)
	}
	keys := make([]column, len(p.Key))
	for i, k := range p.Key {
		c, ok := findColumn(cols, k)
		if !ok {
			return 0, fail(op, obj, "", fmt.Errorf("%w: no key column %q in %s", warehouse.ErrInvalidArgument, k, p.Table))
		}
		keys[i] = c
	}
	stmt := mergeSQL(p.Table, q, cols, keys)
	var n int64
	err = e.withRetry(ctx, obj, isCommitConflict, func() error {
		var err error
		n, err = e.exec(ctx, stmt)
		return err
	})
	if err != nil {
		msg := errorMessage(err)
		if strings.Contains(msg, errDuplicateKeyMessage) || strings.Contains(msg, "matched more than one source row") {
			err = fmt.Errorf("%w: %w", warehouse.ErrDuplicateKey, err)
		} else {
			err = e.writeError(ctx, p.Table, err)
		}
		return 0, fail(op, obj, stmt, err)
	}
	return n, nil
}

// mergeSQL renders MergeByKey's MERGE (see there).
func mergeSQL(t warehouse.Table, q string, cols, keys []column) string {
	n := quoteIdent(marker(cols, "gapless_key_count"))
	names := make([]string, len(cols))
	fromQ := make([]string, len(cols))
	fromS := make([]string, len(cols))
	var sets []string
	isKey := map[string]bool{}
	for _, k := range keys {
		isKey[k.Name] = true
	}
	for i, c := range cols {
		names[i] = quoteIdent(c.Name)
		fromQ[i] = "q." + names[i]
		fromS[i] = "s." + names[i]
		if !isKey[c.Name] {
			sets = append(sets, names[i]+" = s."+names[i])
		}
	}
	if len(sets) == 0 {
		// Every column is a key: a matched row stays as it is, but MERGE
		// wants something to set.
		sets = append(sets, names[0]+" = s."+names[0])
	}
	partition := make([]string, len(keys))
	on := make([]string, 0, 2*len(keys))
	for i, k := range keys {
		qk := quoteIdent(k.Name)
		partition[i] = "q." + qk
		if z, ok := zeroOf(k.Type); ok {
			on = append(on, "(t."+qk+" IS NULL) = (s."+qk+" IS NULL)", "coalesce(t."+qk+", "+z+") = coalesce(s."+qk+", "+z+")")
		} else {
			on = append(on, "t."+qk+" IS NOT DISTINCT FROM s."+qk)
		}
	}
	var b strings.Builder
	b.WriteString("MERGE INTO " + quoteTable(t) + " AS t USING (\n")
	b.WriteString("SELECT " + strings.Join(fromQ, ", ") + " FROM (\n")
	b.WriteString("SELECT " + strings.Join(fromQ, ", ") + ", count(*) OVER (PARTITION BY " + strings.Join(partition, ", ") + ") AS " + n +
		"\nFROM " + subquery(q) + " AS q\n")
	b.WriteString(") AS q WHERE CASE WHEN q." + n + " > 1 THEN fail(" + quoteString(errDuplicateKeyMessage) + ") ELSE true END\n")
	b.WriteString(") AS s ON " + strings.Join(on, " AND ") + "\n")
	b.WriteString("WHEN MATCHED THEN UPDATE SET " + strings.Join(sets, ", ") + "\n")
	b.WriteString("WHEN NOT MATCHED THEN INSERT (" + strings.Join(names, ", ") + ") VALUES (" + strings.Join(fromS, ", ") + ")")
	return b.String()
}

// zeroOf returns a constant of a key's type (as Columns spells it), for the
// hash-joinable NULL-safe key comparison, or false for a type without one
// here (arrays, maps, rows, ...).
func zeroOf(typ string) (string, bool) {
	switch {
	case typ == "tinyint" || typ == "smallint" || typ == "integer" || typ == "bigint" || typ == "real" || typ == "double" ||
		strings.HasPrefix(typ, "decimal"):
		return "0", true
	case typ == "varchar" || strings.HasPrefix(typ, "varchar(") || strings.HasPrefix(typ, "char"):
		return "''", true
	case typ == "boolean":
		return "false", true
	case typ == "date":
		return "DATE '1970-01-01'", true
	case strings.HasPrefix(typ, "timestamp") && strings.HasSuffix(typ, "with time zone"):
		return "TIMESTAMP '1970-01-01 00:00:00 UTC'", true
	case strings.HasPrefix(typ, "timestamp"):
		return "TIMESTAMP '1970-01-01 00:00:00'", true
	case strings.HasPrefix(typ, "time"):
		return "TIME '00:00:00'", true
	case typ == "uuid":
		return "UUID '00000000-0000-0000-0000-000000000000'", true
	case typ == "varbinary":
		return "X''", true
	}
	return "", false
}

// ReplaceTable rebuilds p.Table from p.Query in one statement, CREATE OR
// REPLACE TABLE t AS (query): Iceberg commits the new schema and rows as
// one snapshot of the same table, so readers see the old content or the
// new, a failing query leaves the old table intact (nothing is left
// behind), a missing table is created, and views over the table keep
// working (Trino views resolve names when read). A view of that name is
// refused with warehouse.ErrNotATable. FirstBuild changes nothing: the
// replace is as fast as an append here.
func (e *Engine) ReplaceTable(ctx context.Context, p warehouse.ReplaceTableParams) error {
	_, _, err := e.ReplaceTableRows(ctx, p)
	return err
}

// ReplaceTableRows is ReplaceTable, and returns the table's row count
// afterwards: the statement's update count, known for no further query.
func (e *Engine) ReplaceTableRows(ctx context.Context, p warehouse.ReplaceTableParams) (int64, bool, error) {
	const op = "replace table"
	obj := p.Table.String()
	if err := e.begin(ctx); err != nil {
		return 0, false, fail(op, obj, "", err)
	}
	if err := checkQualified(kindTable, p.Table); err != nil {
		return 0, false, fail(op, obj, "", err)
	}
	q, err := trimQuery(p.Query)
	if err != nil {
		return 0, false, fail(op, obj, "", err)
	}
	if _, err := e.CheckLayout(p.Layout); err != nil {
		return 0, false, fail(op, obj, "", err)
	}
	unlock, err := e.locks.lock(ctx, tableKey(p.Table))
	if err != nil {
		return 0, false, fail(op, obj, "", err)
	}
	defer unlock()
	// Trino refuses to replace a view by a table, as a failed commit:
	// "Failed to create table s.v: Table already exists". The name's kind
	// is read only then, to tell that apart from a refused commit (two
	// processes replacing the table at once), which is retried.
	inTheWay := func() error {
		kinds, kq, err := e.kinds(ctx, []warehouse.Table{p.Table})
		if err != nil {
			return &stmtError{sql: kq, err: err}
		}
		if k := kinds[foldTable(p.Table)]; k != "" && k != typeTable {
			return fmt.Errorf("%w: %s is a %s", warehouse.ErrNotATable, p.Table, strings.ToLower(k))
		}
		return nil
	}
	// The layout is stated again: a replaced Iceberg table takes the
	// statement's properties, not the old table's.
	stmt := "CREATE OR REPLACE TABLE " + quoteTable(p.Table) + tableComment(p.Layout) + withClause(p.Layout) + " AS " + subquery(q)
	var n int64
	var blocked error
	retryable := func(err error) bool {
		if errorName(err) != errIcebergCommit {
			return false
		}
		blocked = inTheWay()
		return blocked == nil
	}
	err = e.withRetry(ctx, obj, retryable, func() error {
		var err error
		n, err = e.exec(ctx, stmt)
		return err
	})
	if err != nil {
		if blocked != nil {
			err = fmt.Errorf("%w: %w", blocked, err)
		}
		return 0, false, fail(op, obj, stmt, err)
	}
	// Column comments need statements of their own, after the replace
	// (readers may meanwhile see the new rows without them).
	if stmt, err := e.execAll(ctx, columnComments(p.Table, p.Layout)); err != nil {
		return 0, false, fail(op, obj, stmt, err)
	}
	return n, true, nil
}
