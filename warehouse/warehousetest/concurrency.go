package warehousetest

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/warehouse"
)

var concurrencyScenarios = []scenario{
	{"InsertIntervalDifferentIntervals", testRaceDifferentIntervals},
	{"InsertIntervalSameInterval", testRaceSameInterval},
	{"MergeSameKeys", testRaceMerge},
	{"ReplaceSameTable", testRaceReplace},
	{"CreateSameSchema", testRaceSchema},
	{"ReplaceSameView", testRaceView},
}

// workers is how many goroutines race in each concurrency scenario.
const workers = 8

// race runs fn(i) for i in [0, n) on n goroutines released together, and
// returns their errors.
func race(n int, fn func(i int) error) []error {
	start := make(chan struct{})
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			errs[i] = fn(i)
		})
	}
	close(start)
	wg.Wait()
	return errs
}

func requireNoErrors(t *testing.T, errs []error) {
	t.Helper()
	for i, err := range errs {
		require.NoError(t, err, "worker %d", i)
	}
}

// Scenario: eight backfill workers each insert their own hour of one
// table, and each does it twice (a retry); the table ends with every row
// of every hour exactly once.
func testRaceDifferentIntervals(t *testing.T, f *fixture) {
	tbl := f.eventsTable()
	const perHour = 10
	errs := race(2*workers, func(i int) error {
		h := i % workers
		_, err := f.e.InsertInterval(f.ctx, warehouse.InsertIntervalParams{Table: tbl, TimeColumn: "ts",
			Start: ts(h, 0, 0), End: ts(h+1, 0, 0), Query: f.hourly(0, workers, perHour, "v")})
		return err
	})
	requireNoErrors(t, errs)
	require.Equal(t, int64(workers*perHour), f.count(tbl))
	dups := f.query("SELECT id, count(*) FROM " + f.q(tbl) + " GROUP BY id HAVING count(*) > 1")
	require.Empty(t, dups, "rows inserted more than once")
}

// Scenario: a scheduler run and a deploy's backfill race on the same hour
// (more workers than work). Whatever the interleaving, the hour ends with
// exactly one copy of its rows.
func testRaceSameInterval(t *testing.T, f *fixture) {
	tbl := f.eventsTable()
	const perHour = 50
	errs := race(workers, func(i int) error {
		_, err := f.e.InsertInterval(f.ctx, warehouse.InsertIntervalParams{Table: tbl, TimeColumn: "ts",
			Start: ts(3, 0, 0), End: ts(4, 0, 0), Query: f.hourly(3, 4, perHour, fmt.Sprintf("worker %d", i))})
		return err
	})
	requireNoErrors(t, errs)
	require.Equal(t, int64(perHour), f.count(tbl))
	writers := f.query("SELECT count(DISTINCT v) FROM " + f.q(tbl))
	require.Equal(t, [][]any{row(1)}, writers, "the hour mixes rows of several runs")
}

// Scenario: eight merges of overlapping keys race; each key ends with one
// row, never two.
func testRaceMerge(t *testing.T, f *fixture) {
	tbl := f.usersTable()
	errs := race(workers, func(i int) error {
		_, err := f.e.MergeByKey(f.ctx, warehouse.MergeParams{Table: tbl, Key: []string{"id"},
			Query: fmt.Sprintf(`SELECT CAST(g AS BIGINT) AS id, %s AS name, CAST(%d AS BIGINT) AS score FROM %s`,
				f.cast(fmt.Sprintf("'w%d'", i), "TEXT"), i, f.series(1, 20))})
		return err
	})
	requireNoErrors(t, errs)
	require.Equal(t, int64(20), f.count(tbl))
	dups := f.query("SELECT id, count(*) FROM " + f.q(tbl) + " GROUP BY id HAVING count(*) > 1")
	require.Empty(t, dups, "a key has more than one row")
}

// Scenario: two schedulers rebuild the same FULL model at once; both
// succeed and the table holds exactly one rebuild's rows, never a mix.
func testRaceReplace(t *testing.T, f *fixture) {
	tbl := f.fullTable()
	const swappers = 4
	errs := race(swappers, func(i int) error {
		return f.e.ReplaceTable(f.ctx, warehouse.ReplaceTableParams{Table: tbl,
			Query: f.idsAndTag(1, 100, fmt.Sprintf("w%d", i))})
	})
	requireNoErrors(t, errs)
	require.Equal(t, int64(100), f.count(tbl))
	require.Equal(t, [][]any{row(1)}, f.query("SELECT count(DISTINCT v) FROM "+f.q(tbl)))
	require.Equal(t, []string{"full"}, f.objects(f.schema), "a swap left objects behind")
}

// Scenario: eight applies create the same schema at once; all succeed.
func testRaceSchema(t *testing.T, f *fixture) {
	errs := race(workers, func(int) error { return f.e.CreateSchema(f.ctx, "contended") })
	requireNoErrors(t, errs)
	f.createAs(warehouse.Table{Schema: "contended", Name: "t"}, "SELECT 1 AS id")
}

// Scenario: eight promotions re-point the same view at once; all succeed
// and the view serves one of them.
func testRaceView(t *testing.T, f *fixture) {
	view := f.table("contended_view")
	errs := race(workers, func(i int) error {
		return f.e.CreateOrReplaceView(f.ctx, warehouse.ViewParams{View: view, Query: fmt.Sprintf("SELECT CAST(%d AS BIGINT) AS worker", i)})
	})
	requireNoErrors(t, errs)
	rows := f.query("SELECT worker FROM " + f.q(view))
	require.Len(t, rows, 1)
}
