package cli

import (
	"log/slog"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"

	"github.com/gapless-dev/gapless/apply"
	"github.com/gapless-dev/gapless/cadence"
	"github.com/gapless-dev/gapless/plan"
	"github.com/gapless-dev/gapless/snapshot"
)

// progress is the progress bars of an apply's backfill on stderr: one per
// model being built, counting its batches. They are shown only when stderr
// is a terminal. A nil *progress is valid and shows nothing, so callers
// never branch on the terminal themselves.
type progress struct {
	p *mpb.Progress
	// bars is read-only once made: the apply's workers look bars up
	// concurrently (mpb's bars are safe for concurrent use).
	bars map[string]*mpb.Bar
}

// newProgress starts one bar per model pl backfills, in plan order, or
// returns nil when stderr is not a terminal or there is nothing to build.
func (g *globals) newProgress(pl *plan.Plan) *progress {
	if !g.env.StderrTerminal || len(pl.Backfills) == 0 {
		return nil
	}
	steps := planSteps(pl)
	// The caller said stderr is a terminal: refresh even when the writer does
	// not look like one (tests pass a buffer).
	p := mpb.New(mpb.WithOutput(g.env.Stderr), mpb.WithAutoRefresh())
	pr := &progress{p: p, bars: make(map[string]*mpb.Bar, len(pl.Backfills))}
	for _, b := range pl.Backfills {
		pr.bars[b.Name] = p.AddBar(max(steps[b.Name], 1), mpb.BarWidth(30),
			mpb.PrependDecorators(decor.Name(b.Name, decor.WCSyncSpaceR), decor.CountersNoUnit("%d/%d batches", decor.WCSyncWidth)),
			mpb.AppendDecorators(decor.Percentage(decor.WC{W: 5})),
		)
	}
	return pr
}

// progressLogger is a logger whose records print above the bars while they
// run (the command's logger when there are no bars).
func (g *globals) progressLogger(pr *progress) *slog.Logger {
	if pr == nil {
		return g.log
	}
	return g.loggerTo(pr.p)
}

// event advances the bars: a committed batch moves its model's bar, a
// finished model completes it (a resumed apply skips what was done before,
// so a model may finish short of its planned batches).
func (pr *progress) event(e apply.Event) {
	if pr == nil {
		return
	}
	switch e := e.(type) {
	case apply.BatchCommitted:
		if bar := pr.bars[e.Batch.Model]; bar != nil {
			bar.Increment()
		}
	case apply.ModelFinished:
		if bar := pr.bars[e.Model]; bar != nil {
			bar.SetTotal(-1, true)
		}
	}
}

// Done completes every bar (or stops the unfinished ones where they are,
// after a failure) and waits for the last frame to be drawn.
func (pr *progress) Done(ok bool) {
	if pr == nil {
		return
	}
	for _, bar := range pr.bars {
		if ok {
			bar.SetTotal(-1, true)
		} else {
			bar.Abort(false)
		}
	}
	pr.p.Wait()
}

// planSteps counts, per model, the batches a plan's backfill runs: one for
// a table built whole.
func planSteps(pl *plan.Plan) map[string]int64 {
	byName := make(map[string]*snapshot.Snapshot, len(pl.Snapshots))
	for _, s := range pl.Snapshots {
		byName[s.Name] = s
	}
	out := make(map[string]int64, len(pl.Backfills))
	for _, b := range pl.Backfills {
		s, ok := byName[b.Name]
		switch {
		case b.Whole || !ok:
			out[b.Name] = 1
		default:
			out[b.Name] = int64(cadence.BatchCount(b.Ranges, s.Model.IntervalUnit, s.Model.BatchSize))
		}
	}
	return out
}
