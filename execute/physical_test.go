package execute

import (
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/execute/executetest"
	"github.com/gapless-dev/gapless/interval"
)

var physicalFiles = map[string]string{
	"models/totals.sql": "MODEL (name shop.totals, kind FULL, start '2024-01-01', description 'Totals', column_descriptions (n = 'how many'));\nSELECT 3 AS n\n",
	"models/latest.sql": "MODEL (name shop.latest, kind VIEW, start '2024-01-01', description 'Latest');\nSELECT n -- the count\nFROM shop.totals\n",
}

// Scenario: a description changes and nothing else (a metadata-only
// change, which rebuilds nothing): RegisterComments puts the new comments
// on the existing table, whose rows stay, and on a VIEW model's view; a
// VIEW model's view gets its comments when Prepare makes it and again
// each time it is replaced.
func TestRegisterCommentsOnAMetadataChange(t *testing.T) {
	t.Parallel()
	b := executetest.Setup(t, false, physicalFiles)
	pr := b.Load(t)
	tpls, err := Templates(b.Ctx, b.Parser, b.Engine, pr.Snapshots)
	require.NoError(t, err)
	x := &Executor{Engine: b.Engine, Store: b.Store, ProjectDir: b.Dir, Logger: slog.New(slog.DiscardHandler)}
	exec := executetest.At(2024, 1, 2, 0)
	for _, name := range []string{"shop.totals", "shop.latest"} {
		require.NoError(t, x.Prepare(b.Ctx, tpls[name], exec), name)
		_, err := x.Execute(b.Ctx, Work{Template: tpls[name], Ranges: interval.NewSet(interval.NewRange(exec.AddDate(0, 0, -1), exec)), Execution: exec, SkipCovered: true})
		require.NoError(t, err, name)
	}
	comments := func() []string {
		t.Helper()
		return b.Rows(t, "SELECT table_name, comment FROM duckdb_tables() WHERE schema_name LIKE 'gapless__shop%' UNION ALL "+
			"SELECT view_name, comment FROM duckdb_views() WHERE schema_name LIKE 'gapless__shop%' UNION ALL "+
			"SELECT table_name || '.' || column_name, comment FROM duckdb_columns() WHERE schema_name LIKE 'gapless__shop%' AND comment IS NOT NULL")
	}
	totals, latest := tpls["shop.totals"].Table.Name, tpls["shop.latest"].Table.Name
	require.ElementsMatch(t, []string{totals + " Totals", totals + ".n how many", latest + " Latest", latest + ".n the count"}, comments())

	changed := *pr.Snapshots["shop.totals"].Model
	changed.Description = "Totals, renamed"
	changed.ColumnDescriptions = nil
	s := *pr.Snapshots["shop.totals"]
	s.Model = &changed
	require.Equal(t, PhysicalTable(pr.Snapshots["shop.totals"]), PhysicalTable(&s), "a metadata change keeps the table")
	require.NoError(t, x.RegisterComments(b.Ctx, &s))
	require.ElementsMatch(t, []string{totals + " Totals, renamed", totals + ".n how many", latest + " Latest", latest + ".n the count"}, comments(),
		"the table comment is replaced; a column description dropped is not cleared")
	require.Equal(t, []string{"3"}, b.Rows(t, "SELECT n FROM "+b.Engine.QuoteTable(PhysicalTable(&s))))
}
