package postgres_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/internal/pgtest"
	"github.com/gapless-dev/gapless/warehouse"
)

func day(d int) time.Time { return time.Date(2024, 1, d, 0, 0, 0, 0, time.UTC) }

func TestInsertIntervalTimeColumnTypes(t *testing.T) {
	t.Parallel()
	newYork, err := time.LoadLocation("America/New_York")
	require.NoError(t, err)

	cases := []struct {
		name    string
		srcType string // the source query's time column type
		dstType string // the target table's time column type
		// src rows (time literal, v); v identifies a row
		src []string
		// the v values expected in [day 1, day 2) of the target
		inDay1 []int64
	}{
		{
			name: "timestamp", srcType: "timestamp", dstType: "timestamp",
			src: []string{
				"('2023-12-31 23:59:59.999999', 1)", "('2024-01-01 00:00:00', 2)", "('2024-01-01 12:00', 3)",
				"('2024-01-01 23:59:59.999999', 4)", "('2024-01-02 00:00:00', 5)",
			},
			inDay1: []int64{2, 3, 4},
		},
		{
			name: "timestamptz", srcType: "timestamptz", dstType: "timestamptz",
			src: []string{
				"('2023-12-31 23:59:59.999999+00', 1)", "('2024-01-01 00:00:00+00', 2)",
				"('2024-01-01 05:29:59+05:30', 3)",                                      // 2023-12-31 23:59:59 UTC: day 0
				"('2024-01-01 23:59:59.999999+00', 4)", "('2024-01-01 19:00:00-05', 5)", // 2024-01-02 00:00 UTC: day 2
			},
			inDay1: []int64{2, 4},
		},
		{
			name: "date", srcType: "date", dstType: "date",
			src:    []string{"('2023-12-31', 1)", "('2024-01-01', 2)", "('2024-01-02', 3)"},
			inDay1: []int64{2},
		},
		{
			// The source has more precision than the target: a row
			// belongs to the interval its stored (rounded) value falls
			// in, or re-runs would miss it or duplicate it.
			name: "timestamp(3) from timestamp(6)", srcType: "timestamp(6)", dstType: "timestamp(3)",
			src: []string{
				"('2024-01-01 00:00:00', 1)", "('2024-01-01 23:59:59.9994', 2)",
				"('2024-01-01 23:59:59.9996', 3)", // rounds to 2024-01-02 00:00:00.000
			},
			inDay1: []int64{1, 2},
		},
		{
			// timestamptz rows into a timestamp table: stored as their UTC
			// wall clock, whatever the database's default zone.
			name: "timestamp from timestamptz", srcType: "timestamptz", dstType: "timestamp",
			src: []string{
				"('2024-01-01 04:59:59-05', 1)",    // 09:59:59 UTC, day 1
				"('2024-01-01 05:00:00+05:30', 2)", // 2023-12-31 23:30 UTC: day 0
			},
			inDay1: []int64{1},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// Scenario: the database's default TimeZone is Asia/Kolkata
			// (+05:30) and the interval bounds arrive in New York time.
			// Intervals are still UTC: every source row lands in exactly
			// one daily interval, re-running a day replaces exactly that
			// day's rows, and rows at End belong to the next day.
			url := pgtestDatabaseInZone(t, "Asia/Kolkata")
			b := setupOn(t, url)
			b.exec(t, fmt.Sprintf(`CREATE TABLE s.src (ts %s, v bigint)`, tc.srcType))
			for _, r := range tc.src {
				b.exec(t, `INSERT INTO s.src VALUES `+r)
			}
			require.NoError(t, b.e.CreateTable(b.ctx, warehouse.CreateTableParams{
				Table: tbl("t"), Columns: []warehouse.Column{{Name: "ts", Type: tc.dstType}, {Name: "v", Type: "bigint"}},
			}))
			insert := func(from, to time.Time) int64 {
				n, err := b.e.InsertInterval(b.ctx, warehouse.InsertIntervalParams{
					Table: tbl("t"), TimeColumn: "ts", Start: from.In(newYork), End: to.In(newYork),
					Query: "SELECT * FROM s.src",
				})
				require.NoError(t, err)
				return n
			}
			var total int64
			for d := 0; d <= 2; d++ {
				total += insert(day(d), day(d+1))
			}
			require.EqualValues(t, len(tc.src), total, "every source row lands in exactly one day")

			// Re-run day 1 after the source changed: day 1 is replaced,
			// the other days are untouched.
			b.exec(t, `UPDATE s.src SET v = v + 100`)
			n := insert(day(1), day(2))
			require.EqualValues(t, len(tc.inDay1), n)
			n = insert(day(1), day(2))
			require.EqualValues(t, len(tc.inDay1), n, "a second re-run inserts the same rows again")

			got := ints(t, b.rows(t, `SELECT v FROM s.t WHERE v >= 100 ORDER BY v`))
			want := make([]int64, len(tc.inDay1))
			for i, v := range tc.inDay1 {
				want[i] = v + 100
			}
			require.Equal(t, want, got)
			require.EqualValues(t, len(tc.src), b.scalar(t, `SELECT count(*) FROM s.t`), "no row duplicated or lost")
			require.EqualValues(t, len(tc.src), b.scalar(t, `SELECT count(DISTINCT v % 100) FROM s.t`))
		})
	}
}

// pgtestDatabaseInZone is a fresh database whose sessions default to zone.
func pgtestDatabaseInZone(t *testing.T, zone string) string {
	t.Helper()
	url := pgtest.NewDatabase(t)
	conn, err := pgx.Connect(t.Context(), url)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	_, err = conn.Exec(t.Context(), fmt.Sprintf(`DO $$ BEGIN EXECUTE format('ALTER DATABASE %%I SET timezone = %%L', current_database(), %s); END $$`,
		"'"+zone+"'"))
	require.NoError(t, err)
	return url
}

func TestInsertIntervalReRunKeepsOneCopy(t *testing.T) {
	t.Parallel()
	// Scenario: the scheduler runs the same hourly interval twice (a retry
	// after a timeout that had in fact committed). The second run replaces
	// the first: one copy of the hour, neighbours untouched.
	b := setup(t)
	b.exec(t, `CREATE TABLE s.events AS SELECT g AS id, timestamptz '2024-01-01 00:00+00' + g * interval '1 minute' AS at
	           FROM generate_series(0, 179) g`)
	require.NoError(t, b.e.CreateTableAs(b.ctx, warehouse.CreateTableAsParams{Table: tbl("t"), Query: "SELECT * FROM s.events"}))
	require.EqualValues(t, 0, b.scalar(t, `SELECT count(*) FROM s.t`), "WITH NO DATA")
	hour := func(h int) warehouse.InsertIntervalParams {
		return warehouse.InsertIntervalParams{
			Table: tbl("t"), TimeColumn: "at", Query: "SELECT id, at FROM s.events -- a trailing comment cannot swallow the wrapping\n;\n",
			Start: day(1).Add(time.Duration(h) * time.Hour), End: day(1).Add(time.Duration(h+1) * time.Hour),
		}
	}
	for h := 0; h < 3; h++ {
		n, err := b.e.InsertInterval(b.ctx, hour(h))
		require.NoError(t, err)
		require.EqualValues(t, 60, n)
	}
	n, err := b.e.InsertInterval(b.ctx, hour(1))
	require.NoError(t, err)
	require.EqualValues(t, 60, n)
	require.EqualValues(t, 180, b.scalar(t, `SELECT count(*) FROM s.t`))
	require.EqualValues(t, 180, b.scalar(t, `SELECT count(DISTINCT id) FROM s.t`))
}

func TestInsertIntervalConcurrentRunsKeepOneCopy(t *testing.T) {
	t.Parallel()
	// Scenario: more workers than work. Eight runs of the same interval
	// race (say a scheduler and a deploy's backfill both think it is
	// theirs). Under READ COMMITTED two delete-then-insert transactions
	// would each miss the other's rows; the engine's table lock serialises
	// them, so exactly one copy remains.
	b := setup(t)
	b.exec(t, `CREATE TABLE s.src AS SELECT g AS id, timestamp '2024-01-01' + g * interval '1 second' AS at FROM generate_series(0, 999) g`)
	require.NoError(t, b.e.CreateTableAs(b.ctx, warehouse.CreateTableAsParams{Table: tbl("t"), Query: "SELECT * FROM s.src"}))
	const workers = 8
	start := make(chan struct{})
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			<-start
			_, err := b.e.InsertInterval(b.ctx, warehouse.InsertIntervalParams{
				Table: tbl("t"), TimeColumn: "at", Start: day(1), End: day(2), Query: "SELECT * FROM s.src",
			})
			errs <- err
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.EqualValues(t, 1000, b.scalar(t, `SELECT count(*) FROM s.t`))
	require.EqualValues(t, 1000, b.scalar(t, `SELECT count(DISTINCT id) FROM s.t`))
}

func TestInsertIntervalRefusals(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.exec(t, `CREATE TABLE s.t (ts timestamp, n int, v text)`)
	b.exec(t, `INSERT INTO s.t VALUES ('2024-01-01 01:00', 1, 'keep')`)
	b.exec(t, `CREATE VIEW s.v AS SELECT * FROM s.t`)
	ok := warehouse.InsertIntervalParams{Table: tbl("t"), TimeColumn: "ts", Start: day(1), End: day(2),
		Query: "SELECT ts, n, v FROM s.t"}
	cases := []struct {
		name   string
		mutate func(p *warehouse.InsertIntervalParams)
		is     error
		code   string
	}{
		{"end before start", func(p *warehouse.InsertIntervalParams) { p.End = day(0) }, warehouse.ErrInvalidArgument, ""},
		{"empty interval", func(p *warehouse.InsertIntervalParams) { p.End = p.Start }, warehouse.ErrInvalidArgument, ""},
		{"no such table", func(p *warehouse.InsertIntervalParams) { p.Table = tbl("nope") }, warehouse.ErrNotFound, ""},
		{"a view", func(p *warehouse.InsertIntervalParams) { p.Table = tbl("v") }, warehouse.ErrNotATable, ""},
		{"no such time column", func(p *warehouse.InsertIntervalParams) { p.TimeColumn = "nope" }, warehouse.ErrInvalidArgument, ""},
		{"integer time column", func(p *warehouse.InsertIntervalParams) { p.TimeColumn = "n" }, warehouse.ErrUnsupportedTimeColumn, ""},
		{"empty query", func(p *warehouse.InsertIntervalParams) { p.Query = " ;\n" }, warehouse.ErrInvalidArgument, ""},
		{"query lacks a column", func(p *warehouse.InsertIntervalParams) { p.Query = "SELECT ts, n FROM s.t" }, nil, "42703"},
		{"zero table", func(p *warehouse.InsertIntervalParams) { p.Table = warehouse.Table{} }, warehouse.ErrInvalidIdentifier, ""},
		{"two statements", func(p *warehouse.InsertIntervalParams) {
			p.Query = "SELECT ts, n, v FROM s.t) AS q; DELETE FROM s.t; SELECT * FROM (SELECT 1"
		}, nil, "42601"},
	}
	for _, tc := range cases {
		p := ok
		tc.mutate(&p)
		_, err := b.e.InsertInterval(b.ctx, p)
		requireWarehouseError(t, err, "insert interval")
		if tc.is != nil {
			require.ErrorIs(t, err, tc.is, tc.name)
		}
		if tc.code != "" {
			require.Equal(t, tc.code, pgCode(err), tc.name)
		}
	}
	require.Equal(t, [][]any{{"keep"}}, b.rows(t, `SELECT v FROM s.t`), "no refused call changed the table")
}
