package duckdb

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/warehouse"
)

func TestCheckType(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{
		"BIGINT", "double precision", "DECIMAL(12,2)", "NUMERIC(12, 2)", "TIMESTAMP WITH TIME ZONE",
		"VARCHAR[]", "INTEGER[3]", `STRUCT("x y" INTEGER, z VARCHAR)`, "MAP(VARCHAR, INTEGER)",
		"ENUM('p', 'q;r')", `STRUCT("a""b" INTEGER)`, "ENUM('it''s')", "main.my_type", "timestamp(3) with time zone",
	} {
		require.NoError(t, checkType(ok), ok)
	}
	for _, bad := range []string{
		"", " ", "BIGINT); DROP TABLE x; --", "BIGINT; DROP TABLE x", "BIGINT -- c", "BIGINT /* c */",
		"BIGINT, y TEXT", "DECIMAL(12,2", "DECIMAL12,2)", "INTEGER[3)", "ENUM('open", `STRUCT("open INTEGER)`,
		"INTEGER CHECK (x > 0)", "INTEGER DEFAULT 1 + 1", "BIGINT\x00", "BIG\xffINT", "INTEGER := 1",
	} {
		require.Error(t, checkType(bad), bad)
	}
}

func TestBody(t *testing.T) {
	t.Parallel()
	require.Equal(t, "SELECT 1", body("SELECT 1;\n"))
	require.Equal(t, "SELECT 1", body("SELECT 1 ; ;  \t\r\n"))
	require.Equal(t, "SELECT 1 -- c", body("SELECT 1 -- c"))
	require.Equal(t, "SELECT ';'", body("SELECT ';'"))
}

func TestASCIIFoldEqual(t *testing.T) {
	t.Parallel()
	require.True(t, asciiFoldEqual("Events", "eVENTS"))
	require.True(t, asciiFoldEqual("données", "DONNéES"))
	require.False(t, asciiFoldEqual("É", "é"))
	require.False(t, asciiFoldEqual("a", "ab"))
	require.False(t, asciiFoldEqual("a[", "a{"))
}

func TestCheckIdent(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"a", "select", `"`, "表", "with space", `evil"; DROP TABLE x; --`} {
		require.NoError(t, checkIdent("table", ok), ok)
	}
	for _, bad := range []string{"", "a\x00", "\xff"} {
		require.ErrorIs(t, checkIdent("table", bad), warehouse.ErrInvalidIdentifier, bad)
	}
}

// The write path describes a table once and then reads its columns from the
// cache; the engine's DDL on the table (in any case spelling) and any
// statement through Query drop the entry, and so does a failed write.
func TestColumnCacheEntries(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e, err := Open(ctx, "", Options{})
	require.NoError(t, err)
	defer func() { require.NoError(t, e.Close()) }()
	tbl := warehouse.Table{Schema: "s", Name: "t"}
	cached := func() bool {
		_, ok := e.shared.cols.get(warehouse.Table{Schema: "S", Name: "T"})
		return ok
	}
	insert := func(q string) error {
		start := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
		_, err := e.InsertInterval(ctx, warehouse.InsertIntervalParams{Table: tbl, TimeColumn: "ts", Start: start, End: start.Add(time.Hour), Query: q})
		return err
	}
	const q = "SELECT TIMESTAMP '2024-01-01 00:00:00' AS ts, 1 AS id"
	require.NoError(t, e.CreateSchema(ctx, "s"))
	require.NoError(t, e.CreateTableAs(ctx, warehouse.CreateTableAsParams{Table: tbl, Query: q}))
	require.False(t, cached())
	require.NoError(t, insert(q))
	require.True(t, cached())
	cols, _ := e.shared.cols.get(tbl)
	require.Equal(t, []warehouse.Column{{Name: "ts"}, {Name: "id"}}, cols)

	_, err = e.Query(ctx, "SELECT count(*) FROM s.t")
	require.NoError(t, err)
	require.True(t, cached(), "a read through Query keeps the cache")
	_, err = e.Query(ctx, "CHECKPOINT")
	require.NoError(t, err)
	require.False(t, cached(), "any other statement through Query drops it")

	require.NoError(t, insert(q))
	require.Error(t, insert("SELECT 1 AS nope"))
	require.False(t, cached(), "a failed write drops its table's entry")

	for _, ddl := range []func() error{
		func() error { return e.DropView(ctx, warehouse.Table{Schema: "S", Name: "T"}) },
		func() error {
			return e.ReplaceTable(ctx, warehouse.ReplaceTableParams{Table: warehouse.Table{Schema: "s", Name: "T"}, Query: q})
		},
		func() error { return e.DropTable(ctx, warehouse.Table{Schema: "S", Name: "t"}) },
	} {
		require.NoError(t, insert(q))
		require.True(t, cached())
		_ = ddl() // DropView of a table fails; it still forgets
		require.False(t, cached())
		if ok, err := e.TableExists(ctx, tbl); err == nil && !ok {
			require.NoError(t, e.CreateTableAs(ctx, warehouse.CreateTableAsParams{Table: tbl, Query: q}))
		}
	}
}

// A statement through Query that is not a read waits for the write lock
// (so that it cannot change columns under a write that read them from the
// cache); a SELECT does not wait.
func TestQueryWritesTakeTheWriteLock(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e, err := Open(ctx, "", Options{})
	require.NoError(t, err)
	defer func() { require.NoError(t, e.Close()) }()
	_, err = e.Query(ctx, "CREATE TABLE t AS SELECT 1 AS x")
	require.NoError(t, err)

	require.NoError(t, e.shared.lock(ctx))
	_, err = e.Query(ctx, "SELECT x FROM t")
	require.NoError(t, err, "a read does not wait for the write lock")
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, err = e.Query(short, "ALTER TABLE t ADD COLUMN y INTEGER")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	e.shared.unlock()

	_, err = e.Query(ctx, "ALTER TABLE t ADD COLUMN y INTEGER")
	require.NoError(t, err)
	res, err := e.Query(ctx, "SELECT * FROM t")
	require.NoError(t, err)
	require.Equal(t, []string{"x", "y"}, res.Columns)
}

// The engine trusts a table empty as CreateTableAs made it (a first build
// then appends without asking DuckDB whether it holds rows), so every
// write through the engine must end that trust: each writer here, run
// after a CreateTableAs, leaves the table no longer empty as made.
func TestEveryWriteEndsEmptyAsMade(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e, err := Open(ctx, "", Options{})
	require.NoError(t, err)
	defer func() { require.NoError(t, e.Close()) }()
	tbl := warehouse.Table{Schema: "s", Name: "t"}
	const q = "SELECT TIMESTAMP '2024-01-01 00:00:00' AS ts, 1 AS id"
	start := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	require.NoError(t, e.CreateSchema(ctx, "s"))
	made := func() bool {
		_, ok := e.shared.cols.madeEmpty(warehouse.Table{Schema: "S", Name: "T"})
		return ok
	}
	writers := map[string]func() error{
		"InsertInterval": func() error {
			_, err := e.InsertInterval(ctx, warehouse.InsertIntervalParams{Table: tbl, TimeColumn: "ts", Start: start, End: start.Add(time.Hour), Query: q})
			return err
		},
		"MergeByKey": func() error {
			_, err := e.MergeByKey(ctx, warehouse.MergeParams{Table: tbl, Key: []string{"id"}, Query: q})
			return err
		},
		"InsertRows": func() error {
			_, err := e.InsertRows(ctx, warehouse.InsertRowsParams{Table: tbl, Columns: []string{"ts", "id"}, Rows: [][]any{{start, 1}}})
			return err
		},
		"ReplaceTable": func() error { return e.ReplaceTable(ctx, warehouse.ReplaceTableParams{Table: tbl, Query: q}) },
		"ReplaceTable first build": func() error {
			return e.ReplaceTable(ctx, warehouse.ReplaceTableParams{Table: tbl, Query: q, FirstBuild: true})
		},
		"Query INSERT":     func() error { _, err := e.Query(ctx, "INSERT INTO s.t "+q); return err },
		"Query CHECKPOINT": func() error { _, err := e.Query(ctx, "CHECKPOINT"); return err },
		"DropView":         func() error { _ = e.DropView(ctx, tbl); return nil }, // fails on a table; still forgets
		"Describe stand-in": func() error {
			_, err := e.Describe(ctx, warehouse.DescribeParams{Query: "SELECT * FROM s.t",
				StandIns: []warehouse.CreateTableParams{{Table: tbl, Columns: []warehouse.Column{{Name: "x", Type: "INTEGER"}}}}})
			return err
		},
	}
	for name, write := range writers {
		require.NoError(t, e.DropTable(ctx, tbl), name)
		require.NoError(t, e.CreateTableAs(ctx, warehouse.CreateTableAsParams{Table: tbl, Query: q}), name)
		require.True(t, made(), "%s: CreateTableAs without rows makes the table empty as made", name)
		require.NoError(t, write(), name)
		require.False(t, made(), "%s: the table is no longer empty as made", name)
	}
	require.NoError(t, e.DropTable(ctx, tbl))
	require.NoError(t, e.CreateTableAs(ctx, warehouse.CreateTableAsParams{Table: tbl, Query: q, WithData: true}))
	require.False(t, made(), "made with its rows")
}

// A first build into a table empty as made runs one statement, the
// INSERT: it does not ask DuckDB whether the table holds rows. Rows put
// there behind the engine's back (here through its connection pool,
// which no caller can reach) are therefore appended to; through the
// engine they never are (TestEveryWriteEndsEmptyAsMade).
func TestFirstBuildIntoATableAsMadeAsksNothing(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e, err := Open(ctx, "", Options{})
	require.NoError(t, err)
	defer func() { require.NoError(t, e.Close()) }()
	tbl := warehouse.Table{Schema: "s", Name: "t"}
	const q = "SELECT CAST(g AS BIGINT) AS id FROM generate_series(1, 3) AS s(g)"
	require.NoError(t, e.CreateSchema(ctx, "s"))
	require.NoError(t, e.CreateTableAs(ctx, warehouse.CreateTableAsParams{Table: tbl, Query: q}))
	_, err = e.db.ExecContext(ctx, "INSERT INTO s.t VALUES (100)")
	require.NoError(t, err)
	rows, known, err := e.ReplaceTableRows(ctx, warehouse.ReplaceTableParams{Table: tbl, Query: q, FirstBuild: true})
	require.NoError(t, err)
	require.True(t, known, "appended")
	require.EqualValues(t, 3, rows)
	res, err := e.Query(ctx, "SELECT count(*) FROM s.t")
	require.NoError(t, err)
	require.EqualValues(t, 4, res.Rows[0][0], "the row behind the engine's back was not looked for")
}

// describeQuery reads a query's columns from its prepared statement when
// every type is plain, and must spell them exactly as DESCRIBE does, which
// it runs otherwise: for every plain type and some that are not, its
// answer is DESCRIBE's.
func TestDescribeSpellsPlainTypesAsDescribe(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e, err := Open(ctx, "", Options{})
	require.NoError(t, err)
	defer func() { require.NoError(t, e.Close()) }()
	types := []string{
		"BOOLEAN", "TINYINT", "SMALLINT", "INTEGER", "BIGINT", "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT",
		"HUGEINT", "UHUGEINT", "FLOAT", "DOUBLE", "DECIMAL(4,1)", "DECIMAL(18,3)", "DECIMAL(38,10)", "NUMERIC",
		"VARCHAR", "BLOB", "UUID", "BIT", "BIGNUM", "DATE", "TIME", "TIMETZ", "INTERVAL", "TIMESTAMP",
		"TIMESTAMP_S", "TIMESTAMP_MS", "TIMESTAMP_NS", "TIMESTAMPTZ",
		// not plain: DESCRIBE answers
		"INTEGER[]", "STRUCT(a INTEGER)", "MAP(VARCHAR, INTEGER)", "ENUM('a', 'b')", "JSON", "INTEGER[2]",
	}
	for _, typ := range types {
		q := "SELECT CAST(NULL AS " + typ + ") AS c, 1 AS \"Odd Name\""
		var got, want []warehouse.Column
		require.NoError(t, e.read(ctx, func(s *session) error {
			var err error
			if got, err = describeQuery(ctx, s, q); err != nil {
				return err
			}
			res, err := s.query(ctx, "DESCRIBE SELECT * FROM ("+q+") AS gapless_q")
			if err != nil {
				return err
			}
			want, err = describedColumns(res)
			return err
		}), typ)
		require.Equal(t, want, got, typ)
		plain := !strings.ContainsAny(typ, "[(") || strings.HasPrefix(typ, "DECIMAL")
		if typ == "JSON" {
			plain = false
		}
		require.Equal(t, plain, isPlainName(got[0].Type), "%s is spelt %s", typ, got[0].Type)
		if plain {
			// A table made of the spelt columns has exactly those types.
			tbl := warehouse.Table{Schema: "main", Name: "made_" + strings.NewReplacer("(", "_", ")", "_", ",", "_").Replace(typ)}
			require.NoError(t, e.CreateTableAs(ctx, warehouse.CreateTableAsParams{Table: tbl, Query: "SELECT nope", Columns: got}), typ)
			made, ok := e.shared.cols.madeEmpty(tbl)
			require.True(t, ok)
			require.Equal(t, got, made, "%s: made of the columns", typ)
			cols, err := e.Columns(ctx, tbl)
			require.NoError(t, err)
			require.Equal(t, got, cols, typ)
		}
	}
	var got []warehouse.Column
	require.NoError(t, e.read(ctx, func(s *session) error {
		var err error
		got, err = describeQuery(ctx, s, "SELECT NULL AS n")
		return err
	}))
	require.Len(t, got, 1, "a NULL literal, which has no prepared type, is described by DESCRIBE")
	require.Error(t, e.read(ctx, func(s *session) error {
		_, err := describeQuery(ctx, s, "SELECT nope FROM (SELECT 1 AS id)")
		return err
	}), "a query that does not bind fails")
}
