package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/state/internal/storekit"
)

// Every lease write (acquire, take over, renew, release) runs through
// writeRecord: it is synced as Sync says, see the package comment for why
// losing the last of them to a power loss is safe. Their statements are
// prepared (stmts).

const leaseColumns = `key, owner, token, acquired_at_us, expires_at_us, holder_host, holder_pid, holder_start`

// acquireLeaseQuery takes a lease free or expired at the last parameter
// (see AcquireLease).
const acquireLeaseQuery = `
	INSERT INTO leases (` + leaseColumns + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
	ON CONFLICT (key) DO UPDATE SET
		owner = excluded.owner, token = excluded.token,
		acquired_at_us = excluded.acquired_at_us, expires_at_us = excluded.expires_at_us,
		holder_host = excluded.holder_host, holder_pid = excluded.holder_pid, holder_start = excluded.holder_start
	WHERE leases.expires_at_us <= ?
	RETURNING ` + leaseColumns

// takeOverLeaseQuery replaces the lease exactly as read (see TakeOverLease).
const takeOverLeaseQuery = `
	UPDATE leases SET owner = ?, token = ?, acquired_at_us = ?, expires_at_us = ?,
		holder_host = ?, holder_pid = ?, holder_start = ?
	WHERE key = ? AND token = ? AND expires_at_us = ?
	RETURNING ` + leaseColumns

// renewLeaseQuery extends a lease its token holds unexpired (see RenewLease).
const renewLeaseQuery = `
	UPDATE leases SET expires_at_us = ?
	WHERE key = ? AND token = ? AND expires_at_us > ?
	RETURNING ` + leaseColumns

// releaseLeaseQuery frees a lease its token holds (see ReleaseLease).
const releaseLeaseQuery = `DELETE FROM leases WHERE key = ? AND token = ?`

// scanLease reads one row selected with leaseColumns.
func scanLease(sc interface{ Scan(...any) error }) (state.Lease, error) {
	var l state.Lease
	var acquired, expires int64
	if err := sc.Scan(&l.Key, &l.Owner, &l.Token, &acquired, &expires, &l.Holder.Host, &l.Holder.PID, &l.Holder.Start); err != nil {
		return state.Lease{}, err
	}
	l.AcquiredAt = storekit.FromMicros(acquired)
	l.ExpiresAt = storekit.FromMicros(expires)
	return l, nil
}

// checkLeaseTiming refuses a lease call without a positive TTL or a Now.
func checkLeaseTiming(key string, ttl time.Duration, now time.Time) error {
	switch {
	case key == "":
		return errors.New("lease key is required")
	case ttl < time.Microsecond:
		return fmt.Errorf("lease %q: TTL %s must be at least a microsecond", key, ttl)
	case now.IsZero():
		return fmt.Errorf("lease %q: %w", key, errNoNow)
	}
	return nil
}

// AcquireLease takes the lease with a fresh token if it is free or expired
// at p.Now, and fails wrapping state.ErrLeaseHeld otherwise.
//
// Invariant: the takeover is one upsert whose DO UPDATE is guarded by
// "WHERE leases.expires_at_us <= now": a compare-and-swap in the write
// itself, so of simultaneous acquirers exactly one gets the lease, and an
// unexpired holder is never displaced. A lease expires at ExpiresAt exactly.
func (s *Store) AcquireLease(ctx context.Context, p state.AcquireLeaseParams) (state.Lease, error) {
	if err := checkLeaseTiming(p.Key, p.TTL, p.Now); err != nil {
		return state.Lease{}, fmt.Errorf("sqlite: acquire lease: %w", err)
	}
	token, err := storekit.NewLeaseToken()
	if err != nil {
		return state.Lease{}, fmt.Errorf("sqlite: acquire lease %q: %w", p.Key, err)
	}
	now := storekit.Micros(p.Now)
	var out state.Lease
	err = s.writeRecord(ctx, func(tx *sql.Tx) error {
		l, err := scanLease(tx.StmtContext(ctx, s.recStmts.acquireLease).QueryRowContext(ctx,
			p.Key, p.Owner, token, now, now+p.TTL.Microseconds(), p.Holder.Host, p.Holder.PID, p.Holder.Start, now))
		if errors.Is(err, sql.ErrNoRows) {
			held, err := scanLease(tx.QueryRowContext(ctx,
				`SELECT `+leaseColumns+` FROM leases WHERE key = ?`, p.Key))
			if err != nil {
				return fmt.Errorf("%w (and reading the holder failed: %w)", state.ErrLeaseHeld, err)
			}
			return fmt.Errorf("%w: %q holds it until %s", state.ErrLeaseHeld, held.Owner, held.ExpiresAt.Format(time.RFC3339Nano))
		}
		if err != nil {
			return err
		}
		out = l
		return nil
	})
	if err != nil {
		return state.Lease{}, fmt.Errorf("sqlite: acquire lease %q: %w", p.Key, err)
	}
	return out, nil
}

// TakeOverLease replaces the lease p.Token holds, expired or not, with a
// fresh token for p.Owner and p.Holder, or fails wrapping
// state.ErrLeaseLost.
//
// Invariant: the write is one UPDATE guarded by "WHERE token = $token AND
// expires_at_us = $expires_at": a compare-and-swap on the lease exactly as
// the caller read it, so a lease released, taken over or renewed since
// that read is never displaced, and of two simultaneous takers exactly one
// wins.
func (s *Store) TakeOverLease(ctx context.Context, p state.TakeOverLeaseParams) (state.Lease, error) {
	if err := checkLeaseTiming(p.Key, p.TTL, p.Now); err != nil {
		return state.Lease{}, fmt.Errorf("sqlite: take over lease: %w", err)
	}
	if p.Token == "" {
		return state.Lease{}, fmt.Errorf("sqlite: take over lease %q: the token of the lease to take over is required", p.Key)
	}
	token, err := storekit.NewLeaseToken()
	if err != nil {
		return state.Lease{}, fmt.Errorf("sqlite: take over lease %q: %w", p.Key, err)
	}
	now := storekit.Micros(p.Now)
	var out state.Lease
	err = s.writeRecord(ctx, func(tx *sql.Tx) error {
		l, err := scanLease(tx.StmtContext(ctx, s.recStmts.takeOverLease).QueryRowContext(ctx,
			p.Owner, token, now, now+p.TTL.Microseconds(), p.Holder.Host, p.Holder.PID, p.Holder.Start,
			p.Key, p.Token, storekit.Micros(p.ExpiresAt)))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%w: the lease changed since it was read (released, taken over or renewed)", state.ErrLeaseLost)
		}
		out = l
		return err
	})
	if err != nil {
		return state.Lease{}, fmt.Errorf("sqlite: take over lease %q: %w", p.Key, err)
	}
	return out, nil
}

// RenewLease extends a lease to p.Now+p.TTL. Invariant: the write is guarded
// by "WHERE token = $token AND expires_at > $now", so a token whose lease
// expired (even if nobody took it over) or was taken over or released can
// never renew it; that fails wrapping state.ErrLeaseLost.
func (s *Store) RenewLease(ctx context.Context, p state.RenewLeaseParams) (state.Lease, error) {
	if err := checkLeaseTiming(p.Key, p.TTL, p.Now); err != nil {
		return state.Lease{}, fmt.Errorf("sqlite: renew lease: %w", err)
	}
	now := storekit.Micros(p.Now)
	var out state.Lease
	err := s.writeRecord(ctx, func(tx *sql.Tx) error {
		l, err := scanLease(tx.StmtContext(ctx, s.recStmts.renewLease).QueryRowContext(ctx,
			now+p.TTL.Microseconds(), p.Key, p.Token, now))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%w: the token does not hold it at %s", state.ErrLeaseLost, p.Now.UTC().Format(time.RFC3339Nano))
		}
		out = l
		return err
	})
	if err != nil {
		return state.Lease{}, fmt.Errorf("sqlite: renew lease %q: %w", p.Key, err)
	}
	return out, nil
}

// ReleaseLease frees a lease held by p.Token (expired or not, as long as no
// one took it over), or fails wrapping state.ErrLeaseLost.
func (s *Store) ReleaseLease(ctx context.Context, p state.ReleaseLeaseParams) error {
	err := s.writeRecord(ctx, func(tx *sql.Tx) error {
		res, err := tx.StmtContext(ctx, s.recStmts.releaseLease).ExecContext(ctx, p.Key, p.Token)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("%w: the token does not hold it", state.ErrLeaseLost)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("sqlite: release lease %q: %w", p.Key, err)
	}
	return nil
}

// GetLease returns the lease row, possibly expired, or an error wrapping
// state.ErrNotFound.
func (s *Store) GetLease(ctx context.Context, key string) (state.Lease, error) {
	l, err := scanLease(s.db.QueryRowContext(ctx, `SELECT `+leaseColumns+` FROM leases WHERE key = ?`, key))
	if errors.Is(err, sql.ErrNoRows) {
		return state.Lease{}, fmt.Errorf("sqlite: lease %q: %w", key, state.ErrNotFound)
	}
	if err != nil {
		return state.Lease{}, fmt.Errorf("sqlite: get lease %q: %w", key, err)
	}
	return l, nil
}
