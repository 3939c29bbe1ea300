package warehousetest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/warehouse"
)

// The janitor's contract (warehouse.GenerationDropper), on every engine:
// a retired generation's table and markers go in one transaction; the
// fence's planned and serving generations are refused (ErrFenced) and
// keep everything; a retired generation stays fenced after its markers are
// gone; a drop repeated is a no-op.
var dropGenerationScenarios = []scenario{
	{"DropsRetiredKeepsFenced", testDropGenerationKeepsFenced},
	{"BadInputWritesNothing", testDropGenerationBadInput},
}

func dropper(t *testing.T, g *ing) warehouse.GenerationDropper {
	t.Helper()
	d, ok := g.e.(warehouse.GenerationDropper)
	require.True(t, ok, "%T does not implement warehouse.GenerationDropper", g.e)
	return d
}

func (g *ing) drop(d warehouse.GenerationDropper, gen int64) (warehouse.DropGenerationResult, error) {
	g.t.Helper()
	return d.DropGeneration(g.ctx, warehouse.DropGenerationParams{Source: ingestSource, Generation: gen, Table: g.phys(gen)})
}

func (g *ing) exists(tables ...warehouse.Table) []bool {
	g.t.Helper()
	found, err := g.e.TablesExist(g.ctx, tables)
	require.NoError(g.t, err)
	return found
}

func (g *ing) markersOf(gen int64) int {
	n := 0
	for _, m := range g.state().Markers {
		if m.Generation == gen {
			n++
		}
	}
	return n
}

// Scenario: generation 1 served and took a batch; generation 2 was
// planned, wrote a chunk and was retired (3 planned); 3 built, caught up
// and swapped in. Dropping 3 (serving) is fenced and keeps its table and
// markers; dropping 2 and 1 removes their tables and markers, and the view
// still serves 3. Dropping 1 again does nothing. A late chunk of 2 is
// still fenced (no table comes back), and 3 takes its next batch in order.
// Once 4 is planned, it is refused too, and 3, still serving, as well.
func testDropGenerationKeepsFenced(t *testing.T, f *fixture) {
	g := newIng(t, f)
	d := dropper(t, g)
	g.serve(1, 2)
	require.NoError(t, g.batch(1, 1, false, g.stage(warehouse.FormatCSV, pairs(3)...)))
	g.fence(1, 2, 1)
	require.NoError(t, g.chunk(2, 0, g.stage(warehouse.FormatParquet, pairs(1, 2, 3)...)))
	g.fence(2, 3, 1)
	require.NoError(t, g.chunk(3, 0, g.stage(warehouse.FormatParquet, pairs(1, 2, 3)...)))
	require.NoError(t, g.swap(3, 1))
	require.Equal(t, []int64{1, 2, 3}, g.ids(g.view))
	before3 := g.markersOf(3)

	_, err := g.drop(d, 3)
	require.ErrorIs(t, err, warehouse.ErrFenced)
	require.Equal(t, []bool{true}, g.exists(g.phys(3)))
	require.Equal(t, before3, g.markersOf(3))

	res, err := g.drop(d, 2)
	require.NoError(t, err)
	require.True(t, res.TableDropped)
	require.Equal(t, int64(2), res.Markers, "its covered and chunk markers")
	res, err = g.drop(d, 1)
	require.NoError(t, err)
	require.True(t, res.TableDropped)
	require.Equal(t, int64(4), res.Markers, "covered, chunk, swap and batch markers")
	require.Equal(t, []bool{false, false, true}, g.exists(g.phys(1), g.phys(2), g.phys(3)))
	require.Zero(t, g.markersOf(1))
	require.Zero(t, g.markersOf(2))
	require.Equal(t, before3, g.markersOf(3))
	require.Equal(t, []int64{1, 2, 3}, g.ids(g.view))

	res, err = g.drop(d, 1)
	require.NoError(t, err)
	require.Equal(t, warehouse.DropGenerationResult{}, res, "a drop repeated is a no-op")

	require.ErrorIs(t, g.chunk(2, 0, g.stage(warehouse.FormatParquet, pairs(9)...)), warehouse.ErrFenced)
	require.Equal(t, []bool{false}, g.exists(g.phys(2)))
	require.Zero(t, g.markersOf(2))
	require.NoError(t, g.batch(3, 2, false, g.stage(warehouse.FormatCSV, pairs(4)...)))
	require.Equal(t, []int64{1, 2, 3, 4}, g.ids(g.view))

	g.fence(3, 4, 2)
	for _, gen := range []int64{3, 4} {
		_, err := g.drop(d, gen)
		require.ErrorIsf(t, err, warehouse.ErrFenced, "generation %d", gen)
	}
	require.Equal(t, []bool{true}, g.exists(g.phys(3)))
}

// Scenario: a drop that names no source or a generation below 1 is
// refused with ErrInvalidArgument, one of a table without a schema with
// ErrInvalidIdentifier, dropping nothing.
func testDropGenerationBadInput(t *testing.T, f *fixture) {
	g := newIng(t, f)
	d := dropper(t, g)
	g.serve(1)
	g.fence(1, 2, 0)
	require.NoError(t, g.chunk(2, 0, g.stage(warehouse.FormatParquet, pairs(1)...)))
	g.fence(2, 3, 0)
	for _, c := range []struct {
		p    warehouse.DropGenerationParams
		want error
	}{
		{warehouse.DropGenerationParams{Generation: 2, Table: g.phys(2)}, warehouse.ErrInvalidArgument},
		{warehouse.DropGenerationParams{Source: ingestSource, Generation: 0, Table: g.phys(2)}, warehouse.ErrInvalidArgument},
		{warehouse.DropGenerationParams{Source: ingestSource, Generation: 2, Table: warehouse.Table{Name: "events__g2"}}, warehouse.ErrInvalidIdentifier},
	} {
		_, err := d.DropGeneration(g.ctx, c.p)
		require.ErrorIsf(t, err, c.want, "%+v", c.p)
	}
	require.Equal(t, []bool{true}, g.exists(g.phys(2)))
	require.Equal(t, 2, g.markersOf(2))
}
