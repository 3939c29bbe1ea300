package duckdb_test

import (
	"context"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/warehouse"
	"github.com/gapless-dev/gapless/warehouse/duckdb"
)

// The write path caches a table's column names. These scenarios change a
// table's columns between two writes, every way the engine can, and check
// that the second write sees the new columns: a column added and produced
// by the query is filled (never silently NULL), and a column the query does
// not produce is an error (never silently NULL either).

var cacheHour = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

const (
	cacheQueryTwo   = "SELECT TIMESTAMP '2024-01-01 00:30:00' AS ts, 1 AS id"
	cacheQueryThree = "SELECT TIMESTAMP '2024-01-01 00:30:00' AS ts, 2 AS id, 'x' AS extra"
)

func cacheInsert(t *testing.T, e *duckdb.Engine, tbl warehouse.Table, q string) error {
	t.Helper()
	_, err := e.InsertInterval(t.Context(), warehouse.InsertIntervalParams{Table: tbl, TimeColumn: "ts",
		Start: cacheHour, End: cacheHour.Add(time.Hour), Query: q})
	return err
}

// cacheRows returns id and extra of every row of tbl.
func cacheRows(t *testing.T, e *duckdb.Engine, tbl warehouse.Table) [][]any {
	t.Helper()
	res, err := e.Query(t.Context(), "SELECT CAST(id AS BIGINT), CAST(extra AS VARCHAR) FROM "+e.QuoteTable(tbl)+" ORDER BY id")
	require.NoError(t, err)
	return res.Rows
}

// cacheSetup creates s.t (ts, id) and writes one interval, which caches its
// columns.
func cacheSetup(t *testing.T, e *duckdb.Engine) warehouse.Table {
	t.Helper()
	ctx := t.Context()
	tbl := warehouse.Table{Schema: "s", Name: "t"}
	require.NoError(t, e.CreateSchema(ctx, tbl.Schema))
	require.NoError(t, e.CreateTable(ctx, warehouse.CreateTableParams{Table: tbl, Columns: []warehouse.Column{
		{Name: "ts", Type: "TIMESTAMP"}, {Name: "id", Type: "BIGINT"}}}))
	require.NoError(t, cacheInsert(t, e, tbl, cacheQueryTwo))
	return tbl
}

func TestColumnCacheSeesEveryColumnChange(t *testing.T) {
	t.Parallel()
	threeCols := []warehouse.Column{{Name: "ts", Type: "TIMESTAMP"}, {Name: "id", Type: "BIGINT"}, {Name: "extra", Type: "VARCHAR"}}
	for name, change := range map[string]func(t *testing.T, e *duckdb.Engine, tbl warehouse.Table){
		"ReplaceTable": func(t *testing.T, e *duckdb.Engine, tbl warehouse.Table) {
			require.NoError(t, e.ReplaceTable(t.Context(), warehouse.ReplaceTableParams{Table: tbl,
				Query: "SELECT ts, id, CAST(NULL AS VARCHAR) AS extra FROM " + e.QuoteTable(tbl) + " WHERE false"}))
		},
		"DropThenCreateTable": func(t *testing.T, e *duckdb.Engine, tbl warehouse.Table) {
			// Another spelling of the same name: DuckDB's catalog folds ASCII case.
			other := warehouse.Table{Schema: "S", Name: "T"}
			require.NoError(t, e.DropTable(t.Context(), other))
			require.NoError(t, e.CreateTable(t.Context(), warehouse.CreateTableParams{Table: other, Columns: threeCols}))
		},
		"DropThenCreateTableAs": func(t *testing.T, e *duckdb.Engine, tbl warehouse.Table) {
			require.NoError(t, e.DropTable(t.Context(), tbl))
			require.NoError(t, e.CreateTableAs(t.Context(), warehouse.CreateTableAsParams{Table: tbl, Query: cacheQueryThree}))
		},
		"AlterThroughQuery": func(t *testing.T, e *duckdb.Engine, tbl warehouse.Table) {
			_, err := e.Query(t.Context(), "ALTER TABLE "+e.QuoteTable(tbl)+" ADD COLUMN extra VARCHAR")
			require.NoError(t, err)
			_, err = e.Query(t.Context(), "DELETE FROM "+e.QuoteTable(tbl))
			require.NoError(t, err)
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e, err := duckdb.Open(t.Context(), "", duckdb.Options{})
			require.NoError(t, err)
			defer func() { require.NoError(t, e.Close()) }()
			tbl := cacheSetup(t, e)
			change(t, e, tbl)

			// The query lacks the new column: an error, not a NULL.
			require.Error(t, cacheInsert(t, e, tbl, cacheQueryTwo))
			// The query has it: it is filled.
			require.NoError(t, cacheInsert(t, e, tbl, cacheQueryThree))
			require.Equal(t, [][]any{{int64(2), "x"}}, cacheRows(t, e, tbl))

			// MergeByKey reads the same cache.
			_, err = e.Query(t.Context(), "ALTER TABLE "+e.QuoteTable(tbl)+" DROP COLUMN extra")
			require.NoError(t, err)
			_, err = e.MergeByKey(t.Context(), warehouse.MergeParams{Table: tbl, Key: []string{"id"}, Query: cacheQueryTwo})
			require.NoError(t, err)
			res, err := e.Query(t.Context(), "SELECT * FROM "+e.QuoteTable(tbl)+" ORDER BY id")
			require.NoError(t, err)
			require.Equal(t, []string{"ts", "id"}, res.Columns)
			require.Len(t, res.Rows, 2)
		})
	}
}

// Scenario: two engines of one process on one file share the database, so
// they share the cache too: engine b reshapes the table that engine a has
// been writing, and a's next write sees the new columns.
func TestColumnCacheSharedAcrossEnginesOnOneFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "warehouse.duckdb")
	a, err := duckdb.Open(t.Context(), path, duckdb.Options{})
	require.NoError(t, err)
	defer func() { require.NoError(t, a.Close()) }()
	b, err := duckdb.Open(t.Context(), path, duckdb.Options{})
	require.NoError(t, err)
	defer func() { require.NoError(t, b.Close()) }()

	tbl := cacheSetup(t, a)
	require.NoError(t, b.ReplaceTable(t.Context(), warehouse.ReplaceTableParams{Table: tbl, Query: cacheQueryThree}))
	require.Error(t, cacheInsert(t, a, tbl, cacheQueryTwo))
	require.NoError(t, cacheInsert(t, a, tbl, cacheQueryThree))
	require.Equal(t, [][]any{{int64(2), "x"}}, cacheRows(t, b, tbl))
}

// Scenario: an ALTER run through Query while intervals are being written
// (Query serialises it with the writes and forgets the cache before the
// next write starts): every write that started after the ALTER returned
// fills the new column, rather than leaving it to its default.
func TestColumnCacheQueryDDLRacesWrites(t *testing.T) {
	t.Parallel()
	e, err := duckdb.Open(t.Context(), "", duckdb.Options{})
	require.NoError(t, err)
	defer func() { require.NoError(t, e.Close()) }()
	tbl := cacheSetup(t, e)
	ctx := t.Context()

	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		altered bool
		after   []int                 // hours written entirely after the ALTER returned
		written = make(chan struct{}) // closed once the first write returned
	)
	wg.Go(func() {
		<-written // the ALTER lands among the writes, not before them
		_, err := e.Query(ctx, "ALTER TABLE "+e.QuoteTable(tbl)+" ADD COLUMN extra VARCHAR DEFAULT 'd'")
		require.NoError(t, err)
		mu.Lock()
		altered = true
		mu.Unlock()
	})
	for h := 1; h < 40; h++ {
		mu.Lock()
		wasAltered := altered
		mu.Unlock()
		start := cacheHour.Add(time.Duration(h) * time.Hour)
		q := "SELECT TIMESTAMP '" + start.Format("2006-01-02 15:04:05") + "' AS ts, " + strconv.Itoa(h) + " AS id, 'x' AS extra"
		_, err := e.InsertInterval(context.WithoutCancel(ctx), warehouse.InsertIntervalParams{Table: tbl, TimeColumn: "ts",
			Start: start, End: start.Add(time.Hour), Query: q})
		if h == 1 {
			close(written)
		}
		if err != nil {
			continue // a write racing the ALTER may fail; it must not write wrongly
		}
		if wasAltered {
			after = append(after, h)
		}
	}
	wg.Wait()
	require.NotEmpty(t, after)
	for _, h := range after {
		res, err := e.Query(ctx, "SELECT extra FROM "+e.QuoteTable(tbl)+" WHERE id = $1", h)
		require.NoError(t, err)
		require.Equal(t, [][]any{{"x"}}, res.Rows, "hour %d", h)
	}
}
