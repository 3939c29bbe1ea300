package cli

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/gapless-dev/gapless/plan"
	"github.com/gapless-dev/gapless/promotion"
)

func newApplyCmd(g *globals) *cobra.Command {
	var pf policyFlags
	cmd := &cobra.Command{
		Use:   "apply PLAN.json",
		Short: "Apply a plan saved with `gapless plan --out`",
		Long: `Reads a plan file written by "gapless plan --out", checks it (a corrupt,
edited or foreign file is refused with its reason), and applies it: it
records snapshots, creates physical tables, backfills what is still missing
(never more than the plan says), promotes with the no-gap check, updates the
views and finalises.

When the scheduler advanced what the environment serves after the plan was
built, the promotion policy the plan recorded decides: strict fails,
trailing-gap(N) accepts at most N scheduler advances as tracked freshness
debt (see "gapless debt"), catch-up backfills the new tail first, replan
builds and applies a fresh plan for the same models. The policy flags
override what the plan recorded, field by field. The output says which
policy acted and what it accepted, caught up or replanned.`,
		Args: rangeArgs(1, 1),
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			ctx := cmd.Context()
			override, err := pf.override(cmd)
			if err != nil {
				return err
			}
			lopts, err := pf.leaseOptions()
			if err != nil {
				return err
			}
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
			// The flags given override the plan's recorded policy; with
			// none, the plan's own policy applies.
			var pol *promotion.Policy
			if override.given() {
				p, err := override.on(pl.Options.Policy)
				if err != nil {
					return err
				}
				for _, w := range override.warnings(p, pl.Options.Checks()) {
					g.log.Warn(w)
				}
				pol = &p
			}
			cfg, b, err := g.open(ctx, false)
			if err != nil {
				return err
			}
			defer g.closeBackend(b, &err)
			res, err := g.applyPlan(ctx, g.env.Stdout, b, cfg.Dir, pl, pol, lopts, pf.gate)
			if err != nil {
				return err
			}
			fmt.Fprintln(g.env.Stdout, appliedLine(pl, res))
			return nil
		},
	}
	addPolicyFlags(cmd, &pf, "what the plan recorded")
	return cmd
}
