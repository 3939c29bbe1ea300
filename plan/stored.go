package plan

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gapless-dev/gapless/dag"
	"github.com/gapless-dev/gapless/snapshot"
	"github.com/gapless-dev/gapless/state"
)

// StoredFormat is the format of a plan saved in a state store
// (EncodeStored): format 2 without the snapshots, which it names by key
// instead, and, as a rule, only the keys it changes. The snapshots
// themselves are in the store already (apply records them before it saves
// the plan), so a stored plan costs what it adds (its changes, backfills,
// incumbents and reuses) and the keys of the models it changes, not one
// whole snapshot per model.
//
// A stored plan is either whole (no base: SnapshotKeys is its whole set)
// or a change of its base, the saved plan it was built against
// (Expected.PlanID): its set is the base's set, less the names in Removed,
// with SnapshotKeys added or replacing the base's key of the same name. A
// chain of changes ends at a whole plan within MaxChain plans, and a plan
// is stored whole as soon as its chain's changes would together weigh more
// than the whole plan at its end (see EncodeStored), so a plan that
// changes one model costs a few KB however many models the project has,
// and reading one reads at most MaxChain payloads. The janitor keeps every
// plan a kept plan's chain goes through.
//
// A plan file (Encode, `gapless plan --out`) stays self-contained, at
// FormatVersion: it is reviewed and applied elsewhere, against a store that
// may not hold its snapshots yet.
const StoredFormat = 3

// MaxChain is the longest chain of stored plans (see StoredFormat): a plan
// whose base is at the end of a chain this long is stored whole.
const MaxChain = 128

// storedPlan is a plan as StoredFormat holds it: Plan's fields, with
// Base, SnapshotKeys and Removed in place of Snapshots.
type storedPlan struct {
	Kind          string    `json:"kind"`
	Format        int       `json:"format"`
	ID            string    `json:"id"`
	Environment   string    `json:"environment"`
	ExecutionTime time.Time `json:"execution_time"`
	CreatedAt     time.Time `json:"created_at"`
	Expected      Expected  `json:"expected"`
	Options       Options   `json:"options"`
	// Base is the saved plan whose snapshot set this one changes; "" when
	// SnapshotKeys is the whole set.
	Base string `json:"base,omitempty"`
	// SnapshotKeys is the whole set (no Base, in the plan's order) or the
	// keys the plan adds or changes (sorted by name).
	SnapshotKeys keyList `json:"snapshot_keys"`
	// Removed are the names of Base's set this plan does not serve, sorted.
	Removed    []string    `json:"removed,omitempty"`
	Changes    []Change    `json:"changes"`
	Backfills  []Backfill  `json:"backfills"`
	Incumbents []Incumbent `json:"incumbents"`
	Reuses     []Reuse     `json:"reuses,omitempty"`
	Empty      []Backfill  `json:"empty_backfills,omitempty"`
	Checksum   string      `json:"checksum"`
}

// keyList is snapshot keys as StoredFormat writes them: one string
// "name@fingerprint" each (a fingerprint is hex, so the last @ splits it).
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

// SnapshotKeys returns the keys of the snapshots p serves: those of
// p.Snapshots, in its order, or, for a stored plan not resolved yet
// (DecodeStored), every key its chain names, sorted by name.
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

// StoredBase is the saved plan the stored plan p changes (see
// StoredFormat): "" for a whole one, and for a plan not read from a store.
func (p *Plan) StoredBase() string { return p.base }

// SavedPlans reads saved plans: a state.Store is one.
type SavedPlans interface {
	GetPlan(ctx context.Context, id string) (*state.Plan, error)
}

// Stored is what LoadStored reads: saved plans and snapshots. A
// state.Store is one.
type Stored interface {
	SavedPlans
	SnapshotReader
}

// SnapshotReader is what resolving stored plans reads: a state.Store is
// one.
type SnapshotReader interface {
	GetSnapshots(ctx context.Context, keys []state.SnapshotKey) (map[state.SnapshotKey]*snapshot.Snapshot, error)
}

var _ Stored = state.Store(nil)

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

// MissingBaseError is a stored plan whose chain (see StoredFormat) goes
// through a plan the state store does not hold. It wraps
// state.ErrNotFound.
type MissingBaseError struct {
	PlanID, Base string
	Err          error
}

func (e *MissingBaseError) Error() string {
	return fmt.Sprintf("plan %s is stored as a change of plan %s, which the state store does not hold: %v", e.PlanID, e.Base, e.Err)
}

func (e *MissingBaseError) Unwrap() []error { return []error{state.ErrNotFound, e.Err} }

// ChainReader reads stored plans and their chains (see StoredFormat)
// through saved, decoding each saved payload once however many chains go
// through it: one reader for a pass over many plans (the janitor's).
type ChainReader struct {
	saved   SavedPlans
	decoded map[string]*storedLink
}

// storedLink is one decoded StoredFormat payload and its size.
type storedLink struct {
	sp   *storedPlan
	size int
}

// NewChainReader returns a ChainReader over saved.
func NewChainReader(saved SavedPlans) *ChainReader {
	return &ChainReader{saved: saved, decoded: map[string]*storedLink{}}
}

// link reads and decodes saved plan id, in StoredFormat; nil (no error)
// when it is saved in an older format, which holds whole snapshots and is
// no base of a stored plan.
func (r *ChainReader) link(ctx context.Context, id string) (*storedLink, error) {
	if l, ok := r.decoded[id]; ok {
		return l, nil
	}
	sp, err := r.saved.GetPlan(ctx, id)
	if err != nil {
		return nil, err
	}
	format, err := peekFormat(sp.Payload)
	if err != nil {
		return nil, fmt.Errorf("plan %s: %w", id, err)
	}
	var l *storedLink
	if format == StoredFormat {
		p, err := decodeStoredPayload(sp.Payload)
		if err != nil {
			return nil, err
		}
		l = &storedLink{sp: p, size: len(sp.Payload)}
	}
	r.decoded[id] = l
	return l, nil
}

// chain returns the links from stored plan id back to the whole plan its
// chain ends at (the last link), at most MaxChain of them.
func (r *ChainReader) chain(ctx context.Context, first *storedLink) ([]*storedLink, error) {
	links := []*storedLink{first}
	for cur := first; cur.sp.Base != ""; {
		if len(links) > MaxChain {
			return nil, fmt.Errorf("plan %s: its chain of stored plans is longer than %d (it loops, or was stored wrongly)", first.sp.ID, MaxChain)
		}
		next, err := r.link(ctx, cur.sp.Base)
		if err == nil && next == nil {
			err = fmt.Errorf("plan %s is not in the stored format", cur.sp.Base)
		}
		if err != nil {
			return nil, &MissingBaseError{PlanID: cur.sp.ID, Base: cur.sp.Base, Err: err}
		}
		links = append(links, next)
		cur = next
	}
	return links, nil
}

// keySet is the snapshot set a chain resolves to, by name.
func keySet(links []*storedLink) map[string]state.SnapshotKey {
	set := map[string]state.SnapshotKey{}
	for i := len(links) - 1; i >= 0; i-- {
		sp := links[i].sp
		for _, name := range sp.Removed {
			delete(set, name)
		}
		for _, k := range sp.SnapshotKeys {
			set[k.Name] = k
		}
	}
	return set
}

// Decode parses saved plan sp of any format from OldestFormat to
// StoredFormat, refusing like plan.Decode (an error wrapping
// ErrInvalidPlan) anything else. A format-1 or format-2 payload (saved by
// an older gapless) holds its snapshots and comes back resolved; a
// StoredFormat one comes back with the whole set of snapshot keys its
// chain names (read through the reader: a plan of the chain the store
// lacks is a *MissingBaseError), for ResolveSnapshots to read.
func (r *ChainReader) Decode(ctx context.Context, sp *state.Plan) (*Plan, error) {
	format, err := peekFormat(sp.Payload)
	if err != nil {
		return nil, fmt.Errorf("plan %s: %w", sp.ID, err)
	}
	switch {
	case format > StoredFormat:
		return nil, fmt.Errorf("plan %s: %w: format %d was written by a newer gapless (this one reads formats %d to %d); read it with that gapless",
			sp.ID, ErrInvalidPlan, format, OldestFormat, StoredFormat)
	case format < StoredFormat:
		p, err := Decode(sp.Payload)
		if err != nil {
			return nil, fmt.Errorf("plan %s: %w", sp.ID, err)
		}
		return p, nil
	}
	first := r.decoded[sp.ID]
	if first == nil || first.size != len(sp.Payload) {
		d, err := decodeStoredPayload(sp.Payload)
		if err != nil {
			return nil, err
		}
		first = &storedLink{sp: d, size: len(sp.Payload)}
		r.decoded[sp.ID] = first
	}
	links, err := r.chain(ctx, first)
	if err != nil {
		return nil, err
	}
	set := keySet(links)
	keys := make([]state.SnapshotKey, 0, len(set))
	for _, k := range set {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b state.SnapshotKey) int { return strings.Compare(a.Name, b.Name) })
	d := first.sp
	return &Plan{Kind: d.Kind, Format: d.Format, ID: d.ID, Environment: d.Environment, ExecutionTime: d.ExecutionTime,
		CreatedAt: d.CreatedAt, Expected: d.Expected, Options: d.Options, Changes: d.Changes, Backfills: d.Backfills,
		Incumbents: d.Incumbents, Reuses: d.Reuses, Empty: d.Empty, Checksum: d.Checksum, keys: keys, base: d.Base}, nil
}

// decodeStoredPayload parses and checks one StoredFormat payload.
func decodeStoredPayload(b []byte) (*storedPlan, error) {
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
	sp.Checksum = want
	if sp.SnapshotKeys == nil {
		sp.SnapshotKeys = keyList{}
	}
	p := &Plan{ID: sp.ID, Environment: sp.Environment, ExecutionTime: sp.ExecutionTime}
	if err := checkDecoded(p); err != nil {
		return nil, err
	}
	return &sp, nil
}

func storedChecksum(p *storedPlan) (string, error) {
	b, err := json.Marshal(p)
	if err != nil {
		return "", fmt.Errorf("encoding plan %s for its checksum: %w", p.ID, err)
	}
	return checksumOf(b), nil
}

// marshalStored returns sp as compact JSON with its checksum set.
func marshalStored(sp *storedPlan) ([]byte, error) {
	sp.Kind, sp.Format, sp.Checksum = FileKind, StoredFormat, ""
	sum, err := storedChecksum(sp)
	if err != nil {
		return nil, err
	}
	sp.Checksum = sum
	b, err := json.Marshal(sp)
	if err != nil {
		return nil, fmt.Errorf("encoding plan %s for the state store: %w", sp.ID, err)
	}
	return b, nil
}

// Encode returns p as a state store saves it (StoredFormat): compact JSON
// with Kind, Format and Checksum set, its snapshots named by key. p is
// stored as a change of its base, the plan it was built against
// (Expected.PlanID), when that plan is saved in StoredFormat with a chain
// shorter than MaxChain and the chain's changes with p's weigh no more than
// the whole plan the chain ends at; otherwise whole. Encoding is
// deterministic for a given store, so a resumed apply saves the same bytes
// again.
func (r *ChainReader) Encode(ctx context.Context, p *Plan) ([]byte, error) {
	keys := p.SnapshotKeys()
	sp := storedPlan{ID: p.ID, Environment: p.Environment, ExecutionTime: p.ExecutionTime, CreatedAt: p.CreatedAt,
		Expected: p.Expected, Options: p.Options, Changes: p.Changes, Backfills: p.Backfills, Incumbents: p.Incumbents,
		Reuses: p.Reuses, Empty: p.Empty}
	if base := p.Expected.PlanID; base != "" && base != p.ID {
		if delta, ok, err := r.delta(ctx, base, sp, keys); err != nil {
			return nil, err
		} else if ok {
			return delta, nil
		}
	}
	sp.SnapshotKeys = keys
	return marshalStored(&sp)
}

// delta encodes sp as a change of base when the chain rule allows it (see
// Encode); ok is false when it stores whole.
func (r *ChainReader) delta(ctx context.Context, base string, sp storedPlan, keys []state.SnapshotKey) (b []byte, ok bool, err error) {
	first, err := r.link(ctx, base)
	if errors.Is(err, state.ErrNotFound) || (err == nil && first == nil) {
		return nil, false, nil // the base is gone, or holds whole snapshots
	}
	if err != nil {
		return nil, false, fmt.Errorf("reading plan %s, the base of plan %s: %w", base, sp.ID, err)
	}
	links, err := r.chain(ctx, first)
	if errors.Is(err, state.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	if len(links) >= MaxChain {
		return nil, false, nil
	}
	was := keySet(links)
	sp.Base = base
	sp.SnapshotKeys = keyList{}
	seen := make(map[string]bool, len(keys))
	for _, k := range keys {
		seen[k.Name] = true
		if was[k.Name] != k {
			sp.SnapshotKeys = append(sp.SnapshotKeys, k)
		}
	}
	for name := range was {
		if !seen[name] {
			sp.Removed = append(sp.Removed, name)
		}
	}
	slices.SortFunc(sp.SnapshotKeys, func(a, b state.SnapshotKey) int { return strings.Compare(a.Name, b.Name) })
	slices.Sort(sp.Removed)
	b, err = marshalStored(&sp)
	if err != nil {
		return nil, false, err
	}
	changes := len(b)
	for _, l := range links[:len(links)-1] {
		changes += l.size
	}
	if changes > links[len(links)-1].size {
		return nil, false, nil
	}
	return b, true, nil
}

// EncodeStored is NewChainReader(saved).Encode(ctx, p).
func EncodeStored(ctx context.Context, saved SavedPlans, p *Plan) ([]byte, error) {
	return NewChainReader(saved).Encode(ctx, p)
}

// DecodeStored is NewChainReader(saved).Decode(ctx, sp).
func DecodeStored(ctx context.Context, saved SavedPlans, sp *state.Plan) (*Plan, error) {
	return NewChainReader(saved).Decode(ctx, sp)
}

// ResolveSnapshots fills the Snapshots of every unresolved plan among
// plans (see ChainReader.Decode) from store, in one GetSnapshots for them
// all however many plans and snapshots there are, each plan's in
// topological order (parents first, ties by name). A plan that names a
// snapshot the store lacks keeps the snapshots found, is marked resolved,
// and adds a *MissingSnapshotsError naming it and each missing key to the
// returned error (errors.Join of them), so that a caller that can work
// with what is there (the janitor) may.
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
	got := map[state.SnapshotKey]*snapshot.Snapshot{}
	if len(keys) > 0 {
		var err error
		if got, err = store.GetSnapshots(ctx, keys); err != nil {
			return fmt.Errorf("reading the %d snapshots of %d stored plan(s): %w", len(keys), len(plans), err)
		}
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
		sorted, err := topological(snaps)
		if err != nil {
			errs = append(errs, fmt.Errorf("plan %s: %w", p.ID, err))
			sorted = snaps
		}
		p.Snapshots, p.keys = sorted, nil
		if len(missing) > 0 {
			errs = append(errs, &MissingSnapshotsError{PlanID: p.ID, Keys: missing})
		}
	}
	return errors.Join(errs...)
}

// topological returns snaps (sorted by name) in the order of their
// dependency graph (dag.Graph.Order: parents first, ties by name), the
// order Build gives a plan's snapshots. Parents outside snaps are left
// out of the graph.
func topological(snaps []*snapshot.Snapshot) ([]*snapshot.Snapshot, error) {
	byName := make(map[string]*snapshot.Snapshot, len(snaps))
	for _, s := range snaps {
		byName[s.Name] = s
	}
	parents := make(map[string][]string, len(snaps))
	for _, s := range snaps {
		var ps []string
		for _, p := range s.Parents {
			if byName[p] != nil {
				ps = append(ps, p)
			}
		}
		parents[s.Name] = ps
	}
	g, err := dag.New(parents)
	if err != nil {
		return nil, fmt.Errorf("ordering its snapshots: %w", err)
	}
	out := make([]*snapshot.Snapshot, 0, len(snaps))
	for _, name := range g.Order() {
		out = append(out, byName[name])
	}
	return out, nil
}

// LoadStored decodes saved plan sp (ChainReader.Decode, its chain read
// through store) and resolves its snapshots (ResolveSnapshots): the whole
// plan, or an error naming the plan (and, when the store lacks some of
// its snapshots or a plan of its chain, each of them).
func LoadStored(ctx context.Context, store Stored, sp *state.Plan) (*Plan, error) {
	p, err := DecodeStored(ctx, store, sp)
	if err != nil {
		return nil, err
	}
	if err := ResolveSnapshots(ctx, store, p); err != nil {
		return nil, err
	}
	return p, nil
}
