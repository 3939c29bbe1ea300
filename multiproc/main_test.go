// Package multiproc holds gapless's multi-process tests: gapless (this
// package's test binary re-executed as cli.Main, what cmd/gapless runs)
// started as OS processes (scheduler daemons, deploys), sharing one
// PostgreSQL database as both state store and warehouse. They check what
// only separate processes can break: leases between daemons and deploys,
// a daemon or a deploy killed with SIGKILL, and the promotion policies
// racing live daemons.
//
// Every wait across processes is bounded and driven by a signal (a JSON log
// line of a process, or state polled with require.Eventually), never a fixed
// sleep. The package has only tests; it needs PostgreSQL (internal/pgtest:
// skipped when unreachable, failed under CI=true).
package multiproc

import (
	"fmt"
	"os"
	"os/exec"
	"testing"

	"go.uber.org/goleak"

	"github.com/gapless-dev/gapless/cli"
)

// asBinaryEnv, when "1", turns this test binary into gapless itself: it
// runs cli.Main, exactly what cmd/gapless runs, and exits with its code, so
// the tests start this binary as their gapless processes instead of
// building cmd/gapless a second time.
const asBinaryEnv = "GAPLESS_TEST_AS_BINARY"

// binary is this test binary's path, to start it as gapless; "" when it is
// unknown (binaryErr says why).
var (
	binary    string
	binaryErr error
)

func TestMain(m *testing.M) {
	if os.Getenv(asBinaryEnv) == "1" {
		os.Exit(cli.Main())
	}
	binary, binaryErr = os.Executable()
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// binaryCommand is the command that runs gapless with args as an OS
// process (this test binary as gapless), or fails the test; under -short
// it skips the test.
func binaryCommand(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	skipShort(t)
	if binary == "" {
		t.Fatalf("the path of the test binary, to run it as gapless, is unknown: %v", binaryErr)
	}
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), asBinaryEnv+"=1")
	return cmd
}

// skipShort skips t under -short (make test-short, the inner loop): it
// runs gapless as an OS process, which the full suite covers.
func skipShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: starts gapless as an OS process; make test runs it")
	}
}
