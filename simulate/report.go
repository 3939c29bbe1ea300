package simulate

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"text/tabwriter"
	"time"
)

// Report is one simulation's outcome: its parameters and one result per
// policy, in the order simulated. Its JSON field names are stable, and it
// holds nothing from the wall clock: the same Params give byte-identical
// JSON.
type Report struct {
	Params   ParamsReport   `json:"params"`
	Policies []PolicyResult `json:"policies"`
}

// ParamsReport is Params as reported (durations as Go duration strings).
type ParamsReport struct {
	Seed                    int64     `json:"seed"`
	Deploys                 int       `json:"deploys"`
	Cadence                 string    `json:"cadence"`
	Jitter                  string    `json:"jitter"`
	BackfillDist            string    `json:"backfill_dist"`
	BackfillMean            string    `json:"backfill_mean"`
	BackfillStddev          string    `json:"backfill_stddev"`
	DeployGap               string    `json:"deploy_gap"`
	DAG                     string    `json:"dag"`
	Models                  int       `json:"models"`
	Unit                    string    `json:"unit"`
	History                 string    `json:"history"`
	Start                   time.Time `json:"start"`
	MaxTrailingGapIntervals int       `json:"max_trailing_gap_intervals"`
	MaxAttempts             int       `json:"max_attempts"`
	LockHold                string    `json:"lock_hold"`
}

func paramsReport(p Params, models int) ParamsReport {
	return ParamsReport{Seed: p.Seed, Deploys: p.Deploys, Cadence: p.Cadence.String(), Jitter: p.Jitter.String(),
		BackfillDist: p.BackfillDist, BackfillMean: p.BackfillMean.String(), BackfillStddev: p.BackfillStddev.String(),
		DeployGap: p.DeployGap.String(), DAG: p.DAG, Models: models, Unit: p.Unit, History: p.History.String(),
		Start: p.Start.UTC(), MaxTrailingGapIntervals: p.MaxTrailingGapIntervals, MaxAttempts: p.MaxAttempts,
		LockHold: p.LockHold.String()}
}

// PolicyResult is what one policy did over the scenario. See the package
// documentation for the exact definition of every measure.
type PolicyResult struct {
	// Policy is the policy with its bound, e.g. "trailing-gap(1)".
	Policy   string `json:"policy"`
	Deploys  int    `json:"deploys"`
	Promoted int    `json:"promoted"`
	// SuccessRate is Promoted / Deploys.
	SuccessRate float64 `json:"success_rate"`
	// Failures counts the failed deploys by the rejection's reason code.
	Failures map[string]int `json:"failures"`
	Debt     DebtStats      `json:"debt"`
	// ExtraComputeIntervals is what deploys computed beyond their plans.
	ExtraComputeIntervals int `json:"extra_compute_intervals"`
	// WastedIntervals is what deploys that did not promote computed.
	WastedIntervals int           `json:"wasted_intervals"`
	Deferred        DeferredStats `json:"deferred"`
	// SchedulerRuns counts scheduler ticks (run.Once calls);
	// SchedulerIntervals the intervals they computed.
	SchedulerRuns      int `json:"scheduler_runs"`
	SchedulerIntervals int `json:"scheduler_intervals"`
	// DeployIntervals is what deploys computed: their plans' backfills
	// plus the extra compute.
	DeployIntervals int `json:"deploy_intervals"`
	// TotalIntervals is SchedulerIntervals + DeployIntervals.
	TotalIntervals int `json:"total_intervals"`
	// DeployOutcomes has one entry per deploy, in order.
	DeployOutcomes []DeployOutcome `json:"deploy_outcomes"`
}

// DebtStats describes the freshness debt policies accepted.
type DebtStats struct {
	// Count is the number of debts a promotion accepted (one per model
	// and gap; a debt carried to a later version counts once).
	Count int `json:"count"`
	// MeanIntervals and MaxIntervals are the debts' sizes in the models'
	// interval unit; MeanMinutes and MaxMinutes the same in minutes.
	MeanIntervals float64 `json:"mean_intervals"`
	MaxIntervals  int     `json:"max_intervals"`
	MeanMinutes   float64 `json:"mean_minutes"`
	MaxMinutes    float64 `json:"max_minutes"`
	// MaxAdvances is the most scheduler advances a debt counted.
	MaxAdvances int `json:"max_advances"`
	// RepairLatencyMeanMinutes and RepairLatencyMaxMinutes are how long
	// the repaired debts stayed open (repaired_at - accepted_at, following
	// carried debts to their repair).
	RepairLatencyMeanMinutes float64 `json:"repair_latency_mean_minutes"`
	RepairLatencyMaxMinutes  float64 `json:"repair_latency_max_minutes"`
	// OpenAtEnd counts debts still open when the simulation ended.
	OpenAtEnd int `json:"open_at_end"`
	// Debts lists every debt, in acceptance order.
	Debts []DebtRecord `json:"debts"`
}

// DebtRecord is one accepted debt.
type DebtRecord struct {
	Model      string    `json:"model"`
	PlanID     string    `json:"plan_id"`
	Start      time.Time `json:"start"`
	End        time.Time `json:"end"`
	Intervals  int       `json:"intervals"`
	Advances   int       `json:"advances"`
	Bound      int       `json:"bound"`
	AcceptedAt time.Time `json:"accepted_at"`
	// RepairedAt is zero (omitted) while open.
	RepairedAt time.Time `json:"repaired_at,omitzero"`
}

// DeferredStats describes scheduled work that version leases deferred.
type DeferredStats struct {
	// Intervals counts the distinct (model, interval) pairs some tick
	// deferred (leased, or waiting behind a leased parent); Ticks counts deferrals (a pair deferred by two ticks
	// counts twice).
	Intervals int `json:"intervals"`
	Ticks     int `json:"ticks"`
	// TotalMinutes sums, over the deferred pairs, the time from the first
	// tick that deferred the interval to the scheduler run that computed
	// it; MeanMinutes and MaxMinutes are its mean and maximum.
	TotalMinutes float64 `json:"total_minutes"`
	MeanMinutes  float64 `json:"mean_minutes"`
	MaxMinutes   float64 `json:"max_minutes"`
	// Unresolved counts deferred pairs no scheduler run computed before
	// the end.
	Unresolved int `json:"unresolved"`
}

// DeployOutcome is what happened to one deploy.
type DeployOutcome struct {
	PlanID string `json:"plan_id"`
	// Model is the model the deploy edited.
	Model string `json:"model"`
	// Start is the plan's execution time; End is when the apply returned.
	Start           time.Time `json:"start"`
	End             time.Time `json:"end"`
	BackfillMinutes float64   `json:"backfill_minutes"`
	// TicksDuringBackfill counts scheduler ticks in [start, start +
	// backfill): each advances the incumbents (seed 000's race).
	TicksDuringBackfill int `json:"ticks_during_backfill"`
	// TicksDuringExtra counts ticks during the catch-up rounds' and
	// replans' work; TicksDuringLock ticks during the lock policy's hold.
	TicksDuringExtra int  `json:"ticks_during_extra"`
	TicksDuringLock  int  `json:"ticks_during_lock"`
	Promoted         bool `json:"promoted"`
	// Reason is the rejection's reason code when the deploy failed.
	Reason string `json:"reason,omitempty"`
	// Attempts counts promotion attempts (catch-up rounds, replans).
	Attempts       int `json:"attempts"`
	PlanIntervals  int `json:"plan_intervals"`
	ExtraIntervals int `json:"extra_intervals"`
	Debts          int `json:"debts"`
}

// WriteJSON writes r as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return fmt.Errorf("writing the simulation report: %w", err)
	}
	return nil
}

// WriteTable writes r as a table, one row per policy.
func (r *Report) WriteTable(w io.Writer) error {
	p := r.Params
	fmt.Fprintf(w, "%d deploys, seed %d, dag %s (%d %s models), scheduler every %s (jitter %s), backfill %s %s±%s, lock hold %s\n\n",
		p.Deploys, p.Seed, p.DAG, p.Models, p.Unit, p.Cadence, p.Jitter, p.BackfillDist, p.BackfillMean, p.BackfillStddev, p.LockHold)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "POLICY\tPROMOTED\tDEBTS\tDEBT MEAN/MAX (INTERVALS)\tDEBT MEAN/MAX (MIN)\tREPAIR MEAN/MAX (MIN)\tEXTRA\tWASTED\tDEFERRED (N, MIN)\tRUNS\tINTERVALS")
	for _, pr := range r.Policies {
		d := pr.Debt
		fmt.Fprintf(tw, "%s\t%d/%d (%.0f%%)\t%d\t%s / %d\t%s / %s\t%s / %s\t%d\t%d\t%d, %s\t%d\t%d\n",
			pr.Policy, pr.Promoted, pr.Deploys, 100*pr.SuccessRate, d.Count,
			num(d.MeanIntervals), d.MaxIntervals, num(d.MeanMinutes), num(d.MaxMinutes),
			num(d.RepairLatencyMeanMinutes), num(d.RepairLatencyMaxMinutes),
			pr.ExtraComputeIntervals, pr.WastedIntervals, pr.Deferred.Intervals, num(pr.Deferred.TotalMinutes),
			pr.SchedulerRuns, pr.TotalIntervals)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("writing the simulation table: %w", err)
	}
	return nil
}

// num prints a measure with at most one decimal.
func num(f float64) string {
	if f == math.Trunc(f) {
		return fmt.Sprintf("%.0f", f)
	}
	return fmt.Sprintf("%.1f", f)
}

// round3 keeps three decimals, so that reports stay readable.
func round3(f float64) float64 { return math.Round(f*1000) / 1000 }
