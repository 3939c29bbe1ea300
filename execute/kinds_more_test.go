package execute

import (
	"log/slog"
	"testing"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/execute/executetest"
	"github.com/gapless-dev/gapless/warehouse"
)

// moreKindFiles is kindFiles's two sources with the models the tests of
// this file run: SCD type 2 by column with updated_at_name, both SCD type 2
// kinds with a TIMESTAMPTZ time type, SCD type 2 by time over a source with
// duplicate keys, and INCREMENTAL_UNMANAGED overwriting by partition.
var moreKindFiles = func() map[string]string {
	files := map[string]string{
		"models/by_column_upd.sql": "MODEL (name hist.by_column_upd, kind SCD_TYPE_2_BY_COLUMN (unique_key id, columns [name], updated_at_name updated_at, invalidate_hard_deletes true), cron '@daily');\n" +
			"SELECT id, name, updated_at FROM raw.customers;\n",
		"models/tz_time.sql": "MODEL (name hist.tz_time, kind SCD_TYPE_2_BY_TIME (unique_key id, invalidate_hard_deletes true, time_data_type TIMESTAMPTZ), cron '@daily');\n" +
			"SELECT id, name, updated_at FROM raw.customers;\n",
		"models/tz_column.sql": "MODEL (name hist.tz_column, kind SCD_TYPE_2_BY_COLUMN (unique_key id, columns [name], invalidate_hard_deletes true, time_data_type TIMESTAMPTZ), cron '@daily');\n" +
			"SELECT id, name, updated_at FROM raw.customers;\n",
		"models/dups.sql": "MODEL (name hist.dups, kind SCD_TYPE_2_BY_TIME (unique_key id, invalidate_hard_deletes true), cron '@daily');\n" +
			"SELECT id, name, updated_at FROM raw.customers;\n",
		"models/overwrite_parts.sql": "MODEL (name sales.overwrite_parts, kind INCREMENTAL_UNMANAGED (insert_overwrite true), partitioned_by region, cron '@daily');\n" +
			"SELECT region, id, amount FROM raw.sales;\n",
	}
	for _, f := range []string{"gapless.yaml", "models/raw_customers.sql", "models/raw_sales.sql"} {
		files[f] = kindFiles[f]
	}
	return files
}()

// newMoreKindRig is newKindRig over moreKindFiles, preparing only the
// models named.
func newMoreKindRig(t *testing.T, b *executetest.Bundle, names ...string) *kindRig {
	t.Helper()
	for _, tbl := range []warehouse.CreateTableParams{
		{Table: warehouse.Table{Schema: "raw", Name: "customers"}, Columns: []warehouse.Column{{Name: "id", Type: "INTEGER"}, {Name: "name", Type: "VARCHAR"}, {Name: "updated_at", Type: "TIMESTAMP"}}},
		{Table: warehouse.Table{Schema: "raw", Name: "sales"}, Columns: []warehouse.Column{{Name: "region", Type: "VARCHAR"}, {Name: "id", Type: "INTEGER"}, {Name: "amount", Type: "INTEGER"}}},
	} {
		require.NoError(t, b.Engine.CreateSchema(b.Ctx, tbl.Table.Schema))
		require.NoError(t, b.Engine.CreateTable(b.Ctx, tbl))
	}
	pr := b.Load(t)
	tpls, err := Templates(b.Ctx, b.Parser, b.Engine, pr.Snapshots)
	require.NoError(t, err)
	x := &Executor{Engine: b.Engine, Store: b.Store, ProjectDir: b.Dir, Logger: slog.New(slog.DiscardHandler)}
	for _, name := range names {
		require.Contains(t, tpls, name)
		require.NoError(t, x.Prepare(b.Ctx, tpls[name], executetest.At(2024, 1, 2, 0)), name)
	}
	return &kindRig{b: b, x: x, tpls: tpls}
}

func moreKindBackends(t *testing.T) []*executetest.Bundle {
	return []*executetest.Bundle{executetest.Setup(t, false, moreKindFiles), executetest.SetupPostgres(t, false, moreKindFiles)}
}

// fullHistory is an SCD type 2 table's rows as "id name updated_at
// valid_from valid_to", the history columns read in UTC (they may carry a
// time zone), an open row's valid_to shown as "open", sorted.
func (r *kindRig) fullHistory(t *testing.T, name string, tz bool) []string {
	t.Helper()
	utc := func(c string) string {
		if tz {
			return "CAST(" + c + " AT TIME ZONE 'UTC' AS VARCHAR)"
		}
		return "CAST(" + c + " AS VARCHAR)"
	}
	return r.rows(t, name, "id, name, CAST(updated_at AS VARCHAR), "+utc("valid_from")+", COALESCE("+utc("valid_to")+", 'open')")
}

// Scenario: SCD_TYPE_2_BY_COLUMN with updated_at_name, over three daily
// runs on each engine. SQLMesh then passes the updated_at column as the
// execution time (snapshot evaluator: execution_time=updated_at_name), so
// every time it writes is the source row's updated_at, never the run's:
// the first load opens every row at 1970-01-01; day two renames ann
// (closed at, and anna opened at, anna's updated_at), touches bob's
// updated_at only (no checked column changed: his row, and its stored
// updated_at, stay as they were), hard-deletes cy (closed at the missing
// row's updated_at, which is NULL: cy stays open, as in SQLMesh) and adds
// dee (opened at her updated_at, not at the run's time). Day three renames
// bob to rob (closed and opened at rob's updated_at) and brings cy back
// unchanged (nothing to do); it crashes after its swap, and the re-run of
// the same day changes nothing. The expected rows are those SQLMesh 0.236.4's
// DuckDB engine adapter writes for the same three runs.
func TestSCDType2ByColumnWithUpdatedAtName(t *testing.T) {
	t.Parallel()
	for _, b := range moreKindBackends(t) {
		t.Run(b.Backends, func(t *testing.T) {
			const m = "hist.by_column_upd"
			r := newMoreKindRig(t, b, m)

			r.source(t, "customers", "(1, 'ann', '2024-01-01 10:00:00'), (2, 'bob', '2024-01-01 11:00:00'), (3, 'cy', '2024-01-01 12:00:00')")
			r.day(t, m, executetest.At(2024, 1, 2, 0))
			require.Equal(t, []string{
				"1 ann 2024-01-01 10:00:00 1970-01-01 00:00:00 open",
				"2 bob 2024-01-01 11:00:00 1970-01-01 00:00:00 open",
				"3 cy 2024-01-01 12:00:00 1970-01-01 00:00:00 open",
			}, r.fullHistory(t, m, false), "first load: every row opens at 1970-01-01")

			r.source(t, "customers", "(1, 'anna', '2024-01-02 09:00:00'), (2, 'bob', '2024-01-02 05:00:00'), (4, 'dee', '2024-01-02 08:00:00')")
			r.day(t, m, executetest.At(2024, 1, 3, 0))
			require.Equal(t, []string{
				"1 ann 2024-01-01 10:00:00 1970-01-01 00:00:00 2024-01-02 09:00:00",
				"1 anna 2024-01-02 09:00:00 2024-01-02 09:00:00 open",
				"2 bob 2024-01-01 11:00:00 1970-01-01 00:00:00 open",
				"3 cy 2024-01-01 12:00:00 1970-01-01 00:00:00 open",
				"4 dee 2024-01-02 08:00:00 2024-01-02 08:00:00 open",
			}, r.fullHistory(t, m, false), "day two: times are the source's updated_at, not the run's 2024-01-03")

			r.source(t, "customers", "(1, 'anna', '2024-01-02 09:00:00'), (2, 'rob', '2024-01-03 07:00:00'), (3, 'cy', '2024-01-03 06:00:00'), (4, 'dee', '2024-01-02 08:00:00')")
			r.crash(t, m, executetest.At(2024, 1, 4, 0))
			crashed := r.fullHistory(t, m, false)
			r.day(t, m, executetest.At(2024, 1, 4, 0))
			require.Equal(t, crashed, r.fullHistory(t, m, false), "the re-run after the crash changed the history")
			require.Equal(t, []string{
				"1 ann 2024-01-01 10:00:00 1970-01-01 00:00:00 2024-01-02 09:00:00",
				"1 anna 2024-01-02 09:00:00 2024-01-02 09:00:00 open",
				"2 bob 2024-01-01 11:00:00 1970-01-01 00:00:00 2024-01-03 07:00:00",
				"2 rob 2024-01-03 07:00:00 2024-01-03 07:00:00 open",
				"3 cy 2024-01-01 12:00:00 1970-01-01 00:00:00 open",
				"4 dee 2024-01-02 08:00:00 2024-01-02 08:00:00 open",
			}, r.fullHistory(t, m, false))
		})
	}
}

// Scenario: both SCD type 2 kinds with time_data_type TIMESTAMPTZ, on each
// engine: the history columns are created as TIMESTAMP WITH TIME ZONE, and
// over three runs the times written, read in UTC, are SQLMesh's (0.236.4's
// DuckDB engine adapter, same runs, session in UTC): BY_TIME closes and
// opens at the source's updated_at (bob's updated_at alone changing is a
// new version), closes a hard delete at the run's time (2024-01-03 00:00
// UTC, whatever the session's zone) and reopens a returning key at the
// later of its deletion and its updated_at; BY_COLUMN closes and opens at
// the run's time, first load at 1970-01-01.
func TestSCDType2TimestampTZ(t *testing.T) {
	t.Parallel()
	for _, b := range moreKindBackends(t) {
		t.Run(b.Backends, func(t *testing.T) {
			models := []string{"hist.tz_time", "hist.tz_column"}
			r := newMoreKindRig(t, b, models...)
			for _, m := range models {
				tbl := r.tpls[m].Table
				require.Equal(t, []string{"valid_from timestamp with time zone", "valid_to timestamp with time zone"},
					b.Rows(t, "SELECT column_name, LOWER(data_type) FROM information_schema.columns WHERE table_schema = '"+tbl.Schema+
						"' AND table_name = '"+tbl.Name+"' AND column_name IN ('valid_from', 'valid_to')"), m)
			}
			r.source(t, "customers", "(1, 'ann', '2024-01-01 10:00:00'), (2, 'bob', '2024-01-01 11:00:00'), (3, 'cy', '2024-01-01 12:00:00')")
			for _, m := range models {
				r.day(t, m, executetest.At(2024, 1, 2, 0))
			}
			r.source(t, "customers", "(1, 'anna', '2024-01-02 09:00:00'), (2, 'bob', '2024-01-02 05:00:00'), (4, 'dee', '2024-01-02 08:00:00')")
			for _, m := range models {
				r.day(t, m, executetest.At(2024, 1, 3, 0))
			}
			r.source(t, "customers", "(1, 'anna', '2024-01-02 09:00:00'), (2, 'rob', '2024-01-03 07:00:00'), (3, 'cy', '2024-01-03 06:00:00'), (4, 'dee', '2024-01-02 08:00:00')")
			for _, m := range models {
				r.day(t, m, executetest.At(2024, 1, 4, 0))
			}
			require.Equal(t, []string{
				"1 ann 2024-01-01 10:00:00 1970-01-01 00:00:00 2024-01-02 09:00:00",
				"1 anna 2024-01-02 09:00:00 2024-01-02 09:00:00 open",
				"2 bob 2024-01-01 11:00:00 1970-01-01 00:00:00 2024-01-02 05:00:00",
				"2 bob 2024-01-02 05:00:00 2024-01-02 05:00:00 2024-01-03 07:00:00",
				"2 rob 2024-01-03 07:00:00 2024-01-03 07:00:00 open",
				"3 cy 2024-01-01 12:00:00 1970-01-01 00:00:00 2024-01-03 00:00:00",
				"3 cy 2024-01-03 06:00:00 2024-01-03 06:00:00 open",
				"4 dee 2024-01-02 08:00:00 1970-01-01 00:00:00 open",
			}, r.fullHistory(t, "hist.tz_time", true))
			require.Equal(t, []string{
				"1 ann 2024-01-01 10:00:00 1970-01-01 00:00:00 2024-01-03 00:00:00",
				"1 anna 2024-01-02 09:00:00 2024-01-03 00:00:00 open",
				"2 bob 2024-01-01 11:00:00 1970-01-01 00:00:00 2024-01-04 00:00:00",
				"2 rob 2024-01-03 07:00:00 2024-01-04 00:00:00 open",
				"3 cy 2024-01-01 12:00:00 1970-01-01 00:00:00 2024-01-03 00:00:00",
				"3 cy 2024-01-03 06:00:00 2024-01-04 00:00:00 open",
				"4 dee 2024-01-02 08:00:00 2024-01-03 00:00:00 open",
			}, r.fullHistory(t, "hist.tz_column", true))
		})
	}
}

// Scenario: a source query with duplicate unique keys, SCD_TYPE_2_BY_TIME,
// on each engine. SQLMesh keeps one row per key with DISTINCT ON, which
// one unspecified; gapless keeps the one with the latest updated_at (a
// NULL updated_at last). Day one: ann's three rows (08:00, 10:00, NULL)
// load as her 10:00 row. Day two: of anna 09:00 and anne 07:00, anna
// closes ann and opens; bob's older duplicate (bobby 09:00) loses to his
// unchanged 11:00 row, which stays. Day three, the same rows in another
// order: nothing changes. After every run each key has exactly one open
// row.
func TestSCDType2DuplicateKeysKeepLatest(t *testing.T) {
	t.Parallel()
	for _, b := range moreKindBackends(t) {
		t.Run(b.Backends, func(t *testing.T) {
			const m = "hist.dups"
			r := newMoreKindRig(t, b, m)
			oneOpen := func(day string) {
				t.Helper()
				require.Equal(t, []string{"1 1", "2 1"}, b.Rows(t, "SELECT id, COUNT(*) FROM "+b.Engine.QuoteTable(r.tpls[m].Table)+
					" WHERE valid_to IS NULL GROUP BY id"), "%s: one open row per key", day)
			}

			r.source(t, "customers", "(1, 'ann0', '2024-01-01 08:00:00'), (1, 'ann', '2024-01-01 10:00:00'), (1, 'ann_null', NULL), (2, 'bob', '2024-01-01 11:00:00')")
			r.day(t, m, executetest.At(2024, 1, 2, 0))
			require.Equal(t, []string{
				"1 ann 2024-01-01 10:00:00 1970-01-01 00:00:00 open",
				"2 bob 2024-01-01 11:00:00 1970-01-01 00:00:00 open",
			}, r.fullHistory(t, m, false))
			oneOpen("day one")

			day2 := []string{
				"1 ann 2024-01-01 10:00:00 1970-01-01 00:00:00 2024-01-02 09:00:00",
				"1 anna 2024-01-02 09:00:00 2024-01-02 09:00:00 open",
				"2 bob 2024-01-01 11:00:00 1970-01-01 00:00:00 open",
			}
			r.source(t, "customers", "(1, 'anne', '2024-01-02 07:00:00'), (1, 'anna', '2024-01-02 09:00:00'), (2, 'bob', '2024-01-01 11:00:00'), (2, 'bobby', '2024-01-01 09:00:00')")
			r.day(t, m, executetest.At(2024, 1, 3, 0))
			require.Equal(t, day2, r.fullHistory(t, m, false))
			oneOpen("day two")

			r.source(t, "customers", "(2, 'bobby', '2024-01-01 09:00:00'), (1, 'anna', '2024-01-02 09:00:00'), (2, 'bob', '2024-01-01 11:00:00'), (1, 'anne', '2024-01-02 07:00:00')")
			r.day(t, m, executetest.At(2024, 1, 4, 0))
			require.Equal(t, day2, r.fullHistory(t, m, false), "the same duplicates in another order change nothing")
			oneOpen("day three")
		})
	}
}

// Scenario: INCREMENTAL_UNMANAGED with insert_overwrite true and
// partitioned_by region, on each engine: as SQLMesh's
// insert_overwrite_by_partition, each run replaces only the partitions
// present in the query's rows. Day one loads eu and us; day two's rows are
// all eu: eu's rows are replaced by them, us stays; day three brings asia
// and us: both replaced or added, eu stays; a crash after the swap and
// before the record re-runs to the same rows.
func TestUnmanagedInsertOverwriteByPartition(t *testing.T) {
	t.Parallel()
	for _, b := range moreKindBackends(t) {
		t.Run(b.Backends, func(t *testing.T) {
			const m = "sales.overwrite_parts"
			r := newMoreKindRig(t, b, m)
			r.source(t, "sales", "('eu', 1, 10), ('us', 2, 20), ('us', 3, 30)")
			r.day(t, m, executetest.At(2024, 1, 2, 0))
			require.Equal(t, []string{"eu 1 10", "us 2 20", "us 3 30"}, r.rows(t, m, "region, id, amount"))

			r.source(t, "sales", "('eu', 4, 40), ('eu', 5, 50)")
			r.day(t, m, executetest.At(2024, 1, 3, 0))
			require.Equal(t, []string{"eu 4 40", "eu 5 50", "us 2 20", "us 3 30"}, r.rows(t, m, "region, id, amount"),
				"only eu, the partition in the query's rows, is replaced")

			r.source(t, "sales", "('asia', 6, 60), ('us', 7, 70)")
			r.crash(t, m, executetest.At(2024, 1, 4, 0))
			r.day(t, m, executetest.At(2024, 1, 4, 0))
			require.Equal(t, []string{"asia 6 60", "eu 4 40", "eu 5 50", "us 7 70"}, r.rows(t, m, "region, id, amount"),
				"us is replaced, asia added, eu kept; the re-run after the crash changed nothing")
		})
	}
}

// Scenario: a SEED with batch_size 2 on PostgreSQL (its five rows, with
// NULLs and timestamps, go into a staging table two at a time, then into the seed's
// table at once): all five rows land, and no staging table is left. When
// the third chunk fails (row 5 is not an integer), the error names the
// chunk's rows, the seed's table holds no row, not the two chunks before,
// and the staging table is gone.
func TestSeedBatchSizeOnPostgres(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, csv string
		rows      int64
	}{
		{"whole", "id,name,at\n1,a,2024-01-01 10:00:00\n2,,2024-01-02 11:30:00\n3,c,\n4,d,2024-01-04 00:00:00\n5,e,2024-01-05 23:59:59\n", 5},
		{"failing chunk", "id,name,at\n1,a,2024-01-01 10:00:00\n2,,2024-01-02 11:30:00\n3,c,\n4,d,2024-01-04 00:00:00\nnot_a_number,e,2024-01-05 23:59:59\n", -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := executetest.SetupPostgres(t, false, map[string]string{
				"seeds/people.csv": tc.csv,
				"models/people.sql": `MODEL (name demo.people, kind SEED (path '$root/seeds/people.csv', batch_size 2),
  columns (id BIGINT, name VARCHAR, at TIMESTAMP), start '2024-01-01');`,
			})
			pr := b.Load(t)
			tpls, err := Templates(b.Ctx, b.Parser, b.Engine, pr.Snapshots)
			require.NoError(t, err)
			exec := executetest.At(2024, 1, 3, 0)
			x := &Executor{Engine: b.Engine, Store: b.Store, ProjectDir: b.Dir, Logger: slog.New(slog.DiscardHandler), Clock: clockwork.NewFakeClockAt(exec)}
			tpl := tpls["demo.people"]
			require.NoError(t, x.Prepare(b.Ctx, tpl, exec))
			res, err := x.Execute(b.Ctx, Work{Template: tpl, Whole: true, Execution: exec, SkipCovered: true})
			table := b.Engine.QuoteTable(tpl.Table)
			if tc.rows < 0 {
				require.ErrorContains(t, err, "seed rows 5 to 5")
				require.Equal(t, []string{"0"}, b.Rows(t, "SELECT COUNT(*) FROM "+table))
			} else {
				require.NoError(t, err)
				require.Equal(t, tc.rows, res.Rows)
				require.Equal(t, []string{"1 a 2024-01-01 10:00:00", "2 null 2024-01-02 11:30:00", "3 c null", "4 d 2024-01-04 00:00:00", "5 e 2024-01-05 23:59:59"},
					b.Rows(t, "SELECT id, COALESCE(name, 'null'), COALESCE(CAST(at AS VARCHAR), 'null') FROM "+table))
			}
			require.Equal(t, []string{"0"}, b.Rows(t, "SELECT COUNT(*) FROM information_schema.tables WHERE table_name LIKE '\\_\\_gapless\\_seed\\_load%'"),
				"no staging table is left behind")
			require.Equal(t, []string{"1"}, b.Rows(t, "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = '"+tpl.Table.Schema+"' AND table_name = '"+tpl.Table.Name+"'"),
				"the seed's own table is there")
		})
	}
}
