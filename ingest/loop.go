package ingest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/gapless-dev/gapless/internal/logkey"
	"github.com/gapless-dev/gapless/model/suggest"
	"github.com/gapless-dev/gapless/source"
	"github.com/gapless-dev/gapless/warehouse"
)

// DefaultInterval is how long Loop waits between two passes by default.
const DefaultInterval = 30 * time.Second

// UnknownSourceError is a source name asked for that the project does not
// define; Closest is the nearest defined name ("" when none is near).
type UnknownSourceError struct {
	Name    string
	Closest string
}

func (e *UnknownSourceError) Error() string {
	msg := fmt.Sprintf("source %s: no such source in the project", e.Name)
	if e.Closest != "" {
		msg += fmt.Sprintf("; did you mean %s?", e.Closest)
	}
	return msg
}

// Select returns the definitions of the named sources, or all of them when
// names is empty. A name the project does not define is an
// *UnknownSourceError naming the closest defined one; nothing is returned
// then.
func Select(sources map[string]*source.Definition, names []string) (map[string]*source.Definition, error) {
	if len(names) == 0 {
		return sources, nil
	}
	known := slices.Sorted(maps.Keys(sources))
	out := make(map[string]*source.Definition, len(names))
	for _, n := range names {
		d, ok := sources[n]
		if !ok {
			c, _ := suggest.Closest(n, known)
			return nil, &UnknownSourceError{Name: n, Closest: c}
		}
		out[n] = d
	}
	return out, nil
}

// LoopParams are the parameters of Loop.
type LoopParams struct {
	// Params are each pass's; their Engine is used when Open is nil.
	Params
	// Open, when set, opens the warehouse for one pass; Loop closes it (when
	// it is an io.Closer) before waiting for the next, so that between
	// passes another process may take an embedded DuckDB file.
	Open func(ctx context.Context) (warehouse.Ingester, error)
	// Interval is the wait between the start of two passes (DefaultInterval
	// when zero or negative).
	Interval time.Duration
	// OnPass, when set, is called after each pass with its report and its
	// error (registering the sources, or opening the warehouse, failed).
	OnPass func(Report, error)
}

// Loop runs Pass at once, then every Interval on the clock, until ctx
// ends, and returns nil then. It stops only between passes: a pass runs to
// its end under a context detached from ctx (each of its warehouse steps
// commits whole, and a pass stopped anywhere is healed by the next, but a
// pass that finishes leaves nothing for a restart to repair). A pass that
// fails, for one source or all, is logged and the loop carries on: the
// next pass retries from where that one stopped.
func Loop(ctx context.Context, p LoopParams) error {
	if p.Clock == nil {
		p.Clock = clockwork.NewRealClock()
	}
	if p.Logger == nil {
		p.Logger = slog.Default()
	}
	if p.Interval <= 0 {
		p.Interval = DefaultInterval
	}
	pass := func() {
		rep, err := loopPass(context.WithoutCancel(ctx), p)
		if err != nil {
			p.Logger.ErrorContext(ctx, MsgPassFailed, logkey.Error, err.Error())
		}
		if p.OnPass != nil {
			p.OnPass(rep, err)
		}
	}
	pass()
	// The ticker starts after the first pass, so that a test's fake clock
	// sees it (BlockUntil) only once that pass is done.
	ticker := p.Clock.NewTicker(p.Interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.Chan():
		}
		if ctx.Err() != nil { // both ready: the stop wins
			return nil
		}
		pass()
	}
}

// MsgPassFailed is what Loop logs when a whole pass failed (opening the
// warehouse, registering the sources); a source's own failure is logged by
// Pass.
const MsgPassFailed = "ingest pass failed; the next pass retries"

// loopPass is one pass of Loop: on p.Engine, or on a warehouse Open
// opens when a source of the pass first needs it, closed after the pass.
func loopPass(ctx context.Context, p LoopParams) (Report, error) {
	if p.Open == nil {
		return Pass(ctx, p.Params)
	}
	return Once(ctx, p.Params, p.Open)
}

// Once runs one Pass whose warehouse open opens only when a source of the
// pass has something to land (Params.OpenEngine), and closes it (when it
// is an io.Closer) after the pass: a pass over idle sources never opens
// it.
func Once(ctx context.Context, p Params, open func(ctx context.Context) (warehouse.Ingester, error)) (rep Report, err error) {
	var opened warehouse.Ingester
	p.Engine = nil
	p.OpenEngine = func(ctx context.Context) (warehouse.Ingester, error) {
		eng, err := open(ctx)
		if err != nil {
			return nil, err
		}
		opened = eng
		return eng, nil
	}
	defer func() {
		if c, ok := opened.(io.Closer); ok {
			if cerr := c.Close(); cerr != nil {
				err = errors.Join(err, fmt.Errorf("closing the warehouse: %w", cerr))
			}
		}
	}()
	return Pass(ctx, p)
}
