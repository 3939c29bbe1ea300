package tablediff_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/gapless-dev/gapless/internal/pgtest"
	"github.com/gapless-dev/gapless/tablediff"
	"github.com/gapless-dev/gapless/warehouse"
	"github.com/gapless-dev/gapless/warehouse/duckdb"
	"github.com/gapless-dev/gapless/warehouse/postgres"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// engineCase is one warehouse engine and how its types are spelled.
type engineCase struct {
	name            string
	open            func(t *testing.T) warehouse.Engine
	intT, bigT, dbl string
}

var engines = []engineCase{
	{
		name: "duckdb",
		open: func(t *testing.T) warehouse.Engine {
			e, err := duckdb.Open(t.Context(), "", duckdb.Options{})
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, e.Close()) })
			return e
		},
		intT: "INTEGER", bigT: "BIGINT", dbl: "DOUBLE",
	},
	{
		name: "postgres",
		open: func(t *testing.T) warehouse.Engine {
			url := pgtest.NewDatabase(t)
			e, err := postgres.Open(t.Context(), url)
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, e.Close()) })
			return e
		},
		intT: "integer", bigT: "bigint", dbl: "double precision",
	},
}

var (
	prod = warehouse.Table{Schema: "shop", Name: "orders"}
	dev  = warehouse.Table{Schema: "shop__dev", Name: "orders"}
)

// seed writes the two tables of the scenarios, as prod and dev would
// serve one model after a change:
//   - id 1: the same on both sides; id 4: the same, note NULL on both;
//   - id 2: amount 10 in prod, 12.5 in dev;
//   - id 3: amount 1.0001 and 1.0004, equal to 3 decimals, not to 4;
//   - id 5 only in prod, id 6 only in dev;
//   - dev adds the column extra and widens qty from integer to bigint.
//
// Days repeat (ids 1 and 2, 3 and 4 share one), so day is not a key.
func seed(t *testing.T, c engineCase) warehouse.Engine {
	t.Helper()
	e := c.open(t)
	ctx := t.Context()
	for _, sql := range []string{
		"CREATE SCHEMA shop",
		"CREATE SCHEMA shop__dev",
		"CREATE TABLE shop.orders (id integer, day date, amount double precision, note text, qty integer)",
		"CREATE TABLE shop__dev.orders (id integer, day date, amount double precision, note text, qty bigint, extra integer)",
		`INSERT INTO shop.orders VALUES
			(1, DATE '2024-01-01', 5.0, 'a', 1),
			(2, DATE '2024-01-01', 10.0, 'b', 2),
			(3, DATE '2024-01-02', 1.0001, 'c', 3),
			(4, DATE '2024-01-02', 7.0, NULL, 4),
			(5, DATE '2024-01-03', 8.0, 'e', 5)`,
		`INSERT INTO shop__dev.orders VALUES
			(1, DATE '2024-01-01', 5.0, 'a', 1, 0),
			(2, DATE '2024-01-01', 12.5, 'b', 2, 0),
			(3, DATE '2024-01-02', 1.0004, 'c', 3, 0),
			(4, DATE '2024-01-02', 7.0, NULL, 4, 0),
			(6, DATE '2024-01-04', 9.0, 'f', 6, 0)`,
	} {
		_, err := e.Query(ctx, sql)
		require.NoError(t, err, sql)
	}
	return e
}

func params(e warehouse.Engine) tablediff.Params {
	return tablediff.Params{
		Engine: e, Source: tablediff.Side{Name: "prod", Table: prod}, Target: tablediff.Side{Name: "dev", Table: dev},
		Keys: []string{"id"}, Limit: tablediff.DefaultLimit, Decimals: tablediff.DefaultDecimals, Sample: true,
	}
}

// num turns an engine's integer or float into a float64, so that rows
// compare the same on every engine.
func num(t *testing.T, v any) float64 {
	t.Helper()
	switch x := v.(type) {
	case int32:
		return float64(x)
	case int64:
		return float64(x)
	case float64:
		return x
	}
	t.Fatalf("%v is a %T, not a number", v, v)
	return 0
}

// Scenario: a model changed between prod and dev. On DuckDB and on
// PostgreSQL the diff reports dev's added column and retyped column, joins
// the rows on the key and counts 3 full matches (1.0001 and 1.0004 are
// equal to 3 decimals, NULL matches NULL), 1 partial match, one row only in
// each side; amount matches in 3 of the 4 joined rows, and the sample
// shows id 2's two amounts and the rows of each side alone. Rounding to 4
// decimals makes id 3 differ too; --where and --skip-columns change what
// is compared as SQLMesh's flags do.
func TestDiffCountsAndSamplesOnBothEngines(t *testing.T) {
	t.Parallel()
	for _, c := range engines {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := seed(t, c)
			ctx := t.Context()
			res, err := tablediff.Diff(ctx, params(e))
			require.NoError(t, err)

			require.Equal(t, []warehouse.Column{{Name: "extra", Type: c.intT}}, res.Schema.Added)
			require.Empty(t, res.Schema.Removed)
			require.Equal(t, []tablediff.TypeChange{{Name: "qty", SourceType: c.intT, TargetType: c.bigT}}, res.Schema.Modified)
			require.False(t, res.Schema.Match())

			r := res.Rows
			require.Equal(t, []string{"id"}, r.Keys)
			require.Equal(t, [7]int64{5, 5, 4, 3, 1, 1, 1},
				[7]int64{r.SourceCount, r.TargetCount, r.Joined, r.FullMatch, r.PartialMatch, r.SourceOnly, r.TargetOnly})
			require.Equal(t, []tablediff.ColumnStat{
				{Name: "day", Matched: 4, Compared: 4, MatchPct: 100},
				{Name: "amount", Matched: 3, Compared: 4, MatchPct: 75},
				{Name: "note", Matched: 4, Compared: 4, MatchPct: 100},
			}, r.Columns, "qty changed type, so it is not compared")
			require.InDelta(t, 60.0, r.Pct(2*r.FullMatch), 0.001)

			s := r.Sample
			require.NotNil(t, s)
			require.Equal(t, []string{"id", "PROD__amount", "DEV__amount"}, s.Differing.Columns)
			require.Len(t, s.Differing.Rows, 1)
			row := s.Differing.Rows[0]
			require.Equal(t, []float64{2, 10, 12.5}, []float64{num(t, row[0]), num(t, row[1]), num(t, row[2])})
			require.Equal(t, []string{"id", "day", "amount", "note", "qty"}, s.SourceOnly.Columns)
			require.Len(t, s.SourceOnly.Rows, 1)
			require.InDelta(t, 5.0, num(t, s.SourceOnly.Rows[0][0]), 0)
			require.Equal(t, []string{"id", "day", "amount", "note", "qty", "extra"}, s.TargetOnly.Columns)
			require.Len(t, s.TargetOnly.Rows, 1)
			require.InDelta(t, 6.0, num(t, s.TargetOnly.Rows[0][0]), 0)

			p := params(e)
			p.Decimals = 4
			res, err = tablediff.Diff(ctx, p)
			require.NoError(t, err)
			require.Equal(t, int64(2), res.Rows.FullMatch)
			require.Equal(t, int64(2), res.Rows.Columns[1].Matched)
			require.Len(t, res.Rows.Sample.Differing.Rows, 2)

			p = params(e)
			p.Where = "id <> 2"
			p.Sample = false
			res, err = tablediff.Diff(ctx, p)
			require.NoError(t, err)
			require.Equal(t, [3]int64{3, 3, 0}, [3]int64{res.Rows.Joined, res.Rows.FullMatch, res.Rows.PartialMatch})
			require.Nil(t, res.Rows.Sample)

			p = params(e)
			p.SkipColumns = []string{"amount", "qty", "extra"}
			res, err = tablediff.Diff(ctx, p)
			require.NoError(t, err)
			require.True(t, res.Schema.Match())
			require.Equal(t, int64(4), res.Rows.FullMatch)
			require.Empty(t, res.Rows.Sample.Differing.Rows)

			p = params(e)
			p.Limit = 0
			res, err = tablediff.Diff(ctx, p)
			require.NoError(t, err)
			require.Nil(t, res.Rows.Sample, "a limit of 0 reads no sample")
		})
	}
}

// Scenario: keys that do not identify a row are refused before any row is
// compared, with how many key values repeat and in how many rows (unless
// the check is skipped, when pairs are counted); a key or
// skipped column a side lacks is named with the side's columns; no key at
// all is ErrNoKeys. On both engines.
func TestDiffRefusesBadKeys(t *testing.T) {
	t.Parallel()
	for _, c := range engines {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := seed(t, c)
			ctx := t.Context()

			p := params(e)
			p.Keys = []string{"day"}
			_, err := tablediff.Diff(ctx, p)
			var nu *tablediff.NotUniqueError
			require.ErrorAs(t, err, &nu)
			require.Equal(t, "prod", nu.Side.Name)
			require.Equal(t, [2]int64{2, 4}, [2]int64{nu.Values, nu.Rows})
			require.Contains(t, err.Error(), "the keys (day) are not unique in prod (shop.orders): 2 key values appear more than once, in 4 rows")

			// SQLMesh's --skip-grain-check: compared anyway, each of the two
			// days shared by two rows on both sides joining 2 x 2 pairs.
			p.SkipKeyCheck = true
			res, err := tablediff.Diff(ctx, p)
			require.NoError(t, err)
			require.Equal(t, int64(8), res.Rows.Joined)
			p.SkipKeyCheck = false

			p.Keys = []string{"extra"}
			_, err = tablediff.Diff(ctx, p)
			var uc *tablediff.UnknownColumnError
			require.ErrorAs(t, err, &uc)
			require.Equal(t, "prod", uc.Side.Name)
			require.Contains(t, err.Error(), "key extra: prod (shop.orders) has no such column; its columns are id, day, amount, note, qty")

			p = params(e)
			p.SkipColumns = []string{"nope"}
			_, err = tablediff.Diff(ctx, p)
			require.ErrorAs(t, err, &uc)
			require.Equal(t, "skipped column", uc.Role)

			p = params(e)
			p.Keys = nil
			_, err = tablediff.Diff(ctx, p)
			require.ErrorIs(t, err, tablediff.ErrNoKeys)

			p = params(e)
			p.Where = "1 = 1; DROP TABLE shop.orders"
			_, err = tablediff.Diff(ctx, p)
			require.Error(t, err)
			n, qerr := e.Query(ctx, "SELECT count(*) FROM shop.orders")
			require.NoError(t, qerr, "the table is still there")
			require.Equal(t, "5", fmt.Sprint(n.Rows[0][0]))
		})
	}
}

// Scenario: an empty side. Every row of the other is counted as only
// there, no percentage divides by zero, and nothing joins.
func TestDiffWithAnEmptySide(t *testing.T) {
	t.Parallel()
	e := seed(t, engines[0])
	_, err := e.Query(context.Background(), "DELETE FROM shop__dev.orders")
	require.NoError(t, err)
	res, err := tablediff.Diff(t.Context(), params(e))
	require.NoError(t, err)
	r := res.Rows
	require.Equal(t, [4]int64{5, 0, 0, 5}, [4]int64{r.SourceCount, r.TargetCount, r.Joined, r.SourceOnly})
	require.InDelta(t, 100.0, r.Pct(r.SourceOnly), 0.001)
	for _, c := range r.Columns {
		require.Zero(t, c.MatchPct)
	}
	require.Len(t, r.Sample.SourceOnly.Rows, 5)
}
