package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gapless-dev/gapless/internal/logkey"
)

func newMigrateCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "migrate",
		Short: "Upgrade the state store's schema and print its version",
		Long: `Opens the state store named in gapless.yaml, which applies every pending
migration (on PostgreSQL under an advisory lock, so that several processes
may run it at once), and prints the schema version. A store migrated by a
newer gapless is refused and left untouched.`,
		Args: rangeArgs(0, 0),
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			ctx := cmd.Context()
			cfg, b, err := g.open(ctx, true)
			if err != nil {
				return err
			}
			defer g.closeBackend(b, &err)
			v, err := b.Store.SchemaVersion(ctx)
			if err != nil {
				return fmt.Errorf("reading the schema version: %w", err)
			}
			g.log.Info("state store migrated", logkey.State, cfg.State.String(), logkey.SchemaVersion, v)
			fmt.Fprintf(g.env.Stdout, "State store %s is at schema version %d.\n", cfg.State.String(), v)
			return nil
		},
	}
}
