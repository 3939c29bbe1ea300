package cli

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/gapless-dev/gapless/plan"
)

func newApplyCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "apply PLAN.json",
		Short: "Apply a plan saved with `gapless plan --out`",
		Long: `Reads a plan file written by "gapless plan --out", checks it (a corrupt,
edited or foreign file is refused with its reason), and applies it: it
records snapshots, creates physical tables, backfills what is still missing
(never more than the plan says), promotes with the no-gap check, updates the
views and finalises.`,
		Args: rangeArgs(1, 1),
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			ctx := cmd.Context()
			file, err := g.path(args[0])
			if err != nil {
				return err
			}
			data, err := os.ReadFile(file)
			if err != nil {
				return fmt.Errorf("reading the plan: %w", err)
			}
			pl, err := plan.Decode(data)
			if err != nil {
				return fmt.Errorf("%s: %w", args[0], err)
			}
			cfg, b, err := g.open(ctx, false)
			if err != nil {
				return err
			}
			defer g.closeBackend(b, &err)
			if err := g.applyPlan(ctx, g.env.Stdout, b, cfg.Dir, pl); err != nil {
				return err
			}
			fmt.Fprintf(g.env.Stdout, "Applied plan %s to %s.\n", pl.ID, pl.Environment)
			return nil
		},
	}
}
