package pgtest

import (
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"
)

// Scenario: the machine has no PostgreSQL running (a fresh CI machine on
// which `make services` was not run, or failed). A test that needs it
// fails under CI=true, naming the server, and is skipped with the reason
// otherwise: CI must never pass by skipping.
func TestUnreachableServerFailsUnderCI(t *testing.T) {
	t.Parallel()
	child := func(ci string) (string, error) {
		// A real test that needs the server, in a child process of this
		// test binary (the reachability check is made once per process).
		cmd := exec.Command(os.Args[0], "-test.run", "^TestNewDatabaseIsIsolated$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(),
			"CI="+ci,
			// Port 1 on loopback: nothing listens there, the connection is refused at once.
			"GAPLESS_TEST_DATABASE_URL=postgres://postgres@127.0.0.1:1/postgres?sslmode=disable&connect_timeout=2",
		)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}

	out, err := child("true")
	require.Error(t, err, "under CI=true an unreachable server must fail the test:\n%s", out)
	require.Contains(t, out, "--- FAIL: TestNewDatabaseIsIsolated")
	require.Contains(t, out, "PostgreSQL at postgres://postgres@127.0.0.1:1/postgres")
	require.Contains(t, out, "is unreachable and CI=true")

	out, err = child("")
	require.NoError(t, err, "without CI=true the test is skipped:\n%s", out)
	require.Contains(t, out, "--- SKIP: TestNewDatabaseIsIsolated")
	require.Contains(t, out, "under CI=true this fails")
}
