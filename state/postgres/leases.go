package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/state/internal/storekit"
)

const leaseColumns = `key, owner, token, acquired_at_us, expires_at_us, holder_host, holder_pid, holder_start`

func scanLease(row pgx.Row) (state.Lease, error) {
	var l state.Lease
	var acquired, expires, pid int64
	if err := row.Scan(&l.Key, &l.Owner, &l.Token, &acquired, &expires, &l.Holder.Host, &pid, &l.Holder.Start); err != nil {
		return state.Lease{}, err
	}
	l.Holder.PID = int(pid)
	l.AcquiredAt = storekit.FromMicros(acquired)
	l.ExpiresAt = storekit.FromMicros(expires)
	return l, nil
}

// expiry is now + ttl in microseconds, refusing a missing Now, a TTL under a
// microsecond, and an expiry that overflows.
func expiry(now time.Time, ttl time.Duration) (nowUS, expUS int64, err error) {
	if now.IsZero() {
		return 0, 0, errNoNow
	}
	if ttl < time.Microsecond {
		return 0, 0, fmt.Errorf("the TTL %v must be at least a microsecond", ttl)
	}
	nowUS = storekit.Micros(now)
	expUS = nowUS + ttl.Microseconds()
	if expUS < nowUS {
		return 0, 0, fmt.Errorf("the TTL %v overflows from %v", ttl, now)
	}
	return nowUS, expUS, nil
}

// AcquireLease takes the lease p.Key with a fresh random token if nobody
// holds it or its holder's lease is expired at p.Now, and returns
// state.ErrLeaseHeld otherwise.
//
// Invariant: of any number of concurrent acquirers, at most one holds an
// unexpired lease at any Now. It is one statement, river's pattern: an
// upsert whose DO UPDATE has the compare-and-swap in its WHERE clause
// (expires_at <= now). PostgreSQL locks the conflicting row and re-checks
// that clause on its newest version, so two acquirers of an expired lease
// cannot both take it, and the first acquirer of a new key inserts it while
// the others find the conflict and their WHERE clause false.
func (s *Store) AcquireLease(ctx context.Context, p state.AcquireLeaseParams) (state.Lease, error) {
	if p.Key == "" {
		return state.Lease{}, errors.New("postgres state: acquire lease: the key is empty")
	}
	now, exp, err := expiry(p.Now, p.TTL)
	if err != nil {
		return state.Lease{}, fmt.Errorf("postgres state: acquire lease %q: %w", p.Key, err)
	}
	token, err := storekit.NewLeaseToken()
	if err != nil {
		return state.Lease{}, fmt.Errorf("postgres state: acquire lease %q: %w", p.Key, err)
	}
	l, err := scanLease(s.pool.QueryRow(ctx, `
		INSERT INTO leases (`+leaseColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
		ON CONFLICT (key) DO UPDATE SET
			owner = excluded.owner, token = excluded.token,
			acquired_at_us = excluded.acquired_at_us, expires_at_us = excluded.expires_at_us,
			holder_host = excluded.holder_host, holder_pid = excluded.holder_pid, holder_start = excluded.holder_start
		WHERE leases.expires_at_us <= $4
		RETURNING `+leaseColumns,
		p.Key, p.Owner, token, now, exp, p.Holder.Host, int64(p.Holder.PID), p.Holder.Start))
	if errors.Is(err, pgx.ErrNoRows) {
		// The compare-and-swap failed; read the holder only to say who.
		held, herr := s.GetLease(ctx, p.Key)
		if herr != nil {
			return state.Lease{}, fmt.Errorf("postgres state: acquire lease %q at %v: %w", p.Key, storekit.FromMicros(now), state.ErrLeaseHeld)
		}
		return state.Lease{}, fmt.Errorf("postgres state: acquire lease %q at %v: %q holds it until %v: %w",
			p.Key, storekit.FromMicros(now), held.Owner, held.ExpiresAt, state.ErrLeaseHeld)
	}
	if err != nil {
		return state.Lease{}, fmt.Errorf("postgres state: acquire lease %q: %w", p.Key, err)
	}
	return l, nil
}

// TakeOverLease replaces the lease p.Token holds, expired or not, with a
// fresh token for p.Owner and p.Holder, or returns state.ErrLeaseLost.
//
// Invariant: one UPDATE guarded by "WHERE token = $token AND expires_at_us
// = $expires_at", a compare-and-swap on the lease exactly as the caller
// read it. PostgreSQL locks the row and re-checks the clause on its newest
// version, so a lease released, taken over or renewed since that read is
// never displaced, and of two simultaneous takers exactly one wins.
func (s *Store) TakeOverLease(ctx context.Context, p state.TakeOverLeaseParams) (state.Lease, error) {
	if p.Key == "" {
		return state.Lease{}, errors.New("postgres state: take over lease: the key is empty")
	}
	if p.Token == "" {
		return state.Lease{}, fmt.Errorf("postgres state: take over lease %q: the token of the lease to take over is required", p.Key)
	}
	now, exp, err := expiry(p.Now, p.TTL)
	if err != nil {
		return state.Lease{}, fmt.Errorf("postgres state: take over lease %q: %w", p.Key, err)
	}
	token, err := storekit.NewLeaseToken()
	if err != nil {
		return state.Lease{}, fmt.Errorf("postgres state: take over lease %q: %w", p.Key, err)
	}
	l, err := scanLease(s.pool.QueryRow(ctx, `
		UPDATE leases SET owner = $4, token = $5, acquired_at_us = $6, expires_at_us = $7,
			holder_host = $8, holder_pid = $9, holder_start = $10
		WHERE key = $1 AND token = $2 AND expires_at_us = $3
		RETURNING `+leaseColumns,
		p.Key, p.Token, storekit.Micros(p.ExpiresAt), p.Owner, token, now, exp, p.Holder.Host, int64(p.Holder.PID), p.Holder.Start))
	if errors.Is(err, pgx.ErrNoRows) {
		return state.Lease{}, fmt.Errorf("postgres state: take over lease %q: the lease changed since it was read (released, taken over or renewed): %w", p.Key, state.ErrLeaseLost)
	}
	if err != nil {
		return state.Lease{}, fmt.Errorf("postgres state: take over lease %q: %w", p.Key, err)
	}
	return l, nil
}

// RenewLease extends the lease to p.Now + p.TTL if p.Token still holds it,
// unexpired at p.Now (WHERE key = $1 AND token = $2 AND expires_at > $now):
// state.ErrLeaseLost otherwise. An expired lease is never revived, even if
// nobody took it over.
func (s *Store) RenewLease(ctx context.Context, p state.RenewLeaseParams) (state.Lease, error) {
	now, exp, err := expiry(p.Now, p.TTL)
	if err != nil {
		return state.Lease{}, fmt.Errorf("postgres state: renew lease %q: %w", p.Key, err)
	}
	l, err := scanLease(s.pool.QueryRow(ctx, `
		UPDATE leases SET expires_at_us = $4
		WHERE key = $1 AND token = $2 AND expires_at_us > $3
		RETURNING `+leaseColumns,
		p.Key, p.Token, now, exp))
	if errors.Is(err, pgx.ErrNoRows) {
		return state.Lease{}, fmt.Errorf("postgres state: renew lease %q at %v: %w", p.Key, storekit.FromMicros(now), state.ErrLeaseLost)
	}
	if err != nil {
		return state.Lease{}, fmt.Errorf("postgres state: renew lease %q: %w", p.Key, err)
	}
	return l, nil
}

// ReleaseLease deletes the lease if p.Token holds it (expired or not, as
// long as nobody took it over): state.ErrLeaseLost otherwise.
func (s *Store) ReleaseLease(ctx context.Context, p state.ReleaseLeaseParams) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM leases WHERE key = $1 AND token = $2`, p.Key, p.Token)
	if err != nil {
		return fmt.Errorf("postgres state: release lease %q: %w", p.Key, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("postgres state: release lease %q: %w", p.Key, state.ErrLeaseLost)
	}
	return nil
}

// GetLease returns the lease row, possibly expired, or an error wrapping
// state.ErrNotFound.
func (s *Store) GetLease(ctx context.Context, key string) (state.Lease, error) {
	l, err := scanLease(s.pool.QueryRow(ctx, `SELECT `+leaseColumns+` FROM leases WHERE key = $1`, key))
	if errors.Is(err, pgx.ErrNoRows) {
		return state.Lease{}, fmt.Errorf("postgres state: lease %q: %w", key, state.ErrNotFound)
	}
	if err != nil {
		return state.Lease{}, fmt.Errorf("postgres state: reading lease %q: %w", key, err)
	}
	return l, nil
}
