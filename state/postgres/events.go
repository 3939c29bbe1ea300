package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/gapless-dev/gapless/state"
)

// eventsLockID is the key of the transaction-scoped advisory lock that
// AppendEvents holds while it draws ids ("gapless" followed by 0x02).
const eventsLockID int64 = 0x676170_6c657373_02

// AppendEvents records events in one transaction, assigning their ids in
// argument order.
//
// Invariant: event ids become visible in increasing order, so a reader that
// pages with EventFilter.AfterID never skips an event. A BIGSERIAL alone
// does not give that (a transaction can draw a lower id and commit after one
// that drew a higher id); appends therefore draw their ids while holding a
// transaction-scoped advisory lock, which is released only at commit.
func (s *Store) AppendEvents(ctx context.Context, events ...state.Event) ([]state.Event, error) {
	if len(events) == 0 {
		return []state.Event{}, nil
	}
	n := len(events)
	at := make([]int64, n)
	kinds := make([]string, n)
	envs := make([]string, n)
	models := make([]string, n)
	plans := make([]string, n)
	reasons := make([]string, n)
	data := make([]*string, n)
	for i, e := range events {
		if e.Kind == "" {
			return nil, fmt.Errorf("postgres state: append events: event %d has no kind", i)
		}
		d, ok, err := jsonParam(e.Data)
		if err != nil {
			return nil, fmt.Errorf("postgres state: append events: event %d (%s) data: %w", i, e.Kind, err)
		}
		if ok {
			data[i] = &d
		}
		at[i], kinds[i], envs[i], models[i], plans[i], reasons[i] =
			state.Micros(e.At), e.Kind, e.Environment, e.Model, e.PlanID, e.Reason
	}
	var ids []int64
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, eventsLockID); err != nil {
			return fmt.Errorf("taking the event lock: %w", err)
		}
		rows, err := tx.Query(ctx, `
			INSERT INTO events (at_us, kind, environment, model, plan_id, reason, data)
			SELECT a, k, e, m, p, r, d::json
			FROM unnest($1::int8[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[])
			     WITH ORDINALITY AS u(a, k, e, m, p, r, d, ord)
			ORDER BY ord
			RETURNING id`,
			at, kinds, envs, models, plans, reasons, data)
		if err != nil {
			return err
		}
		ids, err = pgx.CollectRows(rows, pgx.RowTo[int64])
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres state: append %d events: %w", n, err)
	}
	if len(ids) != n {
		return nil, fmt.Errorf("postgres state: append %d events: %d ids came back", n, len(ids))
	}
	// nextval ran in ORDER BY ord order, so the ids sorted ascending are the
	// ids of the events in argument order.
	slices.Sort(ids)
	out := make([]state.Event, n)
	for i, e := range events {
		e.ID = ids[i]
		e.At = state.FromMicros(at[i])
		if data[i] == nil {
			e.Data = nil
		}
		out[i] = e
	}
	return out, nil
}

// ListEvents returns the events matching f in id order: zero fields do not
// filter, AfterID is exclusive, Limit 0 means no limit (a negative one is an
// error).
func (s *Store) ListEvents(ctx context.Context, f state.EventFilter) ([]state.Event, error) {
	if f.Limit < 0 {
		return nil, fmt.Errorf("postgres state: list events: negative limit %d", f.Limit)
	}
	kinds := f.Kinds
	if kinds == nil {
		kinds = []string{}
	}
	var limit *int64
	if f.Limit > 0 {
		l := int64(f.Limit)
		limit = &l
	}
	rows, err := s.pool.Query(ctx, `
		SELECT id, at_us, kind, environment, model, plan_id, reason, data::text
		FROM events
		WHERE id > $1
		  AND (coalesce(cardinality($2::text[]), 0) = 0 OR kind = ANY($2::text[]))
		  AND ($3::text = '' OR environment = $3)
		  AND ($4::text = '' OR model = $4)
		  AND ($5::text = '' OR plan_id = $5)
		ORDER BY id
		LIMIT $6::int8`,
		f.AfterID, kinds, f.Environment, f.Model, f.PlanID, limit)
	if err != nil {
		return nil, fmt.Errorf("postgres state: listing events: %w", err)
	}
	events, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (state.Event, error) {
		var e state.Event
		var at int64
		var data *string
		if err := row.Scan(&e.ID, &at, &e.Kind, &e.Environment, &e.Model, &e.PlanID, &e.Reason, &data); err != nil {
			return e, err
		}
		e.At = state.FromMicros(at)
		if data != nil {
			e.Data = json.RawMessage(*data)
		}
		return e, nil
	})
	if err != nil {
		return nil, fmt.Errorf("postgres state: listing events: %w", err)
	}
	if events == nil {
		events = []state.Event{}
	}
	return events, nil
}
