package postgres_test

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/warehouse"
)

func TestQueryValues(t *testing.T) {
	t.Parallel()
	b := setup(t)
	res, err := b.e.Query(b.ctx, `SELECT 1::smallint AS s, 2::int AS i, 3::bigint AS b, 1.5::real AS r, 2.5::float8 AS f,
	        12.50::numeric(10,2) AS n, sum(x) AS total, 'NaN'::numeric AS nan,
	        timestamptz '2024-01-01 05:30+05:30' AS tz, timestamp '2024-01-01 12:00' AS ts, date '2024-01-02' AS d,
	        'infinity'::timestamptz AS inf, 'a'::text AS txt, 'b'::varchar AS vc, true AS ok, NULL::int AS nothing,
	        '6ba7b810-9dad-11d1-80b4-00c04fd430c8'::uuid AS id, '\x0102'::bytea AS raw, ARRAY[1, 2]::int[] AS arr
	  FROM (VALUES (1::bigint), (2)) AS v(x)`)
	require.NoError(t, err)
	require.Equal(t, []string{"s", "i", "b", "r", "f", "n", "total", "nan", "tz", "ts", "d", "inf", "txt", "vc", "ok", "nothing", "id", "raw", "arr"}, res.Columns)
	require.Equal(t, [][]any{{
		int64(1), int64(2), int64(3), float64(1.5), float64(2.5),
		"12.50", "3", "NaN",
		time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2024, 1, 1, 12, 0, 0, 0, time.UTC), time.Date(2024, 1, 2, 0, 0, 0, 0, time.UTC),
		"infinity", "a", "b", true, nil,
		"6ba7b810-9dad-11d1-80b4-00c04fd430c8", []byte{1, 2}, []any{int64(1), int64(2)},
	}}, res.Rows)
	require.Equal(t, []string{"INT2", "INT4", "INT8", "FLOAT4", "FLOAT8", "NUMERIC", "NUMERIC", "NUMERIC",
		"TIMESTAMPTZ", "TIMESTAMP", "DATE", "TIMESTAMPTZ", "TEXT", "VARCHAR", "BOOL", "INT4", "UUID", "BYTEA", "_INT4"}, res.Types)

	empty, err := b.e.Query(b.ctx, `SELECT 1 AS a WHERE false`)
	require.NoError(t, err)
	require.Equal(t, &warehouse.Result{Columns: []string{"a"}, Types: []string{"INT4"}, Rows: [][]any{}}, empty)
}

func TestQueryArguments(t *testing.T) {
	t.Parallel()
	// Scenario: a time.Time argument in another zone compared with a
	// timestamp column means the same instant (pgx would otherwise send
	// its wall clock); arguments are values, never SQL.
	b := setup(t)
	b.exec(t, `CREATE TABLE s.t AS SELECT timestamp '2024-01-01 00:00' AS at, 'x' AS name`)
	tokyo := time.FixedZone("JST", 9*3600)
	require.Equal(t, [][]any{{"x"}}, b.rows(t, `SELECT name FROM s.t WHERE at = $1`, day(1).In(tokyo)))
	require.Empty(t, b.rows(t, `SELECT name FROM s.t WHERE name = $1`, "x' OR '1'='1"))
}

func TestQueryIsOneStatement(t *testing.T) {
	t.Parallel()
	// Scenario: SQL given to Query holds a second statement, or pgx
	// options are slipped in as arguments to switch to the simple protocol
	// (which runs every statement). Nothing runs.
	b := setup(t)
	b.exec(t, `CREATE TABLE s.canary AS SELECT 1 AS alive`)
	_, err := b.e.Query(b.ctx, `SELECT 1; DROP TABLE s.canary`)
	requireWarehouseError(t, err, "query")
	require.Equal(t, "42601", pgCode(err))
	for _, opt := range []any{pgx.QueryExecModeSimpleProtocol, pgx.NamedArgs{"a": 1}, pgx.QueryResultFormats{0}} {
		_, err = b.e.Query(b.ctx, `SELECT 1; DROP TABLE s.canary`, opt)
		requireWarehouseError(t, err, "query")
		require.ErrorIs(t, err, warehouse.ErrInvalidArgument)
	}
	require.Equal(t, [][]any{{int64(1)}}, b.rows(t, `SELECT alive FROM s.canary`))
	require.Equal(t, [][]any{{int64(1)}}, b.rows(t, "SELECT 1 -- trailing comment"))
	require.Equal(t, [][]any{{int64(1)}}, b.rows(t, "SELECT 1;\n-- done\n"))
}

func TestInsertRows(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.exec(t, `CREATE TABLE s.seed (id int, name text, at timestamp, amount numeric(10,2), ok boolean)`)
	newYork, err := time.LoadLocation("America/New_York")
	require.NoError(t, err)
	n, err := b.e.InsertRows(b.ctx, warehouse.InsertRowsParams{Table: tbl("seed"), Columns: []string{"id", "name", "at", "amount", "ok"},
		Rows: [][]any{
			{1, "'); DROP TABLE s.seed; --", day(1).In(newYork), "12.5", true},
			{"2", nil, "2024-01-02 03:04:05", 3.25, "false"}, // strings as a CSV seed gives them
		}})
	require.NoError(t, err)
	require.EqualValues(t, 2, n)
	require.Equal(t, [][]any{
		{int64(1), "'); DROP TABLE s.seed; --", day(1), "12.50", true},
		{int64(2), nil, time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC), "3.25", false},
	}, b.rows(t, `SELECT * FROM s.seed ORDER BY id`))

	// Scenario: one bad value in a batch. COPY is one statement: no row
	// lands.
	_, err = b.e.InsertRows(b.ctx, warehouse.InsertRowsParams{Table: tbl("seed"), Columns: []string{"id"},
		Rows: [][]any{{3}, {4}, {"not a number"}}})
	requireWarehouseError(t, err, "insert rows")
	_, err = b.e.InsertRows(b.ctx, warehouse.InsertRowsParams{Table: tbl("seed"), Columns: []string{"id", "name"},
		Rows: [][]any{{5, "x"}, {6}}})
	require.ErrorIs(t, err, warehouse.ErrInvalidArgument, "ragged rows")
	_, err = b.e.InsertRows(b.ctx, warehouse.InsertRowsParams{Table: tbl("seed"), Columns: []string{"nope"}, Rows: [][]any{{1}}})
	requireWarehouseError(t, err, "insert rows")
	require.EqualValues(t, 2, b.scalar(t, `SELECT count(*) FROM s.seed`))

	n, err = b.e.InsertRows(b.ctx, warehouse.InsertRowsParams{Table: tbl("seed"), Columns: []string{"id"}})
	require.NoError(t, err)
	require.Zero(t, n)
}
