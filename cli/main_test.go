package cli

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/gapless-dev/gapless/warehouse/duckdb"
)

// holdEnv, when set, turns this test binary into a process that holds the
// DuckDB file it names until its stdin closes: the "other process" of the
// locked-warehouse tests.
const holdEnv = "GAPLESS_CLI_TEST_HOLD"

// binary is the gapless command built once for the tests that run it as a
// process; "" when the build failed (buildErr says why).
var (
	binary   string
	buildErr error
)

func TestMain(m *testing.M) {
	if path := os.Getenv(holdEnv); path != "" {
		os.Exit(hold(path))
	}
	dir, err := os.MkdirTemp("", "gapless-cli-test-")
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
	// Every command closes what it opened: no goroutine outlives the tests.
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

func hold(path string) int {
	e, err := duckdb.Open(context.Background(), path, duckdb.Options{LockWait: -1})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("ready")
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n') // until stdin closes
	_ = e.Close()
	return 0
}

// startHolder makes another process hold the DuckDB file at path until the
// test ends, or until release is called: release returns once the process
// has exited, so the file is free.
func startHolder(t *testing.T, path string) (release func()) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), holdEnv+"="+path)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	release = func() {
		once.Do(func() {
			_ = stdin.Close()
			_ = cmd.Wait()
		})
	}
	t.Cleanup(release)
	lines := bufio.NewScanner(stdout)
	if !lines.Scan() || lines.Text() != "ready" {
		t.Fatalf("the holder of %s did not start", path)
	}
	return release
}

// requireBinary returns the built gapless binary or fails the test.
func requireBinary(t *testing.T) string {
	t.Helper()
	if binary == "" {
		t.Fatalf("the gapless binary was not built: %v", buildErr)
	}
	return binary
}
