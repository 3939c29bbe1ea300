package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"slices"
	"strings"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/gapless-dev/gapless/apply"
	"github.com/gapless-dev/gapless/backend"
	"github.com/gapless-dev/gapless/execute"
	"github.com/gapless-dev/gapless/internal/logkey"
	"github.com/gapless-dev/gapless/lease"
	"github.com/gapless-dev/gapless/plan"
	"github.com/gapless-dev/gapless/project"
	"github.com/gapless-dev/gapless/promotion"
	runner "github.com/gapless-dev/gapless/run"
	"github.com/gapless-dev/gapless/snapshot"
	"github.com/gapless-dev/gapless/sqlparse"
	"github.com/gapless-dev/gapless/state"
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
// On a merge-gated environment the apply runs under a deploy attempt (see
// openMergeGate, with gate's --merge-gate and --merge-gate-wait): nothing
// is applied before the gate opens, the promotion names the attempt's
// fence, and the attempt is ended and settled however the apply ends. An
// environment that is not gated records no attempt.
//
// A promotion the policy refused is returned as a *refusedError: every
// rejecting model on its own line, with the rule that rejected it and the
// policy or flag that would have helped.
func (g *globals) applyPlan(ctx context.Context, out io.Writer, b *backend.Backend, projectDir string, pl *plan.Plan,
	override *promotion.Policy, lopts lease.Options, gate mergeGateFlags) (*apply.Result, error) {
	parser, err := sqlparse.Open()
	if err != nil {
		return nil, fmt.Errorf("starting the SQL parser: %w", err)
	}
	defer parser.Close()
	gated, err := g.openMergeGate(ctx, b, pl, gate)
	if err != nil {
		return nil, err
	}
	actx, stop := ctx, func() {}
	var fence *state.GateFence
	if gated != nil {
		// The attempt's lease is renewed while the apply runs; a lost lease
		// cancels actx (cause state.ErrLeaseLost) before the promotion,
		// which the fence would refuse anyway.
		actx, stop = gated.Keep(ctx)
		defer stop()
		fence = gated.Fence()
	}
	// The environment lives for its configured TTL after this promotion
	// (environment_ttl, or environments.<name>.ttl; prod never expires).
	var ttl time.Duration
	if b.Config != nil {
		ttl = b.Config.TTL(pl.Environment)
	}
	bars := g.newProgress(pl)
	var committed atomic.Int64
	res, err := apply.Apply(actx, apply.Params{
		Plan: pl, Store: b.Store, Engine: b.Engine, Parser: parser, ProjectDir: projectDir,
		Clock: g.clock(), Logger: g.progressLogger(bars),
		OnEvent: func(e apply.Event) {
			if _, ok := e.(apply.BatchCommitted); ok {
				committed.Add(1)
			}
			bars.event(e)
		},
		Policy:         override,
		Lease:          lopts,
		EnvironmentTTL: ttl,
		Actor:          actorName(),
		Replan: plan.Replanner(plan.ReplannerParams{Store: b.Store, Clock: g.clock(),
			Additive: func(ctx context.Context) snapshot.Additive { return project.Additive(ctx, parser) }}),
		Gate:       fence,
		Statements: environmentStatements(b.Config),
	})
	bars.Done(err == nil)
	if gated != nil {
		if cause := context.Cause(actx); err != nil && errors.Is(cause, state.ErrLeaseLost) {
			err = fmt.Errorf("%w (the merge gate's deploy attempt %s lost its lease: %w)", err, gated.Attempt().ID, cause)
		}
		stop()
		g.finishMergeGate(ctx, b.Store, gated, pl, res, err)
	}
	if err != nil {
		if ctx.Err() != nil {
			return res, &interruptedError{batches: committed.Load(), err: err}
		}
		var perr *promotion.Error
		if errors.As(err, &perr) {
			return res, &refusedError{env: pl.Environment, planID: lastPlanID(pl, res), attempts: attempts(res), policy: perr, err: err}
		}
		// apply's error names the plan, the stage and, for a failed batch, the
		// model and the interval; the SQL follows on the next lines.
		return res, fmt.Errorf("%s: %w", pl.Environment, err)
	}
	printOutcome(out, pl, res)
	if res.Environment != nil {
		g.log.Info("plan applied", logkey.Plan, res.Environment.PlanID, logkey.Environment, pl.Environment, logkey.Generation, res.Environment.Generation)
	}
	return res, nil
}

// interruptedError is a command stopped by its context (Ctrl-C, SIGTERM)
// while it wrote: every batch committed before is recorded and kept (a
// batch in flight rolled back and recorded nothing), so running the same
// command again resumes after them. Its message is the one line the user
// needs; the failure the command ended with stays reachable through Unwrap
// but is not printed.
type interruptedError struct {
	batches int64
	err     error
}

func (e *interruptedError) Error() string {
	return fmt.Sprintf("interrupted: %s committed and kept; run the same command again to resume", plural(e.batches, "batch", "batches"))
}

func (e *interruptedError) Unwrap() error { return e.err }

// plural is "1 batch", "3 batches".
func plural(n int64, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// refusedError is a promotion the policy refused, as the command line says
// it: which plan was not promoted, then one line per rejecting model (its
// rule, range, frontiers, and what would have helped: promotion.Verdict's
// Explain).
type refusedError struct {
	env, planID string
	attempts    int
	policy      *promotion.Error
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
	if !pl.Options.Checks() {
		return // no promotion check: no policy acted
	}
	pol := res.Policy
	if pol == "" {
		pol = pl.Options.Policy.OrDefault().String()
	}
	var accepted []promotion.Verdict
	for _, v := range res.Verdicts {
		if v.Reason == promotion.TrailingGapAccepted {
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
				what = "refused: " + string(promotion.IncumbentAdvanced)
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
		line := fmt.Sprintf("%s%s %s: %s, %s", indent, m.Model, m.Version, plural(int64(m.Batches), "batch", "batches"), plural(m.Rows, "row", "rows"))
		if !m.Recorded.IsEmpty() {
			line += ", computed " + strings.Join(rangeStrings(m.Recorded), ", ")
		}
		if !m.Skipped.IsEmpty() {
			line += ", already done: " + strings.Join(rangeStrings(m.Skipped), ", ")
		}
		fmt.Fprintln(out, line)
	}
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

// actorName names who applies a plan, for the history: user@host.
func actorName() string {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown-host"
	}
	name := "unknown"
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	return name + "@" + host
}

// runEnvironment runs, once, every due interval of every model env serves
// at exec (only the selected models when any are given), and prints a line
// per model that did work. worked is false when no model had anything due
// (nothing was printed).
func (g *globals) runEnvironment(ctx context.Context, b *backend.Backend, projectDir, env string, exec time.Time, selected []string) (worked bool, err error) {
	e, _, err := plan.Against(ctx, b.Store, env)
	if err != nil {
		return false, err
	}
	if e == nil {
		return false, fmt.Errorf("environment %s does not exist (or was invalidated); create it with: gapless plan %s", env, env)
	}
	if err := checkServed(e, selected); err != nil {
		return false, err
	}
	parser, err := sqlparse.Open()
	if err != nil {
		return false, fmt.Errorf("starting the SQL parser: %w", err)
	}
	defer parser.Close()
	var committed atomic.Int64
	res, err := runner.Once(ctx, runner.Params{
		Env: env, ExecutionTime: exec, Select: selected,
		Store: b.Store, Engine: b.Engine, Parser: parser, ProjectDir: projectDir,
		Clock: g.clock(), Logger: g.log,
		OnBatch: func(execute.Batch) { committed.Add(1) },
		// Take each version's lease as a scheduler daemon does: a version a
		// deploy (lock policy) or a daemon holds is deferred, not raced.
		// The lease records this process (lease.Self), so a later run on
		// this host takes it over at once should this one be killed.
		Leases:     &lease.Options{Owner: "run"},
		Statements: environmentStatements(b.Config),
	})
	if err != nil && ctx.Err() != nil {
		err = &interruptedError{batches: committed.Load(), err: err}
	}
	if err != nil && res == nil {
		return false, atTime(exec, err)
	}
	worked = slices.ContainsFunc(res.Models, func(m runner.ModelResult) bool {
		return m.Err != nil || m.BlockedBy != "" || m.DeferredBy != "" || m.Batches > 0 || !m.Waiting.IsEmpty()
	})
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
		line := fmt.Sprintf("  %s %s: %s, %s", m.Model, m.Version, plural(int64(m.Batches), "batch", "batches"), plural(m.Rows, "row", "rows"))
		if !m.Recorded.IsEmpty() {
			line += ", computed " + m.Recorded.String()
		}
		if !m.Waiting.IsEmpty() {
			line += ", waiting for parents: " + m.Waiting.String()
		}
		for _, why := range m.WaitingOn {
			line += "; " + why
		}
		fmt.Fprintln(g.env.Stdout, line)
	}
	if err != nil {
		return worked, atTime(exec, err)
	}
	return worked, nil
}

// atTime says at which execution time a run failed; an interruption is
// said as is (one line: what was kept and how to resume).
func atTime(exec time.Time, err error) error {
	var ierr *interruptedError
	if errors.As(err, &ierr) {
		return ierr
	}
	return fmt.Errorf("at %s: %w", exec.Format(time.RFC3339), err)
}

// checkServed refuses a --select-model that e does not serve, with the
// closest served name as a suggestion.
func checkServed(e *state.Environment, selected []string) error {
	names := make([]string, len(e.Snapshots))
	for i, r := range e.Snapshots {
		names[i] = r.Name
	}
	for _, name := range selected {
		if !slices.Contains(names, name) {
			return fmt.Errorf("--select-model %s: %s serves no such model%s", name, e.Name, didYouMean(name, names))
		}
	}
	return nil
}
