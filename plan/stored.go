package plan

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gapless-dev/gapless/snapshot"
	"github.com/gapless-dev/gapless/state"
)

// StoredFormat is the format of a plan saved in a state store
// (EncodeStored): format 2 without the snapshots, which it names by key
// (SnapshotKeys) instead. The snapshots themselves are in the store already
// (apply records them before it saves the plan), so a stored plan costs
// what it adds (its changes, backfills, incumbents and reuses) plus one
// short key per model, not one whole snapshot per model. A plan file
// (Encode, `gapless plan --out`) stays self-contained, at FormatVersion: it
// is reviewed and applied elsewhere, against a store that may not hold its
// snapshots yet.
const StoredFormat = 3

// storedPlan is a plan as StoredFormat holds it: Plan's fields, with
// SnapshotKeys in place of Snapshots.
type storedPlan struct {
	Kind          string      `json:"kind"`
	Format        int         `json:"format"`
	ID            string      `json:"id"`
	Environment   string      `json:"environment"`
	ExecutionTime time.Time   `json:"execution_time"`
	CreatedAt     time.Time   `json:"created_at"`
	Expected      Expected    `json:"expected"`
	Options       Options     `json:"options"`
	SnapshotKeys  keyList     `json:"snapshot_keys"`
	Changes       []Change    `json:"changes"`
	Backfills     []Backfill  `json:"backfills"`
	Incumbents    []Incumbent `json:"incumbents"`
	Reuses        []Reuse     `json:"reuses,omitempty"`
	Checksum      string      `json:"checksum"`
}

// keyList is snapshot keys as StoredFormat writes them: one string
// "name@fingerprint" each (a fingerprint is hex, so the last @ splits it),
// in the plan's topological order.
type keyList []state.SnapshotKey

// MarshalJSON writes the keys as "name@fingerprint" strings.
func (l keyList) MarshalJSON() ([]byte, error) {
	out := make([]string, len(l))
	for i, k := range l {
		out[i] = k.Name + "@" + k.Fingerprint
	}
	return json.Marshal(out)
}

// UnmarshalJSON reads "name@fingerprint" strings, refusing any without both
// parts.
func (l *keyList) UnmarshalJSON(b []byte) error {
	var in []string
	if err := json.Unmarshal(b, &in); err != nil {
		return fmt.Errorf("snapshot_keys: %w", err)
	}
	out := make(keyList, len(in))
	for i, s := range in {
		at := strings.LastIndexByte(s, '@')
		if at <= 0 || at == len(s)-1 {
			return fmt.Errorf("snapshot_keys[%d]: %q is not name@fingerprint", i, s)
		}
		out[i] = state.SnapshotKey{Name: s[:at], Fingerprint: s[at+1:]}
	}
	*l = out
	return nil
}

// SnapshotKeys returns the keys of the snapshots p serves, in its
// topological order: those of p.Snapshots, or, for a plan read from a
// state store and not resolved yet (DecodeStored), the keys it names.
func (p *Plan) SnapshotKeys() []state.SnapshotKey {
	if p.keys != nil {
		return p.keys
	}
	out := make([]state.SnapshotKey, len(p.Snapshots))
	for i, s := range p.Snapshots {
		out[i] = state.KeyOf(s)
	}
	return out
}

// Resolved reports whether p.Snapshots holds every snapshot the plan
// serves: always, except for a StoredFormat plan DecodeStored read and
// ResolveSnapshots has not resolved.
func (p *Plan) Resolved() bool { return p.keys == nil }

// EncodeStored returns the plan as a state store saves it (StoredFormat):
// compact JSON with Kind, Format and Checksum set and its snapshots named
// by key. Encoding is deterministic, so a resumed apply saves the same
// bytes again.
func EncodeStored(p *Plan) ([]byte, error) {
	c := storedPlan{Kind: FileKind, Format: StoredFormat, ID: p.ID, Environment: p.Environment,
		ExecutionTime: p.ExecutionTime, CreatedAt: p.CreatedAt, Expected: p.Expected, Options: p.Options,
		SnapshotKeys: p.SnapshotKeys(), Changes: p.Changes, Backfills: p.Backfills, Incumbents: p.Incumbents,
		Reuses: p.Reuses}
	sum, err := storedChecksum(&c)
	if err != nil {
		return nil, err
	}
	c.Checksum = sum
	b, err := json.Marshal(&c)
	if err != nil {
		return nil, fmt.Errorf("encoding plan %s for the state store: %w", p.ID, err)
	}
	return b, nil
}

func storedChecksum(p *storedPlan) (string, error) {
	b, err := json.Marshal(p)
	if err != nil {
		return "", fmt.Errorf("encoding plan %s for its checksum: %w", p.ID, err)
	}
	return checksumOf(b), nil
}

// DecodeStored parses a plan a state store holds, of any format from
// OldestFormat to StoredFormat, refusing like Decode (an error wrapping
// ErrInvalidPlan) anything else. A format-1 or format-2 payload (saved by
// an older gapless) holds its snapshots and comes back resolved; a
// StoredFormat one comes back with its snapshot keys only (see
// SnapshotKeys): ResolveSnapshots reads its snapshots from the store.
func DecodeStored(b []byte) (*Plan, error) {
	format, err := peekFormat(b)
	if err != nil {
		return nil, err
	}
	switch {
	case format > StoredFormat:
		return nil, fmt.Errorf("%w: format %d was written by a newer gapless (this one reads formats %d to %d); read it with that gapless",
			ErrInvalidPlan, format, OldestFormat, StoredFormat)
	case format < StoredFormat:
		return Decode(b)
	}
	var sp storedPlan
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&sp); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidPlan, err)
	}
	want := sp.Checksum
	sp.Checksum = ""
	got, err := storedChecksum(&sp)
	if err != nil {
		return nil, err
	}
	if want != got {
		return nil, fmt.Errorf("%w: plan %s: checksum mismatch (the stored plan was edited or truncated)", ErrInvalidPlan, sp.ID)
	}
	p := &Plan{Kind: sp.Kind, Format: sp.Format, ID: sp.ID, Environment: sp.Environment, ExecutionTime: sp.ExecutionTime,
		CreatedAt: sp.CreatedAt, Expected: sp.Expected, Options: sp.Options, Changes: sp.Changes, Backfills: sp.Backfills,
		Incumbents: sp.Incumbents, Reuses: sp.Reuses, Checksum: want, keys: []state.SnapshotKey(sp.SnapshotKeys)}
	if p.keys == nil {
		p.keys = []state.SnapshotKey{}
	}
	if err := checkDecoded(p); err != nil {
		return nil, err
	}
	return p, nil
}

// SnapshotReader is what resolving stored plans reads: a state.Store is
// one.
type SnapshotReader interface {
	GetSnapshots(ctx context.Context, keys []state.SnapshotKey) (map[state.SnapshotKey]*snapshot.Snapshot, error)
}

// MissingSnapshotsError is a stored plan that names snapshots the state
// store no longer holds. It wraps state.ErrNotFound.
type MissingSnapshotsError struct {
	PlanID string
	Keys   []state.SnapshotKey
}

func (e *MissingSnapshotsError) Error() string {
	parts := make([]string, len(e.Keys))
	for i, k := range e.Keys {
		parts[i] = k.Name + " at " + k.Fingerprint
	}
	return fmt.Sprintf("plan %s names %d snapshot(s) the state store does not hold: %s", e.PlanID, len(e.Keys), strings.Join(parts, ", "))
}

func (e *MissingSnapshotsError) Unwrap() error { return state.ErrNotFound }

// ResolveSnapshots fills the Snapshots of every unresolved plan among
// plans (see DecodeStored) from store, in one GetSnapshots for them all
// however many plans and snapshots there are, keeping each plan's order.
// A plan that names a snapshot the store lacks keeps the snapshots found
// (in order), is marked resolved, and adds a *MissingSnapshotsError naming
// it and each missing key to the returned error (errors.Join of them), so
// that a caller that can work with what is there (the janitor) may.
func ResolveSnapshots(ctx context.Context, store SnapshotReader, plans ...*Plan) error {
	seen := map[state.SnapshotKey]bool{}
	var keys []state.SnapshotKey
	for _, p := range plans {
		for _, k := range p.keys {
			if !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
	}
	if len(keys) == 0 {
		for _, p := range plans {
			if p.keys != nil {
				p.Snapshots, p.keys = []*snapshot.Snapshot{}, nil
			}
		}
		return nil
	}
	got, err := store.GetSnapshots(ctx, keys)
	if err != nil {
		return fmt.Errorf("reading the %d snapshots of %d stored plan(s): %w", len(keys), len(plans), err)
	}
	var errs []error
	for _, p := range plans {
		if p.keys == nil {
			continue
		}
		snaps := make([]*snapshot.Snapshot, 0, len(p.keys))
		var missing []state.SnapshotKey
		for _, k := range p.keys {
			if s, ok := got[k]; ok {
				snaps = append(snaps, s)
			} else {
				missing = append(missing, k)
			}
		}
		p.Snapshots, p.keys = snaps, nil
		if len(missing) > 0 {
			errs = append(errs, &MissingSnapshotsError{PlanID: p.ID, Keys: missing})
		}
	}
	return errors.Join(errs...)
}

// LoadStored decodes a plan a state store holds (DecodeStored) and
// resolves its snapshots through store (ResolveSnapshots): the whole plan,
// or an error naming the plan (and, when the store lacks some of its
// snapshots, each of them).
func LoadStored(ctx context.Context, store SnapshotReader, sp *state.Plan) (*Plan, error) {
	p, err := DecodeStored(sp.Payload)
	if err != nil {
		return nil, fmt.Errorf("plan %s: %w", sp.ID, err)
	}
	if err := ResolveSnapshots(ctx, store, p); err != nil {
		return nil, err
	}
	return p, nil
}
