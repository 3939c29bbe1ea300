package warehousetest

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/warehouse"
)

// viewBatchScenarios cover CreateOrReplaceViews: a promotion repoints an
// environment's views. Every engine checks a whole batch before changing
// anything, so a batch that fails a check (a bad query, a table's name, an
// invalid name, a view named twice, a smuggled statement) changes nothing,
// and a batch that succeeds leaves every view new, replaced in the order
// given: those scenarios hold everywhere. What a concurrent reader sees
// depends on the declaration: with Capabilities.AtomicViews both views of
// a batch change together (ReadersNeverSeeAMix); without it the views
// change one at a time in order, so a reader sees a prefix of the batch
// new and never a missing view (ReadersSeeAPrefix).
//
// A replace that fails after the checks passed (the warehouse goes away
// mid-batch) cannot be induced through warehouse.Engine; each engine
// without AtomicViews tests its *warehouse.PartialViewsError with a hook
// of its own.
func viewBatchScenarios(declared warehouse.Capabilities) []scenario {
	readers := scenario{"ReadersNeverSeeAMix", testViewsNoMix}
	if !declared.AtomicViews {
		readers = scenario{"ReadersSeeAPrefix", testViewsPrefix}
	}
	return []scenario{
		{"AllOrNothing", testViewsAllOrNothing},
		{"RefusedNameChangesNothing", testViewsRefusedName},
		{"SmuggledStatementRunsNothing", testViewsSmuggled},
		{"ManyViewsAllServed", testViewsMany},
		{"EmptyBatchIsNoOp", testViewsEmpty},
		readers,
	}
}

// gen is the query of a one-row view serving generation g.
func gen(g int) string { return fmt.Sprintf("SELECT CAST(%d AS BIGINT) AS gen", g) }

// promoteGenerations repoints views to generations 1..n (gen), one batch
// per generation, while readers run; then it stops them (closing done and
// waiting for wg), also when a batch fails, which fails t.
func promoteGenerations(t *testing.T, f *fixture, n int, done chan struct{}, wg *sync.WaitGroup, views ...warehouse.Table) {
	t.Helper()
	stop := func() {
		close(done)
		wg.Wait()
	}
	for g := 1; g <= n; g++ {
		batch := make([]warehouse.ViewParams, len(views))
		for i, v := range views {
			batch[i] = warehouse.ViewParams{View: v, Query: gen(g)}
		}
		if err := f.e.CreateOrReplaceViews(f.ctx, batch); err != nil {
			stop()
			require.NoError(t, err, "generation %d", g)
		}
	}
	stop()
}

// Scenario: a promotion repoints three views (one of which also changes
// its columns, and one of which is new) and the last view's query names a
// column that does not exist. The promotion fails naming that view and its
// SQL, and every view still serves its old definition: none was repointed,
// the new one was not created (in one transaction, or because the batch
// is checked before any view changes).
func testViewsAllOrNothing(t *testing.T, f *fixture) {
	old1, old2 := f.table("t__v1"), f.table("t__v2")
	f.createAs(old1, "SELECT CAST(1 AS BIGINT) AS id")
	f.createAs(old2, "SELECT CAST(2 AS BIGINT) AS id")
	new1 := f.table("t__v1_next")
	f.createAs(new1, "SELECT CAST(10 AS BIGINT) AS id")
	a, b, c, fresh := f.table("a"), f.table("b"), f.table("c"), f.table("fresh")
	require.NoError(t, f.e.CreateOrReplaceViews(f.ctx, []warehouse.ViewParams{
		{View: a, Query: "SELECT id FROM " + f.q(old1)},
		{View: b, Query: "SELECT id FROM " + f.q(old2)},
		{View: c, Query: "SELECT id FROM " + f.q(old1)},
	}))

	err := f.e.CreateOrReplaceViews(f.ctx, []warehouse.ViewParams{
		{View: a, Query: "SELECT id FROM " + f.q(new1)},
		{View: b, Query: "SELECT id, " + f.cast("'wider'", "TEXT") + " AS label FROM " + f.q(new1)},
		{View: fresh, Query: "SELECT id FROM " + f.q(new1)},
		{View: c, Query: "SELECT id, no_such_column FROM " + f.q(new1)},
	})
	we := requireEngineError(t, err, c)
	require.Contains(t, we.SQL, "no_such_column", "Error.SQL is not the failing statement")

	require.Equal(t, [][]any{row(1)}, f.rowsOf(a, "id", "id"), "an earlier view of the failed batch was repointed")
	require.Equal(t, [][]any{row(2)}, f.rowsOf(b, "*", "id"), "an earlier view of the failed batch changed its columns")
	require.Equal(t, [][]any{row(1)}, f.rowsOf(c, "id", "id"))
	ok, err := f.e.TableExists(f.ctx, fresh)
	require.NoError(t, err)
	require.False(t, ok, "a view created by the failed batch exists")
}

// Scenario: a batch holds a view whose name is a physical table's (a
// mix-up of names), after a valid one, or a name that can never be valid,
// or the same view twice. Each batch fails naming the offending view, the
// table keeps its rows, and the valid view keeps its old definition.
func testViewsRefusedName(t *testing.T, f *fixture) {
	tbl := f.table("solid")
	f.createAs(tbl, "SELECT CAST(1 AS BIGINT) AS gen")
	view := f.table("served")
	require.NoError(t, f.e.CreateOrReplaceView(f.ctx, warehouse.ViewParams{View: view, Query: gen(1)}))

	err := f.e.CreateOrReplaceViews(f.ctx, []warehouse.ViewParams{{View: view, Query: gen(2)}, {View: tbl, Query: gen(2)}})
	requireEngineError(t, err, tbl)
	bad := f.table("bad\x00name")
	err = f.e.CreateOrReplaceViews(f.ctx, []warehouse.ViewParams{{View: view, Query: gen(2)}, {View: bad, Query: gen(2)}})
	requireFails(t, err)
	err = f.e.CreateOrReplaceViews(f.ctx, []warehouse.ViewParams{{View: view, Query: gen(2)}, {View: view, Query: gen(3)}})
	requireEngineError(t, err, view)

	require.Equal(t, [][]any{row(1)}, f.rowsOf(tbl, "gen", "gen"))
	require.Equal(t, [][]any{row(1)}, f.rowsOf(view, "gen", "gen"))
}

// Scenario: the last model query of a promotion closes the subquery the
// engine wraps it in and starts a statement of its own. The batch fails
// naming that view, nothing of it runs: the canary survives and the valid
// view before it keeps its old definition.
func testViewsSmuggled(t *testing.T, f *fixture) {
	c := f.canary()
	view, other := f.table("kept"), f.table("smuggler")
	require.NoError(t, f.e.CreateOrReplaceView(f.ctx, warehouse.ViewParams{View: view, Query: gen(1)}))
	for _, q := range []string{
		`SELECT 1 AS id; DROP TABLE "canary"."x"`,
		`SELECT 1 AS id) AS q; DROP TABLE "canary"."x"; SELECT * FROM (SELECT 1`,
	} {
		err := f.e.CreateOrReplaceViews(f.ctx, []warehouse.ViewParams{{View: view, Query: gen(2)}, {View: other, Query: q}})
		requireEngineError(t, err, other)
	}
	f.requireCanary(c)
	require.Equal(t, [][]any{row(1)}, f.rowsOf(view, "gen", "gen"))
	ok, err := f.e.TableExists(f.ctx, other)
	require.NoError(t, err)
	require.False(t, ok)
}

// Scenario: an environment of 200 models is promoted in one batch (the
// later half reading views created earlier in the same batch), then
// promoted again with some views changing their columns and views later in
// the batch reading the new columns (which exist only if the views are
// replaced in the order given). Every view serves its new definition after
// each batch. (An engine that replaces views one statement at a time gets
// 60 views: the count tests no limit of its own, and costs a statement
// each.)
func testViewsMany(t *testing.T, f *fixture) {
	n := 200
	if !f.caps.AtomicViews {
		n = 60
	}
	half := n / 2
	name := func(i int) warehouse.Table { return f.table(fmt.Sprintf("m%03d", i)) }
	batch := func(g int) []warehouse.ViewParams {
		views := make([]warehouse.ViewParams, n)
		for i := range n {
			q := fmt.Sprintf("SELECT CAST(%d AS BIGINT) AS id, CAST(%d AS BIGINT) AS gen", i, g)
			switch {
			case g > 1 && i < half && i%25 == 7:
				q = fmt.Sprintf("SELECT CAST(%d AS BIGINT) AS id, %s AS gen, %s AS extra", i, f.cast(fmt.Sprint(g), "TEXT"), f.cast("'x'", "TEXT"))
			case g > 1 && i >= half && (i-half)%25 == 7:
				q = "SELECT id + " + fmt.Sprint(half) + " AS id, gen, extra FROM " + f.q(name(i-half))
			case i >= half:
				q = "SELECT id + " + fmt.Sprint(half) + " AS id, gen FROM " + f.q(name(i-half))
			}
			views[i] = warehouse.ViewParams{View: name(i), Query: q}
		}
		return views
	}
	served := func() [][]any {
		parts := make([]string, n)
		for i := range n {
			parts[i] = "SELECT id, " + f.cast("gen", "TEXT") + " AS gen FROM " + f.q(name(i))
		}
		return f.query("SELECT id, gen FROM (" + strings.Join(parts, " UNION ALL ") + ") AS u ORDER BY id")
	}
	want := func(g int) [][]any {
		out := make([][]any, n)
		for i := range n {
			out[i] = row(i, fmt.Sprint(g))
		}
		return out
	}

	require.NoError(t, f.e.CreateOrReplaceViews(f.ctx, batch(1)))
	require.Equal(t, want(1), served())
	require.NoError(t, f.e.CreateOrReplaceViews(f.ctx, batch(2)))
	require.Equal(t, want(2), served())
	for _, i := range []int{7, half + 7} {
		cols, err := f.e.Columns(f.ctx, name(i))
		require.NoError(t, err)
		require.Len(t, cols, 3, "view %d: a view whose columns changed in the batch kept its old ones", i)
	}
}

// Scenario: a promotion whose views all already point at the right tables
// repoints nothing; an empty batch succeeds and changes nothing.
func testViewsEmpty(t *testing.T, f *fixture) {
	before := f.objects(f.schema)
	require.NoError(t, f.e.CreateOrReplaceViews(f.ctx, nil))
	require.NoError(t, f.e.CreateOrReplaceViews(f.ctx, []warehouse.ViewParams{}))
	require.Equal(t, before, f.objects(f.schema))
}

// Scenario: a dashboard joins two views of one environment while
// promotions repoint both of them together, generation after generation.
// Every read sees both views at the same generation, never one old and one
// new, and generations never go backwards; once the promotions are done,
// both serve the last one. (The reader's joins race the promotions; the
// assertion holds under every interleaving, and fails for an engine that
// commits the views one by one as soon as a read lands between two
// commits.)
func testViewsNoMix(t *testing.T, f *fixture) {
	a, b := f.table("left_view"), f.table("right_view")
	require.NoError(t, f.e.CreateOrReplaceViews(f.ctx, []warehouse.ViewParams{{View: a, Query: gen(0)}, {View: b, Query: gen(0)}}))
	join := "SELECT x.gen, y.gen FROM " + f.q(a) + " AS x CROSS JOIN " + f.q(b) + " AS y"

	const generations = 25
	done := make(chan struct{})
	var (
		wg      sync.WaitGroup
		reads   int
		readErr error
	)
	wg.Go(func() {
		last := int64(-1)
		for {
			select {
			case <-done:
				return
			default:
			}
			res, err := f.e.Query(f.ctx, join)
			if err != nil {
				readErr = fmt.Errorf("read %d: %w", reads, err)
				return
			}
			rows := NormalizeRows(res.Rows)
			if len(rows) != 1 {
				readErr = fmt.Errorf("read %d: %d rows, want 1", reads, len(rows))
				return
			}
			x, y := rows[0][0].(int64), rows[0][1].(int64)
			if x != y {
				readErr = fmt.Errorf("read %d saw a mix: left view at generation %d, right view at %d", reads, x, y)
				return
			}
			if x < last {
				readErr = fmt.Errorf("read %d went back from generation %d to %d", reads, last, x)
				return
			}
			last = x
			reads++
		}
	})
	promoteGenerations(t, f, generations, done, &wg, a, b)
	require.NoError(t, readErr)
	require.Equal(t, [][]any{row(generations, generations)}, f.query(join))
}

// Scenario: on an engine that repoints views one at a time (no
// Capabilities.AtomicViews), a dashboard reads two views of one
// environment while promotions repoint both, generation after generation,
// the left view first. The engine replaces them in the order given, each
// replace atomic, so at every instant the left view is at least as new as
// the right one. The reader reads the right view first and then the left
// one, so it sees a prefix of each batch new: the left view never older
// than the right one. No read fails (a view is never missing), no view's
// generation goes backwards, and once the promotions are done both serve
// the last one. (The reads race the promotions; the assertion holds under
// every interleaving, and fails for an engine that replaces the views in
// another order, or drops one before re-creating it, as soon as a read
// lands between the two.)
func testViewsPrefix(t *testing.T, f *fixture) {
	left, right := f.table("left_view"), f.table("right_view")
	require.NoError(t, f.e.CreateOrReplaceViews(f.ctx, []warehouse.ViewParams{{View: left, Query: gen(0)}, {View: right, Query: gen(0)}}))
	read := func(v warehouse.Table) (int64, error) {
		res, err := f.e.Query(f.ctx, "SELECT gen FROM "+f.q(v))
		if err != nil {
			return 0, err
		}
		rows := NormalizeRows(res.Rows)
		if len(rows) != 1 {
			return 0, fmt.Errorf("%s: %d rows, want 1", v, len(rows))
		}
		g, ok := rows[0][0].(int64)
		if !ok {
			return 0, fmt.Errorf("%s: gen is %T", v, rows[0][0])
		}
		return g, nil
	}

	const generations = 10
	done := make(chan struct{})
	var (
		wg      sync.WaitGroup
		reads   int
		readErr error
	)
	wg.Go(func() {
		lastLeft, lastRight := int64(-1), int64(-1)
		for {
			select {
			case <-done:
				return
			default:
			}
			r, err := read(right)
			if err != nil {
				readErr = fmt.Errorf("read %d of the right view: %w", reads, err)
				return
			}
			l, err := read(left)
			if err != nil {
				readErr = fmt.Errorf("read %d of the left view: %w", reads, err)
				return
			}
			if l < r {
				readErr = fmt.Errorf("read %d saw the right view at generation %d and then the left one at %d: not a prefix of the batch", reads, r, l)
				return
			}
			if l < lastLeft || r < lastRight {
				readErr = fmt.Errorf("read %d went back from generations (%d, %d) to (%d, %d)", reads, lastLeft, lastRight, l, r)
				return
			}
			lastLeft, lastRight = l, r
			reads++
		}
	})
	promoteGenerations(t, f, generations, done, &wg, left, right)
	require.NoError(t, readErr)
	for _, v := range []warehouse.Table{left, right} {
		g, err := read(v)
		require.NoError(t, err)
		require.Equal(t, int64(generations), g, "%s after the last promotion", v)
	}
}
