package cli

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/gapless-dev/gapless/state"
)

// Debt statuses, as `gapless debt` reports them.
const (
	debtOpen       = "open"
	debtRepaired   = "repaired"
	debtSuperseded = "superseded"
)

// debtRange is a debt's half-open range in `debt --json`.
type debtRange struct {
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
}

// debtRow is one freshness debt in `gapless debt --json`; its field names
// are stable. Fields that do not apply to the debt's status are null.
type debtRow struct {
	ID          int64     `json:"id"`
	Environment string    `json:"environment"`
	Model       string    `json:"model"`
	Version     string    `json:"version"`
	Range       debtRange `json:"range"`
	PlanID      string    `json:"plan_id"`
	Policy      string    `json:"policy"`
	// Bound is the policy's bound in scheduler advances; Advances is what
	// was counted when the gap was accepted.
	Bound        int        `json:"bound"`
	Advances     int        `json:"advances"`
	AcceptedAt   time.Time  `json:"accepted_at"`
	RepairedAt   *time.Time `json:"repaired_at"`
	SupersededAt *time.Time `json:"superseded_at"`
	// Status is open, repaired or superseded (a later promotion stopped
	// serving the version before it was repaired).
	Status string `json:"status"`
	// AgeSeconds is how long an open debt has been open at the execution
	// time.
	AgeSeconds *int64 `json:"age_seconds"`
	// RepairLatencySeconds is, for a repaired debt, from acceptance to
	// repair.
	RepairLatencySeconds *int64 `json:"repair_latency_seconds"`
}

// debtReport is `gapless debt --json`.
type debtReport struct {
	// Environment is the environment listed; "" with --all.
	Environment   string    `json:"environment"`
	ExecutionTime time.Time `json:"execution_time"`
	Debts         []debtRow `json:"debts"`
	// Open counts the open debts.
	Open int `json:"open"`
}

func newDebtCmd(g *globals) *cobra.Command {
	var asJSON, all bool
	cmd := &cobra.Command{
		Use:   "debt [ENV]",
		Short: "List the freshness debt of ENV (default prod): open, repaired and superseded",
		Long: `Freshness debt is a trailing gap that the trailing-gap promotion policy
accepted: the environment was promoted while the new version lacked the
last intervals the scheduler had added to the old one. The gap stays
missing in interval state, so the next "gapless run" fills it, and the
debt is then stamped repaired.

For every debt of ENV (or of every environment with --all) it prints the
model, the range, the plan that accepted it, the policy with the advances
counted against its bound, when it was accepted, and when it was repaired
with the repair latency, or how long it has been open at --execution-time.
A debt is superseded when a later promotion stopped serving its version
before it was repaired. Reads the state store only.`,
		Args: rangeArgs(0, 1),
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			ctx := cmd.Context()
			if all && len(args) > 0 {
				return usagef("--all lists every environment; it cannot be combined with ENV %q", args[0])
			}
			env := ""
			if !all {
				if env, err = envArg(args); err != nil {
					return err
				}
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
			debts, err := b.Store.ListDebts(ctx, state.DebtFilter{Environment: env})
			if err != nil {
				return fmt.Errorf("reading freshness debt: %w", err)
			}
			rep := debtReportOf(env, exec, debts)
			if asJSON {
				return writeJSON(g.env.Stdout, rep)
			}
			return printDebt(g.env.Stdout, rep)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().BoolVar(&all, "all", false, "list the debt of every environment")
	return cmd
}

// debtReportOf describes debts as seen at exec.
func debtReportOf(env string, exec time.Time, debts []state.Debt) *debtReport {
	rep := &debtReport{Environment: env, ExecutionTime: exec, Debts: []debtRow{}}
	for _, d := range debts {
		row := debtRow{ID: d.ID, Environment: d.Environment, Model: d.Model, Version: d.Version,
			Range:  debtRange{Start: d.Range.Start.UTC(), End: d.Range.End.UTC()},
			PlanID: d.PlanID, Policy: d.Policy, Bound: d.Bound, Advances: d.Advances,
			AcceptedAt: d.AcceptedAt.UTC(), Status: debtStatus(d)}
		if !d.RepairedAt.IsZero() {
			row.RepairedAt = ptr(d.RepairedAt.UTC())
		}
		if !d.SupersededAt.IsZero() {
			row.SupersededAt = ptr(d.SupersededAt.UTC())
		}
		switch row.Status {
		case debtOpen:
			rep.Open++
			row.AgeSeconds = ptr(seconds(debtAge(d, exec)))
		case debtRepaired:
			row.RepairLatencySeconds = ptr(seconds(d.RepairedAt.Sub(d.AcceptedAt)))
		}
		rep.Debts = append(rep.Debts, row)
	}
	return rep
}

// debtStatus: repaired once its range was filled; superseded when a later
// promotion retired its version first; open otherwise.
func debtStatus(d state.Debt) string {
	switch {
	case !d.RepairedAt.IsZero():
		return debtRepaired
	case !d.SupersededAt.IsZero():
		return debtSuperseded
	}
	return debtOpen
}

// debtAge is how long d has been open at exec; never negative (a debt
// accepted after the execution time is new).
func debtAge(d state.Debt, exec time.Time) time.Duration {
	return max(exec.Sub(d.AcceptedAt), 0)
}

func printDebt(w io.Writer, rep *debtReport) error {
	where := "environment " + rep.Environment
	if rep.Environment == "" {
		where = "every environment"
	}
	if len(rep.Debts) == 0 {
		fmt.Fprintf(w, "No freshness debt in %s.\n", where)
		return nil
	}
	counts := map[string]int{}
	for _, d := range rep.Debts {
		counts[d.Status]++
	}
	fmt.Fprintf(w, "Freshness debt in %s at %s: %d open, %d repaired, %d superseded\n\n", where,
		rep.ExecutionTime.Format(time.RFC3339), counts[debtOpen], counts[debtRepaired], counts[debtSuperseded])
	all := rep.Environment == ""
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	head := "MODEL\tRANGE\tPLAN\tPOLICY\tADVANCES/BOUND\tACCEPTED\tREPAIRED\tREPAIR LATENCY"
	if all {
		head = "ENVIRONMENT\t" + head
	}
	fmt.Fprintln(tw, head)
	for _, d := range rep.Debts {
		repaired, latency := "", "-"
		switch d.Status {
		case debtOpen:
			repaired = "open, age " + shortDuration(time.Duration(*d.AgeSeconds)*time.Second)
		case debtRepaired:
			repaired = d.RepairedAt.Format(time.RFC3339)
			latency = shortDuration(time.Duration(*d.RepairLatencySeconds) * time.Second)
		case debtSuperseded:
			repaired = "superseded " + d.SupersededAt.Format(time.RFC3339)
		}
		cols := []string{d.Model, "[" + d.Range.Start.Format(time.RFC3339) + ", " + d.Range.End.Format(time.RFC3339) + ")",
			d.PlanID, d.Policy, fmt.Sprintf("%d/%d", d.Advances, d.Bound), d.AcceptedAt.Format(time.RFC3339), repaired, latency}
		if all {
			cols = append([]string{d.Environment}, cols...)
		}
		fmt.Fprintln(tw, strings.Join(cols, "\t"))
	}
	return tw.Flush()
}

// shortDuration is d to the second without zero units: "1h5m", "1h",
// "42s", "0s".
func shortDuration(d time.Duration) string {
	d = d.Round(time.Second)
	if d <= 0 {
		return "0s"
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

func seconds(d time.Duration) int64 { return int64(d / time.Second) }

func ptr[T any](v T) *T { return &v }
