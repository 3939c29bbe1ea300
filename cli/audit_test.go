package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/state"
)

// auditProject writes a project of one daily INCREMENTAL_BY_TIME_RANGE model,
// shop.items, whose second and third days hold a negative amount, with the audits
// clause given, plus files (path -> content).
func auditProject(t *testing.T, audits string, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	write := func(name, content string) {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
	}
	write("gapless.yaml", "warehouse: duckdb://warehouse.duckdb\nstate: sqlite://.gapless/state.db\nmodel_defaults:\n  start: '2024-01-01'\n")
	write("models/items.sql", `MODEL (
  name shop.items,
  kind INCREMENTAL_BY_TIME_RANGE (time_column ts, batch_size 1),
  cron '@daily',
  audits (`+audits+`)
);
SELECT id, ts, amount
FROM (VALUES
  (1, TIMESTAMP '2024-01-01 10:00:00', 5),
  (2, TIMESTAMP '2024-01-02 10:00:00', -3),
  (3, TIMESTAMP '2024-01-02 11:00:00', 7),
  (4, TIMESTAMP '2024-01-03 09:00:00', 8),
  (5, TIMESTAMP '2024-01-03 10:00:00', -1)
) AS v(id, ts, amount)
WHERE ts BETWEEN @start_ts AND @end_ts;
`)
	for name, content := range files {
		write(name, content)
	}
	return dir
}

const positiveAudit = `-- a user audit with an argument
AUDIT (name assert_positive);
SELECT * FROM @this_model WHERE @column <= 0;

AUDIT (name assert_small, blocking false);
SELECT * FROM @this_model WHERE amount > @limit_v
`

// Scenario: as SQLMesh documents audits, a blocking audit that finds
// offending rows in a batch stops the plan: `gapless plan --auto-apply`
// exits 1 naming the audit, the model, the interval and a sample of the
// offending rows; the passing day stays computed, the failing one is not
// recorded and holds no rows, and prod is not promoted (it serves nothing).
// The history has the audit's outcomes. `gapless audit` on demand then finds
// nothing served to audit until prod exists.
func TestAuditBlockingFailureStopsPromotion(t *testing.T) {
	t.Parallel()
	dir := auditProject(t, "not_null(columns := (id, ts)), assert_positive(column := amount)",
		map[string]string{"audits/checks.sql": positiveAudit})
	r := run(t, dir, "plan", "--auto-apply", "--execution-time", "2024-01-03")
	require.Equal(t, ExitFailure, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
	require.Contains(t, r.stderr, "blocking audit assert_positive of model shop.items failed for interval [2024-01-02T00:00:00Z, 2024-01-03T00:00:00Z): 1 offending row(s)")
	require.Contains(t, r.stderr, "id=2, ts=2024-01-02 10:00:00, amount=-3")

	q := run(t, dir, "query", "SELECT count(*) FROM shop.items")
	require.Equal(t, ExitFailure, q.code, "prod serves nothing: %s", q.stdout)

	// The failing interval's rows were taken out again; the first day's stayed.
	phys := queryRows(t, dir, "SELECT table_schema || '.' || table_name FROM information_schema.tables WHERE table_schema LIKE 'gapless__shop%'")
	require.Len(t, phys.Rows, 1)
	rows := queryRows(t, dir, "SELECT id FROM "+phys.Rows[0][0].(string)+" ORDER BY id")
	require.Equal(t, [][]any{{float64(1)}}, rows.Rows)

	st := openState(t, dir)
	failed, err := st.ListEvents(t.Context(), state.EventFilter{Kinds: []string{state.EventAuditFailed}})
	require.NoError(t, err)
	require.Len(t, failed, 1)
	require.Equal(t, "shop.items", failed[0].Model)
	require.Equal(t, "assert_positive", failed[0].Reason)
	require.Contains(t, string(failed[0].Data), `"count":1`)
	require.Contains(t, string(failed[0].Data), `"interval":"[2024-01-02T00:00:00Z, 2024-01-03T00:00:00Z)"`)
	passed, err := st.ListEvents(t.Context(), state.EventFilter{Kinds: []string{state.EventAuditPassed}})
	require.NoError(t, err)
	require.Len(t, passed, 3, "both audits on the first day, not_null on the second")
}

// Scenario: the same offending row under a non-blocking audit (the
// _non_blocking suffix on a built-in, blocking false on a user audit) only
// warns: the plan applies and prod serves every row; `gapless audit` then
// reports WARN for them and PASS for the rest, and exits 0.
func TestAuditNonBlockingWarnsAndPromotes(t *testing.T) {
	t.Parallel()
	dir := auditProject(t, "not_null(columns := (id, ts)), accepted_range_non_blocking(column := amount, min_v := 0), assert_small(limit_v := 6)",
		map[string]string{"audits/checks.sql": positiveAudit})
	r := run(t, dir, "plan", "--auto-apply", "--execution-time", "2024-01-03")
	require.Equal(t, ExitOK, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
	require.Contains(t, r.stderr, "non-blocking audit failed")
	res := queryRows(t, dir, "SELECT count(*) FROM shop.items")
	require.Equal(t, [][]any{{float64(3)}}, res.Rows)

	out := run(t, dir, "audit", "--execution-time", "2024-01-03")
	require.Equal(t, ExitOK, out.code, "stdout: %s\nstderr: %s", out.stdout, out.stderr)
	require.Contains(t, out.stdout, "PASS  audit not_null of model shop.items, the whole table: passed")
	require.Contains(t, out.stdout, "WARN  non-blocking audit accepted_range_non_blocking of model shop.items failed for the whole table: 1 offending row(s)")
	require.Contains(t, out.stdout, "WARN  non-blocking audit assert_small of model shop.items failed")
	require.Contains(t, out.stdout, "3 audits: 1 passed, 2 failed (0 blocking)")

	// Restricted to the first day, nothing offends.
	out = run(t, dir, "audit", "--model", "shop.items", "--start", "2024-01-01", "--end", "2024-01-02", "--execution-time", "2024-01-03")
	require.Equal(t, ExitOK, out.code, out.stderr)
	require.Contains(t, out.stdout, "3 audits: 3 passed, 0 failed (0 blocking)")
}

// Scenario: `gapless audit` exits 1 when a blocking audit fails on what prod
// serves: an audit added to the project after the deploy (SQLMesh audits
// with the local definitions) finds the negative amount.
func TestAuditCommandFailsOnBlockingAudit(t *testing.T) {
	t.Parallel()
	dir := auditProject(t, "not_null(columns := id)", nil)
	mustRun(t, dir, "plan", "--auto-apply", "--execution-time", "2024-01-03")
	path := filepath.Join(dir, "models", "items.sql")
	src, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, []byte(strings.Replace(string(src), "not_null(columns := id)",
		"not_null(columns := id), forall(criteria := (amount > 0, id < 10))", 1)), 0o644))
	out := run(t, dir, "audit", "--execution-time", "2024-01-03")
	require.Equal(t, ExitFailure, out.code, "stdout: %s\nstderr: %s", out.stdout, out.stderr)
	require.Contains(t, out.stdout, "FAIL  blocking audit forall of model shop.items failed for the whole table: 1 offending row(s); sample (1):")
	require.Contains(t, out.stdout, "id=2")
}

// Scenario: bad audit input is refused before anything is written, naming
// the file and line: an unknown audit (with a did-you-mean), an unknown
// argument, a missing one, and a user audit whose query does not parse.
func TestAuditBadInputNamesFileAndLine(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, audits string
		files        map[string]string
		want         string
	}{
		{"unknown audit", "not_nul(columns := id)", nil,
			"models/items.sql:5:11: model shop.items: unknown audit not_nul: did you mean not_null?"},
		{"unknown argument", "accepted_range(column := amount, minimum := 0)", nil,
			"models/items.sql:5:11: model shop.items, audit accepted_range: unknown argument minimum (its arguments: column, min_v, max_v, inclusive, condition)"},
		{"missing argument", "accepted_values(column := amount)", nil,
			"models/items.sql:5:11: model shop.items, audit accepted_values: missing argument is_in"},
		{"user audit missing its argument", "assert_positive", map[string]string{"audits/checks.sql": positiveAudit},
			"models/items.sql:5:11: model shop.items, audit assert_positive: missing argument column (the audit's query uses @column on audits/checks.sql:3)"},
		{"audit query does not parse", "broken", map[string]string{"audits/broken.sql": "AUDIT (name broken);\nSELECT * FROM @this_model WHERE WHERE id < 0"},
			"audits/broken.sql:2:1: model shop.items, audit broken: the audit's query does not parse"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := auditProject(t, tc.audits, tc.files)
			r := run(t, dir, "plan", "--auto-apply", "--execution-time", "2024-01-03")
			require.Equal(t, ExitFailure, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
			require.Contains(t, r.stderr, tc.want)
			_, err := os.Stat(filepath.Join(dir, "warehouse.duckdb"))
			if err == nil {
				q := run(t, dir, "query", "SELECT count(*) FROM information_schema.tables WHERE table_schema LIKE 'gapless__%'")
				require.Contains(t, q.stdout, "0", "nothing was written")
			}
			a := run(t, dir, "audit", "--execution-time", "2024-01-03")
			require.Equal(t, ExitFailure, a.code)
			require.Contains(t, a.stderr, tc.want)
		})
	}
}

// Scenario: SQLMesh writes a batch and audits it after; on a scheduled run
// the version is already served, so rows a blocking audit refuses would be
// visible through prod's view. gapless takes them out again: the run exits
// 1 naming the audit, the interval and the row, the refused day is not
// recorded and prod shows no row of it (a gap, not bad rows), while the
// days before stay served.
func TestAuditBlockingFailureOnRunLeavesNoRefusedRowsServed(t *testing.T) {
	t.Parallel()
	dir := auditProject(t, "forall(criteria := (amount > 0 OR ts < '2024-01-03'))", nil)
	mustRun(t, dir, "plan", "--auto-apply", "--execution-time", "2024-01-03")
	require.Equal(t, [][]any{{float64(3)}}, queryRows(t, dir, "SELECT count(*) FROM shop.items").Rows)

	r := run(t, dir, "run", "--execution-time", "2024-01-04")
	require.Equal(t, ExitFailure, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
	require.Contains(t, r.stderr, "blocking audit forall of model shop.items failed for interval [2024-01-03T00:00:00Z, 2024-01-04T00:00:00Z): 1 offending row(s)")
	require.Contains(t, r.stderr, "id=5")
	require.Equal(t, [][]any{{float64(1)}, {float64(2)}, {float64(3)}}, queryRows(t, dir, "SELECT id FROM shop.items ORDER BY id").Rows)
}

// Scenario: a FULL model is audited after its build, over the whole table;
// a blocking failure fails the plan and nothing is promoted.
func TestAuditBlockingFailureOnAFullModel(t *testing.T) {
	t.Parallel()
	dir := auditProject(t, "", map[string]string{"models/totals.sql": `MODEL (name shop.totals, kind FULL, audits (number_of_rows(threshold := 5)));
SELECT count(*) AS n FROM shop.items
`})
	r := run(t, dir, "plan", "--auto-apply", "--execution-time", "2024-01-03")
	require.Equal(t, ExitFailure, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
	require.Contains(t, r.stderr, "blocking audit number_of_rows of model shop.totals failed for the whole table: 1 offending row(s)")
	q := run(t, dir, "query", "SELECT * FROM shop.totals")
	require.Equal(t, ExitFailure, q.code, "prod serves nothing: %s", q.stdout)
}
