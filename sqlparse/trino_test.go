package sqlparse_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/sqlparse"
)

// Scenario: models written with dialect trino are parsed by the same
// (DuckDB-derived) parser. The Trino constructs models use most (UNNEST of
// sequence, CROSS JOIN UNNEST, INTERVAL '15' MINUTE, lambdas, ARRAY[...],
// date_add, TRY_CAST, approx_distinct, AT TIME ZONE) parse, and their base
// tables are found.
func TestTrinoQueriesParse(t *testing.T) {
	t.Parallel()
	p, err := sqlparse.Open()
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Close()) })
	cases := map[string][]string{
		"SELECT g.ts AS ts, 1 AS v FROM UNNEST(sequence(TIMESTAMP '2024-01-01 00:00:00', TIMESTAMP '2024-01-01 23:00:00', INTERVAL '15' MINUTE)) AS g(ts)":                                                      nil,
		"SELECT e.id, t.tag FROM shop.events AS e CROSS JOIN UNNEST(e.tags) AS t(tag)":                                                                                                                          {"shop.events"},
		"SELECT transform(ARRAY[1, 2, 3], x -> x * 2) AS doubled, date_add('hour', 1, o.ts) AS next_hour FROM raw.orders AS o":                                                                                  {"raw.orders"},
		"SELECT TRY_CAST(o.amount AS double) AS amount, approx_distinct(o.customer) AS customers FROM raw.orders AS o GROUP BY 1":                                                                               {"raw.orders"},
		"SELECT date_trunc('hour', o.ts AT TIME ZONE 'UTC') AS hr, count(*) AS n FROM raw.orders AS o WHERE o.ts BETWEEN TIMESTAMP '2024-01-01 00:00:00' AND TIMESTAMP '2024-01-01 00:59:59.999999' GROUP BY 1": {"raw.orders"},
	}
	for src, want := range cases {
		q, err := p.Parse(t.Context(), src)
		require.NoError(t, err, src)
		var got []string
		for _, tr := range q.Tables {
			got = append(got, tr.String())
		}
		require.Equal(t, want, got, src)
	}
}
