package apply

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/gapless-dev/gapless/internal/logkey"
	"github.com/gapless-dev/gapless/lease"
	"github.com/gapless-dev/gapless/promotion"
	"github.com/gapless-dev/gapless/snapshot"
	"github.com/gapless-dev/gapless/state"
)

// promoteLocked is the lock policy's promotion. Before the final catch-up
// and the promotion it takes the version leases (lease.VersionKey) of every
// model in the check's scope and of every downstream model, both the
// version the environment serves and the plan's, in one global order
// (lease.AcquireAll), waiting a bounded time for work already running to
// finish. Schedulers defer leased versions, so nothing advances the
// incumbents while the lease is held: the catch-up fills what they added
// before, and the strict check then passes. The leases are renewed while
// held and released on every way out (success, failure, cancellation); a
// crashed deploy's leases expire.
//
// Safety does not rest on the leases: the promotion check still runs in
// the promotion's transaction, and a lease lost before the promotion fails
// the apply.
func (a *applier) promoteLocked(ctx context.Context, res *Result, cur *state.Environment,
	incumbents map[string]*snapshot.Snapshot, pol promotion.Policy) error {
	keys := a.lockKeys(cur, incumbents)
	opts := a.Lease
	opts.Owner = "deploy " + a.Plan.ID
	if opts.Logger == nil {
		opts.Logger = a.log
	}
	held, err := lease.AcquireAll(ctx, a.Store, keys, opts)
	if err != nil {
		return fmt.Errorf("lock policy: taking %d version leases: %w", len(keys), err)
	}
	held.Keep(ctx)
	defer func() {
		if err := held.Release(context.WithoutCancel(ctx)); err != nil {
			a.log.ErrorContext(ctx, "releasing the deploy's leases", slog.Any(logkey.Error, err))
		}
	}()
	a.log.InfoContext(ctx, "lock policy: leases taken", slog.Int(logkey.Leases, len(keys)))
	if err := a.record(ctx, StageLock, StatusFinished, map[string]any{"leases": keys}); err != nil {
		return err
	}
	if a.Hooks.Locked != nil {
		if err := a.Hooks.Locked(ctx); err != nil {
			return fmt.Errorf("locked hook: %w", err)
		}
	}
	if err := a.catchUp(ctx, res, incumbents, 1); err != nil {
		return err
	}
	select {
	case <-held.Lost():
		return fmt.Errorf("lock policy: %w; nothing was promoted", held.Err())
	default:
	}
	return a.promoteOnce(ctx, res, cur, incumbents, pol)
}

// lockKeys are the version leases the lock policy takes: for every model
// in the check's scope and everything downstream of it in the plan, the
// version the environment serves now and the plan's version.
func (a *applier) lockKeys(cur *state.Environment, incumbents map[string]*snapshot.Snapshot) []string {
	served := map[string]state.SnapshotRef{}
	if cur != nil {
		for _, r := range cur.Snapshots {
			served[r.Name] = r
		}
	}
	down := a.downstream()
	var keys []string
	add := func(s *snapshot.Snapshot) {
		keys = append(keys, lease.VersionKey(keyOf(s)))
		if r, ok := served[s.Name]; ok {
			keys = append(keys, lease.VersionKey(r.VersionKey()))
		}
	}
	for _, c := range a.scope(incumbents) {
		add(c.repl)
		for _, d := range down[c.repl.Name] {
			add(d)
		}
	}
	return keys
}
