package scheduler

import (
	"context"
	"errors"
	"fmt"

	"github.com/gapless-dev/gapless/connector"
	"github.com/gapless-dev/gapless/ingest"
	"github.com/gapless-dev/gapless/source"
	"github.com/gapless-dev/gapless/warehouse"
)

// Ingest is what the daemon lands before each tick's runs: the project's
// sources (project.Sources) and their connectors (one per source, kept
// across ticks), with connector locations relative to Root.
type Ingest struct {
	Sources    map[string]*source.Definition
	Connectors []connector.Connector
	Root       string
	// Hooks are passed to every pass (tests act at exact points of it).
	Hooks ingest.Hooks
}

// ingest runs the tick's ingest pass, if there is one to run: Params.Ingest
// with at least one source (a project without sources does no ingest work
// and opens nothing for it). The pass runs on the tick's warehouse, opened
// by the first step that needs it, so that one process holds an embedded
// DuckDB file for the pass and the runs after it, and the runs read the
// watermarks the pass published. Its source metrics are updated after it.
func (s *Scheduler) ingest(ctx context.Context, open func() (warehouse.Engine, error)) (*ingest.Report, error) {
	in := s.p.Ingest
	if in == nil || len(in.Sources) == 0 {
		return nil, nil
	}
	eng := &tickIngester{open: open, m: s.metrics}
	rep, err := ingest.Pass(ctx, ingest.Params{Store: s.p.Store, Engine: eng, Sources: in.Sources, Connectors: in.Connectors,
		Root: in.Root, Clock: s.clock, Logger: s.log, Hooks: in.Hooks})
	if err != nil {
		s.emit(IngestFailed{Err: err})
		return &rep, err
	}
	for _, sr := range rep.Sources {
		s.emit(SourceIngested{Report: sr})
	}
	if merr := s.observeSources(ctx, rep); merr != nil {
		s.emit(IngestFailed{Err: merr})
		return &rep, merr
	}
	return &rep, nil
}

// tickIngester is the tick's warehouse as the ingest pass sees it: opened
// on its first use (through the tick's open, so the runs reuse it), and
// counting the rows each committed step wrote.
type tickIngester struct {
	open func() (warehouse.Engine, error)
	m    *metrics
	eng  warehouse.Engine
	in   warehouse.Ingester
	err  error
}

var errCannotIngest = errors.New("the warehouse cannot land sources")

// get opens the warehouse once; a failure is kept and returned again.
func (t *tickIngester) get() (warehouse.Engine, warehouse.Ingester, error) {
	if t.eng == nil && t.err == nil {
		e, err := t.open()
		if err != nil {
			t.err = err
		} else if in, ok := e.(warehouse.Ingester); !ok {
			t.err = fmt.Errorf("%w (%s)", errCannotIngest, e.Dialect())
		} else {
			t.eng, t.in = e, in
		}
	}
	return t.eng, t.in, t.err
}

func (t *tickIngester) ApplyIngest(ctx context.Context, p warehouse.IngestParams) (warehouse.IngestResult, error) {
	_, in, err := t.get()
	if err != nil {
		return warehouse.IngestResult{}, err
	}
	res, err := in.ApplyIngest(ctx, p)
	if err == nil && (p.Step == warehouse.StepChunk || p.Step == warehouse.StepBatch) {
		t.m.sourceRows.WithLabelValues(p.Source, string(p.Step)).Add(float64(res.Rows))
	}
	return res, err
}

func (t *tickIngester) IngestState(ctx context.Context, src string) (warehouse.IngestState, error) {
	_, in, err := t.get()
	if err != nil {
		return warehouse.IngestState{}, err
	}
	return in.IngestState(ctx, src)
}

// ReadOnlyQuery, QuoteIdent and QuoteTable make it an ingest.Reader, for
// the watermark.
func (t *tickIngester) ReadOnlyQuery(ctx context.Context, sql string, args ...any) (*warehouse.Result, error) {
	e, _, err := t.get()
	if err != nil {
		return nil, err
	}
	return e.ReadOnlyQuery(ctx, sql, args...)
}

func (t *tickIngester) QuoteIdent(name string) string {
	if e, _, err := t.get(); err == nil {
		return e.QuoteIdent(name)
	}
	return name // the query it is for fails on the same error
}

func (t *tickIngester) QuoteTable(tb warehouse.Table) string {
	if e, _, err := t.get(); err == nil {
		return e.QuoteTable(tb)
	}
	return tb.Schema + "." + tb.Name
}
