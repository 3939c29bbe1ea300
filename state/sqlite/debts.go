package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/state"
)

// debtColumns are the columns scanDebt reads, in order.
const debtColumns = `id, environment, model, version, start_us, end_us, plan_id, policy,
	bound, advances, accepted_at_us, repaired_at_us, superseded_at_us`

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
		&d.Bound, &d.Advances, &accepted, &repaired, &superseded); err != nil {
		return state.Debt{}, err
	}
	// Range boundaries are instants, not "unset" markers: 0 is the epoch.
	d.Range = interval.NewRange(time.UnixMicro(start), time.UnixMicro(end))
	d.AcceptedAt = state.FromMicros(accepted)
	d.RepairedAt = state.FromMicros(repaired)
	d.SupersededAt = state.FromMicros(superseded)
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

// prepareDebts checks the debts of a promotion's check result and returns
// them ready to insert: Environment, PlanID and AcceptedAt filled from p
// when empty, instants truncated to what the store keeps.
//
// It fails closed, refusing the promotion, on a debt that could not be
// tracked to its repair: one without a model or version, with an empty range
// or one the store cannot hold exactly, for a version the promotion does not
// serve (it would be superseded at once), naming another environment or
// plan, with Advances outside [0, Bound], or already stamped repaired or
// superseded (only the store stamps them).
func prepareDebts(p state.PromoteParams, refs []state.SnapshotRef, debts []state.Debt) ([]state.Debt, error) {
	served := make(map[state.VersionKey]bool, len(refs))
	for _, r := range refs {
		served[r.VersionKey()] = true
	}
	out := make([]state.Debt, len(debts))
	for i, d := range debts {
		if d.Environment == "" {
			d.Environment = p.Environment
		}
		if d.PlanID == "" {
			d.PlanID = p.PlanID
		}
		if d.AcceptedAt.IsZero() {
			d.AcceptedAt = p.Now
		}
		var problem string
		switch {
		case d.Model == "" || d.Version == "":
			problem = "model and version are required"
		case d.Environment != p.Environment:
			problem = fmt.Sprintf("it names environment %q, the promotion is of %q", d.Environment, p.Environment)
		case d.PlanID != p.PlanID:
			problem = fmt.Sprintf("it names plan %q, the promotion is of plan %q", d.PlanID, p.PlanID)
		case !served[d.Key()]:
			problem = "the promotion does not serve that version"
		case d.Range.Empty():
			problem = "its range is empty"
		case d.Bound < 0 || d.Advances < 0 || d.Advances > d.Bound:
			problem = fmt.Sprintf("advances %d is outside [0, bound %d]", d.Advances, d.Bound)
		case !d.RepairedAt.IsZero() || !d.SupersededAt.IsZero():
			problem = "repaired and superseded times are the store's to stamp"
		}
		if problem != "" {
			return nil, fmt.Errorf("debt %d (%s@%s %v): %s", i, d.Model, d.Version, d.Range, problem)
		}
		if err := checkRanges(interval.NewSet(d.Range)); err != nil {
			return nil, fmt.Errorf("debt %d (%s@%s): %w", i, d.Model, d.Version, err)
		}
		d.ID = 0
		d.Range = interval.NewRange(d.Range.Start, d.Range.End)
		d.AcceptedAt = state.FromMicros(state.Micros(d.AcceptedAt))
		out[i] = d
	}
	return out, nil
}

// recordCheckResult writes what a promotion's check returned, and what the
// promotion does to the environment's earlier debts, inside the promotion's
// write transaction (design invariant 2: an accepted gap is never served
// without its record, and a record never exists without its promotion):
//   - res.Debts are inserted; one whose range the version's intervals
//     already cover is inserted repaired at p.Now, with its gap_repaired
//     event;
//   - every open debt of the environment on a (model, version) that refs no
//     longer serves is stamped superseded at p.Now, with a gap_superseded
//     event naming the new plan;
//   - res.Events, then those events, are appended, in that order.
//
// The transaction holds the file's write lock, so no interval write can
// slip between the coverage read and the insert: the repair of a debt
// recorded open is always left to a later AddIntervals, which sees it.
func recordCheckResult(ctx context.Context, tx *sql.Tx, p state.PromoteParams, refs []state.SnapshotRef, res state.CheckResult) error {
	debts, err := prepareDebts(p, refs, res.Debts)
	if err != nil {
		return err
	}
	now := state.FromMicros(state.Micros(p.Now))
	events := slices.Clone(res.Events)
	if len(debts) > 0 {
		keys := make([]state.VersionKey, len(debts))
		for i, d := range debts {
			keys[i] = d.Key()
		}
		covered, err := getIntervals(ctx, tx, keys)
		if err != nil {
			return fmt.Errorf("reading the coverage of %d debts: %w", len(debts), err)
		}
		for i := range debts {
			d := &debts[i]
			if covered[d.Key()].Covers(d.Range) {
				d.RepairedAt = now
			}
			if err := tx.QueryRowContext(ctx, `
				INSERT INTO debts (environment, model, version, start_us, end_us, plan_id, policy,
					bound, advances, accepted_at_us, repaired_at_us)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`,
				d.Environment, d.Model, d.Version, d.Range.Start.UnixMicro(), d.Range.End.UnixMicro(),
				d.PlanID, d.Policy, d.Bound, d.Advances, state.Micros(d.AcceptedAt), state.Micros(d.RepairedAt),
			).Scan(&d.ID); err != nil {
				return fmt.Errorf("recording debt %d (%s@%s %v): %w", i, d.Model, d.Version, d.Range, err)
			}
			if !d.RepairedAt.IsZero() {
				ev, err := repairedEvent(*d)
				if err != nil {
					return err
				}
				events = append(events, ev)
			}
		}
	}
	served, err := keysJSON(refKeys(refs))
	if err != nil {
		return err
	}
	rows, err := tx.QueryContext(ctx, `
		UPDATE debts SET superseded_at_us = ?
		WHERE environment = ? AND `+openDebt+`
		  AND (model, version) NOT IN (
			SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each(?))
		RETURNING `+debtColumns,
		state.Micros(now), p.Environment, served)
	if err != nil {
		return fmt.Errorf("superseding the debts of versions no longer served: %w", err)
	}
	superseded, err := collectDebts(rows)
	if err != nil {
		return fmt.Errorf("superseding the debts of versions no longer served: %w", err)
	}
	for _, d := range superseded {
		ev, err := supersededEvent(d, p.PlanID, now)
		if err != nil {
			return err
		}
		events = append(events, ev)
	}
	prepared, data, err := prepareEvents(events)
	if err != nil {
		return fmt.Errorf("check result: %w", err)
	}
	if err := insertEvents(ctx, tx, prepared, data); err != nil {
		return fmt.Errorf("appending the promotion's events: %w", err)
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
// (nearly always) costs one index probe and nothing more.
func (s *Store) repairDebts(ctx context.Context, tx *sql.Tx, key state.VersionKey, now time.Time) error {
	var one int
	err := tx.StmtContext(ctx, s.stmts.hasOpenDebt).QueryRowContext(ctx, key.Name, key.Version).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("looking up open debts: %w", err)
	}
	rows, err := tx.StmtContext(ctx, s.stmts.repairDebts).QueryContext(ctx, key.Name, key.Version, state.Micros(now))
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
		if events[i], err = repairedEvent(d); err != nil {
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

// repairedEventData is the Data of a gap_repaired event.
type repairedEventData struct {
	DebtID         int64          `json:"debt_id"`
	Range          interval.Range `json:"range"`
	AcceptedAt     time.Time      `json:"accepted_at"`
	RepairedAt     time.Time      `json:"repaired_at"`
	LatencySeconds float64        `json:"latency_seconds"`
	Policy         string         `json:"policy"`
}

// repairedEvent is the gap_repaired event of d, stamped repaired: at the
// repair, under the environment and plan that accepted the debt.
func repairedEvent(d state.Debt) (state.Event, error) {
	data, err := json.Marshal(repairedEventData{
		DebtID: d.ID, Range: d.Range, AcceptedAt: d.AcceptedAt, RepairedAt: d.RepairedAt,
		LatencySeconds: d.RepairedAt.Sub(d.AcceptedAt).Seconds(), Policy: d.Policy,
	})
	if err != nil {
		return state.Event{}, fmt.Errorf("encoding the gap_repaired event of debt %d: %w", d.ID, err)
	}
	return state.Event{
		At: d.RepairedAt, Kind: state.EventGapRepaired,
		Environment: d.Environment, Model: d.Model, PlanID: d.PlanID, Data: data,
	}, nil
}

// supersededEventData is the Data of a gap_superseded event.
type supersededEventData struct {
	DebtID  int64          `json:"debt_id"`
	Range   interval.Range `json:"range"`
	Version string         `json:"version"`
}

// supersededEvent is the gap_superseded event of d, superseded at now by the
// promotion of plan planID.
func supersededEvent(d state.Debt, planID string, now time.Time) (state.Event, error) {
	data, err := json.Marshal(supersededEventData{DebtID: d.ID, Range: d.Range, Version: d.Version})
	if err != nil {
		return state.Event{}, fmt.Errorf("encoding the gap_superseded event of debt %d: %w", d.ID, err)
	}
	return state.Event{
		At: now, Kind: state.EventGapSuperseded,
		Environment: d.Environment, Model: d.Model, PlanID: planID, Data: data,
	}, nil
}
