package cli

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// attributesProject moves over from SQLMesh with blueprints, a $root SEED
// loaded in batches, cron_tz and an attribute gapless only warns about.
var attributesProject = map[string]string{
	"seeds/customers.csv": "id,customer\n1,acme\n2,acme\n3,globex\n4,acme\n5,globex\n",
	"models/seeds/customers.sql": `MODEL (name shop.customers, kind SEED (path '$root/seeds/customers.csv', batch_size 2), start '2024-02-01');
`,
	"models/orders.sql": `MODEL (
  name @{customer}.orders,
  kind FULL,
  cron '0 2 * * *',
  cron_tz 'America/New_York',
  project 'warehouse_repo',
  blueprints ((customer := acme), (customer := globex))
);
SELECT count(*) AS n FROM shop.customers WHERE customer = '@{customer}'`,
}

// Scenario: plan builds one model per blueprint, each reading the SEED that
// was loaded in batches from the project folder, and prints the warning for
// the attribute it ignores (with the file and line) on stderr.
func TestSQLMeshAttributesPlanAsIs(t *testing.T) {
	t.Parallel()
	dir := writeFiles(t, attributesProject)
	r := run(t, dir, "plan", "--auto-apply", "--execution-time", "2024-03-01 10:30:00")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Contains(t, r.stderr, filepath.Join("models", "orders.sql")+":6:3: attribute project is ignored")
	q := run(t, dir, "query", "SELECT (SELECT n FROM acme.orders) || ',' || (SELECT n FROM globex.orders) || ',' || (SELECT count(*) FROM shop.customers)")
	require.Equal(t, ExitOK, q.code, q.stderr)
	require.Contains(t, q.stdout, "3,2,5")

	bad := writeFiles(t, map[string]string{"models/t.sql": "MODEL (name s.t, kind FULL,\n  gateway other);\nSELECT 1 AS x"})
	r = run(t, bad, "plan", "--auto-apply", "--execution-time", "2024-03-01 10:30:00")
	require.Equal(t, ExitFailure, r.code)
	require.Contains(t, r.stderr, filepath.Join("models", "t.sql")+":2:3: attribute gateway is not supported by gapless and ignoring it would change results")
}
