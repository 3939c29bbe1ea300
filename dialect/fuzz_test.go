package dialect_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/dialect"
)

// FuzzTokenize_RoundTrips: for every dialect, the tokens of any text it
// tokenizes are the text, byte for byte, each at its offset; and
// Transpile, whatever it answers, neither panics nor moves a line.
func FuzzTokenize_RoundTrips(f *testing.F) {
	for _, s := range []string{
		"SELECT * EXCEPT (a) FROM `p.d.t` WHERE s = \"x\\\"y\" # c\n",
		"SELECT IFF(a, 'it''s', $$x$$), v:field::STRING FROM t -- c\n/* b\n */",
		"SELECT r'''a\nb''', [x] FROM [dbo].[t] QUALIFY 1",
		"SELECT IFNULL\n(a,\n b), CAST(x AS NUMERIC(\n10, 2)), DATE_TRUNC(d,\nMONTH)",
		"SELECT 'unterminated",
		"SELECT DIV0(a -- x\n, b /* y\n */), SAFE_DIVIDE(a,\n b), * EXCEPT (a), TO_HEX(MD5(x)), FORMAT_DATE('%F', d)",
		"SELECT CAST(x AS STRUCT<a INT64>), date_format(t, 'yyyy\nMM'), `a`.`b.c`, \"s\\n\", r\"x\"",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		for _, d := range dialect.Names {
			toks, err := dialect.Tokenize(src, d)
			if err != nil {
				continue
			}
			var b strings.Builder
			for _, tk := range toks {
				require.Equal(t, b.Len(), tk.Off)
				b.WriteString(tk.Text)
			}
			require.Equal(t, src, b.String(), d)
			for _, to := range []string{dialect.DuckDB, dialect.Postgres, dialect.Trino} {
				out, m, err := dialect.Transpile(src, d, to)
				if err != nil {
					continue
				}
				require.Equal(t, strings.Count(src, "\n"), strings.Count(out, "\n"), "%s -> %s: %q -> %q", d, to, src, out)
				for off := range len(out) + 1 {
					o := m.Original(off)
					require.True(t, o >= 0 && o <= len(src), "offset %d maps to %d", off, o)
				}
			}
		}
	})
}
