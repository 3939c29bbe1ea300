package bot

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"

	"github.com/jonboulle/clockwork"

	"github.com/gapless-dev/gapless/codehost"
	"github.com/gapless-dev/gapless/internal/logkey"
	"github.com/gapless-dev/gapless/queue"
	"github.com/gapless-dev/gapless/state"
)

// DefaultMaxWebhookBytes is the largest webhook body the intake reads:
// 5 MiB. GitHub caps payloads at 25 MB, but the events gapless acts on
// (pull_request, issue_comment, push) are a few kilobytes.
const DefaultMaxWebhookBytes = 5 << 20

// The events the intake accepts; every other event is answered 200 and
// ignored.
var acceptedEvents = map[string]bool{
	"pull_request": true, "issue_comment": true, "push": true, "check_run": true, "check_suite": true,
}

// Intake is the webhook endpoint (POST /webhook). It keeps these, in
// order, for every delivery:
//
//  1. a body over MaxBytes is refused with 413: unread when its
//     Content-Length says so, else read no further than the limit;
//  2. the body's X-Hub-Signature-256 must be the HMAC-SHA256 of the body
//     under Secret, compared in constant time: missing, malformed, wrong,
//     or only the SHA-1 X-Hub-Signature, it is refused with 401. Nothing of
//     an unverified delivery is parsed, recorded or enqueued;
//  3. X-GitHub-Delivery and X-GitHub-Event are required (400);
//  4. a repository off the allowlist is refused with 403;
//  5. the delivery id is recorded in the state store: a delivery seen
//     before (a replay, or GitHub's redelivery) is answered 200 and
//     enqueues nothing;
//  6. one job is enqueued and 202 answered at once; the work happens in
//     the job.
type Intake struct {
	Secret   []byte
	MaxBytes int64
	Allowed  func(repo string) bool
	Parse    func(event, deliveryID string, body []byte) (codehost.Event, error)
	Store    state.CodeHostStore
	Queue    queue.Enqueuer
	Clock    clockwork.Clock
	Log      *slog.Logger
	Metrics  *Metrics
}

// ServeHTTP handles one delivery.
func (in *Intake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	outcome, status, msg := in.handle(r.Context(), w, r)
	in.Metrics.Delivery(outcome)
	in.log().LogAttrs(r.Context(), levelOf(status), "webhook delivery",
		slog.String(logkey.Delivery, r.Header.Get("X-GitHub-Delivery")),
		slog.String(logkey.Event, r.Header.Get("X-GitHub-Event")),
		slog.String(logkey.Outcome, outcome), slog.Int(logkey.Status, status),
		slog.String(logkey.Reason, msg))
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, msg+"\n")
}

func (in *Intake) log() *slog.Logger {
	if in.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return in.Log
}

func levelOf(status int) slog.Level {
	switch {
	case status >= 500:
		return slog.LevelError
	case status >= 400:
		return slog.LevelWarn
	}
	return slog.LevelInfo
}

func (in *Intake) handle(ctx context.Context, w http.ResponseWriter, r *http.Request) (outcome string, status int, msg string) {
	max := in.MaxBytes
	if max <= 0 {
		max = DefaultMaxWebhookBytes
	}
	if r.ContentLength > max {
		// Declared too large: refused unread (the server discards a
		// little of it and closes the connection).
		return OutcomeTooLarge, http.StatusRequestEntityTooLarge, "payload too large"
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, max))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return OutcomeTooLarge, http.StatusRequestEntityTooLarge, "payload too large"
	case err != nil:
		return OutcomeBadRequest, http.StatusBadRequest, "could not read the body"
	}
	if err := codehost.VerifySignature(in.Secret, body, r.Header.Get(codehost.SignatureHeader)); err != nil {
		// The reason is safe to say: it never holds the secret or the body.
		return OutcomeInvalidSignature, http.StatusUnauthorized, err.Error()
	}
	id, event := r.Header.Get("X-GitHub-Delivery"), r.Header.Get("X-GitHub-Event")
	if id == "" || event == "" {
		return OutcomeBadRequest, http.StatusBadRequest, "X-GitHub-Delivery and X-GitHub-Event are required"
	}
	if event == "ping" {
		return OutcomeIgnored, http.StatusOK, "pong"
	}
	if !acceptedEvents[event] {
		return OutcomeIgnored, http.StatusOK, "event " + event + " is not one gapless acts on"
	}
	ev, err := in.Parse(event, id, body)
	if err != nil {
		return OutcomeBadRequest, http.StatusBadRequest, "the payload does not parse as a " + event + " event"
	}
	if ev.Repo == "" || !in.Allowed(ev.Repo) {
		return OutcomeRepoNotAllowed, http.StatusForbidden, "repository " + ev.Repo + " is not in github.repositories"
	}
	now := in.Clock.Now().UTC()
	fresh, err := in.Store.RecordDelivery(ctx, state.RecordDeliveryParams{ID: id, Event: event, Action: ev.Action, Repo: ev.Repo, Now: now})
	if err != nil {
		return OutcomeError, http.StatusServiceUnavailable, "could not record the delivery; retry it"
	}
	if !fresh {
		return OutcomeDuplicate, http.StatusOK, "delivery " + id + " was received before; nothing to do"
	}
	if _, err := in.Queue.Insert(ctx, DeliveryJob{Event: ev}, &queue.InsertOpts{Unique: true}); err != nil {
		// The delivery is answered as failed either way; the reconcile job
		// plans what it would have. A failure to record that is logged.
		if ferr := in.Store.FinishDelivery(ctx, state.FinishDeliveryParams{ID: id, Status: state.DeliveryFailed, Error: "enqueue: " + err.Error(), Now: now}); ferr != nil {
			in.log().Error("recording a delivery that could not be enqueued", logkey.Delivery, id, logkey.Error, ferr)
		}
		return OutcomeError, http.StatusServiceUnavailable, "could not enqueue the delivery"
	}
	return OutcomeAccepted, http.StatusAccepted, "accepted"
}
