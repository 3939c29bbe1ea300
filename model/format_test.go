package model

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

const messyModel = `-- Revenue per day.
model (Name demo.daily, -- the name
  KIND incremental_by_time_range(TIME_COLUMN day,  lookback 2),
  -- runs once a day
  cron '@daily',
  grain (day,customer_id), columns (id int, day date),
  description 'Revenue  per day' -- kept
)
;

select  date_trunc('day', e.ts)  as day , count(*)  as n,
   e.select_me,   'a  b' as "Mixed  Case",  @{suffix}_x   
from demo.events as e   -- where from


where e.ts between @start_ts and @end_ts   /* keep   this */
group by all
;
`

const messyFormatted = `-- Revenue per day.
MODEL (
  name demo.daily, -- the name
  kind INCREMENTAL_BY_TIME_RANGE (
    time_column day,
    lookback 2
  ),
  -- runs once a day
  cron '@daily',
  grain (day, customer_id),
  columns (
    id int,
    day date
  ),
  description 'Revenue  per day' -- kept
);

SELECT date_trunc('day', e.ts) AS day, count(*) AS n,
   e.select_me, 'a  b' AS "Mixed  Case", @{suffix}_x
FROM demo.events AS e -- where from

WHERE e.ts BETWEEN @start_ts AND @end_ts /* keep   this */
GROUP BY ALL;
`

// Scenario: a model file written by hand in no particular layout is
// rewritten in the canonical one: header one attribute per line with its
// comments where they were, the kind's properties one per line, keywords
// upper-cased, and strings, quoted names, comments and macros as written.
func TestFormatCanonicalLayout(t *testing.T) {
	t.Parallel()
	out, err := Format("models/daily.sql", []byte(messyModel), FormatOptions{})
	require.NoError(t, err)
	require.Equal(t, messyFormatted, string(out))

	again, err := Format("models/daily.sql", out, FormatOptions{})
	require.NoError(t, err)
	require.Equal(t, string(out), string(again), "formatting is idempotent")

	before, err := ParseFile("models/daily.sql", []byte(messyModel), Defaults{})
	require.NoError(t, err)
	after, err := ParseFile("models/daily.sql", out, Defaults{})
	require.NoError(t, err)
	require.Equal(t, before.Kind, after.Kind)
	require.Equal(t, before.Lookback, after.Lookback)
	require.Equal(t, before.Columns, after.Columns)
	require.Equal(t, before.Description, after.Description)
	require.True(t, queryEquivalent(before.Query, after.Query, false))
}

// Scenario: a query with a macro call keeps its words exactly (the
// fingerprint covers them); only whitespace changes. Pre-statements and
// post-statements are kept as written.
func TestFormatMacroCallsChangeOnlyWhitespace(t *testing.T) {
	t.Parallel()
	src := "MODEL (name s.m, kind FULL);\n\n@DEF(n, 2);\n\nselect  a,b   from s.t where @IF(true, x > @n)   \n;\n"
	out, err := Format("m.sql", []byte(src), FormatOptions{})
	require.NoError(t, err)
	require.Equal(t, "MODEL (\n  name s.m,\n  kind FULL\n);\n\n@DEF(n, 2);\n\nselect a,b from s.t where @IF(true, x > @n);\n", string(out))

	out, err = Format("m.sql", []byte("MODEL (name s.m, kind FULL);\nselect a,b from s.t"), FormatOptions{AppendNewline: true})
	require.NoError(t, err)
	require.Equal(t, "MODEL (\n  name s.m,\n  kind FULL\n);\n\nSELECT a, b FROM s.t\n", string(out))
}

// Scenario: names that look like keywords (after '.', after AS, the LEFT
// function) keep their case, and a query ending in a -- comment keeps its
// ';' out of the comment.
func TestFormatLeavesNamesAlone(t *testing.T) {
	t.Parallel()
	src := "MODEL (name s.m, kind VIEW);\nselect t.order, left(x, 2) as desc from s.t -- note\n;"
	out, err := Format("m.sql", []byte(src), FormatOptions{})
	require.NoError(t, err)
	require.Equal(t, "MODEL (\n  name s.m,\n  kind VIEW\n);\n\nSELECT t.order, left(x, 2) AS desc FROM s.t -- note\n;", string(out))
}

// Scenario: a file that does not parse is refused with its line, and no
// output.
func TestFormatRefusesAFileThatDoesNotParse(t *testing.T) {
	t.Parallel()
	out, err := Format("models/bad.sql", []byte("MODEL (\n  name s.m,\n  kind FULL,\n  cron '61 * * * *'\n);\nSELECT 1"), FormatOptions{})
	require.Error(t, err)
	require.Nil(t, out)
	require.Contains(t, err.Error(), "models/bad.sql:4:")
}

// exampleModelFiles are the model files of the repository's examples and
// test projects.
func exampleModelFiles(t *testing.T) map[string][]byte {
	t.Helper()
	files := map[string][]byte{"messy.sql": []byte(messyModel)}
	for _, pattern := range []string{"../examples/*/models/*.sql", "../cli/testdata/*/models/*.sql",
		"../multiproc/testdata/*/models/*.sql", "../bench/sqlmesh/project/models/*.sql"} {
		paths, err := filepath.Glob(pattern)
		require.NoError(t, err)
		for _, p := range paths {
			b, err := os.ReadFile(p)
			require.NoError(t, err)
			files[p] = b
		}
	}
	require.Greater(t, len(files), 10)
	return files
}

// Property: over the example model files, with their whitespace and their
// keywords' case shuffled, formatting is idempotent and keeps the model:
// the same settings and an equivalent query.
func TestFormatPropertyIdempotentAndSameModel(t *testing.T) {
	t.Parallel()
	files := exampleModelFiles(t)
	var names []string
	for n := range files {
		names = append(names, n)
	}
	rapid.Check(t, func(rt *rapid.T) {
		name := rapid.SampledFrom(names).Draw(rt, "file")
		src := perturb(rt, string(files[name]))
		m, err := ParseFile(name, []byte(src), Defaults{})
		if err != nil {
			rt.Skip("the perturbed file does not parse")
		}
		once, err := Format(name, []byte(src), FormatOptions{})
		if err != nil {
			rt.Fatalf("%s: %v\n%s", name, err, src)
		}
		twice, err := Format(name, once, FormatOptions{})
		if err != nil {
			rt.Fatalf("%s: formatting the formatted file: %v\n%s", name, err, once)
		}
		if string(once) != string(twice) {
			rt.Fatalf("%s: not idempotent:\n%s\n---\n%s", name, once, twice)
		}
		after, err := ParseFile(name, once, Defaults{})
		if err != nil {
			rt.Fatalf("%s: the formatted file does not parse: %v", name, err)
		}
		a, err := settingsOf(m)
		require.NoError(rt, err)
		b, err := settingsOf(after)
		require.NoError(rt, err)
		require.Equal(rt, a, b)
		require.True(rt, queryEquivalent(m.Query, after.Query, hasMacroCall(m.Query)), "query:\n%s\n---\n%s", m.Query, after.Query)
	})
}

// perturb rewrites src's whitespace (a newline stays a newline) and the
// case of the query's keywords at random.
func perturb(rt *rapid.T, src string) string {
	toks, err := sqlTokens(src)
	if err != nil {
		return src
	}
	headerDone := false
	var b strings.Builder
	for i, tk := range toks {
		switch {
		case tk.kind == ftSpace && strings.Contains(tk.text, "\n"):
			b.WriteString(rapid.SampledFrom([]string{"\n", "\n\n\n", " \n  ", "\n\t"}).Draw(rt, "nl"))
		case tk.kind == ftSpace:
			b.WriteString(rapid.SampledFrom([]string{" ", "   ", "\t"}).Draw(rt, "sp"))
		case tk.kind == ftWord && headerDone && isFormatKeyword(tk.text):
			if rapid.Bool().Draw(rt, "upper") {
				b.WriteString(strings.ToUpper(tk.text))
			} else {
				b.WriteString(strings.ToLower(tk.text))
			}
		default:
			b.WriteString(tk.text)
		}
		if tk.text == ";" && !headerDone && i > 0 {
			headerDone = true
		}
	}
	return b.String()
}
