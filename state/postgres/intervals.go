package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/state/debt"
	"github.com/gapless-dev/gapless/state/internal/storekit"
)

// GetIntervals returns the covered set of every key in one query, however
// many keys there are (the keys travel as two arrays and are joined with
// unnest). Keys without intervals map to the empty set.
func (s *Store) GetIntervals(ctx context.Context, keys []state.VersionKey) (map[state.VersionKey]interval.Set, error) {
	return getIntervals(ctx, s.pool, keys, false)
}

// getIntervals reads the intervals of keys through q. With lockKeys (the
// reader offered to a promotion's check) it first locks the keys' rows in
// interval_keys FOR SHARE, in key order, in a statement of its own: every
// interval writer holds that row FOR UPDATE while it rewrites the key, so
// the read that follows (a new statement, hence a new snapshot under READ
// COMMITTED) sees no write in flight, and no writer can change these keys
// until the surrounding transaction ends.
func getIntervals(ctx context.Context, q querier, keys []state.VersionKey, lockKeys bool) (map[state.VersionKey]interval.Set, error) {
	out := make(map[state.VersionKey]interval.Set, len(keys))
	uniq := make([]state.VersionKey, 0, len(keys))
	for _, k := range keys {
		if _, dup := out[k]; !dup {
			out[k] = interval.Set{}
			uniq = append(uniq, k)
		}
	}
	if len(uniq) == 0 {
		return out, nil
	}
	names := make([]string, len(uniq))
	versions := make([]string, len(uniq))
	for i, k := range uniq {
		names[i], versions[i] = k.Name, k.Version
	}
	if lockKeys {
		_, err := q.Exec(ctx, `
			SELECT 1 FROM interval_keys k
			JOIN unnest($1::text[], $2::text[]) AS u(n, v) ON k.name = u.n AND k.version = u.v
			ORDER BY k.name, k.version
			FOR SHARE OF k`, names, versions)
		if err != nil {
			return nil, fmt.Errorf("postgres state: locking the intervals of %d versions: %w", len(uniq), err)
		}
	}
	// Rows name their key by its position in the arrays, so that only
	// integers travel back.
	rows, err := q.Query(ctx, `
		SELECT u.idx, i.start_us, i.end_us
		FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS u(n, v, idx)
		JOIN intervals i ON i.name = u.n AND i.version = u.v`, names, versions)
	if err != nil {
		return nil, fmt.Errorf("postgres state: reading the intervals of %d versions: %w", len(uniq), err)
	}
	defer rows.Close()
	stored := make([][]storekit.RangeMicros, len(uniq))
	var idx int64
	var r storekit.RangeMicros
	for rows.Next() {
		if err := rows.Scan(&idx, &r.Start, &r.End); err != nil {
			return nil, fmt.Errorf("postgres state: reading intervals: %w", err)
		}
		if idx < 1 || idx > int64(len(uniq)) {
			return nil, fmt.Errorf("postgres state: reading intervals: key position %d out of range", idx)
		}
		stored[idx-1] = append(stored[idx-1], r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres state: reading intervals: %w", err)
	}
	for i, rs := range stored {
		if len(rs) > 0 {
			out[uniq[i]] = storekit.SetFromMicros(rs)
		}
	}
	return out, nil
}

// LastWrites returns the last write of every key among keys that has one, in
// one query however many keys there are (the keys travel as two arrays
// joined with unnest, as in GetIntervals). Keys without one are absent.
func (s *Store) LastWrites(ctx context.Context, keys []state.VersionKey) (map[state.VersionKey]state.LastWrite, error) {
	out := make(map[state.VersionKey]state.LastWrite, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	names := make([]string, len(keys))
	versions := make([]string, len(keys))
	for i, k := range keys {
		names[i], versions[i] = k.Name, k.Version
	}
	rows, err := s.pool.Query(ctx, `
		SELECT k.name, k.version, k.last_write_at_us, k.last_write_start_us, k.last_write_end_us
		FROM (SELECT DISTINCT n, v FROM unnest($1::text[], $2::text[]) AS u(n, v)) u
		JOIN interval_keys k ON k.name = u.n AND k.version = u.v
		WHERE k.last_write_at_us IS NOT NULL`, names, versions)
	if err != nil {
		return nil, fmt.Errorf("postgres state: reading the last writes of %d versions: %w", len(keys), err)
	}
	defer rows.Close()
	var k state.VersionKey
	var at int64
	var r storekit.RangeMicros
	for rows.Next() {
		if err := rows.Scan(&k.Name, &k.Version, &at, &r.Start, &r.End); err != nil {
			return nil, fmt.Errorf("postgres state: reading last writes: %w", err)
		}
		out[k] = state.LastWrite{At: storekit.FromMicros(at), Range: r.Range()}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres state: reading last writes: %w", err)
	}
	return out, nil
}

// AddIntervals marks p.Ranges as computed for p.Key, and repairs the
// freshness debts of p.Key that this completes; see writeIntervals. p.Now is
// required: it is the repair time.
func (s *Store) AddIntervals(ctx context.Context, p state.IntervalsParams) error {
	if p.Now.IsZero() {
		return fmt.Errorf("postgres state: add intervals of %s@%s: %w", p.Key.Name, p.Key.Version, errNoNow)
	}
	return s.writeIntervals(ctx, p, false)
}

// RemoveIntervals marks p.Ranges as no longer computed for p.Key; see
// writeIntervals.
func (s *Store) RemoveIntervals(ctx context.Context, p state.IntervalsParams) error {
	return s.writeIntervals(ctx, p, true)
}

// writeIntervals adds (or removes) ranges of one key in one transaction.
//
// Invariants:
//   - No lost update: the key's row in interval_keys is locked (an upsert,
//     which takes the row lock even when the row exists) before the key's
//     ranges are read, so concurrent writers of one key run one after the
//     other and each reads what the previous one committed.
//   - Compaction: the stored ranges of a key never overlap or touch. Only
//     the stored ranges that overlap or touch a written range can change;
//     they are read, merged with (or cut by) the written ranges in Go with
//     interval.Set, and replaced, so the result is again merged. Ranges that
//     do not change are not rewritten.
//   - Fencing: with p.Fence set, the fence's evidence (the lease row, or the
//     environment row) is locked FOR SHARE and checked first, in the same
//     transaction; a stale fence returns state.ErrFenced and nothing is
//     written. A takeover or promotion racing the write waits for it to
//     commit, so the write is ordered before the change that made it stale.
//   - Last write (adds only): the upsert that locks the key's row also
//     sets its last write (state.LastWrite) to p.Now and the span of
//     p.Ranges, so it commits or rolls back with the ranges: a stale fence
//     or any failure records nothing. An empty p.Ranges records nothing.
//   - Debt repair (adds only): in the same transaction, every open debt of
//     the key whose range the merged ranges now cover is stamped repaired at
//     p.Now, with one gap_repaired event; a stale fence repairs nothing. The
//     key's open debts are read after the key row is locked FOR UPDATE, and
//     a promotion that records a debt holds that row FOR SHARE from before
//     it reads the key's coverage until it commits (see debtWriter),
//     so a debt and the write that completes its range never miss each
//     other: one of the two transactions always sees the other's commit.
//     A debt that a promotion settles meanwhile is left alone (see
//     repairDebts): a debt is never both repaired and superseded.
//
// Instants are stored as microseconds (storekit.Micros); a boundary finer than
// a microsecond is refused and nothing is written.
func (s *Store) writeIntervals(ctx context.Context, p state.IntervalsParams, remove bool) error {
	verb := "add"
	if remove {
		verb = "remove"
	}
	if p.Key.Name == "" || p.Key.Version == "" {
		return fmt.Errorf("postgres state: %s intervals: the key needs a name and a version, got %+v", verb, p.Key)
	}
	var fence *state.Fence
	if p.Fence != nil {
		f := *p.Fence
		if err := storekit.ValidateFence(f, p.Now); err != nil {
			return fmt.Errorf("postgres state: %s intervals of %s@%s: %w", verb, p.Key.Name, p.Key.Version, err)
		}
		fence = &f
	}
	written, err := microsSet(p.Ranges)
	if err != nil {
		return fmt.Errorf("postgres state: %s intervals of %s@%s: %w", verb, p.Key.Name, p.Key.Version, err)
	}
	now := storekit.Micros(p.Now)
	err = s.retry(ctx, func() error { return s.writeKey(ctx, p.Key, written, fence, now, remove) })
	if err != nil {
		return fmt.Errorf("postgres state: %s intervals %v of %s@%s: %w", verb, p.Ranges, p.Key.Name, p.Key.Version, err)
	}
	return nil
}

// microsSet returns s checked to be storable as it is: every boundary a
// whole microsecond within int64 microseconds (storekit.CheckMicros). A finer
// boundary is refused rather than rounded, and one out of range rather than
// wrapped, since either would silently change what the caller recorded.
func microsSet(s interval.Set) (interval.Set, error) {
	if err := storekit.CheckMicros(s); err != nil {
		return interval.Set{}, err
	}
	return s, nil
}

// writeKey is one attempt at writeIntervals' transaction, in two round
// trips on one connection. The first batch pipelines BEGIN, the fence check,
// the key lock, the read of the touched ranges and, for an add, the read of
// the key's open debts (each still a statement of its own, so the reads'
// snapshots are taken after the lock is granted). The merged ranges are
// computed in Go with interval.Set, and the second batch pipelines their
// write and COMMIT. Only when the write completes the range of an open debt
// does the transaction take more round trips, to stamp the repair and append
// its events before COMMIT. With remove, written is cut out of the touched
// ranges instead of merged into them. Any failure leaves the
// transaction uncommitted, and it is rolled back before the connection goes
// back to the pool.
func (s *Store) writeKey(ctx context.Context, key state.VersionKey, written interval.Set, fence *state.Fence, now int64, remove bool) (err error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("acquiring a connection: %w", err)
	}
	defer func() {
		if conn.Conn().PgConn().TxStatus() != 'I' {
			// Left inside a transaction: roll it back. Should that fail,
			// the pool destroys the connection on release, which ends it.
			_, _ = conn.Exec(context.WithoutCancel(ctx), "ROLLBACK")
		}
		conn.Release()
	}()

	ws := storekit.ToMicros(written)
	starts := make([]int64, len(ws))
	ends := make([]int64, len(ws))
	for i, r := range ws {
		starts[i], ends[i] = r.Start, r.End
	}
	var touched []storekit.RangeMicros
	var open []state.Debt // the key's open debts, read only by adds
	first := &pgx.Batch{}
	first.Queue("BEGIN ISOLATION LEVEL READ COMMITTED")
	if fence != nil {
		queueFence(first, *fence, now)
	}
	if len(ws) > 0 {
		if remove {
			first.Queue(`
				INSERT INTO interval_keys (name, version) VALUES ($1, $2)
				ON CONFLICT (name, version) DO UPDATE SET rev = interval_keys.rev + 1`,
				key.Name, key.Version)
		} else {
			// The same upsert stamps the key's last write: no statement
			// or round trip of its own.
			first.Queue(`
				INSERT INTO interval_keys (name, version, last_write_at_us, last_write_start_us, last_write_end_us)
				VALUES ($1, $2, $3, $4, $5)
				ON CONFLICT (name, version) DO UPDATE SET rev = interval_keys.rev + 1,
					last_write_at_us = EXCLUDED.last_write_at_us,
					last_write_start_us = EXCLUDED.last_write_start_us,
					last_write_end_us = EXCLUDED.last_write_end_us`,
				key.Name, key.Version, now, starts[0], ends[len(ends)-1])
		}
		first.Queue(`
			SELECT start_us, end_us FROM intervals i
			WHERE name = $1 AND version = $2 AND start_us <= $3 AND end_us >= $4
			  AND EXISTS (SELECT 1 FROM unnest($5::int8[], $6::int8[]) AS w(s, e)
			              WHERE i.start_us <= w.e AND i.end_us >= w.s)`,
			key.Name, key.Version, ends[len(ends)-1], starts[0], starts, ends).Query(func(rows pgx.Rows) error {
			var err error
			touched, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (storekit.RangeMicros, error) {
				var r storekit.RangeMicros
				err := row.Scan(&r.Start, &r.End)
				return r, err
			})
			return err
		})
		if !remove {
			// Pipelined with the rest: on the common path (no open debt)
			// this costs one index probe and no round trip.
			first.Queue(openDebtsQuery, key.Name, key.Version).Query(func(rows pgx.Rows) error {
				var err error
				open, err = collectDebts(rows)
				return err
			})
		}
	}
	if err := conn.SendBatch(ctx, first).Close(); err != nil {
		return err
	}
	if fence != nil && s.afterFence != nil {
		s.afterFence()
	}

	second := &pgx.Batch{}
	var repaired []state.Debt
	if len(ws) > 0 {
		before := storekit.SetFromMicros(touched)
		var after interval.Set
		if remove {
			after = before.Subtract(written)
		} else {
			after = before.Union(written)
		}
		repaired = coveredDebts(open, after, now)
		del, ins := diffRanges(touched, storekit.ToMicros(after))
		if len(del) > 0 {
			second.Queue(`DELETE FROM intervals WHERE name = $1 AND version = $2 AND start_us = ANY($3::int8[])`,
				key.Name, key.Version, del)
		}
		if len(ins) > 0 {
			insStarts := make([]int64, len(ins))
			insEnds := make([]int64, len(ins))
			for i, r := range ins {
				insStarts[i], insEnds[i] = r.Start, r.End
			}
			second.Queue(`
				INSERT INTO intervals (name, version, start_us, end_us)
				SELECT $1, $2, s, e FROM unnest($3::int8[], $4::int8[]) AS u(s, e)`,
				key.Name, key.Version, insStarts, insEnds)
		}
	}
	if len(repaired) == 0 {
		queueCommit(second)
	}
	if err := conn.SendBatch(ctx, second).Close(); err != nil {
		return fmt.Errorf("writing the merged ranges: %w", err)
	}
	if len(repaired) == 0 {
		return nil
	}
	if err := repairDebts(ctx, conn, repaired); err != nil {
		return err
	}
	commit := &pgx.Batch{}
	queueCommit(commit)
	if err := conn.SendBatch(ctx, commit).Close(); err != nil {
		return fmt.Errorf("committing: %w", err)
	}
	return nil
}

// queueCommit queues a COMMIT that fails the batch unless the transaction
// really committed (a failed transaction answers COMMIT with ROLLBACK).
func queueCommit(b *pgx.Batch) {
	b.Queue("COMMIT").Exec(func(tag pgconn.CommandTag) error {
		if tag.String() != "COMMIT" {
			return fmt.Errorf("the transaction ended with %s instead of COMMIT", tag)
		}
		return nil
	})
}

// coveredDebts returns the debts among open whose range after covers,
// stamped repaired at now (microseconds).
//
// after holds the merged form of every stored range that touches a written
// range, so it holds every stored range that this write changed. A debt
// that this write completes is covered by one merged range, which contains
// a written range, so it is in after. (A debt covered without this write was
// already stamped, by the write that covered it or, when it was recorded,
// by its promotion.)
func coveredDebts(open []state.Debt, after interval.Set, now int64) []state.Debt {
	var out []state.Debt
	for _, d := range open {
		if after.Covers(d.Range) {
			d.RepairedAt = storekit.FromMicros(now)
			out = append(out, d)
		}
	}
	return out
}

// repairDebts stamps the debts repaired (at their RepairedAt) and appends
// one gap_repaired event for each debt it stamped, inside the interval
// write's transaction on conn. The debts are locked in id order, like a
// promotion that settles debts locks them (see lockUnservedOpenDebts), so
// the two never deadlock, and the lock re-checks that each debt is still
// open: one that a promotion settled since the write read it (READ
// COMMITTED re-evaluates the condition on the committed row) is neither
// stamped nor announced, so a debt is never both repaired and superseded,
// and never repaired twice (the key row lock orders the writes of one key).
func repairDebts(ctx context.Context, conn *pgxpool.Conn, debts []state.Debt) error {
	ids := make([]int64, len(debts))
	for i, d := range debts {
		ids[i] = d.ID
	}
	rows, err := conn.Query(ctx, `
		WITH locked AS (
			SELECT id FROM debts WHERE id = ANY($2::int8[]) AND `+openDebt+`
			ORDER BY id FOR UPDATE)
		UPDATE debts SET repaired_at_us = $1 FROM locked WHERE debts.id = locked.id
		RETURNING debts.id`,
		storekit.Micros(debts[0].RepairedAt), ids)
	if err != nil {
		return fmt.Errorf("stamping %d debts repaired: %w", len(debts), err)
	}
	stamped, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return fmt.Errorf("stamping %d debts repaired: %w", len(debts), err)
	}
	var events []state.Event
	for _, d := range debts { // in id order, like openDebtsQuery
		if !slices.Contains(stamped, d.ID) {
			continue // settled by a promotion meanwhile
		}
		ev, err := debt.RepairedEvent(d)
		if err != nil {
			return err
		}
		events = append(events, ev)
	}
	encoded, err := encodeEvents(events)
	if err != nil {
		return err
	}
	if _, err := encoded.insert(ctx, conn); err != nil {
		return fmt.Errorf("appending %d gap_repaired events: %w", len(debts), err)
	}
	return nil
}

// diffRanges returns the starts of the stored ranges that are not in after
// (to delete) and the ranges of after that are not stored (to insert).
// Ranges present in both are left alone.
func diffRanges(stored, after []storekit.RangeMicros) (del []int64, ins []storekit.RangeMicros) {
	keep := make(map[storekit.RangeMicros]bool, len(after))
	for _, r := range after {
		keep[r] = true
	}
	have := make(map[storekit.RangeMicros]bool, len(stored))
	for _, r := range stored {
		have[r] = true
		if !keep[r] {
			del = append(del, r.Start)
		}
	}
	for _, r := range after {
		if !have[r] {
			ins = append(ins, r)
		}
	}
	slices.Sort(del)
	return del, ins
}

// CheckFence reports whether f's evidence still holds at now, without
// writing (see state.Store.CheckFence): the same checks as a fenced write,
// in one round trip, outside any transaction.
func (s *Store) CheckFence(ctx context.Context, f state.Fence, now time.Time) error {
	if err := storekit.ValidateFence(f, now); err != nil {
		return fmt.Errorf("postgres state: %w", err)
	}
	b := &pgx.Batch{}
	queueFence(b, f, storekit.Micros(now))
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("postgres state: %w", err)
	}
	return nil
}

// queueFence queues, right after the batch's BEGIN, the check that the
// evidence f holds at now, locking that evidence FOR SHARE until the
// transaction ends: the lease row (its token unexpired at now), and/or the
// environment row (still at the generation), and/or the source row (still
// serving the source generation), in that order. A concurrent takeover,
// release, promotion, swap or deletion therefore waits for the write. When the evidence is
// stale, the batch fails with an error wrapping state.ErrFenced.
func queueFence(b *pgx.Batch, f state.Fence, now int64) {
	if f.LeaseKey != "" {
		b.Queue(`
			SELECT true FROM leases WHERE key = $1 AND token = $2 AND expires_at_us > $3
			FOR SHARE`, f.LeaseKey, f.LeaseToken, now).QueryRow(func(row pgx.Row) error {
			var held bool
			err := row.Scan(&held)
			if errors.Is(err, pgx.ErrNoRows) {
				return fmt.Errorf("lease %q is no longer held by the fence's token at %v: %w", f.LeaseKey, storekit.FromMicros(now), state.ErrFenced)
			}
			if err != nil {
				return fmt.Errorf("checking the fence on lease %q: %w", f.LeaseKey, err)
			}
			return nil
		})
	}
	queueSourceFence(b, f)
	if f.Environment == "" {
		return
	}
	b.Queue(`
		SELECT generation FROM environments WHERE name = $1 AND NOT deleted
		FOR SHARE`, f.Environment).QueryRow(func(row pgx.Row) error {
		var gen int64
		err := row.Scan(&gen)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("environment %q no longer exists (fence generation %d): %w", f.Environment, f.Generation, state.ErrFenced)
		}
		if err != nil {
			return fmt.Errorf("checking the fence on environment %q: %w", f.Environment, err)
		}
		if gen != f.Generation {
			return fmt.Errorf("environment %q is at generation %d, the fence expects %d: %w", f.Environment, gen, f.Generation, state.ErrFenced)
		}
		return nil
	})
}

// queueSourceFence queues the source form of f: the source is defined and
// serves f.SourceGeneration, its row locked FOR SHARE.
func queueSourceFence(b *pgx.Batch, f state.Fence) {
	if f.Source == "" {
		return
	}
	b.Queue(`
		SELECT serving_generation FROM sources WHERE name = $1 AND removed_at_us = 0
		FOR SHARE`, f.Source).QueryRow(func(row pgx.Row) error {
		var serving int64
		err := row.Scan(&serving)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("source %q is not defined (fence expects it to serve generation %d): %w", f.Source, f.SourceGeneration, state.ErrFenced)
		}
		if err != nil {
			return fmt.Errorf("checking the fence on source %q: %w", f.Source, err)
		}
		if serving != f.SourceGeneration {
			return fmt.Errorf("source %q serves generation %d, the fence expects %d: %w", f.Source, serving, f.SourceGeneration, state.ErrFenced)
		}
		return nil
	})
}

// DeleteIntervals removes every interval of the given versions (the
// janitor's job), their last writes (with their interval_keys rows) and
// their last-served times. The keys' rows are locked in key order first, so it waits
// for interval writers and promotion checks on those keys and never
// deadlocks with another DeleteIntervals.
func (s *Store) DeleteIntervals(ctx context.Context, keys []state.VersionKey) error {
	if len(keys) == 0 {
		return nil
	}
	names := make([]string, len(keys))
	versions := make([]string, len(keys))
	for i, k := range keys {
		names[i], versions[i] = k.Name, k.Version
	}
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `
			SELECT 1 FROM interval_keys k
			JOIN (SELECT DISTINCT n, v FROM unnest($1::text[], $2::text[]) AS u(n, v)) u
			  ON k.name = u.n AND k.version = u.v
			ORDER BY k.name, k.version
			FOR UPDATE OF k`, names, versions); err != nil {
			return fmt.Errorf("locking: %w", err)
		}
		if _, err := tx.Exec(ctx, `
			DELETE FROM intervals i USING unnest($1::text[], $2::text[]) AS u(n, v)
			WHERE i.name = u.n AND i.version = u.v`, names, versions); err != nil {
			return fmt.Errorf("deleting ranges: %w", err)
		}
		if _, err := tx.Exec(ctx, `
			DELETE FROM interval_keys k USING unnest($1::text[], $2::text[]) AS u(n, v)
			WHERE k.name = u.n AND k.version = u.v`, names, versions); err != nil {
			return fmt.Errorf("deleting interval records: %w", err)
		}
		if _, err := tx.Exec(ctx, `
			DELETE FROM version_last_served s USING unnest($1::text[], $2::text[]) AS u(n, v)
			WHERE s.name = u.n AND s.version = u.v`, names, versions); err != nil {
			return fmt.Errorf("deleting last-served times: %w", err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("postgres state: delete the intervals of %d versions: %w", len(keys), err)
	}
	return nil
}

// CountIntervalRows returns the number of stored interval ranges across all
// keys. Because writes compact, it is the number of gap-separated runs, never
// the number of buckets; the conformance suite uses it to prove compaction.
func (s *Store) CountIntervalRows(ctx context.Context) (int, error) {
	var n int
	if err := s.pool.QueryRow(ctx, "SELECT count(*) FROM intervals").Scan(&n); err != nil {
		return 0, fmt.Errorf("postgres state: counting interval rows: %w", err)
	}
	return n, nil
}
