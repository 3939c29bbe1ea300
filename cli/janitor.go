package cli

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/gapless-dev/gapless/backend"
	"github.com/gapless-dev/gapless/config"
	"github.com/gapless-dev/gapless/janitor"
)

// DefaultJanitorGrace is janitor.DefaultGrace, the default of --grace.
const DefaultJanitorGrace = janitor.DefaultGrace

// janitorReport is what one janitor pass removed (see janitor.Report).
type janitorReport = janitor.Report

// janitorOptions configure one janitor pass (see janitor.Options).
type janitorOptions = janitor.Options

// janitor runs one janitor pass at exec, logging to the command's logger.
func (g *globals) janitor(ctx context.Context, b *backend.Backend, exec time.Time, opts janitorOptions) (*janitorReport, error) {
	opts.Log = g.log
	return janitor.Run(ctx, b, exec, opts)
}

func newJanitorCmd(g *globals) *cobra.Command {
	var asJSON bool
	var snapshotTTL string
	opts := janitorOptions{}
	cmd := &cobra.Command{
		Use:   "janitor",
		Short: "Drop the views, schemas, tables and state of expired environments and of versions no environment serves",
		Long: `Removes every environment that is invalidated or expired at
--execution-time (never prod; an environment expires environment_ttl after
its latest promotion, see gapless.yaml). For each: its state row first, as
a compare-and-swap on the generation it read (an environment promoted
meanwhile is left alone and reported), then its views, then its view
schemas <schema>__<env> when they are left empty (a schema holding anything
else is kept and reported).

Then it drops the physical tables, intervals and snapshots of the versions
no remaining environment serves, among those the removed environments
served and those of every saved plan, once snapshot_ttl (gapless.yaml,
default 7d; --snapshot-ttl overrides it) has passed since each was last
used: since the promotion or removal that stopped serving it, or the last
activity of a plan that references it. Until then a revert (a plan that
brings the version back, or gapless rollback) reuses its table and
intervals. A version referenced by a plan whose application has not
finished and was active within --grace is kept whatever the TTL: that
apply may still be building it, also when it has not reached its promotion
yet (apply saves its plan first); a plan that was refused (stale, or its
promotion check failed) has finished. Physical schemas gapless__<schema>
left empty are dropped too.

Last it prunes the saved plans that are finished and were last active
before --grace, except each environment's current plan and the one it
served before (gapless rollback promotes it again), and any plan that
names a version snapshot_ttl still keeps. If any environment is promoted
while it works, it drops no table, prunes no plan and asks to be run again.

It also drops the tables (gapless__raw.<schema>__<table>__g<N>) and the
markers in gapless__ingest of source generations retired at least --grace
ago: never the generation a source serves or builds, nor one the
warehouse's fence still plans or serves (kept and reported).

--dry-run prints what it would remove and changes nothing.`,
		Args: rangeArgs(0, 0),
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			ctx := cmd.Context()
			exec, err := g.execTime()
			if err != nil {
				return err
			}
			if opts.Grace < 0 {
				return usagef("--grace must not be negative, got %s", opts.Grace)
			}
			cfg, b, err := g.open(ctx, false)
			if err != nil {
				return err
			}
			defer g.closeBackend(b, &err)
			opts.SnapshotTTL = cfg.SnapshotTTL
			if cmd.Flags().Changed("snapshot-ttl") {
				if opts.SnapshotTTL, err = config.ParseSnapshotTTL(snapshotTTL); err != nil {
					return usagef("--snapshot-ttl: %w", err)
				}
			}
			rep, err := g.janitor(ctx, b, exec, opts)
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(g.env.Stdout, rep)
			}
			printJanitor(g.env.Stdout, rep)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().BoolVar(&opts.DryRun, "dry-run", false, "print what would be removed; change nothing")
	cmd.Flags().DurationVar(&opts.Grace, "grace", DefaultJanitorGrace,
		"keep every version of a plan whose application has not finished and was active this recently, and every source generation retired this recently")
	cmd.Flags().StringVar(&snapshotTTL, "snapshot-ttl", "",
		"keep a version no environment serves this long after it was last used: 12h, 7d, 2w, 0 (drop at once) or never (default: snapshot_ttl in gapless.yaml, else 7d)")
	return cmd
}

func printJanitor(out io.Writer, rep *janitorReport) {
	verb := "Removed"
	if rep.DryRun {
		verb = "Would remove"
	}
	fmt.Fprintf(out, "%s %d environment(s), %d view(s), %d schema(s), %d table(s), the intervals of %d version(s) and %d snapshot(s).\n",
		verb, len(rep.Environments), len(rep.Views), len(rep.Schemas), len(rep.Tables), len(rep.Versions), rep.Snapshots)
	for _, list := range []struct {
		what  string
		items []string
	}{{"environment", rep.Environments}, {"view", rep.Views}, {"schema", rep.Schemas}, {"table", rep.Tables}} {
		for _, it := range list.items {
			fmt.Fprintf(out, "  %s %s\n", list.what, it)
		}
	}
	for _, k := range rep.KeptSchemas {
		fmt.Fprintf(out, "Kept schema %s: %s.\n", k.Schema, k.Reason)
	}
	for _, p := range rep.InFlight {
		fmt.Fprintf(out, "Kept the versions of plan %s: its application has not finished.\n", p)
	}
	if len(rep.Retained) > 0 {
		fmt.Fprintf(out, "Kept %d version(s) no environment serves until their snapshot_ttl passes (a revert reuses them):\n", len(rep.Retained))
		for _, r := range rep.Retained {
			until := "never dropped (snapshot_ttl: never)"
			if !r.ExpiresAt.IsZero() {
				until = "until " + r.ExpiresAt.UTC().Format(time.RFC3339)
			}
			fmt.Fprintf(out, "  table %s, unused since %s, %s\n", r.Table, r.UnusedSince.UTC().Format(time.RFC3339), until)
		}
	}
	if len(rep.PrunedPlans) > 0 {
		verb := "Pruned"
		if rep.DryRun {
			verb = "Would prune"
		}
		fmt.Fprintf(out, "%s %d finished saved plan(s) (--json lists them).\n", verb, len(rep.PrunedPlans))
	}
	if len(rep.SourceTables) > 0 || rep.SourceMarkers > 0 {
		fmt.Fprintf(out, "%s %d retired source generation table(s) and %d of their marker(s):\n", verb, len(rep.SourceTables), rep.SourceMarkers)
		for _, t := range rep.SourceTables {
			fmt.Fprintf(out, "  table %s\n", t)
		}
	}
	for _, k := range rep.KeptGenerations {
		until := ""
		if !k.Until.IsZero() {
			until = ", until " + k.Until.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(out, "Kept generation %d of source %s: %s%s.\n", k.Generation, k.Source, k.Reason, until)
	}
	for _, s := range rep.Skipped {
		fmt.Fprintf(out, "Left %s alone: it was promoted while the janitor ran.\n", s)
	}
}
