package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/gapless-dev/gapless/tablediff"
	"github.com/gapless-dev/gapless/warehouse"
)

func newTableDiffCmd(g *globals) *cobra.Command {
	var (
		on, skip     []string
		where        string
		limit        int
		decimals     int
		showSample   bool
		asJSON       bool
		skipKeyCheck bool
	)
	cmd := &cobra.Command{
		Use:   "table_diff ENV1:ENV2 MODEL | SCHEMA.TABLE:SCHEMA.TABLE --on COL",
		Short: "Compare MODEL's table as two environments serve it: schema, row counts, column match rates, sample",
		Long: `Compares MODEL as environment ENV1 serves it (the source) with ENV2's (the
target), reading each through the environment's view (schema.table in prod,
schema__ENV.table elsewhere). Nothing is written.

The schema diff lists the columns ENV2 added, removed and retyped. The row
diff joins the rows on the model's grain (grain in its MODEL header), or on
the columns given with --on, and counts: rows in both that match in every
column (FULL MATCH), rows in both that differ somewhere (PARTIAL MATCH), and
rows only in ENV1 or only in ENV2. Percentages are of both tables' rows
together, as SQLMesh counts them. Then each column's match rate over the
joined rows (NULL matches NULL; floating and decimal columns are compared
after rounding to --decimals places) and, with --show-sample, up to --limit
differing joined rows and rows of each side alone, ordered by the keys.

Keys must identify one row on each side: keys that repeat are refused, with
how many values repeat (--skip-grain-check compares anyway). --where
filters both sides before the join (SQL in the warehouse's dialect);
--skip-columns leaves columns out of both diffs.

Without MODEL, the first argument names two tables or views of the
warehouse, SCHEMA.TABLE:SCHEMA.TABLE, compared on the --on columns.`,
		Args: rangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			ctx := cmd.Context()
			left, right, ok := strings.Cut(args[0], ":")
			if !ok || left == "" || right == "" || strings.Contains(right, ":") {
				return usagef("table_diff: the first argument is two environments as ENV1:ENV2 (e.g. prod:dev), "+
					"or two tables as SCHEMA.TABLE:SCHEMA.TABLE without MODEL, not %q", args[0])
			}
			if limit < 0 {
				return usagef("--limit must be 0 or more, not %d", limit)
			}
			if decimals < 0 {
				return usagef("--decimals must be 0 or more, not %d", decimals)
			}
			var tables []warehouse.Table
			if len(args) == 1 {
				for _, name := range []string{left, right} {
					schema, table, ok := strings.Cut(name, ".")
					if !ok || schema == "" || table == "" {
						return usagef("table_diff: %s: without MODEL, compare two tables named SCHEMA.TABLE:SCHEMA.TABLE", name)
					}
					tables = append(tables, warehouse.Table{Schema: schema, Name: table})
				}
				if len(on) == 0 {
					return usagef("table_diff %s: comparing two tables needs the columns that identify a row: give --on", args[0])
				}
			} else {
				for _, env := range []string{left, right} {
					if err := checkEnvName(env); err != nil {
						return err
					}
				}
			}
			_, b, err := g.open(ctx, false)
			if err != nil {
				return err
			}
			defer g.closeBackend(b, &err)
			var res *tablediff.Result
			name := ""
			if tables != nil {
				res, err = tablediff.Diff(ctx, tablediff.Params{
					Engine: b.Engine, Source: tablediff.Side{Name: "source", Table: tables[0]}, Target: tablediff.Side{Name: "target", Table: tables[1]},
					Keys: on, Where: where, SkipColumns: skip, Limit: limit, Decimals: decimals,
					Sample: showSample || asJSON, SkipKeyCheck: skipKeyCheck,
				})
			} else {
				name = args[1]
				res, err = tablediff.Environments(ctx, tablediff.EnvironmentParams{
					Store: b.Store, Engine: b.Engine, Model: name, Source: left, Target: right,
					On: on, Where: where, SkipColumns: skip, Limit: limit, Decimals: decimals,
					Sample: showSample || asJSON, SkipKeyCheck: skipKeyCheck,
				})
			}
			if errors.Is(err, tablediff.ErrNoKeys) {
				return &UsageError{Err: fmt.Errorf("table_diff: %w", err)}
			}
			if err != nil {
				return fmt.Errorf("table_diff %s: %w", strings.Join(args, " "), err)
			}
			if asJSON {
				if res.Rows.Sample != nil {
					for _, r := range []*warehouse.Result{&res.Rows.Sample.Differing, &res.Rows.Sample.SourceOnly, &res.Rows.Sample.TargetOnly} {
						showDates(r)
					}
				}
				return writeJSON(g.env.Stdout, struct {
					Model string `json:"model,omitempty"`
					*tablediff.Result
				}{name, res})
			}
			return printTableDiff(g.env.Stdout, name, res)
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&on, "on", nil, "key columns to join the rows on (default: the model's grain); repeat or separate with commas")
	f.StringVar(&where, "where", "", "a SQL condition that filters both sides before the join")
	f.IntVar(&limit, "limit", tablediff.DefaultLimit, "sample rows shown per part")
	f.BoolVar(&showSample, "show-sample", false, "show sample rows: differing joined rows, and rows of each side alone")
	f.StringSliceVar(&skip, "skip-columns", nil, "columns left out of the comparison; repeat or separate with commas")
	f.IntVar(&decimals, "decimals", tablediff.DefaultDecimals, "decimal places floating and decimal values are rounded to before they are compared")
	f.BoolVar(&skipKeyCheck, "skip-grain-check", false, "do not check that the keys are unique on each side (counts are then of joined pairs)")
	f.BoolVar(&asJSON, "json", false, "print JSON (with the sample)")
	return cmd
}

// printTableDiff writes the diff as SQLMesh lays it out: the schema diff
// as a tree, the row counts, the column match rates, and the sample. name
// is the model's, "" when two tables were compared.
func printTableDiff(w io.Writer, name string, res *tablediff.Result) error {
	src, tgt := res.Source.Name, res.Target.Name
	if name != "" {
		fmt.Fprintf(w, "Schema Diff Between '%s' and '%s' environments for model '%s':\n", strings.ToUpper(src), strings.ToUpper(tgt), name)
	} else {
		fmt.Fprintf(w, "Schema Diff Between '%s' (%s) and '%s' (%s):\n", strings.ToUpper(src), res.Source.Table, strings.ToUpper(tgt), res.Target.Table)
	}
	s := res.Schema
	if s.Match() {
		fmt.Fprintln(w, "└── Schemas match")
	} else {
		type branch struct {
			title string
			lines []string
		}
		var bs []branch
		add := func(title string, lines []string) {
			if len(lines) > 0 {
				bs = append(bs, branch{title, lines})
			}
		}
		var lines []string
		for _, c := range s.Added {
			lines = append(lines, fmt.Sprintf("%s (%s)", c.Name, c.Type))
		}
		add("Added Columns:", lines)
		lines = nil
		for _, c := range s.Removed {
			lines = append(lines, fmt.Sprintf("%s (%s)", c.Name, c.Type))
		}
		add("Removed Columns:", lines)
		lines = nil
		for _, c := range s.Modified {
			lines = append(lines, fmt.Sprintf("%s (%s -> %s)", c.Name, c.SourceType, c.TargetType))
		}
		add("Modified Columns:", lines)
		for i, b := range bs {
			last := i == len(bs)-1
			fmt.Fprintln(w, treeMark(last)+" "+b.title)
			indent := "│   "
			if last {
				indent = "    "
			}
			for j, l := range b.lines {
				fmt.Fprintln(w, indent+treeMark(j == len(b.lines)-1)+" "+l)
			}
		}
	}
	r := res.Rows
	fmt.Fprintf(w, "\nRow Counts (joined on %s):\n", strings.Join(r.Keys, ", "))
	fmt.Fprintf(w, "├──  FULL MATCH: %s (%.2f%%)\n", plural(r.FullMatch, "row", "rows"), r.Pct(2*r.FullMatch))
	fmt.Fprintf(w, "├──  PARTIAL MATCH: %s (%.2f%%)\n", plural(r.PartialMatch, "row", "rows"), r.Pct(2*r.PartialMatch))
	fmt.Fprintf(w, "├──  %s ONLY: %s (%.2f%%)\n", strings.ToUpper(src), plural(r.SourceOnly, "row", "rows"), r.Pct(r.SourceOnly))
	fmt.Fprintf(w, "└──  %s ONLY: %s (%.2f%%)\n", strings.ToUpper(tgt), plural(r.TargetOnly, "row", "rows"), r.Pct(r.TargetOnly))

	fmt.Fprintln(w, "\nCOMMON ROWS column comparison stats:")
	if len(r.Columns) == 0 {
		fmt.Fprintln(w, "  (no column to compare besides the keys)")
	} else {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "column\tpct_match\tmatched\tcompared")
		for _, c := range r.Columns {
			fmt.Fprintf(tw, "%s\t%.1f\t%d\t%d\n", c.Name, c.MatchPct, c.Matched, c.Compared)
		}
		if err := tw.Flush(); err != nil {
			return fmt.Errorf("writing the column stats: %w", err)
		}
	}
	if r.Sample == nil {
		return nil
	}
	parts := []struct {
		title string
		res   *warehouse.Result
	}{
		{"COMMON ROWS sample data differences:", &r.Sample.Differing},
		{strings.ToUpper(src) + " ONLY sample rows:", &r.Sample.SourceOnly},
		{strings.ToUpper(tgt) + " ONLY sample rows:", &r.Sample.TargetOnly},
	}
	for _, p := range parts {
		fmt.Fprintln(w, "\n"+p.title)
		if len(p.res.Rows) == 0 {
			fmt.Fprintln(w, "  (none)")
			continue
		}
		showDates(p.res)
		if err := printResult(w, p.res); err != nil {
			return err
		}
	}
	return nil
}

func treeMark(last bool) string {
	if last {
		return "└──"
	}
	return "├──"
}
