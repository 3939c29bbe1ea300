// Package debt is the settlement of freshness debt, pure logic over the
// state package's records: which debts a promotion accepts (Prepare), what
// it does to the open debts of versions it stops serving (Settle: repaired,
// superseded, or superseded and carried to the version it serves instead),
// and the history events of each. Both state stores decide what they write
// here, once, and only read and write themselves (RecordCheckResult, through
// a Writer); nothing here opens a database.
//
// It keeps design invariant 2: a gap a policy accepted is never served
// without an open debt.
package debt

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/state/internal/storekit"
)

// RepairedByPromotion is the RepairedEventData.RepairedBy of a debt that a
// promotion closed by serving a version that covers its range.
const RepairedByPromotion = "promotion"

// Prepare checks the debts of a promotion's check result and returns
// them ready to insert: Environment, PlanID and AcceptedAt filled from p
// when empty, ID cleared, instants truncated to the microseconds a store
// keeps.
//
// It fails closed, refusing the promotion, on a debt that could not be
// tracked to its repair: one without a model or version, with an empty range
// or one a store cannot hold exactly (not whole microseconds within int64 microseconds), for a version the
// promotion does not serve (it would be superseded at once), naming another
// environment or plan, with Advances outside [0, Bound], already stamped
// repaired or superseded, or already carried from another debt (only the
// store stamps and carries).
func Prepare(p state.PromoteParams, debts []state.Debt) ([]state.Debt, error) {
	served := make(map[state.VersionKey]bool, len(p.Snapshots))
	for _, r := range p.Snapshots {
		served[r.VersionKey()] = true
	}
	out := make([]state.Debt, len(debts))
	for i, d := range debts {
		if d.Environment == "" {
			d.Environment = p.Environment
		}
		if d.PlanID == "" {
			d.PlanID = p.PlanID
		}
		if d.AcceptedAt.IsZero() {
			d.AcceptedAt = p.Now
		}
		var problem string
		switch {
		case d.Model == "" || d.Version == "":
			problem = "model and version are required"
		case d.Environment != p.Environment:
			problem = fmt.Sprintf("it names environment %q, the promotion is of %q", d.Environment, p.Environment)
		case d.PlanID != p.PlanID:
			problem = fmt.Sprintf("it names plan %q, the promotion is of plan %q", d.PlanID, p.PlanID)
		case !served[d.Key()]:
			problem = "the promotion does not serve that version"
		case d.Range.Empty():
			problem = "its range is empty"
		case d.Bound < 0 || d.Advances < 0 || d.Advances > d.Bound:
			problem = fmt.Sprintf("advances %d is outside [0, bound %d]", d.Advances, d.Bound)
		case !d.RepairedAt.IsZero() || !d.SupersededAt.IsZero():
			problem = "repaired and superseded times are the store's to stamp"
		case d.CarriedFrom != 0:
			problem = "carried_from is the store's to set"
		}
		if problem != "" {
			return nil, fmt.Errorf("debt %d (%s@%s %v): %s", i, d.Model, d.Version, d.Range, problem)
		}
		if err := storekit.CheckMicros(interval.NewSet(d.Range)); err != nil {
			return nil, fmt.Errorf("debt %d (%s@%s): %w", i, d.Model, d.Version, err)
		}
		d.ID = 0
		d.Range = interval.NewRange(d.Range.Start, d.Range.End)
		d.AcceptedAt = storekit.FromMicros(storekit.Micros(d.AcceptedAt))
		out[i] = d
	}
	return out, nil
}

// Settlement is what a promotion does to one open debt of its environment
// on a (model, version) the promotion no longer serves.
type Settlement struct {
	// Debt is the open debt, stamped at the promotion's Now: RepairedAt
	// when the promotion serves another version of the model that covers
	// the debt's range (the gap is no longer served), SupersededAt
	// otherwise.
	Debt state.Debt
	// Carried, for a superseded debt whose model the promotion still
	// serves, are the new debts on the served version, one per range of
	// the debt's range that version misses: the gap is still served, so it
	// keeps a record (design invariant 2). Their ID is zero until the store
	// inserts them.
	Carried []state.Debt
}

// servedVersions maps each model p serves to the version it serves.
func servedVersions(p state.PromoteParams) map[string]string {
	out := make(map[string]string, len(p.Snapshots))
	for _, r := range p.Snapshots {
		out[r.Name] = r.Version
	}
	return out
}

// ReplacementKeys returns the interval records a promotion must read, inside
// its transaction and under the locks that keep interval writes out, to
// settle open (see Settle): for each debt on a version p does not
// serve, the version p serves of the debt's model, if any. The keys are
// distinct and sorted by name, then version.
func ReplacementKeys(p state.PromoteParams, open []state.Debt) []state.VersionKey {
	served := servedVersions(p)
	var out []state.VersionKey
	for _, d := range open {
		v, ok := served[d.Model]
		if !ok || v == d.Version {
			continue
		}
		out = append(out, state.VersionKey{Name: d.Model, Version: v})
	}
	slices.SortFunc(out, func(a, b state.VersionKey) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.Version, b.Version))
	})
	return slices.Compact(out)
}

// Settle decides what the promotion p does to open, the open debts of
// its environment, given covered, the stored intervals of every key
// ReplacementKeys(p, open) returned, read in the promotion's transaction.
// Debts on a version p still serves, and debts that are not open, are left
// alone. For each other debt D, at the promotion's Now:
//   - p serves D's model at another version V' that covers D's range: D is
//     repaired (the promotion closed the gap);
//   - p serves D's model at a V' that misses part of D's range: D is
//     superseded, and carried to one new open debt on V' per missing range,
//     with p's plan, D's policy, bound and advances, accepted at Now and
//     CarriedFrom D's id;
//   - p does not serve D's model: D is superseded.
//
// A promotion that starts the environment afresh (ExpectedPlanID "": it
// did not exist or was invalidated) supersedes every open debt of the
// environment's earlier incarnation: nothing it served is served any more.
//
// Settlements are in the order of open.
func Settle(p state.PromoteParams, open []state.Debt, covered map[state.VersionKey]interval.Set) ([]Settlement, error) {
	if p.Now.IsZero() {
		return nil, state.ErrNoNow
	}
	now := storekit.FromMicros(storekit.Micros(p.Now))
	served := servedVersions(p)
	var out []Settlement
	for _, d := range open {
		if !d.Open() || d.Environment != p.Environment {
			continue
		}
		if p.ExpectedPlanID == "" {
			d.SupersededAt = now
			out = append(out, Settlement{Debt: d})
			continue
		}
		v, ok := served[d.Model]
		if ok && v == d.Version {
			continue
		}
		if !ok {
			d.SupersededAt = now
			out = append(out, Settlement{Debt: d})
			continue
		}
		key := state.VersionKey{Name: d.Model, Version: v}
		have, read := covered[key]
		if !read {
			return nil, fmt.Errorf("settling debt %d: the intervals of %s@%s were not read", d.ID, key.Name, key.Version)
		}
		missing := have.Missing(d.Range)
		if missing.IsEmpty() {
			d.RepairedAt = now
			out = append(out, Settlement{Debt: d})
			continue
		}
		d.SupersededAt = now
		s := Settlement{Debt: d}
		for r := range missing.All() {
			s.Carried = append(s.Carried, state.Debt{
				Environment: d.Environment, Model: d.Model, Version: v, Range: r,
				PlanID: p.PlanID, Policy: d.Policy, Bound: d.Bound, Advances: d.Advances,
				AcceptedAt: now, CarriedFrom: d.ID,
			})
		}
		out = append(out, s)
	}
	return out, nil
}

// TrimCarried keeps one record per gap: where a debt carried by settled
// and an open debt of accepted (the promotion's own, accepted by its check)
// cover the same time of the same version, the accepted debt tracks it and
// only the rest is carried. A carried debt left with nothing is dropped.
// Settled is changed in place and returned.
func TrimCarried(settled []Settlement, accepted []state.Debt) []Settlement {
	own := map[state.VersionKey]interval.Set{}
	for _, d := range accepted {
		if d.Open() {
			own[d.Key()] = own[d.Key()].Add(d.Range)
		}
	}
	if len(own) == 0 {
		return settled
	}
	for i := range settled {
		var kept []state.Debt
		for _, c := range settled[i].Carried {
			for r := range interval.NewSet(c.Range).Subtract(own[c.Key()]).All() {
				c.Range = r
				kept = append(kept, c)
			}
		}
		settled[i].Carried = kept
	}
	return settled
}

// SettlementEvents returns the history events of settlements, whose carried
// debts the store has inserted (their IDs set), in order: for each
// settlement, the gap_repaired event of a debt the promotion of planID
// repaired, or the gap_superseded event of a superseded debt followed by
// one gap_carried event per debt it was carried to.
func SettlementEvents(settlements []Settlement, planID string) ([]state.Event, error) {
	var out []state.Event
	for _, s := range settlements {
		d := s.Debt
		if !d.RepairedAt.IsZero() {
			ev, err := repairedEvent(d, RepairedEventData{RepairedBy: RepairedByPromotion, PlanID: planID})
			if err != nil {
				return nil, err
			}
			out = append(out, ev)
			continue
		}
		var to []int64
		for _, c := range s.Carried {
			if c.ID == 0 {
				return nil, fmt.Errorf("a debt that debt %d was carried to has no id", d.ID)
			}
			to = append(to, c.ID)
		}
		ev, err := SupersededEvent(d, planID, to)
		if err != nil {
			return nil, err
		}
		out = append(out, ev)
		for _, c := range s.Carried {
			ev, err := CarriedEvent(c)
			if err != nil {
				return nil, err
			}
			out = append(out, ev)
		}
	}
	return out, nil
}

// RepairedEventData is the Data of a gap_repaired event.
type RepairedEventData struct {
	DebtID         int64          `json:"debt_id"`
	Range          interval.Range `json:"range"`
	AcceptedAt     time.Time      `json:"accepted_at"`
	RepairedAt     time.Time      `json:"repaired_at"`
	LatencySeconds float64        `json:"latency_seconds"`
	Policy         string         `json:"policy"`
	// RepairedBy is RepairedByPromotion when a promotion closed the debt by
	// serving another version that covers its range, and PlanID is then
	// that promotion's plan (the event's own PlanID is, as for every
	// gap_repaired event, the plan that accepted the debt). Both are empty
	// for a repair by an interval write, or by the coverage a debt's range
	// already had when its promotion recorded it.
	RepairedBy string `json:"repaired_by,omitempty"`
	PlanID     string `json:"plan_id,omitempty"`
}

// RepairedEvent is the gap_repaired event of d, stamped repaired by an
// interval write (or recorded repaired at once): at the repair, under the
// environment and plan that accepted the debt.
func RepairedEvent(d state.Debt) (state.Event, error) {
	return repairedEvent(d, RepairedEventData{})
}

// repairedEvent is RepairedEvent with data's RepairedBy and PlanID.
func repairedEvent(d state.Debt, data RepairedEventData) (state.Event, error) {
	if d.RepairedAt.IsZero() {
		return state.Event{}, fmt.Errorf("the gap_repaired event of debt %d: the debt is not repaired", d.ID)
	}
	data.DebtID, data.Range, data.AcceptedAt, data.RepairedAt = d.ID, d.Range, d.AcceptedAt, d.RepairedAt
	data.LatencySeconds, data.Policy = d.RepairedAt.Sub(d.AcceptedAt).Seconds(), d.Policy
	raw, err := json.Marshal(data)
	if err != nil {
		return state.Event{}, fmt.Errorf("encoding the gap_repaired event of debt %d: %w", d.ID, err)
	}
	return state.Event{
		At: d.RepairedAt, Kind: state.EventGapRepaired,
		Environment: d.Environment, Model: d.Model, PlanID: d.PlanID, Data: raw,
	}, nil
}

// InvalidatedEvent is the gap_superseded event of d, stamped superseded (at
// d.SupersededAt) by the invalidation of its environment: SupersededEvent
// with no plan and no carried debts, and Reason state.ReasonInvalidated.
func InvalidatedEvent(d state.Debt) (state.Event, error) {
	ev, err := SupersededEvent(d, "", nil)
	if err != nil {
		return state.Event{}, err
	}
	ev.Reason = state.ReasonInvalidated
	return ev, nil
}

// RemovedEvent is the gap_superseded event of d, stamped superseded (at
// d.SupersededAt) by the removal of its environment: SupersededEvent with no
// plan and no carried debts, and Reason state.ReasonRemoved.
func RemovedEvent(d state.Debt) (state.Event, error) {
	ev, err := SupersededEvent(d, "", nil)
	if err != nil {
		return state.Event{}, err
	}
	ev.Reason = state.ReasonRemoved
	return ev, nil
}

// SupersededEventData is the Data of a gap_superseded event.
type SupersededEventData struct {
	DebtID  int64          `json:"debt_id"`
	Range   interval.Range `json:"range"`
	Version string         `json:"version"`
	// CarriedTo are the ids of the debts the superseded debt was carried to
	// (see Debt.CarriedFrom); empty when its model is no longer served.
	CarriedTo []int64 `json:"carried_to,omitempty"`
}

// SupersededEvent is the gap_superseded event of d, stamped superseded by
// the promotion of plan planID (at d.SupersededAt), carried to the debts
// carriedTo.
func SupersededEvent(d state.Debt, planID string, carriedTo []int64) (state.Event, error) {
	if d.SupersededAt.IsZero() {
		return state.Event{}, fmt.Errorf("the gap_superseded event of debt %d: the debt is not superseded", d.ID)
	}
	data, err := json.Marshal(SupersededEventData{DebtID: d.ID, Range: d.Range, Version: d.Version, CarriedTo: carriedTo})
	if err != nil {
		return state.Event{}, fmt.Errorf("encoding the gap_superseded event of debt %d: %w", d.ID, err)
	}
	return state.Event{
		At: d.SupersededAt, Kind: state.EventGapSuperseded,
		Environment: d.Environment, Model: d.Model, PlanID: planID, Data: data,
	}, nil
}

// CarriedEventData is the Data of a gap_carried event.
type CarriedEventData struct {
	DebtID      int64          `json:"debt_id"`
	CarriedFrom int64          `json:"carried_from"`
	Range       interval.Range `json:"range"`
	Version     string         `json:"version"`
}

// CarriedEvent is the gap_carried event of d, a debt carried from another
// (see Settlement): at its acceptance, under the plan of the promotion that
// carried it.
func CarriedEvent(d state.Debt) (state.Event, error) {
	if d.CarriedFrom == 0 {
		return state.Event{}, fmt.Errorf("the gap_carried event of debt %d: the debt was not carried", d.ID)
	}
	data, err := json.Marshal(CarriedEventData{DebtID: d.ID, CarriedFrom: d.CarriedFrom, Range: d.Range, Version: d.Version})
	if err != nil {
		return state.Event{}, fmt.Errorf("encoding the gap_carried event of debt %d: %w", d.ID, err)
	}
	return state.Event{
		At: d.AcceptedAt, Kind: state.EventGapCarried, Environment: d.Environment, Model: d.Model,
		PlanID: d.PlanID, Reason: "carried", Data: data,
	}, nil
}
