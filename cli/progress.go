package cli

import (
	"io"
	"log/slog"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
)

// progress is one progress bar on stderr, shown only when stderr is a
// terminal. A nil *progress is valid and shows nothing, so callers never
// branch on the terminal themselves.
type progress struct {
	p   *mpb.Progress
	bar *mpb.Bar
}

// newProgress starts a bar of total steps named label, or returns nil when
// stderr is not a terminal or there is nothing to count.
func (g *globals) newProgress(label string, total int64) *progress {
	if !g.env.StderrTerminal || total <= 0 {
		return nil
	}
	// The caller said stderr is a terminal: refresh even when the writer does
	// not look like one (tests pass a buffer).
	p := mpb.New(mpb.WithOutput(g.env.Stderr), mpb.WithWidth(40), mpb.WithAutoRefresh())
	bar := p.AddBar(total,
		mpb.PrependDecorators(decor.Name(label, decor.WCSyncSpaceR), decor.CountersNoUnit("%d/%d", decor.WCSyncWidth)),
		mpb.AppendDecorators(decor.Percentage(decor.WC{W: 5}), decor.Elapsed(decor.ET_STYLE_GO, decor.WC{W: 6})),
	)
	return &progress{p: p, bar: bar}
}

// logger is a logger whose records print above the bar while it runs (the
// command's logger when there is no bar).
func (g *globals) progressLogger(pr *progress) *slog.Logger {
	if pr == nil {
		return g.log
	}
	return g.loggerTo(pr.writer())
}

func (pr *progress) writer() io.Writer { return pr.p }

// Increment advances the bar by one step.
func (pr *progress) Increment() {
	if pr != nil {
		pr.bar.Increment()
	}
}

// Done completes the bar (or drops it after a failure) and waits for the
// last frame to be drawn.
func (pr *progress) Done(ok bool) {
	if pr == nil {
		return
	}
	if ok {
		pr.bar.SetTotal(-1, true)
	} else {
		pr.bar.Abort(false)
	}
	pr.p.Wait()
}
