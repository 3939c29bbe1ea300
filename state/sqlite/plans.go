package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/state/internal/storekit"
)

// SavePlan stores a plan. Invariant: a plan id names one payload forever;
// saving it again with the same environment and the same JSON (compared
// compacted) is a no-op that keeps the first record, and with anything else
// it is an error.
func (s *Store) SavePlan(ctx context.Context, p state.Plan) error {
	if p.ID == "" {
		return errors.New("sqlite: save plan: empty id")
	}
	payload, err := compactJSON(p.Payload)
	if err != nil {
		return fmt.Errorf("sqlite: save plan %q: payload: %w", p.ID, err)
	}
	err = s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `
			INSERT INTO plans (id, environment, payload, created_at_us) VALUES (?, ?, ?, ?)
			ON CONFLICT (id) DO NOTHING`,
			p.ID, p.Environment, payload, storekit.Micros(p.CreatedAt))
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
		var env, have string
		if err := tx.QueryRowContext(ctx,
			`SELECT environment, payload FROM plans WHERE id = ?`, p.ID).Scan(&env, &have); err != nil {
			return fmt.Errorf("reading the saved plan: %w", err)
		}
		if env != p.Environment || have != payload {
			return fmt.Errorf("plan %q is already saved with a different environment or payload", p.ID)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("sqlite: save plan %q: %w", p.ID, err)
	}
	return nil
}

// compactJSON validates raw and returns it without insignificant space.
func compactJSON(raw json.RawMessage) (string, error) {
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return "", fmt.Errorf("not valid JSON: %w", err)
	}
	return buf.String(), nil
}

// GetPlan returns a saved plan or an error wrapping state.ErrNotFound.
func (s *Store) GetPlan(ctx context.Context, id string) (*state.Plan, error) {
	var (
		p       = state.Plan{ID: id}
		payload string
		created int64
	)
	err := s.db.QueryRowContext(ctx,
		`SELECT environment, payload, created_at_us FROM plans WHERE id = ?`, id,
	).Scan(&p.Environment, &payload, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("sqlite: plan %q: %w", id, state.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: get plan %q: %w", id, err)
	}
	p.Payload = json.RawMessage(payload)
	p.CreatedAt = storekit.FromMicros(created)
	return &p, nil
}

// listPlansQuery is ListPlans' query: with the environment filter or
// without, each the shape of one index of migration 00003, which returns
// the rows in the query's order (no sort). where is the filter.
func listPlansQuery(where []string) string {
	q := `SELECT id, environment, payload, created_at_us FROM plans`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	return q + ` ORDER BY created_at_us DESC, id`
}

// ListPlans returns the saved plans matching f, newest first (created_at
// descending, then id), at most f.Limit of them (0: all).
func (s *Store) ListPlans(ctx context.Context, f state.PlanFilter) ([]state.Plan, error) {
	if f.Limit < 0 {
		return nil, fmt.Errorf("sqlite: list plans: negative limit %d", f.Limit)
	}
	var (
		where []string
		args  []any
	)
	if f.Environment != "" {
		where = append(where, "environment = ?")
		args = append(args, f.Environment)
	}
	if !f.CreatedAfter.IsZero() {
		// Stored instants are whole microseconds: m > floor(t) exactly when
		// the instant m is after t.
		where = append(where, "created_at_us > ?")
		args = append(args, storekit.Micros(f.CreatedAfter))
	}
	query := listPlansQuery(where)
	if f.Limit > 0 {
		query += ` LIMIT ?`
		args = append(args, f.Limit)
	}
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list plans: %w", err)
	}
	defer rows.Close()
	out := []state.Plan{}
	for rows.Next() {
		var (
			p       state.Plan
			payload string
			created int64
		)
		if err := rows.Scan(&p.ID, &p.Environment, &payload, &created); err != nil {
			return nil, fmt.Errorf("sqlite: list plans: %w", err)
		}
		p.Payload = json.RawMessage(payload)
		p.CreatedAt = storekit.FromMicros(created)
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list plans: %w", err)
	}
	return out, nil
}

// RecordApplication appends one entry to a saved plan's application history
// and returns it with its id, greater than every earlier entry's. It fails
// wrapping state.ErrNotFound when the plan was never saved.
func (s *Store) RecordApplication(ctx context.Context, a state.Application) (state.Application, error) {
	if a.PlanID == "" || a.Stage == "" || a.Status == "" {
		return state.Application{}, errors.New("sqlite: record application: plan id, stage and status are required")
	}
	detail, err := optionalJSON("detail", a.Detail)
	if err != nil {
		return state.Application{}, fmt.Errorf("sqlite: record application of plan %q: %w", a.PlanID, err)
	}
	err = s.write(ctx, func(tx *sql.Tx) error {
		var one int
		err := tx.QueryRowContext(ctx, `SELECT 1 FROM plans WHERE id = ?`, a.PlanID).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("plan %q: %w", a.PlanID, state.ErrNotFound)
		}
		if err != nil {
			return err
		}
		return tx.QueryRowContext(ctx, `
			INSERT INTO plan_applications (plan_id, stage, status, detail, at_us)
			VALUES (?, ?, ?, ?, ?) RETURNING id`,
			a.PlanID, a.Stage, a.Status, detail, storekit.Micros(a.At)).Scan(&a.ID)
	})
	if err != nil {
		return state.Application{}, fmt.Errorf("sqlite: record application of plan %q: %w", a.PlanID, err)
	}
	a.At = storekit.FromMicros(storekit.Micros(a.At))
	return a, nil
}

// ListApplications returns a plan's application history in the order it was
// recorded (empty for an unknown plan).
func (s *Store) ListApplications(ctx context.Context, planID string) ([]state.Application, error) {
	rows, err := s.db.QueryContext(ctx, `
		SELECT id, stage, status, detail, at_us FROM plan_applications
		WHERE plan_id = ? ORDER BY id`, planID)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list applications of plan %q: %w", planID, err)
	}
	defer rows.Close()
	var out []state.Application
	for rows.Next() {
		a := state.Application{PlanID: planID}
		var detail *string
		var at int64
		if err := rows.Scan(&a.ID, &a.Stage, &a.Status, &detail, &at); err != nil {
			return nil, fmt.Errorf("sqlite: list applications of plan %q: %w", planID, err)
		}
		a.Detail = rawJSON(detail)
		a.At = storekit.FromMicros(at)
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list applications of plan %q: %w", planID, err)
	}
	return out, nil
}

// DeletePlans deletes the named saved plans and their application
// histories in one write transaction, keeping every plan an environment
// serves or served before and every plan with activity at or after
// p.Before (see state.Store.DeletePlans). The ids travel as one JSON
// array (json_each), so the statement is the same however many there are.
func (s *Store) DeletePlans(ctx context.Context, p state.DeletePlansParams) ([]string, error) {
	if p.Before.IsZero() {
		return nil, fmt.Errorf("sqlite: delete plans: before: %w", errNoNow)
	}
	deleted := []string{}
	if len(p.IDs) == 0 {
		return deleted, nil
	}
	ids, err := json.Marshal(p.IDs)
	if err != nil {
		return nil, fmt.Errorf("sqlite: delete plans: %w", err)
	}
	before := storekit.Micros(p.Before)
	err = s.write(ctx, func(tx *sql.Tx) error {
		deleted = deleted[:0]
		rows, err := tx.QueryContext(ctx, `
			DELETE FROM plans
			WHERE id IN (SELECT value FROM json_each(?))
			  AND id NOT IN (SELECT plan_id FROM environments UNION SELECT previous_plan_id FROM environments)
			  AND created_at_us < ?
			  AND NOT EXISTS (SELECT 1 FROM plan_applications a WHERE a.plan_id = plans.id AND a.at_us >= ?)
			RETURNING id`, string(ids), before, before)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				return err
			}
			deleted = append(deleted, id)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if len(deleted) == 0 {
			return nil
		}
		gone, err := json.Marshal(deleted)
		if err != nil {
			return err
		}
		// The foreign key cascades; the explicit delete keeps the history
		// gone even on a connection without foreign_keys.
		_, err = tx.ExecContext(ctx, `DELETE FROM plan_applications WHERE plan_id IN (SELECT value FROM json_each(?))`, string(gone))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite: delete plans: %w", err)
	}
	slices.Sort(deleted)
	return deleted, nil
}
