package cli

import (
	"fmt"

	"github.com/spf13/cobra"
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
it never writes on behalf of a retired version.`,
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
			if err := g.runEnvironment(ctx, b, cfg.Dir, env, exec, selected); err != nil {
				return err
			}
			fmt.Fprintf(g.env.Stdout, "Ran %s at %s.\n", env, exec.Format("2006-01-02T15:04:05Z07:00"))
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&selected, "select-model", nil, "run only this model (repeatable)")
	return cmd
}
