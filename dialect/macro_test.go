package dialect_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/dialect"
	"github.com/gapless-dev/gapless/macro"
	"github.com/gapless-dev/gapless/warehouse/duckdb"
)

// Scenario: @GENERATE_SURROGATE_KEY in a BigQuery model is written as
// SQLMesh writes it for BigQuery (TO_HEX around BigQuery's bytes MD5), and
// carried over to DuckDB it is the same hex digest SQLMesh's DuckDB form
// gives: a key does not change when a model moves between the two.
func TestSurrogateKeyInABigQueryModelCarriesOver(t *testing.T) {
	t.Parallel()
	const q = "SELECT @GENERATE_SURROGATE_KEY(a, b) AS k FROM (SELECT 1 AS a, CAST(NULL AS STRING) AS b) AS t"
	bq, _, err := macro.Expand(q, &macro.Env{}, "bigquery")
	require.NoError(t, err)
	require.Contains(t, bq, "TO_HEX(MD5(")
	onDuck, _, err := dialect.Transpile(bq, "bigquery", dialect.DuckDB)
	require.NoError(t, err)

	e, err := duckdb.Open(t.Context(), "", duckdb.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, e.Close()) })
	got, err := e.ReadOnlyQuery(t.Context(), onDuck)
	require.NoError(t, err, onDuck)
	want, err := e.ReadOnlyQuery(t.Context(), "SELECT md5(concat('1', '|', '_sqlmesh_surrogate_key_null_'))")
	require.NoError(t, err)
	require.Equal(t, want.Rows, got.Rows)
}
