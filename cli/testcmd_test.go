package cli

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/warehouse/duckdb"
)

// quickstartWithTests copies the example project (its models, seeds and
// sources, no warehouse) and adds test files.
func quickstartWithTests(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for _, sub := range []string{"models", "seeds", "sources"} {
		require.NoError(t, os.CopyFS(filepath.Join(dir, sub), os.DirFS(filepath.Join(quickstart, sub))))
	}
	b, err := os.ReadFile(filepath.Join(quickstart, "gapless.yaml"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "gapless.yaml"), b, 0o644))
	for rel, body := range files {
		p := filepath.Join(dir, rel)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
	}
	return dir
}

const dailyRevenueTests = `
test_daily_revenue:
  description: Two customers' events of one day, one outside the interval.
  model: demo.daily_revenue
  inputs:
    demo.events:
      - {event_id: 1, event_ts: 2024-01-02 10:00:00, customer_id: 1, amount: 1.5}
      - {event_id: 2, event_ts: 2024-01-02 11:00:00, customer_id: 1, amount: 3.0}
      - {event_id: 3, event_ts: 2024-01-02 12:00:00, customer_id: 2, amount: 4.5}
      - {event_id: 4, event_ts: 2024-01-03 00:00:00, customer_id: 2, amount: 100}
    demo.customers:
      - {customer_id: 1, name: Ada, segment: enterprise}
      - {customer_id: 2, name: Bob, segment: smb}
  outputs:
    query:
      - {day: 2024-01-02, customer_id: 1, segment: enterprise, events: 2, revenue: 4.5}
      - {day: 2024-01-02, customer_id: 2, segment: smb, events: 1, revenue: 4.5}
  vars:
    start: 2024-01-02
    end: 2024-01-02

test_top_customers:
  model: demo.top_customers
  inputs:
    demo.customer_totals:
      - {customer_id: 1, name: Ada, segment: enterprise, revenue: 10, events: 1}
      - {customer_id: 2, name: Bob, segment: smb, revenue: 30, events: 1}
  outputs:
    query:
      - {name: Bob, segment: smb, revenue: 30}
      - {name: Ada, segment: enterprise, revenue: %s}
`

// Scenario: gapless test runs the project's tests and exits 0 when they
// pass, 1 with a diff naming the test, file and line when one fails; NAME,
// FILE::NAME and -k select tests, and an unknown name is a usage error.
func TestScenarioTestCommand(t *testing.T) {
	t.Parallel()
	dir := quickstartWithTests(t, map[string]string{
		"tests/test_revenue.yaml": fillPct(dailyRevenueTests, "10"),
	})
	r := run(t, dir, "test")
	require.Equal(t, ExitOK, r.code, r.stdout+r.stderr)
	require.Contains(t, r.stdout, "Ran 2 tests in")
	require.Contains(t, r.stdout, "\nOK\n")
	_, err := os.Stat(filepath.Join(dir, "warehouse.duckdb"))
	require.ErrorIs(t, err, os.ErrNotExist, "a test must not touch the warehouse")

	r = run(t, dir, "test", "-v", "tests/test_revenue.yaml::test_top_customers")
	require.Equal(t, ExitOK, r.code, r.stdout+r.stderr)
	require.Contains(t, r.stdout, "test_top_customers (tests/test_revenue.yaml:22) ... ok\n")
	require.Contains(t, r.stdout, "Ran 1 test in")
	for _, sel := range [][]string{{"-k", "daily"}, {"models/top_customers.sql"}, {"--select-model", "demo.daily*"}} {
		r = run(t, dir, append([]string{"test"}, sel...)...)
		require.Equal(t, ExitOK, r.code, r.stdout+r.stderr)
		require.Contains(t, r.stdout, "Ran 1 test in", sel)
	}

	r = run(t, dir, "test", "test_top_customer")
	require.Equal(t, ExitUsage, r.code, r.stdout+r.stderr)
	require.Contains(t, r.stderr, "no test named test_top_customer")
	require.Contains(t, r.stderr, "did you mean test_top_customers?")
	r = run(t, dir, "test", "tests/test_revenue.yaml::nope")
	require.Equal(t, ExitUsage, r.code, r.stdout+r.stderr)

	require.NoError(t, os.WriteFile(filepath.Join(dir, "tests", "test_revenue.yaml"), []byte(fillPct(dailyRevenueTests, "11")), 0o644))
	r = run(t, dir, "test")
	require.Equal(t, ExitFailure, r.code, r.stdout+r.stderr)
	require.Contains(t, r.stdout, "FAIL: test_top_customers (tests/test_revenue.yaml:22), model demo.top_customers")
	require.Contains(t, r.stdout, "tests/test_revenue.yaml:29: query: data mismatch (rows compared in order: the query has ORDER BY)")
	require.Regexp(t, `row 2:\n\s+revenue\s+expected 11(\.0)?\s+actual 10`, r.stdout)
	require.Contains(t, r.stdout, "FAILED (failures=1)")
	require.Contains(t, r.stderr, "gapless: test: 1 of 2 tests did not pass")

	require.NoError(t, os.WriteFile(filepath.Join(dir, "tests", "test_broken.yaml"), []byte("test_b:\n  model: demo.top_customers\n  outputs: [\n"), 0o644))
	r = run(t, dir, "test")
	require.Equal(t, ExitFailure, r.code, r.stdout+r.stderr)
	require.Contains(t, r.stderr, "tests/test_broken.yaml:")
}

func fillPct(s, v string) string {
	for i := 0; i+1 < len(s); i++ {
		if s[i] == '%' && s[i+1] == 's' {
			return s[:i] + v + s[i+2:]
		}
	}
	return s
}

// Scenario: create_test reads input rows from the project's warehouse with
// read-only queries, writes tests/test_customer_totals.yaml, and gapless
// test then passes it; running it again is refused without --overwrite.
func TestScenarioCreateTestThenTest(t *testing.T) {
	t.Parallel()
	dir := quickstartWithTests(t, nil)
	ctx := context.Background()
	e, err := duckdb.Open(ctx, filepath.Join(dir, "warehouse.duckdb"), duckdb.Options{})
	require.NoError(t, err)
	for _, q := range []string{
		"CREATE SCHEMA demo",
		"CREATE TABLE demo.customers AS SELECT * FROM (VALUES (1, 'Ada', 'enterprise'), (2, 'Bob', 'smb'), (3, 'Cy', 'smb')) AS v(customer_id, name, segment)",
		"CREATE TABLE demo.daily_revenue AS SELECT * FROM (VALUES (TIMESTAMP '2024-01-02', 1, 'enterprise', 2, 4.5::DOUBLE), (TIMESTAMP '2024-01-03', 1, 'enterprise', 1, 1.5::DOUBLE)) AS v(day, customer_id, segment, events, revenue)",
	} {
		_, err := e.Query(ctx, q)
		require.NoError(t, err)
	}
	require.NoError(t, e.Close())

	args := []string{"create_test", "demo.customer_totals",
		"--query", "demo.customers", "SELECT * FROM demo.customers ORDER BY customer_id",
		"--query", "demo.daily_revenue", "SELECT * FROM demo.daily_revenue",
		"--execution-time", "2024-03-01"}
	r := run(t, dir, args...)
	require.Equal(t, ExitOK, r.code, r.stdout+r.stderr)
	require.Contains(t, r.stdout, "wrote test test_customer_totals to tests/test_customer_totals.yaml")
	b, err := os.ReadFile(filepath.Join(dir, "tests", "test_customer_totals.yaml"))
	require.NoError(t, err)
	require.Contains(t, string(b), "test_customer_totals:\n  model: demo.customer_totals\n  inputs:\n    demo.customers:\n    - customer_id: 1\n")
	require.Contains(t, string(b), "    - customer_id: 3\n      name: Cy\n      segment: smb\n      revenue: 0.0\n      events: 0\n")

	r = run(t, dir, "test")
	require.Equal(t, ExitOK, r.code, r.stdout+r.stderr)
	require.Contains(t, r.stdout, "Ran 1 test in")

	r = run(t, dir, args...)
	require.Equal(t, ExitFailure, r.code, r.stdout+r.stderr)
	require.Contains(t, r.stderr, "a test of that name already exists: test_customer_totals (give --overwrite")
	// SQLMesh's short flags: -q TABLE SQL, -v NAME VALUE, -o, -n.
	r = run(t, dir, "create_test", "demo.customer_totals", "-o", "-n", "test_customer_totals",
		"-q", "demo.customers", "SELECT * FROM demo.customers WHERE customer_id = 2",
		"-q", "demo.daily_revenue", "SELECT * FROM demo.daily_revenue", "-v", "start", "2024-01-01")
	require.Equal(t, ExitOK, r.code, r.stdout+r.stderr)
	b, err = os.ReadFile(filepath.Join(dir, "tests", "test_customer_totals.yaml"))
	require.NoError(t, err)
	require.Contains(t, string(b), "    demo.customers:\n    - customer_id: 2\n      name: Bob\n      segment: smb\n    demo.daily_revenue:")
	require.Contains(t, string(b), "  vars:\n    start: \"2024-01-01\"\n")
	require.NotContains(t, string(b), "Ada")
	r = run(t, dir, "test")
	require.Equal(t, ExitOK, r.code, r.stdout+r.stderr)

	for _, bad := range [][]string{
		{"create_test", "demo.customer_totals"},
		{"create_test", "demo.customer_totals", "--query", "demo.customers"},
		{"create_test", "--query", "a", "b"},
		{"create_test", "demo.customer_totals", "--query", "a", "b", "--bogus"},
	} {
		r = run(t, dir, bad...)
		require.Equal(t, ExitUsage, r.code, "%v: %s", bad, r.stderr)
	}
}
