package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/scheduler"
)

// Scenario: prod is deployed at t0. `scheduler --once` at t1 runs the five
// hours due since, like `run`, and reports them; a second --once at t1
// finds nothing due and says it never opened the warehouse.
func TestSchedulerOnce(t *testing.T) {
	t.Parallel()
	dir := initProject(t)
	mustRun(t, dir, "plan", "--auto-apply", "--execution-time", t0)

	out := mustRun(t, dir, "scheduler", "--once", "--execution-time", t1)
	require.Contains(t, out, "prod: generation 1, ")
	require.NotContains(t, out, "Nothing was due")
	st := statusOf(t, dir, "--execution-time", t1)
	require.Equal(t, []string{"[2024-01-01T00:00:00Z, 2024-01-02T05:00:00Z)"}, st["demo.events"].Covered)
	require.Equal(t, float64(29*12), count(t, dir, "demo.events"))

	out = mustRun(t, dir, "scheduler", "--once", "--execution-time", t1)
	require.Contains(t, out, "prod: generation 1, 0 models due, 0 ran, 0 intervals")
	require.Contains(t, out, "Nothing was due: the warehouse was not opened.")

	out = mustRun(t, dir, "scheduler", "dev", "--once", "--execution-time", t1)
	require.Contains(t, out, "dev: does not exist")
}

// Scenario: mistakes in how the scheduler is called exit 2.
func TestSchedulerUsageErrors(t *testing.T) {
	t.Parallel()
	dir := initProject(t)
	for _, args := range [][]string{
		{"scheduler", "--execution-time", t1},
		{"scheduler", "Bad-Env", "--once"},
		{"scheduler", "--tick", "0s", "--once"},
	} {
		r := run(t, dir, args...)
		require.Equal(t, ExitUsage, r.code, "%v: %s", args, r.stderr)
	}
}

// Scenario: the real daemon process. Started with --listen on port 0, it
// ticks at once and serves /healthz; between ticks it does not hold the
// DuckDB file, so a query from another process proceeds without waiting;
// SIGTERM stops it cleanly with exit status 0.
func TestSchedulerDaemonProcess(t *testing.T) {
	t.Parallel()
	dir := initProject(t)
	// A recent start keeps the backfill at the real clock's now small.
	yaml := filepath.Join(dir, "gapless.yaml")
	cfg, err := os.ReadFile(yaml)
	require.NoError(t, err)
	start := time.Now().UTC().AddDate(0, 0, -1).Format("2006-01-02")
	require.NoError(t, os.WriteFile(yaml, bytes.Replace(cfg, []byte("'2024-01-01'"), []byte("'"+start+"'"), 1), 0o644))
	r := runBinary(t, dir, "plan", "--auto-apply", "--log-level", "warn")
	require.Equal(t, 0, r.code, r.stderr)

	cmd := binaryCommand(t, "scheduler", "--listen", "127.0.0.1:0", "--tick", "1h", "--log-format", "json")
	cmd.Dir = dir
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill() })

	records := make(chan map[string]any, 64)
	go func() {
		defer close(records)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			var rec map[string]any
			if json.Unmarshal(sc.Bytes(), &rec) == nil {
				records <- rec
			}
		}
	}()
	var addr string
	ticked := false
	deadline := time.After(60 * time.Second)
	for addr == "" || !ticked {
		select {
		case rec, ok := <-records:
			require.True(t, ok, "the daemon exited early")
			switch rec["msg"] {
			case scheduler.MsgServing:
				addr, _ = rec["addr"].(string)
			case scheduler.MsgTick:
				require.Equal(t, "prod", rec["environment"])
				require.NotContains(t, rec, "error")
				ticked = true
			}
		case <-deadline:
			t.Fatal("the daemon did not listen and tick within a minute")
		}
	}

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/healthz", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, string(body), `"ticks":1`)

	r = runBinary(t, dir, "query", "SELECT 1", "--lock-wait", "100ms")
	require.Equal(t, 0, r.code, "the idle daemon does not hold the warehouse file: %s", r.stderr)

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	for range records { // drain until the daemon closes stderr
	}
	require.NoError(t, cmd.Wait(), "a clean stop exits 0")
	require.True(t, strings.HasPrefix(stdout.String(), "Scheduler stopped after 1 ticks."), stdout.String())
}
