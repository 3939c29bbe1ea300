package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/gapless-dev/gapless/snapshot"
	"github.com/gapless-dev/gapless/state"
)

// PushSnapshots records snapshots as their JSON form, in one transaction.
// Invariant: a snapshot is immutable, so the first push of a key wins and a
// later push of the same key is a no-op, whatever its content.
func (s *Store) PushSnapshots(ctx context.Context, snaps []*snapshot.Snapshot) error {
	type row struct {
		key     state.SnapshotKey
		version string
		payload string
	}
	rows := make([]row, 0, len(snaps))
	for i, sn := range snaps {
		if sn == nil {
			return fmt.Errorf("sqlite: push snapshots: snapshot %d is nil", i)
		}
		if sn.Name == "" {
			return fmt.Errorf("sqlite: push snapshots: snapshot %d has no name", i)
		}
		b, err := json.Marshal(sn)
		if err != nil {
			return fmt.Errorf("sqlite: push snapshot %s: %w", sn.ID(), err)
		}
		rows = append(rows, row{key: state.KeyOf(sn), version: sn.Version, payload: string(b)})
	}
	if len(rows) == 0 {
		return nil
	}
	err := s.write(ctx, func(tx *sql.Tx) error {
		for _, r := range rows {
			if _, err := tx.ExecContext(ctx, `
				INSERT INTO snapshots (name, fingerprint, version, payload) VALUES (?, ?, ?, ?)
				ON CONFLICT (name, fingerprint) DO NOTHING`,
				r.key.Name, r.key.Fingerprint, r.version, r.payload); err != nil {
				return fmt.Errorf("snapshot %s@%s: %w", r.key.Name, r.key.Fingerprint, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("sqlite: push %d snapshots: %w", len(rows), err)
	}
	return nil
}

// GetSnapshots returns the snapshots found among keys, in one query; missing
// keys are absent from the map.
func (s *Store) GetSnapshots(ctx context.Context, keys []state.SnapshotKey) (map[state.SnapshotKey]*snapshot.Snapshot, error) {
	out := make(map[state.SnapshotKey]*snapshot.Snapshot, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	param, err := snapshotKeysJSON(keys)
	if err != nil {
		return nil, fmt.Errorf("sqlite: get snapshots: %w", err)
	}
	rows, err := s.db.QueryContext(ctx, `
		SELECT sn.name, sn.fingerprint, sn.payload
		FROM json_each(?) AS k CROSS JOIN snapshots AS sn
		WHERE sn.name = json_extract(k.value, '$[0]') AND sn.fingerprint = json_extract(k.value, '$[1]')`,
		param)
	if err != nil {
		return nil, fmt.Errorf("sqlite: get %d snapshots: %w", len(keys), err)
	}
	defer rows.Close()
	for rows.Next() {
		var k state.SnapshotKey
		var payload string
		if err := rows.Scan(&k.Name, &k.Fingerprint, &payload); err != nil {
			return nil, fmt.Errorf("sqlite: get snapshots: %w", err)
		}
		sn := new(snapshot.Snapshot)
		if err := json.Unmarshal([]byte(payload), sn); err != nil {
			return nil, fmt.Errorf("sqlite: get snapshots: decoding %s@%s: %w", k.Name, k.Fingerprint, err)
		}
		out[k] = sn
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: get snapshots: %w", err)
	}
	return out, nil
}

// DeleteSnapshots removes the snapshots with the given keys; absent keys are
// ignored. Intervals, keyed by version, are untouched.
func (s *Store) DeleteSnapshots(ctx context.Context, keys []state.SnapshotKey) error {
	if len(keys) == 0 {
		return nil
	}
	param, err := snapshotKeysJSON(keys)
	if err != nil {
		return fmt.Errorf("sqlite: delete snapshots: %w", err)
	}
	err = s.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `
			DELETE FROM snapshots WHERE (name, fingerprint) IN (
				SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each(?))`,
			param)
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlite: delete %d snapshots: %w", len(keys), err)
	}
	return nil
}

// snapshotKeysJSON encodes keys as a JSON array of [name, fingerprint].
func snapshotKeysJSON(keys []state.SnapshotKey) (string, error) {
	pairs := make([][2]string, len(keys))
	for i, k := range keys {
		pairs[i] = [2]string{k.Name, k.Fingerprint}
	}
	b, err := json.Marshal(pairs)
	if err != nil {
		return "", fmt.Errorf("encoding snapshot keys: %w", err)
	}
	return string(b), nil
}
