package unittest

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/internal/pgtest"
	"github.com/gapless-dev/gapless/warehouse/postgres"
)

// Scenario: create_test on a project whose warehouse is PostgreSQL: the
// input rows are read there (NUMERIC, TIMESTAMP and DATE values as
// PostgreSQL returns them), the model runs on an in-memory DuckDB, and the
// written test passes.
func TestScenarioCreateFromPostgres(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, err := postgres.Open(ctx, pgtest.NewDatabase(t))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, e.Close()) })
	for _, q := range []string{
		"CREATE SCHEMA raw",
		"CREATE TABLE raw.payments (id INTEGER, amount NUMERIC(10,2), paid_at TIMESTAMP, due DATE)",
		"INSERT INTO raw.payments VALUES (1, 10.25, '2024-01-02 03:04:05.5', '2024-01-31'), (2, 4.75, '2024-01-03 00:00:00', NULL)",
	} {
		_, err := e.Query(ctx, q)
		require.NoError(t, err)
	}
	dir := writeProject(t, sqlmeshInit, map[string]string{
		"models/payments.sql": "MODEL (name raw.payments, kind EXTERNAL, columns (id INTEGER, amount DECIMAL(10,2), paid_at TIMESTAMP, due DATE));\n",
		"models/pay_total.sql": `MODEL (name sqlmesh_example.pay_total, kind FULL);
SELECT sum(amount) AS total, max(paid_at) AS last_paid, min(due) AS first_due, count(*) AS n FROM raw.payments
`,
	})
	pr := loadProject(t, dir)
	rel, err := Create(ctx, pr, e, CreateOptions{Model: "sqlmesh_example.pay_total",
		Queries: []InputQuery{{Table: "raw.payments", SQL: "SELECT * FROM raw.payments ORDER BY id"}}, Now: fixedNow})
	require.NoError(t, err)
	b, err := os.ReadFile(filepath.Join(dir, rel))
	require.NoError(t, err)
	require.Contains(t, string(b), "- id: 1\n      amount: 10.25\n      paid_at: 2024-01-02 03:04:05.5\n      due: 2024-01-31\n")
	require.Contains(t, string(b), "- total: 15.0\n      last_paid: 2024-01-03 00:00:00\n      first_due: 2024-01-31\n      \"n\": 2\n")
	tests, err := Load(dir)
	require.NoError(t, err)
	requireOK(t, Run(ctx, pr, tests, Options{Now: fixedNow}))
}
