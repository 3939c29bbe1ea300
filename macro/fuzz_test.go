package macro

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var fuzzSeeds = []string{
	"SELECT * FROM t WHERE ts BETWEEN @start_ts AND @end_ts",
	"SELECT '@start_ds', \"@x\", E'\\'@y', $$ @z $$, $t$ @w $t$ -- @v\n/* /* @u */ */ @end_ms FROM @this_model",
	"@@start_ds$@end_ds$",
	"x-@start_ms",
	"@", "@_", "@1", "'", "\"", "/*", "--", "$", "$a", "$a$", "E'\\", "\xff@start_ds\xfe",
	"SELECT __gapless_macro_x",
	"SELECT @nope",
	"@DEF(x, 1);\n@DEF(f, (a, b) -> a + b * @x);\nSELECT @f(1, 2), @EACH([a, 'b'], v -> v AS col_@v), @{x}_y",
	"SELECT @IF(@start_ds > '2020-01-01' AND 1 IN (1, 2), @SAFE_DIV(a, b), NULL) FROM @this_model",
	"SELECT @STAR(t, u, exclude := [c]), @PIVOT(s, ['a', 'b'], quote := FALSE) FROM t AS u @WHERE(1 = 2) x > 1 LIMIT 1",
	"@UNION('all', a.b, c.d)",
	"SELECT @REDUCE(@FILTER([1, 2, 3], x -> x > 1), (x, y) -> x + y), @EVAL(1 / 0)",
	"SELECT @EACH([1, 2], x -> @EACH([3], y -> x * y))",
	"@DEF(loop, x -> @loop(x));\nSELECT @loop(1)",
	"SELECT @EACH(",
	"SELECT @f(]",
}

// FuzzFind checks the scanner never panics and reports references that are
// really "@name" in the input, in order and without overlap.
func FuzzFind(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, sql string) {
		refs, words := scan(sql)
		prevEnd := 0
		for _, r := range refs {
			require.GreaterOrEqual(t, r.Offset, prevEnd)
			require.GreaterOrEqual(t, r.Len, 2)
			require.LessOrEqual(t, r.Offset+r.Len, len(sql))
			require.Equal(t, byte('@'), sql[r.Offset])
			require.Equal(t, r.Name, strings.ToLower(sql[r.Offset+1:r.Offset+r.Len]))
			prevEnd = r.Offset + r.Len
		}
		for _, w := range words {
			require.GreaterOrEqual(t, w.Offset, 0)
			require.Less(t, w.Offset, len(sql))
		}
		_, _ = Find(sql)
	})
}

// FuzzForParse checks that ForParse either fails with an *Error or returns
// SQL without macro references whose Mapper maps every byte outside a
// placeholder to the same byte of the input, monotonically.
func FuzzForParse(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, sql string) {
		out, m, err := ForParse(sql)
		if err != nil {
			require.IsType(t, &Error{}, err)
			return
		}
		refs, _ := scan(out)
		require.Empty(t, refs, "placeholders must not form new references")
		inPlaceholder := make([]bool, len(out))
		for _, e := range m.edits {
			for k := e.new; k < e.new+e.newLen; k++ {
				inPlaceholder[k] = true
			}
		}
		prev := 0
		for k := 0; k <= len(out); k++ {
			o := m.Original(k)
			require.GreaterOrEqual(t, o, prev, "monotonic")
			require.LessOrEqual(t, o, len(sql))
			if k < len(out) && !inPlaceholder[k] {
				require.Equal(t, out[k], sql[o], "byte %d", k)
			}
			prev = o
		}
		require.Equal(t, len(sql), m.Original(len(out)))
	})
}

// FuzzExpand checks Expand never panics and, when it succeeds, maps every
// byte of its output to the input monotonically.
func FuzzExpand(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	env := &Env{Variables: map[string]any{"v": "x", "l": []any{int64(1), "a"}}}
	f.Fuzz(func(t *testing.T, sql string) {
		out, m, err := Expand(sql, env, "duckdb")
		if err != nil {
			require.IsType(t, &Error{}, err)
			return
		}
		prev := 0
		for k := 0; k <= len(out); k++ {
			o := m.Original(k)
			require.GreaterOrEqual(t, o, prev, "monotonic")
			require.LessOrEqual(t, o, len(sql))
			prev = o
		}
		_, _ = Render(out, Vars{}, "duckdb")
	})
}

// FuzzRender checks Render never panics and leaves no reference behind.
func FuzzRender(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s, int64(1704067200), int64(86400))
	}
	f.Fuzz(func(t *testing.T, sql string, start, length int64) {
		v := Vars{
			Start:     time.Unix(start%(1<<36), 0),
			End:       time.Unix(start%(1<<36)+length%(1<<30), 0),
			Execution: time.Unix(start%(1<<36), 0),
			ThisModel: `"s"."t"`,
		}
		out, err := Render(sql, v, "duckdb")
		if err != nil {
			require.IsType(t, &Error{}, err)
			return
		}
		refs, _ := scan(out)
		require.Empty(t, refs)
	})
}
