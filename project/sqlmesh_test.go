package project

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/model"
	"github.com/gapless-dev/gapless/sqlparse"
)

func TestLoad_ExternalModelsYAML(t *testing.T) {
	t.Parallel()
	// Scenario: a SQLMesh project (config.yaml, no gapless.yaml) whose model
	// reads a table declared in external_models.yaml by its fully qualified
	// name in the warehouse's catalog: it loads as an EXTERNAL model with
	// its columns, and the model reading it depends on it.
	dir := writeProject(t, map[string]string{
		"config.yaml":          "gateways:\n  local:\n    connection:\n      type: duckdb\n      database: db.db\nmodel_defaults:\n  dialect: duckdb\n  start: 2024-01-01\n",
		"external_models.yaml": "- name: '\"db\".\"raw\".\"events\"'\n  description: landed by the loader\n  columns:\n    id: INT\n    \"Event Time\": TIMESTAMP\n",
		"models/daily.sql":     "MODEL (name sqlmesh_example.daily, kind FULL);\nSELECT id FROM raw.events",
	})
	pr, cfg, err := Load(context.Background(), dir, parser)
	require.NoError(t, err)
	require.True(t, cfg.SQLMesh)
	ext := pr.Models["raw.events"]
	require.NotNil(t, ext)
	require.Equal(t, model.KindExternal, ext.Kind)
	require.False(t, ext.Source)
	require.Equal(t, []model.Column{{Name: "id", Type: "INT"}, {Name: "Event Time", Type: "TIMESTAMP"}}, ext.Columns)
	require.Equal(t, "landed by the loader", ext.Description)
	require.Equal(t, []string{"raw.events"}, pr.Graph.Parents("sqlmesh_example.daily"))
	require.Contains(t, pr.Snapshots, "raw.events")
}

func TestLoad_ExternalModelsErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"another catalog", map[string]string{
			"config.yaml":          "gateways:\n  local:\n    connection:\n      type: duckdb\n      database: db.db\n",
			"external_models.yaml": "- name: raw.ok\n  columns: {id: INT}\n- name: other.raw.events\n  columns: {id: INT}\n",
			"models/x.sql":         "MODEL (name m.x, kind FULL);\nSELECT 1 AS id",
		}, "external_models.yaml:3:1: external model other.raw.events: catalog other is not the warehouse's (db)"},
		{"a bad type", map[string]string{
			"external_models.yaml": "- name: raw.events\n  columns: {id: 'INT)'}\n",
			"models/x.sql":         "MODEL (name m.x, kind FULL);\nSELECT 1 AS id",
		}, "external_models.yaml:1:1: external model raw.events:"},
		{"the name of a model", map[string]string{
			"external_models.yaml": "- name: raw.events\n  columns: {id: INT}\n",
			"models/events.sql":    "MODEL (name raw.events, kind FULL);\nSELECT 1 AS id",
		}, "external_models.yaml:1:1: external model raw.events is already defined in"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, _, err := Load(context.Background(), writeProject(t, tt.files), parser)
			require.Error(t, err)
			require.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestLoad_UndeclaredTables(t *testing.T) {
	t.Parallel()
	// Scenario: what create_external_models declares: the tables read that
	// nothing declares, once each, in model order; the project still loads.
	dir := writeProject(t, map[string]string{
		"external_models.yaml": "- name: raw.known\n  columns: {id: INT}\n",
		"models/a.sql":         "MODEL (name m.a, kind FULL);\nSELECT k.id FROM raw.known k JOIN raw.orders o ON o.id = k.id JOIN raw.users u ON u.id = k.id",
		"models/b.sql":         "MODEL (name m.b, kind FULL);\nSELECT * FROM raw.orders JOIN m.a USING (id)",
	})
	var undeclared []sqlparse.TableRef
	pr, _, err := LoadWith(context.Background(), dir, Options{Parser: func() (*sqlparse.Parser, error) { return parser, nil }, Undeclared: &undeclared})
	require.NoError(t, err)
	var names []string
	for _, r := range undeclared {
		names = append(names, r.Schema+"."+r.Name)
	}
	require.Equal(t, []string{"raw.orders", "raw.users"}, names)
	require.Equal(t, model.KindExternal, pr.Models["raw.orders"].Kind)

	// Without Undeclared they are errors, as before.
	_, _, err = Load(context.Background(), dir, parser)
	require.ErrorContains(t, err, "model m.a reads raw.orders, which is neither a model, a source nor a declared EXTERNAL table")
}
