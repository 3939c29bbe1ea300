package duckdb

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/warehouse"
)

// Scenario: three transactions insert the same marker past the engine's
// write lock (as two processes would, were the file shared), the third
// after the first committed (its snapshot, taken before, did not hold the
// marker, so the gate let it through). DuckDB lets the first two insert,
// each seeing one row affected, fails the second at COMMIT and the third
// at its insert; commitConflict recognises both failures, which
// ApplyIngest reports as already applied, and the losers' writes are
// gone.
func TestMarkerRaceFailsLoserAtCommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, err := Open(ctx, "", Options{})
	require.NoError(t, err)
	defer e.Close()
	a, err := e.session(ctx)
	require.NoError(t, err)
	defer a.close()
	b, err := e.session(ctx)
	require.NoError(t, err)
	defer b.close()
	c, err := e.session(ctx)
	require.NoError(t, err)
	defer c.close()
	for _, ddl := range ingestDDL {
		_, err := a.exec(ctx, ddl)
		require.NoError(t, err)
	}
	for _, s := range []*session{a, b} {
		_, err := s.exec(ctx, "BEGIN TRANSACTION")
		require.NoError(t, err)
		n, err := s.exec(ctx, insertMarkerSQL, "s", 1, "batch", 1, 0)
		require.NoError(t, err)
		require.Equal(t, int64(1), n, "each transaction sees its own insert")
	}
	_, err = c.exec(ctx, "BEGIN TRANSACTION")
	require.NoError(t, err)
	found, err := c.findsRows(ctx, "SELECT 1 FROM "+markersTable)
	require.NoError(t, err)
	require.False(t, found, "the third transaction's snapshot holds no marker")
	_, err = a.exec(ctx, "COMMIT")
	require.NoError(t, err)
	_, err = b.exec(ctx, "COMMIT")
	require.Error(t, err)
	require.True(t, commitConflict(err), "not recognised as a marker conflict: %v", err)
	_, _ = b.exec(ctx, "ROLLBACK")
	_, err = c.exec(ctx, insertMarkerSQL, "s", 1, "batch", 1, 0)
	require.Error(t, err)
	require.True(t, commitConflict(err), "not recognised as a marker conflict: %v", err)
	_, _ = c.exec(ctx, "ROLLBACK")
	res, err := a.query(ctx, "SELECT count(*) FROM "+markersTable)
	require.NoError(t, err)
	require.Equal(t, int64(1), res.Rows[0][0])
	require.False(t, commitConflict(context.Canceled))
}

// Scenario: a chunk step turns DuckDB's preserve_insertion_order off for
// its own statements only: after a chunk that commits, and after one that
// fails on a file that does not parse, the engine's (single) connection
// preserves insertion order again for every other statement.
func TestChunkResetsInsertionOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	e, err := Open(ctx, filepath.Join(dir, "w.duckdb"), Options{})
	require.NoError(t, err)
	defer e.Close()
	e.db.SetMaxOpenConns(1) // every statement on the connection the steps ran on
	good, bad := filepath.Join(dir, "good.csv"), filepath.Join(dir, "bad.csv")
	require.NoError(t, os.WriteFile(good, []byte("id\n1\n2\n"), 0o644))
	require.NoError(t, os.WriteFile(bad, []byte("id\n\"unterminated\n"), 0o644))
	preserved := func() bool {
		t.Helper()
		res, err := e.Query(ctx, "SELECT current_setting('preserve_insertion_order')")
		require.NoError(t, err)
		return res.Rows[0][0] == true
	}
	require.True(t, preserved(), "DuckDB's default")
	table := warehouse.Table{Schema: "gapless__raw", Name: "events__g1"}
	_, err = e.ApplyIngest(ctx, warehouse.IngestParams{Source: "raw.events", Step: warehouse.StepFence, Generation: 1})
	require.NoError(t, err)
	_, err = e.ApplyIngest(ctx, warehouse.IngestParams{Source: "raw.events", Step: warehouse.StepChunk, Generation: 1, Table: table,
		Files: warehouse.StagedFiles{Format: warehouse.FormatCSV, Paths: []string{good}}})
	require.NoError(t, err)
	require.True(t, preserved(), "after a chunk that committed")
	_, err = e.ApplyIngest(ctx, warehouse.IngestParams{Source: "raw.events", Step: warehouse.StepChunk, Generation: 1, Index: 1, Table: table,
		Files: warehouse.StagedFiles{Format: warehouse.FormatCSV, Paths: []string{bad}}})
	require.Error(t, err)
	require.True(t, preserved(), "after a chunk that failed")
}

// Scenario: the engine creates the fence and marker tables once, then
// trusts they exist. Dropped behind its back, the next read and the next
// step fail (nothing is silently re-created in the same call), and the
// ones after ask the catalog again: the read finds no fence, the step
// creates the tables and commits.
func TestIngestTablesDroppedBehindTheEngine(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, err := Open(ctx, "", Options{})
	require.NoError(t, err)
	defer e.Close()
	fence := func(gen, from int64) error {
		_, err := e.ApplyIngest(ctx, warehouse.IngestParams{Source: "raw.events", Step: warehouse.StepFence, Generation: gen, From: from})
		return err
	}
	require.NoError(t, fence(1, 0))
	require.True(t, e.shared.ingestReady.Load())
	_, err = e.Query(ctx, "DROP SCHEMA "+quoteIdent(warehouse.IngestSchema)+" CASCADE")
	require.NoError(t, err)

	_, err = e.IngestState(ctx, "raw.events")
	require.Error(t, err, "the tables are gone")
	st, err := e.IngestState(ctx, "raw.events")
	require.NoError(t, err)
	require.False(t, st.Exists)

	e.shared.ingestReady.Store(true) // as if a step had run since
	require.Error(t, fence(1, 0), "the tables are gone")
	require.NoError(t, fence(1, 0))
	st, err = e.IngestState(ctx, "raw.events")
	require.NoError(t, err)
	require.True(t, st.Exists)
	require.Equal(t, int64(1), st.PlannedGeneration)
}
