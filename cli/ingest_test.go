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

// Scenario: the scheduler daemon lands the sources before its runs. After
// a deploy, a file lands; `scheduler --once --ingest=false` leaves it (the
// source serves nothing, the model reading it computes nothing); then
// `scheduler --once` ingests it, prints the source's line, and its run
// computes the model up to the watermark the pass published (hours 00,
// 01, 02 of a watermark at 03:20), in the same process.
func TestSchedulerIngestsBeforeItsRun(t *testing.T) {
	t.Parallel()
	dir := initProject(t)
	addSource(t, dir)
	mustRun(t, dir, "plan", "--auto-apply", "--execution-time", t0)
	landing := filepath.Join(dir, "landing", "events")
	require.NoError(t, os.MkdirAll(landing, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(landing, "a.csv"), []byte("id,ts,amount\n1,2024-01-01 00:10:00,1.5\n2,2024-01-01 01:10:00,2\n3,2024-01-01 02:10:00,3\n4,2024-01-01 03:30:00,4\n"), 0o644))

	out := mustRun(t, dir, "scheduler", "--once", "--ingest=false", "--execution-time", t1)
	require.NotContains(t, out, "raw.events")
	require.Equal(t, float64(0), count(t, dir, "raw.events"))
	require.Equal(t, float64(0), count(t, dir, "demo.raw_hourly"))

	out = mustRun(t, dir, "scheduler", "--once", "--execution-time", t1)
	require.Contains(t, out, "raw.events: 1 staged, 0 applied, generation 1 swapped in, complete through 2024-01-01T03:20:00Z\nprod: generation 1, ")
	require.Equal(t, float64(4), count(t, dir, "raw.events"))
	require.Equal(t, float64(3), count(t, dir, "demo.raw_hourly"))
}
