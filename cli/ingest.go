package cli

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/spf13/cobra"

	"github.com/gapless-dev/gapless/backend"
	"github.com/gapless-dev/gapless/config"
	"github.com/gapless-dev/gapless/connector"
	"github.com/gapless-dev/gapless/connector/files"
	"github.com/gapless-dev/gapless/ingest"
	"github.com/gapless-dev/gapless/source"
	"github.com/gapless-dev/gapless/warehouse"
)

func newIngestCmd(g *globals) *cobra.Command {
	var (
		once  bool
		every time.Duration
	)
	cmd := &cobra.Command{
		Use:   "ingest [SOURCE...] [--once]",
		Short: "Land the sources: stage new files, build or apply them, publish watermarks, every --interval",
		Long: `Runs ingest passes over the project's sources (see Sources in the
README), or over the SOURCEs named: per source, a pass repairs the state
store from the warehouse, stages the files that have settled, builds a
generation when one is owed (the first landing, a resync) or else applies
the new files in order, and publishes the source's watermark. A file that
fails stops its source there, naming it; other sources go on. A file is
taken once its last write is files.settle old, so one pass takes every
file written at least that long ago.

With --once, one pass, then exit (1 when a source stopped at a file).
Without it, a pass every --interval until SIGINT or SIGTERM, which stop
it between passes (exit 0); a pass that fails is logged and the next one
retries. The warehouse is opened for each pass and closed after it, so a
plan or apply in another shell gets the DuckDB file in between.`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			if every <= 0 {
				return usagef("--interval must be positive")
			}
			ctx := cmd.Context()
			pr, cfg, err := g.openProject(ctx)
			if err != nil {
				return err
			}
			sources, err := ingest.Select(pr.Sources, args)
			if err != nil {
				return &UsageError{Err: err}
			}
			root, err := g.projectRoot()
			if err != nil {
				return err
			}
			conns, err := ingestConnectors(g, sources, root)
			if err != nil {
				return err
			}
			// A warehouse that cannot land sources exactly once is refused
			// before anything is written, in state or in the warehouse.
			if err := checkCanIngest(ctx, cfg); err != nil {
				return err
			}
			// The state store is opened for the whole run; the warehouse
			// only by a pass with a source that has something to land, so
			// a pass over idle sources never takes the DuckDB file.
			b, err := g.openBackend(ctx, cfg, true)
			if err != nil {
				return err
			}
			defer g.closeBackend(b, &err)
			open := func(ctx context.Context) (warehouse.Ingester, error) {
				e, err := g.openEngine(ctx, cfg)
				if err != nil {
					return nil, err
				}
				in, ok := e.(warehouse.Ingester)
				if !ok {
					return nil, errors.Join(cannotIngest(cfg, e.Dialect()), e.Close())
				}
				return in, nil
			}
			p := ingest.Params{Store: b.Store, Sources: sources, Connectors: conns, Root: root, Clock: g.clock(), Logger: g.log}
			if once {
				rep, err := ingest.Once(ctx, p, open)
				if err != nil {
					return err
				}
				printIngest(g, rep, false)
				return rep.Err()
			}
			passes := 0
			err = ingest.Loop(ctx, ingest.LoopParams{Params: p, Interval: every,
				Open: open,
				OnPass: func(rep ingest.Report, _ error) {
					passes++
					printIngest(g, rep, passes > 1)
				}})
			if err != nil {
				return err
			}
			fmt.Fprintf(g.env.Stdout, "Ingest stopped after %d passes.\n", passes)
			return nil
		},
	}
	cmd.Flags().BoolVar(&once, "once", false, "run one pass and exit")
	cmd.Flags().DurationVar(&every, "interval", ingest.DefaultInterval, "without --once, how often a pass starts")
	return cmd
}

// ingestConnectors opens the connectors of the sources.
func ingestConnectors(g *globals, sources map[string]*source.Definition, root string) ([]connector.Connector, error) {
	conns := make([]connector.Connector, 0, len(sources))
	for _, d := range sources {
		if d.Connector != source.ConnectorFiles {
			return nil, fmt.Errorf("%s: source %s: connector %s is not supported by ingest", d.File, d.Name, d.Connector)
		}
		c, err := files.New(d, files.Options{Root: root, Clock: g.clock(), Logger: g.log})
		if err != nil {
			return nil, err
		}
		conns = append(conns, c)
	}
	return conns, nil
}

// printIngest prints one line per source of a pass; with changesOnly, of
// the sources the pass staged, applied, skipped, built or failed something
// for.
func printIngest(g *globals, rep ingest.Report, changesOnly bool) {
	sort.Slice(rep.Sources, func(i, j int) bool { return rep.Sources[i].Source < rep.Sources[j].Source })
	out := g.env.Stdout
	for _, s := range rep.Sources {
		if changesOnly && s.Staged == 0 && s.Applied == 0 && s.Skipped == 0 && s.Built == 0 && s.Err == nil {
			continue
		}
		line := fmt.Sprintf("%s: %d staged, %d applied", s.Source, s.Staged, s.Applied)
		if s.Skipped > 0 {
			line += fmt.Sprintf(", %d skipped (its file was removed)", s.Skipped)
		}
		if s.Built != 0 {
			line += fmt.Sprintf(", generation %d swapped in", s.Built)
		}
		if s.Idle {
			line += ", nothing new"
		}
		if s.Deferred != "" {
			line += ", build deferred (" + s.Deferred + ")"
		}
		if !s.Watermark.IsZero() {
			line += ", complete through " + s.Watermark.UTC().Format("2006-01-02T15:04:05Z")
		}
		if s.Err != nil {
			line += ", stopped (see the error)"
		}
		fmt.Fprintln(out, line)
	}
}

// checkCanIngest refuses a warehouse whose engine does not declare
// exactly-once ingestion (warehouse.Capabilities.Ingest), asking the engine
// backend.OpenForPlanning opens (for DuckDB an in-memory one of the same
// engine, so the warehouse file is not taken).
func checkCanIngest(ctx context.Context, cfg *config.Config) error {
	e, err := backend.OpenForPlanning(ctx, cfg.Warehouse)
	if err != nil {
		return err
	}
	caps, dialect := e.Capabilities(), e.Dialect()
	if err := e.Close(); err != nil {
		return fmt.Errorf("closing the warehouse: %w", err)
	}
	if !caps.Ingest {
		return cannotIngest(cfg, dialect)
	}
	return nil
}

// cannotIngest is the refusal of a warehouse that cannot land sources.
func cannotIngest(cfg *config.Config, dialect string) error {
	return fmt.Errorf("the warehouse %s cannot land sources: the %s engine does not declare exactly-once ingestion "+
		"(each step needs one transaction holding the fence check, the rows and the marker); land sources into a DuckDB or PostgreSQL warehouse",
		cfg.Warehouse, dialect)
}
