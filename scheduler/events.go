package scheduler

import (
	"context"
	"log/slog"
	"time"

	"github.com/gapless-dev/gapless/ingest"
	"github.com/gapless-dev/gapless/internal/logkey"
)

// The messages the scheduler daemon logs, one per event (Ticked logs
// MsgTick at info, or at error when the environment's tick failed). Tests
// and tools that read the log match these, not copies of the text.
const (
	MsgStarted           = "scheduler started"
	MsgStopped           = "scheduler stopped"
	MsgServing           = "serving /healthz and /metrics"
	MsgHealthWriteFailed = "writing /healthz"
	MsgStopRequested     = "stop requested: no new models; the batch in flight may finish"
	MsgGraceOver         = "grace period over: cancelling the batch in flight (it rolls back and records nothing)"
	MsgEngineCloseFailed = "closing the warehouse after the tick"
	MsgPromotionFollowed = "the environment was promoted during the run: following the new generation"
	MsgModelFailed       = "a model failed; running the others without it"
	MsgEnvironmentAbsent = "scheduler tick: the environment does not exist (or is invalidated); nothing to do"
	MsgTick              = "scheduler tick"
	MsgModelUnscheduled  = "model has no valid schedule; the scheduler skips it"
	MsgIngestFailed      = "the tick's ingest pass failed; the runs go on, the next tick retries"
	MsgSourceIngested    = "scheduler ingest"
)

// Event is one thing the scheduler daemon reports in its log. The set is
// closed (the types below, and only they, implement it), and each event
// logs itself. The records of the runs it starts are run's and execute's
// events.
type Event interface {
	isEvent()
	log(ctx context.Context, l *slog.Logger)
}

// Started: Run began, for Environments, ticking every Tick plus up to
// Jitter, as Owner (process PID on Host).
type Started struct {
	Environments []string
	Tick, Jitter time.Duration
	Owner, Host  string
	PID          int
}

// Stopped: Run returned after its context ended.
type Stopped struct{}

// Serving: the health and metrics endpoints listen on Addr.
type Serving struct{ Addr string }

// HealthWriteFailed: writing a /healthz answer failed with Err.
type HealthWriteFailed struct{ Err error }

// StopRequested: a stop was asked for; the batch in flight has Grace to
// finish.
type StopRequested struct{ Grace time.Duration }

// GraceOver: the grace period ended; the batch in flight is cancelled.
type GraceOver struct{}

// EngineCloseFailed: closing the tick's warehouse failed with Err.
type EngineCloseFailed struct{ Err error }

// PromotionFollowed: Environment was promoted while a run worked on
// generation From (Reason is the run's stop); the tick runs the new
// generation.
type PromotionFollowed struct {
	Environment string
	From        int64
	Reason      error
}

// ModelFailed: Model of Environment failed with Err; the tick runs the
// others without it.
type ModelFailed struct {
	Environment, Model string
	Err                error
}

// EnvironmentAbsent: Environment does not exist or is invalidated.
type EnvironmentAbsent struct{ Environment string }

// Ticked: one environment's tick ended, with Result.
type Ticked struct{ Result EnvResult }

// ModelUnscheduled: Model of Environment has no valid schedule (Err); the
// scheduler skips it.
type ModelUnscheduled struct {
	Environment, Model string
	Err                error
}

// IngestFailed: the tick's ingest pass failed as a whole (registering the
// sources, reading their metrics) with Err.
type IngestFailed struct{ Err error }

// SourceIngested: the tick's ingest pass landed one source, with Report.
// It is logged only when the pass staged, applied or built something, or
// deferred a build (a source's failure is logged by the pass itself).
type SourceIngested struct{ Report ingest.SourceReport }

func (IngestFailed) isEvent()      {}
func (SourceIngested) isEvent()    {}
func (Started) isEvent()           {}
func (Stopped) isEvent()           {}
func (Serving) isEvent()           {}
func (HealthWriteFailed) isEvent() {}
func (StopRequested) isEvent()     {}
func (GraceOver) isEvent()         {}
func (EngineCloseFailed) isEvent() {}
func (PromotionFollowed) isEvent() {}
func (ModelFailed) isEvent()       {}
func (EnvironmentAbsent) isEvent() {}
func (Ticked) isEvent()            {}
func (ModelUnscheduled) isEvent()  {}

func (e Started) log(ctx context.Context, l *slog.Logger) {
	l.InfoContext(ctx, MsgStarted, slog.Any(logkey.Environments, e.Environments), slog.Int64(logkey.TickMS, e.Tick.Milliseconds()),
		slog.Int64(logkey.JitterMS, e.Jitter.Milliseconds()), slog.String(logkey.Owner, e.Owner),
		slog.String(logkey.Host, e.Host), slog.Int(logkey.PID, e.PID))
}

func (Stopped) log(ctx context.Context, l *slog.Logger) { l.InfoContext(ctx, MsgStopped) }

func (e Serving) log(ctx context.Context, l *slog.Logger) {
	l.InfoContext(ctx, MsgServing, slog.String(logkey.Addr, e.Addr))
}

func (e HealthWriteFailed) log(ctx context.Context, l *slog.Logger) {
	l.WarnContext(ctx, MsgHealthWriteFailed, slog.Any(logkey.Error, e.Err))
}

func (e StopRequested) log(ctx context.Context, l *slog.Logger) {
	l.InfoContext(ctx, MsgStopRequested, slog.Int64(logkey.GraceMS, e.Grace.Milliseconds()))
}

func (GraceOver) log(ctx context.Context, l *slog.Logger) { l.WarnContext(ctx, MsgGraceOver) }

func (e EngineCloseFailed) log(ctx context.Context, l *slog.Logger) {
	l.WarnContext(ctx, MsgEngineCloseFailed, slog.Any(logkey.Error, e.Err))
}

func (e PromotionFollowed) log(ctx context.Context, l *slog.Logger) {
	l.InfoContext(ctx, MsgPromotionFollowed, slog.String(logkey.Environment, e.Environment),
		slog.Int64(logkey.FromGeneration, e.From), slog.Any(logkey.Reason, e.Reason))
}

func (e ModelFailed) log(ctx context.Context, l *slog.Logger) {
	l.ErrorContext(ctx, MsgModelFailed, slog.String(logkey.Environment, e.Environment),
		slog.String(logkey.Model, e.Model), slog.Any(logkey.Error, e.Err))
}

func (e EnvironmentAbsent) log(ctx context.Context, l *slog.Logger) {
	l.WarnContext(ctx, MsgEnvironmentAbsent, slog.String(logkey.Environment, e.Environment))
}

func (e Ticked) log(ctx context.Context, l *slog.Logger) {
	er := e.Result
	attrs := []any{
		slog.String(logkey.Environment, er.Env), slog.Int64(logkey.Generation, er.Generation),
		slog.Int(logkey.DueModels, len(er.Due)), slog.Int(logkey.RanModels, er.Ran),
		slog.Int(logkey.Intervals, er.Intervals), slog.Int(logkey.Deferred, len(er.Deferred)),
		slog.Int64(logkey.DurationMS, er.Duration.Milliseconds()), slog.Float64(logkey.LagSeconds, er.Lag.Seconds()),
	}
	if er.Followed > 0 {
		attrs = append(attrs, slog.Int(logkey.FollowedPromotions, er.Followed))
	}
	if len(er.Deferred) > 0 {
		attrs = append(attrs, slog.Any(logkey.DeferredModels, er.Deferred))
	}
	if er.Err != nil {
		l.ErrorContext(ctx, MsgTick, append(attrs, slog.Any(logkey.Error, er.Err))...)
		return
	}
	l.InfoContext(ctx, MsgTick, attrs...)
}

func (e ModelUnscheduled) log(ctx context.Context, l *slog.Logger) {
	l.WarnContext(ctx, MsgModelUnscheduled, slog.String(logkey.Environment, e.Environment),
		slog.String(logkey.Model, e.Model), slog.Any(logkey.Error, e.Err))
}

func (e IngestFailed) log(ctx context.Context, l *slog.Logger) {
	l.ErrorContext(ctx, MsgIngestFailed, slog.Any(logkey.Error, e.Err))
}

func (e SourceIngested) log(ctx context.Context, l *slog.Logger) {
	r := e.Report
	if r.Staged == 0 && r.Applied == 0 && r.Built == 0 && r.Deferred == "" {
		return
	}
	attrs := []any{slog.String(logkey.Model, r.Source), slog.Int(logkey.Staged, r.Staged), slog.Int(logkey.Batches, r.Applied)}
	if r.Built != 0 {
		attrs = append(attrs, slog.Int64(logkey.Generation, r.Built))
	}
	if r.Deferred != "" {
		attrs = append(attrs, slog.String(logkey.Reason, r.Deferred))
	}
	if !r.Watermark.IsZero() {
		attrs = append(attrs, slog.Time(logkey.Watermark, r.Watermark))
	}
	l.InfoContext(ctx, MsgSourceIngested, attrs...)
}

// emit logs e with the scheduler's logger.
func (s *Scheduler) emit(e Event) { e.log(context.Background(), s.log) }
