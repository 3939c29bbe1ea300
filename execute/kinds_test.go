package execute

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/execute/executetest"
	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/model"
	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/warehouse"
)

// kindFiles is a daily project over two source tables that the tests
// rewrite between runs: raw.customers (id, name, updated_at) kept as SCD
// type 2 history with several property sets (by time with and without
// hard deletes, with updated_at_as_valid_from; by column, with
// execution_time_as_valid_from, with a DATE time type), and raw.sales
// (region, id, amount) kept by partition and unmanaged (appended, and
// overwritten).
var kindFiles = map[string]string{
	"gapless.yaml":             "warehouse: duckdb://w.duckdb\nstate: sqlite://s.db\nmodel_defaults:\n  start: '2024-01-01'\n",
	"models/raw_customers.sql": "MODEL (name raw.customers, kind EXTERNAL, columns (id INTEGER, name VARCHAR, updated_at TIMESTAMP));\n",
	"models/raw_sales.sql":     "MODEL (name raw.sales, kind EXTERNAL, columns (region VARCHAR, id INTEGER, amount INTEGER));\n",
	"models/by_time.sql": "MODEL (name hist.by_time, kind SCD_TYPE_2_BY_TIME (unique_key id, invalidate_hard_deletes true), cron '@daily');\n" +
		"SELECT id, name, updated_at FROM raw.customers;\n",
	"models/by_time_kept.sql": "MODEL (name hist.by_time_kept, kind SCD_TYPE_2 (unique_key id), cron '@daily');\n" +
		"SELECT id, name, updated_at FROM raw.customers;\n",
	"models/by_time_from.sql": "MODEL (name hist.by_time_from, kind SCD_TYPE_2_BY_TIME (unique_key id, updated_at_as_valid_from true), cron '@daily');\n" +
		"SELECT id, name, updated_at FROM raw.customers;\n",
	"models/by_column.sql": "MODEL (name hist.by_column, kind SCD_TYPE_2_BY_COLUMN (unique_key id, columns [name], invalidate_hard_deletes true), cron '@daily');\n" +
		"SELECT id, name FROM raw.customers;\n",
	"models/by_column_exec.sql": "MODEL (name hist.by_column_exec, kind SCD_TYPE_2_BY_COLUMN (unique_key id, columns *, execution_time_as_valid_from true), cron '@daily');\n" +
		"SELECT id, name FROM raw.customers;\n",
	"models/by_column_date.sql": "MODEL (name hist.by_column_date, kind SCD_TYPE_2_BY_COLUMN (unique_key id, columns [name], time_data_type DATE), cron '@daily');\n" +
		"SELECT id, name FROM raw.customers;\n",
	"models/by_partition.sql": "MODEL (name sales.by_region, kind INCREMENTAL_BY_PARTITION, partitioned_by region, cron '@daily');\n" +
		"SELECT region, id, amount FROM raw.sales;\n",
	"models/appended.sql":  "MODEL (name sales.appended, kind INCREMENTAL_UNMANAGED, cron '@daily');\nSELECT id, amount, @start_ds AS ds FROM raw.sales;\n",
	"models/overwrite.sql": "MODEL (name sales.overwritten, kind INCREMENTAL_UNMANAGED (insert_overwrite true), cron '@daily');\nSELECT id, amount FROM raw.sales;\n",
}

// kindRig runs the kind models of kindFiles one day at a time.
type kindRig struct {
	b    *executetest.Bundle
	x    *Executor
	tpls map[string]*Template
}

func newKindRig(t *testing.T, b *executetest.Bundle) *kindRig {
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
	for _, name := range []string{"hist.by_time", "hist.by_time_kept", "hist.by_time_from", "hist.by_column", "hist.by_column_exec", "hist.by_column_date", "sales.by_region", "sales.appended", "sales.overwritten"} {
		require.NoError(t, x.Prepare(b.Ctx, tpls[name], executetest.At(2024, 1, 2, 0)), name)
	}
	return &kindRig{b: b, x: x, tpls: tpls}
}

// source replaces raw.<name> with the rows of values (a VALUES list).
func (r *kindRig) source(t *testing.T, name, values string) {
	t.Helper()
	q := "SELECT CAST(a AS INTEGER) AS id, CAST(b AS VARCHAR) AS name, CAST(c AS TIMESTAMP) AS updated_at FROM (VALUES " + values + ") AS v(a, b, c)"
	if name == "sales" {
		q = "SELECT CAST(a AS VARCHAR) AS region, CAST(b AS INTEGER) AS id, CAST(c AS INTEGER) AS amount FROM (VALUES " + values + ") AS v(a, b, c)"
	}
	require.NoError(t, r.b.Engine.ReplaceTable(r.b.Ctx, warehouse.ReplaceTableParams{Table: warehouse.Table{Schema: "raw", Name: name}, Query: q}))
}

// day runs model's interval of the day before exec, at exec, and checks
// that it is recorded.
func (r *kindRig) day(t *testing.T, name string, exec time.Time) {
	t.Helper()
	tpl := r.tpls[name]
	day := interval.NewRange(exec.AddDate(0, 0, -1), exec)
	res, err := r.x.Execute(r.b.Ctx, Work{Template: tpl, Ranges: interval.NewSet(day), Execution: exec, InOrder: true})
	require.NoError(t, err, name)
	require.Equal(t, interval.NewSet(day), res.Recorded, name)
}

// crash writes model's batch of the day before exec as a run would, and
// then stops, as a crash after the swap and before the record does.
func (r *kindRig) crash(t *testing.T, name string, exec time.Time) {
	t.Helper()
	tpl := r.tpls[name]
	sql, err := tpl.Render(interval.NewRange(exec.AddDate(0, 0, -1), exec), exec)
	require.NoError(t, err)
	_, err = r.x.kindBatch(r.b.Ctx, tpl, state.VersionKey{Name: tpl.Snapshot.Name, Version: tpl.Snapshot.Version}, sql, exec)
	require.NoError(t, err, name)
}

// history is an SCD type 2 table's rows as "id name valid_from valid_to",
// an open row's valid_to shown as "open", sorted; times to the second
// (Trino spells a timestamp with its microseconds).
func (r *kindRig) history(t *testing.T, name string) []string {
	t.Helper()
	tbl := r.b.Engine.QuoteTable(r.tpls[name].Table)
	rows := r.b.Rows(t, "SELECT id, name, CAST(valid_from AS VARCHAR), COALESCE(CAST(valid_to AS VARCHAR), 'open') FROM "+tbl)
	for i, row := range rows {
		rows[i] = strings.ReplaceAll(row, ".000000", "")
	}
	return rows
}

func (r *kindRig) rows(t *testing.T, name, cols string) []string {
	t.Helper()
	return r.b.Rows(t, "SELECT "+cols+" FROM "+r.b.Engine.QuoteTable(r.tpls[name].Table))
}

func kindBackends(t *testing.T) []*executetest.Bundle {
	return []*executetest.Bundle{executetest.Setup(t, false, kindFiles), executetest.SetupPostgres(t, false, kindFiles)}
}

// kindBackendsAndTrino are kindBackends and Trino (Iceberg), for the
// scenarios that show each kind's history on every engine.
func kindBackendsAndTrino(t *testing.T) []*executetest.Bundle {
	return append(kindBackends(t), executetest.SetupTrino(t, kindFiles))
}

// Scenario: SCD type 2 history as SQLMesh documents it, on each engine.
// Day one loads three customers: every row opens at 1970-01-01 (BY_TIME)
// or, on the first load, 1970-01-01 too (BY_COLUMN). Day two updates ann,
// leaves bob alone, hard-deletes cy and adds dee: ann's old row is closed
// at her new updated_at (BY_TIME) or the execution time (BY_COLUMN) and a
// new one opens there; bob's row stays; cy's row is closed at the
// execution time with invalidate_hard_deletes true and stays open without
// it; dee opens at 1970-01-01 (BY_TIME) or the execution time (BY_COLUMN).
// A crash after the swap and before the record, on the first load and on
// a later day, leaves a re-run at the same execution time harmless.
func TestSCDType2KeepsHistoryAsSQLMeshDoes(t *testing.T) {
	t.Parallel()
	for _, b := range kindBackendsAndTrino(t) {
		t.Run(b.Backends, func(t *testing.T) {
			r := newKindRig(t, b)
			models := []string{"hist.by_time", "hist.by_time_kept", "hist.by_time_from", "hist.by_column", "hist.by_column_date"}
			day1, day2, day3 := executetest.At(2024, 1, 2, 0), executetest.At(2024, 1, 3, 0), executetest.At(2024, 1, 4, 0)

			r.source(t, "customers", "(1, 'ann', '2024-01-01 10:00:00'), (2, 'bob', '2024-01-01 11:00:00'), (3, 'cy', '2024-01-01 12:00:00')")
			for _, m := range models {
				r.crash(t, m, day1) // a first load that never got recorded
				r.day(t, m, day1)
			}
			first := []string{
				"1 ann 1970-01-01 00:00:00 open",
				"2 bob 1970-01-01 00:00:00 open",
				"3 cy 1970-01-01 00:00:00 open",
			}
			require.Equal(t, []string{"1 ann 1970-01-01 open", "2 bob 1970-01-01 open", "3 cy 1970-01-01 open"},
				r.history(t, "hist.by_column_date"), "time_data_type DATE")
			for _, m := range models {
				if m != "hist.by_time_from" && m != "hist.by_column_date" {
					require.Equal(t, first, r.history(t, m), m)
				}
			}
			require.Equal(t, []string{
				"1 ann 2024-01-01 10:00:00 open",
				"2 bob 2024-01-01 11:00:00 open",
				"3 cy 2024-01-01 12:00:00 open",
			}, r.history(t, "hist.by_time_from"), "updated_at_as_valid_from: new rows open at their updated_at")
			r.day(t, "hist.by_column_exec", day1)
			require.Equal(t, []string{
				"1 ann 2024-01-02 00:00:00 open",
				"2 bob 2024-01-02 00:00:00 open",
				"3 cy 2024-01-02 00:00:00 open",
			}, r.history(t, "hist.by_column_exec"), "execution_time_as_valid_from: even the first load opens at the execution time")

			r.source(t, "customers", "(1, 'anna', '2024-01-02 09:00:00'), (2, 'bob', '2024-01-01 11:00:00'), (4, 'dee', '2024-01-02 08:00:00')")
			for _, m := range models {
				r.day(t, m, day2)
			}
			require.Equal(t, []string{
				"1 ann 1970-01-01 00:00:00 2024-01-02 09:00:00",
				"1 anna 2024-01-02 09:00:00 open",
				"2 bob 1970-01-01 00:00:00 open",
				"3 cy 1970-01-01 00:00:00 2024-01-03 00:00:00",
				"4 dee 1970-01-01 00:00:00 open",
			}, r.history(t, "hist.by_time"))
			require.Equal(t, []string{
				"1 ann 1970-01-01 00:00:00 2024-01-02 09:00:00",
				"1 anna 2024-01-02 09:00:00 open",
				"2 bob 1970-01-01 00:00:00 open",
				"3 cy 1970-01-01 00:00:00 open",
				"4 dee 1970-01-01 00:00:00 open",
			}, r.history(t, "hist.by_time_kept"), "invalidate_hard_deletes is false by default: cy stays open")
			require.Equal(t, []string{
				"1 ann 1970-01-01 00:00:00 2024-01-03 00:00:00",
				"1 anna 2024-01-03 00:00:00 open",
				"2 bob 1970-01-01 00:00:00 open",
				"3 cy 1970-01-01 00:00:00 2024-01-03 00:00:00",
				"4 dee 2024-01-03 00:00:00 open",
			}, r.history(t, "hist.by_column"))
			require.Equal(t, []string{
				"1 ann 1970-01-01 2024-01-03",
				"1 anna 2024-01-03 open",
				"2 bob 1970-01-01 open",
				"3 cy 1970-01-01 open",
				"4 dee 2024-01-03 open",
			}, r.history(t, "hist.by_column_date"))

			// Day three: bob changes and cy comes back; the run crashes
			// after its swap, and the next run does the same day again.
			r.source(t, "customers", "(1, 'anna', '2024-01-02 09:00:00'), (2, 'rob', '2024-01-03 07:00:00'), (3, 'cy', '2024-01-01 12:00:00'), (4, 'dee', '2024-01-02 08:00:00')")
			for _, m := range models {
				r.crash(t, m, day3)
				crashed := r.history(t, m)
				r.day(t, m, day3)
				require.Equal(t, crashed, r.history(t, m), "%s: the re-run after the crash changed the history", m)
			}
			// The histories SQLMesh 0.236's engine adapter writes for the
			// same three days (scd_type_2_by_time / _by_column on DuckDB).
			require.Equal(t, []string{
				"1 ann 1970-01-01 00:00:00 2024-01-02 09:00:00",
				"1 anna 2024-01-02 09:00:00 open",
				"2 bob 1970-01-01 00:00:00 2024-01-03 07:00:00",
				"2 rob 2024-01-03 07:00:00 open",
				"3 cy 1970-01-01 00:00:00 2024-01-03 00:00:00",
				"3 cy 2024-01-03 00:00:00 open", // back: from the later of its deletion and its updated_at
				"4 dee 1970-01-01 00:00:00 open",
			}, r.history(t, "hist.by_time"))
			require.Equal(t, []string{
				"1 ann 1970-01-01 00:00:00 2024-01-03 00:00:00",
				"1 anna 2024-01-03 00:00:00 open",
				"2 bob 1970-01-01 00:00:00 2024-01-04 00:00:00",
				"2 rob 2024-01-04 00:00:00 open",
				"3 cy 1970-01-01 00:00:00 2024-01-03 00:00:00",
				"3 cy 2024-01-04 00:00:00 open",
				"4 dee 2024-01-03 00:00:00 open",
			}, r.history(t, "hist.by_column"))
			require.Equal(t, []string{
				"1 ann 2024-01-01 10:00:00 2024-01-02 09:00:00",
				"1 anna 2024-01-02 09:00:00 open",
				"2 bob 2024-01-01 11:00:00 2024-01-03 07:00:00",
				"2 rob 2024-01-03 07:00:00 open",
				"3 cy 2024-01-01 12:00:00 open",
				"4 dee 2024-01-02 08:00:00 open",
			}, r.history(t, "hist.by_time_from"))
		})
	}
}

// Scenario: INCREMENTAL_BY_PARTITION replaces exactly the partitions in the
// query's rows (eu is replaced, us kept); INCREMENTAL_UNMANAGED appends each
// run's rows, or with insert_overwrite keeps only the last run's; a crash
// after the swap re-runs harmlessly for partitions, and appends again for
// an unmanaged table, as documented.
func TestPartitionAndUnmanagedKinds(t *testing.T) {
	t.Parallel()
	for _, b := range kindBackendsAndTrino(t) {
		t.Run(b.Backends, func(t *testing.T) {
			r := newKindRig(t, b)
			day1, day2, day3 := executetest.At(2024, 1, 2, 0), executetest.At(2024, 1, 3, 0), executetest.At(2024, 1, 4, 0)
			models := []string{"sales.by_region", "sales.appended", "sales.overwritten"}
			r.source(t, "sales", "('eu', 1, 10), ('us', 2, 20)")
			for _, m := range models {
				r.day(t, m, day1)
			}
			r.source(t, "sales", "('eu', 3, 30)")
			for _, m := range models {
				r.day(t, m, day2)
			}
			require.Equal(t, []string{"eu 3 30", "us 2 20"}, r.rows(t, "sales.by_region", "region, id, amount"))
			require.Equal(t, []string{"1 10 2024-01-01", "2 20 2024-01-01", "3 30 2024-01-02"}, r.rows(t, "sales.appended", "id, amount, ds"))
			require.Equal(t, []string{"3 30"}, r.rows(t, "sales.overwritten", "id, amount"))

			r.source(t, "sales", "('us', 4, 40)")
			r.crash(t, "sales.by_region", day3)
			r.day(t, "sales.by_region", day3)
			require.Equal(t, []string{"eu 3 30", "us 4 40"}, r.rows(t, "sales.by_region", "region, id, amount"))
			r.crash(t, "sales.appended", day3)
			r.day(t, "sales.appended", day3)
			require.Equal(t, []string{"1 10 2024-01-01", "2 20 2024-01-01", "3 30 2024-01-02", "4 40 2024-01-03", "4 40 2024-01-03"},
				r.rows(t, "sales.appended", "id, amount, ds"), "an append re-run after a crash appends again (documented)")
		})
	}
}

// Scenario: CheckKind refuses at plan time, at the kind's file and line:
// an INCREMENTAL_BY_PARTITION model
// without partitioned_by or partitioned by an expression, and SCD type 2
// properties naming columns the query lacks; a query producing a history
// column itself is refused as its columns are derived.
func TestCheckKindRefusesAtPlanTime(t *testing.T) {
	t.Parallel()
	pos := model.Pos{File: "models/k.sql", Line: 3, Col: 8}
	cols := []warehouse.Column{{Name: "id", Type: "INTEGER"}, {Name: "region", Type: "TEXT"}, {Name: "updated_at", Type: "TIMESTAMP"}}
	scd := func(kind model.Kind, p model.SCDType2) *model.Model {
		if p.ValidFrom == "" {
			p.ValidFrom, p.ValidTo, p.TimeDataType = "valid_from", "valid_to", "TIMESTAMP"
		}
		return &model.Model{Name: "s.k", Kind: kind, KindPos: pos, UniqueKey: []string{"id"}, SCD: p}
	}
	part := &model.Model{Name: "s.k", Kind: model.KindIncrementalByPartition, KindPos: pos}

	require.NoError(t, CheckKind(scd(model.KindSCDType2ByTime, model.SCDType2{}), cols))
	require.EqualError(t, CheckKind(part, cols),
		"models/k.sql:3:8: model s.k: kind INCREMENTAL_BY_PARTITION needs the partitions it replaces: add partitioned_by (COLUMN, ...)")
	part.PartitionedBy = []string{"day(updated_at)"}
	require.ErrorContains(t, CheckKind(part, cols),
		"models/k.sql:3:8: model s.k: partitioned_by day(updated_at) is not a column of its query (its columns: id, region, updated_at): partitions are replaced by the values of columns only")
	part.PartitionedBy = []string{"region"}
	require.NoError(t, CheckKind(part, cols))

	require.EqualError(t, CheckKind(scd(model.KindSCDType2ByTime, model.SCDType2{ValidFrom: "f", ValidTo: "t", UpdatedAt: "changed_at", TimeDataType: "TIMESTAMP"}), cols),
		"models/k.sql:3:8: model s.k: updated_at_name changed_at is not a column of its query (its columns: id, region, updated_at)")
	require.ErrorContains(t, CheckKind(scd(model.KindSCDType2ByColumn, model.SCDType2{Columns: []string{"regoin"}}), cols),
		"models/k.sql:3:8: model s.k: columns regoin is not a column of its query (its columns: id, region, updated_at)")
	withHistory, err := withKindColumns(scd(model.KindSCDType2ByColumn, model.SCDType2{AllColumns: true}), cols)
	require.NoError(t, err)
	require.Len(t, withHistory, 5)
	require.NoError(t, CheckKind(scd(model.KindSCDType2ByColumn, model.SCDType2{AllColumns: true}), withHistory))

	_, err = withKindColumns(scd(model.KindSCDType2ByTime, model.SCDType2{}), append(cols, warehouse.Column{Name: "VALID_TO", Type: "TIMESTAMP"}))
	require.EqualError(t, err, "models/k.sql:3:8: model s.k: its query produces column valid_to, which kind SCD_TYPE_2_BY_TIME writes itself (valid_from_name / valid_to_name): rename one of them")
}
