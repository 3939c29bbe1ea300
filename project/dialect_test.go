package project

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/sqlparse"
)

// Scenario: a BigQuery-dialect model loads on each engine: its backquoted
// reference is a dependency, its query is the engine's SQL, and its
// fingerprint is the same whichever engine it was rewritten for (it covers
// the written text and the dialect, not the rewrite).
func TestLoad_ForeignDialectRewrittenPerEngineFingerprintOfTheWrittenText(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for name, body := range map[string]string{
		"models/raw.sql": "MODEL (name shop.raw, kind FULL);\nSELECT 1 AS id, 'eu' AS region\n",
		"models/bq.sql":  "MODEL (name shop.bq, kind FULL, dialect bigquery);\n-- a comment\nSELECT IF(region = \"eu\", 1, 0) AS is_eu,\n  CAST(id AS FLOAT64) AS f\nFROM `shop.raw`\n",
	} {
		p := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
	}
	load := func(engine string) *Project {
		pr, _, err := LoadWith(context.Background(), dir, Options{Engine: engine, Parser: func() (*sqlparse.Parser, error) { return parser, nil }})
		require.NoError(t, err)
		return pr
	}
	duck, pg := load("duckdb"), load("postgres")
	require.Equal(t, []string{"shop.raw"}, duck.Graph.Parents("shop.bq"))
	require.Contains(t, duck.Models["shop.bq"].Query, `CAST(id AS DOUBLE) AS f`)
	require.Contains(t, pg.Models["shop.bq"].Query, `CAST(id AS DOUBLE PRECISION) AS f`)
	require.Contains(t, pg.Models["shop.bq"].Query, `FROM "shop"."raw"`)
	require.Equal(t, duck.Snapshots["shop.bq"].Fingerprint, pg.Snapshots["shop.bq"].Fingerprint)
	// A DuckDB model's fingerprint still comes from the parser's canonical
	// form, as before.
	require.NotContains(t, duck.Snapshots["shop.raw"].Canonical, "ast:dialect")
	require.Contains(t, duck.Snapshots["shop.bq"].Canonical, "ast:dialect bigquery: SELECT IF")
}
