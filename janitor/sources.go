package janitor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gapless-dev/gapless/ingest"
	"github.com/gapless-dev/gapless/internal/logkey"
	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/warehouse"
)

// KeptGeneration is a retired source generation the janitor left in place,
// and why.
type KeptGeneration struct {
	Source     string `json:"source"`
	Generation int64  `json:"generation"`
	Reason     string `json:"reason"`
	// Until is when --grace has passed since it was retired; absent when
	// it is kept for another reason.
	Until time.Time `json:"until,omitzero"`
}

// genCandidate is a retired generation the decision looked at.
type genCandidate struct {
	source string
	gen    int64
	until  time.Time // retired_at + grace
}

// retiredGenerations decides, for the sources read (removed ones too),
// which retired generations go at exec: those retired at least grace ago.
// Never a generation the source builds or serves (a retired one is
// neither; checked anyway), and never one retired within grace, whose
// late writes may still be on their way (the warehouse fence refuses them
// either way, but the table shows what happened). Those kept are returned
// with their reason.
func retiredGenerations(srcs []*state.Source, exec time.Time, grace time.Duration) (drop []genCandidate, kept []KeptGeneration) {
	for _, s := range srcs {
		for _, g := range s.Generations {
			if g.Status != state.GenerationRetired || g.Generation == s.Serving || g.Generation == s.Building {
				continue
			}
			until := g.RetiredAt.Add(grace)
			if until.After(exec) {
				kept = append(kept, KeptGeneration{Source: s.Name, Generation: g.Generation, Until: until.UTC(),
					Reason: fmt.Sprintf("retired %s, within --grace", g.RetiredAt.UTC().Format(time.RFC3339))})
				continue
			}
			drop = append(drop, genCandidate{source: s.Name, gen: g.Generation, until: until})
		}
	}
	return drop, kept
}

// dropRetiredGenerations drops the tables (gapless__raw.<...>__g<N>) and
// the markers of the source generations retiredGenerations lets go, each
// with warehouse.GenerationDropper, which refuses (ErrFenced, dropping
// nothing) a generation the warehouse fence still plans or serves: such a
// generation is kept and reported. A dry run asks the warehouse's fence
// and markers what it would drop. An engine that lands no sources is
// skipped.
func (g *executor) dropRetiredGenerations(ctx context.Context, st state.Store, e warehouse.Engine, exec time.Time, opts Options, rep *Report) error {
	dropper, ok := e.(warehouse.GenerationDropper)
	if !ok {
		return nil
	}
	srcs, err := st.ListSources(ctx, state.SourceFilter{IncludeRemoved: true})
	if err != nil {
		return fmt.Errorf("janitor: listing the sources: %w", err)
	}
	drop, kept := retiredGenerations(srcs, exec, opts.Grace)
	rep.KeptGenerations = append(rep.KeptGenerations, kept...)
	fenced := func(c genCandidate) {
		g.log.Info("janitor: retired source generation kept: the warehouse fence names it", logkey.Model, c.source, logkey.Generation, c.gen)
		rep.KeptGenerations = append(rep.KeptGenerations, KeptGeneration{Source: c.source, Generation: c.gen,
			Reason: "the warehouse fence still plans or serves it"})
	}
	for _, c := range drop {
		table := ingest.Table(c.source, c.gen)
		if opts.DryRun {
			would, markers, err := wouldDrop(ctx, e, c, table)
			if err != nil {
				return err
			}
			if would == nil {
				fenced(c)
				continue
			}
			if *would {
				rep.SourceTables = append(rep.SourceTables, table.String())
			}
			rep.SourceMarkers += markers
			continue
		}
		res, err := dropper.DropGeneration(ctx, warehouse.DropGenerationParams{Source: c.source, Generation: c.gen, Table: table})
		if errors.Is(err, warehouse.ErrFenced) {
			fenced(c)
			continue
		}
		if err != nil {
			return fmt.Errorf("janitor: dropping generation %d of source %s: %w", c.gen, c.source, err)
		}
		if res.TableDropped {
			rep.SourceTables = append(rep.SourceTables, table.String())
			g.log.Info("janitor: retired source generation dropped", logkey.Model, c.source, logkey.Generation, c.gen, logkey.Table, table.String())
		}
		rep.SourceMarkers += res.Markers
	}
	return nil
}

// wouldDrop answers for a dry run: nil when the fence names the
// generation, else whether its table exists and how many markers it has.
func wouldDrop(ctx context.Context, e warehouse.Engine, c genCandidate, table warehouse.Table) (*bool, int64, error) {
	var markers int64
	if in, ok := e.(warehouse.Ingester); ok {
		ws, err := in.IngestState(ctx, c.source)
		if err != nil {
			return nil, 0, fmt.Errorf("janitor: reading the warehouse fence of source %s: %w", c.source, err)
		}
		if ws.Exists && (ws.PlannedGeneration == c.gen || ws.ServingGeneration == c.gen) {
			return nil, 0, nil
		}
		for _, m := range ws.Markers {
			if m.Generation == c.gen {
				markers++
			}
		}
	}
	found, err := e.TablesExist(ctx, []warehouse.Table{table})
	if err != nil {
		return nil, 0, fmt.Errorf("janitor: looking for %s: %w", table, err)
	}
	return &found[0], markers, nil
}
