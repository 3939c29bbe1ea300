package cli

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/spf13/cobra"

	"github.com/gapless-dev/gapless/connector"
	"github.com/gapless-dev/gapless/connector/files"
	"github.com/gapless-dev/gapless/ingest"
	"github.com/gapless-dev/gapless/source"
	"github.com/gapless-dev/gapless/warehouse"
)

func newIngestCmd(g *globals) *cobra.Command {
	var once bool
	cmd := &cobra.Command{
		Use:   "ingest --once",
		Short: "Land every source once: stage new files, build or apply them, publish watermarks",
		Long: `Runs one ingest pass over the project's sources (see Sources in the
README): per source, repairs the state store from the warehouse, stages
the files that have settled, builds a generation when one is owed (the
first landing, a resync) or else applies the new files in order, and
publishes the source's watermark. A file that fails stops its source there
(exit 1, naming it); other sources go on. Only --once exists so far. A
file is taken once its last write is files.settle old, so one pass takes
every file written at least that long ago.`,
		Args: rangeArgs(0, 0),
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			if !once {
				return usagef("only `gapless ingest --once` exists so far (the ingest daemon is not wired yet)")
			}
			ctx := cmd.Context()
			pr, cfg, err := g.openProject(ctx)
			if err != nil {
				return err
			}
			root, err := g.projectRoot()
			if err != nil {
				return err
			}
			b, err := g.openBackend(ctx, cfg, true)
			if err != nil {
				return err
			}
			defer g.closeBackend(b, &err)
			// The warehouse is opened only for a source with something to
			// land: a pass over idle sources never takes the DuckDB file.
			var opened warehouse.Engine
			defer func() {
				if opened != nil {
					if cerr := opened.Close(); cerr != nil {
						err = errors.Join(err, fmt.Errorf("closing the warehouse: %w", cerr))
					}
				}
			}()
			openEngine := func(ctx context.Context) (warehouse.Ingester, error) {
				e, err := g.openEngine(ctx, cfg)
				if err != nil {
					return nil, err
				}
				opened = e
				in, ok := e.(warehouse.Ingester)
				if !ok {
					return nil, fmt.Errorf("the warehouse %s cannot land sources", cfg.Warehouse)
				}
				return in, nil
			}
			conns := make([]connector.Connector, 0, len(pr.Sources))
			for _, d := range pr.Sources {
				if d.Connector != source.ConnectorFiles {
					return fmt.Errorf("%s: source %s: connector %s is not supported by ingest", d.File, d.Name, d.Connector)
				}
				c, err := files.New(d, files.Options{Root: root, Clock: g.clock(), Logger: g.log})
				if err != nil {
					return err
				}
				conns = append(conns, c)
			}
			rep, err := ingest.Pass(ctx, ingest.Params{Store: b.Store, OpenEngine: openEngine, Sources: pr.Sources, Connectors: conns,
				Root: root, Clock: g.clock(), Logger: g.log})
			if err != nil {
				return err
			}
			sort.Slice(rep.Sources, func(i, j int) bool { return rep.Sources[i].Source < rep.Sources[j].Source })
			out := g.env.Stdout
			for _, s := range rep.Sources {
				line := fmt.Sprintf("%s: %d staged, %d applied", s.Source, s.Staged, s.Applied)
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
			return rep.Err()
		},
	}
	cmd.Flags().BoolVar(&once, "once", false, "run one pass and exit")
	return cmd
}
