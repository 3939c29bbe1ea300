package trinotest

import (
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"
)

// Scenario: two tests each get a catalog of their own; a table created in
// one is not seen from the other, and both run on a two-node cluster.
func TestNewCatalogIsIsolated(t *testing.T) {
	a, b := NewCatalog(t), NewCatalog(t)
	require.NotEqual(t, a, b)
	db := Admin(t)
	ca, cb := a[len(ServerURL())+1:], b[len(ServerURL())+1:]
	_, err := db.ExecContext(t.Context(), "CREATE SCHEMA "+ca+".s")
	require.NoError(t, err)
	_, err = db.ExecContext(t.Context(), "CREATE TABLE "+ca+".s.t AS SELECT 1 AS x")
	require.NoError(t, err)
	var n int
	require.NoError(t, db.QueryRowContext(t.Context(), "SELECT count(*) FROM "+ca+".information_schema.tables WHERE table_schema = 's'").Scan(&n))
	require.Equal(t, 1, n)
	require.NoError(t, db.QueryRowContext(t.Context(), "SELECT count(*) FROM "+cb+".information_schema.tables WHERE table_schema = 's'").Scan(&n))
	require.Zero(t, n)
	require.NoError(t, db.QueryRowContext(t.Context(), "SELECT count(*) FROM system.runtime.nodes WHERE state = 'active' AND NOT coordinator").Scan(&n))
	require.Equal(t, 1, n, "one active worker besides the coordinator")
}

// Scenario: the machine has no Trino running. A test that needs it fails
// under CI=true, naming the cluster, and is skipped with the reason
// otherwise: CI must never pass by skipping.
func TestUnreachableClusterFailsUnderCI(t *testing.T) {
	t.Parallel()
	child := func(ci string) (string, error) {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestNewCatalogIsIsolated$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), "CI="+ci, "GAPLESS_TEST_TRINO_URL=trino://gapless@127.0.0.1:1")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := child("true")
	require.Error(t, err, "under CI=true an unreachable cluster must fail the test:\n%s", out)
	require.Contains(t, out, "--- FAIL: TestNewCatalogIsIsolated")
	require.Contains(t, out, "Trino at trino://gapless@127.0.0.1:1 is unreachable and CI=true")

	out, err = child("")
	require.NoError(t, err, "without CI=true the test is skipped:\n%s", out)
	require.Contains(t, out, "--- SKIP: TestNewCatalogIsIsolated")
	require.Contains(t, out, "under CI=true this fails")
}
