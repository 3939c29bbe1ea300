// Package multiproc holds gapless's multi-process tests: the real binary,
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
	"path/filepath"
	"testing"

	"go.uber.org/goleak"
)

// binary is the gapless command built once for the package; "" when the
// build failed (buildErr says why).
var (
	binary   string
	buildErr error
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "gapless-multiproc-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "gapless")
	out, err := exec.Command("go", "build", "-o", binary, "../cmd/gapless").CombinedOutput()
	if err != nil {
		binary, buildErr = "", fmt.Errorf("go build: %w: %s", err, out)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// requireBinary returns the built gapless binary or fails the test.
func requireBinary(t *testing.T) string {
	t.Helper()
	if binary == "" {
		t.Fatalf("the gapless binary was not built: %v", buildErr)
	}
	return binary
}
