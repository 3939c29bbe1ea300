package trinotest

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// Scenario: a test leaves a schema and a table in its catalog and ends.
// While it held the catalog, no other holder could take it (its file lock
// is exclusive, also against another open of the same file); when the
// catalog is taken again it is empty. The cluster has a coordinator and
// one active worker. Each step holds one catalog at most, so the test can
// never wait on itself.
func TestNewCatalogIsLentEmptyAndExclusive(t *testing.T) {
	var name string
	t.Run("leave objects behind", func(t *testing.T) {
		url := NewCatalog(t)
		name = url[len(ServerURL())+1:]
		db := Admin(t)
		_, err := db.ExecContext(t.Context(), "CREATE SCHEMA "+name+".s")
		require.NoError(t, err)
		_, err = db.ExecContext(t.Context(), "CREATE TABLE "+name+".s.t AS SELECT 1 AS x")
		require.NoError(t, err)
		f, err := os.OpenFile(filepath.Join(LakeDir(), ".locks", name+".lock"), os.O_RDWR, 0)
		require.NoError(t, err)
		defer func() { require.NoError(t, f.Close()) }()
		require.ErrorIs(t, syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB), syscall.EWOULDBLOCK,
			"another holder could take a lent catalog")
	})
	db := Admin(t)
	got, unlock, err := lockOne(filepath.Join(LakeDir(), ".locks"), []string{name}, t.Name())
	require.NoError(t, err)
	defer unlock()
	require.Equal(t, name, got)
	require.NoError(t, emptyCatalog(db, name))
	schemas, err := listSchemas(t.Context(), db, name)
	require.NoError(t, err)
	require.Empty(t, schemas, "the catalog was lent with the last holder's schemas")
	var n int
	require.NoError(t, db.QueryRowContext(t.Context(), "SELECT count(*) FROM system.runtime.nodes WHERE state = 'active' AND NOT coordinator").Scan(&n))
	require.Equal(t, 1, n, "one active worker besides the coordinator")
}

// Scenario: the machine has no Trino running. A test that needs it fails
// under CI=true, naming the cluster, and is skipped with the reason
// otherwise: CI must never pass by skipping.
func TestUnreachableClusterFailsUnderCI(t *testing.T) {
	t.Parallel()
	child := func(ci string) (string, error) {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestNewCatalogIsLentEmptyAndExclusive$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), "CI="+ci, "GAPLESS_TEST_TRINO_URL=trino://gapless@127.0.0.1:1")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := child("true")
	require.Error(t, err, "under CI=true an unreachable cluster must fail the test:\n%s", out)
	require.Contains(t, out, "--- FAIL: TestNewCatalogIsLentEmptyAndExclusive")
	require.Contains(t, out, "Trino at trino://gapless@127.0.0.1:1 is unreachable and CI=true")

	out, err = child("")
	require.NoError(t, err, "without CI=true the test is skipped:\n%s", out)
	require.Contains(t, out, "--- SKIP: TestNewCatalogIsLentEmptyAndExclusive")
	require.Contains(t, out, "under CI=true this fails")
}
