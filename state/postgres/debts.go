package postgres

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/state/debt"
	"github.com/gapless-dev/gapless/state/internal/storekit"
)

// debtColumns are the columns scanDebt reads, in order.
const debtColumns = `id, environment, model, version, start_us, end_us, plan_id, policy,
	bound, advances, accepted_at_us, repaired_at_us, superseded_at_us, carried_from`

// openDebt is the condition of an open debt: the predicate of the partial
// indexes of migration 00002, which a query must imply to use them.
const openDebt = `repaired_at_us = 0 AND superseded_at_us = 0`

// scanDebt reads one row selected with debtColumns.
func scanDebt(row pgx.Row) (state.Debt, error) {
	var (
		d                              state.Debt
		start, end                     int64
		accepted, repaired, superseded int64
	)
	if err := row.Scan(&d.ID, &d.Environment, &d.Model, &d.Version, &start, &end, &d.PlanID, &d.Policy,
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

// collectDebts reads every row of rows (selected with debtColumns) and
// returns the debts in id order (RETURNING gives no order).
func collectDebts(rows pgx.Rows) ([]state.Debt, error) {
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (state.Debt, error) { return scanDebt(row) })
	if err != nil {
		return nil, err
	}
	if out == nil {
		out = []state.Debt{}
	}
	slices.SortFunc(out, func(a, b state.Debt) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

// ListDebts returns the debts matching f, in id order; zero fields do not
// filter.
func (s *Store) ListDebts(ctx context.Context, f state.DebtFilter) ([]state.Debt, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT `+debtColumns+` FROM debts
		WHERE ($1::text = '' OR environment = $1)
		  AND ($2::text = '' OR model = $2)
		  AND ($3::text = '' OR plan_id = $3)
		  AND (NOT $4::bool OR (`+openDebt+`))
		ORDER BY id`,
		f.Environment, f.Model, f.PlanID, f.OpenOnly)
	if err != nil {
		return nil, fmt.Errorf("postgres state: listing debts: %w", err)
	}
	out, err := collectDebts(rows)
	if err != nil {
		return nil, fmt.Errorf("postgres state: listing debts: %w", err)
	}
	return out, nil
}

// debtWriter is the debt.Writer of a promotion's transaction
// (debt.RecordCheckResult).
//
// The debts to settle are locked FOR UPDATE before anything else here, so
// an interval write that read one of them open and means to repair it
// waits, and then finds it settled (see repairDebts): a debt is never both
// repaired and superseded, nor repaired twice. The two cannot deadlock: the
// write locks debts in id order, as here, and before them the row of the
// debts' own version, which this promotion does not serve, so it locks that
// row only through its Check's reader (FOR SHARE), before any debt; the
// write's other locks (the event lock) are taken after its debts. Events
// are appended last, under the event lock.
//
// A debt and the interval write that repairs it never miss each other: the
// coverage of the versions debts are recorded or carried on is read after
// locking their interval_keys rows FOR SHARE (creating the rows first when
// the version has never been written, since a missing row cannot be
// locked), and every AddIntervals holds its key's row FOR UPDATE from before
// it reads the key's open debts until it commits. So either the write
// committed first, and the coverage read here sees it (the debt is recorded
// repaired if covered, or not carried for what is covered), or it waits for
// this promotion to commit, and its read of the open debts sees the new
// debt.
//
// The promotion's transaction may be retried (deadlock); everything here is
// then redone from the retried check's result.
type debtWriter struct{ tx pgx.Tx }

func (w debtWriter) UnservedOpenDebts(ctx context.Context, env string, refs []state.SnapshotRef) ([]state.Debt, error) {
	return lockUnservedOpenDebts(ctx, w.tx, env, refs)
}

func (w debtWriter) Coverage(ctx context.Context, keys []state.VersionKey) (map[state.VersionKey]interval.Set, error) {
	return lockedCoverage(ctx, w.tx, keys)
}

func (w debtWriter) InsertDebts(ctx context.Context, debts []state.Debt) error {
	return insertDebts(ctx, w.tx, debts)
}

func (w debtWriter) Settle(ctx context.Context, settled []debt.Settlement) error {
	return writeSettlements(ctx, w.tx, settled)
}

func (w debtWriter) AppendEvents(ctx context.Context, events []state.Event) error {
	encoded, err := encodeEvents(events)
	if err != nil {
		return err
	}
	_, err = encoded.insert(ctx, w.tx)
	return err
}

// lockUnservedOpenDebts returns, in id order, the open debts of environment
// env on a (model, version) that refs does not serve, locked FOR UPDATE
// until the promotion commits. Under READ COMMITTED a debt an interval write
// is repairing is waited for and then re-read: if the write stamped it, it
// is no longer open and not returned.
func lockUnservedOpenDebts(ctx context.Context, tx pgx.Tx, env string, refs []state.SnapshotRef) ([]state.Debt, error) {
	names := make([]string, len(refs))
	versions := make([]string, len(refs))
	for i, r := range refs {
		names[i], versions[i] = r.Name, r.Version
	}
	rows, err := tx.Query(ctx, `
		SELECT `+debtColumns+` FROM debts
		WHERE environment = $1 AND `+openDebt+`
		  AND NOT EXISTS (SELECT 1 FROM unnest($2::text[], $3::text[]) AS u(n, v)
		                  WHERE u.n = debts.model AND u.v = debts.version)
		ORDER BY id
		FOR UPDATE`,
		env, names, versions)
	if err != nil {
		return nil, fmt.Errorf("locking the open debts of versions no longer served: %w", err)
	}
	open, err := collectDebts(rows)
	if err != nil {
		return nil, fmt.Errorf("locking the open debts of versions no longer served: %w", err)
	}
	return open, nil
}

// lockedCoverage reads the stored intervals of keys after locking their
// interval_keys rows FOR SHARE until the promotion commits (see
// debtWriter). Missing rows are created first, in key order, like
// every other locker of them does.
func lockedCoverage(ctx context.Context, tx pgx.Tx, keys []state.VersionKey) (map[state.VersionKey]interval.Set, error) {
	if len(keys) == 0 {
		return map[state.VersionKey]interval.Set{}, nil
	}
	names := make([]string, len(keys))
	versions := make([]string, len(keys))
	for i, k := range keys {
		names[i], versions[i] = k.Name, k.Version
	}
	if _, err := tx.Exec(ctx, `
		INSERT INTO interval_keys (name, version)
		SELECT DISTINCT n, v FROM unnest($1::text[], $2::text[]) AS u(n, v)
		ORDER BY n, v
		ON CONFLICT (name, version) DO NOTHING`, names, versions); err != nil {
		return nil, fmt.Errorf("creating the interval records of %d versions: %w", len(keys), err)
	}
	covered, err := getIntervals(ctx, tx, keys, true)
	if err != nil {
		return nil, fmt.Errorf("reading the coverage of %d versions: %w", len(keys), err)
	}
	return covered, nil
}

// writeSettlements stamps each settled debt repaired or superseded, and
// inserts the debts superseded ones are carried to, setting their ids. The
// settled debts were locked open by lockUnservedOpenDebts: one that is not
// open any more is a broken invariant, and fails the promotion.
func writeSettlements(ctx context.Context, tx pgx.Tx, settled []debt.Settlement) error {
	if len(settled) == 0 {
		return nil
	}
	n := len(settled)
	ids, repaired, superseded := make([]int64, n), make([]int64, n), make([]int64, n)
	var carried []state.Debt
	for i, s := range settled {
		ids[i], repaired[i], superseded[i] = s.Debt.ID, storekit.Micros(s.Debt.RepairedAt), storekit.Micros(s.Debt.SupersededAt)
		carried = append(carried, s.Carried...)
	}
	tag, err := tx.Exec(ctx, `
		UPDATE debts SET repaired_at_us = u.r, superseded_at_us = u.s
		FROM unnest($1::int8[], $2::int8[], $3::int8[]) AS u(id, r, s)
		WHERE debts.id = u.id AND `+openDebt,
		ids, repaired, superseded)
	if err != nil {
		return fmt.Errorf("settling %d debts: %w", n, err)
	}
	if tag.RowsAffected() != int64(n) {
		return fmt.Errorf("settling %d debts: only %d were still open", n, tag.RowsAffected())
	}
	if len(carried) == 0 {
		return nil
	}
	if err := insertDebts(ctx, tx, carried); err != nil {
		return fmt.Errorf("carrying %d debts: %w", len(carried), err)
	}
	for i := range settled {
		for j := range settled[i].Carried {
			settled[i].Carried[j].ID, carried = carried[0].ID, carried[1:]
		}
	}
	return nil
}

// supersedeOpenDebts stamps superseded at now every open debt of
// environment env and appends one gap_superseded event per debt (made by
// event: debt.InvalidatedEvent or debt.RemovedEvent), in id order, inside
// Invalidate's or RemoveEnvironment's transaction, after the environment row
// was locked. The debts are locked in id order,
// like every other locker of debts (a promotion settling them, an interval
// write repairing them), and the lock re-checks that each is still open:
// one an interval write repaired meanwhile (READ COMMITTED re-evaluates the
// condition on the committed row) is neither stamped nor announced. The
// event lock is taken last.
func supersedeOpenDebts(ctx context.Context, tx pgx.Tx, env string, now time.Time, event func(state.Debt) (state.Event, error)) error {
	rows, err := tx.Query(ctx, `
		WITH locked AS (
			SELECT id AS locked_id FROM debts WHERE environment = $1 AND `+openDebt+`
			ORDER BY id FOR UPDATE)
		UPDATE debts SET superseded_at_us = $2 FROM locked WHERE debts.id = locked.locked_id
		RETURNING `+debtColumns,
		env, storekit.Micros(now))
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
	encoded, err := encodeEvents(events)
	if err != nil {
		return err
	}
	if _, err := encoded.insert(ctx, tx); err != nil {
		return fmt.Errorf("appending %d gap_superseded events: %w", len(events), err)
	}
	return nil
}

// insertDebts inserts debts in one statement and sets their ids, increasing
// in argument order.
func insertDebts(ctx context.Context, tx pgx.Tx, debts []state.Debt) error {
	n := len(debts)
	envs, models, versions, plans, policies := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	starts, ends, bounds, advances := make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
	accepted, repaired, from := make([]int64, n), make([]int64, n), make([]int64, n)
	for i, d := range debts {
		envs[i], models[i], versions[i], plans[i], policies[i] = d.Environment, d.Model, d.Version, d.PlanID, d.Policy
		starts[i], ends[i] = d.Range.Start.UnixMicro(), d.Range.End.UnixMicro()
		bounds[i], advances[i] = int64(d.Bound), int64(d.Advances)
		accepted[i], repaired[i], from[i] = storekit.Micros(d.AcceptedAt), storekit.Micros(d.RepairedAt), d.CarriedFrom
	}
	rows, err := tx.Query(ctx, `
		INSERT INTO debts (environment, model, version, start_us, end_us, plan_id, policy,
			bound, advances, accepted_at_us, repaired_at_us, carried_from)
		SELECT e, m, v, s, x, p, po, b, a, acc, rep, cf
		FROM unnest($1::text[], $2::text[], $3::text[], $4::int8[], $5::int8[], $6::text[], $7::text[],
		            $8::int8[], $9::int8[], $10::int8[], $11::int8[], $12::int8[])
		     WITH ORDINALITY AS u(e, m, v, s, x, p, po, b, a, acc, rep, cf, ord)
		ORDER BY ord
		RETURNING id`,
		envs, models, versions, starts, ends, plans, policies, bounds, advances, accepted, repaired, from)
	if err != nil {
		return fmt.Errorf("recording %d debts: %w", n, err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return fmt.Errorf("recording %d debts: %w", n, err)
	}
	if len(ids) != n {
		return fmt.Errorf("recording %d debts: %d ids came back", n, len(ids))
	}
	// nextval ran in ORDER BY ord order: sorted, the ids are in argument
	// order.
	slices.Sort(ids)
	for i := range debts {
		debts[i].ID = ids[i]
	}
	return nil
}

// openDebtsQuery selects the open debts of a key ($1, $2). A key without
// open debts costs one probe of the debts_open_by_key index. The rows are
// not locked: most reads find a debt the write does not complete, and a
// lock would cost a heap write per recorded batch. A promotion may
// therefore settle one of them before the repair; the repair re-checks,
// under the debts' row locks, that each is still open (see repairDebts).
const openDebtsQuery = `SELECT ` + debtColumns + ` FROM debts
	WHERE model = $1 AND version = $2 AND ` + openDebt + `
	ORDER BY id`
