// Package lease takes, keeps and releases sets of state-store leases: the
// coordination between scheduler daemons and deploys (the lock policy).
//
// Every writer of a model version holds that version's lease (VersionKey)
// while it computes intervals: a scheduler daemon for the model it runs, a
// deploy under the lock policy for every model its plan replaces and their
// downstream models. The state store's leases are compare-and-swaps on a
// token with an injected now (state.Store.AcquireLease), so a crashed
// holder's lease expires and is taken over; on the crashed holder's own
// host, at once (see below).
//
// Deadlock freedom: a deploy takes its leases with AcquireAll, in one
// global order (sorted keys), waiting a bounded time for each; a scheduler
// takes one lease at a time and never waits (TryAcquire). A waiter
// therefore only ever waits for a key greater than every key it holds, so
// no cycle of waiters can form.
//
// A dead holder's lease: every lease records the process that holds it
// (Self: host, PID and start identity). A lease held by a process of this
// host that no longer runs (Options.HolderGone, by default ProcessGone) is
// taken over at once rather than after its TTL, through
// state.Store.TakeOverLease, a compare-and-swap on the lease as read: a
// lease released, renewed or taken by someone else meanwhile is left
// alone. This is safe for the same reason expiry is: the dead holder's
// writes carry its old token, and every fenced write with it now fails. A
// lease whose holder is alive, on another host, or not known to be gone
// is never taken before it expires.
package lease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/gapless-dev/gapless/state"
)

// Store is the part of the state store that leases use (both state stores
// implement it, as every state.Store does): the compare-and-swaps that take,
// take over, renew and release a lease, and the read of a lease as it is.
// A Set keeps the Store it was acquired with for its renewals and release.
type Store interface {
	AcquireLease(ctx context.Context, p state.AcquireLeaseParams) (state.Lease, error)
	TakeOverLease(ctx context.Context, p state.TakeOverLeaseParams) (state.Lease, error)
	RenewLease(ctx context.Context, p state.RenewLeaseParams) (state.Lease, error)
	ReleaseLease(ctx context.Context, p state.ReleaseLeaseParams) error
	GetLease(ctx context.Context, key string) (state.Lease, error)
}

// VersionKey is the lease a writer of a model version holds.
func VersionKey(k state.VersionKey) string { return "version/" + k.Name + "@" + k.Version }

// Defaults for Options.
const (
	DefaultTTL  = 30 * time.Second
	DefaultWait = 2 * time.Minute
	DefaultPoll = 250 * time.Millisecond
)

// ErrWaitExceeded is wrapped when a lease stayed held by another owner for
// longer than Options.Wait.
var ErrWaitExceeded = errors.New("lease still held after the wait bound")

// Options are how leases are taken and kept.
type Options struct {
	// Owner names the holder for humans and logs: "deploy <plan id>",
	// "scheduler <host>/<pid>".
	Owner string
	// TTL is each lease's lifetime; a holder renews at TTL/3.
	TTL time.Duration
	// Wait bounds how long AcquireAll waits for one key held by another
	// owner (0: DefaultWait; negative: do not wait); Poll is the interval
	// between attempts (0: DefaultPoll). TTL 0 is DefaultTTL.
	Wait, Poll time.Duration
	// Clock drives now, waits and renewals; nil is the real clock.
	Clock  clockwork.Clock
	Logger *slog.Logger
	// OnRenew, if set, is called after each of Keep's renewal rounds with
	// its outcome (nil, or the error): for metrics, and for tests to step a
	// fake clock in lockstep with the renewals.
	OnRenew func(error)
	// Holder is the process the leases are recorded for (zero: Self()).
	Holder state.LeaseHolder
	// HolderGone says whether the process holding a lease another owner
	// holds is known to be gone, so that its lease may be taken over
	// before it expires (nil: ProcessGone). It must answer false when in
	// doubt; tests inject it.
	HolderGone func(state.LeaseHolder) bool
}

func (o Options) withDefaults() Options {
	if o.TTL <= 0 {
		o.TTL = DefaultTTL
	}
	if o.Wait < 0 {
		o.Wait = 0
	} else if o.Wait == 0 {
		o.Wait = DefaultWait
	}
	if o.Poll <= 0 {
		o.Poll = DefaultPoll
	}
	if o.Clock == nil {
		o.Clock = clockwork.NewRealClock()
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Holder.IsZero() {
		o.Holder = Self()
	}
	if o.HolderGone == nil {
		o.HolderGone = ProcessGone
	}
	return o
}

// Set is a set of held leases. Its methods are safe for concurrent use.
type Set struct {
	store Store
	opts  Options

	mu     sync.Mutex
	held   []state.Lease // in key order
	lost   chan struct{}
	err    error
	stop   chan struct{}
	done   chan struct{}
	closed bool
}

// TryAcquire takes one lease if it is free, expired, or held by a process
// known to be gone (see the package comment), without waiting: otherwise a
// *HeldError (wrapping state.ErrLeaseHeld) naming the holder and the
// expiry.
func TryAcquire(ctx context.Context, store Store, key string, opts Options) (*Set, error) {
	opts = opts.withDefaults()
	l, err := acquireOnce(ctx, store, key, opts)
	if err != nil {
		return nil, err
	}
	return newSet(store, opts, []state.Lease{l}), nil
}

// acquireAttempts bounds acquireOnce's rounds: a lease that changes hands
// between its reads (released, then taken again) is reported held rather
// than chased.
const acquireAttempts = 3

// acquireOnce takes key now if it is free or expired, or takes it over
// from a holder that HolderGone says is gone. Otherwise it returns a
// *HeldError with the lease as read. The takeover is the store's
// compare-and-swap on that read: when it fails (the lease changed since),
// the lease is read again and the round repeats, at most acquireAttempts
// times.
func acquireOnce(ctx context.Context, store Store, key string, opts Options) (state.Lease, error) {
	var held state.Lease
	for range acquireAttempts {
		now := opts.Clock.Now()
		l, err := store.AcquireLease(ctx, state.AcquireLeaseParams{Key: key, Owner: opts.Owner, Holder: opts.Holder, TTL: opts.TTL, Now: now})
		if err == nil || !errors.Is(err, state.ErrLeaseHeld) {
			return l, err
		}
		cur, err := store.GetLease(ctx, key)
		if errors.Is(err, state.ErrNotFound) {
			continue // released since: acquire again
		}
		if err != nil {
			return state.Lease{}, fmt.Errorf("taking lease %s: reading its holder: %w", key, err)
		}
		held = cur
		if !opts.HolderGone(cur.Holder) {
			return state.Lease{}, &HeldError{Key: key, Lease: cur}
		}
		l, err = store.TakeOverLease(ctx, state.TakeOverLeaseParams{Key: key, Token: cur.Token, ExpiresAt: cur.ExpiresAt,
			Owner: opts.Owner, Holder: opts.Holder, TTL: opts.TTL, Now: now})
		if err == nil {
			opts.Logger.WarnContext(ctx, "took over a lease whose holder no longer runs",
				slog.String("lease", key), slog.String("holder", Describe(cur)), slog.String("holder_host", cur.Holder.Host),
				slog.Int("holder_pid", cur.Holder.PID), slog.Time("holder_expires_at", cur.ExpiresAt.UTC()), slog.String("owner", opts.Owner))
			return l, nil
		}
		if !errors.Is(err, state.ErrLeaseLost) {
			return state.Lease{}, fmt.Errorf("taking over lease %s from %s: %w", key, Describe(cur), err)
		}
	}
	if held.Key == "" {
		return state.Lease{}, fmt.Errorf("taking lease %s: it changed hands %d times while being taken: %w", key, acquireAttempts, state.ErrLeaseHeld)
	}
	return state.Lease{}, &HeldError{Key: key, Lease: held}
}

// AcquireAll takes every key (deduplicated) in sorted order, waiting up to
// Options.Wait for each one another owner holds. On any failure, including
// ctx ending, every lease already taken is released and the error names
// the key and its current holder.
func AcquireAll(ctx context.Context, store Store, keys []string, opts Options) (*Set, error) {
	opts = opts.withDefaults()
	keys = slices.Clone(keys)
	slices.Sort(keys)
	keys = slices.Compact(keys)
	var held []state.Lease
	release := func() {
		for _, l := range held {
			if err := store.ReleaseLease(context.WithoutCancel(ctx), state.ReleaseLeaseParams{Key: l.Key, Token: l.Token}); err != nil {
				opts.Logger.WarnContext(ctx, "releasing a lease after a failed acquisition", slog.String("lease", l.Key), slog.Any("error", err))
			}
		}
	}
	for _, k := range keys {
		l, err := acquireWaiting(ctx, store, k, opts)
		if err != nil {
			release()
			return nil, err
		}
		held = append(held, l)
	}
	return newSet(store, opts, held), nil
}

// acquireWaiting retries one key every Poll until it is taken, Wait has
// passed, or ctx ends.
func acquireWaiting(ctx context.Context, store Store, key string, opts Options) (state.Lease, error) {
	deadline := opts.Clock.Now().Add(opts.Wait)
	for {
		l, err := acquireOnce(ctx, store, key, opts)
		if err == nil {
			return l, nil
		}
		if !errors.Is(err, state.ErrLeaseHeld) {
			return state.Lease{}, fmt.Errorf("taking lease %s: %w", key, err)
		}
		now := opts.Clock.Now()
		if !now.Before(deadline) {
			holder := "another owner"
			var he *HeldError
			if errors.As(err, &he) {
				holder = fmt.Sprintf("%s until %s", Describe(he.Lease), he.Lease.ExpiresAt.UTC().Format(time.RFC3339))
			}
			return state.Lease{}, fmt.Errorf("taking lease %s: held by %s: %w after %s", key, holder, ErrWaitExceeded, opts.Wait)
		}
		wait := min(opts.Poll, deadline.Sub(now))
		select {
		case <-ctx.Done():
			return state.Lease{}, fmt.Errorf("waiting for lease %s: %w", key, context.Cause(ctx))
		case <-opts.Clock.After(wait):
		}
	}
}

func newSet(store Store, opts Options, held []state.Lease) *Set {
	return &Set{store: store, opts: opts, held: held, lost: make(chan struct{})}
}

// Keys returns the held keys, in order.
func (s *Set) Keys() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, len(s.held))
	for i, l := range s.held {
		out[i] = l.Key
	}
	return out
}

// Fence is the write fence of key's lease (nil if the set does not hold
// key): an interval write carrying it succeeds only while this set still
// holds the lease.
func (s *Set) Fence(key string) *state.Fence {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range s.held {
		if l.Key == key {
			return &state.Fence{LeaseKey: l.Key, LeaseToken: l.Token}
		}
	}
	return nil
}

// Lost is closed when a renewal found a lease lost (expired and taken
// over); Err then says which.
func (s *Set) Lost() <-chan struct{} { return s.lost }

// Err is the renewal failure that closed Lost, or nil.
func (s *Set) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Keep renews every lease every TTL/3 in a goroutine until Release. A lost
// lease closes Lost and stops the renewals; a transient store error is
// logged and retried at the next beat (the lease's TTL leaves two more).
func (s *Set) Keep(ctx context.Context) {
	s.mu.Lock()
	if s.stop != nil || s.closed {
		s.mu.Unlock()
		return
	}
	s.stop, s.done = make(chan struct{}), make(chan struct{})
	stop, done := s.stop, s.done
	s.mu.Unlock()
	go func() {
		defer close(done)
		ticker := s.opts.Clock.NewTicker(s.opts.TTL / 3)
		defer ticker.Stop()
		for {
			select {
			case <-stop:
				return
			case <-ctx.Done():
				return
			case <-ticker.Chan():
			}
			err := s.Renew(ctx)
			if s.opts.OnRenew != nil {
				s.opts.OnRenew(err)
			}
			if errors.Is(err, state.ErrLeaseLost) {
				return
			}
		}
	}()
}

// Renew extends every lease once. A lost lease closes Lost and is returned
// wrapping state.ErrLeaseLost.
func (s *Set) Renew(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	for i, l := range s.held {
		nl, err := s.store.RenewLease(ctx, state.RenewLeaseParams{Key: l.Key, Token: l.Token, TTL: s.opts.TTL, Now: s.opts.Clock.Now()})
		if errors.Is(err, state.ErrLeaseLost) {
			s.err = fmt.Errorf("lease %s held by %s: %w", l.Key, s.opts.Owner, err)
			close(s.lost)
			s.opts.Logger.ErrorContext(ctx, "lease lost", slog.String("lease", l.Key), slog.String("owner", s.opts.Owner))
			return s.err
		}
		if err != nil {
			s.opts.Logger.WarnContext(ctx, "renewing a lease", slog.String("lease", l.Key), slog.Any("error", err))
			return fmt.Errorf("renewing lease %s: %w", l.Key, err)
		}
		s.held[i] = nl
	}
	return nil
}

// Release stops the renewals and releases every lease still held, in
// reverse order. It is safe to call more than once and after a loss; a
// lease already lost is not an error.
func (s *Set) Release(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	stop, done := s.stop, s.done
	held := slices.Clone(s.held)
	s.mu.Unlock()
	if stop != nil {
		close(stop)
		<-done
	}
	var errs []error
	for i := len(held) - 1; i >= 0; i-- {
		l := held[i]
		err := s.store.ReleaseLease(ctx, state.ReleaseLeaseParams{Key: l.Key, Token: l.Token})
		if err != nil && !errors.Is(err, state.ErrLeaseLost) {
			errs = append(errs, fmt.Errorf("releasing lease %s: %w", l.Key, err))
		}
	}
	return errors.Join(errs...)
}
