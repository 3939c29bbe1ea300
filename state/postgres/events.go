package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/state/internal/storekit"
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
// transaction-scoped advisory lock, which is released only at commit (see
// eventRows.insert, which every writer of events goes through).
func (s *Store) AppendEvents(ctx context.Context, events ...state.Event) ([]state.Event, error) {
	if len(events) == 0 {
		return []state.Event{}, nil
	}
	rows, err := encodeEvents(events)
	if err != nil {
		return nil, fmt.Errorf("postgres state: append events: %w", err)
	}
	var out []state.Event
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		out, err = rows.insert(ctx, tx)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres state: append %d events: %w", len(events), err)
	}
	return out, nil
}

// eventRows are events checked and encoded as the columns of their insert.
type eventRows struct {
	events                              []state.Event
	at                                  []int64
	kinds, envs, models, plans, reasons []string
	data                                []*string
}

// encodeEvents checks events (a kind, data that is valid JSON) before
// anything is written: one invalid event refuses the whole batch.
func encodeEvents(events []state.Event) (eventRows, error) {
	n := len(events)
	r := eventRows{
		events: events,
		at:     make([]int64, n), kinds: make([]string, n), envs: make([]string, n),
		models: make([]string, n), plans: make([]string, n), reasons: make([]string, n),
		data: make([]*string, n),
	}
	for i, e := range events {
		if e.Kind == "" {
			return eventRows{}, fmt.Errorf("event %d has no kind", i)
		}
		d, ok, err := jsonParam(e.Data)
		if err != nil {
			return eventRows{}, fmt.Errorf("event %d (%s) data: %w", i, e.Kind, err)
		}
		if ok {
			r.data[i] = &d
		}
		r.at[i], r.kinds[i], r.envs[i], r.models[i], r.plans[i], r.reasons[i] =
			storekit.Micros(e.At), e.Kind, e.Environment, e.Model, e.PlanID, e.Reason
	}
	return r, nil
}

// insert appends the events inside the caller's transaction (q is a pgx.Tx,
// or a connection inside BEGIN) and returns them with their ids, in order.
// It takes the transaction-scoped event lock first (see AppendEvents), so
// the caller must take it last among its locks and commit promptly: every
// writer of events waits for it.
func (r eventRows) insert(ctx context.Context, q querier) ([]state.Event, error) {
	n := len(r.events)
	if n == 0 {
		return []state.Event{}, nil
	}
	if _, err := q.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, eventsLockID); err != nil {
		return nil, fmt.Errorf("taking the event lock: %w", err)
	}
	rows, err := q.Query(ctx, `
		INSERT INTO events (at_us, kind, environment, model, plan_id, reason, data)
		SELECT a, k, e, m, p, r, d::json
		FROM unnest($1::int8[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[])
		     WITH ORDINALITY AS u(a, k, e, m, p, r, d, ord)
		ORDER BY ord
		RETURNING id`,
		r.at, r.kinds, r.envs, r.models, r.plans, r.reasons, r.data)
	if err != nil {
		return nil, err
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, err
	}
	if len(ids) != n {
		return nil, fmt.Errorf("%d events inserted, %d ids came back", n, len(ids))
	}
	// nextval ran in ORDER BY ord order, so the ids sorted ascending are the
	// ids of the events in argument order.
	slices.Sort(ids)
	out := make([]state.Event, n)
	for i, e := range r.events {
		e.ID = ids[i]
		e.At = storekit.FromMicros(r.at[i])
		if r.data[i] == nil {
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
		e.At = storekit.FromMicros(at)
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
