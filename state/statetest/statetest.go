// Package statetest is the conformance suite of state.Store: the contract
// every backend (state/sqlite, state/postgres) must pass, run from each
// backend's tests with its own Factory.
//
//	func TestConformance(t *testing.T) { statetest.Run(t, newStore) }
//	func BenchmarkStore(b *testing.B)  { statetest.RunBenchmarks(b, newBenchStore) }
//
// It covers every method of the interface with its edge cases, the fences of
// Invariant 1 (a stale lease token or environment generation writes
// nothing), and races between real goroutines started together. Time is
// always injected through the methods' Now fields: no test sleeps.
//
// Where state.go's comments leave a choice open, the suite settles it; a
// backend must also:
//   - implement IntervalRowCounter, so that compaction is proven on storage;
//   - refuse an interval key with an empty name or version, and a boundary
//     that is not a whole microsecond, writing nothing;
//   - refuse a malformed Fence (a form incomplete, or none) with an error,
//     writing nothing; with both forms, require both, and check the fence even when the set to write
//     is empty (a stale writer learns it is stale);
//   - never reuse a generation for an environment name, also after
//     RemoveEnvironment, so that an old (name, generation) fence never
//     passes again;
//   - return environments with Snapshots sorted by name, and refuse a
//     promotion without an environment or plan id, or serving a model twice;
//   - run Promote's Check only after the expected plan id matched;
//   - answer ErrNotFound for Finalize, Invalidate and RemoveEnvironment of an
//     unknown environment, and for RecordApplication of an unsaved plan;
//   - keep the first record when a plan is saved again with the same payload
//     (payloads are compared as JSON), and refuse invalid JSON;
//   - keep a lease's Holder as the acquisition or takeover gave it, and
//     refuse a takeover without a key, the displaced token, a positive TTL
//     or a Now with an error other than ErrLeaseLost;
//   - treat a lease as expired at ExpiresAt exactly (an acquire at that
//     instant succeeds, a renew fails), and refuse an acquire without a key,
//     a positive TTL or a Now, with an error other than ErrLeaseHeld;
//   - record a batch of snapshots or events atomically: one invalid element
//     (nil snapshot, event without a kind, data that is not JSON) refuses
//     the whole batch; a negative event limit is an error;
//   - refuse AddIntervals without Now (it is the repair time of the debts
//     the write completes, and the time of the key's last write);
//   - record a key's last write (state.LastWrite) only for an add that
//     commits ranges: the latest such add wins, whatever its Now; removes
//     and empty adds leave it, DeleteIntervals removes it, and LastWrites
//     returns times in UTC;
//   - refuse, failing the whole promotion, a Check result it could not
//     track: a debt on a version the promotion does not serve, with an
//     empty range, Advances outside [0, Bound], another environment or plan
//     than the promotion's, a repair or supersession time or a CarriedFrom
//     already set;
//   - settle the open debts of the versions a promotion stops serving as
//     debt.Settle decides, atomically with the promotion, and order
//     its events: the check's, then gap_repaired of debts recorded
//     repaired, then per settled debt its gap_repaired, or its
//     gap_superseded followed by its gap_carried events;
//   - append a gap_repaired event also for a debt recorded repaired at once
//     (its range was covered when the promotion committed), so that every
//     repaired debt has exactly one;
//   - supersede, in Invalidate's transaction, every open debt of the
//     environment, each with its gap_superseded event (no plan, reason
//     state.ReasonInvalidated), and no other debt;
//   - remove an environment in one transaction (RemoveEnvironment): the row
//     pinned to its generation, its open debts superseded (each with its
//     gap_superseded event, reason state.ReasonRemoved), the last-served
//     times of its versions and its environment_removing event; a stale
//     generation is ErrConflictingPlan and writes none of it;
//   - record, atomically with a promotion or an environment's removal, the
//     Now of it as the last-served time of every version it stops serving
//     (the latest time wins, whatever the order of the writes), and nothing
//     for a refused one; DeleteIntervals removes it;
//   - list plans newest first (CreatedAt descending, ties by ID), with
//     CreatedAfter strictly after, and refuse a negative limit;
//   - keep the sources state machine's invariants (state.Source): one
//     build per source (of racing planners exactly one wins), generations
//     never reused (also across RemoveSource and a new definition), every
//     transition refusing a stale generation with a typed error and no
//     write, one source_plan_deferred event per in-flight generation
//     however often planning is retried, a replayed RecordSwap of the
//     serving generation a no-op, and each transition's event written in
//     its transaction with the source's name as Model;
//   - keep the code-host store's compare-and-swaps (state.CodeHostStore):
//     a replayed delivery id is not fresh; a PR check written against a
//     stale revision, a render of a revision below the rendered one or
//     above the desired one, a comment claim while another is unexpired,
//     a deploy start while another attempt runs unexpired on the
//     environment, and a deploy finish or renewal with a token that is not
//     the attempt's all write nothing (of racing goroutines exactly one
//     wins); an identical desired check keeps its revision; and every write
//     refuses a missing Now;
//   - keep the merge gate's invariants (state.GateStore): an attempt and
//     its holds recorded in one transaction, at most one held, rendered or
//     running attempt per environment (of racing deployers exactly one
//     wins, and the stored holds are the winner's), an attempt on an
//     expired lease still blocking BeginDeploy, a held attempt in mode
//     rendered never opened, a promotion of a gated environment without a
//     running attempt's valid lease refused with ErrNotHeld having written
//     nothing, a settle releasing only its own attempt's holds and
//     deferring to an active attempt, and a PR check written during a
//     deploy held by it in the same write.
package statetest

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/state"
)

// Factory returns a fresh, empty, migrated store for one test. The suite
// closes it.
type Factory func(t *testing.T) state.Store

// IntervalRowCounter is implemented by stores for tests: the number of
// interval rows stored, over every key. A compacted store holds exactly one
// row per gap-separated range.
type IntervalRowCounter interface {
	CountIntervalRows(ctx context.Context) (int, error)
}

// test is one conformance test: it gets a fresh store of its own.
type test struct {
	name string
	fn   func(t *testing.T, b *bundle)
}

// bundle is what every test starts from.
type bundle struct {
	store state.Store
	ctx   context.Context
}

// newBundle opens a fresh store for t and closes it when t ends.
func newBundle(t *testing.T, newStore Factory) *bundle {
	t.Helper()
	st := newStore(t)
	require.NotNil(t, st, "the factory returned a nil store")
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("closing the store: %v", err)
		}
	})
	return &bundle{store: st, ctx: t.Context()}
}

// groups lists every conformance test, by area.
func groups() []struct {
	name  string
	tests []test
} {
	return []struct {
		name  string
		tests []test
	}{
		{"Snapshots", snapshotTests()},
		{"Intervals", intervalTests()},
		{"LastWrites", lastWriteTests()},
		{"LastServed", lastServedTests()},
		{"Fencing", fencingTests()},
		{"Environments", environmentTests()},
		{"Plans", planTests()},
		{"Leases", leaseTests()},
		{"Events", eventTests()},
		{"Debts", debtTests()},
		{"Schema", schemaTests()},
		{"Races", raceTests()},
		{"Sources", sourceTests()},
		{"Batches", batchTests()},
		{"Applied", appliedTests()},
		{"Blocked", blockedTests()},
		{"Skipped", skippedTests()},
		{"CodeHost", codeHostTests()},
		{"Gate", gateTests()},
	}
}

// Run runs every conformance test against stores from newStore, as parallel
// subtests grouped by area (Snapshots, Intervals, LastWrites, LastServed,
// Fencing, Environments, Plans, Leases, Events, Debts, Schema, Races, Sources,
// Batches, Applied, Blocked, Skipped, CodeHost, Gate). Each test gets its
// own store.
func Run(t *testing.T, newStore Factory) {
	t.Helper()
	for _, g := range groups() {
		t.Run(g.name, func(t *testing.T) {
			t.Parallel()
			for _, tc := range g.tests {
				t.Run(tc.name, func(t *testing.T) {
					t.Parallel()
					tc.fn(t, newBundle(t, newStore))
				})
			}
		})
	}
}

// schemaTests check SchemaVersion.
func schemaTests() []test {
	return []test{
		{"VersionIsPositive", func(t *testing.T, b *bundle) {
			// Scenario: a fresh store from the factory is migrated, so it
			// reports a schema version above zero.
			v, err := b.store.SchemaVersion(b.ctx)
			require.NoError(t, err)
			require.Positive(t, v)
		}},
	}
}
