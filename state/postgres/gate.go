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

// The merge gate (state.GateStore). Every transition runs the shared logic
// of storekit (gate.go) in one READ COMMITTED transaction that locks the
// attempt's row FOR UPDATE first, as the code-host store's transitions do.
//
// Two things need more than row locks, because the rows they must see may
// not exist yet:
//   - BeginDeploy reads every open PR check on the environment to hold it,
//     while a PutPRCheck may be inserting one. Both take the environment's
//     gate lock (a transaction-scoped advisory lock on the environment's
//     name), BeginDeploy exclusively and PutPRCheck shared: a PutPRCheck
//     that commits first is read by BeginDeploy (READ COMMITTED reads what
//     committed before each statement); one that waits for BeginDeploy then
//     sees the attempt active and holds itself (the write-path guard).
//   - Two BeginDeploys on one environment that both see no active attempt
//     both write one: the partial unique index deploy_attempts_one_active
//     makes the second wait for the first and fail, which UpdateDeploy
//     reports as state.ErrDeployActive, rolling back its holds with it.

// gateLockClass is the first key of the environments' gate locks ("gate"
// as four bytes); the second is the hash of the environment's name. The
// two-key advisory locks are a space of their own, apart from the one-key
// locks of the migrations and of the events.
const gateLockClass int32 = 0x67617465

// LockGate takes env's gate lock until the transaction ends.
func (t codeHostTx) LockGate(ctx context.Context, env string, exclusive bool) error {
	fn := "pg_advisory_xact_lock_shared"
	if exclusive {
		fn = "pg_advisory_xact_lock"
	}
	_, err := t.tx.Exec(ctx, `SELECT `+fn+`($1::int4, hashtext($2))`, gateLockClass, env)
	return err
}

// EnvironmentGeneration reads env's generation, its row locked FOR SHARE
// (a promotion waits until the transaction ends); a removed environment
// (marked deleted) does not exist.
func (t codeHostTx) EnvironmentGeneration(ctx context.Context, env string) (int64, bool, error) {
	var gen int64
	err := t.tx.QueryRow(ctx, `SELECT generation FROM environments WHERE name = $1 AND NOT deleted FOR SHARE`, env).Scan(&gen)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	return gen, err == nil, err
}

const gateTargetColumns = `env, repo, mode, unsafe, updated_at_us`

func scanGateTarget(row pgx.Row) (state.GateTarget, error) {
	var (
		g       state.GateTarget
		updated int64
	)
	if err := row.Scan(&g.Env, &g.Repo, &g.Mode, &g.Unsafe, &updated); err != nil {
		return state.GateTarget{}, err
	}
	g.UpdatedAt = storekit.FromMicros(updated)
	return g, nil
}

func getGateTarget(ctx context.Context, q querier, env string, lock bool) (state.GateTarget, bool, error) {
	sql := `SELECT ` + gateTargetColumns + ` FROM gate_targets WHERE env = $1`
	if lock {
		sql += ` FOR UPDATE`
	}
	g, err := scanGateTarget(q.QueryRow(ctx, sql, env))
	if errors.Is(err, pgx.ErrNoRows) {
		return state.GateTarget{}, false, nil
	}
	return g, err == nil, err
}

// GateTarget reads env's gate target, locked FOR UPDATE: a promotion's
// fence keeps it from being removed or changed until it commits.
func (t codeHostTx) GateTarget(ctx context.Context, env string) (state.GateTarget, bool, error) {
	return getGateTarget(ctx, t.tx, env, true)
}

func (t codeHostTx) PutGateTarget(ctx context.Context, g state.GateTarget) error {
	_, err := t.tx.Exec(ctx, `
		INSERT INTO gate_targets (`+gateTargetColumns+`) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (env) DO UPDATE SET repo = excluded.repo, mode = excluded.mode, unsafe = excluded.unsafe,
			updated_at_us = excluded.updated_at_us`,
		g.Env, g.Repo, g.Mode, g.Unsafe, storekit.Micros(g.UpdatedAt))
	return err
}

func (t codeHostTx) DeleteGateTarget(ctx context.Context, env string) (bool, error) {
	tag, err := t.tx.Exec(ctx, `DELETE FROM gate_targets WHERE env = $1`, env)
	if err != nil {
		return false, err
	}
	return tag.RowsAffected() > 0, nil
}

func (t codeHostTx) OpenPRChecks(ctx context.Context, env string) ([]state.PRCheck, error) {
	rows, err := t.tx.Query(ctx, `SELECT `+prCheckSelect+` FROM pr_checks
		WHERE env = $1 AND NOT closed ORDER BY repo, number`, env)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (state.PRCheck, error) { return scanPRCheck(row) })
}

const holdColumns = `attempt_id, env, repo, number, head_sha, created_at_us, rendered_at_us, render_error,
	released_at_us, release_reason`

func scanHold(row pgx.Row) (state.Hold, error) {
	var (
		h                           state.Hold
		number                      int32
		created, rendered, released int64
	)
	if err := row.Scan(&h.AttemptID, &h.Env, &h.Repo, &number, &h.HeadSHA, &created, &rendered, &h.RenderError,
		&released, &h.ReleaseReason); err != nil {
		return state.Hold{}, err
	}
	h.Number = int(number)
	h.CreatedAt, h.RenderedAt, h.ReleasedAt = storekit.FromMicros(created), storekit.FromMicros(rendered), storekit.FromMicros(released)
	return h, nil
}

// holdFilter adds the conditions of p to f.
func holdFilter(f *filter, p state.ListHoldsParams) {
	for _, c := range []struct{ col, v string }{{"attempt_id", p.AttemptID}, {"env", p.Env}, {"repo", p.Repo}} {
		if c.v != "" {
			f.eq(c.col, c.v)
		}
	}
	if p.Number != 0 {
		f.eq("number", p.Number)
	}
	if p.ActiveOnly {
		f.cond("released_at_us = 0")
	}
}

// listHolds reads the holds matching p through q, by attempt, repo and
// number; with lock, FOR UPDATE.
func listHolds(ctx context.Context, q querier, p state.ListHoldsParams, lock bool) ([]state.Hold, error) {
	var f filter
	holdFilter(&f, p)
	sql := `SELECT ` + holdColumns + ` FROM gate_holds WHERE ` + f.clause() + ` ORDER BY attempt_id COLLATE "C", repo COLLATE "C", number`
	if lock {
		sql += ` FOR UPDATE`
	}
	rows, err := q.Query(ctx, sql, f.args...)
	if err != nil {
		return nil, err
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (state.Hold, error) { return scanHold(row) })
	if err != nil {
		return nil, err
	}
	if out == nil {
		out = []state.Hold{}
	}
	return out, nil
}

func (t codeHostTx) Holds(ctx context.Context, p state.ListHoldsParams) ([]state.Hold, error) {
	return listHolds(ctx, t.tx, p, true)
}

func (t codeHostTx) InsertHold(ctx context.Context, h state.Hold) (bool, error) {
	return inserted(t.tx.Exec(ctx, `
		INSERT INTO gate_holds (`+holdColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
		ON CONFLICT (attempt_id, repo, number) DO NOTHING`,
		h.AttemptID, h.Env, h.Repo, h.Number, h.HeadSHA, storekit.Micros(h.CreatedAt), storekit.Micros(h.RenderedAt),
		h.RenderError, storekit.Micros(h.ReleasedAt), h.ReleaseReason))
}

func (t codeHostTx) UpdateHold(ctx context.Context, h state.Hold) error {
	return updatedOne(t.tx.Exec(ctx, `
		UPDATE gate_holds SET rendered_at_us = $4, render_error = $5
		WHERE attempt_id = $1 AND repo = $2 AND number = $3`,
		h.AttemptID, h.Repo, h.Number, storekit.Micros(h.RenderedAt), h.RenderError))
}

func (t codeHostTx) ReleaseHolds(ctx context.Context, p state.ListHoldsParams, reason string, now time.Time) ([]state.Hold, error) {
	var f filter
	at, why := f.param(storekit.Micros(now)), f.param(reason)
	holdFilter(&f, state.ListHoldsParams{AttemptID: p.AttemptID, Env: p.Env, ActiveOnly: true})
	rows, err := t.tx.Query(ctx, `UPDATE gate_holds SET released_at_us = `+at+`, release_reason = `+why+`
		WHERE `+f.clause()+` RETURNING `+holdColumns, f.args...)
	if err != nil {
		return nil, err
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (state.Hold, error) { return scanHold(row) })
	if err != nil {
		return nil, err
	}
	storekit.SortHolds(out)
	return out, nil
}

func (t codeHostTx) AppendEvents(ctx context.Context, events ...state.Event) error {
	rows, err := encodeEvents(events)
	if err != nil {
		return err
	}
	_, err = rows.insert(ctx, t.tx)
	return err
}

// SetGateTarget puts an environment under the merge gate, or updates it.
func (s *Store) SetGateTarget(ctx context.Context, t state.GateTarget) (state.GateTarget, error) {
	var out state.GateTarget
	err := s.codeHost(ctx, func(tx codeHostTx) (err error) {
		out, err = storekit.SetGateTarget(ctx, tx, t)
		return err
	})
	if err != nil {
		return state.GateTarget{}, fmt.Errorf("postgres state: set the gate of %q: %w", t.Env, err)
	}
	return out, nil
}

// RemoveGateTarget takes an environment out of the merge gate.
func (s *Store) RemoveGateTarget(ctx context.Context, env string, now time.Time) error {
	err := s.codeHost(ctx, func(tx codeHostTx) error { return storekit.RemoveGateTarget(ctx, tx, env, now) })
	if err != nil {
		return fmt.Errorf("postgres state: remove the gate of %q: %w", env, err)
	}
	return nil
}

// GetGateTarget returns env's gate, or an error wrapping state.ErrNotFound.
func (s *Store) GetGateTarget(ctx context.Context, env string) (state.GateTarget, error) {
	g, found, err := getGateTarget(ctx, s.pool, env, false)
	switch {
	case err != nil:
		return state.GateTarget{}, fmt.Errorf("postgres state: get the gate of %q: %w", env, err)
	case !found:
		return state.GateTarget{}, fmt.Errorf("postgres state: environment %q is not gated: %w", env, state.ErrNotFound)
	}
	return g, nil
}

// ListGateTargets returns every gated environment, by name (byte-wise,
// whatever the database's collation).
func (s *Store) ListGateTargets(ctx context.Context) ([]state.GateTarget, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+gateTargetColumns+` FROM gate_targets ORDER BY env COLLATE "C"`)
	if err != nil {
		return nil, fmt.Errorf("postgres state: list gate targets: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (state.GateTarget, error) { return scanGateTarget(row) })
	if err != nil {
		return nil, fmt.Errorf("postgres state: list gate targets: %w", err)
	}
	if out == nil {
		out = []state.GateTarget{}
	}
	return out, nil
}

// BeginDeploy records an attempt held and its holds, in one transaction.
func (s *Store) BeginDeploy(ctx context.Context, p state.BeginDeployParams) (state.DeployAttempt, []state.Hold, error) {
	var (
		out   state.DeployAttempt
		holds []state.Hold
	)
	err := s.codeHost(ctx, func(tx codeHostTx) (err error) {
		out, holds, err = storekit.BeginDeploy(ctx, tx, p)
		return err
	})
	if err != nil {
		return state.DeployAttempt{}, nil, fmt.Errorf("postgres state: begin deploy attempt %q: %w", p.ID, err)
	}
	return out, holds, nil
}

// MarkHoldRendered records one hold's render outcome.
func (s *Store) MarkHoldRendered(ctx context.Context, p state.MarkHoldRenderedParams) (state.Hold, error) {
	var out state.Hold
	err := s.codeHost(ctx, func(tx codeHostTx) (err error) {
		out, err = storekit.MarkHoldRendered(ctx, tx, p)
		return err
	})
	if err != nil {
		return state.Hold{}, fmt.Errorf("postgres state: mark the hold of %s#%d by attempt %q rendered: %w", p.Repo, p.Number, p.AttemptID, err)
	}
	return out, nil
}

// RunDeploy opens the gate of an attempt.
func (s *Store) RunDeploy(ctx context.Context, p state.RunDeployParams) (state.DeployAttempt, error) {
	var out state.DeployAttempt
	err := s.codeHost(ctx, func(tx codeHostTx) (err error) {
		out, err = storekit.RunDeploy(ctx, tx, p)
		return err
	})
	if err != nil {
		return state.DeployAttempt{}, fmt.Errorf("postgres state: run deploy attempt %q: %w", p.ID, err)
	}
	return out, nil
}

// SettleDeploy releases an ended attempt's own holds.
func (s *Store) SettleDeploy(ctx context.Context, p state.SettleDeployParams) (state.DeployAttempt, []state.Hold, error) {
	var (
		out      state.DeployAttempt
		released []state.Hold
	)
	err := s.codeHost(ctx, func(tx codeHostTx) (err error) {
		out, released, err = storekit.SettleDeploy(ctx, tx, p)
		return err
	})
	if err != nil {
		return state.DeployAttempt{}, nil, fmt.Errorf("postgres state: settle deploy attempt %q: %w", p.ID, err)
	}
	return out, released, nil
}

// ResolveDeploy ends an attempt whose lease expired more than Grace ago.
func (s *Store) ResolveDeploy(ctx context.Context, p state.ResolveDeployParams) (state.DeployAttempt, bool, error) {
	var (
		out      state.DeployAttempt
		resolved bool
	)
	err := s.codeHost(ctx, func(tx codeHostTx) (err error) {
		out, resolved, err = storekit.ResolveDeploy(ctx, tx, p)
		return err
	})
	if err != nil {
		return state.DeployAttempt{}, false, fmt.Errorf("postgres state: resolve deploy attempt %q: %w", p.ID, err)
	}
	return out, resolved, nil
}

// ListHolds returns the holds matching p, by attempt, repo and number.
func (s *Store) ListHolds(ctx context.Context, p state.ListHoldsParams) ([]state.Hold, error) {
	if err := storekit.CheckListHolds(p); err != nil {
		return nil, fmt.Errorf("postgres state: list holds: %w", err)
	}
	out, err := listHolds(ctx, s.pool, p, false)
	if err != nil {
		return nil, fmt.Errorf("postgres state: list holds: %w", err)
	}
	return out, nil
}
