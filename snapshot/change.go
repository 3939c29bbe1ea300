package snapshot

import (
	"fmt"

	"github.com/gapless-dev/gapless/dag"
)

// Category says how a model changed between a previous and a new set of
// snapshots, and therefore what must be rebuilt.
type Category string

// The change categories. Breaking and NonBreaking are direct changes to a
// model's data; the Indirect ones are descendants of a direct change.
const (
	Unchanged           Category = "unchanged"
	Added               Category = "added"
	Removed             Category = "removed"
	Breaking            Category = "breaking"
	NonBreaking         Category = "non-breaking"
	MetadataOnly        Category = "metadata-only"
	IndirectBreaking    Category = "indirect-breaking"
	IndirectNonBreaking Category = "indirect-non-breaking"
)

// Direct reports whether the category is a direct change to the model's own
// definition.
func (c Category) Direct() bool {
	return c == Breaking || c == NonBreaking || c == MetadataOnly
}

// Change is one model's categorised change.
type Change struct {
	Name     string
	Category Category
	// ForwardOnly is set when the new snapshot must reuse the previous
	// physical table instead of rebuilding: the model is marked forward_only,
	// or the whole plan is forward-only, or an upstream forward-only change
	// reaches it.
	ForwardOnly bool
	// MetadataChanged is set when metadata changed along with another
	// category (for example an indirect change plus a new owner).
	MetadataChanged bool
	Previous        *Snapshot // nil when Added
	Next            *Snapshot // nil when Removed
}

// Additive reports whether newSQL differs from oldSQL only by added
// projections. It is supplied by the SQL layer (package sqlparse).
type Additive func(oldSQL, newSQL string) (bool, error)

// Options steer Categorize.
type Options struct {
	// ForwardOnly makes every changed model forward-only (the plan's
	// --forward-only flag).
	ForwardOnly bool
}

// Categorize compares next against prev (both keyed by model name) and
// returns one Change per model in either, in g's topological order followed
// by removed models sorted by name. g must be next's graph.
//
// Rules (SQLMesh's):
//   - a data change whose only difference is added projections, as judged by
//     additive, is NonBreaking; any other data change is Breaking;
//   - a model whose own data is unchanged but some parent's data changed is
//     IndirectBreaking if any changed parent is (indirectly) breaking, and
//     IndirectNonBreaking otherwise;
//   - a model whose only change is metadata is MetadataOnly;
//   - forward-only spreads from a forward-only change to its descendants.
func Categorize(prev, next map[string]*Snapshot, g *dag.Graph, additive Additive, opts Options) ([]Change, error) {
	byName := make(map[string]*Change, len(next))
	var out []Change
	for _, name := range g.Order() {
		n := next[name]
		if n == nil {
			return nil, fmt.Errorf("snapshot: graph node %s has no snapshot", name)
		}
		c := Change{Name: name, Next: n, Previous: prev[name]}
		p := c.Previous
		metaChanged := p != nil && p.Fingerprint.MetadataHash != n.Fingerprint.MetadataHash
		switch {
		case p == nil:
			c.Category = Added
		case p.Fingerprint.DataHash != n.Fingerprint.DataHash:
			cat, err := directCategory(p, n, additive)
			if err != nil {
				return nil, err
			}
			c.Category = cat
			c.MetadataChanged = metaChanged
		case p.Fingerprint.ParentDataHash != n.Fingerprint.ParentDataHash:
			c.Category = IndirectNonBreaking
			for _, parent := range g.Parents(name) {
				pc := byName[parent]
				if pc.Category == Breaking || pc.Category == IndirectBreaking || pc.Category == Added {
					c.Category = IndirectBreaking
				}
			}
			c.MetadataChanged = metaChanged
		case metaChanged:
			c.Category = MetadataOnly
		default:
			c.Category = Unchanged
		}
		if c.Category != Added && c.Category != Unchanged && c.Category != MetadataOnly {
			c.ForwardOnly = opts.ForwardOnly || n.Model.ForwardOnly
			for _, parent := range g.Parents(name) {
				if pc := byName[parent]; pc.ForwardOnly && pc.Category != MetadataOnly {
					c.ForwardOnly = true
				}
			}
		}
		out = append(out, c)
		byName[name] = &out[len(out)-1]
	}
	var removed []string
	for name := range prev {
		if _, ok := next[name]; !ok {
			removed = append(removed, name)
		}
	}
	g.SortTopo(removed) // none are nodes: sorted by name
	for _, name := range removed {
		out = append(out, Change{Name: name, Category: Removed, Previous: prev[name]})
	}
	return out, nil
}

// directCategory decides between Breaking and NonBreaking for a model whose
// own data hash changed. Only a pure query change can be non-breaking: if a
// physical attribute (kind, time column, key, unit, ...) changed too, the
// data hash would differ even with an identical query, so it is checked by
// recomputing the data hash with the old query.
func directCategory(p, n *Snapshot, additive Additive) (Category, error) {
	if p.Canonical == "" || n.Canonical == "" || additive == nil {
		return Breaking, nil
	}
	withOldQuery := dataHash(Input{Model: n.Model, Canonical: p.Canonical, SeedHash: n.SeedHash})
	if withOldQuery != p.Fingerprint.DataHash {
		return Breaking, nil // something besides the query changed
	}
	ok, err := additive(p.Canonical, n.Canonical)
	if err != nil {
		return "", fmt.Errorf("snapshot: categorising %s: %w", n.Name, err)
	}
	if ok {
		return NonBreaking, nil
	}
	return Breaking, nil
}

// AssignVersions applies the reuse rules to the new snapshots in changes, in
// order (which must be topological, as Categorize returns it):
//   - Unchanged, MetadataOnly and IndirectNonBreaking keep the previous
//     version: their table's rows are still right;
//   - a forward-only change keeps the previous version: it evolves the
//     existing table instead of rebuilding it;
//   - Added, Breaking, NonBreaking and IndirectBreaking get their fresh
//     version, so they are built beside the live table.
func AssignVersions(changes []Change) {
	for _, c := range changes {
		if c.Next == nil {
			continue
		}
		switch {
		case c.Previous == nil:
			c.Next.Version = c.Next.FreshVersion()
		case c.Category == Unchanged, c.Category == MetadataOnly, c.Category == IndirectNonBreaking, c.ForwardOnly:
			c.Next.Version = c.Previous.Version
		default:
			c.Next.Version = c.Next.FreshVersion()
		}
	}
}
