package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/gapless-dev/gapless/cadence"
	"github.com/gapless-dev/gapless/dag"
	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/plan"
	runner "github.com/gapless-dev/gapless/run"
	"github.com/gapless-dev/gapless/snapshot"
	"github.com/gapless-dev/gapless/state"
)

// statusRow is one model of `gapless status`; its JSON form is stable.
type statusRow struct {
	Name         string   `json:"name"`
	Version      string   `json:"version"`
	Kind         string   `json:"kind"`
	Cron         string   `json:"cron"`
	IntervalUnit string   `json:"interval_unit"`
	Covered      []string `json:"covered"`
	// Frontier is the end of the covered range; "" when nothing is covered.
	Frontier string `json:"frontier,omitempty"`
	// Missing lists the gaps: intervals due at the execution time and not
	// computed (cadence.ModelGaps).
	Missing        []string `json:"missing"`
	MissingBuckets int      `json:"missing_buckets"`
	// OpenDebt lists the model's open freshness debt: trailing gaps a
	// promotion policy accepted, not repaired yet (see `gapless debt`).
	OpenDebt []openDebtRow `json:"open_debt"`
	// LastRunAt is when intervals were last added to the model's version
	// (by a run, or the backfill of an apply), and LastRunRange the span of
	// what that write added; both absent when the version was never
	// written.
	LastRunAt    time.Time `json:"last_run_at,omitzero"`
	LastRunRange string    `json:"last_run_range,omitempty"`
	// WaitingOn says why missing intervals are not computed when a source
	// the model reads has not published them ("waiting on raw.events (not
	// landed yet)"); absent otherwise.
	WaitingOn []string `json:"waiting_on,omitempty"`

	// covered is Covered as a set, for the compact table.
	covered interval.Set
}

// openDebtRow is one open debt of a model in `gapless status --json`.
type openDebtRow struct {
	Range      string    `json:"range"`
	AcceptedAt time.Time `json:"accepted_at"`
	// AgeSeconds is how long it has been open at the execution time.
	AgeSeconds int64  `json:"age_seconds"`
	PlanID     string `json:"plan_id"`
}

// statusReport is `gapless status --json`.
type statusReport struct {
	Environment   string    `json:"environment"`
	Generation    int64     `json:"generation"`
	PlanID        string    `json:"plan_id"`
	PromotedAt    time.Time `json:"promoted_at"`
	ExecutionTime time.Time `json:"execution_time"`
	// OpenDebts counts the environment's open freshness debts.
	OpenDebts int         `json:"open_debts"`
	Models    []statusRow `json:"models"`
}

func newStatusCmd(g *globals) *cobra.Command {
	var asJSON, wide, all bool
	cmd := &cobra.Command{
		Use:   "status [ENV]",
		Short: "Per model of ENV (default prod): version, covered ranges, gaps, debt and last run (--wide: kind, cron, frontier)",
		Long: `Reads the state store only (the warehouse is not opened). For every model
ENV serves it prints the version, the covered ranges, what is missing
(intervals due at --execution-time that are not computed; "gapless run"
computes them), its open freshness debt with its age (trailing gaps a
promotion policy accepted, which the next run repairs; see "gapless debt")
and its last run: when intervals were last added to the model's version
("-" when never). Times are UTC, to the minute (to the day for daily and
coarser models), so that the table fits 120 columns.

--wide adds the kind, cron and frontier (the end of the covered range),
prints times in full and the missing ranges and the range the last run
wrote; --json has all of it.

Up to 50 models are listed one per line. A larger environment gets a
summary (how many models are up to date, miss intervals, have open debt)
and the first 20 models that miss intervals or have open debt, parents
first; --all lists every model, --json always has every model.`,
		Args: rangeArgs(0, 1),
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			ctx := cmd.Context()
			env, err := envArg(args)
			if err != nil {
				return err
			}
			exec, err := g.execTime()
			if err != nil {
				return err
			}
			_, b, err := g.open(ctx, true)
			if err != nil {
				return err
			}
			defer g.closeBackend(b, &err)
			rep, err := environmentStatus(ctx, b.Store, env, exec)
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(g.env.Stdout, rep)
			}
			printStatusHeader(g.env.Stdout, rep)
			rows, elided := statusListed(g.env.Stdout, rep, all)
			printTable := printStatus
			if wide {
				printTable = printStatusWide
			}
			if err := printTable(g.env.Stdout, rows); err != nil {
				return err
			}
			printWaits(g.env.Stdout, rows)
			if elided {
				printElided(g.env.Stdout, len(rows), len(rep.Models), "models")
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().BoolVar(&all, "all", false, "list every model, however many")
	cmd.Flags().BoolVar(&wide, "wide", false, "add kind, cron, frontier, the missing ranges and the last run's range, with times in full")
	return cmd
}

// environmentStatus reads env, the snapshots it serves, their intervals and
// their last writes (one read each), and computes each model's gaps at exec.
func environmentStatus(ctx context.Context, store state.Store, env string, exec time.Time) (*statusReport, error) {
	e, err := store.GetEnvironment(ctx, env)
	if errors.Is(err, state.ErrNotFound) {
		return nil, fmt.Errorf("environment %s does not exist; create it with: gapless plan %s", env, env)
	}
	if err != nil {
		return nil, fmt.Errorf("reading environment %s: %w", env, err)
	}
	if e.Invalidated {
		return nil, fmt.Errorf("environment %s is invalidated (janitor removes it); recreate it with: gapless plan %s", env, env)
	}
	snaps, err := plan.Served(ctx, store, e)
	if err != nil {
		return nil, err
	}
	keys := make([]state.VersionKey, len(e.Snapshots))
	for i, r := range e.Snapshots {
		keys[i] = r.VersionKey()
		if s := snaps[r.Name]; s != nil && s.Model.Source {
			keys = append(keys, state.SourceKey(r.Name))
		}
	}
	covered, err := store.GetIntervals(ctx, keys)
	if err != nil {
		return nil, fmt.Errorf("reading intervals of %s: %w", env, err)
	}
	last, err := store.LastWrites(ctx, keys)
	if err != nil {
		return nil, fmt.Errorf("reading the last runs of %s: %w", env, err)
	}
	debts, err := store.ListDebts(ctx, state.DebtFilter{Environment: env, OpenOnly: true})
	if err != nil {
		return nil, fmt.Errorf("reading the freshness debt of %s: %w", env, err)
	}
	open := map[string][]openDebtRow{}
	for _, d := range debts {
		open[d.Model] = append(open[d.Model], openDebtRow{Range: d.Range.String(), AcceptedAt: d.AcceptedAt.UTC(),
			AgeSeconds: seconds(debtAge(d, exec)), PlanID: d.PlanID})
	}
	rep := &statusReport{Environment: e.Name, Generation: e.Generation, PlanID: e.PlanID, PromotedAt: e.PromotedAt,
		ExecutionTime: exec, OpenDebts: len(debts), Models: []statusRow{}}
	for _, r := range dependencyOrder(e.Snapshots, snaps) {
		m := snaps[r.Name].Model
		set := covered[r.VersionKey()]
		row := statusRow{Name: r.Name, Version: r.Version, Kind: string(m.Kind), Cron: m.Cron,
			IntervalUnit: string(m.IntervalUnit), Covered: rangeStrings(set), Missing: []string{}, OpenDebt: []openDebtRow{},
			covered: set}
		if o := open[r.Name]; o != nil {
			row.OpenDebt = o
		}
		if w, ok := last[r.VersionKey()]; ok {
			row.LastRunAt, row.LastRunRange = w.At.UTC(), w.Range.String()
		}
		if !set.IsEmpty() {
			row.Frontier = set.Frontier().Format(time.RFC3339)
		}
		gaps, err := cadence.ModelGaps(m, set, exec)
		if err != nil {
			return nil, err
		}
		row.Missing, row.MissingBuckets = rangeStrings(gaps.Missing), gaps.Buckets
		for _, w := range runner.SourceWaits(snaps[r.Name], snaps, covered) {
			if !gaps.Missing.Subtract(w.Covered).IsEmpty() {
				row.WaitingOn = append(row.WaitingOn, w.Reason())
			}
		}
		if m.Source {
			row.Kind = kindSource
		}
		rep.Models = append(rep.Models, row)
	}
	return rep, nil
}

// dependencyOrder sorts refs parents first (by name where the graph does not
// decide), the order the project's commands print models in.
func dependencyOrder(refs []state.SnapshotRef, snaps map[string]*snapshot.Snapshot) []state.SnapshotRef {
	edges := make(map[string][]string, len(refs))
	for _, r := range refs {
		var parents []string
		for _, p := range snaps[r.Name].Parents {
			if _, ok := snaps[p]; ok {
				parents = append(parents, p)
			}
		}
		edges[r.Name] = parents
	}
	g, err := dag.New(edges)
	if err != nil {
		return refs // a served set is acyclic; if not, keep the stored order
	}
	byName := make(map[string]state.SnapshotRef, len(refs))
	for _, r := range refs {
		byName[r.Name] = r
	}
	out := make([]state.SnapshotRef, 0, len(refs))
	for _, n := range g.Order() {
		out = append(out, byName[n])
	}
	return out
}

func rangeStrings(s interval.Set) []string {
	out := []string{}
	for r := range s.All() {
		out = append(out, r.String())
	}
	return out
}

// kindSource is the kind `status` and `models` show for a source (whose
// stand-in is an EXTERNAL model, see project.Project).
const kindSource = "SOURCE"

// printWaits writes, under the table of `status`, why a listed model's
// missing intervals wait on a source.
func printWaits(w io.Writer, rows []statusRow) {
	first := true
	for _, r := range rows {
		if len(r.WaitingOn) == 0 {
			continue
		}
		if first {
			fmt.Fprintln(w)
			first = false
		}
		fmt.Fprintf(w, "%s: %s\n", r.Name, strings.Join(r.WaitingOn, "; "))
	}
}

// printStatusHeader writes the lines above the table of `status`.
func printStatusHeader(w io.Writer, rep *statusReport) {
	fmt.Fprintf(w, "Environment %s: generation %d, plan %s, promoted %s; at %s\n\n", rep.Environment, rep.Generation,
		rep.PlanID, rep.PromotedAt.UTC().Format(time.RFC3339), rep.ExecutionTime.Format(time.RFC3339))
	if rep.OpenDebts > 0 {
		fmt.Fprintf(w, "Freshness debt: %d open (the next `gapless run` repairs it; see `gapless debt %s`)\n\n", rep.OpenDebts, rep.Environment)
	}
}

// needsAttention reports whether a model misses intervals or has open debt.
func (r *statusRow) needsAttention() bool { return r.MissingBuckets > 0 || len(r.OpenDebt) > 0 }

// statusListed returns the rows `status` prints: every model when there
// are at most listLimit or all is set. Otherwise it writes a summary to w
// (how many models are up to date, miss intervals, have open debt) and
// returns the first attentionLimit models that need attention, in the
// report's order (parents first), and elided true: the caller then says,
// under its table, that --all lists the rest (printElided).
func statusListed(w io.Writer, rep *statusReport, all bool) (rows []statusRow, elided bool) {
	if listAll(all, len(rep.Models)) {
		return rep.Models, false
	}
	var missing, indebted, attention int
	for _, r := range rep.Models {
		if r.MissingBuckets > 0 {
			missing++
		}
		if len(r.OpenDebt) > 0 {
			indebted++
		}
		if r.needsAttention() {
			attention++
			if len(rows) < attentionLimit {
				rows = append(rows, r)
			}
		}
	}
	fmt.Fprintf(w, "%d models: %d up to date, %d missing intervals, %d with open debt\n", len(rep.Models),
		len(rep.Models)-attention, missing, indebted)
	if attention > 0 {
		fmt.Fprintf(w, "\nNeeding attention (missing intervals or open debt), %d of %d, parents first:\n\n", len(rows), attention)
	}
	return rows, true
}

// printStatus writes the table of `status`, made to fit 120 columns: per
// model its version, covered ranges, what is missing (a count), open debt
// and when it last ran, times in UTC to the minute (to the day for models
// of daily or coarser units). The rest is in --wide and --json. An empty
// rows writes nothing.
func printStatus(w io.Writer, rows []statusRow) error {
	if len(rows) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MODEL\tVERSION\tCOVERED (UTC)\tMISSING\tDEBT\tLAST RUN (UTC)")
	for _, r := range rows {
		unit := interval.Unit(r.IntervalUnit)
		var covered []string
		for rg := range r.covered.All() {
			covered = append(covered, shortRange(rg, unit))
		}
		missing := "-"
		if r.MissingBuckets > 0 {
			missing = countOf(r.MissingBuckets, unit)
		}
		last := "-"
		if !r.LastRunAt.IsZero() {
			last = r.LastRunAt.UTC().Format(minuteLayout)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Name, r.Version, orDash(strings.Join(covered, ", ")), missing,
			debtCell(r.OpenDebt), last)
	}
	return tw.Flush()
}

// minuteLayout is how the compact status table prints a time.
const minuteLayout = "2006-01-02 15:04"

// shortRange prints r as "[2024-01-01 00:00, 2024-01-02 05:00)", or with
// dates only for a model whose unit is a day or coarser.
func shortRange(r interval.Range, unit interval.Unit) string {
	layout := minuteLayout
	if unit == interval.Day || unit == interval.Month || unit == interval.Year {
		layout = time.DateOnly
	}
	return "[" + r.Start.UTC().Format(layout) + ", " + r.End.UTC().Format(layout) + ")"
}

// countOf is n intervals of unit in words: "1 hour", "5 days",
// "12 five-minute intervals".
func countOf(n int, unit interval.Unit) string {
	word := strings.ReplaceAll(string(unit), "_", "-")
	if unit == interval.FiveMinute {
		word += " interval"
	}
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// printStatusWide writes the table of `status --wide`: every column, times
// in full. An empty rows writes nothing.
func printStatusWide(w io.Writer, rows []statusRow) error {
	if len(rows) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MODEL\tVERSION\tKIND\tCRON\tCOVERED\tFRONTIER\tMISSING\tDEBT\tLAST RUN")
	for _, r := range rows {
		missing := "-"
		if len(r.Missing) > 0 {
			missing = fmt.Sprintf("%s in %s", plural(int64(r.MissingBuckets), r.IntervalUnit+" interval", r.IntervalUnit+" intervals"), strings.Join(r.Missing, ", "))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Name, r.Version, r.Kind, r.Cron,
			orDash(strings.Join(r.Covered, ", ")), orDash(r.Frontier), missing, debtCell(r.OpenDebt), lastRunCell(r))
	}
	return tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// debtCell is a model's open debt in `status`: how many, and the oldest's
// age ("1 open, 1h old"); "-" when none.
func debtCell(open []openDebtRow) string {
	if len(open) == 0 {
		return "-"
	}
	var oldest int64
	for _, d := range open {
		oldest = max(oldest, d.AgeSeconds)
	}
	return fmt.Sprintf("%d open, %s old", len(open), shortDuration(time.Duration(oldest)*time.Second))
}

// lastRunCell is a model's last run in `status`: when, then the range it
// wrote ("2024-01-02T05:00:00Z [2024-01-02T04:00:00Z, 2024-01-02T05:00:00Z)");
// "-" when never.
func lastRunCell(r statusRow) string {
	if r.LastRunAt.IsZero() {
		return "-"
	}
	return r.LastRunAt.Format(time.RFC3339) + " " + r.LastRunRange
}
