package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/gapless-dev/gapless/cadence"
	"github.com/gapless-dev/gapless/execute"
	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/model"
	"github.com/gapless-dev/gapless/plan"
	"github.com/gapless-dev/gapless/snapshot"
)

func newRenderCmd(g *globals) *cobra.Command {
	var start, end, env string
	cmd := &cobra.Command{
		Use:   "render MODEL --start T --end T",
		Short: "Print the SQL that would run for MODEL over [start, end)",
		Long: `Prints MODEL's query as a backfill or run of ENV (default prod) would send
it: macros substituted for [--start, --end) and every model it reads pointed
at the physical table of the version ENV would use after a plan of the
current project. Without --start and --end it renders the newest interval
due at --execution-time.`,
		Args: rangeArgs(1, 1),
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			if err := checkEnvName(env); err != nil {
				return err
			}
			exec, err := g.execTime()
			if err != nil {
				return err
			}
			var r interval.Range
			if (start == "") != (end == "") {
				return usagef("give both --start and --end, or neither")
			}
			if start != "" {
				s, err := model.ParseTime(start)
				if err != nil {
					return usagef("--start: %w", err)
				}
				e, err := model.ParseTime(end)
				if err != nil {
					return usagef("--end: %w", err)
				}
				if !s.Before(e) {
					return usagef("--start %s is not before --end %s", start, end)
				}
				r = interval.NewRange(s, e)
			}
			sql, err := g.render(cmd.Context(), args[0], env, r, exec)
			if err != nil {
				return err
			}
			fmt.Fprintln(g.env.Stdout, sql)
			return nil
		},
	}
	cmd.Flags().StringVar(&start, "start", "", "interval start (inclusive)")
	cmd.Flags().StringVar(&end, "end", "", "interval end (exclusive)")
	cmd.Flags().StringVar(&env, "environment", plan.Prod, "the environment whose tables the query reads")
	return cmd
}

// render builds the plan ENV would get (without applying it) for its
// versions, and renders name's template over r (or its newest due
// interval when r is zero).
func (g *globals) render(ctx context.Context, name, env string, r interval.Range, exec time.Time) (_ string, err error) {
	pr, cfg, parser, err := g.openProjectWithParser(ctx)
	if err != nil {
		return "", err
	}
	defer parser.Close()
	m, ok := pr.Models[name]
	if !ok {
		return "", fmt.Errorf("model %s: no such model in %s%s", name, pr.Dir, didYouMean(name, modelNames(pr)))
	}
	if m.Kind == model.KindSeed || m.Kind == model.KindExternal {
		return "", fmt.Errorf("model %s is %s: it has no query to render", name, m.Kind)
	}
	if r.Empty() {
		if r, err = defaultRange(m, exec); err != nil {
			return "", err
		}
	}
	b, err := g.openBackend(ctx, cfg, false)
	if err != nil {
		return "", err
	}
	defer g.closeBackend(b, &err)
	pl, err := buildPlan(ctx, b.Store, pr, parser, env, exec, g.now(), plan.Options{SkipBackfill: true})
	if err != nil {
		return "", err
	}
	set := make(map[string]*snapshot.Snapshot, len(pl.Snapshots))
	for _, s := range pl.Snapshots {
		set[s.Name] = s
	}
	tpls, err := execute.Templates(ctx, parser, b.Engine, set)
	if err != nil {
		return "", err
	}
	sql, err := tpls[name].Render(r, exec)
	if err != nil {
		return "", fmt.Errorf("model %s: %w", name, err)
	}
	return sql, nil
}

// defaultRange is the newest interval due at exec (the whole history for
// kinds built whole).
func defaultRange(m *model.Model, exec time.Time) (interval.Range, error) {
	if !m.Kind.IsIncremental() {
		if r, ok := execute.WholeRange(m, exec); ok {
			return r, nil
		}
	}
	spec, err := cadence.ForModel(m)
	if err != nil {
		return interval.Range{}, err
	}
	r, ok := spec.DueAt(exec)
	if !ok {
		return interval.Range{}, fmt.Errorf("model %s: nothing is due at %s; give --start and --end", m.Name, exec.Format(time.RFC3339))
	}
	return r, nil
}
