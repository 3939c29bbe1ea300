package sqlparse

import (
	"fmt"
	"slices"
	"strings"
	"sync"
)

// Comparison is what changed between two versions of a query, as far as the
// planner needs to know: the verdict AdditiveOnly gives, a reason a person
// can read, and which output columns are affected. It is what a plan's
// category reasons and the check of an operator's category choice stand on.
type Comparison struct {
	// Additive is AdditiveOnly's verdict (non-breaking).
	Additive bool
	// Reason says in a few words why the change is, or is not, additive:
	// "adds column biggest", "column revenue changes", "the WHERE clause
	// changes", "adds column b under GROUP BY ALL, which then also groups by
	// it".
	Reason string
	// Added names the projections the new query adds, in order ("" for one
	// without a name, which DuckDB names itself).
	Added []string
	// Removed names the old output columns the new query no longer has (a
	// renamed column is removed under its old name and added under its new
	// one).
	Removed []string
	// Changed names the old output columns the new query computes
	// differently.
	Changed []string
	// AllChanged reports that any column may change: the rows themselves
	// may (another FROM, WHERE or grouping, a column added under SELECT
	// DISTINCT, a set-returning function, ...), or a changed column has no
	// name, or the queries could not be compared. Removed and Changed are
	// then not the whole story.
	AllChanged bool
}

// Compare compares two versions of a query (see Comparison). Whenever in
// doubt it reports AllChanged, which callers treat as "every column
// changes"; Additive is exactly AdditiveOnly(oldQ, newQ).
func Compare(oldQ, newQ *Query) Comparison {
	c := compare(oldQ, newQ)
	c.Additive = AdditiveOnly(oldQ, newQ)
	return c
}

func compare(oldQ, newQ *Query) Comparison {
	if oldQ == nil || newQ == nil {
		return Comparison{AllChanged: true, Reason: "the query changes"}
	}
	o, n := oldQ.shape.get(), newQ.shape.get()
	switch {
	case o == nil && n == nil:
		return Comparison{AllChanged: true, Reason: "the query changes, and it is not a plain SELECT (a UNION, INTERSECT, EXCEPT or VALUES)"}
	case o == nil:
		return Comparison{AllChanged: true, Reason: "the query becomes a plain SELECT"}
	case n == nil:
		return Comparison{AllChanged: true, Reason: "the query is no longer a plain SELECT (a UNION, INTERSECT, EXCEPT or VALUES)"}
	case o.rest != n.rest:
		return Comparison{AllChanged: true, Reason: clauseReason(o.clauses, n.clauses)}
	}
	c := Comparison{}
	var msgs []string
	used := make([]bool, len(n.items))
	matched := make([]bool, len(o.items))
	for i, it := range o.items {
		if j := unusedIndex(n.items, used, func(x item) bool { return x.canonical == it.canonical }); j >= 0 {
			used[j], matched[i] = true, true
		}
	}
	renamed := make([]bool, len(n.items)) // new items that are old ones renamed
	for i, it := range o.items {
		if matched[i] {
			continue
		}
		if it.name == "" {
			c.AllChanged = true
			msgs = append(msgs, "a column without a name changes")
			continue
		}
		if j := unusedIndex(n.items, used, func(x item) bool { return x.name == it.name }); j >= 0 {
			used[j] = true
			c.Changed = append(c.Changed, it.name)
			msgs = append(msgs, "column "+it.name+" changes")
			continue
		}
		c.Removed = append(c.Removed, it.name)
		j := unusedIndex(n.items, used, func(x item) bool { return x.expr == it.expr && x.name != "" })
		if j < 0 {
			msgs = append(msgs, "column "+it.name+" is removed")
			continue
		}
		used[j], renamed[j] = true, true
		msgs = append(msgs, fmt.Sprintf("column %s is renamed to %s", it.name, n.items[j].name))
	}
	var fresh []string // added, not as a rename
	for j, it := range n.items {
		if !used[j] || renamed[j] {
			c.Added = append(c.Added, it.name)
		}
		if !used[j] {
			fresh = append(fresh, it.name)
		}
	}
	if len(msgs) > 0 {
		if len(fresh) > 0 {
			msgs = append(msgs, "adds "+columnList(fresh))
		}
		c.Reason = joinReasons(msgs)
		return c
	}
	inserted, inOrder := insertedItems(o.items, n.items, false)
	switch {
	case !inOrder && o.positional:
		c.AllChanged = true
		c.Reason = "columns are reordered, and GROUP BY, ORDER BY or DISTINCT ON refers to them by position"
		return c
	case !inOrder:
		c.Reason = "columns are reordered"
		if len(c.Added) > 0 {
			c.Reason += "; adds " + columnList(c.Added)
		}
		return c
	case len(inserted) == 0:
		c.AllChanged = true
		c.Reason = "the query changes"
		return c
	}
	c.Reason, c.AllChanged = insertionReason(o, n, inserted)
	return c
}

// insertionReason explains a change that only inserts projections: the
// first of AdditiveOnly's rules it breaks, and whether breaking it may
// change the rows (and so every column); else "adds column ...".
func insertionReason(o, n *selectShape, inserted []item) (string, bool) {
	names := make([]string, len(inserted))
	for i, it := range inserted {
		names[i] = it.name
	}
	adds := "adds " + columnList(names)
	if o.plainDistinct {
		return adds + " under SELECT DISTINCT, which changes which rows are distinct", true
	}
	if _, appended := insertedItems(o.items, n.items, true); o.positional && !appended {
		return adds + " before the end of the select list, which GROUP BY, ORDER BY or DISTINCT ON refers to by position", true
	}
	for _, it := range inserted {
		col := columnList([]string{it.name})
		switch {
		case it.effect&effectSetReturning != 0:
			return col + " calls a set-returning function, which changes the rows", true
		case it.effect&effectUnknown != 0:
			return col + " calls a function gapless cannot classify (it may aggregate or return sets)", true
		case it.effect&effectAggregate != 0 && !o.aggregating:
			return col + " aggregates a query that did not, which collapses its rows", true
		}
		if _, captures := o.refNames[it.name]; captures && it.name != "" && !it.passThrough {
			return col + " takes a name the query already refers to, which changes what that reference reads", true
		}
	}
	if o.groupAll {
		for _, it := range inserted {
			if it.effect&effectAggregate == 0 {
				return adds + " under GROUP BY ALL, which then also groups by it", true
			}
		}
		return adds + " under GROUP BY ALL, where gapless counts every added column as breaking", false
	}
	return adds, false
}

// clauseReason names the clauses that differ between two rests.
func clauseReason(o, n map[string]string) string {
	var names []string
	for _, name := range clauseOrder {
		if o[name] != n[name] {
			names = append(names, name)
		}
	}
	var other []string
	for name := range o {
		if !slices.Contains(clauseOrder, name) && o[name] != n[name] {
			other = append(other, name)
		}
	}
	for name := range n {
		if _, ok := o[name]; !ok && !slices.Contains(clauseOrder, name) {
			other = append(other, name)
		}
	}
	slices.Sort(other)
	names = append(names, slices.Compact(other)...)
	switch len(names) {
	case 0:
		return "the query changes outside its select list"
	case 1:
		return "the " + names[0] + " clause changes"
	default:
		return "the " + strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1] + " clauses change"
	}
}

// clauseOrder is the order clauses are named in, as a query spells them.
var clauseOrder = []string{"WITH", "DISTINCT", "FROM", "WHERE", "GROUP BY", "HAVING", "QUALIFY", "ORDER BY", "LIMIT", "SAMPLE"}

// clausesOf splits a normalised statement without its select list into
// its clauses (see selectShape.clauses).
func clausesOf(restStmt map[string]any) map[string]string {
	out := map[string]string{}
	add := func(name, key string, v any) { out[name] += key + "=" + marshalCanonical(v) + ";" }
	for _, key := range sortedKeys(restStmt) {
		if key != "node" {
			add("parameters", key, restStmt[key])
		}
	}
	node, _ := asObject(restStmt["node"])
	for _, key := range sortedKeys(node) {
		v := node[key]
		switch key {
		case "type":
		case "cte_map":
			add("WITH", key, v)
		case "from_table":
			add("FROM", key, v)
		case "where_clause":
			add("WHERE", key, v)
		case "group_expressions", "group_sets", "aggregate_handling":
			add("GROUP BY", key, v)
		case "having":
			add("HAVING", key, v)
		case "qualify":
			add("QUALIFY", key, v)
		case "sample":
			add("SAMPLE", key, v)
		case "modifiers":
			mods, _ := v.([]any)
			for _, m := range mods {
				mod, _ := asObject(m)
				switch t := stringField(mod, "type"); t {
				case "ORDER_MODIFIER":
					add("ORDER BY", key, m)
				case "LIMIT_MODIFIER", "LIMIT_PERCENT_MODIFIER":
					add("LIMIT", key, m)
				case "DISTINCT_MODIFIER":
					add("DISTINCT", key, m)
				default:
					add(strings.ToLower(t), key, m)
				}
			}
		default:
			add(key, key, v)
		}
	}
	return out
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// columnList renders names as "column a" or "columns a, b and c"; a
// projection without a name is "an unnamed column".
func columnList(names []string) string {
	shown := make([]string, len(names))
	unnamed := 0
	for i, n := range names {
		shown[i] = n
		if n == "" {
			unnamed++
		}
	}
	if unnamed == len(names) {
		if unnamed == 1 {
			return "an unnamed column"
		}
		return fmt.Sprintf("%d unnamed columns", unnamed)
	}
	shown = slices.DeleteFunc(shown, func(s string) bool { return s == "" })
	head := "column "
	if len(names) > 1 {
		head = "columns "
	}
	list := shown[0]
	if len(shown) > 1 {
		list = strings.Join(shown[:len(shown)-1], ", ") + " and " + shown[len(shown)-1]
	}
	if unnamed > 0 {
		list += fmt.Sprintf(" (and %d unnamed)", unnamed)
	}
	return head + list
}

// joinReasons joins up to three reasons, then counts the rest.
func joinReasons(msgs []string) string {
	const shown = 3
	if len(msgs) <= shown {
		return strings.Join(msgs, "; ")
	}
	return strings.Join(msgs[:shown], "; ") + fmt.Sprintf("; and %d more", len(msgs)-shown)
}

func unusedIndex(items []item, used []bool, match func(item) bool) int {
	for j, it := range items {
		if !used[j] && match(it) {
			return j
		}
	}
	return -1
}

// Reads is the columns a query may read from the tables it reads, by name,
// lower-cased: every part of every column reference and every USING
// column, in any clause or subquery. It over-approximates (a name may
// belong to another table, or be a struct field); All reports that the
// query may read every column of some table (a star, a NATURAL join, a
// table with renamed columns), so any column counts as read.
type Reads struct {
	Columns []string
	All     bool
}

// Has reports whether the query may read a column named name.
func (r Reads) Has(name string) bool {
	return r.All || slices.Contains(r.Columns, strings.ToLower(name))
}

// Reads returns the columns q may read (see Reads). A Query not built by
// Parse reads everything, as far as anyone can tell.
func (q *Query) Reads() Reads {
	if q == nil || q.shape == nil {
		return Reads{All: true}
	}
	return q.shape.reads()
}

// readsCache holds a lazyShape's Reads, computed once.
type readsCache struct {
	once sync.Once
	r    Reads
}

func (l *lazyShape) reads() Reads {
	l.readsOnce.once.Do(func() {
		stmt, err := decodeStatement(l.src, l.tree)
		if err != nil {
			l.readsOnce.r = Reads{All: true} // Parse decoded the same text; cannot happen
			return
		}
		names := map[string]struct{}{}
		all := false
		collectReads(stmt, names, &all)
		cols := make([]string, 0, len(names))
		for n := range names {
			cols = append(cols, n)
		}
		slices.Sort(cols)
		l.readsOnce.r = Reads{Columns: cols, All: all}
	})
	return l.readsOnce.r
}

// collectReads walks a tree for Reads.
func collectReads(v any, names map[string]struct{}, all *bool) {
	switch x := v.(type) {
	case []any:
		for _, e := range x {
			collectReads(e, names, all)
		}
	case map[string]any:
		switch stringField(x, "class") {
		case "COLUMN_REF":
			parts, _ := x["column_names"].([]any)
			for _, p := range parts {
				if s, ok := p.(string); ok {
					names[strings.ToLower(s)] = struct{}{}
				}
			}
		case "STAR":
			*all = true
		}
		switch stringField(x, "type") {
		case "JOIN":
			if ref := stringField(x, "ref_type"); ref == "NATURAL" || ref == "POSITIONAL" {
				*all = true
			}
			using, _ := x["using_columns"].([]any)
			for _, u := range using {
				if s, ok := u.(string); ok {
					names[strings.ToLower(s)] = struct{}{}
				}
			}
		case "BASE_TABLE":
			if renamed, _ := x["column_name_alias"].([]any); len(renamed) > 0 {
				*all = true
			}
		}
		for _, child := range x {
			collectReads(child, names, all)
		}
	}
}
