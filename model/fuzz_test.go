package model_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/model"
)

// FuzzParseFile checks that ParseFile, whatever it is given, either returns a
// Model that keeps every documented invariant or an *Error located inside the
// file, and never panics.
func FuzzParseFile(f *testing.F) {
	seeds := []string{
		"MODEL (name a.b); SELECT 1",
		"MODEL (name a.b, kind FULL, cron '@hourly'); SELECT 1;",
		"-- c\nMODEL (\n name \"A\".b, kind INCREMENTAL_BY_TIME_RANGE (time_column ts, lookback 2, batch_size 24, forward_only true),\n" +
			" cron '0 12 * * *', interval_unit 'day', start '2024-01-01', end '2025-01-01 00:00:00', owner 'x',\n" +
			" description 'it''s', tags [a, 'b'], grain (id, ts), allow_partials false, enabled true, dialect duckdb,\n" +
			" columns (id INT, amount DECIMAL(10,2))\n);\nSELECT * FROM x WHERE ts BETWEEN @start_ts AND @end_ts",
		"MODEL (name a.b, kind INCREMENTAL_BY_UNIQUE_KEY (unique_key (k1, k2))); SELECT 1",
		"MODEL (name a.b, kind SEED (path 'x.csv'));",
		"MODEL (name a.b, kind EXTERNAL, columns (id INT, s STRUCT(a INT, b VARCHAR[])));",
		"MODEL (name a.b, kind VIEW (time_column ts)); SELECT 1",
		"MODEL (name a.b, kind FULLL); SELECT 1",
		"MODEL (name a.b, intervl_unit day); SELECT 1",
		"MODEL (name a.b, cron '0 25 * * *'); SELECT 1",
		"MODEL (name a.b, cron '@hourly', interval_unit month, allow_partials true); SELECT 1",
		"MODEL (\n name a.b,\n kind FULL\nSELECT 1",
		"MODEL (name a.b)\nSELECT 1",
		"MODEL (name a.b, description 'open",
		"MODEL (name a.b, /* open",
		"MODEL (name a.b, start '2024-13-01'); SELECT 1",
		"MODEL (name a.b, start '2024-02-01', end '2024-01-01'); SELECT 1",
		"MODEL (name a.b, kind EXTERNAL);",
		"MODEL (kind FULL); SELECT 1",
		"MODEL (name a.b, cron '@daily', cron '@daily'); SELECT 1",
		"\xef\xbb\xbfMODEL (name a.b); SELECT 1",
		"MODEL (name a.b, tags (\xff)); SELECT 1",
		"",
		"MODEL",
		"MODEL (",
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		m, err := model.ParseFile("f.sql", src, model.Defaults{})
		if err != nil {
			require.Nil(t, m)
			var me *model.Error
			require.True(t, errors.As(err, &me), "error %T: %v", err, err)
			require.NotEmpty(t, me.Msg)
			require.NotEmpty(t, me.Code)
			require.Equal(t, "f.sql", me.Pos.File)
			lines := strings.Split(string(src), "\n")
			require.GreaterOrEqual(t, me.Pos.Line, 1)
			require.LessOrEqual(t, me.Pos.Line, len(lines))
			require.GreaterOrEqual(t, me.Pos.Col, 1)
			require.LessOrEqual(t, me.Pos.Col, len(lines[me.Pos.Line-1])+1)
			require.True(t, strings.HasPrefix(err.Error(), me.Pos.String()+": "))
			return
		}
		checkInvariants(t, src, m)
	})
}
