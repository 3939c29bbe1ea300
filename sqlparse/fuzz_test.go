package sqlparse_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/gapless-dev/gapless/sqlparse"
)

// FuzzParse feeds arbitrary text to Parse. Whatever the input, Parse
// returns either an error or a Query whose invariants hold; it never
// panics.
func FuzzParse(f *testing.F) {
	for _, tc := range tablesCases {
		f.Add(tc.sql)
	}
	for _, s := range []string{
		"", ";", "SELEC 1", "SELECT 1; SELECT 2", "INSERT INTO t VALUES (1)",
		"WITH RECURSIVE r AS (SELECT 1 UNION ALL SELECT * FROM r) SELECT * FROM r",
		"SELECT * FROM t WHERE a IN (SELECT b FROM u WHERE EXISTS (SELECT 1 FROM v))",
		"SELECT 'é€😀' FROM \"Ü\".\"T\"", "SELECT 1e999999", "SELECT * FROM 'x.csv'",
		"SELECT a::int, b ILIKE 'x', INTERVAL '1 day' FROM s.t", "DESCRIBE t", "\x00", "\xff",
		benchModel,
	} {
		f.Add(s)
	}
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, src string) {
		q, err := shared.Parse(ctx, src)
		if err != nil {
			if q != nil {
				t.Fatalf("Parse returned a Query with error %v", err)
			}
			var syn *sqlparse.SyntaxError
			if errors.As(err, &syn) && (syn.Offset < -1 || syn.Offset > len(src)) {
				t.Fatalf("syntax error offset %d outside [−1, %d]", syn.Offset, len(src))
			}
			return
		}
		if !slices.IsSortedFunc(q.Tables, func(a, b sqlparse.TableRef) int { return strings.Compare(key(a), key(b)) }) {
			t.Fatalf("tables not sorted: %v", q.Tables)
		}
		for i, tr := range q.Tables {
			if i > 0 && key(q.Tables[i-1]) == key(tr) {
				t.Fatalf("duplicate table %v", tr)
			}
			if strings.HasPrefix(tr.Name, sqlparse.PlaceholderPrefix) {
				t.Fatalf("placeholder reported as a table: %v", tr)
			}
			if tr.Name != strings.ToLower(tr.Name) || tr.Schema != strings.ToLower(tr.Schema) || tr.Catalog != strings.ToLower(tr.Catalog) {
				t.Fatalf("table not lower-cased: %v", tr)
			}
			if tr.Offset < -1 || tr.Offset >= len(src) {
				t.Fatalf("table offset %d outside input of %d bytes", tr.Offset, len(src))
			}
		}
		if q.Canonical == "" {
			t.Fatal("empty canonical form")
		}
		// Comparing a query with itself must be safe and never additive.
		if sqlparse.AdditiveOnly(q, q) {
			t.Fatal("a query is additive to itself")
		}
		// Compare and Reads never panic, and Compare agrees with AdditiveOnly.
		if c := sqlparse.Compare(q, q); c.Additive || c.Reason == "" {
			t.Fatalf("Compare of a query with itself: %+v", c)
		}
		if r := q.Reads(); !slices.IsSorted(r.Columns) {
			t.Fatalf("reads not sorted: %v", r.Columns)
		}
	})
}

func key(t sqlparse.TableRef) string {
	return t.Catalog + "\x00" + t.Schema + "\x00" + t.Name
}
