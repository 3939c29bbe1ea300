package run

import (
	"context"
	"log/slog"
	"time"

	"github.com/gapless-dev/gapless/internal/logkey"
)

// The messages a run logs, one per event (CircuitBroken has two). Tests and
// tools that read the log match these, not copies of the text.
const (
	MsgModelBlocked       = "not run: an upstream model failed"
	MsgGenerationChanged  = "circuit breaker: generation changed, stopping"
	MsgWriteFenced        = "circuit breaker: write fenced, stopping"
	MsgModelDeferred      = "deferred: the version is leased"
	MsgLeaseReleaseFailed = "releasing a version lease"
)

// Event is one thing a run reports in its log. The set is closed (the types
// below, and only they, implement it), and each event logs itself. The
// run's logger carries the environment, its generation and plan, so the
// events do not repeat them.
type Event interface {
	isEvent()
	log(ctx context.Context, l *slog.Logger)
}

// ModelBlocked: Model did not run because Failed, upstream of it, failed.
type ModelBlocked struct {
	Model, Failed string
}

// CircuitBroken: the run stopped before Model because the environment's
// generation is now Current (0: removed or invalidated); Fenced says a
// fenced interval write found out, rather than the re-read before the
// model.
type CircuitBroken struct {
	Model   string
	Current int64
	Fenced  bool
}

// ModelDeferred: Model's due work (Interval) was deferred because Holder
// leases its version, until Until at the latest.
type ModelDeferred struct {
	Model, Version string
	Holder         string
	Until          time.Time
	Interval       string
}

// LeaseReleaseFailed: releasing Model's version lease after its work
// failed with Err (the lease then expires on its own).
type LeaseReleaseFailed struct {
	Model string
	Err   error
}

func (ModelBlocked) isEvent()       {}
func (CircuitBroken) isEvent()      {}
func (ModelDeferred) isEvent()      {}
func (LeaseReleaseFailed) isEvent() {}

func (e ModelBlocked) log(ctx context.Context, l *slog.Logger) {
	l.WarnContext(ctx, MsgModelBlocked, slog.String(logkey.Model, e.Model), slog.String(logkey.Failed, e.Failed))
}

func (e CircuitBroken) log(ctx context.Context, l *slog.Logger) {
	msg := MsgGenerationChanged
	if e.Fenced {
		msg = MsgWriteFenced
	}
	l.WarnContext(ctx, msg, slog.String(logkey.Model, e.Model), slog.Int64(logkey.CurrentGeneration, e.Current))
}

func (e ModelDeferred) log(ctx context.Context, l *slog.Logger) {
	l.InfoContext(ctx, MsgModelDeferred, slog.String(logkey.Model, e.Model), slog.String(logkey.Version, e.Version),
		slog.String(logkey.Holder, e.Holder), slog.Time(logkey.Until, e.Until), slog.String(logkey.Interval, e.Interval))
}

func (e LeaseReleaseFailed) log(ctx context.Context, l *slog.Logger) {
	l.WarnContext(ctx, MsgLeaseReleaseFailed, slog.String(logkey.Model, e.Model), slog.Any(logkey.Error, e.Err))
}
