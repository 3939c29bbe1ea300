package snapshot

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gapless-dev/gapless/dag"
	"github.com/gapless-dev/gapless/model"
	"github.com/gapless-dev/gapless/model/suggest"
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
	// Reason says why the model is in its category, in a few words that
	// follow "<category>: " when printed: "column revenue changes", "adds
	// column x, which no child reads", "reads demo.x, which changes
	// breakingly", "only owner changed".
	Reason string
	// ForwardOnly is set when the new snapshot must reuse the previous
	// physical table instead of rebuilding: the model is marked forward_only,
	// or the whole plan is forward-only, or an upstream forward-only change
	// reaches it, or the operator chose it.
	ForwardOnly bool
	// ForwardOnlyReason says why ForwardOnly is set: "declared
	// forward_only", "reads demo.x, which is forward-only", ...
	ForwardOnlyReason string
	// MetadataChanged is set when metadata changed along with another
	// category (for example an indirect change plus a new owner).
	MetadataChanged bool
	// Chosen is the operator's category choice for the model, if any (see
	// Options.Choices); Auto is then the category gapless found itself.
	Chosen   Choice
	Auto     Category
	Previous *Snapshot // nil when Added
	Next     *Snapshot // nil when Removed
}

// QueryChange is what the SQL layer found between two versions of a
// model's query (package sqlparse's Comparison).
type QueryChange struct {
	// Additive: only projections were added, which is non-breaking.
	Additive bool
	// Reason says why in a few words ("adds column x", "column revenue
	// changes", "the WHERE clause changes").
	Reason string
	// Added, Removed and Changed name output columns the new query adds,
	// drops, or computes differently.
	Added, Removed, Changed []string
	// AllChanged: any column may change (the rows may, or a changed column
	// has no name); Removed and Changed are then not the whole story.
	AllChanged bool
}

// ColumnReads is what columns a query may read from the tables it reads,
// lower-cased; All when it may read every column (a star). It may name
// more than the query reads, never less.
type ColumnReads struct {
	Columns []string
	All     bool
}

// Has reports whether the query may read a column named col.
func (r ColumnReads) Has(col string) bool {
	return r.All || slices.Contains(r.Columns, strings.ToLower(col))
}

// Additive is the SQL-aware part of categorisation, supplied by the SQL
// layer (project.Additive, over package sqlparse). It is named for its
// first job: telling an additive (non-breaking) query change from a
// breaking one. Both methods take canonical query text.
type Additive interface {
	// Compare compares a model's previous and new query.
	Compare(oldSQL, newSQL string) (QueryChange, error)
	// Reads returns the columns a query may read; when it cannot tell, it
	// returns All rather than an error.
	Reads(sql string) (ColumnReads, error)
}

// Choice is an operator's category choice for one directly changed model
// (plan --category), SQLMesh's manual categorisation.
type Choice string

// The choices an operator can make.
const (
	// ChooseBreaking rebuilds the model and everything downstream.
	ChooseBreaking Choice = "breaking"
	// ChooseNonBreaking rebuilds the model only: its children keep their
	// tables. Refused when a child reads a column the change alters.
	ChooseNonBreaking Choice = "non-breaking"
	// ChooseForwardOnly keeps the model's table: the change applies to the
	// intervals computed from now on. Refused when the table cannot keep
	// up (its columns or physical attributes change, or the kind is built
	// whole).
	ChooseForwardOnly Choice = "forward-only"
)

// Choices lists every choice, in the order the CLI offers them.
var Choices = []Choice{ChooseBreaking, ChooseNonBreaking, ChooseForwardOnly}

// ParseChoice parses a choice as the CLI spells it.
func ParseChoice(s string) (Choice, error) {
	c := Choice(strings.ToLower(strings.TrimSpace(s)))
	if slices.Contains(Choices, c) {
		return c, nil
	}
	return "", fmt.Errorf("unknown category %q: choose breaking, non-breaking or forward-only", s)
}

// ChoiceError is an operator's category choice refused: the model, the
// choice, and why (with a did-you-mean for an unknown model).
type ChoiceError struct {
	Model  string
	Choice Choice
	Reason string
}

func (e *ChoiceError) Error() string {
	return fmt.Sprintf("category %s for %s refused: %s", e.Choice, e.Model, e.Reason)
}

// Options steer Categorize.
type Options struct {
	// ForwardOnly makes every changed model forward-only (the plan's
	// --forward-only flag).
	ForwardOnly bool
	// Choices are the operator's category choices, by model name (the
	// plan's --category flags). Each must name a model the plan changes
	// directly, and be safe (see Choice); otherwise Categorize fails with a
	// *ChoiceError.
	Choices map[string]Choice
}

// Categorize compares next against prev (both keyed by model name) and
// returns one Change per model in either, in g's topological order followed
// by removed models sorted by name. g must be next's graph. Every change
// carries its reason.
//
// Rules (SQLMesh's):
//   - a data change whose only difference is added projections, as judged by
//     additive, is NonBreaking; any other data change is Breaking;
//   - a model whose own data is unchanged but some parent's data changed is
//     IndirectBreaking if any changed parent is (indirectly) breaking, and
//     IndirectNonBreaking otherwise;
//   - a model whose only change is metadata is MetadataOnly;
//   - forward-only spreads from a forward-only change to its descendants;
//   - an operator's choice (opts.Choices) replaces a direct change's
//     category, or makes it forward-only, before its children are
//     categorised, so they follow it; an unsafe choice is refused.
func Categorize(prev, next map[string]*Snapshot, g *dag.Graph, additive Additive, opts Options) ([]Change, error) {
	if err := checkChoiceNames(prev, next, opts.Choices); err != nil {
		return nil, err
	}
	cz := categorizer{next: next, g: g, additive: additive, reads: map[string]ColumnReads{}}
	byName := make(map[string]*Change, len(next))
	var out []Change
	for _, name := range g.Order() {
		n := next[name]
		if n == nil {
			return nil, fmt.Errorf("snapshot: graph node %s has no snapshot", name)
		}
		c := Change{Name: name, Next: n, Previous: prev[name]}
		p := c.Previous
		var meta []fieldChange
		if p != nil && p.Fingerprint.MetadataHash != n.Fingerprint.MetadataHash {
			meta = metadataFields(p, n)
			if len(meta) == 0 {
				meta = []fieldChange{{Name: "metadata"}} // hashed under other rules
			}
		}
		var direct *directChange
		switch {
		case p == nil && n.Model.Source:
			c.Category, c.Reason = Added, "new source"
		case p == nil:
			c.Category, c.Reason = Added, "new model"
		case p.Fingerprint.DataHash != n.Fingerprint.DataHash:
			d, err := cz.direct(p, n)
			if err != nil {
				return nil, err
			}
			direct = &d
			c.Category, c.Reason = d.category, d.reason
		case p.Fingerprint.ParentDataHash != n.Fingerprint.ParentDataHash:
			c.Category, c.Reason = indirect(g.Parents(name), byName)
		case len(meta) > 0:
			c.Category, c.Reason = MetadataOnly, "only "+names(meta)+" changed"
		default:
			c.Category = Unchanged
		}
		if len(meta) > 0 && c.Category != MetadataOnly {
			c.MetadataChanged = true
		}
		if c.Category != Added && c.Category != Unchanged && c.Category != MetadataOnly {
			switch {
			case opts.ForwardOnly:
				c.ForwardOnly, c.ForwardOnlyReason = true, "the plan is forward-only (--forward-only)"
			case n.Model.ForwardOnly:
				c.ForwardOnly, c.ForwardOnlyReason = true, "declared forward_only"
			}
			for _, parent := range g.Parents(name) {
				if pc := byName[parent]; pc.ForwardOnly && pc.Category != MetadataOnly && !c.ForwardOnly {
					c.ForwardOnly, c.ForwardOnlyReason = true, fmt.Sprintf("reads %s, which is forward-only", parent)
				}
			}
		}
		if choice, ok := opts.Choices[name]; ok {
			if err := cz.choose(&c, direct, choice); err != nil {
				return nil, err
			}
		}
		if c.MetadataChanged {
			c.Reason += "; " + names(meta) + " changed too"
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
		out = append(out, Change{Name: name, Category: Removed, Reason: "no longer in the project", Previous: prev[name]})
	}
	return out, nil
}

// indirect categorises a model whose own data is unchanged but some
// parent's is, from its parents' categories (already decided), and says
// which parents.
func indirect(parents []string, byName map[string]*Change) (Category, string) {
	cat := IndirectNonBreaking
	var changed, breaking []string
	for _, parent := range parents {
		pc := byName[parent]
		switch pc.Category {
		case Unchanged, MetadataOnly:
			continue
		case Breaking, IndirectBreaking, Added:
			cat = IndirectBreaking
			breaking = append(breaking, parent+", which "+categoryVerb(pc.Category))
		}
		changed = append(changed, parent+", which "+categoryVerb(pc.Category))
	}
	if cat == IndirectBreaking {
		changed = breaking
	}
	if len(changed) == 0 {
		return cat, "a parent's data changes"
	}
	return cat, "reads " + strings.Join(changed, "; and ")
}

// directChange is the categorisation of a model whose own data changed,
// with what a choice is checked against.
type directChange struct {
	category Category
	reason   string
	// physical lists the attributes besides the query that changed (kind,
	// time_column, the seed's content, ...).
	physical []fieldChange
	// query is the SQL layer's comparison; nil when the query did not
	// change or could not be compared.
	query *QueryChange
}

// categorizer holds what Categorize's steps share.
type categorizer struct {
	next     map[string]*Snapshot
	g        *dag.Graph
	additive Additive
	reads    map[string]ColumnReads // by model name, cached
}

// direct decides between Breaking and NonBreaking for a model whose own
// data hash changed. Only a pure query change can be non-breaking: if a
// physical attribute (kind, time column, key, unit, ...) changed too, the
// data hash would differ even with an identical query, so it is checked by
// recomputing the data hash with the old query.
func (cz *categorizer) direct(p, n *Snapshot) (directChange, error) {
	withOldQuery := dataHash(Input{Model: n.Model, Canonical: p.Canonical, SeedHash: n.SeedHash})
	if withOldQuery != p.Fingerprint.DataHash {
		d := directChange{category: Breaking, physical: physicalFields(p, n)}
		if len(d.physical) == 0 {
			d.physical = []fieldChange{{Name: "data definition"}} // hashed under other rules
		}
		reasons := make([]string, len(d.physical))
		for i, f := range d.physical {
			reasons[i] = f.describe()
		}
		d.reason = strings.Join(reasons, "; ")
		return d, nil
	}
	if p.Canonical == "" || n.Canonical == "" || cz.additive == nil {
		return directChange{category: Breaking, reason: "the query changes"}, nil
	}
	qc, err := cz.additive.Compare(p.Canonical, n.Canonical)
	if err != nil {
		return directChange{}, fmt.Errorf("snapshot: categorising %s: %w", n.Name, err)
	}
	d := directChange{category: Breaking, reason: qc.Reason, query: &qc}
	if d.reason == "" {
		d.reason = "the query changes"
	}
	if !qc.Additive {
		return d, nil
	}
	d.category = NonBreaking
	if len(qc.Added) > 0 {
		readers, err := cz.readers(n.Name, qc.Added)
		if err != nil {
			return directChange{}, err
		}
		if len(readers) == 0 {
			d.reason += ", which no child reads"
		} else {
			d.reason += ", read by " + andList(readers)
		}
	}
	return d, nil
}

// readers returns the children of name that may read any of cols, sorted.
func (cz *categorizer) readers(name string, cols []string) ([]string, error) {
	var out []string
	for _, child := range cz.g.Children(name) {
		r, err := cz.readsOf(child)
		if err != nil {
			return nil, err
		}
		if slices.ContainsFunc(cols, r.Has) {
			out = append(out, child)
		}
	}
	slices.Sort(out)
	return out, nil
}

// readsOf returns the columns a model's query may read, cached.
func (cz *categorizer) readsOf(name string) (ColumnReads, error) {
	if r, ok := cz.reads[name]; ok {
		return r, nil
	}
	s := cz.next[name]
	r := ColumnReads{All: true}
	if s != nil && s.Model.Query == "" {
		r = ColumnReads{} // a SEED or EXTERNAL model reads no model
	} else if s != nil && s.Canonical != "" && cz.additive != nil {
		var err error
		if r, err = cz.additive.Reads(s.Canonical); err != nil {
			return r, fmt.Errorf("snapshot: reading the columns %s reads: %w", name, err)
		}
	}
	cz.reads[name] = r
	return r, nil
}

// checkChoiceNames refuses a choice for a model the project does not have,
// with the closest name as a suggestion.
func checkChoiceNames(prev, next map[string]*Snapshot, choices map[string]Choice) error {
	if len(choices) == 0 {
		return nil
	}
	known := make([]string, 0, len(next))
	for name := range next {
		known = append(known, name)
	}
	slices.Sort(known)
	chosen := make([]string, 0, len(choices))
	for name := range choices {
		chosen = append(chosen, name)
	}
	slices.Sort(chosen)
	for _, name := range chosen {
		choice := choices[name]
		if !slices.Contains(Choices, choice) {
			return &ChoiceError{Model: name, Choice: choice, Reason: "not a category one can choose: choose breaking, non-breaking or forward-only"}
		}
		if _, ok := next[name]; ok {
			continue
		}
		if _, ok := prev[name]; ok {
			return &ChoiceError{Model: name, Choice: choice, Reason: name + " is removed by this plan: there is no new version to categorise"}
		}
		reason := "no such model"
		if guess, ok := suggest.Closest(name, known); ok {
			reason += "; did you mean " + guess + "?"
		}
		return &ChoiceError{Model: name, Choice: choice, Reason: reason}
	}
	return nil
}

// choose applies the operator's choice to c, or refuses it. d is the
// direct categorisation of c (nil when c is not a direct data change).
//
// Invariant: a choice is accepted only when it cannot serve wrong rows:
// non-breaking only when no child reads a column the change removes or
// alters (any column, when the rows themselves may change), forward-only
// only when the existing table can keep taking the model's rows (an
// incremental kind, the same columns and physical attributes).
func (cz *categorizer) choose(c *Change, d *directChange, choice Choice) error {
	refuse := func(format string, args ...any) error {
		return &ChoiceError{Model: c.Name, Choice: choice, Reason: fmt.Sprintf(format, args...)}
	}
	switch c.Category {
	case Unchanged:
		return refuse("%s is not changed by this plan", c.Name)
	case Added:
		return refuse("%s is new: there is no previous version to compare it with, and it is built either way", c.Name)
	case MetadataOnly:
		return refuse("only its metadata changes (%s): nothing is rebuilt whichever the category", c.Reason)
	case IndirectBreaking, IndirectNonBreaking:
		return refuse("%s changes only through its parents (%s); choose a category for the parent", c.Name, c.Reason)
	}
	if d == nil {
		return refuse("%s is not a direct change", c.Name)
	}
	auto := c.Category
	reason := fmt.Sprintf("chosen with --category, over %s (%s)", auto, d.reason)
	switch choice {
	case ChooseBreaking, ChooseNonBreaking:
		if c.ForwardOnly {
			return refuse("%s is forward-only (%s): it keeps its table whatever its category", c.Name, c.ForwardOnlyReason)
		}
		if choice == ChooseNonBreaking && auto == Breaking {
			if err := cz.nonBreakingSafe(c.Name, d); err != nil {
				return refuse("%s", err.Error())
			}
			reason += "; no child reads a column it removes or changes"
		}
		c.Chosen, c.Auto = choice, auto
		c.Category = Category(choice)
		c.Reason = reason
	case ChooseForwardOnly:
		if err := forwardOnlySafe(c.Next, d); err != nil {
			return refuse("%s", err.Error())
		}
		c.Chosen, c.Auto = choice, auto
		if !c.ForwardOnly {
			c.ForwardOnly, c.ForwardOnlyReason = true, "chosen with --category"
		}
	}
	return nil
}

// nonBreakingSafe returns why a non-breaking choice for a Breaking change
// is unsafe, or nil: a child keeps its table, so it must not read a column
// the change removes or alters.
func (cz *categorizer) nonBreakingSafe(name string, d *directChange) error {
	var why string // set when every column may change
	var cols []string
	switch {
	case len(d.physical) > 0:
		why = d.reason
	case d.query == nil:
		why = "gapless cannot tell which columns change"
	case d.query.AllChanged:
		why = d.query.Reason
	default:
		cols = append(slices.Clone(d.query.Removed), d.query.Changed...)
	}
	children := cz.g.Children(name)
	slices.Sort(children)
	for _, child := range children {
		r, err := cz.readsOf(child)
		if err != nil {
			return err
		}
		if why != "" {
			return fmt.Errorf("%s reads %s, whose every column may change (%s)", child, name, why)
		}
		for _, col := range cols {
			if !r.Has(col) {
				continue
			}
			verb := "alters"
			if slices.Contains(d.query.Removed, col) {
				verb = "removes"
			}
			if r.All {
				return fmt.Errorf("%s reads every column of %s (a star or a NATURAL join), and this change %s column %s", child, name, verb, col)
			}
			return fmt.Errorf("%s reads column %s, which this change %s (%s)", child, col, verb, d.reason)
		}
	}
	return nil
}

// forwardOnlySafe returns why keeping n's existing table is unsafe, or nil.
func forwardOnlySafe(n *Snapshot, d *directChange) error {
	switch k := n.Model.Kind; {
	case !k.IsIncremental() || k == model.KindExternal:
		return fmt.Errorf("%s is a %s model, built whole at every run: there is no history to keep; choose breaking or non-breaking", n.Name, k)
	case len(d.physical) > 0:
		return fmt.Errorf("%s, which the existing table cannot follow; choose breaking", d.reason)
	case d.query == nil:
		return fmt.Errorf("gapless cannot tell whether %s's columns change; choose breaking", n.Name)
	case len(d.query.Added) > 0:
		return fmt.Errorf("the change adds %s, which the existing table does not have; choose breaking or non-breaking to rebuild it", colWords(d.query.Added))
	case len(d.query.Removed) > 0:
		return fmt.Errorf("the change removes %s, which the existing table has; choose breaking to rebuild it", colWords(d.query.Removed))
	}
	return nil
}

// colWords is "column a" or "columns a and b"; an unnamed column is
// "an unnamed column".
func colWords(cols []string) string {
	shown := make([]string, len(cols))
	for i, c := range cols {
		shown[i] = c
		if c == "" {
			shown[i] = "an unnamed column"
		}
	}
	if len(cols) == 1 {
		if cols[0] == "" {
			return shown[0]
		}
		return "column " + shown[0]
	}
	return "columns " + andList(shown)
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
