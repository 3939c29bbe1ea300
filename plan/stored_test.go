package plan

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/model"
	"github.com/gapless-dev/gapless/snapshot"
	"github.com/gapless-dev/gapless/state"
)

// storedFormat2 is samplePlan as a gapless before StoredFormat saved it in
// its state store: format 2, compacted by the store, every snapshot whole.
const storedFormat2 = `{"kind":"gapless.plan","format":2,"id":"plan-1","environment":"prod","execution_time":"2024-01-01T11:00:00Z","created_at":"2024-01-01T11:00:00Z","expected":{"plan_id":"plan-0","generation":3},"options":{"no_gaps":true},"snapshots":[{"name":"demo.events","fingerprint":{"data_hash":"d","metadata_hash":"m","parent_data_hash":"p","parent_metadata_hash":"q"},"version":"v2","parents":null,"model":{"Name":"demo.events","Kind":"INCREMENTAL_BY_TIME_RANGE","Dialect":"duckdb","TimeColumn":"ts","Lookback":0,"BatchSize":0,"BatchConcurrency":0,"ForwardOnly":false,"UniqueKey":null,"SeedPath":"","Columns":null,"Cron":"@hourly","IntervalUnit":"hour","IntervalUnitExplicit":false,"Start":"2024-01-01T00:00:00Z","End":"0001-01-01T00:00:00Z","AllowPartials":false,"Enabled":true,"Owner":"","Description":"","Tags":null,"Grain":null,"Query":"SELECT 1 AS ts","Path":"","QueryPos":{"File":"","Line":0,"Col":0},"HeaderPos":{"File":"","Line":0,"Col":0}}}],"changes":[{"name":"demo.events","category":"breaking","previous_version":"v1","version":"v2"}],"backfills":[{"name":"demo.events","version":"v2","ranges":[{"start":"2024-01-01T00:00:00Z","end":"2024-01-01T10:00:00Z"}],"buckets":10,"end":"2024-01-01T10:00:00Z"}],"incumbents":[{"name":"demo.events","snapshot":{"name":"demo.events","fingerprint":"f1","version":"v1"},"frontier":"2024-01-01T10:00:00Z"}],"checksum":"0fef95747011b180b2304057f79900840115cbe31197c65076cc72c2d0880f29"}`

// storedFormat3 is samplePlan as StoredFormat saves it, written out so that
// a change of EncodeStored cannot silently stop reading what stores hold.
const storedFormat3 = `{"kind":"gapless.plan","format":3,"id":"plan-1","environment":"prod","execution_time":"2024-01-01T11:00:00Z","created_at":"2024-01-01T11:00:00Z","expected":{"plan_id":"plan-0","generation":3},"options":{"no_gaps":true},"snapshot_keys":["demo.events@0ac4ae38c7ac9a9b"],"changes":[{"name":"demo.events","category":"breaking","previous_version":"v1","version":"v2"}],"backfills":[{"name":"demo.events","version":"v2","ranges":[{"start":"2024-01-01T00:00:00Z","end":"2024-01-01T10:00:00Z"}],"buckets":10,"end":"2024-01-01T10:00:00Z"}],"incumbents":[{"name":"demo.events","snapshot":{"name":"demo.events","fingerprint":"f1","version":"v1"},"frontier":"2024-01-01T10:00:00Z"}],"checksum":"6c6c53927bf5b76e0dd2d3c2dde6ec2bb6a6b1f5b034a9e11be68b52fbc88f25"}`

// Scenario: a state store holds plans of every format an older gapless
// saved (format 1 and 2, each snapshot whole) and of StoredFormat (a whole
// one: keys only). DecodeStored reads each; the format-3 one resolves its
// snapshots from the store, in one read, back to the plan that was saved.
func TestDecodeStoredReadsEveryFormat(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openStore(t)
	want := samplePlan()
	require.NoError(t, st.PushSnapshots(ctx, want.Snapshots))

	f1, err := os.ReadFile("testdata/format1.plan.json")
	require.NoError(t, err)
	var compact bytes.Buffer
	require.NoError(t, json.Compact(&compact, f1)) // as a store returns it
	p1, err := DecodeStored(ctx, st, &state.Plan{ID: "d254b5268ae15e18", Payload: compact.Bytes()})
	require.NoError(t, err)
	require.Equal(t, 1, p1.Format)
	require.True(t, p1.Resolved())
	require.Len(t, p1.Changes, 3)
	require.NotEmpty(t, p1.Snapshots)

	for name, payload := range map[string]string{"format 2": storedFormat2, "format 3": storedFormat3} {
		p, err := DecodeStored(ctx, st, &state.Plan{ID: "plan-1", Payload: []byte(payload)})
		require.NoError(t, err, name)
		require.Equal(t, want.SnapshotKeys(), p.SnapshotKeys(), name)
		require.NoError(t, ResolveSnapshots(ctx, st, p), name)
		require.True(t, p.Resolved(), name)
		require.Len(t, p.Snapshots, 1, name)
		require.Equal(t, want.Snapshots[0].Model.Query, p.Snapshots[0].Model.Query, name)
		require.Equal(t, want.Snapshots[0].Version, p.Snapshots[0].Version, name)
		require.Equal(t, want.Changes, p.Changes, name)
		require.True(t, want.Backfills[0].Ranges.Equal(p.Backfills[0].Ranges), name)
		require.Equal(t, want.Incumbents, p.Incumbents, name)
	}

	p3, err := DecodeStored(ctx, st, &state.Plan{ID: "plan-1", Payload: []byte(storedFormat3)})
	require.NoError(t, err)
	require.Equal(t, StoredFormat, p3.Format)
	require.False(t, p3.Resolved(), "a format-3 plan names its snapshots until it is resolved")
	_, err = Encode(p3)
	require.ErrorContains(t, err, "not resolved", "an unresolved plan is never written as a plan file")
}

// Scenario: EncodeStored keeps everything but the snapshots, which it
// names by key in the plan's order, so that a stored plan of many models
// costs a key per model, not a snapshot; it is deterministic, and a plan
// file of the same plan stays self-contained.
func TestEncodeStoredNamesSnapshotsInOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openStore(t)
	f := newFixture()
	next, g := f.snapshots(t)
	p := samplePlan()
	p.Snapshots = nil
	for _, name := range g.Order() {
		p.Snapshots = append(p.Snapshots, next[name])
	}
	require.NoError(t, st.PushSnapshots(ctx, p.Snapshots))

	stored, err := EncodeStored(ctx, st, p)
	require.NoError(t, err)
	require.NotContains(t, string(stored), `"base"`, "its base plan-0 is not saved: it is stored whole")
	again, err := EncodeStored(ctx, st, p)
	require.NoError(t, err)
	require.Equal(t, stored, again)
	file, err := Encode(p)
	require.NoError(t, err)
	require.NotContains(t, string(stored), `"model"`)
	require.Contains(t, string(file), `"model"`, "plan files hold their snapshots")
	require.Less(t, len(stored)*2, len(file))

	got, err := LoadStored(ctx, st, &state.Plan{ID: p.ID, Payload: stored})
	require.NoError(t, err)
	require.Equal(t, p.SnapshotKeys(), got.SnapshotKeys())
	for i, s := range got.Snapshots {
		require.Equal(t, p.Snapshots[i].Name, s.Name)
		require.Equal(t, p.Snapshots[i].Model.Kind, s.Model.Kind)
	}
	restored, err := EncodeStored(ctx, st, got)
	require.NoError(t, err)
	require.Equal(t, string(stored), string(restored))
}

// Scenario: a stored plan whose snapshot the store no longer holds is an
// error naming the plan and the snapshot (wrapping state.ErrNotFound); an
// edited stored plan, or one from a newer gapless, is refused.
func TestStoredPlanMissingSnapshotIsNamed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openStore(t)
	_, err := LoadStored(ctx, st, &state.Plan{ID: "plan-1", Payload: []byte(storedFormat3)})
	require.ErrorIs(t, err, state.ErrNotFound)
	var missing *MissingSnapshotsError
	require.True(t, errors.As(err, &missing))
	require.Equal(t, "plan-1", missing.PlanID)
	require.Equal(t, []state.SnapshotKey{{Name: "demo.events", Fingerprint: "0ac4ae38c7ac9a9b"}}, missing.Keys)
	require.EqualError(t, err, "plan plan-1 names 1 snapshot(s) the state store does not hold: demo.events at 0ac4ae38c7ac9a9b")

	// Several plans resolve in one read; the one that misses a snapshot
	// keeps those found and is named alone.
	require.NoError(t, st.PushSnapshots(ctx, samplePlan().Snapshots))
	other := samplePlan()
	other.ID = "plan-2"
	other.Snapshots = append(other.Snapshots, &snapshot.Snapshot{Name: "demo.gone", Version: "v9",
		Fingerprint: snapshot.Fingerprint{DataHash: "x"}, Model: samplePlan().Snapshots[0].Model})
	b, err := EncodeStored(ctx, st, other)
	require.NoError(t, err)
	ok, err := DecodeStored(ctx, st, &state.Plan{ID: "plan-1", Payload: []byte(storedFormat3)})
	require.NoError(t, err)
	bad, err := DecodeStored(ctx, st, &state.Plan{ID: "plan-2", Payload: b})
	require.NoError(t, err)
	err = ResolveSnapshots(ctx, st, ok, bad)
	require.ErrorContains(t, err, "plan plan-2 names 1 snapshot(s) the state store does not hold: demo.gone at ")
	require.NotContains(t, err.Error(), "plan plan-1")
	require.Len(t, ok.Snapshots, 1)
	require.Len(t, bad.Snapshots, 1)
	require.True(t, bad.Resolved())

	edited := bytes.Replace([]byte(storedFormat3), []byte(`"buckets":10`), []byte(`"buckets":11`), 1)
	_, err = DecodeStored(ctx, st, &state.Plan{ID: "plan-1", Payload: edited})
	require.ErrorIs(t, err, ErrInvalidPlan)
	require.ErrorContains(t, err, "plan plan-1: checksum mismatch")
	newer := bytes.Replace([]byte(storedFormat3), []byte(`"format":3`), []byte(`"format":4`), 1)
	_, err = DecodeStored(ctx, st, &state.Plan{ID: "plan-1", Payload: newer})
	require.ErrorContains(t, err, "format 4 was written by a newer gapless (this one reads formats 1 to 3)")
	badKey := bytes.Replace([]byte(storedFormat3), []byte(`"demo.events@0ac4ae38c7ac9a9b"`), []byte(`"demo.events"`), 1)
	_, err = DecodeStored(ctx, st, &state.Plan{ID: "plan-1", Payload: badKey})
	require.ErrorContains(t, err, `"demo.events" is not name@fingerprint`)
}

// chainStep builds plan id of project f against base (its Expected plan),
// and records it as apply does: its snapshots, then the plan, stored.
func chainStep(t *testing.T, st state.Store, f fixture, id, base string) *Plan {
	t.Helper()
	next, g := f.snapshots(t)
	p := samplePlan()
	p.ID, p.Expected = id, Expected{PlanID: base}
	p.Snapshots = nil
	for _, name := range g.Order() {
		p.Snapshots = append(p.Snapshots, next[name])
	}
	require.NoError(t, st.PushSnapshots(context.Background(), p.Snapshots))
	b, err := EncodeStored(context.Background(), st, p)
	require.NoError(t, err)
	require.NoError(t, st.SavePlan(context.Background(), state.Plan{ID: id, Environment: p.Environment, Payload: b, CreatedAt: p.CreatedAt}))
	return p
}

// Scenario: twelve plans, each built against the one before, each
// changing demo.totals' query, the eighth also removing demo.totals and the
// ninth adding it back. The first is stored whole; the next ones as
// changes of their base, naming only the snapshot they change (and the
// name they remove), until the chain's changes would weigh more than the
// whole plan, where a plan is stored whole again. Every plan reads back,
// through its chain, to exactly its own snapshots, in topological order.
// A plan whose base is gone from the store is an error naming both.
func TestStoredPlanIsAChangeOfItsBase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openStore(t)
	f := newFixture()
	var plans []*Plan
	base := ""
	for i := range 12 {
		g := f.edit("demo.totals", func(m *model.Model) { m.Query = fmt.Sprintf("SELECT count(*) + %d FROM demo.daily", i) })
		if i == 7 {
			delete(g.models, "demo.totals")
			g.edges = map[string][]string{"src.events": nil, "demo.events": {"src.events"}, "demo.daily": {"demo.events"}}
		}
		id := fmt.Sprintf("c%02d", i)
		plans = append(plans, chainStep(t, st, g, id, base))
		base = id
	}
	var whole, changes int
	for i, want := range plans {
		sp, err := st.GetPlan(ctx, want.ID)
		require.NoError(t, err)
		var head struct {
			Base    string   `json:"base"`
			Keys    []string `json:"snapshot_keys"`
			Removed []string `json:"removed"`
		}
		require.NoError(t, json.Unmarshal(sp.Payload, &head))
		switch {
		case i == 0:
			require.Empty(t, head.Base, "the first plan has no saved base")
		case head.Base == "":
			whole++
		default:
			changes++
			require.Equal(t, plans[i-1].ID, head.Base)
			if i == 7 {
				require.Empty(t, head.Keys)
				require.Equal(t, []string{"demo.totals"}, head.Removed)
			} else {
				require.Len(t, head.Keys, 1, "plan %s names only what it changes", want.ID)
				require.True(t, strings.HasPrefix(head.Keys[0], "demo.totals@"))
			}
		}
		got, err := LoadStored(ctx, st, sp)
		require.NoError(t, err, want.ID)
		require.Equal(t, want.SnapshotKeys(), got.SnapshotKeys(), "plan %s reads back to its own snapshots, in order", want.ID)
	}
	require.Positive(t, changes)
	require.Positive(t, whole, "a chain ends when its changes outweigh the whole plan")

	// c04's base is gone: reading c05 (or anything after it, until the
	// next whole plan) names the plan and its missing base.
	sp, err := st.GetPlan(ctx, "c05")
	require.NoError(t, err)
	var head struct {
		Base string `json:"base"`
	}
	require.NoError(t, json.Unmarshal(sp.Payload, &head))
	require.NotEmpty(t, head.Base, "c05 is stored as a change of its base (the fixture's chain rule)")
	gone, err := st.DeletePlans(ctx, state.DeletePlansParams{IDs: []string{head.Base}, Before: hour(23)})
	require.NoError(t, err)
	require.Equal(t, []string{head.Base}, gone)
	_, err = LoadStored(ctx, st, sp)
	require.ErrorIs(t, err, state.ErrNotFound)
	var mb *MissingBaseError
	require.True(t, errors.As(err, &mb), "%v", err)
	require.Equal(t, "c05", mb.PlanID)
	require.ErrorContains(t, err, "plan c05 is stored as a change of plan "+head.Base+", which the state store does not hold")
}
