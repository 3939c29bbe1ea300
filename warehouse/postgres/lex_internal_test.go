package postgres

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/warehouse"
)

func TestTrimQuery(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"SELECT 1":                             "SELECT 1",
		"SELECT 1;":                            "SELECT 1",
		"SELECT 1 ;; \n\t":                     "SELECT 1",
		"SELECT 1; -- done":                    "SELECT 1",
		"SELECT 1 -- done\n;\n-- really\n":     "SELECT 1",
		"SELECT 1 /* a /* nested */ one */ ;":  "SELECT 1",
		"SELECT ';--' AS s;":                   "SELECT ';--' AS s",
		"SELECT 'it''s;' -- x":                 "SELECT 'it''s;'",
		`SELECT E'\';--' AS s; -- c`:           `SELECT E'\';--' AS s`,
		`SELECT "a"";--" FROM t;`:              `SELECT "a"";--" FROM t`,
		"SELECT $$;--$$ AS s;":                 "SELECT $$;--$$ AS s",
		"SELECT $tag$ $$; -- $tag$ AS s; -- c": "SELECT $tag$ $$; -- $tag$ AS s",
		"SELECT $1::int; -- param":             "SELECT $1::int",
		"SELECT a$b FROM t; -- ident with $":   "SELECT a$b FROM t",
		"SELECT 1 /* unterminated":             "SELECT 1 /* unterminated",
		"SELECT 'unterminated; -- x":           "SELECT 'unterminated; -- x",
		"SELECT 1; SELECT 2;":                  "SELECT 1; SELECT 2",
		"SELECT e'x' AS s":                     "SELECT e'x' AS s",
		"SELECT name'x' -- not an E-string\n;": "SELECT name'x'",
		"SELECT 1 -- comment without newline":  "SELECT 1",
		"SELECT '表;' AS \"Ünï;\" ; -- ok":      "SELECT '表;' AS \"Ünï;\"",
	}
	for in, want := range cases {
		got, err := trimQuery(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, empty := range []string{"", " ", ";", " ; ;\n", "-- only a comment", "/* c */ ;"} {
		_, err := trimQuery(empty)
		require.ErrorIs(t, err, warehouse.ErrInvalidArgument, "%q", empty)
	}
}

// FuzzTrimQuery: trimming never panics, returns a prefix, and is
// idempotent.
func FuzzTrimQuery(f *testing.F) {
	for _, s := range []string{"SELECT 1; -- x", "SELECT $a$ $$ $a$", "/* /* */", "E'\\'", `"a""b"`, "$1$", "'"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, q string) {
		got, err := trimQuery(q)
		if err != nil {
			return
		}
		require.True(t, strings.HasPrefix(q, got))
		again, err := trimQuery(got)
		require.NoError(t, err)
		require.Equal(t, got, again)
	})
}

func TestLexType(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"int", "numeric(10, 2)", "text[]", `"My ""Type"""`, `s."t y"`, "timestamp(3) with time zone", "целое"} {
		require.NoError(t, lexType(ok), ok)
	}
	for _, bad := range []string{"", " ", "int;", "int --", "int/**/", "'x'", "$$x$$", "int)", "(int", "a, b", `"x`, "int\n", "a::b", "a-b", strings.Repeat("a", 300)} {
		require.Error(t, lexType(bad), "%q", bad)
	}
}
