package model_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/model"
)

func parseErr(t *testing.T, src string) *model.Error {
	t.Helper()
	_, err := model.ParseFile("models/m.sql", []byte(src), model.Defaults{})
	var me *model.Error
	require.True(t, errors.As(err, &me), "want a *model.Error, got %v", err)
	return me
}

// Scenario: a SQLMesh model moves over with cron_tz, stamp and the built-in
// source signal; each is kept on the model.
func TestAttributes_Honoured(t *testing.T) {
	t.Parallel()
	m := mustParse(t, `MODEL (
  name s.t,
  cron '0 2 * * *',
  cron_tz 'America/Los_Angeles',
  stamp 'v2',
  signals [source_landed(source := raw.events)],
);
SELECT 1`)
	require.Equal(t, "America/Los_Angeles", m.CronTZ)
	require.Equal(t, "v2", m.Stamp)
	require.Equal(t, []model.Signal{{Name: "source_landed", Source: "raw.events", Pos: model.Pos{File: "models/m.sql", Line: 6, Col: 12}}}, m.Signals)

	m = mustParse(t, "MODEL (name s.t, cron_tz UTC, signals (source_landed(source := 'RAW.Events'))); SELECT 1")
	require.Empty(t, m.CronTZ, "UTC is the default and is stored as none")
	require.Equal(t, "raw.events", m.Signals[0].Source)
}

// Scenario: bad values of the honoured attributes are named errors at their
// line, and an unknown (Python) signal says what gapless offers instead.
func TestAttributes_BadValues(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, src, want string }{
		{"unknown zone", "MODEL (name s.t,\n cron_tz 'Mars/Olympus');\nSELECT 1",
			"models/m.sql:2:10: bad cron_tz 'Mars/Olympus': not an IANA time zone name"},
		{"python signal", "MODEL (name s.t,\n signals [one_week_ago(arg := 1)]);\nSELECT 1",
			"models/m.sql:2:11: unknown signal one_week_ago: SQLMesh signals are Python functions, which gapless does not run; gapless offers the built-in signal source_landed"},
		{"signal without source", "MODEL (name s.t, signals [source_landed()]); SELECT 1",
			"models/m.sql:1:27: signal source_landed needs the source it waits for"},
		{"signal bad argument", "MODEL (name s.t, signals [source_landed(sorce := raw.e)]); SELECT 1",
			"models/m.sql:1:41: signal source_landed has no argument sorce; it takes source := schema.table; did you mean source?"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			me := parseErr(t, tc.src)
			require.Contains(t, me.Error(), tc.want)
			require.Equal(t, model.CodeBadValue, me.Code)
		})
	}
}

// Scenario: SQLMesh attributes that only describe a model load with a
// warning naming the attribute and line; those whose absence would change
// results are refused at their line, saying why.
func TestAttributes_WarnedAndRefused(t *testing.T) {
	t.Parallel()
	m := mustParse(t, `MODEL (
  name s.t,
  project 'repo_a',
  formatting false,
  ignored_rules ['ambiguousorinvalidcolumn'],
  references (customer_id),
  optimize_query true,
);
SELECT 1`)
	require.Len(t, m.Warnings, 5)
	for i, attr := range []string{"project", "formatting", "ignored_rules", "references", "optimize_query"} {
		require.Equal(t, attr, m.Warnings[i].Attr)
		require.Equal(t, i+3, m.Warnings[i].Pos.Line)
		require.Contains(t, m.Warnings[i].String(), "models/m.sql:")
		require.Contains(t, m.Warnings[i].Msg, "attribute "+attr+" is ignored: ")
	}

	for _, attr := range []string{"gateway other", "session_properties (query_timeout := 10)", "physical_version 1",
		"virtual_properties (creatable_type := SECURE)", "depends_on [a.b]", "grants ('select' := ['r'])"} {
		me := parseErr(t, "MODEL (name s.t,\n  "+attr+");\nSELECT 1")
		require.Equal(t, model.CodeUnknownAttribute, me.Code, attr)
		require.Equal(t, 2, me.Pos.Line, attr)
		require.Contains(t, me.Msg, "is not supported by gapless and ignoring it would change results", attr)
	}

	me := parseErr(t, "MODEL (name s.t, project 'a', project 'b'); SELECT 1")
	require.Equal(t, model.CodeDuplicateAttribute, me.Code)
}

// Scenario: SEED takes batch_size inside its kind; a $root path is kept as
// written for the project loader to resolve.
func TestAttributes_SeedBatchSize(t *testing.T) {
	t.Parallel()
	m := mustParse(t, "MODEL (name s.t, kind SEED (path '$root/seeds/x.csv', batch_size 2));")
	require.Equal(t, 2, m.BatchSize)
	require.Equal(t, "$root/seeds/x.csv", m.SeedPath)
	me := parseErr(t, "MODEL (name s.t, kind SEED (path 'x.csv', batch_size 0));")
	require.Equal(t, model.CodeBadValue, me.Code)
}

// Scenario: a blueprint file is read into its blueprints, and each applied
// gives a model of its own name and query.
func TestBlueprints(t *testing.T) {
	t.Parallel()
	src := []byte(`MODEL (
  name @{customer}.orders,
  kind FULL,
  blueprints (
    (customer := customer1, field_a := x, region := 'eu'),
    (customer := customer2, field_a := y, region := 'us')
  )
);
-- @customer stays in a comment
SELECT @field_a AS a, @BLUEPRINT_VAR('region') AS region, '@customer' AS lit, @BLUEPRINT_VAR('missing', 7) AS d`)
	bps, err := model.Blueprints("models/m.sql", src)
	require.NoError(t, err)
	require.Len(t, bps, 2)
	require.Equal(t, "blueprint 2 (customer := customer2, field_a := y, region := 'us')", bps[1].Label())
	require.Equal(t, 6, bps[1].Pos.Line)

	m, err := model.ParseFile("models/m.sql", bps[1].Apply(src), model.Defaults{})
	require.NoError(t, err)
	require.Equal(t, "customer2.orders", m.Name)
	require.Equal(t, "-- @customer stays in a comment\nSELECT y AS a, 'us' AS region, '@customer' AS lit, 7 AS d", m.Query)

	none, err := model.Blueprints("models/m.sql", []byte("MODEL (name s.t, tags [blueprints]); SELECT 1"))
	require.NoError(t, err)
	require.Nil(t, none)

	for _, tc := range []struct{ name, src, want string }{
		{"different variables", "MODEL (name @{c}.t,\n blueprints ((c := a),\n (d := b))); SELECT 1",
			"models/m.sql:3:2: blueprint 2 sets (d) but blueprint 1 sets (c)"},
		{"empty blueprint", "MODEL (name @{c}.t, blueprints ((c := a), ())); SELECT 1",
			"models/m.sql:1:43: blueprint 2 sets no variable"},
		{"twice", "MODEL (name @{c}.t, blueprints ((c := a, c := b))); SELECT 1",
			"models/m.sql:1:42: blueprint 1 sets c twice"},
		{"not a list", "MODEL (name @{c}.t, blueprints c); SELECT 1",
			"models/m.sql:1:32: expected a list of blueprints"},
	} {
		_, err := model.Blueprints("models/m.sql", []byte(tc.src))
		require.ErrorContains(t, err, tc.want, tc.name)
	}
}

// Scenario: whatever a file holds, reading its blueprints and applying them
// never panics, and a file that parses with blueprints parses once applied.
func FuzzBlueprints(f *testing.F) {
	for _, s := range []string{
		"MODEL (name @{c}.t, blueprints ((c := a), (c := b))); SELECT @c, @{c}, @BLUEPRINT_VAR('c'), @BLUEPRINT_VAR('x', 1)",
		"MODEL (name @{c}.t, blueprints [(c := 'a')]); SELECT '@{c}' -- @c\n/* @c */",
		"MODEL (name @{c}.t, blueprints (c := a)); SELECT @BLUEPRINT_VAR(",
		"MODEL (blueprints ((",
		"@{", "MODEL (name s.t, blueprints ((c := a), (c :=",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		bps, err := model.Blueprints("m.sql", []byte(src))
		if err != nil {
			var me *model.Error
			require.True(t, errors.As(err, &me), "%v", err)
			return
		}
		for _, b := range bps {
			_, _ = model.ParseFile("m.sql", b.Apply([]byte(src)), model.Defaults{})
		}
	})
}
