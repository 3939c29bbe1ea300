package cli

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	runner "github.com/gapless-dev/gapless/run"
)

func newRunCmd(g *globals) *cobra.Command {
	var selected []string
	cmd := &cobra.Command{
		Use:   "run [ENV]",
		Short: "Run the scheduler once: every due interval of every model ENV serves (default prod)",
		Long: `Computes, for every model ENV serves, the intervals its cron makes due at
--execution-time and that are not computed yet, and runs them in dependency
order: a model runs an interval only after its parents have it. It stops
before its next model if ENV is promoted meanwhile (a circuit breaker), so
it never writes on behalf of a retired version. When nothing is due it says
so, and when the next interval becomes due.`,
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
			cfg, b, err := g.open(ctx, false)
			if err != nil {
				return err
			}
			defer g.closeBackend(b, &err)
			worked, err := g.runEnvironment(ctx, b, cfg.Dir, env, exec, selected)
			if err != nil {
				return err
			}
			if worked {
				fmt.Fprintf(g.env.Stdout, "Ran %s at %s.\n", env, exec.Format(time.RFC3339))
				return nil
			}
			next, ok, err := runner.NextDue(ctx, b.Store, env, exec, selected)
			if err != nil {
				return err
			}
			line := fmt.Sprintf("Nothing due in %s at %s", env, exec.Format(time.RFC3339))
			if ok {
				line += fmt.Sprintf("; the next interval is due at %s (%s)", next.At.Format(time.RFC3339), next.Model)
			}
			fmt.Fprintln(g.env.Stdout, line+".")
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&selected, "select-model", nil, "run only this model (repeatable)")
	return cmd
}
