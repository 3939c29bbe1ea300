package postgres

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/state/debt"
	"github.com/gapless-dev/gapless/state/internal/storekit"
)

// envColumns are the columns scanEnvironment reads, in order.
const envColumns = `name, generation, plan_id, previous_plan_id, snapshots::text,
	promoted_at_us, finalized_at_us, expires_at_us, invalidated`

func scanEnvironment(row pgx.Row) (*state.Environment, error) {
	var e state.Environment
	var snaps string
	var promoted, finalized, expires int64
	if err := row.Scan(&e.Name, &e.Generation, &e.PlanID, &e.PreviousPlanID, &snaps,
		&promoted, &finalized, &expires, &e.Invalidated); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(snaps), &e.Snapshots); err != nil {
		return nil, fmt.Errorf("decoding the snapshots of environment %q: %w", e.Name, err)
	}
	if e.Snapshots == nil {
		e.Snapshots = []state.SnapshotRef{}
	}
	e.PromotedAt = storekit.FromMicros(promoted)
	e.FinalizedAt = storekit.FromMicros(finalized)
	e.ExpiresAt = storekit.FromMicros(expires)
	return &e, nil
}

// GetEnvironment returns the named environment (invalidated ones included),
// or an error wrapping state.ErrNotFound.
func (s *Store) GetEnvironment(ctx context.Context, name string) (*state.Environment, error) {
	return getEnvironment(ctx, s.pool, name, false)
}

// EnvironmentGeneration returns the environment's generation and
// invalidation mark from its row alone, without reading its snapshot
// references (see state.Store.EnvironmentGeneration), or an error wrapping
// state.ErrNotFound for an environment that was never promoted or was
// removed (its row is kept, marked deleted).
func (s *Store) EnvironmentGeneration(ctx context.Context, name string) (int64, bool, error) {
	var (
		gen int64
		in  bool
	)
	err := s.pool.QueryRow(ctx,
		`SELECT generation, invalidated FROM environments WHERE name = $1 AND NOT deleted`, name).Scan(&gen, &in)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, fmt.Errorf("postgres state: environment %q: %w", name, state.ErrNotFound)
	}
	if err != nil {
		return 0, false, fmt.Errorf("postgres state: reading the generation of environment %q: %w", name, err)
	}
	return gen, in, nil
}

// getEnvironment reads one environment through q; with lock (the reader
// offered to a promotion's check) the row is locked FOR SHARE, so it cannot
// be promoted, finalised, invalidated or deleted before the surrounding
// transaction ends.
func getEnvironment(ctx context.Context, q querier, name string, lock bool) (*state.Environment, error) {
	sql := `SELECT ` + envColumns + ` FROM environments WHERE name = $1 AND NOT deleted`
	if lock {
		sql += ` FOR SHARE`
	}
	e, err := scanEnvironment(q.QueryRow(ctx, sql, name))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("postgres state: environment %q: %w", name, state.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("postgres state: reading environment %q: %w", name, err)
	}
	return e, nil
}

// ListEnvironments returns every environment that exists (invalidated ones
// included), sorted by name byte-wise, whatever the database's collation.
func (s *Store) ListEnvironments(ctx context.Context) ([]*state.Environment, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+envColumns+` FROM environments WHERE NOT deleted`)
	if err != nil {
		return nil, fmt.Errorf("postgres state: listing environments: %w", err)
	}
	envs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*state.Environment, error) {
		return scanEnvironment(row)
	})
	if err != nil {
		return nil, fmt.Errorf("postgres state: listing environments: %w", err)
	}
	slices.SortFunc(envs, func(a, b *state.Environment) int { return cmp.Compare(a.Name, b.Name) })
	return envs, nil
}

// txReader is the state.Reader offered to a promotion's check: it reads
// inside the promotion's transaction and locks what it returns FOR SHARE, so
// the state the check approved is the state the promotion commits against.
type txReader struct{ tx pgx.Tx }

func (r txReader) GetIntervals(ctx context.Context, keys []state.VersionKey) (map[state.VersionKey]interval.Set, error) {
	return getIntervals(ctx, r.tx, keys, true)
}

func (r txReader) GetEnvironment(ctx context.Context, name string) (*state.Environment, error) {
	return getEnvironment(ctx, r.tx, name, true)
}

// Promote points an environment at a new set of snapshots.
//
// Invariant: it is a compare-and-swap on p.ExpectedPlanID, and of any number
// of concurrent promotions expecting the same plan id exactly one succeeds.
// In one transaction it
//  1. makes sure a row exists for the name (INSERT ... ON CONFLICT DO
//     NOTHING of an "absent" placeholder), so that two first promotions of a
//     new environment serialise on that row instead of both seeing nothing;
//  2. locks the row FOR UPDATE and compares its current plan id ("" when the
//     environment is absent, deleted or invalidated) with ExpectedPlanID:
//     a mismatch returns state.ErrConflictingPlan and changes nothing;
//  3. runs p.Check with a reader inside the transaction (see txReader); an
//     error aborts the promotion and is returned wrapped;
//  4. writes the new snapshots with generation + 1, PreviousPlanID set to
//     the plan id the row held (also when invalidated; "" when absent or
//     deleted), FinalizedAt and Invalidated cleared;
//  5. records p.Now as the last-served time of every version the row
//     served (invalidated or not) that the new snapshots do not serve;
//  6. records what the check returned (its debts and events), and settles
//     the environment's open debts on versions it no longer serves:
//     repaired, superseded, or superseded and carried to the version it
//     serves instead (see debtWriter).
//
// Between steps 2 and 3 it checks the merge gate's fence (p.Gate, see
// storekit.PromoteGate): a gated environment promoted without a held
// attempt's valid lease fails wrapping state.ErrNotHeld and changes
// nothing; after step 4 a fenced promotion stamps its attempt's PlanID,
// ResultGeneration and PromotedAt.
//
// A promotion aborted by the deadlock detector is retried from step 1, so
// p.Check may run more than once; it must only read, and only the result of
// the attempt that commits is written.
func (s *Store) Promote(ctx context.Context, p state.PromoteParams) (*state.Environment, error) {
	if p.Environment == "" {
		return nil, errors.New("postgres state: promote: the environment has no name")
	}
	if p.PlanID == "" {
		return nil, fmt.Errorf("postgres state: promote %q: the plan id is empty", p.Environment)
	}
	if p.Now.IsZero() {
		return nil, fmt.Errorf("postgres state: promote %q: %w", p.Environment, errNoNow)
	}
	refs, err := sortedRefs(p.Snapshots)
	if err != nil {
		return nil, fmt.Errorf("postgres state: promote %q to plan %q: %w", p.Environment, p.PlanID, err)
	}
	encoded, err := json.Marshal(refs)
	if err != nil {
		return nil, fmt.Errorf("postgres state: promote %q: encoding snapshots: %w", p.Environment, err)
	}
	var out *state.Environment
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO environments (name) VALUES ($1) ON CONFLICT (name) DO NOTHING`, p.Environment); err != nil {
			return fmt.Errorf("creating the environment row: %w", err)
		}
		var stored, storedSnaps string
		var invalidated, deleted bool
		if err := tx.QueryRow(ctx, `
			SELECT plan_id, snapshots::text, invalidated, deleted FROM environments WHERE name = $1 FOR UPDATE`,
			p.Environment).Scan(&stored, &storedSnaps, &invalidated, &deleted); err != nil {
			return fmt.Errorf("locking the environment: %w", err)
		}
		// The merge gate's fence, under the environment's row lock: a
		// gated environment is promoted only under a held attempt's lease.
		gate := codeHostTx{tx}
		attempt, err := storekit.PromoteGate(ctx, gate, p)
		if err != nil {
			return err
		}
		current := stored
		if deleted || invalidated {
			current = ""
		}
		if current != p.ExpectedPlanID {
			return fmt.Errorf("expected current plan %q, but it is %q: %w", p.ExpectedPlanID, current, state.ErrConflictingPlan)
		}
		// A retried transaction runs the check again: its result replaces
		// the earlier one, which was rolled back with everything else.
		var res state.CheckResult
		if p.Check != nil {
			var err error
			if res, err = p.Check(ctx, txReader{tx: tx}); err != nil {
				return fmt.Errorf("check: %w", err)
			}
		}
		var gen int64
		if err := tx.QueryRow(ctx, `
			UPDATE environments SET
				generation = generation + 1, plan_id = $2, previous_plan_id = $3,
				snapshots = $4::jsonb, promoted_at_us = $5, finalized_at_us = 0,
				expires_at_us = $6, invalidated = false, deleted = false
			WHERE name = $1
			RETURNING generation`,
			p.Environment, p.PlanID, stored, string(encoded), storekit.Micros(p.Now), storekit.Micros(p.ExpiresAt)).Scan(&gen); err != nil {
			return fmt.Errorf("writing the environment: %w", err)
		}
		if err := storekit.StampPromotion(ctx, gate, attempt, p, gen); err != nil {
			return err
		}
		var before []state.SnapshotRef
		if err := json.Unmarshal([]byte(storedSnaps), &before); err != nil {
			return fmt.Errorf("decoding the snapshots the environment served: %w", err)
		}
		if err := recordLastServed(ctx, tx, before, refs, p.Now); err != nil {
			return err
		}
		if err := debt.RecordCheckResult(ctx, debtWriter{tx}, p, refs, res); err != nil {
			return err
		}
		out = &state.Environment{
			Name:           p.Environment,
			Generation:     gen,
			PlanID:         p.PlanID,
			PreviousPlanID: stored,
			Snapshots:      refs,
			PromotedAt:     storekit.FromMicros(storekit.Micros(p.Now)),
			ExpiresAt:      storekit.FromMicros(storekit.Micros(p.ExpiresAt)),
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("postgres state: promote %q to plan %q: %w", p.Environment, p.PlanID, err)
	}
	return out, nil
}

// sortedRefs returns a copy of refs sorted by name (then fingerprint),
// rejecting incomplete references and two snapshots of one model.
func sortedRefs(refs []state.SnapshotRef) ([]state.SnapshotRef, error) {
	out := slices.Clone(refs)
	slices.SortFunc(out, func(a, b state.SnapshotRef) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.Fingerprint, b.Fingerprint))
	})
	for i, r := range out {
		if r.Name == "" || r.Fingerprint == "" || r.Version == "" {
			return nil, fmt.Errorf("snapshot %+v: name, fingerprint and version are required", r)
		}
		if i > 0 && out[i-1].Name == r.Name {
			return nil, fmt.Errorf("model %q appears twice", r.Name)
		}
	}
	if out == nil {
		out = []state.SnapshotRef{}
	}
	return out, nil
}

// Finalize marks the environment's current plan finalised, as a
// compare-and-swap on p.PlanID in the UPDATE's WHERE clause: another current
// plan (or an invalidated environment) gives state.ErrConflictingPlan, no
// environment gives state.ErrNotFound. Finalising again records the new time.
func (s *Store) Finalize(ctx context.Context, p state.FinalizeParams) error {
	if p.Now.IsZero() {
		return fmt.Errorf("postgres state: finalize %q: %w", p.Environment, errNoNow)
	}
	tag, err := s.pool.Exec(ctx, `
		UPDATE environments SET finalized_at_us = $3
		WHERE name = $1 AND plan_id = $2 AND NOT deleted AND NOT invalidated`,
		p.Environment, p.PlanID, storekit.Micros(p.Now))
	if err != nil {
		return fmt.Errorf("postgres state: finalize %q at plan %q: %w", p.Environment, p.PlanID, err)
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	// The compare-and-swap failed; read the row only to say why.
	e, err := s.GetEnvironment(ctx, p.Environment)
	if err != nil {
		return fmt.Errorf("postgres state: finalize %q at plan %q: %w", p.Environment, p.PlanID, err)
	}
	why := fmt.Sprintf("current plan is %q", e.PlanID)
	if e.Invalidated {
		why = "the environment is invalidated"
	}
	return fmt.Errorf("postgres state: finalize %q at plan %q: %s: %w", p.Environment, p.PlanID, why, state.ErrConflictingPlan)
}

// Invalidate marks an environment invalidated and expired at p.Now for the
// janitor; its generation is unchanged. No environment gives
// state.ErrNotFound.
//
// In the same transaction it stamps superseded at p.Now every open debt of
// the environment and appends their gap_superseded events (see
// supersedeOpenDebts), so an invalidated environment never keeps an open
// debt and a debt is never superseded without its event. The locks are
// taken in a promotion's order: the environment row (by the UPDATE), then
// the debts in id order, then the event lock.
func (s *Store) Invalidate(ctx context.Context, p state.InvalidateParams) error {
	if p.Now.IsZero() {
		return fmt.Errorf("postgres state: invalidate %q: %w", p.Environment, errNoNow)
	}
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `
			UPDATE environments SET expires_at_us = $2, invalidated = true
			WHERE name = $1 AND NOT deleted`,
			p.Environment, storekit.Micros(p.Now))
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return state.ErrNotFound
		}
		return supersedeOpenDebts(ctx, tx, p.Environment, p.Now, debt.InvalidatedEvent)
	})
	if err != nil {
		return fmt.Errorf("postgres state: invalidate %q: %w", p.Environment, err)
	}
	return nil
}

// RemoveEnvironment removes an environment, as a compare-and-swap on its
// generation: a promotion since the caller read it gives
// state.ErrConflictingPlan, and no environment gives state.ErrNotFound; a
// refused removal writes nothing. The row is locked FOR UPDATE and checked,
// then rewritten; every version it served gets p.Now as its last-served
// time; its open debts are superseded at p.Now with their gap_superseded
// events (debt.RemovedEvent; debts locked after the row, the event lock
// last); and the environment_removing event is appended, all in one
// transaction. The removal event is returned with its id.
//
// The row is kept, marked deleted, with its generation: a later promotion of
// the same name continues from it, so a generation is never reused and a
// writer fenced on the deleted environment's generation stays fenced.
func (s *Store) RemoveEnvironment(ctx context.Context, p state.RemoveEnvironmentParams) (state.Event, error) {
	if p.Now.IsZero() {
		return state.Event{}, fmt.Errorf("postgres state: remove environment %q: %w", p.Name, errNoNow)
	}
	var removal state.Event
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var gen int64
		var snaps, planID string
		err := tx.QueryRow(ctx, `
			SELECT generation, snapshots::text, plan_id FROM environments WHERE name = $1 AND NOT deleted FOR UPDATE`,
			p.Name).Scan(&gen, &snaps, &planID)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("environment %q: %w", p.Name, state.ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("locking the environment: %w", err)
		}
		if gen != p.Generation {
			return fmt.Errorf("it is at generation %d: %w", gen, state.ErrConflictingPlan)
		}
		var before []state.SnapshotRef
		if err := json.Unmarshal([]byte(snaps), &before); err != nil {
			return fmt.Errorf("decoding the snapshots the environment served: %w", err)
		}
		if _, err := tx.Exec(ctx, `
			UPDATE environments SET
				deleted = true, plan_id = '', previous_plan_id = '', snapshots = '[]',
				promoted_at_us = 0, finalized_at_us = 0, expires_at_us = 0, invalidated = false
			WHERE name = $1`, p.Name); err != nil {
			return fmt.Errorf("deleting: %w", err)
		}
		if err := recordLastServed(ctx, tx, before, nil, p.Now); err != nil {
			return err
		}
		if err := supersedeOpenDebts(ctx, tx, p.Name, p.Now, debt.RemovedEvent); err != nil {
			return err
		}
		encoded, err := encodeEvents([]state.Event{{At: p.Now, Kind: state.EventEnvironmentRemoving,
			Environment: p.Name, PlanID: planID, Data: p.Data}})
		if err != nil {
			return err
		}
		inserted, err := encoded.insert(ctx, tx)
		if err != nil {
			return fmt.Errorf("appending the removal event: %w", err)
		}
		removal = inserted[0]
		return nil
	})
	if err != nil {
		return state.Event{}, fmt.Errorf("postgres state: remove environment %q at generation %d: %w", p.Name, p.Generation, err)
	}
	return removal, nil
}
