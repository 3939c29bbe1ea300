package audit_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/audit"
	"github.com/gapless-dev/gapless/internal/pgtest"
	"github.com/gapless-dev/gapless/internal/trinotest"
	"github.com/gapless-dev/gapless/macro"
	"github.com/gapless-dev/gapless/model"
	"github.com/gapless-dev/gapless/sqlparse"
	"github.com/gapless-dev/gapless/warehouse"
	"github.com/gapless-dev/gapless/warehouse/duckdb"
	"github.com/gapless-dev/gapless/warehouse/postgres"
	"github.com/gapless-dev/gapless/warehouse/trino"
)

// builtinCase is one built-in audit call with rows it must pass on and rows
// it must fail on, written as SQLMesh's documentation shows the audit.
type builtinCase struct {
	audit     string // the built-in's name
	call      string // as written in audits (...)
	good, bad string // SELECTs producing the table's rows
}

func vals(cols, rows string) string { return "SELECT * FROM (VALUES " + rows + ") AS v(" + cols + ")" }

var builtinCases = []builtinCase{
	{"not_null", "not_null(columns := (id, name))", vals("id, name", "(1, 'a'), (2, 'b')"), vals("id, name", "(1, 'a'), (2, NULL)")},
	{"unique_values", "unique_values(columns := (id))", vals("id, name", "(1, 'a'), (2, 'a')"), vals("id, name", "(1, 'a'), (1, 'b')")},
	{"unique_combination_of_columns", "unique_combination_of_columns(columns := (id, name))",
		vals("id, name", "(1, 'a'), (1, 'b')"), vals("id, name", "(1, 'a'), (1, 'a')")},
	{"accepted_values", "accepted_values(column := name, is_in := ('a', 'b'))", vals("name", "('a'), ('b')"), vals("name", "('a'), ('c')")},
	{"not_accepted_values", "not_accepted_values(column := name, is_in := ('x'))", vals("name", "('a')"), vals("name", "('a'), ('x')")},
	{"accepted_range", "accepted_range(column := id, min_v := 1, max_v := 2)", vals("id", "(1), (2)"), vals("id", "(0), (1)")},
	{"accepted_range", "accepted_range(column := id, min_v := 0, max_v := 3, inclusive := false)", vals("id", "(1), (2)"), vals("id", "(1), (3)")},
	{"number_of_rows", "number_of_rows(threshold := 1)", vals("id", "(1), (2)"), vals("id", "(1)")},
	{"number_of_rows", "number_of_rows(threshold := 1 + 1)", vals("id", "(1), (2), (3)"), vals("id", "(1), (2)")},
	{"forall", "forall(criteria := (id > 0, name <> ''))", vals("id, name", "(1, 'a')"), vals("id, name", "(1, 'a'), (-1, 'b')")},
	{"at_least_one", "at_least_one(column := name)", vals("id, name", "(1, CAST(NULL AS VARCHAR)), (2, 'a')"),
		vals("id, name", "(1, CAST(NULL AS VARCHAR))")},
	{"not_constant", "not_constant(column := name)", vals("name", "('a'), ('b')"), vals("name", "('a'), ('a')")},
	{"not_empty_string", "not_empty_string(column := name)", vals("name", "('a')"), vals("name", "('a'), ('')")},
	{"not_null_proportion", "not_null_proportion(column := name, threshold := 0.5)", vals("name", "('a'), ('b')"),
		vals("name", "('a'), (CAST(NULL AS VARCHAR)), (CAST(NULL AS VARCHAR))")},
	{"sequential_values", "sequential_values(column := id)", vals("id", "(1), (2), (3)"), vals("id", "(1), (3)")},
	{"sequential_values", "sequential_values(column := id, interval := 2)", vals("id", "(1), (3)"), vals("id", "(1), (2)")},
	{"mutually_exclusive_ranges", "mutually_exclusive_ranges(lower_bound_column := lo, upper_bound_column := hi)",
		vals("lo, hi", "(1, 2), (3, 4)"), vals("lo, hi", "(1, 3), (2, 4)")},
	{"valid_uuid", "valid_uuid(column := name)", vals("name", "('123e4567-e89b-12d3-a456-426614174000')"), vals("name", "('nope')")},
	{"valid_url", "valid_url(column := name)", vals("name", "('https://example.com/x')"), vals("name", "('example')")},
	{"valid_email", "valid_email(column := name)", vals("name", "('a.b@example.com')"), vals("name", "('a@')")},
	{"valid_http_method", "valid_http_method(column := name)", vals("name", "('GET'), ('POST')"), vals("name", "('FETCH')")},
	{"match_regex_pattern_list", "match_regex_pattern_list(column := name, patterns := ('^a', 'z$'))", vals("name", "('abz')"),
		vals("name", "('abc')")},
	{"not_match_regex_pattern_list", "not_match_regex_pattern_list(column := name, patterns := ('^x'))", vals("name", "('a')"),
		vals("name", "('xa')")},
	{"match_like_pattern_list", "match_like_pattern_list(column := name, patterns := ('a%'))", vals("name", "('ab')"), vals("name", "('ba')")},
	{"not_match_like_pattern_list", "not_match_like_pattern_list(column := name, patterns := ('%x%'))", vals("name", "('ab')"),
		vals("name", "('axb')")},
	{"z_score", "z_score(column := id, threshold := 1)", vals("id", "(1), (2), (3)"), vals("id", "(1), (1), (1), (1), (10)")},
	{"string_length_between", "string_length_between(column := name, min_v := 1, max_v := 3)", vals("name", "('ab'), ('abc')"),
		vals("name", "('abcd')")},
	{"string_length_equal", "string_length_equal(column := name, v := 2)", vals("name", "('ab')"), vals("name", "('a')")},
	// The names SQLMesh's documentation uses for the two above.
	{"string_length_between_audit", "string_length_between_audit(column := name, max_v := 2)", vals("name", "('ab')"), vals("name", "('abc')")},
	{"string_length_equal_audit", "string_length_equal_audit(column := name, v := 1)", vals("name", "('a')"), vals("name", "('ab')")},
	{"stddev_in_range", "stddev_in_range(column := id, max_v := 1)", vals("id", "(1), (2)"), vals("id", "(1), (10)")},
	{"mean_in_range", "mean_in_range(column := id, min_v := 1, max_v := 2)", vals("id", "(1), (2)"), vals("id", "(5)")},
	// chi_square asserts dependence by default: b follows a in the good
	// rows (statistic 10, one degree of freedom), is independent of it in
	// the bad ones (statistic 0); dependent false asserts the opposite.
	{"chi_square", "chi_square(column_a := a, column_b := b, critical_value := 3.841)",
		vals("a, b", strings.Repeat("('x', 'x'), ", 5)+strings.Repeat("('y', 'y'), ", 4)+"('y', 'y')"),
		vals("a, b", "('x', 'x'), ('x', 'y'), ('y', 'x'), ('y', 'y')")},
	{"chi_square", "chi_square(column_a := a, column_b := b, critical_value := 3.841, dependent := false)",
		vals("a, b", "('x', 'x'), ('x', 'y'), ('y', 'x'), ('y', 'y'), (NULL, 'x')"),
		vals("a, b", strings.Repeat("('x', 'x'), ", 5)+strings.Repeat("('y', 'y'), ", 4)+"('y', 'y')")},
	// The same distribution on both sides diverges by 0; 3:1 against 1:3
	// by 2 * 0.5 * log10(3) = 0.477.
	{"kl_divergence", "kl_divergence(source_column := s, target_column := t, threshold := 0.1)",
		vals("s, t", "(1, 2), (2, 1), (1, 1)"), vals("s, t", "(1, 2), (1, 2), (1, 2), (2, 1)")},
	// SQLMesh's condition: only the rows where it holds are audited.
	{"not_null", "not_null(columns := (name), condition := id > 1)", vals("id, name", "(1, CAST(NULL AS VARCHAR)), (2, 'a')"),
		vals("id, name", "(1, 'a'), (2, CAST(NULL AS VARCHAR))")},
	{"unique_values", "unique_values(columns := (name), condition := id <> 3)", vals("id, name", "(1, 'a'), (2, 'b'), (3, 'a')"),
		vals("id, name", "(1, 'a'), (2, 'a'), (3, 'b')")},
}

// parseModel parses a FULL model s.t with the given audits clause and extra
// statements after its query.
func parseModel(t *testing.T, audits, after string) *model.Model {
	t.Helper()
	m, err := model.ParseFile("models/t.sql", []byte("MODEL (\n  name s.t,\n  kind FULL,\n  audits ("+audits+")\n);\nSELECT 1 AS id;\n"+after),
		model.Defaults{})
	require.NoError(t, err)
	return m
}

// offending runs b over rel and returns how many rows it reports.
func offending(t *testing.T, e warehouse.Engine, b audit.Bound, rel audit.Relation) int64 {
	t.Helper()
	day := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	q, err := b.Query(rel, macro.Vars{Start: day, End: day.AddDate(0, 0, 1), Execution: day}, e.Dialect())
	require.NoError(t, err)
	res, err := e.ReadOnlyQuery(t.Context(), "SELECT COUNT(*) FROM ("+q+") AS a")
	require.NoError(t, err, q)
	return toInt(t, res.Rows[0][0])
}

func toInt(t *testing.T, v any) int64 {
	t.Helper()
	switch n := v.(type) {
	case int64:
		return n
	case int32:
		return int64(n)
	}
	t.Fatalf("a count of type %T", v)
	return 0
}

// checkBuiltins runs every case on e: each built-in passes on its good rows
// and fails on its bad ones. The rows are a table's, or with inline a
// parenthesised query's, as a batch's interval is audited (on Trino each
// table costs an Iceberg commit).
func checkBuiltins(t *testing.T, ctx context.Context, e warehouse.Engine, inline bool) {
	t.Helper()
	_, err := e.Query(ctx, "CREATE SCHEMA IF NOT EXISTS aud")
	require.NoError(t, err)
	for i, c := range builtinCases {
		m := parseModel(t, c.call, "")
		bound, err := audit.Bind(m, nil)
		require.NoError(t, err, c.call)
		require.Len(t, bound, 1)
		require.True(t, bound[0].Blocking)
		for _, side := range []string{"good", "bad"} {
			src := c.good
			if side == "bad" {
				src = c.bad
			}
			rel := audit.Relation{This: "(" + src + ")", Aliased: "(" + src + ") AS gapless_rows"}
			if !inline {
				table := fmt.Sprintf("aud.%s_%d", side, i)
				_, err := e.Query(ctx, "CREATE TABLE "+table+" AS "+src)
				require.NoError(t, err)
				rel = audit.Relation{This: table, Aliased: table}
			}
			n := offending(t, e, bound[0], rel)
			if side == "good" {
				require.Zero(t, n, "%s must pass on %s", c.call, src)
			} else {
				require.NotZero(t, n, "%s must fail on %s", c.call, src)
			}
		}
	}
}

// Scenario: SQLMesh's built-in audits, called as its documentation shows,
// pass on rows that keep their rule and report the rows (or the fact) that
// break it, on DuckDB; every built-in is exercised.
func TestBuiltinsPassOnGoodRowsAndFailOnBad(t *testing.T) {
	t.Parallel()
	e, err := duckdb.Open(t.Context(), "", duckdb.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, e.Close()) })
	checkBuiltins(t, t.Context(), e, false)
	covered := map[string]bool{}
	for _, c := range builtinCases {
		covered[c.audit] = true
	}
	var names []string
	for n := range covered {
		names = append(names, n)
	}
	sort.Strings(names)
	require.Equal(t, audit.BuiltinNames(), names, "every built-in has a case")
}

// Scenario: the same built-ins on PostgreSQL, whose SQL differs (regular
// expressions are the ~ operator; a subquery in FROM needs an alias), and
// on Trino's Iceberg tables (regexp_like; no :: casts).
func TestBuiltinsOnPostgresAndTrino(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		inline bool
		open   func(t *testing.T) (warehouse.Engine, error)
	}{
		{"postgres", false, func(t *testing.T) (warehouse.Engine, error) {
			pgtest.Require(t)
			return postgres.Open(t.Context(), pgtest.NewDatabase(t))
		}},
		{"trino", true, func(t *testing.T) (warehouse.Engine, error) {
			trinotest.Require(t)
			return trino.Open(t.Context(), trinotest.NewCatalog(t))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e, err := c.open(t)
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, e.Close()) })
			checkBuiltins(t, t.Context(), e, c.inline)
		})
	}
}

// Scenario: a user audit file holds two audits, one with a default
// argument; a model calls one with an argument, leaves the other to its
// default, and defines an inline audit of its own; _non_blocking on a
// call and blocking false on a definition make the audit warn only; skip
// true leaves an audit out.
func TestUserAndInlineAudits(t *testing.T) {
	t.Parallel()
	defs, err := model.ParseAuditFile("audits/checks.sql", []byte(`-- shared checks
AUDIT (name assert_positive, dialect duckdb);
SELECT * FROM @this_model WHERE @column <= 0;

AUDIT (
  name assert_below,
  blocking false,
  defaults (limit_v = 10)
)
SELECT * FROM @this_model WHERE id >= @limit_v;
AUDIT (name skipped, skip true); SELECT 1;
`))
	require.NoError(t, err)
	require.Len(t, defs, 3)
	require.Equal(t, model.Pos{File: "audits/checks.sql", Line: 2, Col: 1}, defs[0].Pos)
	require.Equal(t, model.Pos{File: "audits/checks.sql", Line: 3, Col: 1}, defs[0].QueryPos)
	require.Equal(t, "SELECT * FROM @this_model WHERE @column <= 0", defs[0].Query)
	require.False(t, defs[1].Blocking)
	require.Equal(t, []model.AuditArg{{Name: "limit_v", SQL: "10", Pos: model.Pos{File: "audits/checks.sql", Line: 8, Col: 13}}}, defs[1].Defaults)
	require.Equal(t, "SELECT * FROM @this_model WHERE id >= @limit_v", defs[1].Query)
	lib, err := audit.NewLibrary(defs)
	require.NoError(t, err)

	m := parseModel(t, "assert_positive(column := id), assert_below, assert_below(limit_v := 2), mine_non_blocking(\"values\" := (9)), "+
		"mine(\"values\" := (1, 2), blocking := false), mine(\"values\" := (1), blocking := true), skipped",
		"AUDIT (name mine);\nSELECT * FROM @this_model WHERE id IN @values\n")
	require.Len(t, m.InlineAudits, 1)
	bound, err := audit.Bind(m, lib)
	require.NoError(t, err)
	require.Len(t, bound, 6, "skipped is left out")
	var blocking []bool
	for _, b := range bound {
		blocking = append(blocking, b.Blocking)
	}
	// blocking := ... at the use site overrides the definition and the suffix.
	require.Equal(t, []bool{true, false, false, false, false, true}, blocking)

	e, err := duckdb.Open(t.Context(), "", duckdb.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, e.Close()) })
	_, err = e.Query(t.Context(), "CREATE TABLE t AS SELECT * FROM (VALUES (1), (2), (3)) AS v(id)")
	require.NoError(t, err)
	var counts []int64
	for _, b := range bound {
		counts = append(counts, offending(t, e, b, audit.Relation{This: "t", Aliased: "t"}))
	}
	require.Equal(t, []int64{0, 0, 2, 0, 2, 1}, counts)

	p, err := sqlparse.Open()
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Close()) })
	for _, b := range bound {
		require.NoError(t, b.CheckParse(t.Context(), p))
	}
}

// Scenario: an audit that names its model (FROM s.t, as SQLMesh's first
// example does) reads the audited table, as SQLMesh points the name at the
// snapshot's table; the name inside a string, a comment or a longer name is
// left alone.
func TestAuditReadsItsModelByName(t *testing.T) {
	t.Parallel()
	m := parseModel(t, "by_name", "AUDIT (name by_name);\nSELECT * FROM s.t JOIN x.s.t ON TRUE WHERE 's.t' <> '' -- s.t\n")
	bound, err := audit.Bind(m, nil)
	require.NoError(t, err)
	q, err := bound[0].Query(audit.Relation{This: "x", Aliased: "x", Table: `"gapless__s"."t__1"`}, macro.Vars{}, "duckdb")
	require.NoError(t, err)
	require.Equal(t, `SELECT * FROM "gapless__s"."t__1" JOIN x.s.t ON TRUE WHERE 's.t' <> '' -- s.t`, q)
}

// Scenario: bad audit input gets an error naming the file, the line, the
// model and the audit.
func TestAuditErrorsNameFileAndLine(t *testing.T) {
	t.Parallel()
	lib, err := audit.NewLibrary(nil)
	require.NoError(t, err)
	for _, tc := range []struct{ audits, after, want string }{
		{"not_nul(columns := id)", "", "models/t.sql:4:11: model s.t: unknown audit not_nul: did you mean not_null?"},
		{"frobnicate", "", "models/t.sql:4:11: model s.t: unknown audit frobnicate (not built in, not in audits/ and not defined in the model's file)"},
		{"accepted_range(column := id, min := 0)", "", "models/t.sql:4:11: model s.t, audit accepted_range: unknown argument min: did you mean min_v? (its arguments: column, min_v, max_v, inclusive, condition)"},
		{"not_null", "", "models/t.sql:4:11: model s.t, audit not_null: missing argument columns (write not_null(columns := ...))"},
		{"not_null(columns := id, blocking := maybe)", "", "models/t.sql:4:35: model s.t, audit not_null: blocking must be true or false, not maybe"},
		{"not_null(columns := ())", "", "models/t.sql:4:11: model s.t, audit not_null: argument columns is an empty list"},
		{"mine(x := 1)", "AUDIT (name mine);\nSELECT * FROM @this_model WHERE id = @y;", "models/t.sql:4:11: model s.t, audit mine: missing argument y (the audit's query uses @y on models/t.sql:8)"},
		{"mine(x := 1, y := 2)", "AUDIT (name mine);\nSELECT * FROM @this_model WHERE id = @y;", "models/t.sql:4:11: model s.t, audit mine: unknown argument x: the audit defined at models/t.sql:7:1 uses no @x (its arguments: y)"},
	} {
		m := parseModel(t, tc.audits, tc.after)
		_, err := audit.Bind(m, lib)
		require.EqualError(t, err, tc.want)
	}

	p, err := sqlparse.Open()
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Close()) })
	m := parseModel(t, "broken", "AUDIT (name broken);\nSELECT *\nFROM @this_model\nWHERE WHERE id < 0;")
	bound, err := audit.Bind(m, lib)
	require.NoError(t, err)
	err = bound[0].CheckParse(t.Context(), p)
	require.ErrorContains(t, err, "models/t.sql:10:1: model s.t, audit broken: the audit's query does not parse: ")
}

// Scenario: a user audit's query uses SQLMesh's macro operators, as
// SQLMesh's own built-ins are written (@REDUCE over @EACH of a list
// argument): the operators are not taken for missing arguments, and the
// audit finds the row with a NULL.
func TestUserAuditUsesMacroOperators(t *testing.T) {
	t.Parallel()
	m := parseModel(t, "no_nulls(cols := [id, name])",
		"AUDIT (name no_nulls);\nSELECT * FROM @this_model WHERE @REDUCE(@EACH(@cols, c -> c IS NULL), (l, r) -> l OR r);")
	bound, err := audit.Bind(m, nil)
	require.NoError(t, err)
	require.Len(t, bound, 1)
	e, err := duckdb.Open(t.Context(), "", duckdb.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, e.Close()) })
	rows := "(SELECT * FROM (VALUES (1, 'a'), (2, NULL), (NULL, 'c'), (4, 'd')) AS v(id, name))"
	require.Equal(t, int64(2), offending(t, e, bound[0], audit.Relation{This: rows, Aliased: rows + " AS t"}))
}
