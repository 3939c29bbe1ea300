package cli

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/gapless-dev/gapless/apply"
	"github.com/gapless-dev/gapless/backend"
	"github.com/gapless-dev/gapless/plan"
	scheduler "github.com/gapless-dev/gapless/run"
	"github.com/gapless-dev/gapless/schedule"
	"github.com/gapless-dev/gapless/snapshot"
	"github.com/gapless-dev/gapless/sqlparse"
)

// This file is the one place the command line calls the semantics packages
// (apply, run): the same functions the scenario tests call.

// applyPlan applies pl to its environment on b and prints a line per
// backfilled model. projectDir is where SEED files are read from.
func (g *globals) applyPlan(ctx context.Context, out io.Writer, b *backend.Backend, projectDir string, pl *plan.Plan) error {
	parser, err := sqlparse.Open()
	if err != nil {
		return fmt.Errorf("starting the SQL parser: %w", err)
	}
	defer parser.Close()
	bar := g.newProgress("backfill "+pl.Environment, planSteps(pl))
	res, err := apply.Apply(ctx, apply.Params{
		Plan: pl, Store: b.Store, Engine: b.Engine, Parser: parser, ProjectDir: projectDir,
		Now: g.now, Logger: g.progressLogger(bar),
		OnEvent: func(e apply.Event) {
			if _, ok := e.(apply.BatchCommitted); ok {
				bar.Increment()
			}
		},
	})
	bar.Done(err == nil)
	if err != nil {
		// apply's error names the plan, the stage and, for a failed batch, the
		// model and the interval; the SQL follows on the next lines.
		return fmt.Errorf("%s: %w", pl.Environment, err)
	}
	if len(res.Models) > 0 {
		fmt.Fprintln(out, "\nBackfilled:")
	}
	for _, m := range res.Models {
		line := fmt.Sprintf("  %s %s: %d batches, %d rows", m.Model, m.Version, m.Batches, m.Rows)
		if !m.Skipped.IsEmpty() {
			line += ", already done: " + m.Skipped.String()
		}
		fmt.Fprintln(out, line)
	}
	if res.Environment != nil {
		g.log.Info("plan applied", "plan", pl.ID, "environment", pl.Environment, "generation", res.Environment.Generation)
	}
	return nil
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

// runEnvironment runs, once, every due interval of every model env serves
// at exec (only the selected models when any are given), and prints a line
// per model that did work.
func (g *globals) runEnvironment(ctx context.Context, b *backend.Backend, projectDir, env string, exec time.Time, selected []string) error {
	e, err := liveEnvironment(ctx, b.Store, env)
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
	res, err := scheduler.Once(ctx, scheduler.Params{
		Env: env, ExecutionTime: exec, Select: selected,
		Store: b.Store, Engine: b.Engine, Parser: parser, ProjectDir: projectDir,
		Now: g.now, Logger: g.log,
	})
	if err != nil {
		return fmt.Errorf("at %s: %w", exec.Format(time.RFC3339), err)
	}
	for _, m := range res.Models {
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
	return nil
}
