package postgres

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/state"
)

// debtColumns are the columns scanDebt reads, in order.
const debtColumns = `id, environment, model, version, start_us, end_us, plan_id, policy,
	bound, advances, accepted_at_us, repaired_at_us, superseded_at_us`

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
		if _, err := microsSet(interval.NewSet(d.Range)); err != nil {
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
// transaction, after the environment row was locked and rewritten (design
// invariant 2: an accepted gap is never served without its record, and a
// record never exists without its promotion):
//   - res.Debts are inserted; one whose range the version's intervals
//     already cover is inserted repaired at p.Now, with its gap_repaired
//     event;
//   - every open debt of the environment on a (model, version) that refs no
//     longer serves is stamped superseded at p.Now, with a gap_superseded
//     event naming the new plan;
//   - res.Events, then those events, are appended, in that order, under the
//     event lock, taken last.
//
// A debt and the interval write that repairs it never miss each other: the
// coverage is read after locking the debts' interval_keys rows FOR SHARE
// (creating the rows first when the version has never been written, since a
// missing row cannot be locked), and every AddIntervals holds its key's row
// FOR UPDATE from before it reads the key's open debts until it commits. So
// either the write committed first, and the coverage read here sees it (the
// debt is recorded repaired if covered), or it waits for this promotion to
// commit, and its read of the open debts sees the new debt.
//
// The promotion's transaction may be retried (deadlock); everything here is
// then redone from the retried check's result.
func recordCheckResult(ctx context.Context, tx pgx.Tx, p state.PromoteParams, refs []state.SnapshotRef, res state.CheckResult) error {
	debts, err := prepareDebts(p, refs, res.Debts)
	if err != nil {
		return err
	}
	now := state.FromMicros(state.Micros(p.Now))
	events := slices.Clone(res.Events)
	if len(debts) > 0 {
		if err := coverDebts(ctx, tx, debts, now); err != nil {
			return err
		}
		if err := insertDebts(ctx, tx, debts); err != nil {
			return err
		}
		for _, d := range debts {
			if d.RepairedAt.IsZero() {
				continue
			}
			ev, err := repairedEvent(d)
			if err != nil {
				return err
			}
			events = append(events, ev)
		}
	}
	names := make([]string, len(refs))
	versions := make([]string, len(refs))
	for i, r := range refs {
		names[i], versions[i] = r.Name, r.Version
	}
	rows, err := tx.Query(ctx, `
		UPDATE debts SET superseded_at_us = $1
		WHERE environment = $2 AND `+openDebt+`
		  AND NOT EXISTS (SELECT 1 FROM unnest($3::text[], $4::text[]) AS u(n, v)
		                  WHERE u.n = debts.model AND u.v = debts.version)
		RETURNING `+debtColumns,
		state.Micros(now), p.Environment, names, versions)
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
	encoded, err := encodeEvents(events)
	if err != nil {
		return fmt.Errorf("check result: %w", err)
	}
	if _, err := encoded.insert(ctx, tx); err != nil {
		return fmt.Errorf("appending the promotion's events: %w", err)
	}
	return nil
}

// coverDebts stamps repaired at now each debt whose range its version's
// intervals already cover, reading them after locking the versions'
// interval_keys rows FOR SHARE until the promotion commits (see
// recordCheckResult). Rows are created in key order, like every other
// locker of them.
func coverDebts(ctx context.Context, tx pgx.Tx, debts []state.Debt, now time.Time) error {
	keys := make([]state.VersionKey, len(debts))
	names := make([]string, len(debts))
	versions := make([]string, len(debts))
	for i, d := range debts {
		keys[i] = d.Key()
		names[i], versions[i] = d.Model, d.Version
	}
	if _, err := tx.Exec(ctx, `
		INSERT INTO interval_keys (name, version)
		SELECT DISTINCT n, v FROM unnest($1::text[], $2::text[]) AS u(n, v)
		ORDER BY n, v
		ON CONFLICT (name, version) DO NOTHING`, names, versions); err != nil {
		return fmt.Errorf("creating the interval records of %d debts: %w", len(debts), err)
	}
	covered, err := getIntervals(ctx, tx, keys, true)
	if err != nil {
		return fmt.Errorf("reading the coverage of %d debts: %w", len(debts), err)
	}
	for i := range debts {
		if covered[debts[i].Key()].Covers(debts[i].Range) {
			debts[i].RepairedAt = now
		}
	}
	return nil
}

// insertDebts inserts debts in one statement and sets their ids, increasing
// in argument order.
func insertDebts(ctx context.Context, tx pgx.Tx, debts []state.Debt) error {
	n := len(debts)
	envs, models, versions, plans, policies := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	starts, ends, bounds, advances, accepted, repaired := make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
	for i, d := range debts {
		envs[i], models[i], versions[i], plans[i], policies[i] = d.Environment, d.Model, d.Version, d.PlanID, d.Policy
		starts[i], ends[i] = d.Range.Start.UnixMicro(), d.Range.End.UnixMicro()
		bounds[i], advances[i] = int64(d.Bound), int64(d.Advances)
		accepted[i], repaired[i] = state.Micros(d.AcceptedAt), state.Micros(d.RepairedAt)
	}
	rows, err := tx.Query(ctx, `
		INSERT INTO debts (environment, model, version, start_us, end_us, plan_id, policy,
			bound, advances, accepted_at_us, repaired_at_us)
		SELECT e, m, v, s, x, p, po, b, a, acc, rep
		FROM unnest($1::text[], $2::text[], $3::text[], $4::int8[], $5::int8[], $6::text[], $7::text[],
		            $8::int8[], $9::int8[], $10::int8[], $11::int8[])
		     WITH ORDINALITY AS u(e, m, v, s, x, p, po, b, a, acc, rep, ord)
		ORDER BY ord
		RETURNING id`,
		envs, models, versions, starts, ends, plans, policies, bounds, advances, accepted, repaired)
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
// therefore supersede one of them before the repair; the repair's UPDATE
// re-checks that each is still open (see repairDebts).
const openDebtsQuery = `SELECT ` + debtColumns + ` FROM debts
	WHERE model = $1 AND version = $2 AND ` + openDebt + `
	ORDER BY id`

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
