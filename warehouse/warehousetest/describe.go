package warehousetest

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/warehouse"
)

var describeScenarios = []scenario{
	{"ColumnsAndTypesCreateTableAcceptsBack", testDescribeColumns},
	{"StandInsAreReadAndLeaveNothingBehind", testDescribeStandIns},
	{"AnExistingTableIsReadNotItsStandIn", testDescribeExistingWins},
	{"AnExistingViewIsReadNotItsStandIn", testDescribeExistingViewWins},
	{"UnknownColumnFailsAndLeavesNothing", testDescribeUnknownColumn},
	{"SmuggledStatementRunsNothing", testDescribeSmuggled},
	{"BadStandInIsRefusedBeforeAnySQL", testDescribeBadStandIn},
	{"CancelledContext", testDescribeCancelled},
}

// schemaExists reports whether schema is in information_schema.schemata.
func (f *fixture) schemaExists(schema string) bool {
	f.t.Helper()
	return len(f.query(f.listSchemas(), f.fold(schema))) > 0
}

// Scenario: a model's query is described before its table exists: the
// columns come back in order with the engine's own type names, and a table
// created from them has exactly those columns. Nothing was created by the
// description itself.
func testDescribeColumns(t *testing.T, f *fixture) {
	cols, err := f.e.Describe(f.ctx, warehouse.DescribeParams{Query: `SELECT CAST(1 AS BIGINT) AS id,
		TIMESTAMP '2024-01-01 00:00:00' AS ts, DATE '2024-01-01' AS d, ` + f.cast("'x'", "TEXT") + ` AS v,
		CAST(1.5 AS DECIMAL(12,2)) AS amount, true AS ok -- trailing comment`})
	require.NoError(t, err)
	families := make([]string, len(cols))
	for i, c := range cols {
		families[i] = c.Name + " " + typeFamily(c.Type)
	}
	require.Equal(t, []string{"id bigint", "ts timestamp", "d date", "v text", "amount numeric(12,2)", "ok boolean"}, families)

	tbl := f.table("from_description")
	require.NoError(t, f.e.CreateTable(f.ctx, warehouse.CreateTableParams{Table: tbl, Columns: cols}))
	got, err := f.e.Columns(f.ctx, tbl)
	require.NoError(t, err)
	require.Equal(t, cols, got, "CreateTable accepts the described types back unchanged")
	require.Equal(t, []string{"from_description"}, f.objects(f.schema))
}

// Scenario: a child model is described while its parents are not built
// yet: each parent is an empty stand-in, one of them in a schema that does
// not exist. The query joins them; afterwards neither stand-in nor the new
// schema exists, and the description is repeatable.
func testDescribeStandIns(t *testing.T, f *fixture) {
	seed := warehouse.Table{Schema: "gapless__new", Name: "customers__v1"}
	events := f.table("events__v1")
	p := warehouse.DescribeParams{
		Query: `SELECT e.ts, e.customer_id, c.segment FROM ` + f.q(events) + ` AS e JOIN ` + f.q(seed) + ` AS c ON c.customer_id = e.customer_id`,
		StandIns: []warehouse.CreateTableParams{
			{Table: seed, Columns: []warehouse.Column{{Name: "customer_id", Type: "BIGINT"}, {Name: "segment", Type: "TEXT"}}},
			{Table: events, Columns: []warehouse.Column{{Name: "ts", Type: "TIMESTAMP"}, {Name: "customer_id", Type: "BIGINT"}}},
		},
	}
	for range 2 {
		cols, err := f.e.Describe(f.ctx, p)
		require.NoError(t, err)
		require.Len(t, cols, 3)
		require.Equal(t, []string{"ts", "customer_id", "segment"}, []string{cols[0].Name, cols[1].Name, cols[2].Name})
		require.Equal(t, "timestamp", typeFamily(cols[0].Type))
		require.Equal(t, "text", typeFamily(cols[2].Type))

		for _, tbl := range []warehouse.Table{seed, events} {
			ok, err := f.e.TableExists(f.ctx, tbl)
			require.NoError(t, err)
			require.False(t, ok, "the stand-in %s outlived the description", tbl)
		}
		require.False(t, f.schemaExists(seed.Schema), "the stand-in's schema outlived the description")
		require.Empty(t, f.objects(f.schema))
	}
}

// Scenario: a parent that is already built is read as it is, whatever its
// stand-in says, and keeps its rows.
func testDescribeExistingWins(t *testing.T, f *fixture) {
	parent := f.table("parent")
	f.createAs(parent, "SELECT CAST(7 AS BIGINT) AS id, "+f.cast("'real'", "TEXT")+" AS label")
	cols, err := f.e.Describe(f.ctx, warehouse.DescribeParams{
		Query:    "SELECT * FROM " + f.q(parent),
		StandIns: []warehouse.CreateTableParams{{Table: parent, Columns: []warehouse.Column{{Name: "other", Type: "DATE"}}}},
	})
	require.NoError(t, err)
	require.Equal(t, []string{"id", "label"}, []string{cols[0].Name, cols[1].Name})
	require.Equal(t, [][]any{row(7, "real")}, f.rowsOf(parent, "id, label", "id"))
}

// Scenario: a parent is a VIEW that exists already, named in another
// case than its stand-in; the description reads the view, whatever the
// stand-in says, and leaves it as it was.
func testDescribeExistingViewWins(t *testing.T, f *fixture) {
	parent := f.table("parent_view")
	require.NoError(t, f.e.CreateOrReplaceView(f.ctx, warehouse.ViewParams{View: parent, Query: "SELECT CAST(7 AS BIGINT) AS id"}))
	standIn := warehouse.Table{Schema: parent.Schema, Name: "PARENT_VIEW"}
	if f.e.Dialect() == "postgres" {
		standIn = parent // PostgreSQL folds only unquoted names: a quoted "PARENT_VIEW" is another name
	}
	cols, err := f.e.Describe(f.ctx, warehouse.DescribeParams{
		Query:    "SELECT * FROM " + f.q(parent),
		StandIns: []warehouse.CreateTableParams{{Table: standIn, Columns: []warehouse.Column{{Name: "other", Type: "DATE"}}}},
	})
	require.NoError(t, err)
	require.Len(t, cols, 1)
	require.Equal(t, "id", cols[0].Name)
	res, err := f.e.Query(f.ctx, "SELECT id FROM "+f.q(parent))
	require.NoError(t, err)
	require.Len(t, res.Rows, 1)
}

// Scenario: a query names a column its parent does not have. The
// description fails as the first run would, as a *warehouse.Error with the
// SQL, and leaves no stand-in behind.
func testDescribeUnknownColumn(t *testing.T, f *fixture) {
	parent := warehouse.Table{Schema: "gapless__fresh", Name: "parent"}
	_, err := f.e.Describe(f.ctx, warehouse.DescribeParams{
		Query:    "SELECT amout FROM " + f.q(parent),
		StandIns: []warehouse.CreateTableParams{{Table: parent, Columns: []warehouse.Column{{Name: "amount", Type: "BIGINT"}}}},
	})
	require.Error(t, err)
	var we *warehouse.Error
	require.True(t, errors.As(err, &we), "error is %T: %v", err, err)
	require.Equal(t, "describe", we.Op)
	require.Contains(t, we.SQL, "amout")
	require.Contains(t, err.Error(), "amout")
	ok, err := f.e.TableExists(f.ctx, parent)
	require.NoError(t, err)
	require.False(t, ok)
	require.False(t, f.schemaExists(parent.Schema))
}

// Scenario: a query that closes the subquery it is wrapped in and starts a
// second statement is refused and runs nothing, stand-ins or not.
func testDescribeSmuggled(t *testing.T, f *fixture) {
	c := f.canary()
	for _, standIns := range [][]warehouse.CreateTableParams{nil, {{Table: f.table("s"), Columns: []warehouse.Column{{Name: "x", Type: "BIGINT"}}}}} {
		_, err := f.e.Describe(f.ctx, warehouse.DescribeParams{
			Query:    "SELECT 1) AS q; DROP TABLE " + f.q(c) + "; SELECT (1",
			StandIns: standIns,
		})
		require.Error(t, err)
		f.requireCanary(c)
	}
	require.Empty(t, f.objects(f.schema))
}

// Scenario: a stand-in with a column type that could end the statement is
// refused as CreateTable refuses it, before any SQL runs.
func testDescribeBadStandIn(t *testing.T, f *fixture) {
	c := f.canary()
	bad := f.table("bad")
	_, err := f.e.Describe(f.ctx, warehouse.DescribeParams{
		Query:    "SELECT 1 AS x",
		StandIns: []warehouse.CreateTableParams{{Table: bad, Columns: []warehouse.Column{{Name: "x", Type: "BIGINT); DROP TABLE " + f.q(c) + "; --"}}}},
	})
	requireEngineError(t, err, bad)
	f.requireCanary(c)
	require.Empty(t, f.objects(f.schema))
}

// Scenario: a cancelled description fails with context.Canceled and
// leaves nothing.
func testDescribeCancelled(t *testing.T, f *fixture) {
	ctx, cancel := context.WithCancel(f.ctx)
	cancel()
	_, err := f.e.Describe(ctx, warehouse.DescribeParams{
		Query:    "SELECT 1 AS x",
		StandIns: []warehouse.CreateTableParams{{Table: f.table("s"), Columns: []warehouse.Column{{Name: "x", Type: "BIGINT"}}}},
	})
	require.ErrorIs(t, err, context.Canceled)
	require.Empty(t, f.objects(f.schema))
}
