package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"
)

// Scenario: `gapless ingest raw.events` without --once is the ingest
// loop: its first pass lands the file waiting in the landing folder, then
// it waits for --interval; stopping it (SIGINT cancels the command's
// context) ends it between passes with exit 0, saying how many passes ran.
func TestIngestLoopRunsUntilStopped(t *testing.T) {
	t.Parallel()
	dir := initProject(t)
	addSource(t, dir)
	mustRun(t, dir, "plan", "--auto-apply", "--execution-time", t0)
	landing := filepath.Join(dir, "landing", "events")
	require.NoError(t, os.MkdirAll(landing, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(landing, "a.csv"), []byte("id,ts,amount\n1,2024-01-01 00:10:00,1.5\n2,2024-01-01 01:10:00,2\n"), 0o644))

	clk := clockwork.NewFakeClockAt(time.Date(2024, 3, 1, 10, 30, 0, 0, time.UTC))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var out, errb bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- Run(ctx, []string{"ingest", "raw.events", "--interval", "1m"}, Env{Stdout: &out, Stderr: &errb, Clock: clk,
			Getwd: func() (string, error) { return dir, nil }})
	}()
	require.NoError(t, clk.BlockUntilContext(t.Context(), 1), "the first pass is done: the loop waits for its ticker")
	cancel()
	require.Equal(t, ExitOK, <-done, "stderr: %s", errb.String())
	require.Equal(t, "raw.events: 1 staged, 0 applied, generation 1 swapped in, complete through 2024-01-01T01:00:00Z\n"+
		"Ingest stopped after 1 passes.\n", out.String())
	require.Equal(t, float64(2), count(t, dir, "raw.events"), "the loop closed the warehouse: another command opens it")
}
