package model_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/cron"
	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/model"
)

func date(y int, m time.Month, d int) time.Time { return time.Date(y, m, d, 0, 0, 0, 0, time.UTC) }

func mustParse(t *testing.T, src string) *model.Model {
	t.Helper()
	m, err := model.ParseFile("models/m.sql", []byte(src), model.Defaults{})
	require.NoError(t, err)
	checkInvariants(t, []byte(src), m)
	return m
}

// checkInvariants asserts the invariants documented on model.Model, for any
// model ParseFile returns.
func checkInvariants(t testing.TB, src []byte, m *model.Model) {
	t.Helper()
	schema, table, ok := strings.Cut(m.Name, ".")
	require.True(t, ok, "name %q has no dot", m.Name)
	require.NotEmpty(t, schema)
	require.NotEmpty(t, table)
	require.NotContains(t, table, ".")
	require.Equal(t, strings.ToLower(m.Name), m.Name)
	require.Equal(t, schema, m.Schema())
	require.Equal(t, table, m.Table())
	_, known := model.ParseKind(string(m.Kind))
	require.True(t, known, "kind %q", m.Kind)
	_, err := model.ParseDialect(string(m.Dialect))
	require.NoError(t, err)
	sched, err := cron.Parse(m.Cron)
	require.NoError(t, err, "cron %q", m.Cron)
	require.True(t, m.IntervalUnit.Valid(), "unit %q", m.IntervalUnit)
	require.NoError(t, cron.CheckUnit(sched, m.IntervalUnit, m.AllowPartials))
	require.Equal(t, m.Kind == model.KindExternal || m.Kind == model.KindSeed, m.Query == "")
	require.Equal(t, m.Kind == model.KindIncrementalByTimeRange, m.TimeColumn != "")
	require.Equal(t, m.Kind == model.KindIncrementalByUniqueKey, len(m.UniqueKey) > 0)
	require.Equal(t, m.Kind == model.KindSeed, m.SeedPath != "")
	if m.Kind == model.KindExternal {
		require.NotEmpty(t, m.Columns)
	}
	require.True(t, m.Start.IsZero() || m.Start.Location() == time.UTC)
	require.True(t, m.End.IsZero() || m.End.Location() == time.UTC)
	if !m.Start.IsZero() && !m.End.IsZero() {
		require.True(t, m.End.After(m.Start))
	}
	require.GreaterOrEqual(t, m.Lookback, 0)
	require.GreaterOrEqual(t, m.BatchSize, 0)
	// Query is a verbatim slice of the file at QueryPos, so PosOf maps
	// every query offset to the file position of the same byte.
	if m.Query != "" {
		start := offsetOf(src, m.QueryPos)
		require.Equal(t, m.Query, string(src[start:start+len(m.Query)]))
		for _, k := range []int{0, len(m.Query) / 2, len(m.Query) - 1} {
			require.Equal(t, start+k, offsetOf(src, m.PosOf(k)))
		}
	}
	require.Equal(t, "MODEL", strings.ToUpper(string(src[offsetOf(src, m.HeaderPos):][:5])))
}

// offsetOf converts a 1-based line and byte column back to a byte offset.
func offsetOf(src []byte, p model.Pos) int {
	line, off := 1, 0
	for off < len(src) && line < p.Line {
		if src[off] == '\n' {
			line++
		}
		off++
	}
	return off + p.Col - 1
}

func TestParseFile_FullExample(t *testing.T) {
	t.Parallel()
	src := `-- Daily events, carried over from SQLMesh.
/* a block
   comment */
MODEL (
  name analytics.daily_events,      -- comment
  kind INCREMENTAL_BY_TIME_RANGE (time_column event_ts, lookback 2, batch_size 24, batch_concurrency 4, forward_only true),
  cron '0 12 * * *',
  interval_unit 'day',   -- quoted or bare
  start '2024-01-01',
  end '2025-01-01 00:00:00',
  owner 'data-eng',
  description 'Daily events',
  tags [finance, daily],
  grain (event_id, event_ts),
  allow_partials false,
  enabled true,
  dialect duckdb,
  columns (id INT, ts TIMESTAMP, amount DECIMAL(10,2))
);

SELECT event_id, event_ts
FROM raw.events
WHERE event_ts BETWEEN @start_ts AND @end_ts;
`
	m := mustParse(t, src)
	require.Equal(t, &model.Model{
		Name:                 "analytics.daily_events",
		Kind:                 model.KindIncrementalByTimeRange,
		Dialect:              model.DialectDuckDB,
		TimeColumn:           "event_ts",
		Lookback:             2,
		BatchSize:            24,
		BatchConcurrency:     4,
		ForwardOnly:          true,
		Columns:              []model.Column{{Name: "id", Type: "INT"}, {Name: "ts", Type: "TIMESTAMP"}, {Name: "amount", Type: "DECIMAL(10,2)"}},
		Cron:                 "0 12 * * *",
		IntervalUnit:         interval.Day,
		IntervalUnitExplicit: true,
		Start:                date(2024, 1, 1),
		End:                  date(2025, 1, 1),
		Enabled:              true,
		Owner:                "data-eng",
		Description:          "Daily events",
		Tags:                 []string{"finance", "daily"},
		Grain:                []string{"event_id", "event_ts"},
		Query:                "SELECT event_id, event_ts\nFROM raw.events\nWHERE event_ts BETWEEN @start_ts AND @end_ts",
		Path:                 "models/m.sql",
		QueryPos:             model.Pos{File: "models/m.sql", Line: 21, Col: 1},
		HeaderPos:            model.Pos{File: "models/m.sql", Line: 4, Col: 1},
		KindPos:              model.Pos{File: "models/m.sql", Line: 6, Col: 8},
		TimeColumnPos:        model.Pos{File: "models/m.sql", Line: 6, Col: 47},
	}, m)
	require.Equal(t, "analytics", m.Schema())
	require.Equal(t, "daily_events", m.Table())
}

func TestParseFile_Kinds(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		header string // inside MODEL ( ... ), after name
		query  string
		check  func(t *testing.T, m *model.Model)
	}{
		{
			name:   "time range, minimal",
			header: "kind INCREMENTAL_BY_TIME_RANGE (time_column ts)",
			query:  "SELECT 1",
			check: func(t *testing.T, m *model.Model) {
				require.Equal(t, model.KindIncrementalByTimeRange, m.Kind)
				require.Equal(t, "ts", m.TimeColumn)
				require.Zero(t, m.Lookback)
				require.Zero(t, m.BatchSize)
				require.False(t, m.ForwardOnly)
			},
		},
		{
			name:   "time range, parenthesised time column, trailing comma",
			header: "kind incremental_by_time_range (time_column (ts), lookback 0,)",
			query:  "SELECT 1",
			check: func(t *testing.T, m *model.Model) {
				require.Equal(t, "ts", m.TimeColumn)
				require.Empty(t, m.TimeColumnFormat)
			},
		},
		{
			name:   "time range, string time column with SQLMesh's format",
			header: "kind INCREMENTAL_BY_TIME_RANGE (time_column (ds, '%Y-%m-%d'))",
			query:  "SELECT 1",
			check: func(t *testing.T, m *model.Model) {
				require.Equal(t, "ds", m.TimeColumn)
				require.Equal(t, "%Y-%m-%d", m.TimeColumnFormat)
				require.Equal(t, model.Pos{File: "models/m.sql", Line: 1, Col: 63}, m.TimeColumnPos)
			},
		},
		{
			name:   "unique key, list",
			header: "kind INCREMENTAL_BY_UNIQUE_KEY (unique_key (k1, K2), forward_only true)",
			query:  "SELECT 1",
			check: func(t *testing.T, m *model.Model) {
				require.Equal(t, model.KindIncrementalByUniqueKey, m.Kind)
				require.Equal(t, []string{"k1", "k2"}, m.UniqueKey)
				require.True(t, m.ForwardOnly)
			},
		},
		{
			name:   "unique key, single, quoted",
			header: `kind INCREMENTAL_BY_UNIQUE_KEY (unique_key "Order Id")`,
			query:  "SELECT 1",
			check: func(t *testing.T, m *model.Model) {
				require.Equal(t, []string{"Order Id"}, m.UniqueKey)
			},
		},
		{
			name:   "full",
			header: "kind FULL",
			query:  "SELECT 1",
			check: func(t *testing.T, m *model.Model) {
				require.Equal(t, model.KindFull, m.Kind)
			},
		},
		{
			name:   "full with empty parentheses",
			header: "kind Full ()",
			query:  "SELECT 1",
			check: func(t *testing.T, m *model.Model) {
				require.Equal(t, model.KindFull, m.Kind)
			},
		},
		{
			name:   "view",
			header: "kind VIEW",
			query:  "SELECT 1",
			check: func(t *testing.T, m *model.Model) {
				require.Equal(t, model.KindView, m.Kind)
			},
		},
		{
			name:   "no kind is a view, as in SQLMesh",
			header: "owner x",
			query:  "SELECT 1",
			check: func(t *testing.T, m *model.Model) {
				require.Equal(t, model.KindView, m.Kind)
			},
		},
		{
			name:   "seed",
			header: "kind SEED (path 'seeds/countries.csv')",
			query:  "",
			check: func(t *testing.T, m *model.Model) {
				require.Equal(t, model.KindSeed, m.Kind)
				require.Equal(t, "seeds/countries.csv", m.SeedPath)
				require.Empty(t, m.Query)
			},
		},
		{
			name:   "external with a trailing comment only",
			header: "kind EXTERNAL, columns (id BIGINT, payload STRUCT(a INT, b VARCHAR[]), ts TIMESTAMP WITH TIME ZONE)",
			query:  "-- declared source, no query",
			check: func(t *testing.T, m *model.Model) {
				require.Equal(t, model.KindExternal, m.Kind)
				require.Empty(t, m.Query)
				require.Equal(t, []model.Column{
					{Name: "id", Type: "BIGINT"},
					{Name: "payload", Type: "STRUCT(a INT, b VARCHAR[])"},
					{Name: "ts", Type: "TIMESTAMP WITH TIME ZONE"},
				}, m.Columns)
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := mustParse(t, "MODEL (name s.t, "+tt.header+");\n"+tt.query)
			tt.check(t, m)
		})
	}
}

func TestParseFile_Attributes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		header string
		check  func(t *testing.T, m *model.Model)
	}{
		{"quoted name parts", `name "Sales"."Orders"`, func(t *testing.T, m *model.Model) {
			require.Equal(t, "sales.orders", m.Name)
		}},
		{"name as string", `name 'Sales.Orders'`, func(t *testing.T, m *model.Model) {
			require.Equal(t, "sales.orders", m.Name)
		}},
		{"name with spaces around the dot", `name sales . orders`, func(t *testing.T, m *model.Model) {
			require.Equal(t, "sales.orders", m.Name)
		}},
		{"cron macro", `name s.t, cron '@hourly'`, func(t *testing.T, m *model.Model) {
			require.Equal(t, "@hourly", m.Cron)
			require.Equal(t, interval.Hour, m.IntervalUnit)
			require.False(t, m.IntervalUnitExplicit)
		}},
		{"bare interval unit finer than cron", `name s.t, interval_unit HOUR`, func(t *testing.T, m *model.Model) {
			require.Equal(t, interval.Hour, m.IntervalUnit)
			require.True(t, m.IntervalUnitExplicit)
		}},
		{"coarser unit with allow_partials", `name s.t, cron '@hourly', interval_unit 'day', allow_partials true`, func(t *testing.T, m *model.Model) {
			require.Equal(t, interval.Day, m.IntervalUnit)
			require.True(t, m.AllowPartials)
		}},
		{"start and end with minutes", `name s.t, start '2024-01-01 06:30', end '2024-01-02T00:00'`, func(t *testing.T, m *model.Model) {
			require.Equal(t, time.Date(2024, 1, 1, 6, 30, 0, 0, time.UTC), m.Start)
			require.Equal(t, date(2024, 1, 2), m.End)
		}},
		{"RFC 3339 start with an offset becomes UTC", `name s.t, start '2024-01-01T02:00:00+02:00'`, func(t *testing.T, m *model.Model) {
			require.Equal(t, date(2024, 1, 1), m.Start)
		}},
		{"owner bare, description with escaped quote", `name s.t, owner jen, description 'Jen''s model'`, func(t *testing.T, m *model.Model) {
			require.Equal(t, "jen", m.Owner)
			require.Equal(t, "Jen's model", m.Description)
		}},
		{"tags in parentheses, strings", `name s.t, tags ('pii', Finance)`, func(t *testing.T, m *model.Model) {
			require.Equal(t, []string{"pii", "Finance"}, m.Tags)
		}},
		{"single tag, empty grain list", `name s.t, tags daily, grain []`, func(t *testing.T, m *model.Model) {
			require.Equal(t, []string{"daily"}, m.Tags)
			require.Nil(t, m.Grain, "an empty list is the same as none")
		}},
		{"single grain", `name s.t, grain Event_ID`, func(t *testing.T, m *model.Model) {
			require.Equal(t, []string{"event_id"}, m.Grain)
		}},
		{"enabled false, quoted boolean", `name s.t, enabled FALSE, allow_partials 'true'`, func(t *testing.T, m *model.Model) {
			require.False(t, m.Enabled)
			require.True(t, m.AllowPartials)
		}},
		{"dialect postgres as string", `name s.t, dialect 'Postgres'`, func(t *testing.T, m *model.Model) {
			require.Equal(t, model.DialectPostgres, m.Dialect)
		}},
		{"columns on a non-external model", `name s.t, columns ("Id" int)`, func(t *testing.T, m *model.Model) {
			require.Equal(t, []model.Column{{Name: "Id", Type: "int"}}, m.Columns)
		}},
		{"trailing comma after the last attribute", `name s.t, kind FULL,`, func(t *testing.T, m *model.Model) {
			require.Equal(t, model.KindFull, m.Kind)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.check(t, mustParse(t, "MODEL ("+tt.header+");\nSELECT 1"))
		})
	}
}

func TestParseFile_Defaults(t *testing.T) {
	t.Parallel()
	t.Run("built-in", func(t *testing.T) {
		t.Parallel()
		m := mustParse(t, "MODEL (name s.t); SELECT 1")
		require.Equal(t, model.DefaultCron, m.Cron)
		require.Equal(t, interval.Day, m.IntervalUnit)
		require.False(t, m.IntervalUnitExplicit)
		require.Equal(t, model.DialectDuckDB, m.Dialect)
		require.Equal(t, model.KindView, m.Kind)
		require.True(t, m.Enabled)
		require.True(t, m.Start.IsZero())
		require.Empty(t, m.Owner)
	})
	d := model.Defaults{
		Dialect: model.DialectPostgres,
		Cron:    "@hourly",
		Start:   time.Date(2023, 6, 1, 2, 0, 0, 0, time.FixedZone("x", 2*3600)),
		Owner:   "platform",
	}
	t.Run("project defaults fill silence", func(t *testing.T) {
		t.Parallel()
		m, err := model.ParseFile("m.sql", []byte("MODEL (name s.t); SELECT 1"), d)
		require.NoError(t, err)
		require.Equal(t, model.DialectPostgres, m.Dialect)
		require.Equal(t, "@hourly", m.Cron)
		require.Equal(t, interval.Hour, m.IntervalUnit)
		require.Equal(t, date(2023, 6, 1), m.Start)
		require.Equal(t, time.UTC, m.Start.Location())
		require.Equal(t, "platform", m.Owner)
	})
	t.Run("the file wins over project defaults", func(t *testing.T) {
		t.Parallel()
		src := "MODEL (name s.t, dialect duckdb, cron '@daily', start '2024-01-01', owner me); SELECT 1"
		m, err := model.ParseFile("m.sql", []byte(src), d)
		require.NoError(t, err)
		require.Equal(t, model.DialectDuckDB, m.Dialect)
		require.Equal(t, "@daily", m.Cron)
		require.Equal(t, interval.Day, m.IntervalUnit)
		require.Equal(t, date(2024, 1, 1), m.Start)
		require.Equal(t, "me", m.Owner)
	})
	t.Run("bad project default cron points at the header", func(t *testing.T) {
		t.Parallel()
		_, err := model.ParseFile("m.sql", []byte("\nMODEL (name s.t); SELECT 1"), model.Defaults{Cron: "@often"})
		require.ErrorContains(t, err, "m.sql:2:1: bad project default cron '@often': ")
		require.ErrorIs(t, err, cron.ErrInvalid)
	})
}

func TestParseFile_CaseAndComments(t *testing.T) {
	t.Parallel()
	src := "/* lead */ model /* x */ ( -- y\n" +
		"  NAME Sales.Orders, KIND Incremental_By_Time_Range ( TIME_COLUMN Ts /* c */ , LOOKBACK 1 ),\n" +
		"  CRON '@daily', Interval_Unit Day, ENABLED True\n" +
		") -- between header and ;\n; -- after\nselect 1 -- tail\n;\n\n"
	m := mustParse(t, src)
	require.Equal(t, "sales.orders", m.Name)
	require.Equal(t, model.KindIncrementalByTimeRange, m.Kind)
	require.Equal(t, "ts", m.TimeColumn)
	require.Equal(t, 1, m.Lookback)
	require.Equal(t, interval.Day, m.IntervalUnit)
	require.Equal(t, "-- after\nselect 1 -- tail", m.Query)
	require.Equal(t, model.Pos{File: "models/m.sql", Line: 5, Col: 3}, m.QueryPos)
}

func TestParseFile_StringsMayHoldHeaderSyntax(t *testing.T) {
	t.Parallel()
	m := mustParse(t, "MODEL (name s.t, description 'a ) ; -- /* b', owner '/* not a comment */');\nSELECT ')'")
	require.Equal(t, "a ) ; -- /* b", m.Description)
	require.Equal(t, "/* not a comment */", m.Owner)
	require.Equal(t, "SELECT ')'", m.Query)
}

func TestPosOf(t *testing.T) {
	t.Parallel()
	// Scenario: the SQL parser reports an error at byte k of the query; the
	// user must see the file's line and column of that byte.
	src := "MODEL (name s.t);\n\n  SELECT a,\n    b\n  FROM x"
	m := mustParse(t, src)
	require.Equal(t, model.Pos{File: "models/m.sql", Line: 3, Col: 3}, m.QueryPos)
	tests := []struct {
		off  int
		want model.Pos
	}{
		{0, model.Pos{File: "models/m.sql", Line: 3, Col: 3}},
		{7, model.Pos{File: "models/m.sql", Line: 3, Col: 10}},  // 'a'
		{14, model.Pos{File: "models/m.sql", Line: 4, Col: 5}},  // 'b'
		{18, model.Pos{File: "models/m.sql", Line: 5, Col: 3}},  // 'F'
		{-5, model.Pos{File: "models/m.sql", Line: 3, Col: 3}},  // clamped
		{999, model.Pos{File: "models/m.sql", Line: 5, Col: 9}}, // clamped to the end
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, m.PosOf(tt.off), "offset %d", tt.off)
	}
}

// TestParseFile_Messages pins the exact text users see for broken model
// files.
func TestParseFile_Messages(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		src  string
		want string
		code model.Code
	}{
		{
			name: "unknown kind with a suggestion",
			src:  "MODEL (\n  name s.t,\n  kind INCREMENTAL_BY_TIME (time_column ts)\n);\nSELECT 1",
			want: "models/bad.sql:3:8: unknown model kind INCREMENTAL_BY_TIME: did you mean INCREMENTAL_BY_TIME_RANGE? " +
				"(kinds: INCREMENTAL_BY_TIME_RANGE, INCREMENTAL_BY_UNIQUE_KEY, FULL, VIEW, SEED, EXTERNAL, " +
				"SCD_TYPE_2_BY_TIME, SCD_TYPE_2_BY_COLUMN, INCREMENTAL_BY_PARTITION, INCREMENTAL_UNMANAGED)",
			code: model.CodeUnknownKind,
		},
		{
			name: "unknown kind without a suggestion",
			src:  "MODEL (name s.t, kind TABLE); SELECT 1",
			want: "models/bad.sql:1:23: unknown model kind TABLE " +
				"(kinds: INCREMENTAL_BY_TIME_RANGE, INCREMENTAL_BY_UNIQUE_KEY, FULL, VIEW, SEED, EXTERNAL, " +
				"SCD_TYPE_2_BY_TIME, SCD_TYPE_2_BY_COLUMN, INCREMENTAL_BY_PARTITION, INCREMENTAL_UNMANAGED)",
			code: model.CodeUnknownKind,
		},
		{
			name: "SQLMesh kind gapless lacks",
			src:  "MODEL (name s.t, kind MANAGED); SELECT 1",
			want: "models/bad.sql:1:23: kind MANAGED is a SQLMesh kind that gapless does not support " +
				"(kinds: INCREMENTAL_BY_TIME_RANGE, INCREMENTAL_BY_UNIQUE_KEY, FULL, VIEW, SEED, EXTERNAL, " +
				"SCD_TYPE_2_BY_TIME, SCD_TYPE_2_BY_COLUMN, INCREMENTAL_BY_PARTITION, INCREMENTAL_UNMANAGED)",
			code: model.CodeUnknownKind,
		},
		{
			name: "missing name",
			src:  "-- no name\nMODEL (\n  kind FULL\n);\nSELECT 1",
			want: "models/bad.sql:2:1: MODEL header has no name: add name schema.table",
			code: model.CodeMissingName,
		},
		{
			name: "name without schema",
			src:  "MODEL (name orders); SELECT 1",
			want: "models/bad.sql:1:13: bad model name orders: want schema.table",
			code: model.CodeBadName,
		},
		{
			name: "name with a catalog",
			src:  "MODEL (name db.s.t); SELECT 1",
			want: "models/bad.sql:1:13: bad model name db.s.t: want schema.table",
			code: model.CodeBadName,
		},
		{
			name: "name with a space in a quoted part",
			src:  `MODEL (name "my schema".t); SELECT 1`,
			want: `models/bad.sql:1:13: bad model name "my schema".t: "my schema" is not a plain identifier (letters, digits and _, not starting with a digit)`,
			code: model.CodeBadName,
		},
		{
			name: "schema with double underscore",
			src:  `MODEL (name sales__dev.t); SELECT 1`,
			want: `models/bad.sql:1:13: bad model name sales__dev.t: a schema name may not contain "__" (gapless uses it for environment schemas)`,
			code: model.CodeBadName,
		},
		{
			name: "table name over the identifier limit",
			src:  "MODEL (name s." + strings.Repeat("t", 64) + "); SELECT 1",
			want: "models/bad.sql:1:13: bad model name s." + strings.Repeat("t", 64) +
				": the table name is 64 bytes, longer than the 63-byte identifier limit (PostgreSQL would truncate it); shorten it",
			code: model.CodeBadName,
		},
		{
			name: "schema name over the identifier limit",
			src:  "MODEL (name '" + strings.Repeat("S", 70) + ".t'); SELECT 1",
			want: "models/bad.sql:1:13: bad model name '" + strings.Repeat("S", 70) +
				".t': the schema name is 70 bytes, longer than the 63-byte identifier limit (PostgreSQL would truncate it); shorten it",
			code: model.CodeBadName,
		},
		{
			name: "reserved table name",
			src:  `MODEL (name s.__gapless_macro_this_model); SELECT 1`,
			want: `models/bad.sql:1:13: bad model name s.__gapless_macro_this_model: table names starting with __gapless are reserved`,
			code: model.CodeBadName,
		},
		{
			name: "bad cron",
			src:  "MODEL (\n  name s.t,\n  cron '0 25 * * *'\n);\nSELECT 1",
			want: "models/bad.sql:3:8: bad cron '0 25 * * *': invalid cron expression: ",
			code: model.CodeBadCron,
		},
		{
			name: "cron with seconds",
			src:  "MODEL (name s.t, cron '0 0 0 * * *'); SELECT 1",
			want: "models/bad.sql:1:23: bad cron '0 0 0 * * *': invalid cron expression: has 6 fields, want 5 (minute hour day-of-month month day-of-week); seconds and year fields are not supported",
			code: model.CodeBadCron,
		},
		{
			name: "interval unit coarser than cron",
			src:  "MODEL (name s.t, cron '@hourly', interval_unit day); SELECT 1",
			want: "models/bad.sql:1:48: interval_unit day does not fit cron '@hourly': interval unit is coarser than the cron: ",
			code: model.CodeBadCron,
		},
		{
			name: "unknown attribute with a suggestion",
			src:  "MODEL (\n  name s.t,\n  intervl_unit 'day'\n);\nSELECT 1",
			want: "models/bad.sql:3:3: unknown attribute intervl_unit: did you mean interval_unit?",
			code: model.CodeUnknownAttribute,
		},
		{
			name: "unknown attribute without a suggestion",
			src:  "MODEL (name s.t, frobnicate 1); SELECT 1",
			want: "models/bad.sql:1:18: unknown attribute frobnicate (attributes: name, kind, cron, interval_unit, start, end, owner, description, tags, grain, allow_partials, enabled, dialect, columns, audits, partitioned_by, clustered_by, column_descriptions, physical_properties, table_format, storage_format)",
			code: model.CodeUnknownAttribute,
		},
		{
			name: "SQLMesh attribute gapless lacks",
			src:  "MODEL (name s.t, session_properties (a = 1)); SELECT 1",
			want: "models/bad.sql:1:18: attribute session_properties is not supported by gapless and ignoring it would change results: the query would run without those session settings, which can change its rows; remove it",
			code: model.CodeUnknownAttribute,
		},
		{
			name: "kind property at the top level",
			src:  "MODEL (name s.t, kind FULL, lookback 2); SELECT 1",
			want: "models/bad.sql:1:29: lookback is a property of the kind, not of the model: write it inside kind INCREMENTAL_BY_TIME_RANGE ( ... )",
			code: model.CodeUnknownAttribute,
		},
		{
			name: "time_column on a view",
			src:  "MODEL (name s.t, kind VIEW (time_column ts)); SELECT 1",
			want: "models/bad.sql:1:29: time_column is not a property of kind VIEW (only of INCREMENTAL_BY_TIME_RANGE)",
			code: model.CodeUnknownAttribute,
		},
		{
			name: "misspelt kind property",
			src:  "MODEL (name s.t, kind INCREMENTAL_BY_TIME_RANGE (time_column ts, batchsize 2)); SELECT 1",
			want: "models/bad.sql:1:66: unknown property batchsize of kind INCREMENTAL_BY_TIME_RANGE: did you mean batch_size?",
			code: model.CodeUnknownAttribute,
		},
		{
			name: "kind's ')' missing",
			src:  "MODEL (\n  name s.t,\n  kind INCREMENTAL_BY_TIME_RANGE (time_column ts,\n  cron '@daily'\n);\nSELECT 1",
			want: "models/bad.sql:4:3: cron is not a property of kind INCREMENTAL_BY_TIME_RANGE; is the ')' that closes the kind's properties missing?",
			code: model.CodeUnknownAttribute,
		},
		{
			name: "time range without time_column",
			src:  "MODEL (name s.t, kind INCREMENTAL_BY_TIME_RANGE); SELECT 1",
			want: "models/bad.sql:1:23: kind INCREMENTAL_BY_TIME_RANGE needs a time column: write kind INCREMENTAL_BY_TIME_RANGE (time_column COLUMN)",
			code: model.CodeInvalid,
		},
		{
			name: "time_column format out of order",
			src:  "MODEL (name s.t, kind INCREMENTAL_BY_TIME_RANGE (time_column (ds, '%d/%m/%Y'))); SELECT 1",
			want: "models/bad.sql:1:67: bad time_column format '%d/%m/%Y': time format \"%d/%m/%Y\" has %d (day) before %Y (year): " +
				"the column is compared as text, so its format must run from the year down, none skipped (for example '%Y-%m-%d')",
			code: model.CodeBadValue,
		},
		{
			name: "time_column format with an unsupported field",
			src:  "MODEL (name s.t, kind INCREMENTAL_BY_TIME_RANGE (time_column (ds, '%Y%j'))); SELECT 1",
			want: "models/bad.sql:1:67: bad time_column format '%Y%j': time format \"%Y%j\" uses %j, which gapless does not support: use %Y %m %d %H %M %S",
			code: model.CodeBadValue,
		},
		{
			name: "time_column format too coarse for the unit",
			src:  "MODEL (name s.t, kind INCREMENTAL_BY_TIME_RANGE (time_column (ds, '%Y-%m-%d')), cron '@hourly'); SELECT 1",
			want: "models/bad.sql:1:67: time_column format '%Y-%m-%d' is too coarse for interval_unit hour: its finest field is the day, " +
				"so the bounds of one interval would render alike; add the finer fields (for example '%Y-%m-%d %H:%M:%S')",
			code: model.CodeInvalid,
		},
		{
			name: "duplicate attribute",
			src:  "MODEL (\n  name s.t,\n  cron '@daily',\n  CRON '@hourly'\n);\nSELECT 1",
			want: "models/bad.sql:4:3: duplicate attribute cron (first set on line 3)",
			code: model.CodeDuplicateAttribute,
		},
		{
			name: "duplicate kind property",
			src:  "MODEL (name s.t, kind INCREMENTAL_BY_TIME_RANGE (time_column a, time_column b)); SELECT 1",
			want: "models/bad.sql:1:65: duplicate property time_column of kind INCREMENTAL_BY_TIME_RANGE (first set on line 1)",
			code: model.CodeDuplicateAttribute,
		},
		{
			name: "unterminated header: the query follows without ')'",
			src:  "-- x\nMODEL (\n  name s.t,\n  kind FULL\n\nSELECT 1",
			want: "models/bad.sql:2:1: unterminated MODEL header: missing ')' to close MODEL (",
			code: model.CodeUnterminated,
		},
		{
			name: "unterminated header: end of file",
			src:  "MODEL (\n  name s.t,\n  tags [a, b",
			want: "models/bad.sql:1:1: unterminated MODEL header: missing ')' to close MODEL (",
			code: model.CodeUnterminated,
		},
		{
			name: "missing comma",
			src:  "MODEL (\n  name s.t\n  kind FULL\n);\nSELECT 1",
			want: "models/bad.sql:3:3: missing ',' before attribute kind",
			code: model.CodeSyntax,
		},
		{
			name: "unterminated string",
			src:  "MODEL (name s.t, description 'oops);\nSELECT 1",
			want: "models/bad.sql:1:30: unterminated string",
			code: model.CodeUnterminated,
		},
		{
			name: "unterminated comment",
			src:  "MODEL (name s.t, /* oops\n); SELECT 1",
			want: "models/bad.sql:1:18: unterminated /* comment",
			code: model.CodeUnterminated,
		},
		{
			name: "no header",
			src:  "SELECT 1",
			want: "models/bad.sql:1:1: expected a MODEL (...) header at the start of the file, found 'SELECT'",
			code: model.CodeSyntax,
		},
		{
			name: "empty file",
			src:  "  -- nothing\n",
			want: "models/bad.sql:2:1: empty model file: expected a MODEL (...) header",
			code: model.CodeSyntax,
		},
		{
			name: "bad date",
			src:  "MODEL (\n  name s.t,\n  start '2024-13-01'\n);\nSELECT 1",
			want: "models/bad.sql:3:9: bad start '2024-13-01': month out of range",
			code: model.CodeBadValue,
		},
		{
			name: "unparseable date",
			src:  "MODEL (name s.t, end 'next tuesday'); SELECT 1",
			want: "models/bad.sql:1:22: bad end 'next tuesday': want 'YYYY-MM-DD', 'YYYY-MM-DD HH:MM[:SS]' or RFC 3339",
			code: model.CodeBadValue,
		},
		{
			name: "end before start",
			src:  "MODEL (name s.t, start '2024-02-01', end '2024-01-01'); SELECT 1",
			want: "models/bad.sql:1:42: end 2024-01-01 is not after start 2024-02-01",
			code: model.CodeInvalid,
		},
		{
			name: "bad integer",
			src:  "MODEL (name s.t, kind INCREMENTAL_BY_TIME_RANGE (time_column ts, lookback two)); SELECT 1",
			want: "models/bad.sql:1:75: bad integer for lookback: two; want a whole number from 0 to 1000000",
			code: model.CodeBadValue,
		},
		{
			name: "zero batch size",
			src:  "MODEL (name s.t, kind INCREMENTAL_BY_TIME_RANGE (time_column ts, batch_size 0)); SELECT 1",
			want: "models/bad.sql:1:77: bad integer for batch_size: 0; want a whole number from 1 to 1000000",
			code: model.CodeBadValue,
		},
		{
			name: "batch concurrency too high",
			src:  "MODEL (name s.t, kind INCREMENTAL_BY_TIME_RANGE (time_column ts, batch_concurrency 65)); SELECT 1",
			want: "models/bad.sql:1:84: batch_concurrency 65 is too high; want at most 64 batches at once",
			code: model.CodeBadValue,
		},
		{
			name: "batch concurrency on a kind without batches",
			src:  "MODEL (name s.t, kind FULL (batch_concurrency 2)); SELECT 1",
			want: "models/bad.sql:1:29: batch_concurrency is not a property of kind FULL (only of INCREMENTAL_BY_TIME_RANGE)",
			code: model.CodeUnknownAttribute,
		},
		{
			name: "bad boolean",
			src:  "MODEL (name s.t, enabled yes); SELECT 1",
			want: "models/bad.sql:1:26: bad boolean for enabled: yes; want true or false",
			code: model.CodeBadValue,
		},
		{
			name: "bad interval unit",
			src:  "MODEL (name s.t, interval_unit 'dayz'); SELECT 1",
			want: "models/bad.sql:1:32: bad interval_unit 'dayz': ",
			code: model.CodeBadValue,
		},
		{
			name: "bad dialect",
			src:  "MODEL (name s.t, dialect postgresql); SELECT 1",
			want: `models/bad.sql:1:26: bad dialect: unknown dialect "postgresql": did you mean postgres?`,
			code: model.CodeBadValue,
		},
		{
			name: "missing query",
			src:  "MODEL (name s.t, kind FULL);\n  -- TODO\n",
			want: "models/bad.sql:1:29: missing query: a FULL model needs a query after the MODEL header",
			code: model.CodeMissingQuery,
		},
		{
			name: "seed with a query",
			src:  "MODEL (name s.t, kind SEED (path 'a.csv'));\n\nSELECT 1",
			want: "models/bad.sql:3:1: a SEED model takes no query, but SQL follows the MODEL header",
			code: model.CodeUnexpectedQuery,
		},
		{
			name: "external without columns",
			src:  "MODEL (\n  name raw.events,\n  kind EXTERNAL\n);",
			want: "models/bad.sql:3:8: EXTERNAL model raw.events must declare its columns: add columns (name TYPE, ...)",
			code: model.CodeInvalid,
		},
		{
			name: "external with a cron",
			src:  "MODEL (name raw.events, kind EXTERNAL, cron '@daily', columns (id INT));",
			want: "models/bad.sql:1:40: attribute cron does not apply to an EXTERNAL model: gapless never computes it",
			code: model.CodeInvalid,
		},
		{
			name: "column without a type",
			src:  "MODEL (name raw.events, kind EXTERNAL, columns (id, ts TIMESTAMP));",
			want: "models/bad.sql:1:51: column id has no type",
			code: model.CodeBadValue,
		},
		{
			name: "attribute without a value",
			src:  "MODEL (name s.t, cron, kind FULL); SELECT 1",
			want: "models/bad.sql:1:22: attribute cron has no value",
			code: model.CodeSyntax,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m, err := model.ParseFile("models/bad.sql", []byte(tt.src), model.Defaults{})
			require.Nil(t, m)
			require.Error(t, err)
			if strings.HasSuffix(tt.want, ": ") {
				// The tail is the cron or interval package's own text.
				require.True(t, strings.HasPrefix(err.Error(), tt.want), "got %q", err.Error())
			} else {
				require.Equal(t, tt.want, err.Error())
			}
			var me *model.Error
			require.True(t, errors.As(err, &me))
			require.Equal(t, tt.code, me.Code)
		})
	}
}

func TestParseFile_WrapsCauses(t *testing.T) {
	t.Parallel()
	_, err := model.ParseFile("m.sql", []byte("MODEL (name s.t, cron '@hourly', interval_unit month); SELECT 1"), model.Defaults{})
	require.ErrorIs(t, err, cron.ErrUnitTooCoarse)
	_, err = model.ParseFile("m.sql", []byte("MODEL (name s.t, interval_unit fortnight); SELECT 1"), model.Defaults{})
	require.ErrorIs(t, err, interval.ErrUnknownUnit)
	_, err = model.ParseFile("m.sql", []byte("MODEL (name s.t, start '2024'); SELECT 1"), model.Defaults{})
	require.ErrorIs(t, err, model.ErrBadTime)
}

func TestTimeFormat(t *testing.T) {
	t.Parallel()
	at := time.Date(2024, 3, 7, 9, 5, 2, 0, time.UTC)
	for spec, want := range map[string]string{
		"%Y-%m-%d":          "2024-03-07",
		"%Y%m%d":            "20240307",
		"%Y-%m-%dT%H:%M:%S": "2024-03-07T09:05:02",
		"%Y/%m":             "2024/03",
		"week %Y %%":        "week 2024 %",
	} {
		f, err := model.ParseTimeFormat(spec)
		require.NoError(t, err, spec)
		require.Equal(t, want, f.Format(at), spec)
		require.Equal(t, spec, f.String())
	}
	for _, bad := range []string{"", "%", "day", "%m-%d", "%Y-%d", "%Y-%m-%d-%Y", "%y-%m-%d"} {
		_, err := model.ParseTimeFormat(bad)
		require.Error(t, err, bad)
	}

	// Rendered bounds sort as time does: the property string comparison
	// of a time column relies on.
	f, err := model.ParseTimeFormat("%Y-%m-%d %H:%M")
	require.NoError(t, err)
	prev := f.Format(at)
	for i := 1; i < 500; i++ {
		next := f.Format(at.Add(time.Duration(i*i) * 37 * time.Minute))
		require.LessOrEqual(t, prev, next)
		prev = next
	}
	day, err := model.ParseTimeFormat("%Y-%m-%d")
	require.NoError(t, err)
	require.True(t, day.Resolves(interval.Day))
	require.True(t, day.Resolves(interval.Month))
	require.False(t, day.Resolves(interval.Hour))
	require.False(t, day.Resolves(interval.FiveMinute))
	require.True(t, f.Resolves(interval.FiveMinute))
}

func TestParseTime(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want time.Time
	}{
		{"2024-03-05", date(2024, 3, 5)},
		{"2024-03-05 07:08", time.Date(2024, 3, 5, 7, 8, 0, 0, time.UTC)},
		{"2024-03-05 07:08:09", time.Date(2024, 3, 5, 7, 8, 9, 0, time.UTC)},
		{"2024-03-05T07:08:09", time.Date(2024, 3, 5, 7, 8, 9, 0, time.UTC)},
		{"2024-03-05 07:08:09.5", time.Date(2024, 3, 5, 7, 8, 9, 5e8, time.UTC)},
		{"2024-03-05T07:08:09Z", time.Date(2024, 3, 5, 7, 8, 9, 0, time.UTC)},
		{"2024-03-05T07:08:09-01:00", time.Date(2024, 3, 5, 8, 8, 9, 0, time.UTC)},
		{"2024-03-05 07:08:09+01:00", time.Date(2024, 3, 5, 6, 8, 9, 0, time.UTC)},
	}
	for _, tt := range tests {
		got, err := model.ParseTime(tt.in)
		require.NoError(t, err, tt.in)
		require.Equal(t, tt.want, got, tt.in)
		require.Equal(t, time.UTC, got.Location(), tt.in)
	}
	for _, bad := range []string{"", "2024", "2024-02-30", "24-01-01", "2024-01-01 25:00", "yesterday"} {
		_, err := model.ParseTime(bad)
		require.ErrorIs(t, err, model.ErrBadTime, bad)
	}
}

// Scenario: a project names a model with the longest schema and table the
// identifier limit allows (63 bytes each); it loads, since views are served
// under exactly those names and PostgreSQL accepts them.
func TestParseFile_NameAtTheIdentifierLimit(t *testing.T) {
	t.Parallel()
	schema, table := strings.Repeat("s", model.MaxIdentBytes), strings.Repeat("t", model.MaxIdentBytes)
	m := mustParse(t, "MODEL (name "+schema+"."+table+"); SELECT 1")
	require.Equal(t, schema, m.Schema())
	require.Equal(t, table, m.Table())
}
