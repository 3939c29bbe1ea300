package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/state/internal/storekit"
)

// AddIntervals marks p.Ranges as computed for p.Key.
//
// Invariants:
//   - the fence check, the read of the stored ranges the new ones touch,
//     and the rewrite of their merged form happen in one IMMEDIATE
//     transaction, so concurrent adds on one key never lose each other, and
//     the key's rows stay disjoint and non-adjacent (one row per
//     gap-separated range, never one per bucket). A stale fence writes
//     nothing;
//   - in the same transaction, the key's last write (state.LastWrite) is
//     set to p.Now and the span of p.Ranges: one upsert by primary key,
//     whatever the key's history. An empty p.Ranges writes nothing and
//     records nothing;
//   - in the same transaction, every open freshness debt of the key whose
//     range is now covered is stamped repaired at p.Now, with one
//     gap_repaired event (see repairDebts). The write lock serialises this
//     with promotions, so a debt and the write that repairs it never miss
//     each other.
//
// p.Now is required: it is the repair time of any debt the write completes.
func (s *Store) AddIntervals(ctx context.Context, p state.IntervalsParams) error {
	if p.Now.IsZero() {
		return fmt.Errorf("sqlite: add intervals to %s@%s: %w", p.Key.Name, p.Key.Version, errNoNow)
	}
	if err := s.changeIntervals(ctx, p, true); err != nil {
		return fmt.Errorf("sqlite: add intervals to %s@%s: %w", p.Key.Name, p.Key.Version, err)
	}
	return nil
}

// RemoveIntervals marks p.Ranges as no longer computed for p.Key (a
// restatement). It keeps the same invariants as AddIntervals; removing the
// middle of a range splits its row in two.
func (s *Store) RemoveIntervals(ctx context.Context, p state.IntervalsParams) error {
	if err := s.changeIntervals(ctx, p, false); err != nil {
		return fmt.Errorf("sqlite: remove intervals from %s@%s: %w", p.Key.Name, p.Key.Version, err)
	}
	return nil
}

// changeIntervals adds (add) or removes p.Ranges, see AddIntervals.
func (s *Store) changeIntervals(ctx context.Context, p state.IntervalsParams, add bool) error {
	if err := checkKey(p.Key); err != nil {
		return err
	}
	if err := checkRanges(p.Ranges); err != nil {
		return err
	}
	if err := validFence(p.Fence, p.Now); err != nil {
		return err
	}
	// An add is a record (see the package comment: losing the last one to a
	// power loss only makes its interval due again); a removal is synced,
	// since a resumed restatement skips what state says is covered.
	write, st := s.write, s.stmts
	if add {
		write, st = s.writeRecord, s.recStmts
	}
	return write(ctx, func(tx *sql.Tx) error {
		if err := s.checkFence(ctx, tx, st, p.Fence, p.Now); err != nil {
			return err
		}
		if p.Ranges.IsEmpty() {
			return nil
		}
		span := p.Ranges.Span()
		lo, hi := span.Start.UnixMicro(), span.End.UnixMicro()
		window := st.windowAdd
		if !add {
			window = st.windowRemove
		}
		old, err := loadRanges(ctx, tx.StmtContext(ctx, window), p.Key.Name, p.Key.Version, lo, hi)
		if err != nil {
			return err
		}
		next := storekit.SetFromMicros(old)
		if add {
			next = next.Union(p.Ranges)
		} else {
			next = next.Subtract(p.Ranges)
		}
		if err := rewriteRanges(ctx, tx, st, p.Key, old, storekit.ToMicros(next)); err != nil {
			return err
		}
		if !add {
			return nil // removing coverage never repairs a debt, nor is a last write
		}
		if _, err := tx.StmtContext(ctx, st.recordLastWrite).ExecContext(ctx,
			p.Key.Name, p.Key.Version, storekit.Micros(p.Now), lo, hi); err != nil {
			return fmt.Errorf("recording the last write: %w", err)
		}
		return repairDebts(ctx, tx, st, p.Key, p.Now)
	})
}

// recordLastWriteQuery sets the last write of a key (?1, ?2): at ?3, the
// span [?4, ?5).
const recordLastWriteQuery = `
	INSERT INTO interval_last_writes (name, version, at_us, start_us, end_us) VALUES (?1, ?2, ?3, ?4, ?5)
	ON CONFLICT (name, version) DO UPDATE SET at_us = ?3, start_us = ?4, end_us = ?5`

// windowQuery selects the stored rows of a key (?1, ?2) that a change of
// [lo, hi) = [?3, ?4) can affect: for an add, the rows touching [lo, hi]
// (they merge); for a removal, the rows overlapping [lo, hi) (they are cut).
// Rows are disjoint and sorted, so no affected row starts before the last
// row starting at or before lo: the primary-key search starts there instead
// of at the key's first row.
func windowQuery(add bool) string {
	cond := `start_us <= ?4 AND end_us >= ?3`
	if !add {
		cond = `start_us < ?4 AND end_us > ?3`
	}
	return `SELECT start_us, end_us FROM intervals
		WHERE name = ?1 AND version = ?2 AND ` + cond + ` AND start_us >= COALESCE(
			(SELECT MAX(start_us) FROM intervals WHERE name = ?1 AND version = ?2 AND start_us <= ?3), ?3)`
}

// loadRanges runs query (which selects start_us, end_us) and collects the
// rows.
func loadRanges(ctx context.Context, query *sql.Stmt, args ...any) ([]storekit.RangeMicros, error) {
	rows, err := query.QueryContext(ctx, args...)
	if err != nil {
		return nil, fmt.Errorf("reading stored ranges: %w", err)
	}
	defer rows.Close()
	var out []storekit.RangeMicros
	for rows.Next() {
		var r storekit.RangeMicros
		if err := rows.Scan(&r.Start, &r.End); err != nil {
			return nil, fmt.Errorf("reading stored ranges: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading stored ranges: %w", err)
	}
	return out, nil
}

// rewriteRanges turns the stored rows old into next, touching only the rows
// that differ: deletes first, so that a range whose end moved can be
// reinserted at the same start. The commonest change, one range whose end
// moved (a batch appended to the range it continues), is one UPDATE of
// that row. st are the statements of tx's pool.
func rewriteRanges(ctx context.Context, tx *sql.Tx, st *stmts, k state.VersionKey, old, next []storekit.RangeMicros) error {
	if len(old) == 1 && len(next) == 1 && old[0].Start == next[0].Start && old[0].End != next[0].End {
		if _, err := tx.StmtContext(ctx, st.moveRangeEnd).ExecContext(ctx, next[0].End, k.Name, k.Version, old[0].Start); err != nil {
			return fmt.Errorf("moving the end of a merged range: %w", err)
		}
		return nil
	}
	del, ins := tx.StmtContext(ctx, st.deleteRange), tx.StmtContext(ctx, st.insertRange)
	keep := make(map[storekit.RangeMicros]bool, len(next))
	for _, r := range next {
		keep[r] = true
	}
	had := make(map[storekit.RangeMicros]bool, len(old))
	for _, r := range old {
		had[r] = true
		if keep[r] {
			continue
		}
		if _, err := del.ExecContext(ctx, k.Name, k.Version, r.Start); err != nil {
			return fmt.Errorf("deleting a merged range: %w", err)
		}
	}
	for _, r := range next {
		if had[r] {
			continue
		}
		if _, err := ins.ExecContext(ctx, k.Name, k.Version, r.Start, r.End); err != nil {
			return fmt.Errorf("writing a merged range: %w", err)
		}
	}
	return nil
}

// GetIntervals returns the covered set of every key, in one query however
// many keys there are: the keys travel as one JSON parameter and are joined
// through json_each. Unknown keys map to an empty set.
func (s *Store) GetIntervals(ctx context.Context, keys []state.VersionKey) (map[state.VersionKey]interval.Set, error) {
	out, err := getIntervals(ctx, func(param string) (*sql.Rows, error) {
		return s.stmts.getIntervals.QueryContext(ctx, param)
	}, keys)
	if err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	return out, nil
}

// getIntervalsQuery reads the ranges of the keys in its one parameter, a
// JSON array of [name, version] pairs, naming each row's key by its index
// in that array. CROSS JOIN keeps the key list as the outer loop, so each
// key is one primary-key range search into intervals, and a key's rows
// arrive together, in start order.
const getIntervalsQuery = `
	SELECT k.key, i.start_us, i.end_us
	FROM json_each(?) AS k CROSS JOIN intervals AS i
	WHERE i.name = json_extract(k.value, '$[0]') AND i.version = json_extract(k.value, '$[1]')`

// getIntervals is GetIntervals through query, which runs getIntervalsQuery
// with its one parameter (on the pool's prepared statement, or in a
// promotion's transaction: txIntervals).
func getIntervals(ctx context.Context, query func(param string) (*sql.Rows, error), keys []state.VersionKey) (map[state.VersionKey]interval.Set, error) {
	out := make(map[state.VersionKey]interval.Set, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	distinct := distinctKeys(keys)
	param, err := keysJSON(distinct)
	if err != nil {
		return nil, err
	}
	rows, err := query(param)
	if err != nil {
		return nil, fmt.Errorf("reading intervals of %d keys: %w", len(distinct), err)
	}
	defer rows.Close()
	// Collect every row flat, then cut per key: no allocation per key
	// beyond its Set.
	var idx []int64
	var all []storekit.RangeMicros
	for rows.Next() {
		var i int64
		var r storekit.RangeMicros
		if err := rows.Scan(&i, &r.Start, &r.End); err != nil {
			return nil, fmt.Errorf("reading intervals: %w", err)
		}
		if i < 0 || i >= int64(len(distinct)) {
			return nil, fmt.Errorf("reading intervals: key index %d out of range", i)
		}
		idx = append(idx, i)
		all = append(all, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading intervals: %w", err)
	}
	for i, rs := range groupByKey(len(distinct), idx, all) {
		out[distinct[i]] = storekit.SetFromMicros(rs)
	}
	return out, nil
}

// txIntervals runs getIntervalsQuery in tx (getIntervals's query).
func txIntervals(ctx context.Context, tx *sql.Tx) func(param string) (*sql.Rows, error) {
	return func(param string) (*sql.Rows, error) { return tx.QueryContext(ctx, getIntervalsQuery, param) }
}

// LastWrites returns the last write of every key among keys that has one, in
// one query however many keys there are (the keys travel as one JSON
// parameter, as in GetIntervals). Keys without one are absent.
func (s *Store) LastWrites(ctx context.Context, keys []state.VersionKey) (map[state.VersionKey]state.LastWrite, error) {
	out := make(map[state.VersionKey]state.LastWrite, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	distinct := distinctKeys(keys)
	param, err := keysJSON(distinct)
	if err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	rows, err := s.db.QueryContext(ctx, `
		SELECT k.key, w.at_us, w.start_us, w.end_us
		FROM json_each(?) AS k CROSS JOIN interval_last_writes AS w
		WHERE w.name = json_extract(k.value, '$[0]') AND w.version = json_extract(k.value, '$[1]')`, param)
	if err != nil {
		return nil, fmt.Errorf("sqlite: reading the last writes of %d keys: %w", len(distinct), err)
	}
	defer rows.Close()
	for rows.Next() {
		var i, at, start, end int64
		if err := rows.Scan(&i, &at, &start, &end); err != nil {
			return nil, fmt.Errorf("sqlite: reading last writes: %w", err)
		}
		if i < 0 || i >= int64(len(distinct)) {
			return nil, fmt.Errorf("sqlite: reading last writes: key index %d out of range", i)
		}
		out[distinct[i]] = state.LastWrite{At: storekit.FromMicros(at),
			Range: storekit.RangeMicros{Start: start, End: end}.Range()}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: reading last writes: %w", err)
	}
	return out, nil
}

// groupByKey returns, for each of n keys, the ranges whose idx is that key,
// in their original order, as sub-slices of one backing array.
func groupByKey(n int, idx []int64, all []storekit.RangeMicros) [][]storekit.RangeMicros {
	start := make([]int, n+1)
	for _, i := range idx {
		start[i+1]++
	}
	for i := range n {
		start[i+1] += start[i]
	}
	sorted := make([]storekit.RangeMicros, len(all))
	next := slices.Clone(start[:n])
	for j, i := range idx {
		sorted[next[i]] = all[j]
		next[i]++
	}
	out := make([][]storekit.RangeMicros, n)
	for i := range n {
		out[i] = sorted[start[i]:start[i+1]:start[i+1]]
	}
	return out
}

// distinctKeys returns keys without repetitions, in first-seen order.
func distinctKeys(keys []state.VersionKey) []state.VersionKey {
	seen := make(map[state.VersionKey]bool, len(keys))
	out := make([]state.VersionKey, 0, len(keys))
	for _, k := range keys {
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	return out
}

// keysJSON encodes keys as a JSON array of [name, version] pairs.
func keysJSON(keys []state.VersionKey) (string, error) {
	pairs := make([][2]string, len(keys))
	for i, k := range keys {
		pairs[i] = [2]string{k.Name, k.Version}
	}
	b, err := json.Marshal(pairs)
	if err != nil {
		return "", fmt.Errorf("encoding interval keys: %w", err)
	}
	return string(b), nil
}

// DeleteIntervals removes every stored range of the given versions, their
// last writes and their last-served times, in one transaction.
func (s *Store) DeleteIntervals(ctx context.Context, keys []state.VersionKey) error {
	if len(keys) == 0 {
		return nil
	}
	param, err := keysJSON(keys)
	if err != nil {
		return fmt.Errorf("sqlite: delete intervals: %w", err)
	}
	err = s.write(ctx, func(tx *sql.Tx) error {
		for _, table := range []string{"intervals", "interval_last_writes", "version_last_served"} {
			if _, err := tx.ExecContext(ctx, `
				DELETE FROM `+table+` WHERE (name, version) IN (
					SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each(?))`,
				param); err != nil {
				return fmt.Errorf("deleting from %s: %w", table, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("sqlite: delete intervals of %d versions: %w", len(keys), err)
	}
	return nil
}

// CountIntervalRows returns the number of stored interval rows, for tests
// that check storage is compacted (one row per gap-separated range).
func (s *Store) CountIntervalRows(ctx context.Context) (int, error) {
	var n int
	if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM intervals`).Scan(&n); err != nil {
		return 0, fmt.Errorf("sqlite: counting interval rows: %w", err)
	}
	return n, nil
}
