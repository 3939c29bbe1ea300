package plan

import (
	"errors"
	"fmt"
	"time"

	"github.com/gapless-dev/gapless/cadence"
	"github.com/gapless-dev/gapless/internal/invariants"
)

// planInvariant names the invariant Build keeps in a violation's panic.
const planInvariant = "a built plan lists its snapshots in topological order and keeps its backfills inside their bounds"

// mustBeValid panics, naming the plan invariant, when p breaks it: a bug
// in Build. Build calls it in invariants builds (internal/invariants).
func (p *Plan) mustBeValid() {
	if err := p.check(); err != nil {
		invariants.Violated(planInvariant, err)
	}
}

// check verifies what Build guarantees of the plan it returns, in time
// linear in its size:
//   - Snapshots are unique by name and in topological order: each comes
//     after every parent the plan lists;
//   - every backfill and incumbent names a snapshot of the plan, at most
//     one backfill per model, at the snapshot's version;
//   - a backfill is either whole (no ranges) or ranges (design invariant
//     5, a plan keeps its bounds): non-empty, inside [the model's start
//     floored to its interval unit, and Options.Start so floored when
//     later, the backfill's End), with End not past Options.End, and
//     Buckets their bucket count.
func (p *Plan) check() error {
	pos := make(map[string]int, len(p.Snapshots))
	for i, s := range p.Snapshots {
		if _, dup := pos[s.Name]; dup {
			return fmt.Errorf("snapshot %s is listed twice", s.Name)
		}
		pos[s.Name] = i
	}
	for i, s := range p.Snapshots {
		for _, parent := range s.Parents {
			if j, ok := pos[parent]; ok && j > i {
				return fmt.Errorf("snapshot %s comes before its parent %s: snapshots are not in topological order", s.Name, parent)
			}
		}
	}
	backfilled := make(map[string]bool, len(p.Backfills))
	for _, b := range p.Backfills {
		i, ok := pos[b.Name]
		switch {
		case !ok:
			return fmt.Errorf("backfill of %s, which is not a snapshot of the plan", b.Name)
		case backfilled[b.Name]:
			return fmt.Errorf("%s is backfilled twice", b.Name)
		case p.Snapshots[i].Version != b.Version:
			return fmt.Errorf("backfill of %s at version %s, but the plan's snapshot is at %s", b.Name, b.Version, p.Snapshots[i].Version)
		}
		backfilled[b.Name] = true
		if err := p.checkBounds(b, i); err != nil {
			return fmt.Errorf("backfill of %s: %w", b.Name, err)
		}
	}
	for _, inc := range p.Incumbents {
		if _, ok := pos[inc.Name]; !ok {
			return fmt.Errorf("incumbent of %s, which is not a snapshot of the plan", inc.Name)
		}
	}
	return nil
}

// checkBounds checks backfill b of the plan's snapshot i (see check).
func (p *Plan) checkBounds(b Backfill, i int) error {
	if b.Whole {
		if !b.Ranges.IsEmpty() {
			return errors.New("a whole build with ranges")
		}
		return nil
	}
	if b.Ranges.IsEmpty() {
		return errors.New("no ranges and not a whole build")
	}
	spec, err := cadence.ForModel(p.Snapshots[i].Model)
	if err != nil {
		return fmt.Errorf("ranges for a model without a schedule: %w", err)
	}
	start, bound := spec.Unit.Floor(spec.Start), "the model's start"
	if o := p.Options.Start; !o.IsZero() && o.After(start) {
		start, bound = spec.Unit.Floor(o.UTC()), "the plan's start"
	}
	span := b.Ranges.Span()
	switch {
	case span.Start.Before(start):
		return fmt.Errorf("ranges %v start before %s %s", b.Ranges, bound, start.Format(time.RFC3339))
	case b.End.IsZero() || span.End.After(b.End):
		return fmt.Errorf("ranges %v end past the backfill's end %s", b.Ranges, b.End.Format(time.RFC3339))
	case !p.Options.End.IsZero() && b.End.After(p.Options.End):
		return fmt.Errorf("end %s is past the plan's end %s", b.End.Format(time.RFC3339), p.Options.End.Format(time.RFC3339))
	case b.Buckets != b.Ranges.Buckets(spec.Unit):
		return fmt.Errorf("%d buckets for ranges %v of %d", b.Buckets, b.Ranges, b.Ranges.Buckets(spec.Unit))
	}
	return nil
}
