package postgres_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/warehouse"
)

func TestHostileAndUnusualIdentifiers(t *testing.T) {
	t.Parallel()
	// Scenario: a project names its schema, tables and columns with
	// reserved words, Unicode, spaces, dots and quotes, one of them shaped
	// to break out of its quotes and drop a table. Every engine method
	// treats each name as just a name: all of them work, and the canary
	// table survives.
	b := setup(t)
	b.exec(t, `CREATE TABLE s.canary AS SELECT 1 AS alive`)
	sch := `select`
	require.NoError(t, b.e.CreateSchema(b.ctx, sch))
	require.NoError(t, b.e.CreateSchema(b.ctx, sch), "idempotent")
	names := []string{
		`x"; DROP TABLE s.canary; --`,
		`Ünïcödé 表`,
		`with.dot and space`,
		`"`,
		`order`,
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			tb := warehouse.Table{Schema: sch, Name: name}
			timeCol, keyCol, valCol := `from`, `group "key"`, `väl'ue`
			require.NoError(t, b.e.CreateTable(b.ctx, warehouse.CreateTableParams{Table: tb, Columns: []warehouse.Column{
				{Name: timeCol, Type: "timestamp"}, {Name: keyCol, Type: "text"}, {Name: valCol, Type: "bigint"},
			}}))
			ok, err := b.e.TableExists(b.ctx, tb)
			require.NoError(t, err)
			require.True(t, ok)
			cols, err := b.e.Columns(b.ctx, tb)
			require.NoError(t, err)
			require.Equal(t, []warehouse.Column{
				{Name: timeCol, Type: "timestamp without time zone"}, {Name: keyCol, Type: "text"}, {Name: valCol, Type: "bigint"},
			}, cols)

			n, err := b.e.InsertRows(b.ctx, warehouse.InsertRowsParams{Table: tb, Columns: []string{timeCol, keyCol, valCol},
				Rows: [][]any{{day(1), "a'); DROP TABLE s.canary; --", int64(1)}}})
			require.NoError(t, err)
			require.EqualValues(t, 1, n)

			src := "SELECT TIMESTAMP '2024-01-01' AS " + b.e.QuoteIdent(timeCol) + ", 'a''); DROP TABLE s.canary; --' AS " +
				b.e.QuoteIdent(keyCol) + ", 1::bigint AS " + b.e.QuoteIdent(valCol)
			n, err = b.e.InsertInterval(b.ctx, warehouse.InsertIntervalParams{Table: tb, TimeColumn: timeCol,
				Start: day(1), End: day(2), Query: src})
			require.NoError(t, err)
			require.EqualValues(t, 1, n)
			n, err = b.e.MergeByKey(b.ctx, warehouse.MergeParams{Table: tb, Key: []string{keyCol}, Query: src})
			require.NoError(t, err)
			require.EqualValues(t, 1, n)

			view := warehouse.Table{Schema: sch, Name: name + " view"}
			require.NoError(t, b.e.CreateOrReplaceView(b.ctx, warehouse.ViewParams{View: view, Query: "SELECT * FROM " + b.e.QuoteTable(tb)}))
			// The view reads the table, so the swap rebuilds it: through
			// pg_get_viewdef, with the hostile names quoted by the server.
			require.NoError(t, b.e.ReplaceTable(b.ctx, warehouse.ReplaceTableParams{Table: tb, Query: src}))
			require.Equal(t, [][]any{{day(1), "a'); DROP TABLE s.canary; --", int64(1)}},
				b.rows(t, "SELECT * FROM "+b.e.QuoteTable(view)+" WHERE "+b.e.QuoteIdent(keyCol)+" = $1", "a'); DROP TABLE s.canary; --"))

			require.Equal(t, [][]any{{int64(1)}}, b.rows(t, "SELECT count(*) FROM "+b.e.QuoteTable(tb)))

			require.NoError(t, b.e.DropView(b.ctx, view))
			require.NoError(t, b.e.DropTable(b.ctx, tb))
			ok, err = b.e.TableExists(b.ctx, tb)
			require.NoError(t, err)
			require.False(t, ok)
			require.Equal(t, [][]any{{int64(1)}}, b.rows(t, `SELECT alive FROM s.canary`))
		})
	}
}

func TestIdentifierValidation(t *testing.T) {
	t.Parallel()
	// Scenario: names PostgreSQL cannot hold as given. A name longer than
	// max_identifier_length would be silently truncated, so two physical
	// tables of one long model name could become one table; an empty name,
	// a NUL or invalid UTF-8 cannot be stored at all. Every method refuses
	// them with ErrInvalidIdentifier and creates nothing.
	b := setup(t)
	long := strings.Repeat("é", 32) // 64 bytes
	fits := strings.Repeat("é", 31) + "x"
	require.NoError(t, b.e.CreateTable(b.ctx, warehouse.CreateTableParams{Table: tbl(fits), Columns: []warehouse.Column{{Name: fits, Type: "int"}}}),
		"63 bytes fit")
	bad := []string{long, "", "a\x00b", "\xff"}
	for _, name := range bad {
		calls := map[string]func() error{
			"create schema": func() error { return b.e.CreateSchema(b.ctx, name) },
			"create table": func() error {
				return b.e.CreateTable(b.ctx, warehouse.CreateTableParams{Table: tbl(name), Columns: []warehouse.Column{{Name: "a", Type: "int"}}})
			},
			"create table column": func() error {
				return b.e.CreateTable(b.ctx, warehouse.CreateTableParams{Table: tbl("ok"), Columns: []warehouse.Column{{Name: name, Type: "int"}}})
			},
			"create table as": func() error {
				return b.e.CreateTableAs(b.ctx, warehouse.CreateTableAsParams{Table: tbl(name), Query: "SELECT 1"})
			},
			"table in that schema": func() error {
				return b.e.CreateTableAs(b.ctx, warehouse.CreateTableAsParams{Table: warehouse.Table{Schema: name, Name: "t"}, Query: "SELECT 1"})
			},
			"insert interval": func() error {
				_, err := b.e.InsertInterval(b.ctx, warehouse.InsertIntervalParams{Table: tbl(fits), TimeColumn: name, Start: day(1), End: day(2), Query: "SELECT 1"})
				return err
			},
			"merge": func() error {
				_, err := b.e.MergeByKey(b.ctx, warehouse.MergeParams{Table: tbl(fits), Key: []string{name}, Query: "SELECT 1"})
				return err
			},
			"replace": func() error {
				return b.e.ReplaceTable(b.ctx, warehouse.ReplaceTableParams{Table: tbl(name), Query: "SELECT 1"})
			},
			"insert rows": func() error {
				_, err := b.e.InsertRows(b.ctx, warehouse.InsertRowsParams{Table: tbl(fits), Columns: []string{name}, Rows: [][]any{{1}}})
				return err
			},
			"view": func() error {
				return b.e.CreateOrReplaceView(b.ctx, warehouse.ViewParams{View: tbl(name), Query: "SELECT 1"})
			},
			"drop table": func() error { return b.e.DropTable(b.ctx, tbl(name)) },
			"drop view":  func() error { return b.e.DropView(b.ctx, tbl(name)) },
			"exists": func() error {
				_, err := b.e.TableExists(b.ctx, tbl(name))
				return err
			},
			"columns": func() error {
				_, err := b.e.Columns(b.ctx, tbl(name))
				return err
			},
		}
		for what, call := range calls {
			err := call()
			require.ErrorIs(t, err, warehouse.ErrInvalidIdentifier, "%s with %q", what, name)
			var we *warehouse.Error
			require.ErrorAs(t, err, &we)
		}
	}
	require.Equal(t, [][]any{{"s"}}, b.rows(t,
		`SELECT nspname::text FROM pg_namespace WHERE nspname NOT LIKE 'pg\_%' AND nspname NOT IN ('public', 'information_schema') ORDER BY 1`))
	require.Equal(t, [][]any{{fits}}, b.rows(t, `SELECT relname::text FROM pg_class WHERE relnamespace = 's'::regnamespace`))
}

func TestColumnTypesAreOneTypeName(t *testing.T) {
	t.Parallel()
	// Scenario: a column type is the one piece of CreateTable rendered
	// into DDL as written. Types that try to end the statement, comment
	// out the rest, or smuggle a column clause (a DEFAULT that calls a
	// function at every insert) are refused before any DDL runs; every
	// real type spelling, including what Columns returns, is accepted.
	b := setup(t)
	b.exec(t, `CREATE TABLE s.canary AS SELECT 1 AS alive`)
	refused := []string{
		"int); DROP TABLE s.canary; --",
		"int, evil int",
		"int DEFAULT 1",
		"int DEFAULT (pg_sleep(1))",
		"int --",
		"int /* */",
		"int GENERATED ALWAYS AS (1) STORED",
		"text COLLATE \"C\"",
		"'text'",
		"$$text$$",
		"no_such_type",
		"",
		"int)",
		"(int",
		"\"unterminated",
	}
	for _, typ := range refused {
		err := b.e.CreateTable(b.ctx, warehouse.CreateTableParams{Table: tbl("t"), Columns: []warehouse.Column{{Name: "a", Type: typ}}})
		require.ErrorIs(t, err, warehouse.ErrInvalidType, "%q", typ)
		require.False(t, b.exists(t, tbl("t")), "%q", typ)
	}
	accepted := []string{
		"bigint", "BIGINT", "int", "numeric(10,2)", "numeric(10, 2)", "timestamp(3) with time zone", "timestamptz",
		"text[]", "integer[][]", `"char"`, "double precision", "character varying(20)", "VARCHAR", "date", "bit varying(5)",
		"pg_catalog.int8", "interval day to second", "jsonb", "uuid", "bytea", "boolean",
	}
	cols := make([]warehouse.Column, len(accepted))
	for i, typ := range accepted {
		cols[i] = warehouse.Column{Name: typ, Type: typ}
	}
	require.NoError(t, b.e.CreateTable(b.ctx, warehouse.CreateTableParams{Table: tbl("t"), Columns: cols}))
	got, err := b.e.Columns(b.ctx, tbl("t"))
	require.NoError(t, err)
	require.Len(t, got, len(accepted))
	// Columns' spellings go back into CreateTable unchanged.
	require.NoError(t, b.e.CreateTable(b.ctx, warehouse.CreateTableParams{Table: tbl("t2"), Columns: got}))
	again, err := b.e.Columns(b.ctx, tbl("t2"))
	require.NoError(t, err)
	require.Equal(t, got, again)
	require.Equal(t, [][]any{{int64(1)}}, b.rows(t, `SELECT alive FROM s.canary`))
}
