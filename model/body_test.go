package model_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/model"
)

// Scenario: a SQLMesh model file with pre-statements (an @DEF and a SET),
// the query, post-statements and an inline audit, whose header has no
// trailing ';' and double-quoted strings: each statement is kept as
// written, where it was written, and the query is the SELECT.
func TestParseFile_StatementsAroundTheQuery(t *testing.T) {
	t.Parallel()
	src := `MODEL (
  name shop.orders,
  kind FULL,
  description "Orders; one row each",
  owner "jen",
  audits (not_null(columns := (id, ts)), assert_positive, accepted_range(column := amount, min_v := 0), positive_ids)
)

@DEF(min_amount, 0);
SET threads = 2;
/* the query */
SELECT id, ts, amount, ';' AS semi FROM raw.orders WHERE amount > @min_amount;
CREATE INDEX IF NOT EXISTS orders_id ON @this_model (id);
AUDIT (name positive_ids, blocking false);
SELECT * FROM @this_model WHERE id < 0;
`
	m := mustParse(t, src)
	require.Equal(t, "Orders; one row each", m.Description)
	require.Equal(t, "jen", m.Owner)
	require.Equal(t, "/* the query */\nSELECT id, ts, amount, ';' AS semi FROM raw.orders WHERE amount > @min_amount", m.Query)
	require.Equal(t, model.Pos{File: "models/m.sql", Line: 11, Col: 1}, m.QueryPos)
	require.Equal(t, []model.Statement{
		{SQL: "@DEF(min_amount, 0)", Pos: model.Pos{File: "models/m.sql", Line: 9, Col: 1}},
		{SQL: "SET threads = 2", Pos: model.Pos{File: "models/m.sql", Line: 10, Col: 1}},
	}, m.PreStatements)
	require.Equal(t, []model.Statement{
		{SQL: "CREATE INDEX IF NOT EXISTS orders_id ON @this_model (id)", Pos: model.Pos{File: "models/m.sql", Line: 13, Col: 1}},
	}, m.PostStatements)
	require.Equal(t, []model.AuditRef{
		{Name: "not_null", Args: []model.AuditArg{{Name: "columns", SQL: "(id, ts)", Pos: model.Pos{File: "models/m.sql", Line: 6, Col: 20}}},
			Pos: model.Pos{File: "models/m.sql", Line: 6, Col: 11}},
		{Name: "assert_positive", Pos: model.Pos{File: "models/m.sql", Line: 6, Col: 42}},
		{Name: "accepted_range", Args: []model.AuditArg{
			{Name: "column", SQL: "amount", Pos: model.Pos{File: "models/m.sql", Line: 6, Col: 74}},
			{Name: "min_v", SQL: "0", Pos: model.Pos{File: "models/m.sql", Line: 6, Col: 92}},
		}, Pos: model.Pos{File: "models/m.sql", Line: 6, Col: 59}},
		{Name: "positive_ids", Pos: model.Pos{File: "models/m.sql", Line: 6, Col: 105}},
	}, m.Audits)
	require.Equal(t, []model.AuditDef{{
		Name: "positive_ids", Blocking: false, Query: "SELECT * FROM @this_model WHERE id < 0",
		QueryPos: model.Pos{File: "models/m.sql", Line: 15, Col: 1}, Pos: model.Pos{File: "models/m.sql", Line: 14, Col: 1},
	}}, m.InlineAudits)
}

// Scenario: the audits attribute takes SQLMesh's spellings: a [...] list,
// name = value, a single call, quoted and nested values kept as written.
func TestParseFile_AuditsSpellings(t *testing.T) {
	t.Parallel()
	m := mustParse(t, "MODEL (name s.t, audits [accepted_values(column = status, is_in = ('a', 'b, c')), number_of_rows(threshold := 10)]);\nSELECT 1")
	require.Len(t, m.Audits, 2)
	require.Equal(t, "status", m.Audits[0].Args[0].SQL)
	require.Equal(t, "('a', 'b, c')", m.Audits[0].Args[1].SQL)
	require.Equal(t, "10", m.Audits[1].Args[0].SQL)
	m = mustParse(t, "MODEL (name s.t, audits forall(criteria := (a > 0, b IN (1, 2))))\nSELECT 1")
	require.Equal(t, "(a > 0, b IN (1, 2))", m.Audits[0].Args[0].SQL)
	require.Equal(t, "SELECT 1", m.Query)
}

// Scenario: a model written before pre- and post-statements existed, with
// no audits, encodes to the same JSON as before (plan files re-encode to
// their own bytes): the new fields are omitted when empty.
func TestParseFile_NewFieldsOmittedWhenEmpty(t *testing.T) {
	t.Parallel()
	b, err := json.Marshal(mustParse(t, "MODEL (name s.t); SELECT 1"))
	require.NoError(t, err)
	for _, f := range []string{"PreStatements", "PostStatements", "Audits", "InlineAudits"} {
		require.NotContains(t, string(b), f)
	}
}

// Scenario: problems in statements and audits are named with the file and
// line.
func TestParseFile_StatementErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ src, want string }{
		{"MODEL (name s.t);\n@DEF(x, 1);\nSET a = 1;", "models/bad.sql:2:1: missing query: a VIEW model needs a query (SELECT, WITH, FROM or VALUES), and none of the 2 statements after the MODEL header is one"},
		{"MODEL (name s.t);\nSELECT 1;\nAUDIT (name a);", "models/bad.sql:3:1: audit a has no query: write the SELECT that returns the offending rows after AUDIT (...);"},
		{"MODEL (name s.t);\nSELECT 1;\nAUDIT (nam a);\nSELECT 1", "models/bad.sql:3:8: unknown AUDIT attribute nam: did you mean name?"},
		{"MODEL (name s.t);\nSELECT 1;\nAUDIT (blocking false);\nSELECT 1", "models/bad.sql:3:1: AUDIT header has no name: add name <audit_name>"},
		{"MODEL (name s.t);\nSELECT 1;\nAUDIT (name a);\nSELECT 1;\nAUDIT (name a);\nSELECT 2", "models/bad.sql:5:1: duplicate inline audit a (first defined on line 3)"},
		{"MODEL (name s.t, audits (not_null(id)));\nSELECT 1", "models/bad.sql:1:35: audit not_null: argument id has no value: write id := value"},
		{"MODEL (name s.t, audits (not_null(columns := )));\nSELECT 1", "models/bad.sql:1:46: audit not_null argument columns has no value"},
		{"MODEL (name s.t, audits (x(a := 1, a := 2)));\nSELECT 1", "models/bad.sql:1:36: audit x: argument a is given twice"},
		{"MODEL (name s.t, audits (1));\nSELECT 1", "models/bad.sql:1:26: expected an audit name in audits, found '1'"},
		{"MODEL (name s.t, kind SEED (path 'a.csv'));\nSELECT 1", "models/bad.sql:2:1: a SEED model takes no query, but SQL follows the MODEL header"},
	} {
		_, err := model.ParseFile("models/bad.sql", []byte(tc.src), model.Defaults{})
		require.EqualError(t, err, tc.want, tc.src)
	}
	_, err := model.ParseAuditFile("audits/a.sql", []byte("SELECT 1;"))
	require.EqualError(t, err, `audits/a.sql:1:1: expected an AUDIT (name ...) header, found "SELECT 1": each audit's query follows its own AUDIT header`)
	_, err = model.ParseAuditFile("audits/a.sql", []byte("AUDIT (name a); SELECT 1; AUDIT (name a); SELECT 2;"))
	require.EqualError(t, err, "audits/a.sql:1:27: duplicate audit a (first defined on line 1)")
	_, err = model.ParseAuditFile("audits/a.sql", []byte("AUDIT (name a, standalone true); SELECT 1"))
	require.ErrorContains(t, err, "audits/a.sql:1:16: standalone audits are not supported by gapless")
}
