package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/state/debt"
	"github.com/gapless-dev/gapless/state/internal/storekit"
)

// debtColumns are the columns scanDebt reads, in order.
const debtColumns = `id, environment, model, version, start_us, end_us, plan_id, policy,
	bound, advances, accepted_at_us, repaired_at_us, superseded_at_us, carried_from`

// openDebt is the condition of an open debt. It is, word for word, the
// predicate of the partial indexes of migration 00002: SQLite uses a
// partial index only for a query that repeats it.
const openDebt = `repaired_at_us = 0 AND superseded_at_us = 0`

// hasOpenDebtQuery finds whether the key (?, ?) has an open debt: one probe
// of the debts_open_by_key index, which finds nothing on the hot path (a key
// without debts), at the cost of a one-column SELECT. (Running
// repairDebtsQuery directly costs several times as much even when it
// matches nothing: an UPDATE ... RETURNING materialises its result.)
const hasOpenDebtQuery = `SELECT 1 FROM debts WHERE model = ? AND version = ? AND ` + openDebt + ` LIMIT 1`

// repairDebtsQuery stamps repaired, at ?3, every open debt of the key (?1,
// ?2) whose range the key's stored intervals now cover, and returns them.
// Stored ranges are merged, so a debt's range is covered exactly when the
// last stored range starting at or before the debt's start reaches its end;
// that range is one primary-key probe.
const repairDebtsQuery = `
	UPDATE debts SET repaired_at_us = ?3
	WHERE model = ?1 AND version = ?2 AND ` + openDebt + `
	  AND end_us <= (SELECT i.end_us FROM intervals AS i
	                 WHERE i.name = ?1 AND i.version = ?2 AND i.start_us <= debts.start_us
	                 ORDER BY i.start_us DESC LIMIT 1)
	RETURNING ` + debtColumns

// scanDebt reads one row selected with debtColumns.
func scanDebt(sc interface{ Scan(...any) error }) (state.Debt, error) {
	var (
		d                              state.Debt
		start, end                     int64
		accepted, repaired, superseded int64
	)
	if err := sc.Scan(&d.ID, &d.Environment, &d.Model, &d.Version, &start, &end, &d.PlanID, &d.Policy,
		&d.Bound, &d.Advances, &accepted, &repaired, &superseded, &d.CarriedFrom); err != nil {
		return state.Debt{}, err
	}
	// Range boundaries are instants, not "unset" markers: 0 is the epoch.
	d.Range = interval.NewRange(time.UnixMicro(start), time.UnixMicro(end))
	d.AcceptedAt = storekit.FromMicros(accepted)
	d.RepairedAt = storekit.FromMicros(repaired)
	d.SupersededAt = storekit.FromMicros(superseded)
	return d, nil
}

// collectDebts scans every row of rows (selected with debtColumns) and
// returns the debts in id order.
func collectDebts(rows *sql.Rows) ([]state.Debt, error) {
	defer rows.Close()
	out := []state.Debt{}
	for rows.Next() {
		d, err := scanDebt(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b state.Debt) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

// ListDebts returns the debts matching f, in id order; zero fields do not
// filter.
func (s *Store) ListDebts(ctx context.Context, f state.DebtFilter) ([]state.Debt, error) {
	where := []string{"1 = 1"}
	var args []any
	for _, c := range []struct{ col, val string }{
		{"environment", f.Environment}, {"model", f.Model}, {"plan_id", f.PlanID},
	} {
		if c.val != "" {
			where = append(where, c.col+" = ?")
			args = append(args, c.val)
		}
	}
	if f.OpenOnly {
		where = append(where, openDebt)
	}
	rows, err := s.db.QueryContext(ctx,
		`SELECT `+debtColumns+` FROM debts WHERE `+strings.Join(where, " AND ")+` ORDER BY id`, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list debts: %w", err)
	}
	out, err := collectDebts(rows)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list debts: %w", err)
	}
	return out, nil
}

// debtWriter is the debt.Writer of a promotion's write transaction
// (debt.RecordCheckResult). The transaction holds the file's write lock,
// so no interval write can slip between the coverage reads and the
// inserts: the repair of a debt recorded or carried open is always left to
// a later AddIntervals, which sees it.
type debtWriter struct{ tx *sql.Tx }

func (w debtWriter) UnservedOpenDebts(ctx context.Context, env string, refs []state.SnapshotRef) ([]state.Debt, error) {
	return unservedOpenDebts(ctx, w.tx, env, refs)
}

func (w debtWriter) Coverage(ctx context.Context, keys []state.VersionKey) (map[state.VersionKey]interval.Set, error) {
	return getIntervals(ctx, txIntervals(ctx, w.tx), keys)
}

func (w debtWriter) InsertDebts(ctx context.Context, debts []state.Debt) error {
	for i := range debts {
		d := &debts[i]
		if err := insertDebt(ctx, w.tx, d); err != nil {
			return fmt.Errorf("recording debt %d (%s@%s %v): %w", i, d.Model, d.Version, d.Range, err)
		}
	}
	return nil
}

func (w debtWriter) Settle(ctx context.Context, settled []debt.Settlement) error {
	for i := range settled {
		s := &settled[i]
		if err := stampSettled(ctx, w.tx, s.Debt); err != nil {
			return err
		}
		for j := range s.Carried {
			c := &s.Carried[j]
			if err := insertDebt(ctx, w.tx, c); err != nil {
				return fmt.Errorf("carrying debt %d to %s@%s %v: %w", s.Debt.ID, c.Model, c.Version, c.Range, err)
			}
		}
	}
	return nil
}

func (w debtWriter) AppendEvents(ctx context.Context, events []state.Event) error {
	prepared, data, err := prepareEvents(events)
	if err != nil {
		return err
	}
	return insertEvents(ctx, w.tx, prepared, data)
}

// unservedOpenDebts returns, in id order, the open debts of environment env
// on a (model, version) that refs does not serve: one search of the
// debts_open_by_environment index.
func unservedOpenDebts(ctx context.Context, tx *sql.Tx, env string, refs []state.SnapshotRef) ([]state.Debt, error) {
	served, err := keysJSON(refKeys(refs))
	if err != nil {
		return nil, err
	}
	rows, err := tx.QueryContext(ctx, `
		SELECT `+debtColumns+` FROM debts
		WHERE environment = ? AND `+openDebt+`
		  AND (model, version) NOT IN (
			SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each(?))
		ORDER BY id`,
		env, served)
	if err != nil {
		return nil, fmt.Errorf("reading the open debts of versions no longer served: %w", err)
	}
	open, err := collectDebts(rows)
	if err != nil {
		return nil, fmt.Errorf("reading the open debts of versions no longer served: %w", err)
	}
	return open, nil
}

// insertDebt inserts d and sets its id.
func insertDebt(ctx context.Context, tx *sql.Tx, d *state.Debt) error {
	return tx.QueryRowContext(ctx, `
		INSERT INTO debts (environment, model, version, start_us, end_us, plan_id, policy,
			bound, advances, accepted_at_us, repaired_at_us, carried_from)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`,
		d.Environment, d.Model, d.Version, d.Range.Start.UnixMicro(), d.Range.End.UnixMicro(),
		d.PlanID, d.Policy, d.Bound, d.Advances, storekit.Micros(d.AcceptedAt), storekit.Micros(d.RepairedAt),
		d.CarriedFrom,
	).Scan(&d.ID)
}

// stampSettled writes the repair or supersession time a promotion settled d
// with. d was read open in this transaction, under the write lock, so it is
// still open: anything else is a broken invariant, and fails the promotion.
func stampSettled(ctx context.Context, tx *sql.Tx, d state.Debt) error {
	res, err := tx.ExecContext(ctx, `
		UPDATE debts SET repaired_at_us = ?, superseded_at_us = ?
		WHERE id = ? AND `+openDebt,
		storekit.Micros(d.RepairedAt), storekit.Micros(d.SupersededAt), d.ID)
	if err != nil {
		return fmt.Errorf("settling debt %d: %w", d.ID, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("settling debt %d: %w", d.ID, err)
	}
	if n != 1 {
		return fmt.Errorf("settling debt %d: it is no longer open", d.ID)
	}
	return nil
}

// supersedeOpenDebts stamps superseded at now every open debt of
// environment env (one search of the debts_open_by_environment index) and
// appends one gap_superseded event per debt (made by event:
// debt.InvalidatedEvent or debt.RemovedEvent), in id order, inside the
// caller's write transaction: Invalidate's or RemoveEnvironment's. The write
// lock is held, so no interval write can repair one of them meanwhile.
func supersedeOpenDebts(ctx context.Context, tx *sql.Tx, env string, now time.Time, event func(state.Debt) (state.Event, error)) error {
	rows, err := tx.QueryContext(ctx, `
		UPDATE debts SET superseded_at_us = ?
		WHERE environment = ? AND `+openDebt+`
		RETURNING `+debtColumns,
		storekit.Micros(now), env)
	if err != nil {
		return fmt.Errorf("superseding the open debts: %w", err)
	}
	superseded, err := collectDebts(rows) // sorted by id
	if err != nil {
		return fmt.Errorf("superseding the open debts: %w", err)
	}
	if len(superseded) == 0 {
		return nil
	}
	events := make([]state.Event, len(superseded))
	for i, d := range superseded {
		if events[i], err = event(d); err != nil {
			return err
		}
	}
	prepared, data, err := prepareEvents(events)
	if err != nil {
		return err
	}
	if err := insertEvents(ctx, tx, prepared, data); err != nil {
		return fmt.Errorf("appending gap_superseded events: %w", err)
	}
	return nil
}

// refKeys returns the interval keys of refs.
func refKeys(refs []state.SnapshotRef) []state.VersionKey {
	out := make([]state.VersionKey, len(refs))
	for i, r := range refs {
		out[i] = r.VersionKey()
	}
	return out
}

// repairDebts stamps repaired at now every open debt of key that the key's
// stored intervals now cover, and appends one gap_repaired event per debt,
// inside the caller's interval write transaction, after its ranges were
// rewritten. The write lock is held, so a debt is stamped exactly once.
//
// It runs on every batch a scheduler records, so a key without open debts
// (nearly always) costs one index probe and nothing more. st are the
// statements of tx's pool.
func repairDebts(ctx context.Context, tx *sql.Tx, st *stmts, key state.VersionKey, now time.Time) error {
	var one int
	err := tx.StmtContext(ctx, st.hasOpenDebt).QueryRowContext(ctx, key.Name, key.Version).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("looking up open debts: %w", err)
	}
	rows, err := tx.StmtContext(ctx, st.repairDebts).QueryContext(ctx, key.Name, key.Version, storekit.Micros(now))
	if err != nil {
		return fmt.Errorf("repairing debts: %w", err)
	}
	repaired, err := collectDebts(rows)
	if err != nil {
		return fmt.Errorf("repairing debts: %w", err)
	}
	if len(repaired) == 0 {
		return nil
	}
	events := make([]state.Event, len(repaired))
	for i, d := range repaired {
		if events[i], err = debt.RepairedEvent(d); err != nil {
			return err
		}
	}
	prepared, data, err := prepareEvents(events)
	if err != nil {
		return err
	}
	if err := insertEvents(ctx, tx, prepared, data); err != nil {
		return fmt.Errorf("appending gap_repaired events: %w", err)
	}
	return nil
}
