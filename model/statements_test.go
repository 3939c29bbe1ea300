package model_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/model"
)

// Scenario: SQLMesh's on-virtual-update block (ON_VIRTUAL_UPDATE_BEGIN;
// ... ON_VIRTUAL_UPDATE_END;) after the query is taken out of the
// post-statements, markers dropped, each statement where it is written;
// an unbalanced or empty block is named at its marker.
func TestParseFile_OnVirtualUpdateBlock(t *testing.T) {
	t.Parallel()
	m := mustParse(t, `MODEL (name shop.items, kind FULL);
SELECT 1 AS id;
INSERT INTO ops.log VALUES (1);
on_virtual_update_begin;
GRANT SELECT ON @this_model TO reader;
INSERT INTO ops.vu SELECT count(*) FROM @this_model;
ON_VIRTUAL_UPDATE_END;
`)
	require.Equal(t, []model.Statement{{SQL: "INSERT INTO ops.log VALUES (1)", Pos: model.Pos{File: "models/m.sql", Line: 3, Col: 1}}}, m.PostStatements)
	require.Equal(t, []model.Statement{
		{SQL: "GRANT SELECT ON @this_model TO reader", Pos: model.Pos{File: "models/m.sql", Line: 5, Col: 1}},
		{SQL: "INSERT INTO ops.vu SELECT count(*) FROM @this_model", Pos: model.Pos{File: "models/m.sql", Line: 6, Col: 1}},
	}, m.OnVirtualUpdate)

	for _, tc := range []struct{ src, want string }{
		{"MODEL (name s.t);\nSELECT 1;\nON_VIRTUAL_UPDATE_BEGIN;\nSELECT 2;\n", "models/m.sql:3:1: ON_VIRTUAL_UPDATE_BEGIN; is never closed"},
		{"MODEL (name s.t);\nSELECT 1;\nON_VIRTUAL_UPDATE_END;\n", "models/m.sql:3:1: ON_VIRTUAL_UPDATE_END without ON_VIRTUAL_UPDATE_BEGIN"},
		{"MODEL (name s.t);\nSELECT 1;\nON_VIRTUAL_UPDATE_BEGIN;\nON_VIRTUAL_UPDATE_END;\n", "models/m.sql:3:1: empty ON_VIRTUAL_UPDATE_BEGIN block"},
		{"MODEL (name s.t);\nSELECT 1;\nON_VIRTUAL_UPDATE_BEGIN;\nON_VIRTUAL_UPDATE_BEGIN;\nSELECT 2;\nON_VIRTUAL_UPDATE_END;\n", "models/m.sql:4:1: ON_VIRTUAL_UPDATE_BEGIN inside the block opened on line 3"},
	} {
		_, err := model.ParseFile("models/m.sql", []byte(tc.src), model.Defaults{})
		require.ErrorContains(t, err, tc.want, tc.src)
	}
}
