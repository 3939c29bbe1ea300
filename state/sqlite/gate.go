package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/state/internal/storekit"
)

// The merge gate (state.GateStore). Every transition runs the shared logic
// of storekit (gate.go) in one synced BEGIN IMMEDIATE transaction, like
// the code-host store's: the file's write lock is held from the first read
// to the commit, so BeginDeploy's read of the open PR checks, the
// attempts' compare-and-swaps and a promotion's fence see exactly what
// they write against, for every writer of the file in any process. The
// gate lock storekit takes (LockGate) is therefore nothing here.

// LockGate is a no-op: the transaction holds the file's write lock.
func (t codeHostTx) LockGate(context.Context, string, bool) error { return nil }

// EnvironmentGeneration reads env's generation (0 and found=false when it
// does not exist: a removed environment's row is deleted).
func (t codeHostTx) EnvironmentGeneration(ctx context.Context, env string) (int64, bool, error) {
	var gen int64
	err := t.tx.QueryRowContext(ctx, generationQuery, env).Scan(&gen, new(int64))
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	return gen, err == nil, err
}

const gateTargetColumns = `env, repo, mode, unsafe, updated_at_us`

func scanGateTarget(sc interface{ Scan(...any) error }) (state.GateTarget, error) {
	var (
		g       state.GateTarget
		updated int64
	)
	if err := sc.Scan(&g.Env, &g.Repo, &g.Mode, &g.Unsafe, &updated); err != nil {
		return state.GateTarget{}, err
	}
	g.UpdatedAt = storekit.FromMicros(updated)
	return g, nil
}

func getGateTarget(ctx context.Context, q querier, env string) (state.GateTarget, bool, error) {
	g, err := scanGateTarget(q.QueryRowContext(ctx, `SELECT `+gateTargetColumns+` FROM gate_targets WHERE env = ?`, env))
	if errors.Is(err, sql.ErrNoRows) {
		return state.GateTarget{}, false, nil
	}
	return g, err == nil, err
}

func (t codeHostTx) GateTarget(ctx context.Context, env string) (state.GateTarget, bool, error) {
	return getGateTarget(ctx, t.tx, env)
}

func (t codeHostTx) PutGateTarget(ctx context.Context, g state.GateTarget) error {
	_, err := t.tx.ExecContext(ctx, `
		INSERT INTO gate_targets (`+gateTargetColumns+`) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (env) DO UPDATE SET repo = excluded.repo, mode = excluded.mode, unsafe = excluded.unsafe,
			updated_at_us = excluded.updated_at_us`,
		g.Env, g.Repo, g.Mode, g.Unsafe, storekit.Micros(g.UpdatedAt))
	return err
}

func (t codeHostTx) DeleteGateTarget(ctx context.Context, env string) (bool, error) {
	res, err := t.tx.ExecContext(ctx, `DELETE FROM gate_targets WHERE env = ?`, env)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n > 0, err
}

func (t codeHostTx) OpenPRChecks(ctx context.Context, env string) ([]state.PRCheck, error) {
	rows, err := t.tx.QueryContext(ctx, `SELECT `+prCheckColumns+` FROM pr_checks
		WHERE env = ? AND closed = 0 ORDER BY repo, number`, env)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []state.PRCheck
	for rows.Next() {
		c, err := scanPRCheck(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

const holdColumns = `attempt_id, env, repo, number, head_sha, created_at_us, rendered_at_us, render_error,
	released_at_us, release_reason`

func scanHold(sc interface{ Scan(...any) error }) (state.Hold, error) {
	var (
		h                           state.Hold
		created, rendered, released int64
	)
	if err := sc.Scan(&h.AttemptID, &h.Env, &h.Repo, &h.Number, &h.HeadSHA, &created, &rendered, &h.RenderError,
		&released, &h.ReleaseReason); err != nil {
		return state.Hold{}, err
	}
	h.CreatedAt, h.RenderedAt, h.ReleasedAt = storekit.FromMicros(created), storekit.FromMicros(rendered), storekit.FromMicros(released)
	return h, nil
}

// holdFilter is the WHERE clause and arguments of f.
func holdFilter(f state.ListHoldsParams) (string, []any) {
	var (
		where = []string{"1 = 1"}
		args  []any
	)
	for _, c := range []struct{ col, v string }{{"attempt_id", f.AttemptID}, {"env", f.Env}, {"repo", f.Repo}} {
		if c.v != "" {
			where, args = append(where, c.col+" = ?"), append(args, c.v)
		}
	}
	if f.Number != 0 {
		where, args = append(where, "number = ?"), append(args, f.Number)
	}
	if f.ActiveOnly {
		where = append(where, "released_at_us = 0")
	}
	return strings.Join(where, " AND "), args
}

// listHolds reads the holds matching f through q, by attempt, repo and
// number.
func listHolds(ctx context.Context, q querier, f state.ListHoldsParams) ([]state.Hold, error) {
	where, args := holdFilter(f)
	rows, err := q.QueryContext(ctx, `SELECT `+holdColumns+` FROM gate_holds WHERE `+where+
		` ORDER BY attempt_id, repo, number`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []state.Hold{}
	for rows.Next() {
		h, err := scanHold(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, h)
	}
	return out, rows.Err()
}

func (t codeHostTx) Holds(ctx context.Context, f state.ListHoldsParams) ([]state.Hold, error) {
	return listHolds(ctx, t.tx, f)
}

func (t codeHostTx) InsertHold(ctx context.Context, h state.Hold) (bool, error) {
	return inserted(t.tx.ExecContext(ctx, `
		INSERT INTO gate_holds (`+holdColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (attempt_id, repo, number) DO NOTHING`,
		h.AttemptID, h.Env, h.Repo, h.Number, h.HeadSHA, storekit.Micros(h.CreatedAt), storekit.Micros(h.RenderedAt),
		h.RenderError, storekit.Micros(h.ReleasedAt), h.ReleaseReason))
}

func (t codeHostTx) UpdateHold(ctx context.Context, h state.Hold) error {
	return updatedOne(t.tx.ExecContext(ctx, `
		UPDATE gate_holds SET rendered_at_us = ?, render_error = ?
		WHERE attempt_id = ? AND repo = ? AND number = ?`,
		storekit.Micros(h.RenderedAt), h.RenderError, h.AttemptID, h.Repo, h.Number))
}

func (t codeHostTx) ReleaseHolds(ctx context.Context, f state.ListHoldsParams, reason string, now time.Time) ([]state.Hold, error) {
	where, args := holdFilter(state.ListHoldsParams{AttemptID: f.AttemptID, Env: f.Env, ActiveOnly: true})
	rows, err := t.tx.QueryContext(ctx, `UPDATE gate_holds SET released_at_us = ?, release_reason = ?
		WHERE `+where+` RETURNING `+holdColumns, append([]any{storekit.Micros(now), reason}, args...)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []state.Hold
	for rows.Next() {
		h, err := scanHold(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, h)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	storekit.SortHolds(out)
	return out, nil
}

func (t codeHostTx) AppendEvents(ctx context.Context, events ...state.Event) error {
	out, data, err := prepareEvents(events)
	if err != nil {
		return err
	}
	return insertEvents(ctx, t.tx, out, data)
}

// SetGateTarget puts an environment under the merge gate, or updates it.
func (s *Store) SetGateTarget(ctx context.Context, t state.GateTarget) (state.GateTarget, error) {
	var out state.GateTarget
	err := s.codeHost(ctx, func(tx codeHostTx) (err error) {
		out, err = storekit.SetGateTarget(ctx, tx, t)
		return err
	})
	if err != nil {
		return state.GateTarget{}, fmt.Errorf("sqlite: set the gate of %q: %w", t.Env, err)
	}
	return out, nil
}

// RemoveGateTarget takes an environment out of the merge gate.
func (s *Store) RemoveGateTarget(ctx context.Context, env string, now time.Time) error {
	err := s.codeHost(ctx, func(tx codeHostTx) error { return storekit.RemoveGateTarget(ctx, tx, env, now) })
	if err != nil {
		return fmt.Errorf("sqlite: remove the gate of %q: %w", env, err)
	}
	return nil
}

// GetGateTarget returns env's gate, or an error wrapping state.ErrNotFound.
func (s *Store) GetGateTarget(ctx context.Context, env string) (state.GateTarget, error) {
	g, found, err := getGateTarget(ctx, s.db, env)
	switch {
	case err != nil:
		return state.GateTarget{}, fmt.Errorf("sqlite: get the gate of %q: %w", env, err)
	case !found:
		return state.GateTarget{}, fmt.Errorf("sqlite: environment %q is not gated: %w", env, state.ErrNotFound)
	}
	return g, nil
}

// ListGateTargets returns every gated environment, by name.
func (s *Store) ListGateTargets(ctx context.Context) ([]state.GateTarget, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+gateTargetColumns+` FROM gate_targets ORDER BY env`)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list gate targets: %w", err)
	}
	defer rows.Close()
	out := []state.GateTarget{}
	for rows.Next() {
		g, err := scanGateTarget(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: list gate targets: %w", err)
		}
		out = append(out, g)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list gate targets: %w", err)
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
		return state.DeployAttempt{}, nil, fmt.Errorf("sqlite: begin deploy attempt %q: %w", p.ID, err)
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
		return state.Hold{}, fmt.Errorf("sqlite: mark the hold of %s#%d by attempt %q rendered: %w", p.Repo, p.Number, p.AttemptID, err)
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
		return state.DeployAttempt{}, fmt.Errorf("sqlite: run deploy attempt %q: %w", p.ID, err)
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
		return state.DeployAttempt{}, nil, fmt.Errorf("sqlite: settle deploy attempt %q: %w", p.ID, err)
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
		return state.DeployAttempt{}, false, fmt.Errorf("sqlite: resolve deploy attempt %q: %w", p.ID, err)
	}
	return out, resolved, nil
}

// ListHolds returns the holds matching p, by attempt, repo and number.
func (s *Store) ListHolds(ctx context.Context, p state.ListHoldsParams) ([]state.Hold, error) {
	if err := storekit.CheckListHolds(p); err != nil {
		return nil, fmt.Errorf("sqlite: list holds: %w", err)
	}
	out, err := listHolds(ctx, s.db, p)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list holds: %w", err)
	}
	return out, nil
}
