package ingest_test

import (
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/duckdb/duckdb-go/v2"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/ingest"
)

func TestFileWithWrongColumnsBlocksItsBatch(t *testing.T) {
	// Scenario: raw.events is primed from a.csv (columns id, v). b.csv
	// lands with its columns in another order (v, id): columns are matched
	// by name, so it applies as it should. c.csv lands with a column the
	// table does not have (w instead of v), then d.csv, a good file: the
	// pass fails the source at c.csv's batch, naming the file and the
	// column, applies nothing of it and leaves d.csv waiting. Once c.csv is
	// rewritten with the table's columns, the next pass applies c then d.
	eachStore(t, func(t *testing.T, e *env) {
		e.csv("a.csv", 1, 2)
		require.NoError(t, e.pass().Err)
		e.write("b.csv", "v,id\nv3,3\n")
		r := e.pass()
		require.NoError(t, r.Err)
		require.Equal(t, 1, r.Applied)
		e.requireServes(3)
		rows, err := e.wh.ReadOnlyQuery(t.Context(), "SELECT v FROM raw.events WHERE id = 3")
		require.NoError(t, err)
		require.Equal(t, [][]any{{"v3"}}, rows.Rows, "a reordered file lands by column name")

		e.write("c.csv", "id,w\n4,x\n")
		e.csv("d.csv", 5)
		r = e.pass()
		var be *ingest.BatchError
		require.ErrorAs(t, r.Err, &be)
		require.Equal(t, int64(3), be.Index)
		require.Contains(t, r.Err.Error(), "c.csv")
		require.Regexp(t, `column (with name )?"w"`, r.Err.Error(), "the reason names the column")
		require.Zero(t, r.Applied)
		require.NotNil(t, r.Blocked)
		require.Equal(t, int64(3), r.Blocked.Seq)
		e.requireServes(3)

		e.csv("c.csv", 4)
		r = e.pass()
		require.NoError(t, r.Err)
		require.Equal(t, 2, r.Applied)
		e.requireServes(5)
	})
}

// parquet writes landing/name as a Parquet file of the query's rows, with
// an in-memory DuckDB of its own (the warehouse may be PostgreSQL).
func (e *env) parquet(name, query string) {
	e.t.Helper()
	db, err := sql.Open("duckdb", "")
	require.NoError(e.t, err)
	defer func() { require.NoError(e.t, db.Close()) }()
	path := filepath.Join(e.root, "landing", name)
	_, err = db.ExecContext(e.t.Context(), "COPY ("+query+") TO '"+strings.ReplaceAll(path, "'", "''")+"' (FORMAT parquet)")
	require.NoError(e.t, err)
}

func TestParquetFileWithWrongColumnsBlocksItsBatch(t *testing.T) {
	// Scenario: raw.events lands Parquet files. a.parquet (id, v) primes
	// it. b.parquet has a column the table lacks (id, amount) and c.parquet
	// is good: the pass fails at b.parquet's batch, naming the file and
	// the column, applies nothing of it and leaves c waiting. b.parquet is
	// rewritten with the table's columns and the next pass applies b and c.
	eachStore(t, func(t *testing.T, e *env) {
		e.d.Files.Path = "landing/*.parquet"
		e.parquet("a.parquet", "SELECT 1::BIGINT AS id, 'v1' AS v UNION ALL SELECT 2, 'v2'")
		require.NoError(t, e.pass().Err)
		e.requireServes(2)

		e.parquet("b.parquet", "SELECT 3::BIGINT AS id, 10.5::DOUBLE AS amount")
		e.parquet("c.parquet", "SELECT 4::BIGINT AS id, 'v4' AS v")
		r := e.pass()
		var be *ingest.BatchError
		require.ErrorAs(t, r.Err, &be)
		require.Equal(t, int64(2), be.Index)
		require.Contains(t, r.Err.Error(), "b.parquet")
		require.Regexp(t, `column (with name )?"amount"`, r.Err.Error(), "the reason names the column")
		require.Zero(t, r.Applied)
		e.requireServes(2)

		e.parquet("b.parquet", "SELECT 3::BIGINT AS id, 'v3' AS v")
		r = e.pass()
		require.NoError(t, r.Err)
		require.Equal(t, 2, r.Applied)
		e.requireServes(4)
	})
}
