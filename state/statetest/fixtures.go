package statetest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/model"
	"github.com/gapless-dev/gapless/snapshot"
	"github.com/gapless-dev/gapless/state"
)

// epoch is the base of every instant in the suite: hour-aligned, so every
// instant is a whole microsecond and survives every backend's encoding.
var epoch = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// hour returns epoch + n hours.
func hour(n int) time.Time { return epoch.Add(time.Duration(n) * time.Hour) }

// hours returns the range [hour(a), hour(b)).
func hours(a, b int) interval.Range { return interval.NewRange(hour(a), hour(b)) }

// set returns the set of the given ranges.
func set(rs ...interval.Range) interval.Set { return interval.NewSet(rs...) }

// vkey returns the interval key of model name at version.
func vkey(name, version string) state.VersionKey {
	return state.VersionKey{Name: name, Version: version}
}

// shortHash is a stable 16-hex-digit hash of s, for fake fingerprints.
func shortHash(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:8])
}

// newSnapshot returns a snapshot of model name whose query is query, with
// every model field set, so that a JSON round trip that drops anything is
// noticed.
func newSnapshot(name, query string) *snapshot.Snapshot {
	m := &model.Model{
		Name:                 name,
		Kind:                 model.KindIncrementalByTimeRange,
		Dialect:              model.DialectDuckDB,
		TimeColumn:           "event_ts",
		Lookback:             2,
		BatchSize:            24,
		ForwardOnly:          true,
		UniqueKey:            []string{"id"},
		Columns:              []model.Column{{Name: "id", Type: "BIGINT"}, {Name: "event_ts", Type: "TIMESTAMP"}},
		Cron:                 "@hourly",
		IntervalUnit:         interval.Hour,
		IntervalUnitExplicit: true,
		Start:                epoch,
		End:                  epoch.AddDate(1, 0, 0),
		AllowPartials:        true,
		Enabled:              true,
		Owner:                "data-eng",
		Description:          "événements — unicode survives",
		Tags:                 []string{"finance", "hourly"},
		Grain:                []string{"id", "event_ts"},
		Query:                query,
		Path:                 "models/" + name + ".sql",
		QueryPos:             model.Pos{File: "models/" + name + ".sql", Line: 9, Col: 1},
		HeaderPos:            model.Pos{File: "models/" + name + ".sql", Line: 1, Col: 1},
	}
	s := &snapshot.Snapshot{
		Name: name,
		Fingerprint: snapshot.Fingerprint{
			DataHash:           shortHash("data:" + name + ":" + query),
			MetadataHash:       shortHash("meta:" + name),
			ParentDataHash:     shortHash("pdata:" + name),
			ParentMetadataHash: shortHash("pmeta:" + name),
		},
		Parents:   []string{"raw.events", "raw.users"},
		Model:     m,
		Canonical: query,
		SeedHash:  shortHash("seed:" + name),
	}
	s.Version = s.FreshVersion()
	return s
}

// refs returns n snapshot refs of models "m.t0000" ... with fresh
// fingerprints and versions, in reverse name order (stores sort them).
func refs(n int, salt string) []state.SnapshotRef {
	out := make([]state.SnapshotRef, n)
	for i := range n {
		name := fmt.Sprintf("m.t%04d", n-1-i)
		out[i] = state.SnapshotRef{
			Name:        name,
			Fingerprint: shortHash("fp:" + salt + name),
			Version:     shortHash("v:" + salt + name),
		}
	}
	return out
}

// tb is what the assertion helpers need: *testing.T, *testing.B and
// *rapid.T all have it.
type tb interface {
	Errorf(format string, args ...any)
	FailNow()
}

// requireIntervals asserts that key's stored set equals want.
func requireIntervals(t tb, b *bundle, key state.VersionKey, want interval.Set) {
	if h, ok := t.(interface{ Helper() }); ok {
		h.Helper()
	}
	got, err := b.store.GetIntervals(b.ctx, []state.VersionKey{key})
	require.NoError(t, err)
	require.Contains(t, got, key)
	require.Truef(t, want.Equal(got[key]), "intervals of %+v: want %v, got %v", key, want, got[key])
}

// rowCount returns the number of stored interval rows; the backend must
// implement IntervalRowCounter.
func rowCount(t tb, b *bundle) int {
	if h, ok := t.(interface{ Helper() }); ok {
		h.Helper()
	}
	c, ok := b.store.(IntervalRowCounter)
	require.Truef(t, ok, "%T does not implement statetest.IntervalRowCounter (CountIntervalRows), which the suite needs to check compaction", b.store)
	n, err := c.CountIntervalRows(b.ctx)
	require.NoError(t, err)
	return n
}

// normEnv returns a copy of e in a canonical form for comparison: times in
// UTC, an empty snapshot list as nil.
func normEnv(e *state.Environment) state.Environment {
	out := *e
	out.Snapshots = slices.Clone(e.Snapshots)
	if len(out.Snapshots) == 0 {
		out.Snapshots = nil
	}
	for _, t := range []*time.Time{&out.PromotedAt, &out.FinalizedAt, &out.ExpiresAt} {
		if !t.IsZero() {
			*t = t.UTC()
		}
	}
	return out
}

// requireEnv asserts that two environments are equal up to representation.
func requireEnv(t testing.TB, want, got *state.Environment) {
	t.Helper()
	require.NotNil(t, got)
	require.Equal(t, normEnv(want), normEnv(got))
}

// getEnv reads an environment and fails the test on error.
func getEnv(t testing.TB, b *bundle, name string) *state.Environment {
	t.Helper()
	e, err := b.store.GetEnvironment(b.ctx, name)
	require.NoError(t, err)
	return e
}

// promote promotes env from expected to plan with snaps at now, failing the
// test on error.
func promote(t testing.TB, b *bundle, env, expected, plan string, now time.Time, snaps ...state.SnapshotRef) *state.Environment {
	t.Helper()
	e, err := b.store.Promote(b.ctx, state.PromoteParams{
		Environment: env, ExpectedPlanID: expected, PlanID: plan, Snapshots: snaps, Now: now,
	})
	require.NoError(t, err)
	return e
}

// add adds the set to key without a fence, failing the test on error.
func add(t testing.TB, b *bundle, key state.VersionKey, s interval.Set) {
	t.Helper()
	require.NoError(t, b.store.AddIntervals(b.ctx, state.IntervalsParams{Key: key, Ranges: s, Now: hour(0)}))
}

// acquire takes lease key for owner at now with ttl, failing on error.
func acquire(t testing.TB, b *bundle, key, owner string, now time.Time, ttl time.Duration) state.Lease {
	t.Helper()
	l, err := b.store.AcquireLease(b.ctx, state.AcquireLeaseParams{Key: key, Owner: owner, TTL: ttl, Now: now})
	require.NoError(t, err)
	return l
}
