package postgres_test

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	_ "github.com/duckdb/duckdb-go/v2"
	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/warehouse"
)

// Scenario: a staged Parquet file holds the types sources carry (decimal,
// unsigned 64-bit integers, UUIDs, dates, instants, booleans, doubles, NULLs): the
// PostgreSQL engine decodes it with the embedded DuckDB and lands every
// value with its type, and a column type it cannot land is refused naming
// the column, writing nothing.
func TestIngestLandsParquetTypes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "typed.parquet")
	duck, err := sql.Open("duckdb", "")
	require.NoError(t, err)
	defer func() { require.NoError(t, duck.Close()) }()
	_, err = duck.Exec(fmt.Sprintf(`COPY (SELECT
	    CAST(12.34 AS DECIMAL(12,2)) AS amount, CAST('18446744073709551615' AS UBIGINT) AS huge,
	    CAST('6f1c4b2e-3d5a-4c1b-9e8f-0a1b2c3d4e5f' AS UUID) AS uid, DATE '2024-01-02' AS d,
	    TIMESTAMPTZ '2024-01-02 03:04:05+00' AS at, true AS ok, CAST(1.5 AS DOUBLE) AS x, CAST(NULL AS VARCHAR) AS nothing
	  UNION ALL SELECT -0.5, CAST(0 AS UBIGINT), NULL, NULL, NULL, false, NULL, 'y') TO '%s' (FORMAT parquet)`, path))
	require.NoError(t, err)

	table := tbl("events__g1")
	files := warehouse.StagedFiles{Format: warehouse.FormatParquet, Paths: []string{path}}
	_, err = b.e.ApplyIngest(b.ctx, warehouse.IngestParams{Source: "raw.events", Step: warehouse.StepFence, Generation: 1})
	require.NoError(t, err)
	res, err := b.e.ApplyIngest(b.ctx, warehouse.IngestParams{Source: "raw.events", Step: warehouse.StepChunk, Generation: 1, Table: table, Files: files})
	require.NoError(t, err)
	require.Equal(t, int64(2), res.Rows)

	cols, err := b.e.Columns(b.ctx, table)
	require.NoError(t, err)
	types := map[string]string{}
	for _, c := range cols {
		types[c.Name] = c.Type
	}
	require.Equal(t, map[string]string{"amount": "numeric(12,2)", "huge": "numeric", "uid": "uuid", "d": "date",
		"at": "timestamp with time zone", "ok": "boolean", "x": "double precision", "nothing": "text"}, types)
	var amount, huge, uid, nothing sql.NullString
	var d, at time.Time
	err = b.e.Pool().QueryRow(b.ctx, `SELECT amount::text, huge::text, uid::text, d, at, nothing FROM s.events__g1 WHERE ok`).
		Scan(&amount, &huge, &uid, &d, &at, &nothing)
	require.NoError(t, err)
	require.Equal(t, "12.34", amount.String)
	require.Equal(t, "18446744073709551615", huge.String)
	require.Equal(t, "6f1c4b2e-3d5a-4c1b-9e8f-0a1b2c3d4e5f", uid.String)
	require.Equal(t, time.Date(2024, 1, 2, 0, 0, 0, 0, time.UTC), d.UTC())
	require.True(t, at.Equal(time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)))
	require.False(t, nothing.Valid)
	err = b.e.Pool().QueryRow(b.ctx, `SELECT amount::text, nothing FROM s.events__g1 WHERE NOT ok`).Scan(&amount, &nothing)
	require.NoError(t, err)
	require.Equal(t, "-0.50", amount.String)
	require.Equal(t, "y", nothing.String)

	listy := filepath.Join(dir, "list.parquet")
	_, err = duck.Exec(fmt.Sprintf(`COPY (SELECT [1, 2] AS tags) TO '%s' (FORMAT parquet)`, listy))
	require.NoError(t, err)
	_, err = b.e.ApplyIngest(b.ctx, warehouse.IngestParams{Source: "raw.events", Step: warehouse.StepChunk, Generation: 1, Index: 1, Table: table,
		Files: warehouse.StagedFiles{Format: warehouse.FormatParquet, Paths: []string{listy}}})
	require.ErrorIs(t, err, warehouse.ErrInvalidType)
	require.Contains(t, err.Error(), `"tags"`)
	st, err := b.e.IngestState(b.ctx, "raw.events")
	require.NoError(t, err)
	for _, m := range st.Markers {
		require.False(t, m.Kind == warehouse.MarkerChunk && m.Index == 1, "the refused chunk left a marker")
	}
}
