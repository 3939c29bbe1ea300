package cli

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// Scenario: as SQLMesh's model_defaults.audits does, an audit listed in the
// project's model_defaults is called by every model, before the model's own:
// here a SQLMesh config.yaml (no gapless.yaml) makes every model check that
// amount is not negative, with SQLMesh's condition argument; the second
// day's negative amount stops the plan naming the audit and the interval,
// and prod serves nothing.
func TestModelDefaultsAuditsRunForEveryModel(t *testing.T) {
	t.Parallel()
	dir := auditProject(t, "not_null(columns := (id))", nil)
	require.NoError(t, os.Remove(filepath.Join(dir, "gapless.yaml")))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(`gateways:
  local:
    connection:
      type: duckdb
      database: warehouse.duckdb
default_gateway: local
model_defaults:
  dialect: duckdb
  start: 2024-01-01
  audits:
    - accepted_range(column := amount, min_v := 0, condition := id < 5)
`), 0o644))
	r := run(t, dir, "plan", "--auto-apply", "--execution-time", "2024-01-03")
	require.Equal(t, ExitFailure, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
	require.Contains(t, r.stderr, "blocking audit accepted_range of model shop.items failed for interval [2024-01-02T00:00:00Z, 2024-01-03T00:00:00Z): 1 offending row(s)")
	q := run(t, dir, "query", "SELECT count(*) FROM shop.items")
	require.Equal(t, ExitFailure, q.code, "prod serves nothing: %s", q.stdout)

	// The condition leaves id 5 (the third day's negative amount) out: with
	// the second day's row fixed, everything passes.
	editModel(t, dir, "items.sql", "(2, TIMESTAMP '2024-01-02 10:00:00', -3)", "(2, TIMESTAMP '2024-01-02 10:00:00', 3)")
	r = run(t, dir, "plan", "--auto-apply", "--execution-time", "2024-01-04")
	require.Zero(t, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
	require.Equal(t, [][]any{{float64(5)}}, queryRows(t, dir, "SELECT count(*) FROM shop.items").Rows)
}

// Scenario: a model_defaults audit that does not exist, or is written
// wrongly, is reported at its line of gapless.yaml, naming the entry.
func TestModelDefaultsAuditsBadInputNamesTheLine(t *testing.T) {
	t.Parallel()
	dir := auditProject(t, "not_null(columns := (id))", map[string]string{"gapless.yaml": `warehouse: duckdb://warehouse.duckdb
state: sqlite://.gapless/state.db
model_defaults:
  start: '2024-01-01'
  audits:
    - not_null(columns := (id))
    - no_such_audit
`})
	r := run(t, dir, "plan", "--auto-apply", "--execution-time", "2024-01-03")
	require.Equal(t, ExitFailure, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
	require.Contains(t, r.stderr, "gapless.yaml:7:7: model shop.items: unknown audit no_such_audit")

	require.NoError(t, os.WriteFile(filepath.Join(dir, "gapless.yaml"), []byte(`warehouse: duckdb://warehouse.duckdb
state: sqlite://.gapless/state.db
model_defaults:
  start: '2024-01-01'
  audits:
    - not_null(columns := (id)
`), 0o644))
	r = run(t, dir, "plan", "--auto-apply", "--execution-time", "2024-01-03")
	require.Equal(t, ExitFailure, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
	require.Contains(t, r.stderr, "gapless.yaml:6:7: model_defaults.audits: entry 1 (\"not_null(columns := (id)\")")
}

// Scenario: a user audit calls a SQL macro function from the project's
// macros/*.sql, as SQLMesh audits may: the macro is expanded in the audit's
// query, and the audit fails the second day's batch on its negative amount.
func TestAuditsCallTheProjectsMacros(t *testing.T) {
	t.Parallel()
	dir := auditProject(t, "positive_amount", map[string]string{
		"macros/checks.sql": "@DEF(non_positive, c -> c <= 0);\n",
		"audits/checks.sql": "AUDIT (name positive_amount);\nSELECT * FROM @this_model WHERE @non_positive(amount)\n",
	})
	r := run(t, dir, "plan", "--auto-apply", "--execution-time", "2024-01-03")
	require.Equal(t, ExitFailure, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
	require.Contains(t, r.stderr, "blocking audit positive_amount of model shop.items failed for interval [2024-01-02T00:00:00Z, 2024-01-03T00:00:00Z): 1 offending row(s)")
}

// Scenario: a user audit reads the configuration's variables, as SQLMesh
// audits may (@name and @VAR('name')); the audit fails the second day's
// batch on its amount below the configured minimum.
func TestAuditsReadTheConfigurationsVariables(t *testing.T) {
	t.Parallel()
	dir := auditProject(t, "above_minimum", map[string]string{
		"gapless.yaml":      "warehouse: duckdb://warehouse.duckdb\nstate: sqlite://.gapless/state.db\nmodel_defaults:\n  start: '2024-01-01'\nvariables:\n  min_amount: 0\n  floor: -100\n",
		"audits/checks.sql": "AUDIT (name above_minimum);\nSELECT * FROM @this_model WHERE amount < @min_amount AND amount > @VAR('floor')\n",
	})
	r := run(t, dir, "plan", "--auto-apply", "--execution-time", "2024-01-03")
	require.Equal(t, ExitFailure, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
	require.Contains(t, r.stderr, "blocking audit above_minimum of model shop.items failed for interval [2024-01-02T00:00:00Z, 2024-01-03T00:00:00Z): 1 offending row(s)")
}
