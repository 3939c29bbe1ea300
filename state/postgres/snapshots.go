package postgres

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/gapless-dev/gapless/snapshot"
	"github.com/gapless-dev/gapless/state"
)

// PushSnapshots records snapshots in one statement. A snapshot is immutable,
// so a key that is already stored is left as it is (ON CONFLICT DO NOTHING):
// pushing is idempotent and two processes may push the same snapshots at
// once.
func (s *Store) PushSnapshots(ctx context.Context, snaps []*snapshot.Snapshot) error {
	if len(snaps) == 0 {
		return nil
	}
	names := make([]string, len(snaps))
	fps := make([]string, len(snaps))
	versions := make([]string, len(snaps))
	payloads := make([]string, len(snaps))
	for i, sn := range snaps {
		if sn == nil {
			return fmt.Errorf("postgres state: push snapshots: snapshot %d is nil", i)
		}
		if sn.Name == "" {
			return fmt.Errorf("postgres state: push snapshots: snapshot %d has no name", i)
		}
		b, err := json.Marshal(sn)
		if err != nil {
			return fmt.Errorf("postgres state: push snapshots: encoding %s: %w", sn.ID(), err)
		}
		k := state.KeyOf(sn)
		names[i], fps[i], versions[i], payloads[i] = k.Name, k.Fingerprint, sn.Version, string(b)
	}
	_, err := s.pool.Exec(ctx, `
		INSERT INTO snapshots (name, fingerprint, version, payload)
		SELECT n, f, v, p::jsonb FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS u(n, f, v, p)
		ON CONFLICT (name, fingerprint) DO NOTHING`,
		names, fps, versions, payloads)
	if err != nil {
		return fmt.Errorf("postgres state: push %d snapshots: %w", len(snaps), err)
	}
	return nil
}

// GetSnapshots returns the stored snapshots among keys, in one query however
// many keys there are. Missing keys are absent from the map.
func (s *Store) GetSnapshots(ctx context.Context, keys []state.SnapshotKey) (map[state.SnapshotKey]*snapshot.Snapshot, error) {
	out := make(map[state.SnapshotKey]*snapshot.Snapshot, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	names, fps := splitSnapshotKeys(keys)
	rows, err := s.pool.Query(ctx, `
		SELECT s.name, s.fingerprint, s.payload::text
		FROM snapshots s
		JOIN (SELECT DISTINCT n, f FROM unnest($1::text[], $2::text[]) AS u(n, f)) k
		  ON s.name = k.n AND s.fingerprint = k.f`,
		names, fps)
	if err != nil {
		return nil, fmt.Errorf("postgres state: get %d snapshots: %w", len(keys), err)
	}
	defer rows.Close()
	for rows.Next() {
		var k state.SnapshotKey
		var payload string
		if err := rows.Scan(&k.Name, &k.Fingerprint, &payload); err != nil {
			return nil, fmt.Errorf("postgres state: get snapshots: %w", err)
		}
		sn := new(snapshot.Snapshot)
		if err := json.Unmarshal([]byte(payload), sn); err != nil {
			return nil, fmt.Errorf("postgres state: decoding snapshot %s@%s: %w", k.Name, k.Fingerprint, err)
		}
		out[k] = sn
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres state: get snapshots: %w", err)
	}
	return out, nil
}

// DeleteSnapshots removes the given snapshots in one statement; keys that are
// not stored are ignored. Intervals are keyed by version and are not touched.
func (s *Store) DeleteSnapshots(ctx context.Context, keys []state.SnapshotKey) error {
	if len(keys) == 0 {
		return nil
	}
	names, fps := splitSnapshotKeys(keys)
	_, err := s.pool.Exec(ctx, `
		DELETE FROM snapshots s
		USING unnest($1::text[], $2::text[]) AS k(n, f)
		WHERE s.name = k.n AND s.fingerprint = k.f`,
		names, fps)
	if err != nil {
		return fmt.Errorf("postgres state: delete %d snapshots: %w", len(keys), err)
	}
	return nil
}

func splitSnapshotKeys(keys []state.SnapshotKey) (names, fps []string) {
	names = make([]string, len(keys))
	fps = make([]string, len(keys))
	for i, k := range keys {
		names[i], fps[i] = k.Name, k.Fingerprint
	}
	return names, fps
}
