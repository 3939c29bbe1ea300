package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/gapless-dev/gapless/apply"
	"github.com/gapless-dev/gapless/lease"
	"github.com/gapless-dev/gapless/plan"
)

func newRollbackCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "rollback [ENV]",
		Short: "Serve ENV's previous plan again (default prod): a view swap, through the strict promotion",
		Long: `Promotes the environment's previous plan again, as a new plan that serves
exactly the previous plan's snapshots and computes nothing: it repoints the
views at the tables the previous plan served, which the janitor keeps for
snapshot_ttl (default 7d) after they stop being served.

The promotion is the strict one: it refuses, naming each model and the
range it misses, when a previous table no longer covers what ENV serves now
(the scheduler advanced ENV since), and when another plan was promoted
meanwhile. It refuses, naming them, when the janitor already dropped tables
the previous plan needs. Either way ENV serves what it served before; revert
the change in the project and run "gapless plan ENV" instead, which reuses
what is left and computes only what is missing.

Rolling back twice returns to where ENV was: the rollback becomes ENV's
plan, and the plan it replaced becomes its previous one.`,
		Args: rangeArgs(0, 1),
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			ctx := cmd.Context()
			env, err := envArg(args)
			if err != nil {
				return err
			}
			exec, err := g.execTime()
			if err != nil {
				return err
			}
			id, err := plan.RandomID()
			if err != nil {
				return err
			}
			cfg, b, err := g.open(ctx, false)
			if err != nil {
				return err
			}
			defer g.closeBackend(b, &err)
			rb, err := apply.RollbackPlan(ctx, apply.RollbackParams{Store: b.Store, Engine: b.Engine, Environment: env,
				ID: id, ExecutionTime: exec, Now: g.now()})
			if err != nil {
				return err
			}
			out := g.env.Stdout
			printRollback(out, rb)
			if _, err := g.applyPlan(ctx, out, b, cfg.Dir, rb.Plan, nil, lease.Options{}, mergeGateFlags{}); err != nil {
				return apply.RollbackRefusal(rb, err)
			}
			fmt.Fprintf(out, "\nRolled %s back to plan %s (as plan %s); it served plan %s before.\n", env, rb.To, rb.Plan.ID, rb.From)
			return nil
		},
	}
}

// printRollback says what a rollback repoints.
func printRollback(out io.Writer, rb *apply.Rollback) {
	env := rb.Plan.Environment
	fmt.Fprintf(out, "Rolling %s back from plan %s to plan %s: %d view(s) change, nothing is computed.\n", env, rb.From, rb.To, len(rb.Swaps))
	for _, s := range rb.Swaps {
		switch {
		case s.From == "":
			fmt.Fprintf(out, "  + %s  %s\n", s.Model, s.To)
		case s.To == "":
			fmt.Fprintf(out, "  - %s  %s\n", s.Model, s.From)
		default:
			fmt.Fprintf(out, "  ~ %s  %s -> %s\n", s.Model, s.From, s.To)
		}
	}
}
