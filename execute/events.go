package execute

import (
	"context"
	"log/slog"

	"github.com/gapless-dev/gapless/internal/logkey"
	"github.com/gapless-dev/gapless/warehouse"
)

// The messages an Executor logs, one per event (BatchEnded and
// WriteFenced have two each). Tests and tools that read the log match these,
// not copies of the text.
const (
	MsgTableCreated         = "created physical table"
	MsgBatchesInOrder       = "batches run in order: the version is served"
	MsgConcurrencyIgnored   = "batch_concurrency ignored: the model reads itself, so its batches run in order"
	MsgBatchStarted         = "batch started"
	MsgBatchInterrupted     = "batch interrupted"
	MsgBatchFailed          = "batch failed"
	MsgBuildInterrupted     = "build interrupted"
	MsgBuildFailed          = "build failed"
	MsgBatchFencedBeforeRun = "batch fenced before it started"
	MsgIntervalWriteFenced  = "interval write fenced"
	MsgBatchCommitted       = "batch committed"
)

// Event is one thing an Executor reports in its log. The set is closed (the
// types below, and only they, implement it), and each event logs itself, so
// one record has one shape wherever it is written.
type Event interface {
	isEvent()
	log(ctx context.Context, l *slog.Logger)
}

// TableCreated: the physical table (or view) of a version was created.
type TableCreated struct {
	Model, Version string
	Table          warehouse.Table
}

// BatchesInOrder: a model asked for batch_concurrency, but its batches run
// one after another, because the version is served (ReadsItself false) or
// because the model reads itself (ReadsItself true, a warning).
type BatchesInOrder struct {
	Model, Version string
	ReadsItself    bool
}

// BatchStarted: a batch (or a whole build, over its WholeRange) began.
type BatchStarted struct {
	Model, Version string
	Interval       string
}

// BatchEnded: a batch (or, Whole, a whole build) failed with Err before it
// committed; Interrupted says its context ended (Ctrl-C, SIGTERM, a
// timeout), which is not a failure to report with its SQL.
type BatchEnded struct {
	Model, Version string
	Interval       string
	Whole          bool
	Interrupted    bool
	Err            error
}

// WriteFenced: a fence refused the batch, before it started (BeforeStart)
// or when its interval was to be recorded.
type WriteFenced struct {
	Model, Version string
	Interval       string
	BeforeStart    bool
}

// BatchCommitted: a batch committed and was recorded.
type BatchCommitted struct {
	Batch Batch
}

func (TableCreated) isEvent()   {}
func (BatchesInOrder) isEvent() {}
func (BatchStarted) isEvent()   {}
func (BatchEnded) isEvent()     {}
func (WriteFenced) isEvent()    {}
func (BatchCommitted) isEvent() {}

func (e TableCreated) log(ctx context.Context, l *slog.Logger) {
	l.InfoContext(ctx, MsgTableCreated, slog.String(logkey.Model, e.Model), slog.String(logkey.Version, e.Version),
		slog.String(logkey.Table, e.Table.String()))
}

func (e BatchesInOrder) log(ctx context.Context, l *slog.Logger) {
	if e.ReadsItself {
		l.WarnContext(ctx, MsgConcurrencyIgnored, slog.String(logkey.Model, e.Model), slog.String(logkey.Version, e.Version))
		return
	}
	l.DebugContext(ctx, MsgBatchesInOrder, slog.String(logkey.Model, e.Model), slog.String(logkey.Version, e.Version))
}

func (e BatchStarted) log(ctx context.Context, l *slog.Logger) {
	l.DebugContext(ctx, MsgBatchStarted, slog.String(logkey.Model, e.Model), slog.String(logkey.Version, e.Version),
		slog.String(logkey.Interval, e.Interval))
}

func (e BatchEnded) log(ctx context.Context, l *slog.Logger) {
	attrs := []any{slog.String(logkey.Model, e.Model), slog.String(logkey.Version, e.Version)}
	if !e.Whole {
		attrs = append(attrs, slog.String(logkey.Interval, e.Interval))
	}
	switch {
	case e.Interrupted && e.Whole:
		l.InfoContext(ctx, MsgBuildInterrupted, attrs...)
	case e.Interrupted:
		l.InfoContext(ctx, MsgBatchInterrupted, attrs...)
	case e.Whole:
		l.ErrorContext(ctx, MsgBuildFailed, append(attrs, slog.Any(logkey.Error, e.Err))...)
	default:
		l.ErrorContext(ctx, MsgBatchFailed, append(attrs, slog.Any(logkey.Error, e.Err))...)
	}
}

func (e WriteFenced) log(ctx context.Context, l *slog.Logger) {
	msg := MsgIntervalWriteFenced
	if e.BeforeStart {
		msg = MsgBatchFencedBeforeRun
	}
	l.WarnContext(ctx, msg, slog.String(logkey.Model, e.Model), slog.String(logkey.Version, e.Version),
		slog.String(logkey.Interval, e.Interval))
}

func (e BatchCommitted) log(ctx context.Context, l *slog.Logger) {
	b := e.Batch
	l.InfoContext(ctx, MsgBatchCommitted, slog.String(logkey.Model, b.Model), slog.String(logkey.Version, b.Version),
		slog.String(logkey.Interval, b.Interval.String()), slog.Int64(logkey.Rows, b.Rows),
		slog.Int64(logkey.DurationMS, b.Duration.Milliseconds()))
}

// emit logs e with the executor's logger.
func (x *Executor) emit(ctx context.Context, e Event) { e.log(ctx, x.logger()) }
