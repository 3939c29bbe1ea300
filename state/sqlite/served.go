package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/state/internal/storekit"
)

// recordLastServed upserts at as the last-served time of every version
// among before that after does not serve, keeping the later time where one
// is stored. It runs inside the caller's IMMEDIATE transaction (Promote,
// RemoveEnvironment), so it commits or rolls back with the change of the
// environment that stopped serving them.
func recordLastServed(ctx context.Context, tx *sql.Tx, before, after []state.SnapshotRef, at time.Time) error {
	keys := storekit.Unserved(before, after)
	if len(keys) == 0 {
		return nil
	}
	param, err := keysJSON(keys)
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `
		INSERT INTO version_last_served (name, version, at_us)
		SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]'), ? FROM json_each(?) WHERE true
		ON CONFLICT (name, version) DO UPDATE SET at_us = max(at_us, excluded.at_us)`,
		storekit.Micros(at), param)
	if err != nil {
		return fmt.Errorf("recording when %d versions stopped being served: %w", len(keys), err)
	}
	return nil
}

// LastServed returns the last-served time of every key among keys that has
// one, in one query however many keys there are (the keys travel as one
// JSON parameter, as in GetIntervals).
func (s *Store) LastServed(ctx context.Context, keys []state.VersionKey) (map[state.VersionKey]time.Time, error) {
	out := make(map[state.VersionKey]time.Time, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	distinct := distinctKeys(keys)
	param, err := keysJSON(distinct)
	if err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	rows, err := s.db.QueryContext(ctx, `
		SELECT k.key, v.at_us
		FROM json_each(?) AS k CROSS JOIN version_last_served AS v
		WHERE v.name = json_extract(k.value, '$[0]') AND v.version = json_extract(k.value, '$[1]')`, param)
	if err != nil {
		return nil, fmt.Errorf("sqlite: reading when %d versions were last served: %w", len(distinct), err)
	}
	defer rows.Close()
	for rows.Next() {
		var i, at int64
		if err := rows.Scan(&i, &at); err != nil {
			return nil, fmt.Errorf("sqlite: reading last-served times: %w", err)
		}
		if i < 0 || i >= int64(len(distinct)) {
			return nil, fmt.Errorf("sqlite: reading last-served times: key index %d out of range", i)
		}
		out[distinct[i]] = storekit.FromMicros(at)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: reading last-served times: %w", err)
	}
	return out, nil
}
