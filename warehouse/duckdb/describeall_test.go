package duckdb_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/warehouse"
)

// Scenario: the check describes a layer of models in one batch. Two
// queries read the same not-built parent (its stand-in is made once), one
// query reads a column the parent does not have, one wants the parent with
// other columns, and one reads a real table. Each answer is exactly what
// Describe gives for that query alone: the failure is that query's own,
// with its SQL, and the queries after it are answered as before; nothing
// is left behind.
func TestDescribeAllAnswersEachAsDescribeAlone(t *testing.T) {
	t.Parallel()
	e := memoryEngine(t)
	t.Cleanup(func() { require.NoError(t, e.Close()) })
	ctx := t.Context()
	parent := warehouse.Table{Schema: "gapless__b", Name: "parent__v1"}
	real := warehouse.Table{Schema: "main", Name: "real_t"}
	require.NoError(t, e.CreateTable(ctx, warehouse.CreateTableParams{Table: real, Columns: []warehouse.Column{{Name: "r", Type: "DATE"}}}))
	standIn := func(cols ...warehouse.Column) []warehouse.CreateTableParams {
		return []warehouse.CreateTableParams{{Table: parent, Columns: cols}}
	}
	id := warehouse.Column{Name: "id", Type: "BIGINT"}
	name := warehouse.Column{Name: "name", Type: "VARCHAR"}
	ps := []warehouse.DescribeParams{
		{Query: "SELECT id + 1 AS id FROM " + e.QuoteTable(parent), StandIns: standIn(id)},
		{Query: "SELECT missing FROM " + e.QuoteTable(parent), StandIns: standIn(id)},
		{Query: "SELECT id AS k FROM " + e.QuoteTable(parent), StandIns: standIn(id)},
		{Query: "SELECT name FROM " + e.QuoteTable(parent), StandIns: standIn(id, name)},
		{Query: "SELECT id FROM " + e.QuoteTable(parent), StandIns: standIn(id)},
		{Query: "SELECT r FROM " + e.QuoteTable(real)},
	}
	got, err := e.DescribeAll(ctx, ps)
	require.NoError(t, err)
	require.Len(t, got, len(ps))
	for i, p := range ps {
		want, wantErr := e.Describe(ctx, p)
		if wantErr != nil {
			require.Error(t, got[i].Err, "query %d", i)
			var we, ge *warehouse.Error
			require.ErrorAs(t, wantErr, &we)
			require.ErrorAs(t, got[i].Err, &ge)
			require.Equal(t, we.SQL, ge.SQL, "query %d: the failed statement is named", i)
			require.NotEmpty(t, ge.SQL)
			continue
		}
		require.NoError(t, got[i].Err, "query %d", i)
		require.Equal(t, want, got[i].Columns, "query %d", i)
	}
	require.Error(t, got[1].Err, "the unknown column fails")
	require.Equal(t, []warehouse.Column{{Name: "name", Type: "VARCHAR"}}, got[3].Columns, "its own stand-in's columns")
	ok, err := e.TableExists(ctx, parent)
	require.NoError(t, err)
	require.False(t, ok, "the stand-in outlived the batch")
	res, err := e.Query(ctx, "SELECT count(*) FROM information_schema.schemata WHERE schema_name = 'gapless__b'")
	require.NoError(t, err)
	require.Equal(t, int64(0), res.Rows[0][0], "the stand-in's schema outlived the batch")
}

// Scenario: a batch larger than one transaction's chunk is answered in
// full and in order.
func TestDescribeAllSpansChunks(t *testing.T) {
	t.Parallel()
	e := memoryEngine(t)
	t.Cleanup(func() { require.NoError(t, e.Close()) })
	ps := make([]warehouse.DescribeParams, 600)
	for i := range ps {
		tbl := warehouse.Table{Schema: "s", Name: "p" + string(rune('a'+i%26)) + string(rune('a'+i/26))}
		ps[i] = warehouse.DescribeParams{Query: "SELECT x AS c" + string(rune('a'+i%26)) + " FROM " + e.QuoteTable(tbl),
			StandIns: []warehouse.CreateTableParams{{Table: tbl, Columns: []warehouse.Column{{Name: "x", Type: "INTEGER"}}}}}
	}
	got, err := e.DescribeAll(t.Context(), ps)
	require.NoError(t, err)
	require.Len(t, got, len(ps))
	for i := range ps {
		require.NoError(t, got[i].Err)
		require.Equal(t, []warehouse.Column{{Name: "c" + string(rune('a'+i%26)), Type: "INTEGER"}}, got[i].Columns, "query %d", i)
	}
}
