package sqlparse

import (
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestByteOffset(t *testing.T) {
	t.Parallel()
	src := "aé€😀b"
	require.Equal(t, 0, byteOffset(src, 0))
	require.Equal(t, 1, byteOffset(src, 1))  // é
	require.Equal(t, 3, byteOffset(src, 2))  // €
	require.Equal(t, 6, byteOffset(src, 3))  // 😀
	require.Equal(t, 10, byteOffset(src, 4)) // b
	require.Equal(t, len(src), byteOffset(src, 5))
	require.Equal(t, -1, byteOffset(src, 6))
	require.Equal(t, -1, byteOffset(src, -1))
	require.Equal(t, 0, byteOffset("", 0))
}

// Scenario: DuckDB's error documents and trees are read defensively; a
// shape this package does not expect is an error, never a panic.
func TestDecodeStatementShapes(t *testing.T) {
	t.Parallel()
	cases := map[string]error{
		`not json`:                             ErrUnsupported,
		`{"error":false}`:                      ErrUnsupported,
		`{"error":false,"statements":[1]}`:     ErrUnsupported,
		`{"error":false,"statements":[]}`:      ErrEmpty,
		`{"error":false,"statements":[{},{}]}`: ErrMultipleStatements,
		`{"error":true,"error_type":"not implemented","error_message":"x"}`: ErrNotAQuery,
	}
	for doc, want := range cases {
		_, err := decodeStatement("SELECT 1", doc)
		require.ErrorIs(t, err, want, doc)
	}

	_, err := decodeStatement("SELECT 1", `{"error":true,"error_type":"parser","error_message":"boom"}`)
	var syn *SyntaxError
	require.ErrorAs(t, err, &syn)
	require.Equal(t, -1, syn.Offset, "no position reported")

	_, err = decodeStatement("SELECT 1", `{"error":true,"error_type":"parser","error_message":"boom","position":"99"}`)
	require.ErrorAs(t, err, &syn)
	require.Equal(t, -1, syn.Offset, "position outside the input")
}

// Scenario: a statement whose node is missing or odd must not panic the
// walker or the shape builder.
func TestWalkOddShapes(t *testing.T) {
	t.Parallel()
	w := newRefWalker("x")
	w.walk(map[string]any{
		"cte_map":    map[string]any{"map": []any{1, map[string]any{"key": 2}}},
		"type":       "RECURSIVE_CTE_NODE",
		"from_table": map[string]any{"type": "BASE_TABLE", "table_name": 7, "query_location": "1"},
		"other":      map[string]any{"type": "TABLE_FUNCTION", "function": "nope"},
	}, nil)
	require.Empty(t, w.sortedTables())
	require.Empty(t, w.sortedFunctions())

	s := newSelectShape(map[string]any{}, map[string]any{"select_list": []any{1, nil}, "modifiers": []any{"x"}}, funcCatalog{})
	require.Len(t, s.items, 2)
	require.Nil(t, leftmostSelect(map[string]any{"type": "SET_OPERATION_NODE"}))
}

func TestFuncCatalog(t *testing.T) {
	t.Parallel()
	p, err := Open()
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Close()) })
	for name, want := range map[string]funcKind{
		"lower":                     kindScalar,
		"date_trunc":                kindScalar,
		"sum":                       kindAggregate,
		"count_star":                kindAggregate,
		"string_agg":                kindAggregate,
		"json_group_array":          kindAggregate, // a macro over string_agg
		"unnest":                    kindSetReturning,
		"generate_series":           kindSetReturning, // scalar in DuckDB, set-returning in PostgreSQL
		"nullif":                    kindScalar,       // a macro over CASE
		"definitely_not_a_function": kindUnknown,
	} {
		require.Equal(t, want, p.funcs[name], name)
	}
}

// Scenario: DuckDB accepts a query but cannot render its tree back to SQL;
// the canonical form falls back to the normalised tree, deterministically.
func TestRenderCanonicalFallback(t *testing.T) {
	t.Parallel()
	p, err := Open()
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Close()) })
	ctx := t.Context()

	tree := `{"error":false,"statements":[{"node":{"type":"NOT_A_NODE","query_location":3,"x":[1,{"b":2,"a":1}]}}]}`
	stmt, err := decodeStatement("SELECT 1", tree)
	require.NoError(t, err)
	first, err := p.renderCanonical(ctx, tree, stmt)
	require.NoError(t, err)
	require.Equal(t, `ast:{"node":{"type":"NOT_A_NODE","x":[1,{"a":1,"b":2}]}}`, first)

	// The same tree rendered through the normal path.
	q, err := p.Parse(ctx, "SELECT a FROM t")
	require.NoError(t, err)
	stmt, err = decodeStatement("", q.shape.tree)
	require.NoError(t, err)
	canon, err := p.renderCanonical(ctx, q.shape.tree, stmt)
	require.NoError(t, err)
	require.Equal(t, q.Canonical, canon)
}

// The function catalog is read once per process: a second Parser shares
// the first one's (the same map), and it knows the built-ins.
func TestOpenSharesTheFunctionCatalog(t *testing.T) {
	t.Parallel()
	a, err := Open()
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, a.Close()) })
	b, err := Open()
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	require.Equal(t, reflect.ValueOf(a.funcs).UnsafePointer(), reflect.ValueOf(b.funcs).UnsafePointer())
	require.Equal(t, kindAggregate, a.funcs["sum"])
	require.Equal(t, kindSetReturning, a.funcs["unnest"])
}
