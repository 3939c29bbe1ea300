package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gapless-dev/gapless/audit"
	"github.com/gapless-dev/gapless/execute"
	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/model"
	"github.com/gapless-dev/gapless/plan"
	"github.com/gapless-dev/gapless/project"
	"github.com/gapless-dev/gapless/state"
)

func newAuditCmd(g *globals) *cobra.Command {
	var start, end, env string
	var models []string
	cmd := &cobra.Command{
		Use:   "audit [--model M] [--start T --end T]",
		Short: "Run the models' audits on the tables ENV serves and print pass or fail",
		Long: `Runs the audits of the project's models (their audits (...) attribute:
built-in audits, audits/*.sql and AUDIT blocks of the model file) over the
tables ENV (default prod) serves, as SQLMesh's audit command does. An
INCREMENTAL_BY_TIME_RANGE model's table is restricted to [--start, --end)
when they are given; other kinds, and every kind without them, are audited
whole. Each audit prints PASS or FAIL with a sample of the offending rows.
It writes nothing to the warehouse; each outcome is a history event. Exits 1
when a blocking audit fails.`,
		Args: rangeArgs(0, 0),
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			if err := checkEnvName(env); err != nil {
				return err
			}
			exec, err := g.execTime()
			if err != nil {
				return err
			}
			var r interval.Range
			if (start == "") != (end == "") {
				return usagef("give both --start and --end, or neither")
			}
			if start != "" {
				s, err := model.ParseTime(start)
				if err != nil {
					return usagef("--start: %w", err)
				}
				e, err := model.ParseTime(end)
				if err != nil {
					return usagef("--end: %w", err)
				}
				if !s.Before(e) {
					return usagef("--start %s is not before --end %s", start, end)
				}
				r = interval.NewRange(s, e)
			}
			results, err := g.auditEnvironment(cmd.Context(), env, models, r, exec)
			if err != nil {
				return err
			}
			return printAudits(g.env.Stdout, results)
		},
	}
	cmd.Flags().StringArrayVar(&models, "model", nil, "audit only this model (repeatable)")
	cmd.Flags().StringVar(&start, "start", "", "interval start (inclusive)")
	cmd.Flags().StringVar(&end, "end", "", "interval end (exclusive)")
	cmd.Flags().StringVar(&env, "environment", plan.Prod, "the environment whose tables are audited")
	cmd.Flags().StringVar(&env, "env", plan.Prod, "the same as --environment")
	return cmd
}

// auditEnvironment runs the audits of every model env serves (or of the
// models named) over r, with each model's audits as the project defines
// them now, on the physical tables env serves. A project problem (an
// unknown audit, a bad argument, a query that does not parse) is returned
// before any audit runs.
func (g *globals) auditEnvironment(ctx context.Context, env string, only []string, r interval.Range, exec time.Time) (_ []execute.AuditResult, err error) {
	pr, cfg, parser, err := g.openProjectWithParser(ctx)
	if err != nil {
		return nil, err
	}
	defer parser.Close()
	for _, name := range only {
		if _, ok := pr.Models[name]; !ok {
			return nil, usagef("--model %s: no such model in %s%s", name, pr.Dir, didYouMean(name, modelNames(pr)))
		}
	}
	lib, err := audit.LoadDir(pr.Dir)
	if err != nil {
		return nil, err
	}
	var problems project.Errors
	for _, name := range slices.Sorted(maps.Keys(pr.Models)) {
		m := pr.Models[name]
		if len(only) > 0 && !slices.Contains(only, name) {
			continue
		}
		bound, err := audit.Bind(m, lib)
		if err != nil {
			problems = append(problems, err)
			continue
		}
		for _, b := range bound {
			if err := b.CheckParse(ctx, parser); err != nil {
				problems = append(problems, err)
			}
		}
	}
	if len(problems) > 0 {
		return nil, problems
	}
	b, err := g.openBackend(ctx, cfg, false)
	if err != nil {
		return nil, err
	}
	defer g.closeBackend(b, &err)
	e, err := b.Store.GetEnvironment(ctx, env)
	if errors.Is(err, state.ErrNotFound) {
		return nil, fmt.Errorf("audit: environment %s does not exist: deploy it first with gapless plan %s", env, env)
	}
	if err != nil {
		return nil, err
	}
	keys := make([]state.SnapshotKey, len(e.Snapshots))
	for i, ref := range e.Snapshots {
		keys[i] = ref.Key()
	}
	snaps, err := b.Store.GetSnapshots(ctx, keys)
	if err != nil {
		return nil, err
	}
	x := &execute.Executor{Engine: b.Engine, Store: b.Store, ProjectDir: pr.Dir, Clock: g.clock(), Logger: g.log, Audits: lib}
	var out []execute.AuditResult
	for _, ref := range e.Snapshots {
		m, ok := pr.Models[ref.Name]
		if !ok || len(m.Audits) == 0 || (len(only) > 0 && !slices.Contains(only, ref.Name)) {
			continue
		}
		s, ok := snaps[ref.Key()]
		if !ok {
			return nil, fmt.Errorf("audit: environment %s serves %s, whose snapshot is missing from the state store", env, ref.Name)
		}
		// The served table, audited with the audits the project defines
		// now (as SQLMesh audits with the local definitions).
		served := *s
		sm := *s.Model
		sm.Audits, sm.InlineAudits = m.Audits, m.InlineAudits
		served.Model = &sm
		t := &execute.Template{Snapshot: &served, Table: execute.PhysicalTable(&served)}
		res, err := x.Audit(ctx, execute.AuditParams{Template: t, Interval: r, Execution: exec})
		if err != nil {
			return nil, fmt.Errorf("audit: model %s: %w", ref.Name, err)
		}
		out = append(out, res...)
	}
	for _, name := range only {
		served := slices.ContainsFunc(e.Snapshots, func(r state.SnapshotRef) bool { return r.Name == name })
		switch {
		case len(pr.Models[name].Audits) == 0:
			g.say(fmt.Sprintf("Model %s has no audits.", name))
		case !served:
			g.say(fmt.Sprintf("Model %s is not served by %s: nothing to audit.", name, env))
		}
	}
	return out, nil
}

// errAuditsFailed is returned (exit 1) when a blocking audit failed.
var errAuditsFailed = errors.New("a blocking audit failed")

// printAudits writes one line per audit and a summary; it returns
// errAuditsFailed when a blocking audit failed.
func printAudits(w io.Writer, results []execute.AuditResult) error {
	var failed, blocking int
	for _, r := range results {
		status := "PASS"
		if !r.Passed() {
			status = "FAIL"
			failed++
			if r.Blocking {
				blocking++
			} else {
				status = "WARN"
			}
		}
		line := r.Describe()
		fmt.Fprintf(w, "%s  %s\n", status, strings.ReplaceAll(line, "\n", "\n  "))
	}
	fmt.Fprintf(w, "%d audits: %d passed, %d failed (%d blocking)\n", len(results), len(results)-failed, failed, blocking)
	if blocking > 0 {
		return errAuditsFailed
	}
	return nil
}
