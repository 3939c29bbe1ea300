package trino_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/internal/trinotest"
	"github.com/gapless-dev/gapless/warehouse"
	"github.com/gapless-dev/gapless/warehouse/trino"
)

// eventsTable creates wt.events (ts timestamp(6), id bigint, v varchar).
func eventsTable(t *testing.T, e *trino.Engine) warehouse.Table {
	t.Helper()
	require.NoError(t, e.CreateSchema(t.Context(), "wt"))
	tbl := table("events")
	require.NoError(t, e.CreateTable(t.Context(), warehouse.CreateTableParams{Table: tbl, Columns: []warehouse.Column{
		{Name: "ts", Type: "TIMESTAMP"}, {Name: "id", Type: "BIGINT"}, {Name: "v", Type: "TEXT"},
	}}))
	return tbl
}

// hourRows is a query of n rows in hour h of 2024-01-01, ids h*1000+i,
// tagged v.
func hourRows(h, n int, v string) string {
	return fmt.Sprintf(`SELECT TIMESTAMP '2024-01-01 %02d:00:00' + g * INTERVAL '1' SECOND AS ts, CAST(%d * 1000 + g AS BIGINT) AS id, '%s' AS v
FROM UNNEST(sequence(0, %d)) AS s(g)`, h, h, v, n-1)
}

func insertHour(t *testing.T, e *trino.Engine, tbl warehouse.Table, h int, q string) int64 {
	t.Helper()
	n, err := e.InsertInterval(t.Context(), warehouse.InsertIntervalParams{Table: tbl, TimeColumn: "ts", Start: ts(h, 0), End: ts(h+1, 0), Query: q})
	require.NoError(t, err)
	return n
}

// Scenario: hour 1 holds 10 rows and is re-run with a query of 3: the
// MERGE's update count says 13 (deleted plus inserted), InsertInterval
// says 3, the rows inserted; a re-run whose query has no row in the range
// deletes the hour and says 0.
func TestInsertIntervalReturnsRowsInserted(t *testing.T) {
	t.Parallel()
	e := newEngine(t)
	tbl := eventsTable(t, e)
	require.Equal(t, int64(10), insertHour(t, e, tbl, 1, hourRows(1, 10, "a")))
	require.Equal(t, int64(3), insertHour(t, e, tbl, 1, hourRows(1, 3, "b")))
	require.Equal(t, int64(0), insertHour(t, e, tbl, 1, hourRows(2, 5, "outside")))
	require.Equal(t, [][]any{{int64(0)}}, query(t, e, "SELECT count(*) FROM "+e.QuoteTable(tbl)))
}

// Scenario: the rows a statement added are read from its Iceberg
// snapshot, found by the query id the client reported or, when the client
// reported none, by the statement's tag among the coordinator's queries:
// both give the same count.
func TestAddedRecordsByIDAndByTag(t *testing.T) {
	t.Parallel()
	e := newEngine(t)
	tbl := eventsTable(t, e)
	byID, byTag, err := e.CountAdded(t.Context(), tbl, "INSERT INTO "+e.QuoteTable(tbl)+" (ts, id, v) "+hourRows(3, 7, "x"))
	require.NoError(t, err)
	require.Equal(t, int64(7), byID)
	require.Equal(t, int64(7), byTag)
}

// Scenario: a dashboard counts hour 1 while the scheduler re-runs it five
// times with new values, once with a query that fails half-way. Every
// read sees the hour whole: 50 rows of one run, never none, never a mix,
// never 100. (One MERGE commits the delete and the insert together.)
func TestIntervalReplaceIsAtomicForReaders(t *testing.T) {
	t.Parallel()
	e := newEngine(t)
	tbl := eventsTable(t, e)
	insertHour(t, e, tbl, 1, hourRows(1, 50, "run0"))
	read := "SELECT count(*), count(DISTINCT v) FROM " + e.QuoteTable(tbl) + " WHERE ts >= TIMESTAMP '2024-01-01 01:00:00' AND ts < TIMESTAMP '2024-01-01 02:00:00'"
	done := make(chan struct{})
	var wg sync.WaitGroup
	var reads int
	var readErr error
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
			}
			res, err := e.Query(context.WithoutCancel(t.Context()), read)
			if err != nil {
				readErr = err
				return
			}
			if got := res.Rows[0]; got[0] != int64(50) || got[1] != int64(1) {
				readErr = fmt.Errorf("read %d saw %v rows of %v runs in the hour", reads, got[0], got[1])
				return
			}
			reads++
		}
	})
	for run := 1; run <= 5; run++ {
		q := hourRows(1, 50, fmt.Sprintf("run%d", run))
		if run == 3 {
			q = `SELECT TIMESTAMP '2024-01-01 01:00:00' AS ts, CAST(CASE WHEN g = 9000 THEN 'oops' ELSE CAST(g AS VARCHAR) END AS BIGINT) AS id, 'bad' AS v
FROM UNNEST(sequence(1, 10000)) AS s(g)`
		}
		_, err := e.InsertInterval(t.Context(), warehouse.InsertIntervalParams{Table: tbl, TimeColumn: "ts", Start: ts(1, 0), End: ts(2, 0), Query: q})
		if run == 3 {
			require.Error(t, err)
		} else {
			require.NoError(t, err)
		}
	}
	close(done)
	wg.Wait()
	require.NoError(t, readErr)
	t.Logf("%d reads during the runs", reads)
	require.Equal(t, [][]any{{int64(50), int64(1)}}, query(t, e, read))
	require.Equal(t, [][]any{{"run5"}}, query(t, e, "SELECT DISTINCT v FROM "+e.QuoteTable(tbl)))
}

// Scenario: two gapless processes (two engines on one catalog) and several
// workers in each write one table at once: disjoint hours, the same hour
// from both, each twice. Iceberg refuses the commits that overlap another;
// the engines take turns inside a process and retry across processes, so
// every hour ends with exactly its rows, each once, and no call fails.
func TestRacingWritersNeverLoseABatch(t *testing.T) {
	t.Parallel()
	url := pooledCatalog(t)
	open := func() *trino.Engine {
		e, err := trino.Open(t.Context(), url)
		require.NoError(t, err)
		t.Cleanup(func() { _ = e.Close() })
		return e
	}
	a, b := open(), open()
	tbl := eventsTable(t, a)
	raceWriters(t, a, b, tbl, 4, 20, "")
}

// raceWriters has engines a and b (two processes on one catalog) write
// tbl at once, several workers each: every one of hours hours from both,
// and hour 9 from three writers, perHour rows a time. No call may fail,
// and every hour must end with exactly one writer's rows, each once.
func raceWriters(t *testing.T, a, b *trino.Engine, tbl warehouse.Table, hours, perHour int, what string) {
	t.Helper()
	type job struct {
		e    *trino.Engine
		hour int
		tag  string
	}
	var jobs []job
	for h := range hours {
		jobs = append(jobs, job{a, h, "a"}, job{b, h, "b"}) // every hour from both processes
	}
	jobs = append(jobs, job{a, 9, "a"}, job{b, 9, "b"}, job{a, 9, "a2"}) // one hour, three writers
	start := make(chan struct{})
	errs := make([]error, len(jobs))
	var wg sync.WaitGroup
	for i, j := range jobs {
		wg.Go(func() {
			<-start
			_, errs[i] = j.e.InsertInterval(t.Context(), warehouse.InsertIntervalParams{Table: tbl, TimeColumn: "ts",
				Start: ts(j.hour, 0), End: ts(j.hour+1, 0), Query: hourRows(j.hour, perHour, j.tag)})
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "writer %d %s", i, what)
	}
	t.Logf("%s commits retried after a conflict: %d in one engine, %d in the other", what, a.CommitRetries(), b.CommitRetries())
	q := a.QuoteTable(tbl)
	require.Equal(t, [][]any{{int64((hours + 1) * perHour), int64((hours + 1) * perHour)}},
		query(t, a, "SELECT count(*), count(DISTINCT id) FROM "+q), "every hour's rows once %s", what)
	require.Equal(t, [][]any{{int64(hours + 1)}}, query(t, a,
		"SELECT count(*) FROM (SELECT date_trunc('hour', ts) AS h FROM "+q+" GROUP BY 1 HAVING count(DISTINCT v) = 1 AND count(*) = "+fmt.Sprint(perHour)+")"), what)
}

// Scenario: a promotion's fourth replace fails after the whole batch was
// checked (the warehouse went away mid-batch, here a test hook): the
// error is a *warehouse.PartialViewsError inside a *warehouse.Error,
// naming the three views already new and the one that failed; those three
// serve the new generation and the rest the old. Running the same batch
// again completes it.
func TestViewsPartialFailureThenRerunCompletes(t *testing.T) {
	t.Parallel()
	e := newEngine(t)
	ctx := t.Context()
	require.NoError(t, e.CreateSchema(ctx, "wt"))
	batch := func(g int) []warehouse.ViewParams {
		views := make([]warehouse.ViewParams, 6)
		for i := range views {
			views[i] = warehouse.ViewParams{View: table(fmt.Sprintf("v%d", i)), Query: fmt.Sprintf("SELECT CAST(%d AS BIGINT) AS gen", g)}
		}
		return views
	}
	gens := func() []int64 {
		var parts []string
		for i := range 6 {
			parts = append(parts, fmt.Sprintf("SELECT %d AS i, gen FROM %s", i, e.QuoteTable(table(fmt.Sprintf("v%d", i)))))
		}
		var out []int64
		for _, r := range query(t, e, "SELECT gen FROM ("+strings.Join(parts, " UNION ALL ")+") ORDER BY i") {
			out = append(out, r[0].(int64))
		}
		return out
	}
	require.NoError(t, e.CreateOrReplaceViews(ctx, batch(1)))

	e.FailViewReplaceAt(4)
	err := e.CreateOrReplaceViews(ctx, batch(2))
	var we *warehouse.Error
	require.ErrorAs(t, err, &we)
	require.Contains(t, we.Object, "v3")
	require.Contains(t, we.SQL, `"v3"`)
	var pe *warehouse.PartialViewsError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, []warehouse.Table{table("v0"), table("v1"), table("v2")}, pe.Done)
	require.Equal(t, table("v3"), pe.Failed)
	require.Contains(t, err.Error(), "re-run the promotion")
	require.Equal(t, []int64{2, 2, 2, 1, 1, 1}, gens())

	e.FailViewReplaceAt(0)
	require.NoError(t, e.CreateOrReplaceViews(ctx, batch(2)))
	require.Equal(t, []int64{2, 2, 2, 2, 2, 2}, gens())

	// A first replace that fails changed nothing: a plain error.
	e.FailViewReplaceAt(1)
	err = e.CreateOrReplaceViews(ctx, batch(3))
	require.ErrorAs(t, err, &we)
	require.False(t, errors.As(err, &pe), "nothing was replaced, so the batch failed whole")
	require.Equal(t, []int64{2, 2, 2, 2, 2, 2}, gens())
}

// Scenario: the checks that come before any replace, each failing a batch
// whose earlier views are valid: a table holding the last view's name, a
// query that does not bind, a query that does not bind because of a view
// the batch creates (checked only at its replace, after the others are
// new). The first two change nothing.
func TestViewsChecksComeFirst(t *testing.T) {
	t.Parallel()
	e := newEngine(t)
	ctx := t.Context()
	require.NoError(t, e.CreateSchema(ctx, "wt"))
	require.NoError(t, e.CreateTableAs(ctx, warehouse.CreateTableAsParams{Table: table("solid"), Query: "SELECT 1 AS id", WithData: true}))
	require.NoError(t, e.CreateOrReplaceView(ctx, warehouse.ViewParams{View: table("a"), Query: "SELECT 1 AS gen"}))
	genOf := func(v string) [][]any { return query(t, e, "SELECT gen FROM "+e.QuoteTable(table(v))) }

	err := e.CreateOrReplaceViews(ctx, []warehouse.ViewParams{{View: table("a"), Query: "SELECT 2 AS gen"}, {View: table("SOLID"), Query: "SELECT 2 AS gen"}})
	require.Error(t, err)
	require.Contains(t, err.Error(), "a table has this name")
	require.Equal(t, [][]any{{int64(1)}}, genOf("a"))

	err = e.CreateOrReplaceViews(ctx, []warehouse.ViewParams{{View: table("a"), Query: "SELECT 2 AS gen"}, {View: table("b"), Query: "SELECT nope FROM " + e.QuoteTable(table("solid"))}})
	var we *warehouse.Error
	require.ErrorAs(t, err, &we)
	require.Contains(t, we.Object, "wt.b")
	require.Contains(t, we.SQL, "nope")
	require.Equal(t, [][]any{{int64(1)}}, genOf("a"))

	err = e.CreateOrReplaceViews(ctx, []warehouse.ViewParams{{View: table("a"), Query: "SELECT 2 AS gen"},
		{View: table("c"), Query: "SELECT missing FROM " + e.QuoteTable(table("a"))}})
	var pe *warehouse.PartialViewsError
	require.ErrorAs(t, err, &pe, "a query reading a view of the batch is checked at its replace")
	require.Equal(t, [][]any{{int64(2)}}, genOf("a"))
}

// strangeNames are the conformance suite's (warehousetest/identifiers.go),
// which it keeps unexported.
var strangeNames = []string{"données", "表", "select", "order", "user", "MixedCase", "with space", "a.b",
	`evil"; DROP TABLE "canary"."x"; --`, `it's`, `"`, `back\slash`, "$1"}

// Scenario: each of the conformance suite's strange names is tried as a
// schema, a table and a column on Iceberg. The names the catalog holds
// work end to end (folded to lower case); the others are refused with
// ErrInvalidIdentifier before anything is created, and say why.
func TestStrangeNamesOnIceberg(t *testing.T) {
	t.Parallel()
	e := newEngine(t)
	ctx := t.Context()
	refusedAsObject := map[string]bool{ // as a schema, table or view name
		`evil"; DROP TABLE "canary"."x"; --`: true, `it's`: true, `"`: true, `back\slash`: true,
	}
	require.NoError(t, e.CreateSchema(ctx, "wt"))
	for _, name := range strangeNames {
		col := warehouse.Column{Name: name, Type: "BIGINT"}
		tbl := warehouse.Table{Schema: "wt", Name: name}
		schemaTbl := warehouse.Table{Schema: name, Name: "t"}
		if refusedAsObject[name] || name == "$1" {
			err := e.CreateTable(ctx, warehouse.CreateTableParams{Table: tbl, Columns: []warehouse.Column{col}})
			require.ErrorIs(t, err, warehouse.ErrInvalidIdentifier, "table %q", name)
			err = e.CreateOrReplaceView(ctx, warehouse.ViewParams{View: tbl, Query: "SELECT 1 AS x"})
			require.ErrorIs(t, err, warehouse.ErrInvalidIdentifier, "view %q", name)
		} else {
			require.NoError(t, e.CreateTable(ctx, warehouse.CreateTableParams{Table: tbl, Columns: []warehouse.Column{col}}), "table %q", name)
			ok, err := e.TableExists(ctx, tbl)
			require.NoError(t, err)
			require.True(t, ok, "table %q", name)
			cols, err := e.Columns(ctx, tbl)
			require.NoError(t, err)
			require.Equal(t, []warehouse.Column{{Name: strings.ToLower(name), Type: "bigint"}}, cols, "Trino folds names")
			require.NoError(t, e.DropTable(ctx, tbl))
		}
		if refusedAsObject[name] {
			require.ErrorIs(t, e.CreateSchema(ctx, name), warehouse.ErrInvalidIdentifier, "schema %q", name)
		} else {
			require.NoError(t, e.CreateSchema(ctx, name), "schema %q", name)
			require.NoError(t, e.CreateTable(ctx, warehouse.CreateTableParams{Table: schemaTbl, Columns: []warehouse.Column{{Name: "x", Type: "BIGINT"}}}), "table in schema %q", name)
			ok, err := e.TableExists(ctx, schemaTbl)
			require.NoError(t, err)
			require.True(t, ok, "a table in schema %q", name)
		}
	}
	// Every strange name works as a column.
	cols := make([]warehouse.Column, len(strangeNames))
	for i, name := range strangeNames {
		cols[i] = warehouse.Column{Name: name, Type: "BIGINT"}
	}
	wide := table("wide")
	require.NoError(t, e.CreateTable(ctx, warehouse.CreateTableParams{Table: wide, Columns: cols}))
	got, err := e.Columns(ctx, wide)
	require.NoError(t, err)
	require.Len(t, got, len(cols))
	for i, c := range got {
		require.Equal(t, strings.ToLower(cols[i].Name), c.Name)
	}
	n, err := e.InsertRows(ctx, warehouse.InsertRowsParams{Table: wide, Columns: strangeNames, Rows: [][]any{make([]any, len(cols))}})
	require.NoError(t, err)
	require.Equal(t, int64(1), n)
	// Nothing was created under a refused name.
	names := query(t, e, "SELECT table_name FROM information_schema.tables WHERE table_schema = 'wt' ORDER BY 1")
	require.Equal(t, [][]any{{"wide"}}, names)
}

// Scenario: `gapless query` without --allow-writes refuses, with
// ErrNotARead and before Trino sees them, the statements Trino would run
// even in a read-only transaction; the catalog, the session and the table
// are as before. Trino's reads (SHOW, DESCRIBE, EXPLAIN ANALYZE of a
// SELECT, TABLE) run.
func TestReadOnlyQueryOnTrino(t *testing.T) {
	t.Parallel()
	e := newEngine(t)
	ctx := t.Context()
	require.NoError(t, e.CreateSchema(ctx, "wt"))
	tbl := table("served")
	require.NoError(t, e.CreateTableAs(ctx, warehouse.CreateTableAsParams{Table: tbl, Query: "SELECT CAST(1 AS BIGINT) AS id", WithData: true}))
	q := e.QuoteTable(tbl)
	for _, stmt := range []string{
		"SET SESSION query_max_run_time = '1s'",
		"USE system.runtime",
		"PREPARE p FROM DELETE FROM " + q,
		"EXECUTE IMMEDIATE 'DELETE FROM " + strings.ReplaceAll(q, "'", "''") + "'",
		"DROP CATALOG system",
		"CREATE CATALOG x USING memory",
		"START TRANSACTION",
		"CALL system.runtime.kill_query(query_id => 'x', message => 'y')",
		"ALTER TABLE " + q + " EXECUTE optimize",
		"SELECT 1; DELETE FROM " + q,
	} {
		res, err := e.ReadOnlyQuery(ctx, stmt)
		require.ErrorIs(t, err, warehouse.ErrNotARead, stmt)
		require.Nil(t, res)
		var we *warehouse.Error
		require.ErrorAs(t, err, &we, stmt)
	}
	for _, stmt := range []string{"SHOW TABLES FROM wt", "DESCRIBE " + q, "EXPLAIN ANALYZE SELECT * FROM " + q, "TABLE " + q, "SELECT count(*) FROM " + q + " WHERE id = $1"} {
		var args []any
		if strings.Contains(stmt, "$1") {
			args = []any{1}
		}
		_, err := e.ReadOnlyQuery(ctx, stmt, args...)
		require.NoError(t, err, stmt)
	}
	require.Equal(t, [][]any{{int64(1)}}, query(t, e, "SELECT id FROM "+q))
}

// Scenario: audits read values of every common type; each comes back as
// the plain Go value Query documents, with Trino's type names.
func TestQueryValues(t *testing.T) {
	t.Parallel()
	e := newEngine(t)
	_, err := e.Query(t.Context(), "SELECT $1 AS a, ? AS b", ts(5, 6), 7)
	require.Error(t, err, "mixing $1 and ? leaves a ? without argument")
	res, err := e.Query(t.Context(), `SELECT CAST(1 AS TINYINT) AS i1, 2 AS i4, CAST(3 AS BIGINT) AS i8, CAST(1.25 AS DECIMAL(12,2)) AS d,
		1.5E0 AS f, REAL '2.5' AS r, 'x' AS s, CAST('y' AS CHAR(2)) AS c, true AS b, DATE '2024-01-02' AS day,
		TIMESTAMP '2024-01-02 03:04:05.123456' AS ts, TIMESTAMP '2024-01-02 03:04:05 +01:00' AS tz, X'0102' AS bin, NULL AS n,
		$1 AS arg_time, $2 AS arg_int; -- done`, ts(5, 6), 7)
	require.NoError(t, err)
	require.Equal(t, []string{"TINYINT", "INTEGER", "BIGINT", "DECIMAL", "DOUBLE", "REAL", "VARCHAR", "CHAR", "BOOLEAN", "DATE",
		"TIMESTAMP", "TIMESTAMP WITH TIME ZONE", "VARBINARY", "UNKNOWN", "TIMESTAMP", "INTEGER"}, res.Types)
	require.Equal(t, []any{int64(1), int64(2), int64(3), "1.25", 1.5, 2.5, "x", "y ", true,
		time.Date(2024, 1, 2, 0, 0, 0, 0, time.UTC), time.Date(2024, 1, 2, 3, 4, 5, 123456000, time.UTC),
		time.Date(2024, 1, 2, 2, 4, 5, 0, time.UTC), []byte{1, 2}, nil, ts(5, 6), int64(7)}, res.Rows[0])
	for _, v := range res.Rows[0] {
		if tv, ok := v.(time.Time); ok {
			require.Equal(t, time.UTC, tv.Location())
		}
	}

	_, err = e.Query(t.Context(), "SELECT ?", sql.Named("X-Trino-User", "admin"))
	require.ErrorIs(t, err, warehouse.ErrInvalidArgument)
	_, err = e.Query(t.Context(), "SELECT 1; SELECT 2")
	var we *warehouse.Error
	require.ErrorAs(t, err, &we)
	require.Equal(t, "SELECT 1; SELECT 2", we.SQL)
}

// Scenario: models are described before their tables exist; each type
// comes back as the Iceberg table made from the query stores it (Trino's
// timestamp(0) and (3) as timestamp(6), char and varchar(n) as varchar,
// tinyint as integer), so CreateTable accepts it back and Columns then
// reports exactly the description.
func TestDescribeReportsStoredTypes(t *testing.T) {
	t.Parallel()
	e := newEngine(t)
	ctx := t.Context()
	cols, err := e.Describe(ctx, warehouse.DescribeParams{Query: `SELECT TIMESTAMP '2024-01-01 00:00:00' AS t0, CAST(NULL AS TIMESTAMP) AS t3,
		CAST('a' AS CHAR(3)) AS c, CAST('a' AS VARCHAR(5)) AS vc, CAST(1 AS TINYINT) AS ti, CAST(1 AS SMALLINT) AS si,
		CAST(1.5 AS DECIMAL(12,2)) AS d, TIMESTAMP '2024-01-01 00:00:00 UTC' AS tz, ARRAY[CAST('a' AS VARCHAR(3))] AS arr, X'00' AS bin`})
	require.NoError(t, err)
	want := []warehouse.Column{{Name: "t0", Type: "timestamp(6)"}, {Name: "t3", Type: "timestamp(6)"}, {Name: "c", Type: "varchar"},
		{Name: "vc", Type: "varchar"}, {Name: "ti", Type: "integer"}, {Name: "si", Type: "integer"}, {Name: "d", Type: "decimal(12,2)"},
		{Name: "tz", Type: "timestamp(6) with time zone"}, {Name: "arr", Type: "array(varchar)"}, {Name: "bin", Type: "varbinary"}}
	require.Equal(t, want, cols)
	require.NoError(t, e.CreateSchema(ctx, "wt"))
	require.NoError(t, e.CreateTable(ctx, warehouse.CreateTableParams{Table: table("described"), Columns: cols}))
	got, err := e.Columns(ctx, table("described"))
	require.NoError(t, err)
	require.Equal(t, want, got)
}

// Scenario: a merge's query returns a key the table does not have twice
// (Trino's MERGE itself refuses only a target row matching two source
// rows), and then the NULL key twice: NULLs count as equal. Each is a
// duplicate key, refused inside the MERGE (nothing commits) with
// warehouse.ErrDuplicateKey. A merge of distinct keys, one NULL, then
// lands.
func TestMergeRefusesDuplicateNewKeys(t *testing.T) {
	t.Parallel()
	checkNewKeyTwiceIsRefused(t, newEngine(t))
}

// checkNewKeyTwiceIsRefused is TestMergeRefusesDuplicateNewKeys on any
// engine (the mutants' too).
func checkNewKeyTwiceIsRefused(t *testing.T, e warehouse.Engine) {
	ctx := t.Context()
	require.NoError(t, e.CreateSchema(ctx, "wt"))
	tbl := table("keyed")
	require.NoError(t, e.CreateTableAs(ctx, warehouse.CreateTableAsParams{Table: tbl, WithData: true,
		Query: "SELECT CAST(k AS VARCHAR) AS k, CAST(v AS BIGINT) AS v FROM (VALUES ('a', 1)) AS s(k, v)"}))
	for _, q := range []string{
		"SELECT 'new' AS k, 2 AS v UNION ALL SELECT 'new', 3",
		"SELECT CAST(NULL AS VARCHAR) AS k, 2 AS v UNION ALL SELECT CAST(NULL AS VARCHAR), 3",
	} {
		_, err := e.MergeByKey(ctx, warehouse.MergeParams{Table: tbl, Key: []string{"k"}, Query: q})
		require.ErrorIs(t, err, warehouse.ErrDuplicateKey, q)
		require.Equal(t, [][]any{{"a", int64(1)}}, query(t, e, "SELECT k, v FROM "+e.QuoteTable(tbl)), q)
	}
	n, err := e.MergeByKey(ctx, warehouse.MergeParams{Table: tbl, Key: []string{"K"},
		Query: "SELECT 'a' AS k, 10 AS v UNION ALL SELECT CAST(NULL AS VARCHAR), 3"})
	require.NoError(t, err)
	require.Equal(t, int64(2), n)
	require.Equal(t, [][]any{{"a", int64(10)}, {nil, int64(3)}}, query(t, e, "SELECT k, v FROM "+e.QuoteTable(tbl)+" ORDER BY v DESC"))
}

// Scenario: a seed larger than one statement is loaded through a staging
// table and lands whole in one commit; one that fails on its last chunk
// lands nothing. The staging table is gone either way.
func TestInsertRowsStagedIsAllOrNothing(t *testing.T) {
	t.Parallel()
	e := newEngine(t)
	ctx := t.Context()
	e.SetMaxStatementBytes(4096)
	require.NoError(t, e.CreateSchema(ctx, "wt"))
	tbl := table("seed")
	require.NoError(t, e.CreateTable(ctx, warehouse.CreateTableParams{Table: tbl, Columns: []warehouse.Column{{Name: "id", Type: "BIGINT"}, {Name: "name", Type: "TEXT"}}}))
	rows := make([][]any, 600)
	for i := range rows {
		rows[i] = []any{int64(i), fmt.Sprintf("row %d", i)}
	}
	n, err := e.InsertRows(ctx, warehouse.InsertRowsParams{Table: tbl, Columns: []string{"id", "name"}, Rows: rows})
	require.NoError(t, err)
	require.Equal(t, int64(600), n)
	rows[599][0] = "not a number"
	_, err = e.InsertRows(ctx, warehouse.InsertRowsParams{Table: tbl, Columns: []string{"id", "name"}, Rows: rows})
	require.Error(t, err)
	require.Equal(t, [][]any{{int64(600), int64(600)}}, query(t, e, "SELECT count(*), count(DISTINCT id) FROM "+e.QuoteTable(tbl)))
	require.Equal(t, [][]any{{"seed"}}, query(t, e, "SELECT table_name FROM information_schema.tables WHERE table_schema = 'wt'"))
}

// Scenario: a warehouse URL with a mistake fails Open with a
// *warehouse.Error that names the URL without its password: a catalog the
// cluster lacks, a password over http.
func TestOpenErrors(t *testing.T) {
	t.Parallel()
	trinotest.Require(t)
	_, err := trino.Open(t.Context(), trinotest.ServerURL()+"/no_such_catalog_x")
	var we *warehouse.Error
	require.ErrorAs(t, err, &we)
	require.Contains(t, err.Error(), "no_such_catalog_x")

	_, err = trino.Open(t.Context(), "trino://ann:s3cret@127.0.0.1:8080/lake")
	require.ErrorAs(t, err, &we)
	require.Contains(t, err.Error(), "secure=true")
	require.NotContains(t, err.Error(), "s3cret")
}
