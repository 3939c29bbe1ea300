package macro_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/macro"
)

var day = macro.Vars{
	Start:     time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC),
	End:       time.Date(2024, 1, 2, 0, 0, 0, 0, time.UTC),
	Execution: time.Date(2024, 1, 2, 12, 30, 5, 0, time.UTC),
	ThisModel: `"gapless__s"."s__t__abc123"`,
}

func TestRender_Values(t *testing.T) {
	t.Parallel()
	tests := []struct {
		sql  string
		want string
	}{
		{"@start_ts", "TIMESTAMP '2024-01-01 00:00:00'"},
		{"@start_dt", "TIMESTAMP '2024-01-01 00:00:00'"},
		{"@start_ds", "'2024-01-01'"},
		{"@start_date", "DATE '2024-01-01'"},
		{"@start_ms", "1704067200000"},
		{"@start_millis", "1704067200000"},
		// Ends are inclusive: the last instant, day and millisecond inside
		// [Start, End).
		{"@end_ts", "TIMESTAMP '2024-01-01 23:59:59.999999'"},
		{"@end_dt", "TIMESTAMP '2024-01-01 23:59:59.999999'"},
		{"@end_ds", "'2024-01-01'"},
		{"@end_date", "DATE '2024-01-01'"},
		{"@end_ms", "1704153599999"},
		{"@execution_ts", "TIMESTAMP '2024-01-02 12:30:05'"},
		{"@execution_ds", "'2024-01-02'"},
		{"@execution_ms", "1704198605000"},
		{"@this_model", `"gapless__s"."s__t__abc123"`},
		{"@START_DS", "'2024-01-01'"},
	}
	for _, dialect := range []string{"duckdb", "postgres"} {
		for _, tt := range tests {
			got, err := macro.Render(tt.sql, day, dialect)
			require.NoError(t, err, tt.sql)
			require.Equal(t, tt.want, got, "%s in %s", tt.sql, dialect)
		}
	}
}

func TestRender_Query(t *testing.T) {
	t.Parallel()
	// Scenario: an incremental model selects exactly its interval; macros in
	// strings, quoted identifiers and comments are left alone.
	sql := `SELECT id, '@start_ds' AS lit, "@end_ds" AS col -- @nope
FROM raw.events /* @nope /* nested @nope */ still comment @nope */
WHERE ts BETWEEN @start_ts AND @end_ts AND note <> E'it\'s @nope' AND body <> $tag$ @nope $tag$
  AND NOT EXISTS (SELECT 1 FROM @this_model)`
	want := `SELECT id, '@start_ds' AS lit, "@end_ds" AS col -- @nope
FROM raw.events /* @nope /* nested @nope */ still comment @nope */
WHERE ts BETWEEN TIMESTAMP '2024-01-01 00:00:00' AND TIMESTAMP '2024-01-01 23:59:59.999999' AND note <> E'it\'s @nope' AND body <> $tag$ @nope $tag$
  AND NOT EXISTS (SELECT 1 FROM "gapless__s"."s__t__abc123")`
	for _, dialect := range []string{"duckdb", "Postgres"} {
		got, err := macro.Render(sql, day, dialect)
		require.NoError(t, err)
		require.Equal(t, want, got)
	}
}

func TestRender_InclusiveEndAcrossUnits(t *testing.T) {
	t.Parallel()
	// Scenario: an hourly interval's end values stay inside the hour, and a
	// monthly interval's @end_ds is the month's last day, not the next 1st.
	hour := macro.Vars{
		Start: time.Date(2024, 2, 29, 23, 0, 0, 0, time.UTC),
		End:   time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC),
	}
	got, err := macro.Render("@end_ts @end_ds @end_ms", hour, "duckdb")
	require.NoError(t, err)
	require.Equal(t, "TIMESTAMP '2024-02-29 23:59:59.999999' '2024-02-29' 1709251199999", got)

	month := macro.Vars{
		Start: time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC),
		End:   time.Date(2024, 2, 1, 0, 0, 0, 0, time.UTC),
	}
	got, err = macro.Render("@start_ds..@end_ds", month, "postgres")
	require.NoError(t, err)
	require.Equal(t, "'2024-01-01'..'2024-01-31'", got)
}

func TestRender_NonUTCAndFractions(t *testing.T) {
	t.Parallel()
	plus2 := time.FixedZone("plus2", 2*3600)
	v := macro.Vars{
		Start:     time.Date(2024, 1, 1, 2, 0, 0, 0, plus2), // 00:00 UTC
		End:       time.Date(2024, 1, 1, 1, 0, 0, 0, time.UTC),
		Execution: time.Date(2024, 1, 1, 0, 0, 0, 1_500_000_999, time.UTC),
	}
	got, err := macro.Render("@start_ts|@execution_ts|@execution_ms", v, "duckdb")
	require.NoError(t, err)
	require.Equal(t, "TIMESTAMP '2024-01-01 00:00:00'|TIMESTAMP '2024-01-01 00:00:01.500000'|1704067201500", got)
}

func TestRender_PadsAgainstFusing(t *testing.T) {
	t.Parallel()
	v := macro.Vars{Start: time.Date(1969, 12, 31, 23, 59, 59, 0, time.UTC), End: day.End}
	got, err := macro.Render("x-@start_ms", v, "duckdb")
	require.NoError(t, err)
	require.Equal(t, "x-(-1000)", got, "a negative number must not turn '-' into a comment")
	got, err = macro.Render("a@start_ds", day, "duckdb")
	require.NoError(t, err)
	require.Equal(t, "a '2024-01-01'", got)
}

func TestRender_Errors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		sql  string
		v    macro.Vars
		want string
		code macro.Code
		off  int
	}{
		{"unknown with suggestion", "SELECT @strat_ds", day,
			"byte 7: unknown macro variable @strat_ds: did you mean @start_ds?", macro.CodeUnknownVariable, 7},
		{"unknown without suggestion", "SELECT 1 WHERE @whatever_this_is", day,
			"byte 15: unknown macro variable @whatever_this_is (variables include @start_ts, @end_ts, @start_ds, @end_ds, @start_ms, @end_ms, @execution_ts, @this_model)",
			macro.CodeUnknownVariable, 15},
		{"SQLMesh epoch is not supported", "@start_epoch", day,
			"byte 0: macro variable @start_epoch is a SQLMesh variable that gapless does not support (variables include @start_ts, @end_ts, @start_ds, @end_ds, @start_ms, @end_ms, @execution_ts, @this_model)",
			macro.CodeUnknownVariable, 0},
		{"no interval", "SELECT @end_ds", macro.Vars{Execution: day.Execution},
			"byte 7: @end_ds: the interval is not set (Vars.Start and Vars.End are needed)", macro.CodeMissingValue, 7},
		{"empty interval", "@start_ds", macro.Vars{Start: day.End, End: day.Start},
			"byte 0: @start_ds: the interval is empty: end 2024-01-01T00:00:00Z is not after start 2024-01-02T00:00:00Z", macro.CodeMissingValue, 0},
		{"no execution time", "\n@execution_ts", macro.Vars{Start: day.Start, End: day.End},
			"byte 1: @execution_ts: the execution time is not set (Vars.Execution)", macro.CodeMissingValue, 1},
		{"no table", "FROM @this_model", macro.Vars{},
			"byte 5: @this_model: no table reference given (Vars.ThisModel is empty)", macro.CodeMissingValue, 5},
		{"reserved identifier", "SELECT __GAPLESS_MACRO_start_ds", day,
			"byte 7: identifier __GAPLESS_MACRO_start_ds is reserved: names starting with __gapless_macro_ are gapless's macro placeholders",
			macro.CodeReserved, 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := macro.Render(tt.sql, tt.v, "duckdb")
			require.EqualError(t, err, tt.want)
			var me *macro.Error
			require.True(t, errors.As(err, &me))
			require.Equal(t, tt.code, me.Code)
			require.Equal(t, tt.off, me.Offset)
		})
	}
	_, err := macro.Render("SELECT 1", day, "snowflake")
	require.ErrorIs(t, err, macro.ErrUnknownDialect)
}

func TestFind(t *testing.T) {
	t.Parallel()
	refs, err := macro.Find("SELECT @Start_DS, '@x', $1, @end_ms, a @> b, @ c, x::@start_ts")
	require.NoError(t, err)
	require.Equal(t, []macro.Ref{
		{Name: "start_ds", Offset: 7, Len: 9},
		{Name: "end_ms", Offset: 28, Len: 7},
		{Name: "start_ts", Offset: 53, Len: 9},
	}, refs)
	require.Contains(t, macro.Names(), "execution_millis")
	require.Contains(t, macro.Names(), "this_model")
}

func TestForParse(t *testing.T) {
	t.Parallel()
	// Scenario: the dependency extractor parses the query with placeholders;
	// a parse error at byte k of the rewritten query must point at the same
	// place in the original.
	sql := "SELECT a FROM src WHERE ts >= @start_ts AND ts < @END_TS\nUNION ALL SELECT a FROM @this_model ORDER BY"
	out, m, err := macro.ForParse(sql)
	require.NoError(t, err)
	require.Equal(t, "SELECT a FROM src WHERE ts >= __gapless_macro_start_ts AND ts < __gapless_macro_end_ts\n"+
		"UNION ALL SELECT a FROM __gapless_macro_this_model ORDER BY", out)

	// Every byte outside a placeholder maps to the same byte of the original.
	for _, word := range []string{"SELECT", "src", "AND", "UNION", "ORDER BY"} {
		require.Equal(t, strings.Index(sql, word), m.Original(strings.Index(out, word)), word)
	}
	// Bytes inside a placeholder map to the macro's '@'.
	ph := strings.Index(out, macro.ThisModelPlaceholder)
	for k := ph; k < ph+len(macro.ThisModelPlaceholder); k++ {
		require.Equal(t, strings.Index(sql, "@this_model"), m.Original(k))
	}
	// The end maps to the end; out-of-range offsets are clamped.
	require.Equal(t, len(sql), m.Original(len(out)))
	require.Equal(t, len(sql), m.Original(len(out)+100))
	require.Equal(t, 0, m.Original(-3))

	require.True(t, macro.IsPlaceholderTable("__gapless_macro_this_model"))
	require.True(t, macro.IsPlaceholderTable(`"__GAPLESS_MACRO_THIS_MODEL"`))
	require.False(t, macro.IsPlaceholderTable("__gapless_macro_start_ts"))
	require.True(t, macro.IsPlaceholder("__gapless_macro_start_ts"))
	require.False(t, macro.IsPlaceholder("src"))
	require.Equal(t, "__gapless_macro_start_ds", macro.Placeholder("START_DS"))
}

func TestForParse_NoMacrosIsIdentity(t *testing.T) {
	t.Parallel()
	out, m, err := macro.ForParse("SELECT 1")
	require.NoError(t, err)
	require.Equal(t, "SELECT 1", out)
	require.Equal(t, 3, m.Original(3))
	require.Equal(t, 5, macro.Mapper{}.Original(5))
}

func TestForParse_Errors(t *testing.T) {
	t.Parallel()
	_, _, err := macro.ForParse("SELECT @nope")
	var me *macro.Error
	require.True(t, errors.As(err, &me))
	require.Equal(t, macro.CodeUnknownVariable, me.Code)
	require.Equal(t, "nope", me.Name)

	_, _, err = macro.ForParse(`SELECT "__gapless_macro_this_model".x`)
	require.True(t, errors.As(err, &me))
	require.Equal(t, macro.CodeReserved, me.Code)
	require.Equal(t, 7, me.Offset)
}
