package ingest_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/ingest"
	"github.com/gapless-dev/gapless/interval"
)

// timedDef makes e's source carry time_column ts, start at epoch and no
// lateness.
func (e *renv) timedDef() {
	e.d.TimeColumn = "ts"
	e.d.Start = epoch
	e.d.Watermark.Lateness = 0
}

func upTo(hours float64) interval.Set { return interval.NewSet(interval.NewRange(epoch, at(hours))) }

func TestReplaceRunThatEndsEarlierTakesBackCoverage(t *testing.T) {
	// Scenario: raw.events (time_column ts) is complete through 10:00 from
	// a.csv. A replace run lands whose rows end at 08:00: once it swaps
	// in, the source holds nothing after 08:00, so its coverage is taken
	// back to [start, 08:00) (models are not given 08:00-10:00 on data the
	// source no longer holds). An append reaching 09:00 then grows it to
	// 09:00 again.
	eachBackend(t, func(t *testing.T, e *renv) {
		e.timedDef()
		e.timed("a.csv", map[int]float64{1: 2, 2: 10})
		r := e.pass()
		require.NoError(t, r.Err)
		require.Equal(t, upTo(10), e.coverage())
		require.Equal(t, at(10), r.Watermark)

		e.timed("full/r1/part-0.csv", map[int]float64{10: 1, 11: 8})
		e.write("full/r1/_SUCCESS", "")
		r = e.pass()
		require.NoError(t, r.Err)
		require.Equal(t, int64(2), r.Built)
		require.Equal(t, upTo(8), e.coverage())
		require.Equal(t, at(8), r.Watermark)
		require.Contains(t, e.logs.String(), `"msg":"source coverage follows the generation that serves: taken back"`)

		e.timed("b.csv", map[int]float64{12: 9})
		require.NoError(t, e.pass().Err)
		require.Equal(t, upTo(9), e.coverage())
	})
}

func TestWatermarkOfAGenerationThatNoLongerServesIsNotPublished(t *testing.T) {
	// Scenario: a pass A of raw.events, serving generation 1 (complete
	// through 10:00), applies b.csv and knows the served times for its
	// watermark (up to 12:00) from that step, without reading the table;
	// right then, before A writes (a hook), another worker B lands a
	// replace run ending at 08:00 as generation 2 and publishes [start,
	// 08:00). A's write, fenced on {raw.events, generation 1}, is refused:
	// A publishes nothing (Fenced 1, no watermark in its report), and the
	// coverage stays B's.
	eachStoreDuck(t, func(t *testing.T, e *renv) {
		e.timedDef()
		e.timed("a.csv", map[int]float64{1: 2, 2: 10})
		require.NoError(t, e.pass().Err)
		e.timed("b.csv", map[int]float64{3: 12})

		reads := &readHook{match: "SELECT min(", after: func() {}}
		e.wrapEngine = func(x engine) engine { reads.engine = x; return reads }
		var b1 *renv
		e.hooks.BeforePublish = func(_ string, gen int64) error {
			require.Equal(t, int64(1), gen)
			e.timed("full/r1/part-0.csv", map[int]float64{10: 1, 11: 8})
			e.write("full/r1/_SUCCESS", "")
			b := *e
			b.wrapEngine, b.hooks = nil, ingest.Hooks{}
			b1 = &b
			rep, err := passWith(t, b.params())
			require.NoError(t, err)
			require.NoError(t, rep.Err)
			require.Equal(t, int64(2), rep.Built)
			require.Equal(t, at(8), rep.Watermark)
			return nil
		}
		r := e.pass()
		require.NotNil(t, b1, "the hook ran")
		require.NoError(t, r.Err)
		require.Equal(t, 1, r.Applied)
		require.Equal(t, 1, r.Fenced)
		require.Zero(t, r.Watermark)
		require.Equal(t, upTo(8), e.coverage(), "the stale pass published nothing for generation 1")
		require.Contains(t, e.logs.String(), "watermark not published: the generation it was read from no longer serves")
		done := false
		reads.once.Do(func() { done = true })
		require.True(t, done, "pass A read no min/max of the table: the step reported the times")
	})
}

func TestLateRowsAreCountedAndLogged(t *testing.T) {
	// Scenario: raw.events is complete through 10:00. b.csv brings a row
	// at 09:00 (older than the published watermark: late) and one at
	// 11:00; the pass counts one late row and logs it with stable keys
	// (rows, interval: the watermark it was late against). c.csv, all
	// after the watermark, counts none. A replace generation's rows are a
	// rebuild, not late. The state store keeps the source's running total
	// (1), across the replace.
	eachBackend(t, func(t *testing.T, e *renv) {
		e.timedDef()
		e.timed("a.csv", map[int]float64{1: 2, 2: 10})
		r := e.pass()
		require.NoError(t, r.Err)
		require.Zero(t, r.LateRows, "nothing was published before the first build")

		e.timed("b.csv", map[int]float64{3: 9, 4: 11})
		r = e.pass()
		require.NoError(t, r.Err)
		require.Equal(t, 1, r.Applied)
		require.Equal(t, int64(1), r.LateRows)
		require.Equal(t, int64(1), e.source().LateRows, "the state store keeps the running total")
		var rec map[string]any
		for _, line := range strings.Split(e.logs.String(), "\n") {
			if strings.Contains(line, "late rows applied") {
				require.NoError(t, json.Unmarshal([]byte(line), &rec))
			}
		}
		require.NotNil(t, rec, "a late-rows record was logged")
		require.Equal(t, float64(1), rec["rows"])
		require.Equal(t, at(10).Format(time.RFC3339), rec["interval"])
		require.Equal(t, "raw.events", rec["model"])

		e.timed("c.csv", map[int]float64{5: 12})
		r = e.pass()
		require.NoError(t, r.Err)
		require.Equal(t, 1, r.Applied)
		require.Zero(t, r.LateRows)

		e.timed("full/r1/part-0.csv", map[int]float64{10: 1})
		e.write("full/r1/_SUCCESS", "")
		r = e.pass()
		require.NoError(t, r.Err)
		require.Equal(t, int64(2), r.Built)
		require.Zero(t, r.LateRows)
		require.Equal(t, int64(1), e.source().LateRows, "the total is the source's, across generations")
	})
}
