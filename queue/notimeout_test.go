package queue_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/queue"
)

type (
	boundedArgs   struct{}
	unboundedArgs struct{}
)

func (boundedArgs) Kind() string   { return "timeout_bounded" }
func (unboundedArgs) Kind() string { return "timeout_unbounded" }

// Scenario: a deploy's job runs as long as its backfill, fenced by a lease
// of its own; it is registered with NoTimeout and its context has no
// deadline, on River and inline, while a job of a kind without a Timeout
// runs under the queue's JobTimeout.
func TestNoTimeoutRunsWithoutADeadline(t *testing.T) {
	t.Parallel()
	deadlines := make(chan bool, 4)
	w := queue.NewWorkers()
	queue.AddWorker(w, func(ctx context.Context, _ *queue.Job[boundedArgs]) error {
		_, ok := ctx.Deadline()
		deadlines <- ok
		return nil
	}, queue.WorkerOptions{})
	queue.AddWorker(w, func(ctx context.Context, _ *queue.Job[unboundedArgs]) error {
		_, ok := ctx.Deadline()
		deadlines <- ok
		return nil
	}, queue.WorkerOptions{Timeout: queue.NoTimeout})

	cfg := sqliteConfig(t)
	cfg.Workers = w
	cfg.JobTimeout = time.Minute
	q, err := queue.Open(t.Context(), cfg)
	require.NoError(t, err)
	require.NoError(t, q.Start(t.Context()))
	t.Cleanup(func() { require.NoError(t, q.Stop(context.Background())) })
	_, err = q.Insert(t.Context(), boundedArgs{}, nil)
	require.NoError(t, err)
	require.True(t, <-deadlines, "River: a kind without a Timeout runs under JobTimeout")
	_, err = q.Insert(t.Context(), unboundedArgs{}, nil)
	require.NoError(t, err)
	require.False(t, <-deadlines, "River: NoTimeout has no deadline")

	in := queue.NewInline(w, slog.New(slog.DiscardHandler), nil)
	_, err = in.Insert(t.Context(), boundedArgs{}, nil)
	require.NoError(t, err)
	_, err = in.Insert(t.Context(), unboundedArgs{}, nil)
	require.NoError(t, err)
	require.NoError(t, in.Drain(t.Context()))
	require.True(t, <-deadlines, "inline: JobTimeout")
	require.False(t, <-deadlines, "inline: NoTimeout")

	require.Panics(t, func() {
		queue.AddWorker(queue.NewWorkers(), func(context.Context, *queue.Job[boundedArgs]) error { return nil }, queue.WorkerOptions{Timeout: -2})
	}, "a negative Timeout other than NoTimeout is a bug")
}
