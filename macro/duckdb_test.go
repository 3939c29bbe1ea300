package macro_test

import (
	"context"
	"math/big"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/macro"
	"github.com/gapless-dev/gapless/warehouse"
	"github.com/gapless-dev/gapless/warehouse/duckdb"
)

// Scenario: the SQL the operators generate runs on DuckDB and means what
// SQLMesh documents: a date spine includes both ends, @DEDUPLICATE keeps
// the first row of each partition, @PIVOT counts per value, @SAFE_DIV
// and @SAFE_ADD handle zero and NULL, the surrogate key is the MD5 of the
// '|'-joined values, @UNION keeps the columns both tables share, and
// @STAR reads the columns of a real table.
func TestOperators_RunOnDuckDB(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, err := duckdb.Open(ctx, "", duckdb.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.Close() })
	_, err = e.Query(ctx, `CREATE TABLE ev AS SELECT * FROM (VALUES
	  (1, DATE '2024-01-01', 'open', 10, NULL),
	  (1, DATE '2024-01-03', 'done', 0, 2),
	  (2, DATE '2024-01-02', 'open', NULL, NULL)) AS t(id, d, status, a, b)`)
	require.NoError(t, err)
	_, err = e.Query(ctx, `CREATE TABLE ev2 AS SELECT 3 AS id, 'x' AS status, 1.5 AS other`)
	require.NoError(t, err)

	env := &macro.Env{Columns: func(table string) ([]macro.Column, error) {
		cols, err := e.Columns(ctx, warehouse.Table{Schema: "main", Name: table})
		out := make([]macro.Column, len(cols))
		for i, c := range cols {
			out[i] = macro.Column{Name: c.Name, Type: c.Type}
		}
		return out, err
	}}
	query := func(sql string) [][]any {
		t.Helper()
		v := day
		v.Env = env
		out, err := macro.Render(sql, v, "duckdb")
		require.NoError(t, err)
		res, err := e.Query(ctx, out)
		require.NoError(t, err, out)
		return res.Rows
	}

	rows := query("WITH s AS (@DATE_SPINE('day', '2024-01-01', '2024-01-03')) SELECT count(*), min(date_day) = DATE '2024-01-01', max(date_day) = DATE '2024-01-03' FROM s")
	require.Equal(t, [][]any{{int64(3), true, true}}, rows)
	rows = query("WITH s AS (@DATE_SPINE('month', '2024-01-01', '2024-03-01')) SELECT count(*) FROM s")
	require.Equal(t, [][]any{{int64(3)}}, rows)

	rows = query("WITH x AS (@DEDUPLICATE(ev, [id], ['d DESC'])) SELECT id, status FROM x ORDER BY id")
	require.Equal(t, [][]any{{int32(1), "done"}, {int32(2), "open"}}, rows)

	rows = query("SELECT @PIVOT(status, ['open', 'done']) FROM ev")
	require.Equal(t, [][]any{{float64(2), float64(1)}}, normalise(rows))

	rows = query("SELECT @SAFE_DIV(a, b), @SAFE_ADD(a, b), @SAFE_SUB(a, b) FROM ev ORDER BY d")
	require.Equal(t, [][]any{{nil, float64(10), float64(10)}, {nil, nil, nil}, {float64(0), float64(2), float64(-2)}}, normalise(rows))

	rows = query("SELECT @GENERATE_SURROGATE_KEY(id, b) = md5('1|_sqlmesh_surrogate_key_null_') FROM ev ORDER BY d LIMIT 1")
	require.Equal(t, [][]any{{true}}, rows)

	rows = query("SELECT count(*), sum(id) FROM (@UNION('all', ev, ev2))")
	require.Equal(t, [][]any{{float64(4), float64(7)}}, normalise(rows))

	rows = query("SELECT @STAR(ev, e, exclude := [a, b], suffix := '_x') FROM ev AS e ORDER BY d LIMIT 1")
	require.Len(t, rows, 1)
	require.Len(t, rows[0], 3, "id, d and status: a and b are excluded")
	require.Equal(t, "open", rows[0][2])
	v := day
	v.Env = env
	out, err := macro.Render("SELECT @STAR(ev, e, exclude := [a, b], suffix := '_x') FROM ev AS e", v, "duckdb")
	require.NoError(t, err)
	require.Equal(t, `SELECT CAST("e"."id" AS INTEGER) AS "id_x", CAST("e"."d" AS DATE) AS "d_x", CAST("e"."status" AS VARCHAR) AS "status_x" FROM ev AS e`, out)
}

// normalise makes every number a float64, whatever integer or decimal type
// the engine returned.
func normalise(rows [][]any) [][]any {
	for _, r := range rows {
		for i, v := range r {
			switch x := v.(type) {
			case int32:
				r[i] = float64(x)
			case int64:
				r[i] = float64(x)
			case float32:
				r[i] = float64(x)
			case *big.Int:
				r[i] = float64(x.Int64())
			}
		}
	}
	return rows
}
