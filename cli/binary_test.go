package cli

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// runBinary runs gapless as a process (binaryCommand) in dir and returns its exit code.
func runBinary(t *testing.T, dir string, args ...string) result {
	t.Helper()
	cmd := binaryCommand(t, args...)
	cmd.Dir = dir
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return result{code, out.String(), errb.String()}
}

// Scenario: the real process. init, plan --auto-apply, run and status exit
// 0; a usage mistake exits 2; a corrupt plan and a locked warehouse exit 1
// with one line and no stack trace.
func TestBinaryExitCodes(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	r := runBinary(t, tmp, "init", "proj")
	require.Equal(t, 0, r.code, r.stderr)
	dir := filepath.Join(tmp, "proj")

	r = runBinary(t, dir, "plan", "--auto-apply", "--log-level", "warn", "--execution-time", t0)
	require.Equal(t, 0, r.code, r.stderr)
	require.Empty(t, r.stderr, "stderr is a pipe: no progress bars, and no warnings")
	r = runBinary(t, dir, "run", "--execution-time", t1)
	require.Equal(t, 0, r.code, r.stderr)
	r = runBinary(t, filepath.Join(dir, "models"), "status", "--execution-time", t1)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "[2024-01-01 00:00, 2024-01-02 05:00)")

	r = runBinary(t, dir, "plan", "--no-such-flag")
	require.Equal(t, 2, r.code)
	require.Equal(t, "gapless: unknown flag: --no-such-flag\n", r.stderr)

	bad := filepath.Join(tmp, "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte("{not json"), 0o644))
	r = runBinary(t, dir, "apply", bad)
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "invalid plan file")
	require.Equal(t, 1, strings.Count(r.stderr, "\n"), r.stderr)

	startHolder(t, filepath.Join(dir, "warehouse.duckdb"))
	r = runBinary(t, dir, "query", "SELECT 1", "--lock-wait", "100ms")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "is in use by another process")
	require.NotContains(t, r.stderr, "goroutine")
}
