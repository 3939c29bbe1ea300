package apply

import (
	"context"
	"errors"
	"log/slog"

	"github.com/gapless-dev/gapless/execute"
	"github.com/gapless-dev/gapless/internal/logkey"
	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/state"
)

// Stage is one stage of an apply, as recorded in the plan's application
// history. The stages run in the order of Stages.
type Stage string

// The stages of an apply.
const (
	StageRecordSnapshots Stage = "record_snapshots"
	// StageCheck refuses a stale plan (see StaleError) before it creates
	// a table or computes a batch.
	StageCheck        Stage = "check"
	StageCreateTables Stage = "create_tables"
	StageBackfill     Stage = "backfill"
	StagePromote      Stage = "promote"
	// StageCatchUp is recorded within the promote stage, once per catch-up
	// round that computed something (policy catch-up).
	StageCatchUp Stage = "catch_up"
	// StageLock is recorded within the promote stage when the lock policy
	// has taken its leases.
	StageLock        Stage = "lock"
	StageUpdateViews Stage = "update_views"
	StageFinalize    Stage = "finalize"
)

// Stages lists every stage in the order an apply runs them.
var Stages = []Stage{StageRecordSnapshots, StageCheck, StageCreateTables, StageBackfill, StagePromote, StageUpdateViews, StageFinalize}

// Application statuses recorded per stage.
const (
	StatusStarted  = "started"
	StatusFinished = "finished"
	StatusFailed   = "failed"
	// StatusRestateCleared marks, within the backfill stage, that the
	// restated ranges were cleared once; a resumed apply does not clear
	// them again (that would redo completed batches).
	StatusRestateCleared = "restate_cleared"
	// StatusEnded follows the failure of the stage that refused the plan
	// (a stale plan, a promotion the check or the policy refused, a plan
	// superseded before its views were updated): this application is over
	// and built nothing more. Applying the plan again starts a new
	// application, recorded after it. See Refused.
	StatusEnded = "ended"
)

// The messages an apply logs for its events (StageFailed and ModelFailed
// have more than one). Tests and tools that read the log match these, not
// copies of the text.
const (
	MsgStageStarted          = "stage started"
	MsgStageFinished         = "stage finished"
	MsgStageInterrupted      = "stage interrupted"
	MsgStageFailedReplanning = "stage failed; the replan policy applies a fresh plan"
	MsgStageFailed           = "stage failed"
	MsgBackfillStarted       = "backfill started"
	MsgBatchCommitted        = "batch committed"
	MsgBackfillFinished      = "backfill finished"
	MsgBackfillFailed        = "backfill failed"
	MsgBackfillStopped       = "backfill stopped"
	MsgPromotionAccepted     = "promotion accepted"
	MsgPromotionRejected     = "promotion rejected"
	MsgSourceStandIn         = "source not landed yet: empty view made in its place"
)

// Event is one thing an apply reports. The set is closed (the types below,
// and only they, implement it): one event drives progress output, logs and
// tests alike.
type Event interface {
	isEvent()
	log(ctx context.Context, l *slog.Logger)
}

// StageStarted: a stage began.
type StageStarted struct {
	Stage Stage
}

// StageFinished: a stage completed.
type StageFinished struct {
	Stage Stage
}

// StageFailed: a stage failed with Err; the apply stops.
type StageFailed struct {
	Stage Stage
	Err   error
	// Replanning: the replan policy acts on this failure (the scheduler
	// advanced the incumbent) by applying a fresh plan, so it is logged as
	// a warning; whether the apply fails is decided by what follows.
	Replanning bool
}

// SourceStandInMade: a source the plan's models read had no table yet (it
// has not landed), so an empty view of its declared columns was made under
// its name (see the create-tables stage).
type SourceStandInMade struct {
	Source string
}

// ModelStarted: a model's backfill began, for Ranges (or Whole).
type ModelStarted struct {
	Model, Version string
	Ranges         interval.Set
	Whole          bool
}

// BatchCommitted: one batch committed and was recorded.
type BatchCommitted struct {
	Batch execute.Batch
}

// ModelFinished: a model's backfill completed. Skipped is what an earlier
// attempt (or another plan sharing the version) had already computed.
type ModelFinished struct {
	Model, Version string
	Batches        int
	Rows           int64
	Skipped        interval.Set
}

// ModelFailed: a model's backfill ended with Err before it completed. Its
// batches that committed before are recorded. Err wraps execute.ErrStopped
// when the model stopped because another model failed first.
type ModelFailed struct {
	Model, Version string
	Err            error
}

// PromotionAccepted: the environment now serves the plan at Generation,
// under Policy, with Debts the accepted gaps (trailing-gap).
type PromotionAccepted struct {
	Environment string
	Generation  int64
	Policy      string
	Debts       []state.Debt
}

// PromotionRejected: the promotion did not happen; Err says why (a
// *promotion.Error, or state.ErrConflictingPlan).
type PromotionRejected struct {
	Environment string
	Err         error
}

func (StageStarted) isEvent()      {}
func (StageFinished) isEvent()     {}
func (StageFailed) isEvent()       {}
func (ModelStarted) isEvent()      {}
func (SourceStandInMade) isEvent() {}
func (BatchCommitted) isEvent()    {}
func (ModelFinished) isEvent()     {}
func (ModelFailed) isEvent()       {}
func (PromotionAccepted) isEvent() {}
func (PromotionRejected) isEvent() {}

func (e StageStarted) log(ctx context.Context, l *slog.Logger) {
	l.InfoContext(ctx, MsgStageStarted, slog.String(logkey.Stage, string(e.Stage)))
}

func (e StageFinished) log(ctx context.Context, l *slog.Logger) {
	l.InfoContext(ctx, MsgStageFinished, slog.String(logkey.Stage, string(e.Stage)))
}

func (e StageFailed) log(ctx context.Context, l *slog.Logger) {
	if errors.Is(e.Err, context.Canceled) || errors.Is(e.Err, context.DeadlineExceeded) {
		// Interrupted (Ctrl-C, SIGTERM): not a failure to report with its
		// SQL; the command says what was kept and how to resume.
		l.InfoContext(ctx, MsgStageInterrupted, slog.String(logkey.Stage, string(e.Stage)), slog.String(logkey.Error, e.Err.Error()))
		return
	}
	if e.Replanning {
		l.WarnContext(ctx, MsgStageFailedReplanning, slog.String(logkey.Stage, string(e.Stage)), slog.Any(logkey.Error, e.Err))
		return
	}
	// The failure is returned to Apply's caller, which reports it (the
	// command line prints it as its one error message); the record is for
	// the log's history, so it does not say the same thing twice at the
	// default level.
	l.InfoContext(ctx, MsgStageFailed, slog.String(logkey.Stage, string(e.Stage)), slog.Any(logkey.Error, e.Err))
}

func (e SourceStandInMade) log(ctx context.Context, l *slog.Logger) {
	l.InfoContext(ctx, MsgSourceStandIn, slog.String(logkey.Model, e.Source))
}

func (e ModelStarted) log(ctx context.Context, l *slog.Logger) {
	l.InfoContext(ctx, MsgBackfillStarted, slog.String(logkey.Model, e.Model), slog.String(logkey.Version, e.Version),
		slog.String(logkey.Interval, e.Ranges.String()), slog.Bool(logkey.Whole, e.Whole))
}

func (e BatchCommitted) log(ctx context.Context, l *slog.Logger) {
	l.DebugContext(ctx, MsgBatchCommitted, slog.String(logkey.Model, e.Batch.Model), slog.String(logkey.Version, e.Batch.Version),
		slog.String(logkey.Interval, e.Batch.Interval.String()), slog.Int64(logkey.Rows, e.Batch.Rows))
}

func (e ModelFinished) log(ctx context.Context, l *slog.Logger) {
	l.InfoContext(ctx, MsgBackfillFinished, slog.String(logkey.Model, e.Model), slog.String(logkey.Version, e.Version),
		slog.Int(logkey.Batches, e.Batches), slog.Int64(logkey.Rows, e.Rows), slog.String(logkey.Skipped, e.Skipped.String()))
}

func (e ModelFailed) log(ctx context.Context, l *slog.Logger) {
	msg := MsgBackfillFailed
	if errors.Is(e.Err, execute.ErrStopped) {
		msg = MsgBackfillStopped
	}
	// The apply's error is returned to its caller, which reports it.
	l.InfoContext(ctx, msg, slog.String(logkey.Model, e.Model), slog.String(logkey.Version, e.Version), slog.Any(logkey.Error, e.Err))
}

// The apply's logger carries the environment (and the plan), so the
// promotion's records do not repeat it.
func (e PromotionAccepted) log(ctx context.Context, l *slog.Logger) {
	l.InfoContext(ctx, MsgPromotionAccepted, slog.Int64(logkey.Generation, e.Generation),
		slog.String(logkey.Policy, e.Policy), slog.Int(logkey.Debts, len(e.Debts)))
}

func (e PromotionRejected) log(ctx context.Context, l *slog.Logger) {
	// Returned to the caller as a *promotion.Error too, which reports it.
	l.InfoContext(ctx, MsgPromotionRejected, slog.Any(logkey.Error, e.Err))
}
