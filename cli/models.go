package cli

import (
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/gapless-dev/gapless/cadence"
	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/model"
	"github.com/gapless-dev/gapless/project"
)

// modelRow is one line of `gapless models`; its JSON form is stable.
type modelRow struct {
	Name         string   `json:"name"`
	Kind         string   `json:"kind"`
	Cron         string   `json:"cron"`
	IntervalUnit string   `json:"interval_unit"`
	Version      string   `json:"version"`
	Parents      []string `json:"parents"`
	Start        string   `json:"start,omitempty"`
	// Due lists the intervals that are due at the execution time when
	// nothing has been computed yet (time-ranged kinds only).
	Due        []string `json:"due,omitempty"`
	DueBuckets int      `json:"due_buckets"`
}

func newModelsCmd(g *globals) *cobra.Command {
	var asJSON, all bool
	cmd := &cobra.Command{
		Use:   "models",
		Short: "Load the project and list its models in dependency order, with versions and due intervals",
		Long: `Loads every model file, parses its SQL, resolves dependencies and computes
fingerprints and versions. Prints the models in topological order with the
intervals that would be due at --execution-time on an empty state. Only
the queries that changed since the last load are parsed again (the parse
cache in .gapless/cache, which can always be deleted).

Up to 50 models are listed one per line; a larger project gets a summary
(counts by kind and interval unit) and --all lists every model. --json
always has every model.

Any problem in the project (syntax, unknown table, cycle, bad cron) is
reported with its file, line and column, and the command exits 1.`,
		Args: rangeArgs(0, 0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			exec, err := g.execTime()
			if err != nil {
				return err
			}
			pr, _, err := g.openProject(cmd.Context())
			if err != nil {
				return err
			}
			rows, err := modelRows(pr, exec)
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(g.env.Stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(rows)
			}
			return printModelRows(g, rows, exec, all)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().BoolVar(&all, "all", false, "list every model, however many")
	return cmd
}

func modelRows(pr *project.Project, exec time.Time) ([]modelRow, error) {
	var rows []modelRow
	for _, name := range pr.Graph.Order() {
		m := pr.Models[name]
		s := pr.Snapshots[name]
		r := modelRow{
			Name: name, Kind: string(m.Kind), Cron: m.Cron, IntervalUnit: string(m.IntervalUnit),
			Version: s.Version, Parents: pr.Graph.Parents(name),
		}
		if !m.Start.IsZero() {
			r.Start = m.Start.Format(time.RFC3339)
		}
		if m.Source {
			r.Kind, r.Cron, r.IntervalUnit = kindSource, "-", "-"
		}
		if m.Kind == model.KindIncrementalByTimeRange {
			// What an empty state would miss; nothing without a start.
			gaps, err := cadence.ModelGaps(m, interval.Set{}, exec)
			if err != nil {
				return nil, err
			}
			for rg := range gaps.Missing.All() {
				r.Due = append(r.Due, rg.String())
			}
			r.DueBuckets = gaps.Buckets
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// printModelRows writes `models`: every row when there are at most
// listLimit of them or all is set, a summary by kind and unit otherwise.
func printModelRows(g *globals, rows []modelRow, exec time.Time, all bool) error {
	w := g.env.Stdout
	fmt.Fprintf(w, "%d models, at %s\n\n", len(rows), exec.Format(time.RFC3339))
	if !listAll(all, len(rows)) {
		kinds, units := map[string]int{}, map[string]int{}
		for _, r := range rows {
			kinds[r.Kind]++
			units[r.IntervalUnit]++
		}
		fmt.Fprintf(w, "By kind: %s\nBy interval unit: %s\n", countLine(kinds), countLine(units))
		printElided(w, 0, len(rows), "models")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MODEL\tKIND\tCRON\tUNIT\tVERSION\tDEPENDS ON\tDUE (empty state)")
	for _, r := range rows {
		due := "-"
		if r.Kind == string(model.KindIncrementalByTimeRange) {
			due = fmt.Sprintf("%s in %s", plural(int64(r.DueBuckets), r.IntervalUnit+" interval", r.IntervalUnit+" intervals"), strings.Join(r.Due, ", "))
		}
		deps := strings.Join(r.Parents, ", ")
		if deps == "" {
			deps = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Name, r.Kind, r.Cron, r.IntervalUnit, r.Version, deps, due)
	}
	return tw.Flush()
}
