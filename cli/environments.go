package cli

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/gapless-dev/gapless/state"
)

// environmentRow is one line of `gapless environments`; its JSON form is
// stable.
type environmentRow struct {
	Name        string    `json:"name"`
	Generation  int64     `json:"generation"`
	PlanID      string    `json:"plan_id"`
	Models      int       `json:"models"`
	PromotedAt  time.Time `json:"promoted_at"`
	Finalized   bool      `json:"finalized"`
	ExpiresAt   time.Time `json:"expires_at,omitzero"`
	Invalidated bool      `json:"invalidated"`
}

func newEnvironmentsCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "environments",
		Short: "List environments",
		Args:  rangeArgs(0, 0),
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			ctx := cmd.Context()
			_, b, err := g.open(ctx, true)
			if err != nil {
				return err
			}
			defer g.closeBackend(b, &err)
			envs, err := b.Store.ListEnvironments(ctx)
			if err != nil {
				return fmt.Errorf("listing environments: %w", err)
			}
			rows := environmentRows(envs)
			if asJSON {
				return writeJSON(g.env.Stdout, rows)
			}
			if len(rows) == 0 {
				fmt.Fprintln(g.env.Stdout, "No environments yet; create prod with: gapless plan --auto-apply")
				return nil
			}
			tw := tabwriter.NewWriter(g.env.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tGENERATION\tPLAN\tMODELS\tPROMOTED\tEXPIRES\tSTATE")
			for _, r := range rows {
				st := "pending finalisation"
				switch {
				case r.Invalidated:
					st = "invalidated"
				case r.Finalized:
					st = "live"
				}
				// An invalidated environment's expiry is when it was
				// invalidated: the janitor removes it at its next pass.
				expires := "never"
				if !r.ExpiresAt.IsZero() {
					expires = r.ExpiresAt.UTC().Format(time.RFC3339)
				}
				fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%s\t%s\t%s\n", r.Name, r.Generation, r.PlanID, r.Models,
					r.PromotedAt.UTC().Format(time.RFC3339), expires, st)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func environmentRows(envs []*state.Environment) []environmentRow {
	rows := []environmentRow{}
	for _, e := range envs {
		rows = append(rows, environmentRow{Name: e.Name, Generation: e.Generation, PlanID: e.PlanID,
			Models: len(e.Snapshots), PromotedAt: e.PromotedAt.UTC(), Finalized: !e.FinalizedAt.IsZero(),
			ExpiresAt: e.ExpiresAt.UTC(), Invalidated: e.Invalidated})
	}
	return rows
}
