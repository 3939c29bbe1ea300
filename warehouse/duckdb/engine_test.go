package duckdb_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/warehouse"
	"github.com/gapless-dev/gapless/warehouse/duckdb"
)

func TestQuoteIdent(t *testing.T) {
	t.Parallel()
	e := memoryEngine(t)
	defer e.Close()
	for name, want := range map[string]string{
		"plain":                     `"plain"`,
		"select":                    `"select"`,
		`a"b`:                       `"a""b"`,
		`evil"; DROP TABLE x; --`:   `"evil""; DROP TABLE x; --"`,
		"données":                   `"données"`,
		`""`:                        `""""""`,
		"with space":                `"with space"`,
		"MixedCase":                 `"MixedCase"`,
		"x.y":                       `"x.y"`,
		`'single'`:                  `"'single'"`,
		"new\nline":                 "\"new\nline\"",
		"\u202eright-to-left\u202c": "\"\u202eright-to-left\u202c\"",
	} {
		require.Equal(t, want, e.QuoteIdent(name), name)
	}
	require.Equal(t, `"a""s"."t"`, e.QuoteTable(warehouse.Table{Schema: `a"s`, Name: "t"}))
	require.Equal(t, `"t"`, e.QuoteTable(warehouse.Table{Name: "t"}))
	require.Equal(t, "duckdb", e.Dialect())
	require.Empty(t, e.Path())
}

// Scenario: gapless writes an interval, the process ends, and the next
// command reopens warehouse.duckdb: the rows are there.
func TestFilePersistsAcrossOpens(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "warehouse.duckdb")
	e, err := duckdb.Open(t.Context(), path, duckdb.Options{})
	require.NoError(t, err)
	require.Equal(t, path, e.Path())
	tbl := warehouse.Table{Schema: "demo", Name: "events"}
	require.NoError(t, e.CreateSchema(t.Context(), tbl.Schema))
	require.NoError(t, e.CreateTableAs(t.Context(), warehouse.CreateTableAsParams{Table: tbl, WithData: true,
		Query: "SELECT TIMESTAMP '2024-01-01 01:00:00' AS ts, 1 AS id"}))
	require.NoError(t, e.Close())

	e, err = duckdb.Open(t.Context(), path, duckdb.Options{})
	require.NoError(t, err)
	defer func() { require.NoError(t, e.Close()) }()
	res, err := e.Query(t.Context(), "SELECT ts, id FROM "+e.QuoteTable(tbl))
	require.NoError(t, err)
	require.Equal(t, [][]any{{time.Date(2024, 1, 1, 1, 0, 0, 0, time.UTC), int32(1)}}, res.Rows)
}

// Scenario: two parts of one gapless process (a scheduler loop and a
// command) open the same file; DuckDB shares one database between them,
// and their writes are serialised together, so racing intervals of one
// table from both engines end with every row once. Closing one leaves the
// other working.
func TestTwoEnginesOnOneFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "warehouse.duckdb")
	a, err := duckdb.Open(t.Context(), path, duckdb.Options{})
	require.NoError(t, err)
	b, err := duckdb.Open(t.Context(), path, duckdb.Options{})
	require.NoError(t, err)
	defer func() { require.NoError(t, b.Close()) }()

	tbl := warehouse.Table{Schema: "s", Name: "events"}
	require.NoError(t, a.CreateSchema(t.Context(), tbl.Schema))
	require.NoError(t, a.CreateTable(t.Context(), warehouse.CreateTableParams{Table: tbl, Columns: []warehouse.Column{
		{Name: "ts", Type: "TIMESTAMP"}, {Name: "id", Type: "BIGINT"},
	}}))
	q := "SELECT TIMESTAMP '2024-01-01 00:00:00' + g * INTERVAL '1 minute' AS ts, g AS id FROM generate_series(0, 479) AS s(g)"
	var wg sync.WaitGroup
	errs := make([]error, 16)
	for i := range errs {
		e := a
		if i%2 == 1 {
			e = b
		}
		wg.Go(func() {
			h := i % 8
			start := time.Date(2024, 1, 1, h, 0, 0, 0, time.UTC)
			_, errs[i] = e.InsertInterval(t.Context(), warehouse.InsertIntervalParams{Table: tbl, TimeColumn: "ts", Start: start, End: start.Add(time.Hour), Query: q})
		})
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	res, err := b.Query(t.Context(), "SELECT count(*), count(DISTINCT id) FROM "+b.QuoteTable(tbl))
	require.NoError(t, err)
	require.Equal(t, [][]any{{int64(480), int64(480)}}, res.Rows)

	// Closing one engine leaves the other working on the shared database.
	require.NoError(t, a.Close())
	n, err := b.InsertInterval(t.Context(), warehouse.InsertIntervalParams{Table: tbl, TimeColumn: "ts",
		Start: time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC), End: time.Date(2024, 1, 1, 1, 0, 0, 0, time.UTC), Query: q})
	require.NoError(t, err)
	require.Equal(t, int64(60), n)
}

// Scenario: DuckDB matches names case-insensitively for ASCII letters only;
// TableExists and Columns agree with it, so gapless never believes a table
// is missing that CREATE TABLE would then collide with.
func TestNamesMatchLikeDuckDB(t *testing.T) {
	t.Parallel()
	e := memoryEngine(t)
	defer e.Close()
	ctx := t.Context()
	require.NoError(t, e.CreateSchema(ctx, "S"))
	require.NoError(t, e.CreateTableAs(ctx, warehouse.CreateTableAsParams{Table: warehouse.Table{Schema: "S", Name: "Events"}, Query: "SELECT 1 AS Id", WithData: true}))
	require.NoError(t, e.CreateTableAs(ctx, warehouse.CreateTableAsParams{Table: warehouse.Table{Schema: "S", Name: "É"}, Query: "SELECT 1 AS x", WithData: true}))

	for _, c := range []struct {
		t    warehouse.Table
		want bool
	}{
		{warehouse.Table{Schema: "s", Name: "events"}, true},
		{warehouse.Table{Schema: "S", Name: "EVENTS"}, true},
		{warehouse.Table{Schema: "S", Name: "É"}, true},
		{warehouse.Table{Schema: "S", Name: "é"}, false},
	} {
		got, err := e.TableExists(ctx, c.t)
		require.NoError(t, err)
		require.Equal(t, c.want, got, "%s", c.t)
	}
	cols, err := e.Columns(ctx, warehouse.Table{Schema: "s", Name: "EVENTS"})
	require.NoError(t, err)
	require.Equal(t, []warehouse.Column{{Name: "Id", Type: "INTEGER"}}, cols)
}

// Scenario: DuckDB-specific column types (lists, structs with quoted
// field names, maps, enums whose labels hold a semicolon) round-trip
// through Columns and CreateTable.
func TestDuckDBTypesRoundTrip(t *testing.T) {
	t.Parallel()
	e := memoryEngine(t)
	defer e.Close()
	ctx := t.Context()
	require.NoError(t, e.CreateSchema(ctx, "s"))
	cols := []warehouse.Column{
		{Name: "l", Type: "VARCHAR[]"},
		{Name: "a", Type: "INTEGER[3]"},
		{Name: "st", Type: `STRUCT("x y" INTEGER, z VARCHAR)`},
		{Name: "m", Type: "MAP(VARCHAR, INTEGER)"},
		{Name: "en", Type: "ENUM('p', 'q;r')"},
		{Name: "tz", Type: "TIMESTAMP WITH TIME ZONE"},
		{Name: "d", Type: "DECIMAL(18,3)"},
	}
	tbl := warehouse.Table{Schema: "s", Name: "typed"}
	require.NoError(t, e.CreateTable(ctx, warehouse.CreateTableParams{Table: tbl, Columns: cols}))
	got, err := e.Columns(ctx, tbl)
	require.NoError(t, err)
	cp := warehouse.Table{Schema: "s", Name: "typed_copy"}
	require.NoError(t, e.CreateTable(ctx, warehouse.CreateTableParams{Table: cp, Columns: got}))
	again, err := e.Columns(ctx, cp)
	require.NoError(t, err)
	require.Equal(t, got, again)
}

// Scenario: a TIMESTAMPTZ time column. Every connection runs with
// TimeZone 'UTC' whatever the host's zone, so the interval [01:00, 02:00)
// UTC selects the rows of that hour and timestamps render in UTC.
func TestTimestampTZInterval(t *testing.T) {
	t.Parallel()
	e := memoryEngine(t)
	defer e.Close()
	ctx := t.Context()
	require.NoError(t, e.CreateSchema(ctx, "s"))
	tbl := warehouse.Table{Schema: "s", Name: "tz"}
	require.NoError(t, e.CreateTable(ctx, warehouse.CreateTableParams{Table: tbl, Columns: []warehouse.Column{{Name: "ts", Type: "TIMESTAMPTZ"}, {Name: "id", Type: "BIGINT"}}}))
	q := `SELECT ts, id FROM (VALUES (TIMESTAMPTZ '2024-01-01 00:59:59+00', 1), (TIMESTAMPTZ '2024-01-01 01:00:00+00', 2),
		(TIMESTAMPTZ '2024-01-01 02:30:00+01', 3), (TIMESTAMPTZ '2024-01-01 02:00:00+00', 4)) AS v(ts, id)`
	start := time.Date(2024, 1, 1, 1, 0, 0, 0, time.UTC)
	n, err := e.InsertInterval(ctx, warehouse.InsertIntervalParams{Table: tbl, TimeColumn: "ts", Start: start, End: start.Add(time.Hour), Query: q})
	require.NoError(t, err)
	require.Equal(t, int64(2), n)
	res, err := e.Query(ctx, "SELECT id, CAST(ts AS VARCHAR) FROM "+e.QuoteTable(tbl)+" ORDER BY id")
	require.NoError(t, err)
	require.Equal(t, [][]any{{int64(2), "2024-01-01 01:00:00+00"}, {int64(3), "2024-01-01 01:30:00+00"}}, res.Rows)

	var wg sync.WaitGroup
	zones := make([]any, 4)
	for i := range zones {
		wg.Go(func() {
			res, err := e.Query(ctx, "SELECT current_setting('TimeZone')")
			if err == nil {
				zones[i] = res.Rows[0][0]
			}
		})
	}
	wg.Wait()
	require.Equal(t, []any{"UTC", "UTC", "UTC", "UTC"}, zones)
}

// Scenario: a deploy's first build of a FULL model finds the table its
// create stage made, empty and of the query's columns: the rows are
// appended to that table (it keeps its identity, a commit without catalog
// changes), where a rebuild without the hint swaps in a new table.
func TestFirstBuildAppendsToTheEmptyTable(t *testing.T) {
	t.Parallel()
	e, err := duckdb.Open(t.Context(), filepath.Join(t.TempDir(), "warehouse.duckdb"), duckdb.Options{})
	require.NoError(t, err)
	defer func() { require.NoError(t, e.Close()) }()
	tbl := warehouse.Table{Schema: "gapless__demo", Name: "full"}
	query := "SELECT CAST(g AS BIGINT) AS id, 'x' AS v FROM generate_series(1, 3) AS s(g)"
	require.NoError(t, e.CreateSchema(t.Context(), tbl.Schema))
	require.NoError(t, e.CreateTableAs(t.Context(), warehouse.CreateTableAsParams{Table: tbl, Query: query}))
	oid := func() any {
		res, err := e.Query(t.Context(), "SELECT table_oid FROM duckdb_tables() WHERE schema_name = $1 AND table_name = $2", tbl.Schema, tbl.Name)
		require.NoError(t, err)
		require.Len(t, res.Rows, 1)
		return res.Rows[0][0]
	}
	made := oid()
	require.NoError(t, e.ReplaceTable(t.Context(), warehouse.ReplaceTableParams{Table: tbl, Query: query, FirstBuild: true}))
	require.Equal(t, made, oid(), "appended, not swapped")
	res, err := e.Query(t.Context(), "SELECT count(*) FROM "+e.QuoteTable(tbl))
	require.NoError(t, err)
	require.EqualValues(t, 3, res.Rows[0][0])
	require.NoError(t, e.ReplaceTable(t.Context(), warehouse.ReplaceTableParams{Table: tbl, Query: query}))
	require.NotEqual(t, made, oid(), "a rebuild swaps")
}

// Scenario: a deploy reports the rows a FULL model's first build wrote
// without counting them afterwards: the append returns the INSERT's own
// count; a swap does not know it (the caller counts), and a first build
// whose table is not empty swaps too.
func TestReplaceTableRowsKnowsTheAppendedRows(t *testing.T) {
	t.Parallel()
	e := memoryEngine(t)
	defer func() { require.NoError(t, e.Close()) }()
	ctx := t.Context()
	tbl := warehouse.Table{Schema: "gapless__demo", Name: "full"}
	query := "SELECT CAST(g AS BIGINT) AS id FROM generate_series(1, 4) AS s(g)"
	require.NoError(t, e.CreateSchema(ctx, tbl.Schema))
	require.NoError(t, e.CreateTableAs(ctx, warehouse.CreateTableAsParams{Table: tbl, Query: query}))
	rows, known, err := e.ReplaceTableRows(ctx, warehouse.ReplaceTableParams{Table: tbl, Query: query, FirstBuild: true})
	require.NoError(t, err)
	require.True(t, known, "appended")
	require.EqualValues(t, 4, rows)
	_, known, err = e.ReplaceTableRows(ctx, warehouse.ReplaceTableParams{Table: tbl, Query: query, FirstBuild: true})
	require.NoError(t, err)
	require.False(t, known, "the table holds rows: swapped, not counted")
	res, err := e.Query(ctx, "SELECT count(*) FROM "+e.QuoteTable(tbl))
	require.NoError(t, err)
	require.EqualValues(t, 4, res.Rows[0][0], "rebuilt, not appended twice")
}

// Scenario: a deploy's create stage made a FULL model's table empty from
// its query, and its first build appends the query's rows without asking
// DuckDB anything first, but only to the table exactly as it was made.
// Rows written meanwhile by any writer are replaced, never added to; a
// query whose columns differ from the table's in type, width, name or
// order takes the swap, and the table gets the query's columns, as
// without the hint; a nested type is compared by DESCRIBE and appends
// when equal.
func TestFirstBuildTrustsOnlyTheTableAsMade(t *testing.T) {
	t.Parallel()
	e := memoryEngine(t)
	defer func() { require.NoError(t, e.Close()) }()
	ctx := t.Context()
	require.NoError(t, e.CreateSchema(ctx, "gapless__demo"))
	oid := func(tbl warehouse.Table) any {
		res, err := e.Query(ctx, "SELECT table_oid FROM duckdb_tables() WHERE schema_name = $1 AND table_name = $2", tbl.Schema, tbl.Name)
		require.NoError(t, err)
		require.Len(t, res.Rows, 1)
		return res.Rows[0][0]
	}
	count := func(tbl warehouse.Table) int64 {
		res, err := e.Query(ctx, "SELECT count(*) FROM "+e.QuoteTable(tbl))
		require.NoError(t, err)
		return res.Rows[0][0].(int64)
	}
	first := func(tbl warehouse.Table, q string) {
		require.NoError(t, e.ReplaceTable(ctx, warehouse.ReplaceTableParams{Table: tbl, Query: q, FirstBuild: true}))
	}

	const q = "SELECT TIMESTAMP '2024-01-01 00:00:00' AS ts, CAST(g AS INTEGER) AS id FROM generate_series(1, 3) AS s(g)"
	start := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	writers := map[string]func(tbl warehouse.Table) error{
		"InsertInterval": func(tbl warehouse.Table) error {
			_, err := e.InsertInterval(ctx, warehouse.InsertIntervalParams{Table: tbl, TimeColumn: "ts", Start: start, End: start.Add(time.Hour), Query: q})
			return err
		},
		"MergeByKey": func(tbl warehouse.Table) error {
			_, err := e.MergeByKey(ctx, warehouse.MergeParams{Table: tbl, Key: []string{"id"}, Query: q})
			return err
		},
		"InsertRows": func(tbl warehouse.Table) error {
			_, err := e.InsertRows(ctx, warehouse.InsertRowsParams{Table: tbl, Columns: []string{"ts", "id"}, Rows: [][]any{{start, 1}, {start, 2}}})
			return err
		},
		"Query": func(tbl warehouse.Table) error {
			_, err := e.Query(ctx, "INSERT INTO "+e.QuoteTable(tbl)+" "+q)
			return err
		},
		"first build": func(tbl warehouse.Table) error {
			return e.ReplaceTable(ctx, warehouse.ReplaceTableParams{Table: tbl, Query: q, FirstBuild: true})
		},
	}
	for name, write := range writers {
		tbl := warehouse.Table{Schema: "gapless__demo", Name: "written_by_" + strings.ReplaceAll(name, " ", "_")}
		require.NoError(t, e.CreateTableAs(ctx, warehouse.CreateTableAsParams{Table: tbl, Query: q}))
		require.NoError(t, write(tbl), name)
		require.Positive(t, count(tbl), name)
		first(tbl, q)
		require.EqualValues(t, 3, count(tbl), "%s wrote rows: the first build replaces them", name)
	}

	same := warehouse.Table{Schema: "gapless__demo", Name: "same"}
	require.NoError(t, e.CreateTableAs(ctx, warehouse.CreateTableAsParams{Table: same, Query: q}))
	made := oid(same)
	first(same, q)
	require.Equal(t, made, oid(same), "the table as made, of the query's columns: appended")
	require.EqualValues(t, 3, count(same))

	for i, c := range []struct {
		made, query string
		want        []warehouse.Column
	}{
		{"SELECT CAST(1 AS INTEGER) AS id", "SELECT CAST(1 AS BIGINT) AS id", []warehouse.Column{{Name: "id", Type: "BIGINT"}}},
		{"SELECT CAST(1 AS DECIMAL(10,2)) AS id", "SELECT CAST(1 AS DECIMAL(12,2)) AS id", []warehouse.Column{{Name: "id", Type: "DECIMAL(12,2)"}}},
		{"SELECT 1 AS id", "SELECT 1 AS ID", []warehouse.Column{{Name: "ID", Type: "INTEGER"}}},
		{"SELECT 1 AS id, 'a' AS v", "SELECT 'a' AS v, 1 AS id", []warehouse.Column{{Name: "v", Type: "VARCHAR"}, {Name: "id", Type: "INTEGER"}}},
		{"SELECT 1 AS id", "SELECT 1 AS id, 'a' AS v", []warehouse.Column{{Name: "id", Type: "INTEGER"}, {Name: "v", Type: "VARCHAR"}}},
		{"SELECT TIMESTAMP '2024-01-01' AS ts", "SELECT TIMESTAMPTZ '2024-01-01' AS ts", []warehouse.Column{{Name: "ts", Type: "TIMESTAMP WITH TIME ZONE"}}},
		{"SELECT {'a': 1} AS s", "SELECT {'a': CAST(1 AS BIGINT)} AS s", []warehouse.Column{{Name: "s", Type: "STRUCT(a BIGINT)"}}},
	} {
		tbl := warehouse.Table{Schema: "gapless__demo", Name: fmt.Sprintf("other_%d", i)}
		require.NoError(t, e.CreateTableAs(ctx, warehouse.CreateTableAsParams{Table: tbl, Query: c.made}))
		made := oid(tbl)
		first(tbl, c.query)
		require.NotEqual(t, made, oid(tbl), "%s into a table of %s: swapped", c.query, c.made)
		cols, err := e.Columns(ctx, tbl)
		require.NoError(t, err)
		require.Equal(t, c.want, cols, c.query)
		require.EqualValues(t, 1, count(tbl), c.query)
	}

	nested := warehouse.Table{Schema: "gapless__demo", Name: "nested"}
	const nq = "SELECT {'a': 1} AS s, ['x'] AS l"
	require.NoError(t, e.CreateTableAs(ctx, warehouse.CreateTableAsParams{Table: nested, Query: nq}))
	made = oid(nested)
	first(nested, nq)
	require.Equal(t, made, oid(nested), "nested types, compared by DESCRIBE, equal: appended")
	require.EqualValues(t, 1, count(nested))
}

// Scenario: a deploy's create stage gives CreateTableAs the columns the
// check derived for a FULL model's query. Plain, distinct columns make the
// table (the query is not bound: here it could not be); duplicate names
// (which CREATE TABLE AS renames) or a type that is not plain leave the
// table to the query. A hint gone wrong is set right by the first build:
// the table gets the query's columns and rows.
func TestCreateTableAsMadeFromColumns(t *testing.T) {
	t.Parallel()
	e := memoryEngine(t)
	defer func() { require.NoError(t, e.Close()) }()
	ctx := t.Context()
	require.NoError(t, e.CreateSchema(ctx, "gapless__demo"))
	cols := func(tbl warehouse.Table) []warehouse.Column {
		c, err := e.Columns(ctx, tbl)
		require.NoError(t, err)
		return c
	}
	hinted := warehouse.Table{Schema: "gapless__demo", Name: "hinted"}
	hint := []warehouse.Column{{Name: "id", Type: "BIGINT"}, {Name: "amount", Type: "DECIMAL(12,2)"}, {Name: "at", Type: "TIMESTAMP WITH TIME ZONE"}}
	require.NoError(t, e.CreateTableAs(ctx, warehouse.CreateTableAsParams{Table: hinted, Query: "SELECT nope FROM nowhere", Columns: hint}))
	require.Equal(t, hint, cols(hinted), "made from the columns; the query is not bound")

	for name, hint := range map[string][]warehouse.Column{
		"dup":    {{Name: "id", Type: "BIGINT"}, {Name: "ID", Type: "BIGINT"}},
		"nested": {{Name: "id", Type: "BIGINT"}, {Name: "s", Type: "STRUCT(a INTEGER)"}},
		"spelt":  {{Name: "id", Type: "int8"}, {Name: "s", Type: "VARCHAR"}},
	} {
		tbl := warehouse.Table{Schema: "gapless__demo", Name: name}
		require.NoError(t, e.CreateTableAs(ctx, warehouse.CreateTableAsParams{Table: tbl, Query: "SELECT 1 AS id, 'x' AS s", Columns: hint}))
		require.Equal(t, []warehouse.Column{{Name: "id", Type: "INTEGER"}, {Name: "s", Type: "VARCHAR"}}, cols(tbl), "%s: made from the query", name)
	}

	wrong := warehouse.Table{Schema: "gapless__demo", Name: "wrong"}
	const q = "SELECT CAST(g AS INTEGER) AS id FROM generate_series(1, 2) AS s(g)"
	require.NoError(t, e.CreateTableAs(ctx, warehouse.CreateTableAsParams{Table: wrong, Query: q, Columns: []warehouse.Column{{Name: "id", Type: "BIGINT"}}}))
	require.NoError(t, e.ReplaceTable(ctx, warehouse.ReplaceTableParams{Table: wrong, Query: q, FirstBuild: true}))
	require.Equal(t, []warehouse.Column{{Name: "id", Type: "INTEGER"}}, cols(wrong), "the first build gives the query's columns")
	res, err := e.Query(ctx, "SELECT count(*) FROM "+e.QuoteTable(wrong))
	require.NoError(t, err)
	require.EqualValues(t, 2, res.Rows[0][0])

	right := warehouse.Table{Schema: "gapless__demo", Name: "right"}
	require.NoError(t, e.CreateTableAs(ctx, warehouse.CreateTableAsParams{Table: right, Query: q, Columns: []warehouse.Column{{Name: "id", Type: "INTEGER"}}}))
	rows, known, err := e.ReplaceTableRows(ctx, warehouse.ReplaceTableParams{Table: right, Query: q, FirstBuild: true})
	require.NoError(t, err)
	require.True(t, known, "appended")
	require.EqualValues(t, 2, rows)
}
