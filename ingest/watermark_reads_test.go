package ingest_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/ingest"
	"github.com/gapless-dev/gapless/source"
	"github.com/gapless-dev/gapless/warehouse"
)

// tableReads is an engine that counts the read-only queries that scan the
// served table for its times or late rows (min/max, count).
type tableReads struct {
	engine
	n atomic.Int64
}

func (r *tableReads) ReadOnlyQuery(ctx context.Context, q string, args ...any) (*warehouse.Result, error) {
	if strings.Contains(q, "min(") || strings.Contains(q, "count(") {
		r.n.Add(1)
	}
	return r.engine.ReadOnlyQuery(ctx, q, args...)
}

func TestWatermarkReadsTheTableOncePerGeneration(t *testing.T) {
	// Scenario: raw.events (time_column ts) is built from a.csv: the pass
	// reads the new generation's times once (complete through 10:00).
	// Passes applying b.csv (12:00) and c.csv (09:00, one late row) keep
	// the watermark and count the late row from what the batches' steps
	// report, reading the table no more. A pass that crashes after the
	// warehouse committed d.csv (14:00) still publishes 14:00 (what the
	// view serves), but leaves the state store's times behind the
	// warehouse: the next pass, whose replay of d.csv reports
	// nothing, reads the table once (healing), publishes 14:00, and the
	// pass after it (f.csv, 15:00) reads nothing again.
	eachBackend(t, func(t *testing.T, e *renv) {
		e.timedDef()
		reads := &tableReads{}
		e.wrapEngine = func(x engine) engine { reads.engine = x; return reads }
		e.timed("a.csv", map[int]float64{1: 2, 2: 10})
		r := e.pass()
		require.NoError(t, r.Err)
		require.Equal(t, int64(1), r.Built)
		require.Equal(t, at(10), r.Watermark)
		require.Equal(t, int64(1), reads.n.Load(), "one read of the new generation's times")

		e.timed("b.csv", map[int]float64{3: 12})
		e.timed("c.csv", map[int]float64{4: 9})
		r = e.pass()
		require.NoError(t, r.Err)
		require.Equal(t, 2, r.Applied)
		require.Equal(t, at(12), r.Watermark)
		require.Equal(t, upTo(12), e.coverage())
		require.Equal(t, int64(1), r.LateRows, "09:00 is older than the 10:00 published")
		require.Equal(t, int64(1), reads.n.Load(), "live batches read nothing of the table")

		crash := errors.New("crash after the warehouse commit")
		e.timed("d.csv", map[int]float64{5: 14})
		e.hooks.AfterStep = func(_ string, step warehouse.IngestStep, _, _ int64) error {
			if step == warehouse.StepBatch {
				return crash
			}
			return nil
		}
		require.ErrorIs(t, e.pass().Err, crash)
		e.hooks = ingest.Hooks{}
		require.Equal(t, upTo(14), e.coverage(), "the view serves d.csv: the crashed pass published it")
		require.Equal(t, int64(1), reads.n.Load())

		e.timed("e.csv", map[int]float64{6: 13})
		r = e.pass()
		require.NoError(t, r.Err)
		require.Equal(t, at(14), r.Watermark)
		require.Equal(t, int64(2), reads.n.Load(), "one read heals what the crash left unknown")

		e.timed("f.csv", map[int]float64{7: 15})
		r = e.pass()
		require.NoError(t, r.Err)
		require.Equal(t, at(15), r.Watermark)
		require.Equal(t, upTo(15), e.coverage())
		require.Equal(t, int64(2), reads.n.Load())
	})
}

func TestUpsertThatMovesTheGreatestTimeBackTakesCoverageBack(t *testing.T) {
	// Scenario: raw.events upserts by id; a.csv makes it complete through
	// 10:00 (id 2). b.csv moves id 2 to 05:00: the served table's greatest
	// time is now 05:00 (id 1 at 02:00, id 2 at 05:00), so the coverage is
	// taken back to 05:00, as a read of the table says; the step replaced
	// a row, so the pass reads the table rather than widen the times it
	// knew. c.csv adds id 3 at 07:00, which replaces nothing: 07:00, with
	// no read.
	eachStoreDuck(t, func(t *testing.T, e *renv) {
		e.timedDef()
		e.d.Apply, e.d.UniqueKey = source.ApplyUpsert, []string{"id"}
		reads := &tableReads{}
		e.wrapEngine = func(x engine) engine { reads.engine = x; return reads }
		e.timed("a.csv", map[int]float64{1: 2, 2: 10})
		require.NoError(t, e.pass().Err)
		require.Equal(t, upTo(10), e.coverage())

		e.timed("b.csv", map[int]float64{2: 5})
		r := e.pass()
		require.NoError(t, r.Err)
		require.Equal(t, at(5), r.Watermark)
		require.Equal(t, upTo(5), e.coverage())
		require.Equal(t, int64(2), reads.n.Load())

		e.timed("c.csv", map[int]float64{3: 7})
		r = e.pass()
		require.NoError(t, r.Err)
		require.Equal(t, upTo(7), e.coverage())
		require.Equal(t, int64(2), reads.n.Load())
	})
}
