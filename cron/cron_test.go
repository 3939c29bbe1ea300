package cron

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/adhocore/gronx"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/gapless-dev/gapless/interval"
)

func ts(t testing.TB, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	require.NoError(t, err)
	return v.UTC()
}

// tb is what both *testing.T and *rapid.T provide.
type tb interface {
	require.TestingT
	Helper()
}

func mustParse(t tb, expr string) Schedule {
	t.Helper()
	s, err := Parse(expr)
	require.NoError(t, err, expr)
	return s
}

func TestParseAccepts(t *testing.T) {
	t.Parallel()
	for _, expr := range []string{
		"0 12 * * *", "*/5 * * * *", "0 */2 * * *", "0 0 1,15 * *", "0 0 * * MON-FRI",
		"30 2 * JAN,JUL *", "0 0 L * *", "0 0 15W * *", "0 0 * * 5L", "0 0 * * 1#2",
		"0 0 1-7 * 1", "  0\t0  * * *  ", "@hourly", "@daily", "@weekly", "@monthly", "@yearly",
		"@Daily", "* * * * *",
	} {
		s, err := Parse(expr)
		require.NoError(t, err, expr)
		require.False(t, s.IsZero())
	}
	require.Equal(t, "@daily", mustParse(t, " @daily ").String())
}

func TestParseRejects(t *testing.T) {
	t.Parallel()
	for _, expr := range []string{
		"", "   ", "* * * *", "0 * * * * *", "0 0 * * * 2024", "0 0 0 * * * 2024",
		"@reboot", "@every 5m", "@always", "@5minutes", "@annually", "@", "garbage",
		"a b c d e", "61 * * * *", "0 24 * * *", "0 0 32 * *", "0 0 * 13 *", "0 0 * * 8",
		"*,99 * * * *", "0 0 30 2 *", "0 0 31 4,6,9,11 *", "60/5 * * * *", "5- * * * *",
		"*/0 * * * *", "0 0 1W-3 * *", "MON * * * *", "0 JAN * * *", "0 0 SUN * *", "0 0 * * #", "L * * * *", "0 0 ? ? ?x",
	} {
		_, err := Parse(expr)
		require.Error(t, err, expr)
		require.ErrorIs(t, err, ErrInvalid, expr)
		var ce *Error
		require.True(t, errors.As(err, &ce), expr)
		require.Equal(t, expr, ce.Expr)
		require.Contains(t, err.Error(), fmt.Sprintf("%q", expr))
	}

	_, err := Parse("0 0 12 * * *")
	require.ErrorContains(t, err, "seconds and year fields are not supported")
	_, err = Parse("@reboot")
	require.ErrorContains(t, err, "@hourly, @daily, @weekly, @monthly, @yearly")
	_, err = Parse("0 0 30 2 *")
	require.ErrorContains(t, err, "never fires")
}

func TestNextPrev(t *testing.T) {
	t.Parallel()
	cases := []struct {
		expr, at, next, prev string
	}{
		{"0 12 * * *", "2024-03-05T10:00:00Z", "2024-03-05T12:00:00Z", "2024-03-04T12:00:00Z"},
		{"0 12 * * *", "2024-03-05T12:00:00Z", "2024-03-06T12:00:00Z", "2024-03-05T12:00:00Z"},
		{"0 12 * * *", "2024-03-05T12:00:30Z", "2024-03-06T12:00:00Z", "2024-03-05T12:00:00Z"},
		{"*/5 * * * *", "2024-03-05T10:07:00Z", "2024-03-05T10:10:00Z", "2024-03-05T10:05:00Z"},
		{"*/5 * * * *", "2024-12-31T23:59:59Z", "2025-01-01T00:00:00Z", "2024-12-31T23:55:00Z"},
		{"0 */2 * * *", "2024-03-05T11:00:00Z", "2024-03-05T12:00:00Z", "2024-03-05T10:00:00Z"},
		{"@hourly", "2024-03-05T10:00:00Z", "2024-03-05T11:00:00Z", "2024-03-05T10:00:00Z"},
		{"@weekly", "2024-03-05T10:00:00Z", "2024-03-10T00:00:00Z", "2024-03-03T00:00:00Z"},
		{"@monthly", "2024-01-31T10:00:00Z", "2024-02-01T00:00:00Z", "2024-01-01T00:00:00Z"},
		{"@yearly", "2024-06-01T00:00:00Z", "2025-01-01T00:00:00Z", "2024-01-01T00:00:00Z"},
		{"0 0 29 2 *", "2024-03-01T00:00:00Z", "2028-02-29T00:00:00Z", "2024-02-29T00:00:00Z"},
		{"0 0 29 2 *", "2097-01-01T00:00:00Z", "2104-02-29T00:00:00Z", "2096-02-29T00:00:00Z"},
		{"0 0 31 * *", "2024-04-01T00:00:00Z", "2024-05-31T00:00:00Z", "2024-03-31T00:00:00Z"},
		{"0 0 L * *", "2023-02-01T00:00:00Z", "2023-02-28T00:00:00Z", "2023-01-31T00:00:00Z"},
		{"0 0 L * *", "2024-02-01T00:00:00Z", "2024-02-29T00:00:00Z", "2024-01-31T00:00:00Z"},
		{"0 9 * * MON-FRI", "2024-03-08T09:00:00Z", "2024-03-11T09:00:00Z", "2024-03-08T09:00:00Z"},
		{"0 0 * * 1#2", "2024-03-01T00:00:00Z", "2024-03-11T00:00:00Z", "2024-02-12T00:00:00Z"},
		{"0 0 1,15 * *", "2024-03-02T00:00:00Z", "2024-03-15T00:00:00Z", "2024-03-01T00:00:00Z"},
		{"0,30 8-9 * * *", "2024-03-05T09:30:00Z", "2024-03-06T08:00:00Z", "2024-03-05T09:30:00Z"},
	}
	for _, c := range cases {
		t.Run(c.expr+"@"+c.at, func(t *testing.T) {
			t.Parallel()
			s := mustParse(t, c.expr)
			at := ts(t, c.at)
			require.Equal(t, ts(t, c.next), s.Next(at), "next")
			require.Equal(t, ts(t, c.prev), s.Prev(at), "prev")
			require.Equal(t, time.UTC, s.Next(at).Location())
		})
	}
}

func TestNextPrevConvertToUTC(t *testing.T) {
	t.Parallel()
	s := mustParse(t, "0 12 * * *")
	tokyo := time.FixedZone("JST", 9*3600)
	at := time.Date(2024, 3, 5, 20, 0, 0, 0, tokyo) // 11:00Z
	require.Equal(t, ts(t, "2024-03-05T12:00:00Z"), s.Next(at))
	require.Equal(t, ts(t, "2024-03-04T12:00:00Z"), s.Prev(at))
}

func TestZeroSchedule(t *testing.T) {
	t.Parallel()
	var s Schedule
	require.True(t, s.IsZero())
	require.True(t, s.Next(time.Now()).IsZero())
	require.True(t, s.Prev(time.Now()).IsZero())
	_, err := s.Unit()
	require.ErrorIs(t, err, ErrInvalid)
	require.ErrorIs(t, CheckUnit(s, interval.Day, false), ErrInvalid)
	require.Empty(t, s.String())
}

func TestUnit(t *testing.T) {
	t.Parallel()
	cases := []struct {
		expr string
		want interval.Unit
	}{
		{"*/5 * * * *", interval.FiveMinute},
		{"*/10 * * * *", interval.FiveMinute},
		{"0,7 * * * *", interval.FiveMinute},
		{"*/15 * * * *", interval.QuarterHour},
		{"0,30 * * * *", interval.HalfHour},
		{"@hourly", interval.Hour},
		{"0 */2 * * *", interval.Hour},
		{"0 0,23 * * *", interval.Hour},
		{"0 12 * * *", interval.Day},
		{"@daily", interval.Day},
		{"@weekly", interval.Day},
		{"0 0 * * 1-5", interval.Day},
		{"0 0 1,15 * *", interval.Day},
		{"@monthly", interval.Month},
		{"0 0 31 * *", interval.Month},
		{"0 0 L * *", interval.Month},
		{"0 0 1 1,7 *", interval.Month},
		{"0 0 1 */3 *", interval.Month},
		{"@yearly", interval.Year},
		{"0 0 29 2 *", interval.Year},
	}
	for _, c := range cases {
		t.Run(c.expr, func(t *testing.T) {
			t.Parallel()
			got, err := mustParse(t, c.expr).Unit()
			require.NoError(t, err)
			require.Equal(t, c.want, got)
		})
	}
}

func TestUnitRejectsTooFrequent(t *testing.T) {
	t.Parallel()
	for _, expr := range []string{"* * * * *", "*/2 * * * *", "*/7 * * * *", "0-4 * * * *", "0,3 * * * *"} {
		s, err := Parse(expr)
		if err != nil {
			require.ErrorIs(t, err, ErrInvalid, expr)
			continue
		}
		_, err = s.Unit()
		require.ErrorIs(t, err, ErrTooFrequent, expr)
		require.ErrorContains(t, err, fmt.Sprintf("%q", expr))
	}
	// The gap that matters can span an hour boundary: 0,59 fires at x:59
	// and (x+1):00.
	_, err := mustParse(t, "0,59 * * * *").Unit()
	require.ErrorIs(t, err, ErrTooFrequent)
	// ... or a day boundary: 23:58 and 00:01 the next day.
	_, err = mustParse(t, "1,58 0,23 * * *").Unit()
	require.ErrorIs(t, err, ErrTooFrequent)
}

func TestCheckUnit(t *testing.T) {
	t.Parallel()
	daily := mustParse(t, "0 12 * * *")
	require.NoError(t, CheckUnit(daily, interval.Day, false))
	require.NoError(t, CheckUnit(daily, interval.Hour, false), "finer units are fine")
	require.NoError(t, CheckUnit(daily, interval.FiveMinute, false))

	err := CheckUnit(daily, interval.Month, false)
	require.ErrorIs(t, err, ErrUnitTooCoarse)
	require.ErrorContains(t, err, "interval_unit month is coarser than day")
	require.ErrorContains(t, err, `"0 12 * * *"`)
	require.NoError(t, CheckUnit(daily, interval.Month, true), "allow_partials accepts it")

	err = CheckUnit(daily, "week", false)
	require.ErrorIs(t, err, interval.ErrUnknownUnit)

	_, err = Parse("* * * * *")
	require.NoError(t, err)
	require.ErrorIs(t, CheckUnit(mustParse(t, "* * * * *"), interval.FiveMinute, true), ErrTooFrequent)
}

// Expressions used to check that the bitmap search agrees with gronx.
var equivalenceExprs = []string{
	"0 12 * * *", "*/5 * * * *", "*/10 * * * *", "0 */2 * * *", "0 0 1,15 * *", "@weekly",
	"@monthly", "@yearly", "@hourly", "0 0 * * 1-5", "30 2 * JAN,JUL *", "0 0 L * *",
	"0 0 15W * *", "0 0 1W * *", "0 0 * * 5L", "0 0 * * 1#2", "0 0 1-7 * 1", "0 0 13 * 5",
	"15,45 3-5,22 * * 0,6", "0 0 31 * *", "0 0 29 2 *", "7 */3 */2 * *", "0 0 */10 * *",
	"0 0 ? * 7", "0 0 * * 0-7/2", "5 4 * * SUN", "0 22 * * 1-5", "23 0-20/2 * * *",
}

// TestAgreesWithGronxIsDue checks minute by minute, at random instants, that
// "Prev(t) == t" (t is a firing) is exactly gronx's IsDue(t).
func TestAgreesWithGronxIsDue(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		expr := rapid.SampledFrom(equivalenceExprs).Draw(rt, "expr")
		s := mustParse(rt, expr)
		min := rapid.Int64Range(0, 200*365*24*60).Draw(rt, "minute") // 1970..2170
		at := time.Unix(min*60, 0).UTC()
		due, err := gronx.New().IsDue(expr, at)
		require.NoError(rt, err)
		require.Equal(rt, due, s.Prev(at).Equal(at), "%s at %v", expr, at)
	})
}

// TestAgreesWithGronxNextPrev compares Next and Prev with gronx's own
// NextTickAfter and PrevTickBefore wherever gronx finds an answer.
func TestAgreesWithGronxNextPrev(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		expr := rapid.SampledFrom(equivalenceExprs).Draw(rt, "expr")
		s := mustParse(rt, expr)
		sec := rapid.Int64Range(946684800, 4102444800).Draw(rt, "sec") // 2000..2100
		at := time.Unix(sec, 0).UTC()
		if want, err := gronx.NextTickAfter(expr, at, false); err == nil {
			require.Equal(rt, want.UTC(), s.Next(at), "next %s after %v", expr, at)
		}
		if want, err := gronx.PrevTickBefore(expr, at, true); err == nil {
			require.Equal(rt, want.UTC(), s.Prev(at), "prev %s at %v", expr, at)
		}
	})
}

// TestNextPrevProperties checks Next and Prev against each other on random
// expressions from the list.
func TestNextPrevProperties(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		expr := rapid.SampledFrom(equivalenceExprs).Draw(rt, "expr")
		s := mustParse(rt, expr)
		sec := rapid.Int64Range(-2208988800, 7258118400).Draw(rt, "sec") // 1900..2200
		at := time.Unix(sec, 0).UTC()
		n, p := s.Next(at), s.Prev(at)
		require.True(rt, n.After(at))
		require.False(rt, p.After(at))
		require.Equal(rt, n, s.Next(p), "nothing fires between Prev and Next")
		require.Equal(rt, p, s.Prev(n.Add(-time.Second)))
		require.Equal(rt, n, s.Prev(n), "Prev is inclusive")
	})
}

func TestConcurrentUse(t *testing.T) {
	t.Parallel()
	// Scenario: many scheduler goroutines share one parsed schedule; the lazy
	// day-mask cache and unit computation must be race-free and agree.
	s := mustParse(t, "0 0 1W * *")
	base := ts(t, "2024-01-01T00:00:00Z")
	var wg sync.WaitGroup
	results := make([][]time.Time, 8)
	for g := range results {
		wg.Go(func() {
			_, err := s.Unit()
			require.NoError(t, err)
			at := base
			for range 100 {
				at = s.Next(at)
				results[g] = append(results[g], at)
			}
		})
	}
	wg.Wait()
	for g := range results {
		require.Equal(t, results[0], results[g])
	}
}

func BenchmarkNext(b *testing.B) {
	for _, expr := range []string{"*/5 * * * *", "0 12 * * *", "0 0 29 2 *", "0 0 * * 1#2"} {
		s := mustParse(b, expr)
		at := time.Date(2024, 3, 5, 10, 7, 0, 0, time.UTC)
		b.Run(expr, func(b *testing.B) {
			for b.Loop() {
				_ = s.Next(at)
				_ = s.Prev(at)
			}
		})
		b.Run("gronx/"+expr, func(b *testing.B) {
			for b.Loop() {
				_, _ = gronx.NextTickAfter(expr, at, false)
				_, _ = gronx.PrevTickBefore(expr, at, true)
			}
		})
	}
}

// BenchmarkParse measures parsing an expression and deriving its unit:
// cached is what every parse after the first costs (Parse's cache),
// compile what the first one does.
func BenchmarkParse(b *testing.B) {
	b.Run("cached", func(b *testing.B) {
		for b.Loop() {
			s, _ := Parse("0 12 * * *")
			_, _ = s.Unit()
		}
	})
	b.Run("compile", func(b *testing.B) {
		for b.Loop() {
			s, _ := compile("0 12 * * *", "0 12 * * *")
			_, _ = s.Unit()
		}
	})
}

// Scenario: a project's models share a few crons. Parsing one expression
// again (even spelt with other surrounding spaces) hands out the schedule
// compiled the first time, so its unit is derived once; an invalid
// expression is not kept and fails every time.
func TestParseCompilesAnExpressionOnce(t *testing.T) {
	t.Parallel()
	first := mustParse(t, "17 */3 * * *")
	_, err := first.Unit()
	require.NoError(t, err)
	again := mustParse(t, "  17 */3 * * * ")
	require.Same(t, first.c, again.c)
	require.Equal(t, "17 */3 * * *", again.String())

	for range 2 {
		_, err := Parse("0 0 30 2 *")
		require.ErrorIs(t, err, ErrInvalid)
	}
	_, kept := compiledCache.Load("0 0 30 2 *")
	require.False(t, kept)
}

func TestScheduleJSON(t *testing.T) {
	t.Parallel()
	type doc struct {
		Cron Schedule `json:"cron"`
	}
	b, err := json.Marshal(doc{Cron: mustParse(t, "0 12 * * *")})
	require.NoError(t, err)
	require.JSONEq(t, `{"cron":"0 12 * * *"}`, string(b))

	var back doc
	require.NoError(t, json.Unmarshal(b, &back))
	require.Equal(t, "0 12 * * *", back.Cron.String())
	require.Equal(t, ts(t, "2024-03-05T12:00:00Z"), back.Cron.Next(ts(t, "2024-03-05T10:00:00Z")))

	err = json.Unmarshal([]byte(`{"cron":"@reboot"}`), &back)
	require.ErrorIs(t, err, ErrInvalid)
}
