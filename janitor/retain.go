package janitor

import (
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/gapless-dev/gapless/state"
)

// Forever is a snapshot TTL under which a version no environment serves is
// never dropped (snapshot_ttl: never).
const Forever = time.Duration(math.MaxInt64)

// VersionUse is what the janitor knows of one model version it may drop:
// a version a plan of the history references, or one a removed environment
// served.
type VersionUse struct {
	Key state.VersionKey
	// Served: an environment serves it now.
	Served bool
	// InFlight: a plan whose application may still be running references
	// it (it may be about to reuse it).
	InFlight bool
	// LastServed is when an environment last stopped serving it
	// (state.Store.LastServed; for an environment the janitor removes now,
	// now). Zero when it was never served, or before that was recorded.
	LastServed time.Time
	// LastPlanned is the latest activity (creation, or any recorded stage)
	// of a plan that references it. Zero when none does.
	LastPlanned time.Time
}

// UnusedSince is when the version was last used: the later of LastServed
// and LastPlanned.
func (u VersionUse) UnusedSince() time.Time {
	if u.LastServed.After(u.LastPlanned) {
		return u.LastServed
	}
	return u.LastPlanned
}

// Retained is a version the janitor keeps only because of its snapshot
// TTL: nothing serves it and no plan in flight references it.
type Retained struct {
	Key         state.VersionKey `json:"key"`
	UnusedSince time.Time        `json:"unused_since"`
	// ExpiresAt is when the TTL lets it go: UnusedSince + TTL. Zero under
	// Forever.
	ExpiresAt time.Time `json:"expires_at,omitzero"`
}

// RetainUnserved is the snapshot_ttl rule (SQLMesh's snapshot_ttl): it
// splits uses into the versions the janitor drops at now and those it
// keeps because their TTL has not passed, each sorted by key.
//
// Invariants:
//   - a version an environment serves, or that a plan in flight
//     references, is in neither list: it is in use, not retained;
//   - any other version is dropped exactly when ttl has passed since it
//     was last used (UnusedSince + ttl <= now), so a revert within the TTL
//     finds its table and intervals; a ttl of 0 (or less) drops it at
//     once, whatever the times, and Forever never;
//   - a version with no recorded use at all (UnusedSince zero) is dropped:
//     nothing says it was used recently, and the janitor only considers
//     versions some plan or removed environment named.
//
// Several uses of one key are merged first: served or in flight if any
// says so, and the latest times.
func RetainUnserved(uses []VersionUse, ttl time.Duration, now time.Time) (drop []state.VersionKey, keep []Retained) {
	merged := map[state.VersionKey]VersionUse{}
	for _, u := range uses {
		m, ok := merged[u.Key]
		if !ok {
			merged[u.Key] = u
			continue
		}
		m.Served = m.Served || u.Served
		m.InFlight = m.InFlight || u.InFlight
		if u.LastServed.After(m.LastServed) {
			m.LastServed = u.LastServed
		}
		if u.LastPlanned.After(m.LastPlanned) {
			m.LastPlanned = u.LastPlanned
		}
		merged[u.Key] = m
	}
	for k, u := range merged {
		if u.Served || u.InFlight {
			continue
		}
		since := u.UnusedSince()
		switch {
		case since.IsZero(), ttl <= 0:
			drop = append(drop, k)
		case ttl == Forever:
			keep = append(keep, Retained{Key: k, UnusedSince: since.UTC()})
		case !now.Before(since.Add(ttl)):
			drop = append(drop, k)
		default:
			keep = append(keep, Retained{Key: k, UnusedSince: since.UTC(), ExpiresAt: since.Add(ttl).UTC()})
		}
	}
	state.SortVersionKeys(drop)
	slices.SortFunc(keep, func(a, b Retained) int {
		return cmp.Or(cmp.Compare(a.Key.Name, b.Key.Name), cmp.Compare(a.Key.Version, b.Key.Version))
	})
	return drop, keep
}
