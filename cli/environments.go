package cli

import (
	"fmt"
	"io"
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
	var asJSON, all bool
	cmd := &cobra.Command{
		Use:   "environments",
		Short: "List environments",
		Long: `Lists every environment: its generation, plan, number of models, when it
was promoted and expires, and its state (live, pending finalisation,
invalidated). Up to 50 are listed one per line; more get a summary (counts
by state) and the first 20 that are not live; --all lists every one, --json
always has every one.`,
		Args: rangeArgs(0, 0),
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
			return printEnvironmentRows(g.env.Stdout, rows, all)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().BoolVar(&all, "all", false, "list every environment, however many")
	return cmd
}

// state is how `environments` names an environment's state.
func (r environmentRow) state() string {
	switch {
	case r.Invalidated:
		return "invalidated"
	case r.Finalized:
		return "live"
	}
	return "pending finalisation"
}

// printEnvironmentRows writes `environments`: every row when there are at
// most listLimit or all is set; otherwise counts by state and the first
// attentionLimit environments that are not live.
func printEnvironmentRows(w io.Writer, rows []environmentRow, all bool) error {
	if len(rows) == 0 {
		fmt.Fprintln(w, "No environments yet; create prod with: gapless plan --auto-apply")
		return nil
	}
	listed, elided := rows, !listAll(all, len(rows))
	if elided {
		states := map[string]int{}
		listed = nil
		for _, r := range rows {
			states[r.state()]++
			if r.state() != "live" && len(listed) < attentionLimit {
				listed = append(listed, r)
			}
		}
		fmt.Fprintf(w, "%d environments: %s\n", len(rows), countLine(states))
		if len(listed) > 0 {
			fmt.Fprintf(w, "\nNot live, %d of %d:\n\n", len(listed), len(rows)-states["live"])
		}
	}
	if len(listed) > 0 {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tGENERATION\tPLAN\tMODELS\tPROMOTED\tEXPIRES\tSTATE")
		for _, r := range listed {
			// An invalidated environment's expiry is when it was
			// invalidated: the janitor removes it at its next pass.
			expires := "never"
			if !r.ExpiresAt.IsZero() {
				expires = r.ExpiresAt.UTC().Format(time.RFC3339)
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%s\t%s\t%s\n", r.Name, r.Generation, r.PlanID, r.Models,
				r.PromotedAt.UTC().Format(time.RFC3339), expires, r.state())
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if elided {
		printElided(w, len(listed), len(rows), "environments")
	}
	return nil
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
