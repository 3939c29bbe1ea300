// Package deploygate is the merge gate's apply-start gate, shared by the
// pull-request bot's deploy runner and `gapless apply` / `plan --auto-apply`
// from a terminal: a deploy to a merge-gated environment first records its
// holds (state.GateStore.BeginDeploy), then waits, bounded, until they are
// rendered on the code host (or only recorded, in mode recorded), and only
// then may change the environment, under a lease that every promotion
// names (state.PromoteParams.Gate).
//
// The invariant it keeps (design invariant 4): nothing is backfilled or
// promoted on a gated environment before the gate opened; a gate that did
// not open within the wait ends the attempt failed, naming each pull
// request whose hold is not rendered and why, and releases its holds.
package deploygate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/gapless-dev/gapless/internal/logkey"
	"github.com/gapless-dev/gapless/state"
)

// Defaults of Params.
const (
	DefaultWait = 2 * time.Minute
	DefaultPoll = time.Second
	DefaultTTL  = time.Minute
)

// Params configure a gate.
type Params struct {
	Store state.Store
	// Clock times the wait, the store polls and the lease; nil is the real
	// clock.
	Clock clockwork.Clock
	Log   *slog.Logger
	// Owner names the process holding the attempt's lease (user@host).
	Owner string
	// TTL is the attempt's lease, renewed at a third of it while the
	// apply runs (DefaultTTL).
	TTL time.Duration
	// Wait bounds how long Open waits for the holds (DefaultWait).
	Wait time.Duration
	// Poll is how often Open re-reads the attempt (DefaultPoll); Kick,
	// when set, wakes it at once (a render in the same process).
	Poll time.Duration
	Kick *Notifier
	// Settle, when set, is what Finish does after the attempt ended (the
	// bot enqueues its settle job, which re-plans the released pull
	// requests); nil settles in place (state.GateStore.SettleDeploy), for
	// `gapless apply`, whose released verdicts `gapless serve` re-plans.
	Settle func(ctx context.Context, a state.DeployAttempt) error
	// OnWait, when set, is called each time Open waits for the holds,
	// once its poll timer is set (a test seam: advancing the clock there
	// brings the poll due).
	OnWait func(ctx context.Context, a state.DeployAttempt)
}

func (p *Params) defaults() {
	if p.Clock == nil {
		p.Clock = clockwork.NewRealClock()
	}
	if p.Log == nil {
		p.Log = slog.New(slog.DiscardHandler)
	}
	if p.TTL <= 0 {
		p.TTL = DefaultTTL
	}
	if p.Wait <= 0 {
		p.Wait = DefaultWait
	}
	if p.Poll <= 0 {
		p.Poll = DefaultPoll
	}
}

// Target returns env's gate and true when env is merge-gated.
func Target(ctx context.Context, st state.Store, env string) (state.GateTarget, bool, error) {
	t, err := st.GetGateTarget(ctx, env)
	switch {
	case errors.Is(err, state.ErrNotFound):
		return state.GateTarget{}, false, nil
	case err != nil:
		return state.GateTarget{}, false, fmt.Errorf("reading the merge gate of %s: %w", env, err)
	}
	return t, true, nil
}

// Attempt is a deploy attempt that recorded its holds, held by this
// process.
type Attempt struct {
	p     Params
	a     state.DeployAttempt
	holds []state.Hold
}

// Begin records the attempt and its holds (phase one, storage only: it
// makes no code-host call, so it succeeds while the code host is down).
// bp.Owner and bp.TTL default to the Params'.
func Begin(ctx context.Context, p Params, bp state.BeginDeployParams) (*Attempt, error) {
	p.defaults()
	if bp.Owner == "" {
		bp.Owner = p.Owner
	}
	if bp.TTL <= 0 {
		bp.TTL = p.TTL
	}
	if bp.Now.IsZero() {
		bp.Now = p.Clock.Now()
	}
	a, holds, err := p.Store.BeginDeploy(ctx, bp)
	if err != nil {
		return nil, fmt.Errorf("recording the merge gate's holds for deploy %s: %w", bp.ID, err)
	}
	p.Log.InfoContext(ctx, "merge gate: holds recorded", logkey.Deploy, a.ID, logkey.Environment, a.Env,
		logkey.GateMode, a.Mode, logkey.Holds, len(holds))
	return &Attempt{p: p, a: a, holds: holds}, nil
}

// Attempt returns the attempt as last read.
func (g *Attempt) Attempt() state.DeployAttempt { return g.a }

// Holds returns the holds Begin recorded.
func (g *Attempt) Holds() []state.Hold { return g.holds }

// Fence is what a promotion under this attempt names.
func (g *Attempt) Fence() *state.GateFence {
	return &state.GateFence{AttemptID: g.a.ID, Token: g.a.LeaseToken}
}

// NotOpenError is the gate that did not open within its wait: the holds
// not rendered (or recorded), each with its last render error.
type NotOpenError struct {
	Env, Attempt, Mode string
	Wait               time.Duration
	Missing            []state.Hold
	// Cause is set when the wait ended for another reason than time (the
	// attempt's lease was lost, the context ended).
	Cause error
}

func (e *NotOpenError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s is merge-gated: ", e.Env)
	if e.Cause != nil {
		fmt.Fprintf(&b, "the gate did not open (%v)", e.Cause)
	} else {
		fmt.Fprintf(&b, "holds on %d pull request(s) recorded but not rendered within %s", len(e.Missing), e.Wait)
	}
	var prs []string
	for _, h := range e.Missing {
		why := "not rendered yet"
		if h.RenderError != "" {
			why = h.RenderError
		}
		prs = append(prs, fmt.Sprintf("%s#%d (%s)", h.Repo, h.Number, why))
	}
	if len(prs) > 0 {
		fmt.Fprintf(&b, ": %s", strings.Join(prs, "; "))
	}
	fmt.Fprintf(&b, "; deploy attempt %s ended failed and nothing was backfilled. Is `gapless serve` running? (--merge-gate=recorded starts once the holds are recorded)", e.Attempt)
	return b.String()
}

func (e *NotOpenError) Unwrap() error { return e.Cause }

// Open waits until the gate opens and moves the attempt to running
// (state.GateStore.RunDeploy): in mode rendered until every hold is
// rendered, in mode recorded at once. It re-reads the attempt every Poll
// on the clock, or when Kick fires, for at most Wait. On timeout it ends
// the attempt failed with a *NotOpenError and settles it (releasing its
// holds), and returns that error: the caller must change nothing.
func (g *Attempt) Open(ctx context.Context) error {
	deadline := g.p.Clock.Now().Add(g.p.Wait)
	for {
		// Take the kick's channel before reading the store: a render that
		// lands after the read notifies this channel.
		var kick <-chan struct{}
		if g.p.Kick != nil {
			kick = g.p.Kick.C()
		}
		a, err := g.p.Store.RunDeploy(ctx, state.RunDeployParams{ID: g.a.ID, Token: g.a.LeaseToken, Now: g.p.Clock.Now()})
		if err == nil {
			g.a = a
			g.p.Log.InfoContext(ctx, "merge gate: open", logkey.Deploy, a.ID, logkey.Environment, a.Env, logkey.GateMode, a.Mode)
			return nil
		}
		if !errors.Is(err, state.ErrGateNotOpen) {
			return g.fail(ctx, err)
		}
		now := g.p.Clock.Now()
		if !now.Before(deadline) {
			return g.fail(ctx, nil)
		}
		// Keep the lease while waiting: a long wait must not let the sweep
		// take the attempt for dead.
		if a, err := g.p.Store.RenewDeploy(ctx, state.RenewDeployParams{ID: g.a.ID, Token: g.a.LeaseToken, TTL: g.p.TTL, Now: now}); err != nil {
			return g.fail(ctx, err)
		} else {
			g.a = a
		}
		wait := min(g.p.Poll, deadline.Sub(now))
		t := g.p.Clock.NewTimer(wait)
		if g.p.OnWait != nil {
			g.p.OnWait(ctx, g.a)
		}
		select {
		case <-ctx.Done():
			t.Stop()
			return g.fail(context.WithoutCancel(ctx), context.Cause(ctx))
		case <-kick:
		case <-t.Chan():
		}
		t.Stop()
	}
}

// fail ends a gate that did not open: the attempt failed, its holds
// settled.
func (g *Attempt) fail(ctx context.Context, cause error) error {
	holds, err := g.p.Store.ListHolds(ctx, state.ListHoldsParams{AttemptID: g.a.ID, ActiveOnly: true})
	if err != nil {
		return errors.Join(fmt.Errorf("listing the holds of deploy %s: %w", g.a.ID, err), cause)
	}
	var missing []state.Hold
	for _, h := range holds {
		if h.RenderedAt.IsZero() {
			missing = append(missing, h)
		}
	}
	sort.Slice(missing, func(i, j int) bool {
		if missing[i].Repo != missing[j].Repo {
			return missing[i].Repo < missing[j].Repo
		}
		return missing[i].Number < missing[j].Number
	})
	nerr := &NotOpenError{Env: g.a.Env, Attempt: g.a.ID, Mode: g.a.Mode, Wait: g.p.Wait, Missing: missing, Cause: cause}
	if ferr := g.Finish(ctx, state.FinishDeployParams{State: state.DeployFailed, Error: "merge gate: " + nerr.Error()}); ferr != nil {
		return errors.Join(nerr, ferr)
	}
	return nerr
}

// Finish ends the attempt (FinishDeploy with the attempt's id, token and
// the clock's now) and settles it: its holds are released and the held
// pull requests' verdicts go back to pending, to be re-planned by
// `gapless serve`. A settle deferred to a later attempt is left to that
// attempt's end and the release sweep.
func (g *Attempt) Finish(ctx context.Context, fin state.FinishDeployParams) error {
	fin.ID, fin.Token, fin.Now = g.a.ID, g.a.LeaseToken, g.p.Clock.Now()
	a, err := g.p.Store.FinishDeploy(ctx, fin)
	if err != nil {
		return fmt.Errorf("recording the end of deploy %s: %w", g.a.ID, err)
	}
	g.a = a
	if g.p.Settle != nil {
		return g.p.Settle(ctx, a)
	}
	_, released, err := g.p.Store.SettleDeploy(ctx, state.SettleDeployParams{ID: a.ID, By: state.SettledBySettle, Now: g.p.Clock.Now()})
	switch {
	case errors.Is(err, state.ErrSettleDeferred):
		g.p.Log.InfoContext(ctx, "merge gate: settle deferred to the attempt holding the environment now", logkey.Deploy, a.ID)
		return nil
	case err != nil:
		return fmt.Errorf("settling deploy %s: %w (the release sweep of `gapless serve` settles it)", a.ID, err)
	}
	g.p.Log.InfoContext(ctx, "merge gate: settled", logkey.Deploy, a.ID, logkey.Outcome, a.State, logkey.Holds, len(released))
	return nil
}

// Keep renews the attempt's lease at a third of its TTL until stop is
// called; a lost lease cancels the returned context with
// state.ErrLeaseLost as its cause, so the apply stops before it promotes
// (which the fence would refuse anyway).
func (g *Attempt) Keep(ctx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	stopRenew := RenewLease(ctx, g.p, g.a.ID, g.a.LeaseToken, cancel)
	var once sync.Once
	return ctx, func() {
		once.Do(func() { stopRenew(); cancel(nil) })
	}
}

// RenewLease renews deploy attempt id's lease (p.Store, p.Clock, p.TTL)
// at a third of its TTL until stop is called or ctx ends. A lost lease
// calls cancel with state.ErrLeaseLost and stops renewing; any other
// renewal error is logged and retried at the next tick. stop returns once
// no renewal runs.
func RenewLease(ctx context.Context, p Params, id, token string, cancel context.CancelCauseFunc) (stop func()) {
	p.defaults()
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := p.Clock.NewTicker(p.TTL / 3)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.Chan():
				_, err := p.Store.RenewDeploy(ctx, state.RenewDeployParams{ID: id, Token: token, TTL: p.TTL, Now: p.Clock.Now()})
				if errors.Is(err, state.ErrLeaseLost) {
					cancel(err)
					return
				}
				if err != nil && ctx.Err() == nil {
					p.Log.WarnContext(ctx, "renewing a deploy's lease failed; retrying at the next tick", logkey.Deploy, id, logkey.Error, err)
				}
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(done); <-finished }) }
}

// Notifier wakes every waiter at once: a render that marked a hold
// rendered notifies the gates waiting in the same process.
type Notifier struct {
	mu sync.Mutex
	ch chan struct{}
}

// NewNotifier returns a notifier.
func NewNotifier() *Notifier { return &Notifier{ch: make(chan struct{})} }

// C returns a channel closed at the next Notify.
func (n *Notifier) C() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.ch
}

// Notify wakes every waiter on a channel C returned before it.
func (n *Notifier) Notify() {
	n.mu.Lock()
	defer n.mu.Unlock()
	close(n.ch)
	n.ch = make(chan struct{})
}
