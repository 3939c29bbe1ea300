package config_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/config"
	"github.com/gapless-dev/gapless/model"
)

// Scenario: before_all and after_all are read from gapless.yaml and from
// SQLMesh's config.yaml, one statement per item, each with its file:line
// (a trailing ';' dropped, macros kept for execution); an empty item or a
// session-scoped one (SET, USE, CREATE TEMP ...) is refused at its line.
func TestEnvironmentStatements_Load(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ file, body string }{
		{config.FileName, "model_defaults:\n  start: '2024-01-01'\nbefore_all:\n  - CREATE TABLE IF NOT EXISTS ops.runs (env VARCHAR);\n  - \"INSERT INTO ops.runs VALUES (@this_env)\"\nafter_all:\n  - GRANT SELECT ON ops.runs TO reader\n"},
		{config.SQLMeshFile, "model_defaults:\n  dialect: duckdb\nbefore_all:\n  - CREATE TABLE IF NOT EXISTS ops.runs (env VARCHAR);\n  - \"INSERT INTO ops.runs VALUES (@this_env)\"\nafter_all:\n  - GRANT SELECT ON ops.runs TO reader\n"},
	} {
		dir := t.TempDir()
		writeFile(t, dir, c.file, c.body)
		cfg, err := config.LoadEnv(dir, nil)
		require.NoError(t, err, c.file)
		require.Equal(t, []model.Statement{
			{SQL: "CREATE TABLE IF NOT EXISTS ops.runs (env VARCHAR)", Pos: model.Pos{File: c.file, Line: 4, Col: 5}},
			{SQL: "INSERT INTO ops.runs VALUES (@this_env)", Pos: model.Pos{File: c.file, Line: 5, Col: 5}},
		}, cfg.BeforeAll, c.file)
		require.Equal(t, []model.Statement{{SQL: "GRANT SELECT ON ops.runs TO reader", Pos: model.Pos{File: c.file, Line: 7, Col: 5}}}, cfg.AfterAll)
	}
	for _, c := range []struct{ file, body, want string }{
		{config.FileName, "after_all:\n  - SELECT 1\n  - SET threads = 2\n", "gapless.yaml:3:5: after_all: item 2: SET changes a setting of the session that runs it"},
		{config.SQLMeshFile, "before_all:\n  - CREATE TEMP TABLE t (a INT)\n", "config.yaml:2:5: before_all: item 1: CREATE TEMP makes an object that lasts only as long as the session"},
		{config.FileName, "before_all:\n  - ' '\n", "gapless.yaml:2:5: before_all: item 1 is empty"},
	} {
		dir := t.TempDir()
		writeFile(t, dir, c.file, c.body)
		_, err := config.LoadEnv(dir, nil)
		require.ErrorContains(t, err, c.want)
	}
}
