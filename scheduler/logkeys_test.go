package scheduler_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/execute"
	"github.com/gapless-dev/gapless/execute/executetest"
	"github.com/gapless-dev/gapless/internal/logkey"
	"github.com/gapless-dev/gapless/scheduler"
)

// Scenario: a daemon logs with a JSON handler at debug level: a tick
// computes the due hour of parent and child; then Run starts, ticks at
// once (nothing due), waits for its ticker, and stops on its context. Every record passes
// logkey.CheckRecord (each key in logkey.All or slog's own, once), the
// daemon's, run's and execute's alike.
func TestLogKeys(t *testing.T) {
	t.Parallel()
	b := executetest.Setup(t, false, pair())
	deploy(t, b, "p1", at(2024, 1, 1, 10))
	clk := clockwork.NewFakeClockAt(at(2024, 1, 1, 11).Add(30 * time.Minute))
	d := newDaemon(t, b, "d1", clk, nil, func(p *scheduler.Params, d *daemon) {
		p.Logger = slog.New(slog.NewJSONHandler(d.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	res, err := d.Tick(b.Ctx)
	require.NoError(t, err)
	require.Equal(t, 2, res.Envs[0].Ran)
	ctx, cancel := context.WithCancel(b.Ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	require.NoError(t, clk.BlockUntilContext(b.Ctx, 1), "the first tick is done; Run waits for its ticker")
	cancel()
	require.NoError(t, <-done)

	var msgs []string
	for _, line := range strings.Split(strings.TrimSpace(d.logs.String()), "\n") {
		require.NoError(t, logkey.CheckRecord([]byte(line)))
		var rec struct{ Msg string }
		require.NoError(t, json.Unmarshal([]byte(line), &rec))
		msgs = append(msgs, rec.Msg)
	}
	for _, m := range []string{scheduler.MsgStarted, execute.MsgBatchStarted, execute.MsgBatchCommitted, scheduler.MsgTick, scheduler.MsgStopped} {
		require.Contains(t, msgs, m)
	}
}
