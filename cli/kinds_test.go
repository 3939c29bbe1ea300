package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// kindsProject writes a daily project whose models read raw.customers, a
// table the test keeps with `gapless query --allow-writes`: an SCD type 2
// history of it (SQLMesh's SCD_TYPE_2 spelling) and an unmanaged log.
func kindsProject(t *testing.T, scd string) string {
	t.Helper()
	dir := t.TempDir()
	write := func(name, content string) {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
	}
	write("gapless.yaml", "warehouse: duckdb://warehouse.duckdb\nstate: sqlite://.gapless/state.db\nmodel_defaults:\n  start: '2024-01-01'\n")
	write("models/raw_customers.sql", "MODEL (name raw.customers, kind EXTERNAL, columns (id INTEGER, name TEXT, updated_at TIMESTAMP));\n")
	write("models/customers_history.sql", "MODEL (\n  name hist.customers,\n  kind "+scd+",\n  cron '@daily'\n);\nSELECT id, name, updated_at FROM raw.customers;\n")
	write("models/current.sql", "MODEL (name hist.current_customers, kind VIEW);\nSELECT id, name, valid_from FROM hist.customers WHERE valid_to IS NULL;\n")
	write("models/customer_log.sql", "MODEL (name hist.customer_log, kind INCREMENTAL_UNMANAGED, cron '@daily');\nSELECT id, name, @start_ds AS ds FROM raw.customers;\n")
	mustRun(t, dir, "query", "--allow-writes", "CREATE SCHEMA raw")
	mustRun(t, dir, "query", "--allow-writes", "CREATE TABLE raw.customers AS SELECT * FROM (VALUES "+
		"(1, 'ann', TIMESTAMP '2024-01-01 10:00:00'), (2, 'bob', TIMESTAMP '2024-01-01 11:00:00'), (3, 'cy', TIMESTAMP '2024-01-01 12:00:00')) AS v(id, name, updated_at)")
	return dir
}

func historyRows(t *testing.T, dir string) []string {
	t.Helper()
	res := queryRows(t, dir, "SELECT CAST(id AS VARCHAR) || ' ' || name || ' ' || CAST(valid_from AS VARCHAR) || ' ' || "+
		"COALESCE(CAST(valid_to AS VARCHAR), 'open') AS r FROM hist.customers ORDER BY id, valid_from")
	out := make([]string, len(res.Rows))
	for i, r := range res.Rows {
		out[i], _ = r[0].(string)
	}
	return out
}

// Scenario: a SQLMesh SCD_TYPE_2 model deployed with `gapless plan
// --auto-apply` and run daily with `gapless run --execution-time`: the
// first load opens every row at 1970-01-01; an update closes the old row at
// the new updated_at and opens a new one; an unchanged row stays open; a
// hard delete is closed at the run's execution time (invalidate_hard_deletes
// true); running the same day again changes nothing. The plan says the
// model is forward-only and what a crash does to the unmanaged log.
func TestSCDType2ThroughPlanAndRun(t *testing.T) {
	t.Parallel()
	dir := kindsProject(t, "SCD_TYPE_2 (unique_key id, invalidate_hard_deletes true)")
	out := mustRun(t, dir, "plan", "--auto-apply", "--execution-time", "2024-01-02")
	require.Contains(t, out, "Note on hist.customer_log: INCREMENTAL_UNMANAGED appends its rows at each run; a crash after the append and before its interval is recorded appends them again")
	require.Equal(t, []string{
		"1 ann 1970-01-01 00:00:00 open",
		"2 bob 1970-01-01 00:00:00 open",
		"3 cy 1970-01-01 00:00:00 open",
	}, historyRows(t, dir))

	mustRun(t, dir, "query", "--allow-writes", "UPDATE raw.customers SET name = 'anna', updated_at = TIMESTAMP '2024-01-02 09:00:00' WHERE id = 1")
	mustRun(t, dir, "query", "--allow-writes", "DELETE FROM raw.customers WHERE id = 3")
	mustRun(t, dir, "run", "--execution-time", "2024-01-03")
	want := []string{
		"1 ann 1970-01-01 00:00:00 2024-01-02 09:00:00",
		"1 anna 2024-01-02 09:00:00 open",
		"2 bob 1970-01-01 00:00:00 open",
		"3 cy 1970-01-01 00:00:00 2024-01-03 00:00:00",
	}
	require.Equal(t, want, historyRows(t, dir))
	require.Equal(t, float64(2), count(t, dir, "hist.current_customers"), "a child reads the history columns")
	mustRun(t, dir, "run", "--execution-time", "2024-01-03")
	require.Equal(t, want, historyRows(t, dir), "a second run at the same time is harmless")
	require.Equal(t, float64(5), count(t, dir, "hist.customer_log"), "three rows on day one, two appended on day two")

	// A change of the query is forward-only (SQLMesh's default for the
	// kind): the plan keeps the table, and its history with it.
	path := filepath.Join(dir, "models", "customers_history.sql")
	src, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, []byte(strings.Replace(string(src), "SELECT id, name,", "SELECT id, trim(name) AS name,", 1)), 0o644))
	out = mustRun(t, dir, "plan", "--auto-apply", "--execution-time", "2024-01-03")
	require.Contains(t, out, "forward-only: declared forward_only")
	require.Equal(t, want, historyRows(t, dir))
}

// Scenario: a `columns` property naming a column the query lacks stops the
// plan (exit 1) at the model's file and line, naming the column and the
// query's columns.
func TestSCDType2ColumnsNamingAMissingColumn(t *testing.T) {
	t.Parallel()
	dir := kindsProject(t, "SCD_TYPE_2_BY_COLUMN (unique_key id, columns [name, email])")
	r := run(t, dir, "plan", "--auto-apply", "--execution-time", "2024-01-02")
	require.Equal(t, ExitFailure, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
	require.Contains(t, r.stderr, "models/customers_history.sql:3:8")
	require.Contains(t, r.stderr, "model hist.customers: columns email is not a column of its query (its columns: id, name, updated_at)")
}
