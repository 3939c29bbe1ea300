package warehousetest

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/warehouse"
)

var identifierScenarios = []scenario{
	{"StrangeNamesWorkEverywhere", testStrangeNames},
	{"InvalidNamesAreRefused", testInvalidNames},
	{"QueriesCannotSmuggleStatements", testSmuggledStatements},
}

// strangeNames are legal names that break naive SQL building: Unicode,
// reserved words, mixed case, spaces, dots, quotes, and one written to
// inject SQL against the canary.
var strangeNames = []string{
	"données",
	"表",
	"select",
	"order",
	"user",
	"MixedCase",
	"with space",
	"a.b",
	`evil"; DROP TABLE "canary"."x"; --`,
	`it's`,
	`"`,
	`back\slash`,
	"$1",
}

// Scenario: a project names its schema, model and time column with one of
// strangeNames, and keys it by a reserved word. Every method treats the
// name as just a name: the objects are created under exactly that name
// (folded to lower case where the engine declares names case-insensitive,
// so that "MixedCase" and "mixedcase" name one object), round-trip
// through Columns, and the canary survives the one that tries to drop it.
// An engine that cannot hold a name may refuse it up front with
// warehouse.ErrInvalidIdentifier, creating nothing; DuckDB and PostgreSQL
// refuse none. The names run in parallel, each in its own schema.
func testStrangeNames(t *testing.T, f *fixture) {
	c := f.canary()
	var (
		mu      sync.Mutex
		refused []string
	)
	if !t.Run("names", func(t *testing.T) {
		for _, name := range strangeNames {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				sub := *f
				sub.t, sub.ctx = t, t.Context()
				if !sub.strangeName(name) {
					mu.Lock()
					refused = append(refused, name)
					mu.Unlock()
				}
				sub.requireCanary(c)
			})
		}
	}) {
		return
	}
	f.requireCanary(c)
	if len(refused) > 0 {
		t.Logf("%s refuses the names %q", f.dialect, refused)
	}
	if f.dialect != trino {
		require.Empty(t, refused, "%s refused names it must hold", f.dialect)
	}
}

// strangeName runs testStrangeNames for one name, and reports false when
// the engine refused it cleanly: with a *warehouse.Error wrapping
// warehouse.ErrInvalidIdentifier, creating neither the schema nor the
// table.
func (f *fixture) strangeName(name string) bool {
	t := f.t
	schema := name
	tbl := warehouse.Table{Schema: schema, Name: name}
	cols := []warehouse.Column{{Name: name, Type: "TIMESTAMP"}, {Name: "from", Type: "BIGINT"}, {Name: "Group Value", Type: "TEXT"}}
	err := f.e.CreateSchema(f.ctx, schema)
	if err == nil {
		err = f.e.CreateTable(f.ctx, warehouse.CreateTableParams{Table: tbl, Columns: cols})
	}
	if errors.Is(err, warehouse.ErrInvalidIdentifier) {
		var we *warehouse.Error
		require.ErrorAs(t, err, &we, "the refusal of %q is not a *warehouse.Error", name)
		if f.schemaExists(schema) {
			require.Empty(t, f.objects(schema), "the refused name %q created an object", name)
		}
		found, err := f.e.TablesExist(f.ctx, []warehouse.Table{tbl})
		if err == nil {
			require.Equal(t, []bool{false}, found, "the refused name %q created its table", name)
		} else {
			require.ErrorIs(t, err, warehouse.ErrInvalidIdentifier, "TablesExist on the refused name %q", name)
		}
		return false
	}
	require.NoError(t, err, "schema and table %q", name)

	ok, err := f.e.TableExists(f.ctx, tbl)
	require.NoError(t, err)
	require.True(t, ok, "table %q", name)
	if !f.caps.CaseSensitiveNames {
		folded := warehouse.Table{Schema: strings.ToLower(schema), Name: strings.ToLower(name)}
		ok, err := f.e.TableExists(f.ctx, folded)
		require.NoError(t, err)
		require.True(t, ok, "%s and %s are one table where names fold", tbl, folded)
	}
	got, err := f.e.Columns(f.ctx, tbl)
	require.NoError(t, err)
	require.Len(t, got, 3)
	require.Equal(t, []string{f.fold(name), "from", f.fold("Group Value")}, []string{got[0].Name, got[1].Name, got[2].Name})

	tc, k, v := f.qi(name), f.qi("from"), f.qi("Group Value")
	src := "SELECT ts AS " + tc + ", id AS " + k + ", val AS " + v + ` FROM (VALUES
		(TIMESTAMP '2024-01-01 01:00:00', 1, 'a'),
		(TIMESTAMP '2024-01-01 01:30:00', 2, 'b'),
		(TIMESTAMP '2024-01-01 02:00:00', 3, 'c')) AS s(ts, id, val)`
	n, err := f.e.InsertInterval(f.ctx, warehouse.InsertIntervalParams{Table: tbl, TimeColumn: name, Start: ts(1, 0, 0), End: ts(2, 0, 0), Query: src})
	require.NoError(t, err, "insert interval into %q", name)
	require.Equal(t, int64(2), n)

	n, err = f.e.MergeByKey(f.ctx, warehouse.MergeParams{Table: tbl, Key: []string{name, "from"},
		Query: "SELECT " + tc + ", " + k + ", 'merged' AS " + v + " FROM " + f.e.QuoteTable(tbl) + " WHERE " + k + " = 2"})
	require.NoError(t, err, "merge into %q", name)
	require.Equal(t, int64(1), n)

	n, err = f.e.InsertRows(f.ctx, warehouse.InsertRowsParams{Table: tbl, Columns: []string{"from", "Group Value", name},
		Rows: [][]any{{int64(9), "seeded", ts(5, 0, 0)}}})
	require.NoError(t, err)
	require.Equal(t, int64(1), n)

	view := warehouse.Table{Schema: schema, Name: name + " view"}
	require.NoError(t, f.e.CreateOrReplaceView(f.ctx, warehouse.ViewParams{View: view,
		Query: "SELECT " + k + ", " + v + " FROM " + f.e.QuoteTable(tbl)}), "view over %q", name)
	require.Equal(t, [][]any{row(1, "a"), row(2, "merged"), row(9, "seeded")}, f.rowsOf(view, k+", "+v, k))

	require.NoError(t, f.e.ReplaceTable(f.ctx, warehouse.ReplaceTableParams{Table: tbl,
		Query: "SELECT " + tc + ", " + k + ", " + v + " FROM " + f.e.QuoteTable(tbl) + " WHERE " + k + " < 9"}), "replace %q", name)
	require.Equal(t, [][]any{row(1, "a"), row(2, "merged")}, f.rowsOf(view, k+", "+v, k))

	require.NoError(t, f.e.DropView(f.ctx, view))
	require.NoError(t, f.e.DropTable(f.ctx, tbl))
	ok, err = f.e.TableExists(f.ctx, tbl)
	require.NoError(t, err)
	require.False(t, ok, "table %q", name)
	return true
}

// invalidNames cannot be faithful names on every engine: empty, a NUL byte
// (which a C string would cut short), invalid UTF-8.
var invalidNames = []string{"", "a\x00b", "\x00", "bad\xff"}

// Scenario: a name that cannot be represented is refused by every method
// with an error, before anything is created; nothing panics, and nothing is
// created under a truncated name.
func testInvalidNames(t *testing.T, f *fixture) {
	good := f.table("good")
	f.createAs(good, "SELECT TIMESTAMP '2024-01-01 00:00:00' AS ts, 1 AS id")
	before := f.objects(f.schema)
	for _, bad := range invalidNames {
		tables := []warehouse.Table{{Schema: f.schema, Name: bad}, {Schema: bad, Name: "t"}}
		for _, tbl := range tables {
			requireFails(t, f.e.CreateTable(f.ctx, warehouse.CreateTableParams{Table: tbl, Columns: []warehouse.Column{{Name: "id", Type: "BIGINT"}}}))
			requireFails(t, f.e.CreateTableAs(f.ctx, warehouse.CreateTableAsParams{Table: tbl, Query: "SELECT 1 AS id", WithData: true}))
			requireFails(t, f.e.CreateOrReplaceView(f.ctx, warehouse.ViewParams{View: tbl, Query: "SELECT 1 AS id"}))
			requireFails(t, f.e.ReplaceTable(f.ctx, warehouse.ReplaceTableParams{Table: tbl, Query: "SELECT 1 AS id"}))
			requireFails(t, f.e.DropTable(f.ctx, tbl))
			requireFails(t, f.e.DropView(f.ctx, tbl))
			_, err := f.e.TableExists(f.ctx, tbl)
			requireFails(t, err)
			_, err = f.e.Columns(f.ctx, tbl)
			requireFails(t, err)
			_, err = f.e.InsertRows(f.ctx, warehouse.InsertRowsParams{Table: tbl, Columns: []string{"id"}, Rows: [][]any{{1}}})
			requireFails(t, err)
		}
		requireFails(t, f.e.CreateSchema(f.ctx, bad))
		requireFails(t, f.e.CreateTable(f.ctx, warehouse.CreateTableParams{Table: f.table("cols"), Columns: []warehouse.Column{{Name: bad, Type: "BIGINT"}}}))
		_, err := f.e.InsertInterval(f.ctx, warehouse.InsertIntervalParams{Table: good, TimeColumn: bad, Start: ts(0, 0, 0), End: ts(1, 0, 0), Query: "SELECT * FROM " + f.q(good)})
		requireFails(t, err)
		_, err = f.e.MergeByKey(f.ctx, warehouse.MergeParams{Table: good, Key: []string{bad}, Query: "SELECT * FROM " + f.q(good)})
		requireFails(t, err)
		_, err = f.e.InsertRows(f.ctx, warehouse.InsertRowsParams{Table: good, Columns: []string{bad}, Rows: [][]any{{1}}})
		requireFails(t, err)
	}
	require.Equal(t, before, f.objects(f.schema))
	require.Equal(t, int64(1), f.count(good))
}

func requireFails(t *testing.T, err error) {
	t.Helper()
	require.Error(t, err)
	var we *warehouse.Error
	require.ErrorAs(t, err, &we)
	require.NotEmpty(t, we.Op)
}

// Scenario: a model query closes the subquery the engine wraps it in and
// starts a statement of its own; so does a query given to Query. Each is
// an error and the canary survives.
func testSmuggledStatements(t *testing.T, f *fixture) {
	c := f.canary()
	tbl := f.eventsTable()
	smuggle := `SELECT TIMESTAMP '2024-01-01 00:00:00' AS ts, 1 AS id, 'x' AS v) AS q; DROP TABLE "canary"."x"; SELECT * FROM (SELECT 1`
	_, err := f.e.InsertInterval(f.ctx, warehouse.InsertIntervalParams{Table: tbl, TimeColumn: "ts", Start: ts(0, 0, 0), End: ts(1, 0, 0), Query: smuggle})
	requireEngineError(t, err, tbl)
	_, err = f.e.MergeByKey(f.ctx, warehouse.MergeParams{Table: tbl, Key: []string{"id"}, Query: smuggle})
	requireEngineError(t, err, tbl)

	plain := `SELECT 1 AS id; DROP TABLE "canary"."x"`
	requireEngineError(t, f.e.ReplaceTable(f.ctx, warehouse.ReplaceTableParams{Table: tbl, Query: plain}), tbl)
	other := f.table("other")
	requireEngineError(t, f.e.CreateTableAs(f.ctx, warehouse.CreateTableAsParams{Table: other, Query: plain, WithData: true}), other)
	requireEngineError(t, f.e.CreateTableAs(f.ctx, warehouse.CreateTableAsParams{Table: other, Query: smuggle}), other)
	requireEngineError(t, f.e.CreateOrReplaceView(f.ctx, warehouse.ViewParams{View: other, Query: plain}), other)

	_, err = f.e.Query(f.ctx, plain)
	requireFails(t, err)
	f.requireCanary(c)
	require.Equal(t, int64(0), f.count(tbl))
}
