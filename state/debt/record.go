package debt

import (
	"context"
	"fmt"
	"slices"

	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/state/internal/storekit"
)

// Writer is what a store offers RecordCheckResult inside a promotion's
// transaction, after the environment row was locked and rewritten. Every
// method runs in that transaction; the store decides how each is made safe
// against concurrent interval writes (its locking is documented on its
// implementation).
type Writer interface {
	// UnservedOpenDebts returns, in id order, the environment's open debts
	// on a (model, version) that refs does not serve, such that no interval
	// write can repair one of them before the promotion commits.
	UnservedOpenDebts(ctx context.Context, env string, refs []state.SnapshotRef) ([]state.Debt, error)
	// Coverage reads keys' stored intervals, such that no interval write
	// on those keys commits between this read and the promotion's commit.
	Coverage(ctx context.Context, keys []state.VersionKey) (map[state.VersionKey]interval.Set, error)
	// InsertDebts inserts debts in order and sets their IDs.
	InsertDebts(ctx context.Context, debts []state.Debt) error
	// Settle stamps each settlement's debt (which must still be open) and
	// inserts its carried debts, setting their IDs.
	Settle(ctx context.Context, settled []Settlement) error
	// AppendEvents appends events in order (validating them first).
	AppendEvents(ctx context.Context, events []state.Event) error
}

// RecordCheckResult writes what a promotion's check returned, and what the
// promotion does to the environment's earlier debts, through w, inside the
// promotion's transaction (design invariant 2: an accepted gap is never
// served without its record, and a record never exists without its
// promotion):
//   - res.Debts, checked by Prepare, are inserted; one whose range the
//     version's intervals already cover is inserted repaired at p.Now, with
//     its gap_repaired event;
//   - every open debt of the environment on a (model, version) that refs no
//     longer serves is settled at p.Now by Settle against the
//     intervals of the version of its model refs serve instead: repaired
//     if they cover its range, else superseded and carried to new debts on
//     that version for what it misses, or superseded if the model is no
//     longer served; with the events of SettlementEvents. Where a carried
//     debt and one of res.Debts cover the same time, only res.Debts's
//     records it (TrimCarried), so a gap is never counted twice;
//   - res.Events, then those events, are appended, in that order.
//
// refs are the snapshots the promotion serves.
func RecordCheckResult(ctx context.Context, w Writer, p state.PromoteParams, refs []state.SnapshotRef, res state.CheckResult) error {
	debts, err := Prepare(p, res.Debts)
	if err != nil {
		return err
	}
	now := storekit.FromMicros(storekit.Micros(p.Now))
	events := slices.Clone(res.Events)
	open, err := w.UnservedOpenDebts(ctx, p.Environment, refs)
	if err != nil {
		return err
	}
	keys := make([]state.VersionKey, 0, len(debts))
	for _, d := range debts {
		keys = append(keys, d.Key())
	}
	keys = append(keys, ReplacementKeys(p, open)...)
	covered, err := w.Coverage(ctx, keys)
	if err != nil {
		return fmt.Errorf("reading the coverage of %d versions: %w", len(keys), err)
	}
	if len(debts) > 0 {
		for i := range debts {
			if covered[debts[i].Key()].Covers(debts[i].Range) {
				debts[i].RepairedAt = now
			}
		}
		if err := w.InsertDebts(ctx, debts); err != nil {
			return err
		}
		for _, d := range debts {
			if d.RepairedAt.IsZero() {
				continue
			}
			ev, err := RepairedEvent(d)
			if err != nil {
				return err
			}
			events = append(events, ev)
		}
	}
	settled, err := Settle(p, open, covered)
	if err != nil {
		return err
	}
	settled = TrimCarried(settled, debts)
	if len(settled) > 0 {
		if err := w.Settle(ctx, settled); err != nil {
			return err
		}
	}
	settlementEvents, err := SettlementEvents(settled, p.PlanID)
	if err != nil {
		return err
	}
	events = append(events, settlementEvents...)
	if err := w.AppendEvents(ctx, events); err != nil {
		return fmt.Errorf("appending the promotion's events: %w", err)
	}
	return nil
}
