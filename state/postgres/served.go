package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/state/internal/storekit"
)

// recordLastServed upserts at as the last-served time of every version
// among before that after does not serve, keeping the later time where one
// is stored (GREATEST). It runs in the caller's transaction (Promote,
// RemoveEnvironment), which holds the environment row's lock; the rows are
// written in key order, so two environments stopping to serve the same
// versions at once wait for each other instead of deadlocking.
func recordLastServed(ctx context.Context, tx pgx.Tx, before, after []state.SnapshotRef, at time.Time) error {
	keys := storekit.Unserved(before, after) // sorted, distinct
	if len(keys) == 0 {
		return nil
	}
	names := make([]string, len(keys))
	versions := make([]string, len(keys))
	for i, k := range keys {
		names[i], versions[i] = k.Name, k.Version
	}
	if _, err := tx.Exec(ctx, `
		INSERT INTO version_last_served (name, version, at_us)
		SELECT u.n, u.v, $3 FROM unnest($1::text[], $2::text[]) AS u(n, v) ORDER BY u.n, u.v
		ON CONFLICT (name, version) DO UPDATE SET at_us = GREATEST(version_last_served.at_us, EXCLUDED.at_us)`,
		names, versions, storekit.Micros(at)); err != nil {
		return fmt.Errorf("recording when %d versions stopped being served: %w", len(keys), err)
	}
	return nil
}

// LastServed returns the last-served time of every key among keys that has
// one, in one query however many keys there are (the keys travel as two
// arrays joined with unnest, as in GetIntervals).
func (s *Store) LastServed(ctx context.Context, keys []state.VersionKey) (map[state.VersionKey]time.Time, error) {
	out := make(map[state.VersionKey]time.Time, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	names := make([]string, len(keys))
	versions := make([]string, len(keys))
	for i, k := range keys {
		names[i], versions[i] = k.Name, k.Version
	}
	rows, err := s.pool.Query(ctx, `
		SELECT s.name, s.version, s.at_us
		FROM (SELECT DISTINCT n, v FROM unnest($1::text[], $2::text[]) AS u(n, v)) u
		JOIN version_last_served s ON s.name = u.n AND s.version = u.v`, names, versions)
	if err != nil {
		return nil, fmt.Errorf("postgres state: reading when %d versions were last served: %w", len(keys), err)
	}
	defer rows.Close()
	var k state.VersionKey
	var at int64
	for rows.Next() {
		if err := rows.Scan(&k.Name, &k.Version, &at); err != nil {
			return nil, fmt.Errorf("postgres state: reading last-served times: %w", err)
		}
		out[k] = storekit.FromMicros(at)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres state: reading last-served times: %w", err)
	}
	return out, nil
}
