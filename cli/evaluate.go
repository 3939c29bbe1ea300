package cli

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/model"
	"github.com/gapless-dev/gapless/plan"
	"github.com/gapless-dev/gapless/warehouse"
)

// DefaultEvaluateLimit is how many rows evaluate prints unless told
// otherwise (SQLMesh's default maximum for evaluate).
const DefaultEvaluateLimit = 1000

// evaluateResult is `gapless evaluate --json`; its field names are stable.
type evaluateResult struct {
	Model   string   `json:"model"`
	Start   string   `json:"start"`
	End     string   `json:"end"`
	SQL     string   `json:"sql"`
	Limit   int      `json:"limit"`
	Columns []string `json:"columns"`
	Types   []string `json:"types,omitempty"`
	Rows    [][]any  `json:"rows"`
}

func newEvaluateCmd(g *globals) *cobra.Command {
	var start, end, env string
	var limit int
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "evaluate MODEL [--start T --end T]",
		Short: "Compute MODEL's rows for [start, end) and print them, writing nothing",
		Long: `Renders MODEL's query for [--start, --end) exactly as "gapless render" does
(macros substituted; every model it reads pointed at the physical table of
the version ENV, default prod, would use after a plan of the current
project), runs it on the warehouse read-only and prints up to --limit rows
(default 1000). Nothing is written: no table, no view, no interval, no
state. Without --start and --end it evaluates the newest interval due at
--execution-time.

The rows are those the query returns: a backfill of an incremental model
by time range would keep only those whose time column falls in the
interval. Parents must have been built (by a plan of ENV) for their
tables to exist.`,
		Args: rangeArgs(1, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkEnvName(env); err != nil {
				return err
			}
			if limit < 1 {
				return usagef("--limit must be 1 or more, not %d", limit)
			}
			exec, err := g.execTime()
			if err != nil {
				return err
			}
			r, err := rangeFlags(start, end)
			if err != nil {
				return err
			}
			res, err := g.evaluate(cmd.Context(), args[0], env, r, exec, limit)
			if err != nil {
				return err
			}
			showDates(&warehouse.Result{Columns: res.Columns, Types: res.Types, Rows: res.Rows})
			if asJSON {
				return writeJSON(g.env.Stdout, res)
			}
			return printResult(g.env.Stdout, &warehouse.Result{Columns: res.Columns, Types: res.Types, Rows: res.Rows})
		},
	}
	cmd.Flags().StringVar(&start, "start", "", "interval start (inclusive)")
	cmd.Flags().StringVar(&end, "end", "", "interval end (exclusive)")
	cmd.Flags().StringVar(&env, "environment", plan.Prod, "the environment whose tables the query reads")
	cmd.Flags().IntVar(&limit, "limit", DefaultEvaluateLimit, "print at most this many rows")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON (with the rendered SQL)")
	return cmd
}

// rangeFlags is [--start, --end), or the zero range when neither is given.
func rangeFlags(start, end string) (interval.Range, error) {
	if (start == "") != (end == "") {
		return interval.Range{}, usagef("give both --start and --end, or neither")
	}
	if start == "" {
		return interval.Range{}, nil
	}
	s, err := model.ParseTime(start)
	if err != nil {
		return interval.Range{}, usagef("--start: %w", err)
	}
	e, err := model.ParseTime(end)
	if err != nil {
		return interval.Range{}, usagef("--end: %w", err)
	}
	if !s.Before(e) {
		return interval.Range{}, usagef("--start %s is not before --end %s", start, end)
	}
	return interval.NewRange(s, e), nil
}

// evaluate renders name over r (its newest due interval when r is zero)
// as g.render does and runs it with Engine.ReadOnlyQuery, cut at limit
// rows: the warehouse refuses anything but a read, and nothing else is
// touched (the plan render builds is never recorded).
func (g *globals) evaluate(ctx context.Context, name, env string, r interval.Range, exec time.Time, limit int) (_ *evaluateResult, err error) {
	if r.Empty() {
		pr, _, err := g.openProject(ctx)
		if err != nil {
			return nil, err
		}
		m, ok := pr.Models[name]
		if !ok {
			return nil, fmt.Errorf("model %s: no such model in %s%s", name, pr.Dir, didYouMean(name, modelNames(pr)))
		}
		if r, err = defaultRange(m, exec); err != nil {
			return nil, err
		}
	}
	sql, err := g.render(ctx, name, env, r, exec)
	if err != nil {
		return nil, err
	}
	_, b, err := g.open(ctx, false)
	if err != nil {
		return nil, err
	}
	defer g.closeBackend(b, &err)
	body := strings.TrimRight(strings.TrimSpace(sql), ";")
	q := "SELECT * FROM (\n" + body + "\n) AS " + b.Engine.QuoteIdent("gapless_evaluate") + " LIMIT " + strconv.Itoa(limit)
	res, err := b.Engine.ReadOnlyQuery(ctx, q)
	if errors.Is(err, warehouse.ErrNotARead) {
		return nil, fmt.Errorf("evaluate %s: the query is not a read, so it was not run: %w", name, err)
	}
	if err != nil {
		return nil, fmt.Errorf("evaluate %s over %s: %w\n  (the query reads the tables environment %s would use after a plan; "+
			"a parent that was never built has no table yet: deploy it with gapless plan %s)", name, r, err, env, env)
	}
	out := &evaluateResult{Model: name, Start: r.Start.Format(time.RFC3339), End: r.End.Format(time.RFC3339),
		SQL: sql, Limit: limit, Columns: res.Columns, Types: res.Types, Rows: res.Rows}
	if out.Columns == nil {
		out.Columns = []string{}
	}
	if out.Rows == nil {
		out.Rows = [][]any{}
	}
	return out, nil
}
