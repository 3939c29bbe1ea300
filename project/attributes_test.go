package project

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/model"
)

const blueprintFile = `MODEL (
  name @{customer}.orders,
  kind FULL,
  blueprints (
    (customer := customer1, threshold := 10),
    (customer := customer2, threshold := 20)
  )
);
SELECT @threshold AS threshold, '@{customer}' AS customer`

// Scenario: one file with two blueprints loads as two models, each with its
// own name, query, fingerprint and physical table.
func TestBlueprintsMakeOneModelEach(t *testing.T) {
	t.Parallel()
	pr, err := load(t, writeProject(t, map[string]string{"models/orders.sql": blueprintFile}))
	require.NoError(t, err)
	a, b := pr.Models["customer1.orders"], pr.Models["customer2.orders"]
	require.NotNil(t, a)
	require.NotNil(t, b)
	require.Len(t, pr.Models, 2)
	require.Contains(t, a.Query, "SELECT 10 AS threshold, 'customer1' AS customer")
	require.Contains(t, b.Query, "SELECT 20 AS threshold, 'customer2' AS customer")
	require.Equal(t, "customer := customer2, threshold := 20", b.Blueprint)
	sa, sb := pr.Snapshots["customer1.orders"], pr.Snapshots["customer2.orders"]
	require.NotEqual(t, sa.Fingerprint, sb.Fingerprint)
	require.NotEqual(t, sa.Version, sb.Version)
	require.NotEqual(t, sa.PhysicalTable(), sb.PhysicalTable())
	require.Equal(t, filepath.Join("models", "orders.sql"), b.Path)
}

// Scenario: a blueprint whose values break the model is an error naming the
// file, the line and the blueprint; the other blueprint's model is fine.
func TestBlueprintErrorNamesTheBlueprint(t *testing.T) {
	t.Parallel()
	src := "MODEL (\n  name @{customer}.orders,\n  kind FULL,\n  blueprints ((customer := good), (customer := \"bad.name\"))\n);\nSELECT 1 AS x"
	_, err := load(t, writeProject(t, map[string]string{"models/orders.sql": src}))
	require.Error(t, err)
	var me *model.Error
	require.True(t, errors.As(err, &me))
	require.Contains(t, me.Error(), filepath.Join("models", "orders.sql")+":2:")
	require.Contains(t, me.Error(), `blueprint 2 (customer := "bad.name"): bad model name`)
	require.NotContains(t, err.Error(), "blueprint 1")
}

// Scenario: a SEED written with SQLMesh's $root path reads the CSV from the
// project folder, wherever the model file is; its version hashes the CSV.
func TestSeedRootPath(t *testing.T) {
	t.Parallel()
	dir := writeProject(t, map[string]string{
		"models/deep/er/seed.sql": "MODEL (name s.seed, kind SEED (path '$root/seeds/x.csv', batch_size 1));",
		"seeds/x.csv":             "id\n1\n2\n",
	})
	pr, err := load(t, dir)
	require.NoError(t, err)
	m := pr.Models["s.seed"]
	require.Equal(t, filepath.Join("..", "..", "..", "seeds", "x.csv"), m.SeedPath)
	require.Equal(t, 1, m.BatchSize)

	_, err = load(t, writeProject(t, map[string]string{"models/seed.sql": "MODEL (name s.seed, kind SEED (path '$root/seeds/none.csv'));"}))
	require.ErrorContains(t, err, "seed s.seed: cannot read ../seeds/none.csv")
}

// Scenario: a model with the built-in source signal gets the source as a
// parent even though its query does not read it; a signal naming an unknown
// source or a model is an error at the signal, with a suggestion.
func TestSignalNamesASource(t *testing.T) {
	t.Parallel()
	signalled := "MODEL (name stg.daily, kind FULL, signals [source_landed(source := raw.events)]);\nSELECT 1 AS x"
	pr, err := load(t, writeProject(t, map[string]string{"sources/events.yaml": eventsSource, "models/daily.sql": signalled}))
	require.NoError(t, err)
	require.Equal(t, []string{"raw.events"}, pr.Graph.Parents("stg.daily"))
	require.Equal(t, []string{"raw.events"}, pr.Snapshots["stg.daily"].Parents)

	typo := "MODEL (name stg.daily, kind FULL,\n signals [source_landed(source := raw.event)]);\nSELECT 1 AS x"
	_, err = load(t, writeProject(t, map[string]string{"sources/events.yaml": eventsSource, "models/daily.sql": typo}))
	require.ErrorContains(t, err, filepath.Join("models", "daily.sql")+":2:11: model stg.daily: signal source_landed names raw.event, which is not a source of the project; did you mean raw.events?")

	toModel := "MODEL (name stg.daily, kind FULL, signals [source_landed(source := stg.other)]);\nSELECT 1 AS x"
	_, err = load(t, writeProject(t, map[string]string{"models/daily.sql": toModel, "models/other.sql": "MODEL (name stg.other, kind FULL); SELECT 1 AS y"}))
	require.ErrorContains(t, err, "signal source_landed names stg.other, a FULL model, not a source")

	_, err = load(t, writeProject(t, map[string]string{"models/daily.sql": typo}))
	require.ErrorContains(t, err, "the project declares no source")
}

// Scenario: warnings about describing attributes reach the project, once per
// place even when several blueprints share the file; stamp changes a
// model's version, cron_tz only its fingerprint.
func TestAttributesWarningsAndFingerprints(t *testing.T) {
	t.Parallel()
	src := "MODEL (name @{c}.t, kind FULL,\n project 'x',\n blueprints ((c := a), (c := b)));\nSELECT 1 AS x"
	pr, err := load(t, writeProject(t, map[string]string{"models/t.sql": src}))
	require.NoError(t, err)
	ws := pr.Warnings()
	require.Len(t, ws, 1)
	require.Equal(t, "project", ws[0].Attr)
	require.Equal(t, 2, ws[0].Pos.Line)

	base := "MODEL (name s.t, kind FULL, cron '0 2 * * *'%s); SELECT 1 AS x"
	snap := func(extra string) (string, string) {
		pr, err := load(t, writeProject(t, map[string]string{"models/t.sql": fmt.Sprintf(base, extra)}))
		require.NoError(t, err)
		s := pr.Snapshots["s.t"]
		return s.Fingerprint.String(), s.Version
	}
	f0, v0 := snap("")
	f1, v1 := snap(", cron_tz 'Asia/Tokyo'")
	f2, v2 := snap(", stamp 'again'")
	require.NotEqual(t, f0, f1)
	require.Equal(t, v0, v1, "cron_tz is metadata")
	require.NotEqual(t, v0, v2, "stamp forces a new version")
	require.NotEqual(t, f0, f2)
}

// Scenario: SQLMesh's own blueprint example, @customer (not @{customer}) in
// the name and the query, loads as one model per customer reading that
// customer's table.
func TestBlueprintsDocsExample(t *testing.T) {
	t.Parallel()
	src := `MODEL (
  name @customer.some_table,
  kind FULL,
  blueprints (
    (customer := customer1, field_a := x, field_b := y),
    (customer := customer2, field_a := z, field_b := w)
  )
);
SELECT @field_a, @{field_b} AS field_b FROM @customer.some_source`
	ext := func(schema string) string {
		return "MODEL (name " + schema + ".some_source, kind EXTERNAL, columns (x INT, y INT, z INT, w INT));"
	}
	pr, err := load(t, writeProject(t, map[string]string{"models/t.sql": src, "models/e1.sql": ext("customer1"), "models/e2.sql": ext("customer2")}))
	require.NoError(t, err)
	require.Equal(t, []string{"customer1.some_source"}, pr.Graph.Parents("customer1.some_table"))
	require.Equal(t, []string{"customer2.some_source"}, pr.Graph.Parents("customer2.some_table"))
	require.Contains(t, pr.Models["customer2.some_table"].Query, "SELECT z, w AS field_b FROM customer2.some_source")
}
