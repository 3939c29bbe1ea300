package sqlparse

import (
	"cmp"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
)

// This file walks DuckDB's JSON parse tree. The walk is generic: it visits
// every object and array in the document, so a table reference is found
// wherever DuckDB puts it (FROM, joins, subqueries in any clause, IN and
// EXISTS, scalar subqueries, LATERAL, PIVOT sources, table-function
// arguments, ...) without this package having to know each node's layout.
// Only three kinds of object get special treatment:
//
//   - a query node (an object without "class" that has "cte_map"), whose
//     CTE names are brought into scope for the parts of the node they govern;
//   - a BASE_TABLE table reference, which is recorded unless a CTE in scope
//     or a macro placeholder explains it;
//   - a TABLE_FUNCTION table reference, whose function name is recorded
//     before its arguments are walked like everything else.
//
// Expressions always carry "class" and table references never do, which is
// how the two are told apart.

// noLocation is the value DuckDB writes for "no source position"
// (optional_idx's invalid value, 2^64-1).
const noLocation = "18446744073709551615"

// scope is an immutable linked list of CTE names (lower-cased) visible at a
// point of the tree. nil is the empty scope.
type scope struct {
	name   string
	parent *scope
}

func (s *scope) with(name string) *scope { return &scope{name: name, parent: s} }

func (s *scope) has(name string) bool {
	for ; s != nil; s = s.parent {
		if s.name == name {
			return true
		}
	}
	return false
}

// refWalker collects references from one statement. Maps are keyed by the
// lower-cased identity; the value keeps the smallest offset seen.
type refWalker struct {
	src    string
	tables map[TableRef]int // key has Offset 0
	// occurrences is every reference to a base table, with its offset.
	occurrences []TableRef
	funcs       map[string]int
	files       map[string]int
}

func newRefWalker(src string) *refWalker {
	return &refWalker{
		src:    src,
		tables: map[TableRef]int{},
		funcs:  map[string]int{},
		files:  map[string]int{},
	}
}

// walk visits v with the CTE names in sc visible.
func (w *refWalker) walk(v any, sc *scope) {
	switch x := v.(type) {
	case []any:
		for _, e := range x {
			w.walk(e, sc)
		}
	case map[string]any:
		if _, isExpr := x["class"]; !isExpr {
			if _, isQuery := x["cte_map"]; isQuery {
				w.queryNode(x, sc)
				return
			}
			switch stringField(x, "type") {
			case "BASE_TABLE":
				w.baseTable(x, sc)
			case "TABLE_FUNCTION":
				w.tableFunction(x)
			}
		}
		for _, child := range x {
			w.walk(child, sc)
		}
	}
}

// queryNode walks a query node (SELECT_NODE, SET_OPERATION_NODE,
// RECURSIVE_CTE_NODE, ...) with scoping: CTE i sees the CTEs declared
// before it; the rest of the node sees all of them. A recursive CTE's body
// is a RECURSIVE_CTE_NODE naming itself in cte_name, which is in scope for
// that node's children.
func (w *refWalker) queryNode(node map[string]any, sc *scope) {
	inner := sc
	if cteMap, ok := asObject(node["cte_map"]); ok {
		entries, _ := cteMap["map"].([]any)
		for _, e := range entries {
			entry, ok := asObject(e)
			if !ok {
				w.walk(e, inner)
				continue
			}
			w.walk(entry["value"], inner)
			if key := stringField(entry, "key"); key != "" {
				inner = inner.with(strings.ToLower(key))
			}
		}
	}
	if stringField(node, "type") == "RECURSIVE_CTE_NODE" {
		if name := stringField(node, "cte_name"); name != "" {
			inner = inner.with(strings.ToLower(name))
		}
	}
	for key, child := range node {
		if key != "cte_map" {
			w.walk(child, inner)
		}
	}
}

func (w *refWalker) baseTable(ref map[string]any, sc *scope) {
	name := stringField(ref, "table_name")
	offset := w.location(ref)
	// A string literal in FROM is a replacement scan of a file; the parse
	// tree cannot tell it from a quoted identifier, the source text can.
	if offset >= 0 && w.src[offset] == '\'' {
		keepMin(w.files, name, offset)
		return
	}
	key := TableRef{
		Catalog: strings.ToLower(stringField(ref, "catalog_name")),
		Schema:  strings.ToLower(stringField(ref, "schema_name")),
		Name:    strings.ToLower(name),
	}
	if key.Name == "" || strings.HasPrefix(key.Name, PlaceholderPrefix) {
		return
	}
	if key.Catalog == "" && key.Schema == "" && sc.has(key.Name) {
		return // a CTE in scope, not a table
	}
	keepMin(w.tables, key, offset)
	occ := key
	occ.Offset = offset
	w.occurrences = append(w.occurrences, occ)
}

func (w *refWalker) tableFunction(ref map[string]any) {
	fn, ok := asObject(ref["function"])
	if !ok {
		return
	}
	name := strings.ToLower(stringField(fn, "function_name"))
	if name == "" {
		return
	}
	if schema := strings.ToLower(stringField(fn, "schema")); schema != "" {
		name = schema + "." + name
	}
	keepMin(w.funcs, name, w.location(ref))
}

// location returns the node's query_location when it is a valid byte
// offset into the source, else -1.
func (w *refWalker) location(node map[string]any) int {
	num, ok := node["query_location"].(json.Number)
	if !ok || string(num) == noLocation {
		return -1
	}
	n, err := strconv.Atoi(string(num))
	if err != nil || n < 0 || n >= len(w.src) {
		return -1
	}
	return n
}

// keepMin records offset for key, keeping the smallest known offset; -1
// (unknown) loses to any known offset.
func keepMin[K comparable](m map[K]int, key K, offset int) {
	old, seen := m[key]
	if !seen || old < 0 || (offset >= 0 && offset < old) {
		m[key] = offset
	}
}

func (w *refWalker) sortedTables() []TableRef {
	out := make([]TableRef, 0, len(w.tables))
	for t, off := range w.tables {
		t.Offset = off
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b TableRef) int {
		return cmp.Or(cmp.Compare(a.Catalog, b.Catalog), cmp.Compare(a.Schema, b.Schema), cmp.Compare(a.Name, b.Name))
	})
	return out
}

func (w *refWalker) sortedFunctions() []FunctionRef {
	out := make([]FunctionRef, 0, len(w.funcs))
	for name, off := range w.funcs {
		out = append(out, FunctionRef{Name: name, Offset: off})
	}
	slices.SortFunc(out, func(a, b FunctionRef) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

func (w *refWalker) sortedFiles() []FileRef {
	out := make([]FileRef, 0, len(w.files))
	for path, off := range w.files {
		out = append(out, FileRef{Path: path, Offset: off})
	}
	slices.SortFunc(out, func(a, b FileRef) int { return cmp.Compare(a.Path, b.Path) })
	return out
}

// normalise returns a deep copy of v without source positions, so that two
// trees compare equal iff they differ at most in layout, comments and
// keyword case. The input is not modified.
func normalise(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, child := range x {
			if k == "query_location" {
				continue
			}
			out[k] = normalise(child)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, child := range x {
			out[i] = normalise(child)
		}
		return out
	default:
		return v
	}
}

// marshalCanonical renders a decoded tree as JSON. encoding/json sorts map
// keys, so the text is deterministic; json.Number keeps literals as DuckDB
// wrote them. Decoded trees hold only strings, numbers, booleans, nil, maps
// and slices, which always marshal; an error therefore cannot happen, and
// the fallback text still differs from every valid rendering.
func marshalCanonical(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return "!unmarshalable:" + err.Error()
	}
	return string(b)
}

// withoutKey returns a shallow copy of m without key.
func withoutKey(m map[string]any, key string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		if k != key {
			out[k] = v
		}
	}
	return out
}

func asObject(v any) (map[string]any, bool) {
	m, ok := v.(map[string]any)
	return m, ok
}

// stringField returns m[key] if it is a string, else "". A nil map is fine.
func stringField(m map[string]any, key string) string {
	s, _ := m[key].(string)
	return s
}

func (w *refWalker) sortedOccurrences() []TableRef {
	out := slices.Clone(w.occurrences)
	slices.SortStableFunc(out, func(a, b TableRef) int { return cmp.Compare(a.Offset, b.Offset) })
	return slices.CompactFunc(out, func(a, b TableRef) bool { return a == b })
}
