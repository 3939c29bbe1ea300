package cli

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/gapless-dev/gapless/warehouse/duckdb"
)

// holdEnv, when set, turns this test binary into a process that holds the
// DuckDB file it names until its stdin closes: the "other process" of the
// locked-warehouse tests.
const holdEnv = "GAPLESS_CLI_TEST_HOLD"

// asBinaryEnv, when "1", turns this test binary into gapless itself: it
// runs Main, exactly what cmd/gapless runs, and exits with its code. The
// tests that need gapless as an OS process (exit codes, signals) start
// this binary so, instead of building cmd/gapless a second time.
const asBinaryEnv = "GAPLESS_TEST_AS_BINARY"

// binary is this test binary's path, to start it as gapless; "" when it
// is unknown (binaryErr says why).
var (
	binary    string
	binaryErr error
)

func TestMain(m *testing.M) {
	if path := os.Getenv(holdEnv); path != "" {
		os.Exit(hold(path))
	}
	if os.Getenv(asBinaryEnv) == "1" {
		os.Exit(Main())
	}
	binary, binaryErr = os.Executable()
	code := m.Run()
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
