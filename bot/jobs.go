package bot

import (
	"context"
	"fmt"
	"time"

	"github.com/gapless-dev/gapless/codehost"
	"github.com/gapless-dev/gapless/queue"
)

// The job kinds, a closed set. Each job's args hold only what makes it
// unique; what it acts on it reads from the store when it runs.
const (
	KindDelivery    = "gapless_delivery"
	KindPlanPR      = "gapless_plan_pr"
	KindRenderPR    = "gapless_render_pr"
	KindDeploy      = "gapless_deploy"
	KindReconcile   = "gapless_reconcile"
	KindSettle      = "gapless_settle"
	KindHoldComment = "gapless_hold_comment"
	KindSweep       = "gapless_sweep"
)

// Kinds lists every job kind.
var Kinds = []string{KindDelivery, KindPlanPR, KindRenderPR, KindDeploy, KindReconcile, KindSettle, KindHoldComment, KindSweep}

// DeliveryJob turns one verified webhook delivery into work. Unique by the
// delivery (its id is in the event).
type DeliveryJob struct {
	Event codehost.Event `json:"event"`
}

// Kind implements queue.Args.
func (DeliveryJob) Kind() string { return KindDelivery }

// PlanPRJob plans one pull request's head against the target as it was at
// Generation: its PR environment and its prod preview. Unique by all four,
// so several settles or deliveries at one generation plan a head once, and
// a job for an older head or generation finds itself superseded and does
// nothing.
type PlanPRJob struct {
	Repo       string `json:"repo"`
	Number     int    `json:"number"`
	HeadSHA    string `json:"head_sha"`
	Generation int64  `json:"generation"`
}

// Kind implements queue.Args.
func (PlanPRJob) Kind() string { return KindPlanPR }

// RenderPRJob brings a pull request's check runs and sticky comment on the
// code host up to what the store says now. Revision and Generation are the
// verdict's revision and the target's generation when it was enqueued, so
// every change gets its own job; Rearm distinguishes a reconcile's re-arm
// of a render whose job was discarded.
type RenderPRJob struct {
	Repo       string `json:"repo"`
	Number     int    `json:"number"`
	Revision   int64  `json:"revision"`
	Generation int64  `json:"generation"`
	Deploy     string `json:"deploy,omitempty"`
	Rearm      int64  `json:"rearm,omitempty"`
}

// Kind implements queue.Args.
func (RenderPRJob) Kind() string { return KindRenderPR }

// DeployJob runs one deploy attempt.
type DeployJob struct {
	AttemptID string `json:"attempt_id"`
}

// Kind implements queue.Args.
func (DeployJob) Kind() string { return KindDeploy }

// ReconcileJob lists the open pull requests of every allowed repository
// and plans or re-renders whatever the store does not have current: the
// backstop for a lost delivery (GitHub does not redeliver) or a discarded
// job. Round makes each period's job unique.
type ReconcileJob struct {
	Round int64 `json:"round"`
}

// Kind implements queue.Args.
func (ReconcileJob) Kind() string { return KindReconcile }

// The long jobs: a plan builds a PR environment (a backfill bounded by
// pr_start) under PlanTimeout; a deploy backfills prod for as long as it
// takes, fenced by its attempt's own lease, so its job has no timeout. A
// job whose process died is rescued (run again) after RescueAfter: a
// rescued plan plans again (its writes are compare-and-swaps), and a
// rescued deploy finds its attempt running and leaves it to its lease.
const (
	PlanMaxAttempts = 10
	PlanTimeout     = 30 * time.Minute
	RescueAfter     = time.Hour
)

// Register adds every job kind's worker to w.
func (b *Bot) Register(w *queue.Workers) {
	queue.AddWorker(w, func(ctx context.Context, j *queue.Job[DeliveryJob]) error {
		return b.handleEvent(b.asJob(ctx, KindDelivery, j.ID), j.Args.Event)
	}, queue.WorkerOptions{MaxAttempts: 10})
	queue.AddWorker(w, func(ctx context.Context, j *queue.Job[PlanPRJob]) error {
		return b.planPR(b.asJob(ctx, KindPlanPR, j.ID), j.Args)
	}, queue.WorkerOptions{MaxAttempts: PlanMaxAttempts, Timeout: PlanTimeout})
	queue.AddWorker(w, func(ctx context.Context, j *queue.Job[RenderPRJob]) error {
		return b.renderPR(b.asJob(ctx, KindRenderPR, j.ID), j.Args)
	}, queue.WorkerOptions{MaxAttempts: 25})
	queue.AddWorker(w, func(ctx context.Context, j *queue.Job[DeployJob]) error {
		return b.deploy(b.asJob(ctx, KindDeploy, j.ID), j.Args.AttemptID)
	}, queue.WorkerOptions{MaxAttempts: 5, Timeout: queue.NoTimeout})
	queue.AddWorker(w, func(ctx context.Context, j *queue.Job[ReconcileJob]) error {
		return b.Reconcile(b.asJob(ctx, KindReconcile, j.ID))
	}, queue.WorkerOptions{MaxAttempts: 3})
	queue.AddWorker(w, func(ctx context.Context, j *queue.Job[SettleJob]) error {
		return b.settle(b.asJob(ctx, KindSettle, j.ID), j.Args.AttemptID)
	}, queue.WorkerOptions{MaxAttempts: 25})
	queue.AddWorker(w, func(ctx context.Context, j *queue.Job[HoldCommentJob]) error {
		return b.holdComment(b.asJob(ctx, KindHoldComment, j.ID), j.Args)
	}, queue.WorkerOptions{MaxAttempts: 25})
	queue.AddWorker(w, func(ctx context.Context, j *queue.Job[SweepJob]) error {
		return b.Sweep(b.asJob(ctx, KindSweep, j.ID), j.Args.Round)
	}, queue.WorkerOptions{MaxAttempts: 3})
}

// enqueue inserts a unique job.
func (b *Bot) enqueue(ctx context.Context, args queue.Args) error {
	_, err := b.d.Queue.Insert(ctx, args, &queue.InsertOpts{Unique: true})
	return err
}

type jobKey struct{}

// asJob marks ctx as running job id of kind: claims it takes (a comment
// to post) are owned by the job, so the job's retry takes its own claim
// back while another job waits for it.
func (b *Bot) asJob(ctx context.Context, kind string, id int64) context.Context {
	return context.WithValue(ctx, jobKey{}, fmt.Sprintf("%s/%s/%d", b.d.Owner, kind, id))
}

// claimOwner is who claims in ctx: the job running, or the process.
func (b *Bot) claimOwner(ctx context.Context) string {
	if o, ok := ctx.Value(jobKey{}).(string); ok {
		return o
	}
	return b.d.Owner
}
