package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/state/internal/storekit"
)

// AppendEvents records events in one transaction and returns them with
// their ids. Invariant: ids are assigned by AUTOINCREMENT under the write
// lock, so they are unique and increasing across every process on the file,
// in commit order, and never reused.
func (s *Store) AppendEvents(ctx context.Context, events ...state.Event) ([]state.Event, error) {
	out, data, err := prepareEvents(events)
	if err != nil {
		return nil, fmt.Errorf("sqlite: append events: %w", err)
	}
	if len(events) == 0 {
		return out, nil
	}
	err = s.write(ctx, func(tx *sql.Tx) error { return insertEvents(ctx, tx, out, data) })
	if err != nil {
		return nil, fmt.Errorf("sqlite: append %d events: %w", len(events), err)
	}
	return out, nil
}

// prepareEvents checks events before anything is written (a kind, data that
// is valid JSON) and returns a copy with At truncated to what the store
// keeps, and each event's data column value. One invalid event refuses the
// whole batch.
func prepareEvents(events []state.Event) ([]state.Event, []any, error) {
	out := make([]state.Event, len(events))
	data := make([]any, len(events))
	for i, e := range events {
		if e.Kind == "" {
			return nil, nil, fmt.Errorf("event %d has no kind", i)
		}
		d, err := optionalJSON("data", e.Data)
		if err != nil {
			return nil, nil, fmt.Errorf("event %d (%s): %w", i, e.Kind, err)
		}
		data[i] = d
		e.At = storekit.FromMicros(storekit.Micros(e.At))
		out[i] = e
	}
	return out, data, nil
}

// insertEvents inserts events prepared by prepareEvents inside the caller's
// write transaction, in order, and sets their ids. Every writer of events
// goes through it, so ids follow the transaction's commit order (see
// AppendEvents).
func insertEvents(ctx context.Context, tx *sql.Tx, events []state.Event, data []any) error {
	for i := range events {
		e := &events[i]
		if err := tx.QueryRowContext(ctx, `
			INSERT INTO events (at_us, kind, environment, model, plan_id, reason, data)
			VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id`,
			storekit.Micros(e.At), e.Kind, e.Environment, e.Model, e.PlanID, e.Reason, data[i],
		).Scan(&e.ID); err != nil {
			return fmt.Errorf("event %d (%s): %w", i, e.Kind, err)
		}
	}
	return nil
}

// ListEvents returns the events matching f, in id order.
func (s *Store) ListEvents(ctx context.Context, f state.EventFilter) ([]state.Event, error) {
	if f.Limit < 0 {
		return nil, fmt.Errorf("sqlite: list events: negative limit %d", f.Limit)
	}
	where := []string{"id > ?"}
	args := []any{f.AfterID}
	if len(f.Kinds) > 0 {
		kinds, err := json.Marshal(f.Kinds)
		if err != nil {
			return nil, fmt.Errorf("sqlite: list events: %w", err)
		}
		where = append(where, "kind IN (SELECT value FROM json_each(?))")
		args = append(args, string(kinds))
	}
	for _, c := range []struct{ col, val string }{
		{"environment", f.Environment}, {"model", f.Model}, {"plan_id", f.PlanID},
	} {
		if c.val != "" {
			where = append(where, c.col+" = ?")
			args = append(args, c.val)
		}
	}
	query := `SELECT id, at_us, kind, environment, model, plan_id, reason, data FROM events WHERE ` +
		strings.Join(where, " AND ") + ` ORDER BY id`
	if f.Limit > 0 {
		query += ` LIMIT ?`
		args = append(args, f.Limit)
	}
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list events: %w", err)
	}
	defer rows.Close()
	var out []state.Event
	for rows.Next() {
		var e state.Event
		var at int64
		var data *string
		if err := rows.Scan(&e.ID, &at, &e.Kind, &e.Environment, &e.Model, &e.PlanID, &e.Reason, &data); err != nil {
			return nil, fmt.Errorf("sqlite: list events: %w", err)
		}
		e.At = storekit.FromMicros(at)
		e.Data = rawJSON(data)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list events: %w", err)
	}
	return out, nil
}
