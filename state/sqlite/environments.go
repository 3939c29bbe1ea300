package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/state/debt"
	"github.com/gapless-dev/gapless/state/internal/storekit"
)

const envColumns = `name, generation, plan_id, previous_plan_id, snapshots,
	promoted_at_us, finalized_at_us, expires_at_us, invalidated`

// scanEnvironment reads one row selected with envColumns.
func scanEnvironment(sc interface{ Scan(...any) error }) (*state.Environment, error) {
	var (
		e                                state.Environment
		snaps                            string
		promoted, finalized, expires, in int64
	)
	if err := sc.Scan(&e.Name, &e.Generation, &e.PlanID, &e.PreviousPlanID, &snaps,
		&promoted, &finalized, &expires, &in); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(snaps), &e.Snapshots); err != nil {
		return nil, fmt.Errorf("decoding the snapshots of environment %q: %w", e.Name, err)
	}
	e.PromotedAt = storekit.FromMicros(promoted)
	e.FinalizedAt = storekit.FromMicros(finalized)
	e.ExpiresAt = storekit.FromMicros(expires)
	e.Invalidated = in != 0
	return &e, nil
}

// getEnvironment reads one environment through q, or fails wrapping
// state.ErrNotFound.
func getEnvironment(ctx context.Context, q querier, name string) (*state.Environment, error) {
	e, err := scanEnvironment(q.QueryRowContext(ctx,
		`SELECT `+envColumns+` FROM environments WHERE name = ?`, name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("environment %q: %w", name, state.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("reading environment %q: %w", name, err)
	}
	return e, nil
}

// GetEnvironment returns the named environment (also when invalidated), or
// an error wrapping state.ErrNotFound.
func (s *Store) GetEnvironment(ctx context.Context, name string) (*state.Environment, error) {
	e, err := getEnvironment(ctx, s.db, name)
	if err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	return e, nil
}

// generationQuery reads an environment's generation and invalidation mark.
const generationQuery = `SELECT generation, invalidated FROM environments WHERE name = ?`

// EnvironmentGeneration returns the environment's generation and
// invalidation mark from its row alone, without reading its snapshot
// references (see state.Store.EnvironmentGeneration), or an error wrapping
// state.ErrNotFound.
func (s *Store) EnvironmentGeneration(ctx context.Context, name string) (int64, bool, error) {
	var (
		gen int64
		in  int64
	)
	err := s.stmts.generation.QueryRowContext(ctx, name).Scan(&gen, &in)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, fmt.Errorf("sqlite: environment %q: %w", name, state.ErrNotFound)
	}
	if err != nil {
		return 0, false, fmt.Errorf("sqlite: reading the generation of environment %q: %w", name, err)
	}
	return gen, in != 0, nil
}

// ListEnvironments returns every environment, sorted by name.
func (s *Store) ListEnvironments(ctx context.Context) ([]*state.Environment, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+envColumns+` FROM environments ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list environments: %w", err)
	}
	defer rows.Close()
	var out []*state.Environment
	for rows.Next() {
		e, err := scanEnvironment(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: list environments: %w", err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list environments: %w", err)
	}
	return out, nil
}

// txReader is the state.Reader a promotion's Check sees: reads through the
// promotion's own transaction, which holds the write lock, so nothing can
// change between what Check reads and what Promote commits.
type txReader struct{ tx *sql.Tx }

func (r txReader) GetIntervals(ctx context.Context, keys []state.VersionKey) (map[state.VersionKey]interval.Set, error) {
	return getIntervals(ctx, txIntervals(ctx, r.tx), keys)
}

func (r txReader) GetEnvironment(ctx context.Context, name string) (*state.Environment, error) {
	return getEnvironment(ctx, r.tx, name)
}

// checkPromote validates p and returns its snapshots sorted by name.
func checkPromote(p state.PromoteParams) ([]state.SnapshotRef, error) {
	if p.Environment == "" || p.PlanID == "" {
		return nil, errors.New("environment and plan id are required")
	}
	if p.Now.IsZero() {
		return nil, errNoNow
	}
	refs := slices.Clone(p.Snapshots)
	if refs == nil {
		refs = []state.SnapshotRef{}
	}
	slices.SortFunc(refs, func(a, b state.SnapshotRef) int { return cmp.Compare(a.Name, b.Name) })
	for i, r := range refs {
		if r.Name == "" || r.Fingerprint == "" || r.Version == "" {
			return nil, fmt.Errorf("snapshot %+v: name, fingerprint and version are required", r)
		}
		if i > 0 && refs[i-1].Name == r.Name {
			return nil, fmt.Errorf("model %s appears twice in one environment", r.Name)
		}
	}
	return refs, nil
}

// Promote points an environment at new snapshots, as a compare-and-swap on
// p.ExpectedPlanID.
//
// Invariant: reading the current plan id, comparing it, running p.Check,
// writing the new row, and recording what the check returned (debts and
// events) together with the settlement of the environment's open debts on
// versions it no longer serves (repaired, superseded or carried to the
// version served instead; see debtWriter), happen in one
// IMMEDIATE transaction, so of any number of promoters that expect the same
// plan id exactly one succeeds and the others fail with
// state.ErrConflictingPlan having changed nothing, and a failed check or an
// unrecordable debt leaves no trace. The versions the environment served
// before and no longer serves get p.Now as their last-served time in that
// transaction too. The new generation exceeds every generation the name
// ever had, also across RemoveEnvironment. p.Check must read only through
// the Reader it is given.
//
// The merge gate's fence (p.Gate, see storekit.PromoteGate) is checked in
// the same transaction, before anything is written: a gated environment
// promoted without a held attempt's valid lease fails wrapping
// state.ErrNotHeld having written nothing; a fenced promotion stamps its
// attempt's PlanID, ResultGeneration and PromotedAt in the transaction.
func (s *Store) Promote(ctx context.Context, p state.PromoteParams) (*state.Environment, error) {
	refs, err := checkPromote(p)
	if err != nil {
		return nil, fmt.Errorf("sqlite: promote %q: %w", p.Environment, err)
	}
	var out *state.Environment
	err = s.write(ctx, func(tx *sql.Tx) error {
		cur, err := getEnvironment(ctx, tx, p.Environment)
		if err != nil && !errors.Is(err, state.ErrNotFound) {
			return err
		}
		// The merge gate's fence, under the write lock: a gated
		// environment is promoted only under a held attempt's lease.
		gate := codeHostTx{tx}
		attempt, err := storekit.PromoteGate(ctx, gate, p)
		if err != nil {
			return err
		}
		current, previous := "", ""
		if cur != nil {
			previous = cur.PlanID
			if !cur.Invalidated {
				current = cur.PlanID
			}
		}
		if current != p.ExpectedPlanID {
			return fmt.Errorf("%w: environment %q is at plan %q, the promotion of plan %q expected %q",
				state.ErrConflictingPlan, p.Environment, current, p.PlanID, p.ExpectedPlanID)
		}
		var res state.CheckResult
		if p.Check != nil {
			if res, err = p.Check(ctx, txReader{tx}); err != nil {
				return fmt.Errorf("promotion check of plan %q: %w", p.PlanID, err)
			}
		}
		gen, err := nextGeneration(ctx, tx, p.Environment)
		if err != nil {
			return err
		}
		e := &state.Environment{
			Name:           p.Environment,
			Generation:     gen,
			PlanID:         p.PlanID,
			PreviousPlanID: previous,
			Snapshots:      refs,
			PromotedAt:     storekit.FromMicros(storekit.Micros(p.Now)),
			ExpiresAt:      storekit.FromMicros(storekit.Micros(p.ExpiresAt)),
		}
		if err := writeEnvironment(ctx, tx, e); err != nil {
			return err
		}
		if err := storekit.StampPromotion(ctx, gate, attempt, p, gen); err != nil {
			return err
		}
		if cur != nil {
			if err := recordLastServed(ctx, tx, cur.Snapshots, refs, p.Now); err != nil {
				return err
			}
		}
		if err := debt.RecordCheckResult(ctx, debtWriter{tx}, p, refs, res); err != nil {
			return fmt.Errorf("promotion of plan %q: %w", p.PlanID, err)
		}
		out = e
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite: promote %q: %w", p.Environment, err)
	}
	return out, nil
}

// nextGeneration reserves the environment's next generation: one more than
// any it ever had, remembered beyond RemoveEnvironment.
func nextGeneration(ctx context.Context, tx *sql.Tx, name string) (int64, error) {
	var gen int64
	err := tx.QueryRowContext(ctx, `
		INSERT INTO environment_generations (name, generation) VALUES (?, 1)
		ON CONFLICT (name) DO UPDATE SET generation = generation + 1
		RETURNING generation`, name).Scan(&gen)
	if err != nil {
		return 0, fmt.Errorf("reserving a generation: %w", err)
	}
	return gen, nil
}

// writeEnvironment replaces the environment row with e.
func writeEnvironment(ctx context.Context, tx *sql.Tx, e *state.Environment) error {
	snaps, err := json.Marshal(e.Snapshots)
	if err != nil {
		return fmt.Errorf("encoding snapshots: %w", err)
	}
	_, err = tx.ExecContext(ctx, `
		INSERT INTO environments (`+envColumns+`) VALUES (?, ?, ?, ?, ?, ?, 0, ?, 0)
		ON CONFLICT (name) DO UPDATE SET
			generation = excluded.generation, plan_id = excluded.plan_id,
			previous_plan_id = excluded.previous_plan_id, snapshots = excluded.snapshots,
			promoted_at_us = excluded.promoted_at_us, finalized_at_us = 0,
			expires_at_us = excluded.expires_at_us, invalidated = 0`,
		e.Name, e.Generation, e.PlanID, e.PreviousPlanID, string(snaps),
		storekit.Micros(e.PromotedAt), storekit.Micros(e.ExpiresAt))
	if err != nil {
		return fmt.Errorf("writing environment: %w", err)
	}
	return nil
}

// Finalize marks the environment's current plan finalised, pinned to
// p.PlanID: state.ErrConflictingPlan when another plan is current (or the
// environment was invalidated), state.ErrNotFound when there is no such
// environment. The pin is in the UPDATE's WHERE clause.
func (s *Store) Finalize(ctx context.Context, p state.FinalizeParams) error {
	if p.Now.IsZero() {
		return fmt.Errorf("sqlite: finalize %q: %w", p.Environment, errNoNow)
	}
	err := s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `
			UPDATE environments SET finalized_at_us = ?
			WHERE name = ? AND plan_id = ? AND invalidated = 0`,
			storekit.Micros(p.Now), p.Environment, p.PlanID)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if n == 1 {
			return nil
		}
		cur, err := getEnvironment(ctx, tx, p.Environment)
		if err != nil {
			return err
		}
		return fmt.Errorf("%w: environment %q is at plan %q (invalidated: %t), not %q",
			state.ErrConflictingPlan, p.Environment, cur.PlanID, cur.Invalidated, p.PlanID)
	})
	if err != nil {
		return fmt.Errorf("sqlite: finalize %q: %w", p.Environment, err)
	}
	return nil
}

// Invalidate marks an environment invalidated and expired at p.Now, or fails
// wrapping state.ErrNotFound. Its generation is unchanged. In the same
// IMMEDIATE transaction it stamps superseded at p.Now every open debt of the
// environment and appends their gap_superseded events (see
// supersedeOpenDebts), so an invalidated environment never keeps an open
// debt, and a debt is never superseded without its event.
func (s *Store) Invalidate(ctx context.Context, p state.InvalidateParams) error {
	if p.Now.IsZero() {
		return fmt.Errorf("sqlite: invalidate %q: %w", p.Environment, errNoNow)
	}
	err := s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx,
			`UPDATE environments SET invalidated = 1, expires_at_us = ? WHERE name = ?`,
			storekit.Micros(p.Now), p.Environment)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("environment %q: %w", p.Environment, state.ErrNotFound)
		}
		return supersedeOpenDebts(ctx, tx, p.Environment, p.Now, debt.InvalidatedEvent)
	})
	if err != nil {
		return fmt.Errorf("sqlite: invalidate %q: %w", p.Environment, err)
	}
	return nil
}

// RemoveEnvironment removes an environment row, pinned to p.Generation:
// state.ErrConflictingPlan when it was promoted since, state.ErrNotFound when
// it is gone; a refused removal writes nothing. The name's generation
// counter survives. In the same IMMEDIATE transaction every version the
// environment served gets p.Now as its last-served time, its open debts are
// superseded at p.Now with their gap_superseded events (debt.RemovedEvent),
// and the environment_removing event is appended last; it is returned with
// its id.
func (s *Store) RemoveEnvironment(ctx context.Context, p state.RemoveEnvironmentParams) (state.Event, error) {
	if p.Now.IsZero() {
		return state.Event{}, fmt.Errorf("sqlite: remove environment %q: %w", p.Name, errNoNow)
	}
	var removal state.Event
	err := s.write(ctx, func(tx *sql.Tx) error {
		cur, err := getEnvironment(ctx, tx, p.Name)
		if err != nil {
			return err
		}
		if cur.Generation != p.Generation {
			return fmt.Errorf("%w: environment %q is at generation %d, not %d",
				state.ErrConflictingPlan, p.Name, cur.Generation, p.Generation)
		}
		if _, err := tx.ExecContext(ctx,
			`DELETE FROM environments WHERE name = ? AND generation = ?`, p.Name, p.Generation); err != nil {
			return err
		}
		if err := recordLastServed(ctx, tx, cur.Snapshots, nil, p.Now); err != nil {
			return err
		}
		if err := supersedeOpenDebts(ctx, tx, p.Name, p.Now, debt.RemovedEvent); err != nil {
			return err
		}
		events, data, err := prepareEvents([]state.Event{{At: p.Now, Kind: state.EventEnvironmentRemoving,
			Environment: p.Name, PlanID: cur.PlanID, Data: p.Data}})
		if err != nil {
			return err
		}
		if err := insertEvents(ctx, tx, events, data); err != nil {
			return fmt.Errorf("appending the removal event: %w", err)
		}
		removal = events[0]
		return nil
	})
	if err != nil {
		return state.Event{}, fmt.Errorf("sqlite: remove environment %q: %w", p.Name, err)
	}
	return removal, nil
}
