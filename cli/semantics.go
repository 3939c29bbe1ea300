package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gapless-dev/gapless/apply"
	"github.com/gapless-dev/gapless/backend"
	"github.com/gapless-dev/gapless/lease"
	"github.com/gapless-dev/gapless/plan"
	"github.com/gapless-dev/gapless/policy"
	"github.com/gapless-dev/gapless/project"
	runner "github.com/gapless-dev/gapless/run"
	"github.com/gapless-dev/gapless/schedule"
	"github.com/gapless-dev/gapless/snapshot"
	"github.com/gapless-dev/gapless/sqlparse"
)

// This file is the one place the command line calls the semantics packages
// (apply, run): the same functions the scenario tests call.

// applyPlan applies pl to its environment on b and reports what happened on
// out: per backfilled model its batches and rows, then which promotion
// policy acted and what it accepted, caught up or replanned (see
// printOutcome). projectDir is where SEED files are read from. override,
// when set, replaces the policy pl recorded (apply's policy flags); lopts
// are how the lock policy takes its leases (--lease-ttl, --lease-wait).
//
// A promotion the policy refused is returned as a *refusedError: every
// rejecting model on its own line, with the rule that rejected it and the
// policy or flag that would have helped.
func (g *globals) applyPlan(ctx context.Context, out io.Writer, b *backend.Backend, projectDir string, pl *plan.Plan,
	override *policy.Policy, lopts lease.Options) (*apply.Result, error) {
	parser, err := sqlparse.Open()
	if err != nil {
		return nil, fmt.Errorf("starting the SQL parser: %w", err)
	}
	defer parser.Close()
	// The environment lives for its configured TTL after this promotion
	// (environment_ttl, or environments.<name>.ttl; prod never expires).
	var ttl time.Duration
	if b.Config != nil {
		ttl = b.Config.TTL(pl.Environment)
	}
	bar := g.newProgress("backfill "+pl.Environment, planSteps(pl))
	res, err := apply.Apply(ctx, apply.Params{
		Plan: pl, Store: b.Store, Engine: b.Engine, Parser: parser, ProjectDir: projectDir,
		Now: g.now, Logger: g.progressLogger(bar),
		OnEvent: func(e apply.Event) {
			if _, ok := e.(apply.BatchCommitted); ok {
				bar.Increment()
			}
		},
		Policy:         override,
		Lease:          lopts,
		EnvironmentTTL: ttl,
		Replan: func(ctx context.Context, prev *plan.Plan, at time.Time) (*plan.Plan, error) {
			id, err := newPlanID()
			if err != nil {
				return nil, err
			}
			return plan.Rebuild(ctx, plan.RebuildParams{Prev: prev, ID: id, Store: b.Store,
				Additive: project.Additive(ctx, parser), ExecutionTime: at, Now: g.now()})
		},
	})
	bar.Done(err == nil)
	if err != nil {
		var perr *policy.Error
		if errors.As(err, &perr) {
			return res, &refusedError{env: pl.Environment, planID: lastPlanID(pl, res), attempts: attempts(res), policy: perr, err: err}
		}
		// apply's error names the plan, the stage and, for a failed batch, the
		// model and the interval; the SQL follows on the next lines.
		return res, fmt.Errorf("%s: %w", pl.Environment, err)
	}
	printOutcome(out, pl, res)
	if res.Environment != nil {
		g.log.Info("plan applied", "plan", res.Environment.PlanID, "environment", pl.Environment, "generation", res.Environment.Generation)
	}
	return res, nil
}

// refusedError is a promotion the policy refused, as the command line says
// it: which plan was not promoted, then one line per rejecting model (its
// rule, range, frontiers, and what would have helped: policy.Verdict's
// Explain).
type refusedError struct {
	env, planID string
	attempts    int
	policy      *policy.Error
	err         error
}

func (e *refusedError) Error() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "%s: plan %s was not promoted", e.env, e.planID)
	if e.attempts > 1 {
		fmt.Fprintf(&sb, " after %d attempts", e.attempts)
	}
	fmt.Fprintf(&sb, "; %s serves what it served before. Promotion refused:", e.env)
	for _, v := range e.policy.Verdicts {
		sb.WriteString("\n  " + v.Explain())
	}
	return sb.String()
}

func (e *refusedError) Unwrap() error { return e.err }

// lastPlanID is the plan the apply promoted or failed with: the last
// replan attempt's, else pl's.
func lastPlanID(pl *plan.Plan, res *apply.Result) string {
	if res != nil && len(res.Attempts) > 0 {
		return res.Attempts[len(res.Attempts)-1].PlanID
	}
	return pl.ID
}

// attempts counts the plans an apply applied: more than one under replan.
func attempts(res *apply.Result) int {
	if res == nil || len(res.Attempts) == 0 {
		return 1
	}
	return len(res.Attempts)
}

// appliedLine is the last line of a successful apply.
func appliedLine(pl *plan.Plan, res *apply.Result) string {
	if id := lastPlanID(pl, res); id != pl.ID {
		return fmt.Sprintf("Applied plan %s to %s (a replan of plan %s).", id, pl.Environment, pl.ID)
	}
	return fmt.Sprintf("Applied plan %s to %s.", pl.ID, pl.Environment)
}

// printOutcome says what an apply did: what it backfilled, then which
// promotion policy acted and what it accepted (trailing-gap: each debt),
// computed beyond the plan (catch-up: per round and model) or replanned
// (replan: per attempt, what it backfilled).
func printOutcome(out io.Writer, pl *plan.Plan, res *apply.Result) {
	replanned := len(res.Attempts) > 1
	if !replanned {
		printModels(out, "\nBackfilled:", "  ", res.Models)
	}
	if res.AlreadyPromoted {
		fmt.Fprintf(out, "\nPlan %s was already promoted by an earlier apply; this one finished the later stages.\n", res.Environment.PlanID)
		return
	}
	if !pl.Options.NoGaps {
		return // no promotion check: no policy acted
	}
	pol := res.Policy
	if pol == "" {
		pol = pl.Options.Policy.OrDefault().String()
	}
	var accepted []policy.Verdict
	for _, v := range res.Verdicts {
		if v.Reason == policy.TrailingGapAccepted {
			accepted = append(accepted, v)
		}
	}
	switch {
	case len(accepted) > 0:
		// The verdicts, not res.Debts, say what was accepted: the debts are
		// their durable record (gapless debt lists them).
		fmt.Fprintf(out, "\nPromotion policy %s: the scheduler advanced %s after the plan was built; accepted %d trailing gap(s) as freshness debt, which the next `gapless run` repairs (see `gapless debt`):\n",
			pol, pl.Environment, len(accepted))
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		for _, v := range accepted {
			fmt.Fprintf(tw, "  %s\t%s\t%d/%d advances\n", v.Model, v.Suffix, v.Advances, v.Bound)
		}
		_ = tw.Flush()
	case len(res.CatchUp) > 0:
		fmt.Fprintf(out, "\nPromotion policy %s: the scheduler advanced %s after the plan was built; caught up beyond the plan in %d round(s), then promoted with no gap:\n",
			pol, pl.Environment, len(res.CatchUp))
		for _, r := range res.CatchUp {
			printModels(out, fmt.Sprintf("  round %d:", r.Round), "    ", r.Models)
		}
	case replanned:
		fmt.Fprintf(out, "\nPromotion policy %s: the scheduler advanced %s after the plan was built; %d attempts, the last promoted with no gap:\n",
			pol, pl.Environment, len(res.Attempts))
		for i, a := range res.Attempts {
			// Replan retries only a refusal for an incumbent advance, so
			// every attempt but the last was refused for that.
			what := "promoted"
			if a.Err != "" {
				what = "refused: " + string(policy.IncumbentAdvanced)
			}
			title := fmt.Sprintf("  attempt %d, plan %s (%s):", i+1, a.PlanID, what)
			if len(a.Models) == 0 {
				title += " backfilled nothing"
			}
			printModels(out, title, "    ", a.Models)
		}
	default:
		fmt.Fprintf(out, "\nPromotion policy %s: no gap; %s was promoted as planned.\n", pol, pl.Environment)
	}
}

// printModels prints a title and one line per model that computed or
// skipped something: its version, the ranges recorded, batches and rows.
func printModels(out io.Writer, title, indent string, models []apply.ModelResult) {
	if len(models) == 0 {
		return
	}
	fmt.Fprintln(out, title)
	for _, m := range models {
		line := fmt.Sprintf("%s%s %s: %d batches, %d rows", indent, m.Model, m.Version, m.Batches, m.Rows)
		if !m.Recorded.IsEmpty() {
			line += ", computed " + strings.Join(rangeStrings(m.Recorded), ", ")
		}
		if !m.Skipped.IsEmpty() {
			line += ", already done: " + strings.Join(rangeStrings(m.Skipped), ", ")
		}
		fmt.Fprintln(out, line)
	}
}

// planSteps counts the batches a plan's backfill runs, for the progress bar.
func planSteps(pl *plan.Plan) int64 {
	byName := make(map[string]*snapshot.Snapshot, len(pl.Snapshots))
	for _, s := range pl.Snapshots {
		byName[s.Name] = s
	}
	var n int64
	for _, b := range pl.Backfills {
		s, ok := byName[b.Name]
		switch {
		case b.Whole || !ok:
			n++
		default:
			n += int64(schedule.BatchCount(b.Ranges, s.Model.IntervalUnit, s.Model.BatchSize))
		}
	}
	return n
}

// deferredLine says what a run deferred, who holds the lease, and when a
// later run can compute it.
func deferredLine(m runner.ModelResult) string {
	line := fmt.Sprintf("  %s %s: deferred %s: its lease is held by %s", m.Model, m.Version, m.Deferred.String(), m.DeferredBy)
	if m.DeferredUntil.IsZero() {
		return line + "; a later run computes it once the lease is free"
	}
	until := m.DeferredUntil.Format(time.RFC3339)
	return line + " until " + until + "; a later run computes it once the holder releases the lease, or after " + until + " if it stops renewing it"
}

// runEnvironment runs, once, every due interval of every model env serves
// at exec (only the selected models when any are given), and prints a line
// per model that did work.
func (g *globals) runEnvironment(ctx context.Context, b *backend.Backend, projectDir, env string, exec time.Time, selected []string) error {
	e, _, err := plan.Against(ctx, b.Store, env)
	if err != nil {
		return err
	}
	if e == nil {
		return fmt.Errorf("environment %s does not exist (or was invalidated); create it with: gapless plan %s", env, env)
	}
	parser, err := sqlparse.Open()
	if err != nil {
		return fmt.Errorf("starting the SQL parser: %w", err)
	}
	defer parser.Close()
	res, err := runner.Once(ctx, runner.Params{
		Env: env, ExecutionTime: exec, Select: selected,
		Store: b.Store, Engine: b.Engine, Parser: parser, ProjectDir: projectDir,
		Now: g.now, Logger: g.log,
		// Take each version's lease as a scheduler daemon does: a version a
		// deploy (lock policy) or a daemon holds is deferred, not raced.
		// The lease records this process (lease.Self), so a later run on
		// this host takes it over at once should this one be killed.
		Leases: &lease.Options{Owner: "run"},
	})
	if err != nil && res == nil {
		return fmt.Errorf("at %s: %w", exec.Format(time.RFC3339), err)
	}
	// What ran is printed also when some model failed: a failed model stops
	// only its own branch of the DAG.
	for _, m := range res.Models {
		switch {
		case m.Err != nil:
			fmt.Fprintf(g.env.Stdout, "  %s %s: failed (see below)\n", m.Model, m.Version)
			continue
		case m.BlockedBy != "":
			fmt.Fprintf(g.env.Stdout, "  %s %s: not run, upstream %s failed\n", m.Model, m.Version, m.BlockedBy)
			continue
		}
		if m.DeferredBy != "" {
			fmt.Fprintln(g.env.Stdout, deferredLine(m))
			continue
		}
		if m.Batches == 0 && m.Waiting.IsEmpty() {
			continue
		}
		line := fmt.Sprintf("  %s %s: %d batches, %d rows", m.Model, m.Version, m.Batches, m.Rows)
		if !m.Recorded.IsEmpty() {
			line += ", computed " + m.Recorded.String()
		}
		if !m.Waiting.IsEmpty() {
			line += ", waiting for parents: " + m.Waiting.String()
		}
		fmt.Fprintln(g.env.Stdout, line)
	}
	if err != nil {
		return fmt.Errorf("at %s: %w", exec.Format(time.RFC3339), err)
	}
	return nil
}
