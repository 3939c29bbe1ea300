package statetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gapless-dev/gapless/state"
)

// Benchmark sizes, from the targets: record interval batches (< 2 ms
// per record, 100,000 of them with -benchtime=100000x), read the intervals of
// 10,000 snapshots (< 200 ms), promote an environment of 1,000 snapshots
// (< 1 s).
const (
	benchModels    = 4
	benchReadKeys  = 10_000
	benchEnvModels = 1_000
	benchGenModels = 10_000
)

// RunBenchmarks runs the suite's benchmarks against stores from newStore
// (the suite closes them). Each reports ns/op for its whole operation and,
// where it helps, a per-item metric.
func RunBenchmarks(b *testing.B, newStore func(b *testing.B) state.Store) {
	b.Run("RecordIntervalBatches", func(b *testing.B) { benchRecord(b, openBench(b, newStore), false) })
	b.Run("RecordIntervalBatchesWithOpenDebt", func(b *testing.B) { benchRecord(b, openBench(b, newStore), true) })
	b.Run("GetIntervals10000Snapshots", func(b *testing.B) { benchRead(b, openBench(b, newStore)) })
	b.Run("Promote1000Snapshots", func(b *testing.B) { benchPromote(b, openBench(b, newStore)) })
	b.Run("EnvironmentGeneration10000Snapshots", func(b *testing.B) { benchGeneration(b, openBench(b, newStore), false) })
	b.Run("GetEnvironment10000Snapshots", func(b *testing.B) { benchGeneration(b, openBench(b, newStore), true) })
	b.Run("RunModelStateCalls", func(b *testing.B) { BenchRunModel(b, newStore) })
	b.Run("RecordDelivery", func(b *testing.B) { benchRecordDelivery(b, openBench(b, newStore)) })
	b.Run("GateCycle1PR", func(b *testing.B) { benchGate(b, openBench(b, newStore), 1) })
	b.Run("GateCycle100PRs", func(b *testing.B) { benchGate(b, openBench(b, newStore), 100) })
}

// BenchRunModel is the suite's RunModelStateCalls benchmark alone (see
// benchRunModel), for a store to compare its variants.
func BenchRunModel(b *testing.B, newStore func(b *testing.B) state.Store) {
	benchRunModel(b, openBench(b, newStore))
}

// openBench opens a store for b and closes it when b ends.
func openBench(b *testing.B, newStore func(b *testing.B) state.Store) state.Store {
	b.Helper()
	st := newStore(b)
	if st == nil {
		b.Fatal("the factory returned a nil store")
	}
	b.Cleanup(func() {
		if err := st.Close(); err != nil {
			b.Errorf("closing the store: %v", err)
		}
	})
	return st
}

// benchRecord: one op records one hourly batch with one AddIntervals call,
// round-robin over a few models, as a scheduler catching up would; ns/op is
// the cost per record. -benchtime=100000x records the 100,000
// batches. Afterwards each model must hold one compacted range.
//
// withDebt first gives every model an open freshness debt far beyond the
// recorded hours, so that each record also finds an open debt on its key and
// checks it, without repairing it: the cost of debt tracking on the hot path
// when debts exist. Without it, the key has no open debt, the common case.
func benchRecord(b *testing.B, st state.Store, withDebt bool) {
	ctx := b.Context()
	if withDebt {
		snaps := make([]state.SnapshotRef, benchModels)
		debts := make([]state.Debt, benchModels)
		for i := range benchModels {
			name := fmt.Sprintf("m.bench%d", i)
			snaps[i] = state.SnapshotRef{Name: name, Fingerprint: "fp-" + name, Version: "v1"}
			debts[i] = state.Debt{Model: name, Version: "v1", Range: hours(1_000_000, 1_000_001), Policy: "trailing-gap(1)", Bound: 1}
		}
		if _, err := st.Promote(ctx, state.PromoteParams{
			Environment: "prod", PlanID: "plan-1", Snapshots: snaps, Now: hour(0),
			Check: func(context.Context, state.Reader) (state.CheckResult, error) {
				return state.CheckResult{Debts: debts}, nil
			},
		}); err != nil {
			b.Fatal(err)
		}
	}
	n := 0
	for b.Loop() {
		k := vkey(fmt.Sprintf("m.bench%d", n%benchModels), "v1")
		h := n / benchModels
		if err := st.AddIntervals(ctx, state.IntervalsParams{Key: k, Ranges: set(hours(h, h+1)), Now: hour(0)}); err != nil {
			b.Fatal(err)
		}
		n++
	}
	b.ReportMetric(float64(n), "records")
	keys := make([]state.VersionKey, benchModels)
	for i := range keys {
		keys[i] = vkey(fmt.Sprintf("m.bench%d", i), "v1")
	}
	got, err := st.GetIntervals(ctx, keys)
	if err != nil {
		b.Fatal(err)
	}
	for _, k := range keys[:min(n, benchModels)] {
		if got[k].Len() != 1 {
			b.Fatalf("%+v holds %d ranges after adjacent adds, want 1", k, got[k].Len())
		}
	}
	if withDebt {
		open, err := st.ListDebts(ctx, state.DebtFilter{OpenOnly: true})
		if err != nil {
			b.Fatal(err)
		}
		if len(open) != benchModels {
			b.Fatalf("%d debts open after the records, want %d (none was covered)", len(open), benchModels)
		}
	}
}

// benchRead: one op reads the intervals of 10,000 versions, each holding
// three ranges, in one GetIntervals call.
func benchRead(b *testing.B, st state.Store) {
	ctx := b.Context()
	keys := make([]state.VersionKey, benchReadKeys)
	for i := range keys {
		keys[i] = vkey(fmt.Sprintf("m.t%05d", i), "v1")
		s := set(hours(0, 24), hours(48, 72), hours(96, 100+i%50))
		if err := st.AddIntervals(ctx, state.IntervalsParams{Key: keys[i], Ranges: s, Now: hour(0)}); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		got, err := st.GetIntervals(ctx, keys)
		if err != nil {
			b.Fatal(err)
		}
		if len(got) != benchReadKeys || got[keys[7]].Len() != 3 {
			b.Fatalf("read %d keys, key 7 has %v", len(got), got[keys[7]])
		}
	}
}

// benchPromote: one op promotes an environment of 1,000 snapshots, with a
// Check that reads every snapshot's intervals and verifies coverage, as the
// no-gap check does.
func benchPromote(b *testing.B, st state.Store) {
	ctx := b.Context()
	snaps := refs(benchEnvModels, "bench")
	keys := make([]state.VersionKey, len(snaps))
	for i, r := range snaps {
		keys[i] = r.VersionKey()
		if err := st.AddIntervals(ctx, state.IntervalsParams{Key: keys[i], Ranges: set(hours(0, 24)), Now: hour(0)}); err != nil {
			b.Fatal(err)
		}
	}
	check := func(ctx context.Context, r state.Reader) (state.CheckResult, error) {
		got, err := r.GetIntervals(ctx, keys)
		if err != nil {
			return state.CheckResult{}, err
		}
		for _, k := range keys {
			if !got[k].Covers(hours(0, 24)) {
				return state.CheckResult{}, fmt.Errorf("%+v has a gap", k)
			}
		}
		return state.CheckResult{}, nil
	}
	prev := ""
	for i := 0; b.Loop(); i++ {
		next := fmt.Sprintf("plan-%d", i)
		if _, err := st.Promote(ctx, state.PromoteParams{
			Environment: "prod", ExpectedPlanID: prev, PlanID: next, Snapshots: snaps, Now: hour(1), Check: check,
		}); err != nil {
			b.Fatal(err)
		}
		prev = next
	}
}

// benchGeneration: one op is a run's circuit-breaker read of an environment
// of 10,000 snapshots, as a run makes before every model:
// EnvironmentGeneration (whole false: one row, nothing decoded), or the
// GetEnvironment it replaces (whole true: every snapshot reference
// decoded), for comparison.
func benchGeneration(b *testing.B, st state.Store, whole bool) {
	ctx := b.Context()
	e, err := st.Promote(ctx, state.PromoteParams{Environment: "prod", PlanID: "plan-1", Snapshots: refs(benchGenModels, "bench"), Now: hour(0)})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		var gen int64
		if whole {
			got, err := st.GetEnvironment(ctx, "prod")
			if err != nil {
				b.Fatal(err)
			}
			gen = got.Generation
		} else if gen, _, err = st.EnvironmentGeneration(ctx, "prod"); err != nil {
			b.Fatal(err)
		}
		if gen != e.Generation {
			b.Fatalf("generation %d, want %d", gen, e.Generation)
		}
	}
}

// benchRunModel: one op is the state-store work a scheduler run does for
// one model with one hourly interval due (run.Once, execute.Executor): the
// circuit breaker's generation read, the intervals of the model and its
// parent, the version's lease taken, the intervals read again under it,
// the fence checked before the batch, the batch recorded under the fence,
// and the lease released. Round-robin over benchEnvModels models, each
// op one hour further. ns/op is the state cost per model of a tick.
func benchRunModel(b *testing.B, st state.Store) {
	ctx := b.Context()
	snaps := refs(benchEnvModels, "bench")
	e, err := st.Promote(ctx, state.PromoteParams{Environment: "prod", PlanID: "plan-1", Snapshots: snaps, Now: hour(0)})
	if err != nil {
		b.Fatal(err)
	}
	n := 0
	for b.Loop() {
		i := n % len(snaps)
		h := n / len(snaps)
		key, parent := snaps[i].VersionKey(), snaps[(i+len(snaps)-1)%len(snaps)].VersionKey()
		now := hour(h + 1)
		if gen, _, err := st.EnvironmentGeneration(ctx, "prod"); err != nil || gen != e.Generation {
			b.Fatalf("generation %d (%v), want %d", gen, err, e.Generation)
		}
		for range 2 { // before the lease, and again under it
			if _, err := st.GetIntervals(ctx, []state.VersionKey{key, parent}); err != nil {
				b.Fatal(err)
			}
		}
		l, err := st.AcquireLease(ctx, state.AcquireLeaseParams{Key: "version/" + key.Name + "@" + key.Version, Owner: "bench", TTL: time.Minute, Now: now})
		if err != nil {
			b.Fatal(err)
		}
		fence := state.Fence{Environment: "prod", Generation: e.Generation, LeaseKey: l.Key, LeaseToken: l.Token}
		if err := st.CheckFence(ctx, fence, now); err != nil {
			b.Fatal(err)
		}
		if err := st.AddIntervals(ctx, state.IntervalsParams{Key: key, Ranges: set(hours(h, h+1)), Fence: &fence, Now: now}); err != nil {
			b.Fatal(err)
		}
		if err := st.ReleaseLease(ctx, state.ReleaseLeaseParams{Key: l.Key, Token: l.Token}); err != nil {
			b.Fatal(err)
		}
		n++
	}
}
