package cli

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gapless-dev/gapless/internal/logkey"
	"github.com/gapless-dev/gapless/plan"
	"github.com/gapless-dev/gapless/state"
)

func newInvalidateCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "invalidate ENV",
		Short: "Invalidate a development environment; `gapless janitor` later removes it",
		Args:  rangeArgs(1, 1),
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			ctx := cmd.Context()
			env := args[0]
			if err := checkEnvName(env); err != nil {
				return err
			}
			if env == plan.Prod {
				return fmt.Errorf("prod cannot be invalidated: it is what your users read")
			}
			exec, err := g.execTime()
			if err != nil {
				return err
			}
			_, b, err := g.open(ctx, true)
			if err != nil {
				return err
			}
			defer g.closeBackend(b, &err)
			err = b.Store.Invalidate(ctx, state.InvalidateParams{Environment: env, Now: exec})
			if errors.Is(err, state.ErrNotFound) {
				return fmt.Errorf("environment %s does not exist (see gapless environments)", env)
			}
			if err != nil {
				return fmt.Errorf("invalidating %s: %w", env, err)
			}
			g.log.Info("environment invalidated", logkey.Environment, env)
			fmt.Fprintf(g.env.Stdout, "Invalidated %s; run gapless janitor to remove its views and tables.\n", env)
			return nil
		},
	}
}
