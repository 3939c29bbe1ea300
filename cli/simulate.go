package cli

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/promotion"
	"github.com/gapless-dev/gapless/simulate"
)

func newSimulateCmd(g *globals) *cobra.Command {
	d := simulate.Defaults
	prm := d
	var (
		asJSON   bool
		chart    string
		policies []string
	)
	cmd := &cobra.Command{
		Use:   "simulate",
		Short: "Compare the five promotion policies on one randomized scenario of deploys racing the scheduler",
		Long: `Runs the same randomized scenario under each promotion policy (strict,
trailing-gap, catch-up, replan, lock) and reports what each costs.

The scenario: a generated project of incremental models (--dag, --unit)
is applied to prod; then the scheduler ticks every --cadence (plus up to
--jitter) while --deploys deploys, each a breaking change to a random
model, build a plan and backfill it for a random simulated duration
(--backfill-dist, --backfill-mean, --backfill-stddev). Ticks that fall
during a backfill advance the incumbents before the promotion: the race
the policies answer. Under lock, the deploy holds its leases for
--lock-hold while ticks defer the leased models.

Everything real runs: the planner, apply and its policies, the scheduler's
run with version leases, a SQLite state store and an in-memory DuckDB
warehouse with tiny tables. Only time is simulated (an injected clock; no
sleeping), so --seed fixes the result: the same flags print the same JSON.

It reports, per policy: deploy success rate; freshness debt (count, mean
and max in intervals and minutes, repair latency); extra compute (intervals
deploys computed beyond their plans); wasted compute (intervals of deploys
that failed); scheduled work deferred by locks (intervals, and minutes
until they ran); scheduler runs and intervals computed. --execution-time
sets when prod is first applied (default 2024-01-02, for reproducibility).
It needs no project.`,
		Args: rangeArgs(0, 0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			p := prm
			p.NoJitter = p.Jitter == 0
			p.Logger = g.log
			if g.executionTime != "" {
				t, err := g.execTime()
				if err != nil {
					return err
				}
				p.Start = t
				if u := interval.Unit(p.Unit); u.Valid() {
					p.Start = u.Floor(t)
				}
			}
			p.Policies = nil
			for _, s := range policies {
				for part := range strings.SplitSeq(s, ",") {
					n, err := promotion.Parse(part)
					if err != nil {
						return usagef("--policy: %w", err)
					}
					p.Policies = append(p.Policies, n)
				}
			}
			if err := p.WithDefaults().Validate(); err != nil {
				return usagef("%w", err)
			}
			rep, err := simulate.Run(cmd.Context(), p)
			if err != nil {
				return err
			}
			if chart != "" {
				if err := writeChart(chart, rep); err != nil {
					return err
				}
				fmt.Fprintf(g.env.Stderr, "Chart written to %s.\n", chart)
			}
			if asJSON {
				return rep.WriteJSON(g.env.Stdout)
			}
			return rep.WriteTable(g.env.Stdout)
		},
	}
	f := cmd.Flags()
	f.Int64Var(&prm.Seed, "seed", d.Seed, "random seed: the same seed and flags give the same result")
	f.IntVar(&prm.Deploys, "deploys", d.Deploys, "number of deploys")
	f.DurationVar(&prm.Cadence, "cadence", d.Cadence, "scheduler tick period")
	f.DurationVar(&prm.Jitter, "jitter", d.Jitter, "scheduler start jitter: each tick fires up to this late (less than --cadence)")
	f.StringVar(&prm.BackfillDist, "backfill-dist", d.BackfillDist, "distribution of backfill durations: "+strings.Join(simulate.Dists, ", "))
	f.DurationVar(&prm.BackfillMean, "backfill-mean", d.BackfillMean, "mean simulated duration of a deploy's backfill")
	f.DurationVar(&prm.BackfillStddev, "backfill-stddev", d.BackfillStddev, "standard deviation of the backfill duration")
	f.DurationVar(&prm.DeployGap, "deploy-gap", d.DeployGap, "mean idle time between one deploy's end and the next one's start (exponential)")
	f.StringVar(&prm.DAG, "dag", d.DAG, `shape of the models: "chain:N", "fan:N" (one parent, N children) or "diamond"`)
	f.StringVar(&prm.Unit, "unit", d.Unit, "interval unit (and cron) of the models: five_minute, hour or day")
	f.DurationVar(&prm.History, "history", d.History, "data before the first apply")
	f.IntVar(&prm.MaxTrailingGapIntervals, "max-trailing-gap-intervals", d.MaxTrailingGapIntervals, "trailing-gap's bound, in scheduler advances")
	f.IntVar(&prm.MaxAttempts, "max-attempts", d.MaxAttempts, "catch-up's and replan's bound on attempts")
	f.DurationVar(&prm.LockHold, "lock-hold", d.LockHold, "simulated time the lock policy holds its leases (final catch-up and promotion)")
	f.IntVar(&prm.Parallel, "parallel", 0, "policies simulated at once (default: the number of CPUs); does not change the result")
	f.StringSliceVar(&policies, "policy", nil, "simulate only these policies (repeatable or comma-separated; default all five)")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON")
	f.StringVar(&chart, "chart", "", "also draw the report as a PNG chart into this file")
	return cmd
}

// writeChart draws rep into path.
func writeChart(path string, rep *simulate.Report) (err error) {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("creating the chart file: %w", err)
	}
	defer func() {
		if cerr := f.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("closing the chart file: %w", cerr))
		}
	}()
	return rep.WriteChart(f)
}
