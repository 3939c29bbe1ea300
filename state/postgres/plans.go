package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/state/internal/storekit"
)

// jsonParam validates optional caller JSON that the store treats as opaque:
// empty means "none" (ok is false), anything else must be valid JSON.
func jsonParam(b json.RawMessage) (s string, ok bool, err error) {
	if len(b) == 0 {
		return "", false, nil
	}
	if !json.Valid(b) {
		return "", false, errors.New("not valid JSON")
	}
	return string(b), true, nil
}

// SavePlan stores a plan. Saving an id again with the same environment and
// an equal payload (compared as JSON documents) is a no-op; with anything
// else it is an error, and the stored plan is unchanged. The insert is one
// statement with ON CONFLICT DO NOTHING, so concurrent saves of one plan
// cannot both write.
//
// The payload is kept as JSONB (for comparison) and as the caller's exact
// bytes, which GetPlan returns.
func (s *Store) SavePlan(ctx context.Context, p state.Plan) error {
	if p.ID == "" {
		return errors.New("postgres state: save plan: the plan id is empty")
	}
	if !json.Valid(p.Payload) {
		return fmt.Errorf("postgres state: save plan %q: the payload is not valid JSON", p.ID)
	}
	doc := string(p.Payload)
	tag, err := s.pool.Exec(ctx, `
		INSERT INTO plans (id, environment, payload, payload_text, created_at_us)
		VALUES ($1, $2, $3::jsonb, $4, $5)
		ON CONFLICT (id) DO NOTHING`,
		p.ID, p.Environment, doc, doc, storekit.Micros(p.CreatedAt))
	if err != nil {
		return fmt.Errorf("postgres state: save plan %q: %w", p.ID, err)
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	var same bool
	if err := s.pool.QueryRow(ctx, `
		SELECT payload = $2::jsonb AND environment = $3 FROM plans WHERE id = $1`,
		p.ID, doc, p.Environment).Scan(&same); err != nil {
		return fmt.Errorf("postgres state: save plan %q: comparing with the stored plan: %w", p.ID, err)
	}
	if !same {
		return fmt.Errorf("postgres state: save plan %q: a different plan is already saved under this id", p.ID)
	}
	return nil
}

// GetPlan returns a saved plan, its payload byte for byte as saved, or an
// error wrapping state.ErrNotFound.
func (s *Store) GetPlan(ctx context.Context, id string) (*state.Plan, error) {
	p := state.Plan{ID: id}
	var text string
	var created int64
	err := s.pool.QueryRow(ctx, `
		SELECT environment, payload_text, created_at_us FROM plans WHERE id = $1`, id).
		Scan(&p.Environment, &text, &created)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("postgres state: plan %q: %w", id, state.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("postgres state: reading plan %q: %w", id, err)
	}
	p.Payload = json.RawMessage(text)
	p.CreatedAt = storekit.FromMicros(created)
	return &p, nil
}

// ListPlans returns the saved plans matching f, newest first (created_at
// descending, then id), at most f.Limit of them (0: all), each payload byte
// for byte as saved. Both shapes of the filter, with an environment or
// without, are a range of one index of migration 00003, in the query's
// order.
func (s *Store) ListPlans(ctx context.Context, f state.PlanFilter) ([]state.Plan, error) {
	if f.Limit < 0 {
		return nil, fmt.Errorf("postgres state: list plans: negative limit %d", f.Limit)
	}
	var (
		where []string
		args  []any
	)
	if f.Environment != "" {
		args = append(args, f.Environment)
		where = append(where, fmt.Sprintf("environment = $%d", len(args)))
	}
	if !f.CreatedAfter.IsZero() {
		// Stored instants are whole microseconds: m > floor(t) exactly when
		// the instant m is after t.
		args = append(args, storekit.Micros(f.CreatedAfter))
		where = append(where, fmt.Sprintf("created_at_us > $%d", len(args)))
	}
	query := `SELECT id, environment, payload_text, created_at_us FROM plans`
	if len(where) > 0 {
		query += ` WHERE ` + strings.Join(where, " AND ")
	}
	query += ` ORDER BY created_at_us DESC, id`
	if f.Limit > 0 {
		args = append(args, f.Limit)
		query += fmt.Sprintf(" LIMIT $%d", len(args))
	}
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("postgres state: list plans: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (state.Plan, error) {
		var p state.Plan
		var text string
		var created int64
		if err := row.Scan(&p.ID, &p.Environment, &text, &created); err != nil {
			return p, err
		}
		p.Payload = json.RawMessage(text)
		p.CreatedAt = storekit.FromMicros(created)
		return p, nil
	})
	if err != nil {
		return nil, fmt.Errorf("postgres state: list plans: %w", err)
	}
	if out == nil {
		out = []state.Plan{}
	}
	return out, nil
}

// RecordApplication appends one entry to a saved plan's application history
// and returns it with its id, which increases with every entry. A plan that
// was never saved gives state.ErrNotFound (the existence check and the insert
// are one statement).
func (s *Store) RecordApplication(ctx context.Context, a state.Application) (state.Application, error) {
	if a.PlanID == "" || a.Stage == "" || a.Status == "" {
		return state.Application{}, errors.New("postgres state: record application: plan id, stage and status are required")
	}
	detail, ok, err := jsonParam(a.Detail)
	if err != nil {
		return state.Application{}, fmt.Errorf("postgres state: record application of plan %q: detail: %w", a.PlanID, err)
	}
	var param *string
	if ok {
		param = &detail
	}
	err = s.pool.QueryRow(ctx, `
		INSERT INTO applications (plan_id, stage, status, detail, at_us)
		SELECT $1, $2, $3, $4::json, $5 WHERE EXISTS (SELECT 1 FROM plans WHERE id = $1)
		RETURNING id`,
		a.PlanID, a.Stage, a.Status, param, storekit.Micros(a.At)).Scan(&a.ID)
	if errors.Is(err, pgx.ErrNoRows) {
		return state.Application{}, fmt.Errorf("postgres state: record application: plan %q: %w", a.PlanID, state.ErrNotFound)
	}
	if err != nil {
		return state.Application{}, fmt.Errorf("postgres state: record application of plan %q: %w", a.PlanID, err)
	}
	a.At = storekit.FromMicros(storekit.Micros(a.At))
	if !ok {
		a.Detail = nil
	}
	return a, nil
}

// ListApplications returns a plan's application history in id order.
func (s *Store) ListApplications(ctx context.Context, planID string) ([]state.Application, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT id, plan_id, stage, status, detail::text, at_us
		FROM applications WHERE plan_id = $1 ORDER BY id`, planID)
	if err != nil {
		return nil, fmt.Errorf("postgres state: listing the applications of plan %q: %w", planID, err)
	}
	apps, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (state.Application, error) {
		var a state.Application
		var detail *string
		var at int64
		if err := row.Scan(&a.ID, &a.PlanID, &a.Stage, &a.Status, &detail, &at); err != nil {
			return a, err
		}
		if detail != nil {
			a.Detail = json.RawMessage(*detail)
		}
		a.At = storekit.FromMicros(at)
		return a, nil
	})
	if err != nil {
		return nil, fmt.Errorf("postgres state: listing the applications of plan %q: %w", planID, err)
	}
	return apps, nil
}

// DeletePlans deletes the named saved plans and their application
// histories in one transaction, keeping every plan a live environment
// serves or served before and every plan with activity at or after
// p.Before (see state.Store.DeletePlans): one DELETE whose conditions are
// checked on the rows it deletes, so a plan promoted or applied by another
// transaction that committed before it is kept.
func (s *Store) DeletePlans(ctx context.Context, p state.DeletePlansParams) ([]string, error) {
	if p.Before.IsZero() {
		return nil, fmt.Errorf("postgres state: delete plans: before: %w", state.ErrNoNow)
	}
	deleted := []string{}
	if len(p.IDs) == 0 {
		return deleted, nil
	}
	before := storekit.Micros(p.Before)
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		deleted = deleted[:0]
		rows, err := tx.Query(ctx, `
			DELETE FROM plans
			WHERE id = ANY($1::text[])
			  AND NOT EXISTS (SELECT 1 FROM environments e
			                  WHERE NOT e.deleted AND (e.plan_id = plans.id OR e.previous_plan_id = plans.id))
			  AND created_at_us < $2
			  AND NOT EXISTS (SELECT 1 FROM applications a WHERE a.plan_id = plans.id AND a.at_us >= $2)
			RETURNING id`, p.IDs, before)
		if err != nil {
			return err
		}
		deleted, err = pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		if len(deleted) == 0 {
			return nil
		}
		_, err = tx.Exec(ctx, `DELETE FROM applications WHERE plan_id = ANY($1::text[])`, deleted)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres state: delete plans: %w", err)
	}
	if deleted == nil {
		deleted = []string{}
	}
	slices.Sort(deleted)
	return deleted, nil
}
