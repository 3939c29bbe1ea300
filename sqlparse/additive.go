package sqlparse

import (
	"strings"
)

// selectShape is what AdditiveOnly needs to know about a query whose
// top-level node is a plain SELECT. It is computed once, from the
// normalised tree (positions removed), and never modified.
type selectShape struct {
	// rest is the whole normalised statement with the top-level select
	// list removed: CTEs, FROM, WHERE, GROUP BY, HAVING, QUALIFY, ORDER BY,
	// LIMIT, DISTINCT, parameters, ... Equal rests mean equal everything
	// but the select list.
	rest string
	// items are the normalised select-list entries, aliases included.
	items []item
	// plainDistinct: SELECT DISTINCT (not DISTINCT ON). Another column
	// changes which rows are distinct.
	plainDistinct bool
	// groupAll: GROUP BY ALL. Another non-aggregate column changes the
	// grouping.
	groupAll bool
	// aggregating: the query already collapses rows (GROUP BY, HAVING, or
	// an aggregate in the select list), so another aggregate projection
	// keeps the row count.
	aggregating bool
	// positional: a GROUP BY, ORDER BY or DISTINCT ON item refers to the
	// select list by position (an integer literal) or as a whole (ORDER BY
	// ALL), so an insertion before the end would change its meaning.
	positional bool
	// refNames holds the first part, lower-cased, of every column reference
	// anywhere in the node. DuckDB resolves select-list aliases in WHERE,
	// GROUP BY, HAVING, QUALIFY, ORDER BY and later projections, so a new
	// alias with one of these names could capture an existing reference.
	refNames map[string]struct{}
	// clauses maps each clause of rest to its normalised text ("FROM",
	// "WHERE", "ORDER BY", ...), so Compare can name the clauses that
	// differ.
	clauses map[string]string
}

// item is one select-list entry.
type item struct {
	canonical string // normalised entry including its alias
	expr      string // normalised entry without its alias
	name      string // lower-cased projection name
	// passThrough: a plain column reference output under its own name, so
	// a reference to that name means the same column with or without it.
	passThrough bool
	effect      effect
}

// AdditiveOnly reports whether newQ differs from oldQ only by projections
// added to the top-level select list, which gapless, like SQLMesh,
// classifies as a non-breaking change: every existing column keeps its
// values and no row is added or removed, so downstream models need no
// backfill.
//
// The rule adopted is SQLMesh's (sqlmesh.core.model.definition
// is_breaking_change: a change is non-breaking when every edit is an
// inserted projection, at any position in the select list), narrowed to be
// sound:
//
//   - Only the top-level SELECT counts. Both queries must be plain SELECTs
//     (a top-level UNION/INTERSECT/EXCEPT is breaking), and everything but
//     the select list must be identical after normalisation: CTEs, FROM,
//     WHERE, GROUP BY, HAVING, QUALIFY, WINDOW, ORDER BY, LIMIT, DISTINCT.
//     SQLMesh also accepts projections added inside CTEs and subqueries;
//     gapless does not, because such a column can reach a DISTINCT, a
//     GROUP BY ALL or a set operation and change rows.
//   - The old select list must appear in the new one in order, every entry
//     unchanged (expression and alias). Reordering, renaming, editing or
//     removing a projection is breaking. Added projections may sit
//     anywhere, unless the query refers to the select list by position
//     (GROUP BY 1, ORDER BY 2, ORDER BY ALL, DISTINCT ON (1)); then they
//     must be appended at the end.
//   - The query must not be SELECT DISTINCT or GROUP BY ALL.
//   - An added projection must not call a set-returning function (unnest,
//     generate_series, ...) or a function DuckDB's catalog does not know,
//     outside a subquery; it may call an aggregate only when the query
//     already aggregates (GROUP BY, HAVING, or an aggregate projection).
//   - An added projection's name must not equal a name a column reference
//     in the old query starts with, unless it is that same column passed
//     through (SELECT a ... -> SELECT a, b ... WHERE b > 0 is fine; adding
//     "1 AS b" there is not).
//
// Identical queries are not additive: AdditiveOnly returns false when
// nothing was added, so callers must test for "unchanged" (equal
// Canonical) before calling it. A nil argument yields false. Whenever in
// doubt the answer is false, which the caller treats as breaking.
func AdditiveOnly(oldQ, newQ *Query) bool {
	if oldQ == nil || newQ == nil {
		return false
	}
	o, n := oldQ.shape.get(), newQ.shape.get()
	if o == nil || n == nil {
		return false
	}
	if o.rest != n.rest || len(n.items) <= len(o.items) {
		return false
	}
	if o.plainDistinct || o.groupAll {
		return false
	}
	inserted, ok := insertedItems(o.items, n.items, o.positional)
	if !ok {
		return false
	}
	for _, it := range inserted {
		if it.effect&(effectSetReturning|effectUnknown) != 0 {
			return false
		}
		if it.effect&effectAggregate != 0 && !o.aggregating {
			return false
		}
		if _, captures := o.refNames[it.name]; captures && it.name != "" && !it.passThrough {
			return false
		}
	}
	return true
}

// insertedItems returns the entries of newItems that are not matched by
// oldItems, where oldItems must be a subsequence of newItems (a prefix when
// appendOnly). The matching is greedy; with repeated entries a different
// matching could pick different positions, but the multiset of inserted
// entries is the same, and every check on them depends only on content.
func insertedItems(oldItems, newItems []item, appendOnly bool) ([]item, bool) {
	if appendOnly {
		for i := range oldItems {
			if oldItems[i].canonical != newItems[i].canonical {
				return nil, false
			}
		}
		return newItems[len(oldItems):], true
	}
	var inserted []item
	i := 0
	for _, it := range newItems {
		if i < len(oldItems) && oldItems[i].canonical == it.canonical {
			i++
			continue
		}
		inserted = append(inserted, it)
	}
	return inserted, i == len(oldItems)
}

// newSelectShape builds the shape of a normalised statement whose node is a
// SELECT_NODE.
func newSelectShape(stmt, node map[string]any, funcs funcCatalog) *selectShape {
	restStmt := withoutKey(stmt, "node")
	restStmt["node"] = withoutKey(node, "select_list")
	s := &selectShape{
		rest:     marshalCanonical(restStmt),
		groupAll: stringField(node, "aggregate_handling") == "FORCE_AGGREGATES",
		refNames: map[string]struct{}{},
		clauses:  clausesOf(restStmt),
	}
	rawItems, _ := node["select_list"].([]any)
	for _, raw := range rawItems {
		expr, _ := asObject(raw)
		it := item{
			canonical: marshalCanonical(raw),
			expr:      marshalCanonical(withoutKey(expr, "alias")),
			name:      strings.ToLower(projectionName(expr)),
			effect:    funcs.effects(raw),
		}
		if stringField(expr, "class") == "COLUMN_REF" {
			alias := stringField(expr, "alias")
			it.passThrough = alias == "" || strings.EqualFold(alias, projectionName(withoutKey(expr, "alias")))
		}
		if it.effect&effectAggregate != 0 {
			s.aggregating = true
		}
		s.items = append(s.items, it)
	}

	groups, _ := node["group_expressions"].([]any)
	if len(groups) > 0 || node["having"] != nil {
		s.aggregating = true
	}
	for _, g := range groups {
		if isPositionalItem(g) {
			s.positional = true
		}
	}
	modifiers, _ := node["modifiers"].([]any)
	for _, m := range modifiers {
		mod, _ := asObject(m)
		switch stringField(mod, "type") {
		case "DISTINCT_MODIFIER":
			targets, _ := mod["distinct_on_targets"].([]any)
			if len(targets) == 0 {
				s.plainDistinct = true
			}
			for _, t := range targets {
				if isPositionalItem(t) {
					s.positional = true
				}
			}
		case "ORDER_MODIFIER":
			orders, _ := mod["orders"].([]any)
			for _, o := range orders {
				order, _ := asObject(o)
				if isPositionalItem(order["expression"]) {
					s.positional = true
				}
			}
		}
	}
	collectRefNames(node, s.refNames)
	return s
}

// isPositionalItem reports whether a GROUP BY / ORDER BY / DISTINCT ON item
// refers to the select list by position (an integer literal) or as a whole
// (ALL, which DuckDB parses as a star).
func isPositionalItem(v any) bool {
	expr, ok := asObject(v)
	if !ok {
		return false
	}
	switch stringField(expr, "class") {
	case "STAR":
		return true
	case "CONSTANT":
		value, _ := asObject(expr["value"])
		typ, _ := asObject(value["type"])
		switch stringField(typ, "id") {
		case "TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT",
			"UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT", "UHUGEINT":
			return true
		}
	}
	return false
}

// collectRefNames adds the lower-cased first part of every column
// reference under v, subqueries included, to names.
func collectRefNames(v any, names map[string]struct{}) {
	switch x := v.(type) {
	case []any:
		for _, e := range x {
			collectRefNames(e, names)
		}
	case map[string]any:
		if stringField(x, "class") == "COLUMN_REF" {
			if parts, ok := x["column_names"].([]any); ok && len(parts) > 0 {
				if first, ok := parts[0].(string); ok {
					names[strings.ToLower(first)] = struct{}{}
				}
			}
		}
		for _, child := range x {
			collectRefNames(child, names)
		}
	}
}
