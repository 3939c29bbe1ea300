package simulate

import (
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/promotion"
)

// Backfill duration distributions (Params.BackfillDist).
const (
	// DistNormal is a normal distribution of BackfillMean and
	// BackfillStddev, truncated below at MinBackfill.
	DistNormal = "normal"
	// DistLognormal is the log-normal distribution with that mean and
	// standard deviation (long right tail: the occasional slow deploy).
	DistLognormal = "lognormal"
	// DistFixed is BackfillMean for every deploy.
	DistFixed = "fixed"
)

// Dists lists the backfill duration distributions.
var Dists = []string{DistNormal, DistLognormal, DistFixed}

// MinBackfill is the shortest backfill a distribution yields.
const MinBackfill = time.Minute

// ErrInvalid is wrapped by Params.Validate's error.
var ErrInvalid = errors.New("invalid simulation parameters")

// Params are one simulation's parameters. The zero value of a field means
// its default (see Defaults), except where noted.
type Params struct {
	// Seed fixes every random draw: deploy times, backfill durations,
	// edited models and scheduler jitter. The same Params give the same
	// Report.
	Seed int64
	// Deploys is how many deploys each policy faces.
	Deploys int
	// Cadence is the scheduler's tick period; tick k fires at
	// Start + k*Cadence + a uniform draw in [0, Jitter).
	Cadence time.Duration
	// Jitter is the scheduler start jitter's maximum (< Cadence). Zero
	// means none: set NoJitter to ask for zero explicitly when the default
	// is not zero.
	Jitter   time.Duration
	NoJitter bool
	// BackfillMean and BackfillStddev describe, in simulated time, how long
	// a deploy's planned backfill takes; BackfillDist names the
	// distribution (DistNormal, DistLognormal, DistFixed). A zero
	// BackfillMean takes both defaults; a zero BackfillStddev alone is
	// zero.
	BackfillMean   time.Duration
	BackfillStddev time.Duration
	BackfillDist   string
	// DeployGap is the mean (exponential) idle time between one deploy's
	// planned end (its backfill plus LockHold) and the next deploy's start.
	DeployGap time.Duration
	// DAG is the models' shape: "chain:N" (m1 <- m2 <- ... <- mN),
	// "fan:N" (one parent, N children) or "diamond" (a; b and c read a; d
	// reads b and c).
	DAG string
	// Unit is the models' interval unit and cron: five_minute, hour or
	// day.
	Unit string
	// History is how much data precedes Start (the models' start).
	History time.Duration
	// Start is when prod is first applied (T0), aligned to Unit.
	Start time.Time
	// MaxTrailingGapIntervals is trailing-gap's bound.
	MaxTrailingGapIntervals int
	// MaxAttempts bounds catch-up rounds and replans.
	MaxAttempts int
	// LockHold is how long, in simulated time, the lock policy holds its
	// leases: its final catch-up and the promotion.
	LockHold time.Duration
	// Policies are the policies to simulate, in order; empty means all
	// five (promotion.Names).
	Policies []promotion.Name
	// Parallel bounds how many policies are simulated at once; 0 means
	// runtime.GOMAXPROCS. It does not change the results.
	Parallel int
	// Logger receives one record per policy simulated; nil discards. The
	// components simulated (planner, apply, scheduler) never log.
	Logger *slog.Logger
}

// Defaults are the parameters of `gapless simulate` without flags: an
// hourly three-model chain with a day of history, twenty deploys whose
// backfills take 45 minutes on average against an hourly scheduler.
var Defaults = Params{
	Seed:                    1,
	Deploys:                 20,
	Cadence:                 time.Hour,
	Jitter:                  10 * time.Minute,
	BackfillMean:            45 * time.Minute,
	BackfillStddev:          30 * time.Minute,
	BackfillDist:            DistNormal,
	DeployGap:               2 * time.Hour,
	DAG:                     "chain:3",
	Unit:                    string(interval.Hour),
	History:                 24 * time.Hour,
	Start:                   time.Date(2024, 1, 2, 0, 0, 0, 0, time.UTC),
	MaxTrailingGapIntervals: 1,
	MaxAttempts:             promotion.DefaultMaxAttempts,
	LockHold:                5 * time.Minute,
}

// WithDefaults fills every zero field from Defaults.
func (p Params) WithDefaults() Params {
	d := Defaults
	if p.Seed == 0 {
		p.Seed = d.Seed
	}
	if p.Deploys == 0 {
		p.Deploys = d.Deploys
	}
	if p.Cadence == 0 {
		p.Cadence = d.Cadence
	}
	if p.NoJitter {
		p.Jitter = 0
	} else if p.Jitter == 0 {
		p.Jitter = d.Jitter
	}
	if p.BackfillMean == 0 {
		p.BackfillMean, p.BackfillStddev = d.BackfillMean, d.BackfillStddev
	}
	if p.BackfillDist == "" {
		p.BackfillDist = d.BackfillDist
	}
	if p.DeployGap == 0 {
		p.DeployGap = d.DeployGap
	}
	if p.DAG == "" {
		p.DAG = d.DAG
	}
	if p.Unit == "" {
		p.Unit = d.Unit
	}
	if p.History == 0 {
		p.History = d.History
	}
	if p.Start.IsZero() {
		p.Start = d.Start
	}
	if p.MaxTrailingGapIntervals == 0 {
		p.MaxTrailingGapIntervals = d.MaxTrailingGapIntervals
	}
	if p.MaxAttempts == 0 {
		p.MaxAttempts = d.MaxAttempts
	}
	if p.LockHold == 0 {
		p.LockHold = d.LockHold
	}
	if len(p.Policies) == 0 {
		p.Policies = promotion.Names
	}
	if p.Parallel <= 0 {
		p.Parallel = runtime.GOMAXPROCS(0)
	}
	return p
}

// units maps the supported units to their cron.
var units = map[string]string{
	string(interval.FiveMinute): "*/5 * * * *",
	string(interval.Hour):       "@hourly",
	string(interval.Day):        "@daily",
}

// Validate reports parameters the simulator cannot run, wrapping
// ErrInvalid.
func (p Params) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
	}
	if _, err := parseDAG(p.DAG); err != nil {
		return err
	}
	if _, ok := units[p.Unit]; !ok {
		return bad("unit must be five_minute, hour or day, not %q", p.Unit)
	}
	unit := interval.Unit(p.Unit)
	switch {
	case p.Deploys < 1 || p.Deploys > 1000:
		return bad("deploys must be in [1, 1000], got %d", p.Deploys)
	case p.Cadence < time.Minute:
		return bad("cadence must be at least 1m, got %s", p.Cadence)
	case p.Jitter < 0 || p.Jitter >= p.Cadence:
		return bad("jitter must be in [0, cadence %s), got %s", p.Cadence, p.Jitter)
	case p.BackfillMean < MinBackfill:
		return bad("backfill mean must be at least %s, got %s", MinBackfill, p.BackfillMean)
	case p.BackfillStddev < 0:
		return bad("backfill stddev must not be negative, got %s", p.BackfillStddev)
	case p.DeployGap < 0:
		return bad("deploy gap must not be negative, got %s", p.DeployGap)
	case p.History < unit.Nominal():
		return bad("history must hold at least one %s interval, got %s", p.Unit, p.History)
	case p.History > 90*24*time.Hour:
		return bad("history must be at most 90 days, got %s", p.History)
	case !unit.Floor(p.Start).Equal(p.Start):
		return bad("start %s is not aligned to the %s unit", p.Start.Format(time.RFC3339), p.Unit)
	case p.MaxTrailingGapIntervals < 0:
		return bad("max trailing gap intervals must not be negative")
	case p.MaxAttempts < 1:
		return bad("max attempts must be at least 1, got %d", p.MaxAttempts)
	case p.LockHold < 0:
		return bad("lock hold must not be negative, got %s", p.LockHold)
	}
	known := false
	for _, d := range Dists {
		known = known || d == p.BackfillDist
	}
	if !known {
		return bad("backfill distribution must be one of %s, not %q", strings.Join(Dists, ", "), p.BackfillDist)
	}
	for _, n := range p.Policies {
		if err := (promotion.Policy{Name: n}).Validate(); err != nil {
			return bad("%v", err)
		}
	}
	return nil
}

// policyOf is the policy simulated for name, with the parameters' bounds.
func (p Params) policyOf(name promotion.Name) promotion.Policy {
	pol := promotion.Policy{Name: name}
	switch name {
	case promotion.TrailingGap:
		pol.MaxTrailingGapIntervals = p.MaxTrailingGapIntervals
	case promotion.CatchUp, promotion.Replan:
		pol.MaxAttempts = p.MaxAttempts
	}
	return pol
}

// node is one model of the generated DAG.
type node struct {
	name    string
	parents []string
}

// parseDAG returns the models of shape, parents first.
func parseDAG(shape string) ([]node, error) {
	kind, arg, _ := strings.Cut(strings.TrimSpace(shape), ":")
	size := func() (int, error) {
		n, err := strconv.Atoi(arg)
		if err != nil || n < 1 || n > 50 {
			return 0, fmt.Errorf("%w: dag %q: the size must be a number in [1, 50]", ErrInvalid, shape)
		}
		return n, nil
	}
	name := func(i int) string { return fmt.Sprintf("sim.m%02d", i) }
	var out []node
	switch kind {
	case "chain":
		n, err := size()
		if err != nil {
			return nil, err
		}
		for i := 1; i <= n; i++ {
			nd := node{name: name(i)}
			if i > 1 {
				nd.parents = []string{name(i - 1)}
			}
			out = append(out, nd)
		}
	case "fan":
		n, err := size()
		if err != nil {
			return nil, err
		}
		out = append(out, node{name: "sim.root"})
		for i := 1; i <= n; i++ {
			out = append(out, node{name: fmt.Sprintf("sim.child%02d", i), parents: []string{"sim.root"}})
		}
	case "diamond":
		if arg != "" {
			return nil, fmt.Errorf("%w: dag %q: diamond takes no size", ErrInvalid, shape)
		}
		out = []node{
			{name: "sim.a"},
			{name: "sim.b", parents: []string{"sim.a"}},
			{name: "sim.c", parents: []string{"sim.a"}},
			{name: "sim.d", parents: []string{"sim.b", "sim.c"}},
		}
	default:
		return nil, fmt.Errorf(`%w: dag %q: want "chain:N", "fan:N" or "diamond"`, ErrInvalid, shape)
	}
	return out, nil
}
