package duckdb_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/warehouse"
)

// Scenario: DuckDB's own statements through ReadOnlyQuery. DESCRIBE, SHOW,
// SUMMARIZE and FROM-first are reads (DuckDB parses them into SELECTs)
// and run, and so does EXPLAIN [ANALYZE] of a SELECT; ATTACH, DETACH,
// INSTALL, LOAD, CALL, PRAGMA (also table_info: DESCRIBE says the same),
// EXPORT DATABASE (also under EXPLAIN: binding it creates its folder), USE,
// CREATE TEMP TABLE, CHECKPOINT, BEGIN and a PIVOT that DuckDB runs as
// several statements are refused with ErrNotARead. Afterwards no database is attached, the table holds its
// row, and nothing was exported.
func TestReadOnlyQueryDuckDBStatements(t *testing.T) {
	t.Parallel()
	e := fileEngine(t)
	defer e.Close()
	ctx := t.Context()
	tbl := warehouse.Table{Schema: "gapless__demo", Name: "demo__events__1"}
	require.NoError(t, e.CreateSchema(ctx, tbl.Schema))
	require.NoError(t, e.CreateTableAs(ctx, warehouse.CreateTableAsParams{Table: tbl, WithData: true, Query: "SELECT 1 AS id"}))
	q := e.QuoteTable(tbl)

	for _, sql := range []string{
		"DESCRIBE " + q,
		"SHOW " + q,
		"SHOW ALL TABLES",
		"SUMMARIZE " + q,
		"FROM " + q,
		"EXPLAIN SELECT * FROM " + q,
		"EXPLAIN ANALYZE SELECT * FROM " + q,
		"/* why */ explain -- slow?\n SELECT * FROM " + q,
	} {
		res, err := e.ReadOnlyQuery(ctx, sql)
		require.NoError(t, err, sql)
		require.NotEmpty(t, res.Rows, sql)
	}

	dir := t.TempDir()
	for _, sql := range []string{
		"ATTACH '" + filepath.Join(dir, "other.duckdb") + "' AS other",
		"DETACH other",
		"INSTALL json",
		"LOAD json",
		"CALL pragma_version()",
		"PRAGMA threads = 1",
		"PRAGMA table_info('gapless__demo.demo__events__1')",
		"EXPLAIN EXPORT DATABASE '" + filepath.Join(dir, "export") + "'",
		"EXPLAIN ANALYZE DELETE FROM " + q,
		"SET threads = 1",
		"EXPORT DATABASE '" + filepath.Join(dir, "export") + "'",
		"USE gapless__demo",
		"CREATE TEMP TABLE scratch AS SELECT 1",
		"CHECKPOINT",
		"BEGIN TRANSACTION",
		"PIVOT " + q + " ON id USING count(*)",
	} {
		_, err := e.ReadOnlyQuery(ctx, sql)
		require.ErrorIs(t, err, warehouse.ErrNotARead, sql)
	}
	res, err := e.Query(ctx, "SELECT database_name FROM duckdb_databases() WHERE NOT internal ORDER BY 1")
	require.NoError(t, err)
	require.Len(t, res.Rows, 1, "a refused ATTACH attached a database: %v", res.Rows)
	require.NoFileExists(t, filepath.Join(dir, "other.duckdb"))
	require.NoDirExists(t, filepath.Join(dir, "export"))
	res, err = e.ReadOnlyQuery(ctx, "SELECT count(*) FROM "+q)
	require.NoError(t, err)
	require.EqualValues(t, 1, res.Rows[0][0])
}
