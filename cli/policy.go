package cli

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/gapless-dev/gapless/lease"
	"github.com/gapless-dev/gapless/plan"
	"github.com/gapless-dev/gapless/promotion"
)

// The promotion policy flags, shared by plan and apply.
const (
	flagOnIncumbentAdvance      = "on-incumbent-advance"
	flagMaxTrailingGapIntervals = "max-trailing-gap-intervals"
	flagMaxAttempts             = "max-attempts"
	flagLeaseTTL                = "lease-ttl"
	flagLeaseWait               = "lease-wait"
)

// policyFlags are --on-incumbent-advance and its bounds, as given, how
// the lock policy takes its leases (--lease-ttl, --lease-wait), and the
// merge gate's flags (--merge-gate, --merge-gate-wait).
type policyFlags struct {
	name        string
	maxGap      int
	maxAttempts int
	leaseTTL    time.Duration
	leaseWait   time.Duration
	// gate is --merge-gate and --merge-gate-wait (see gate.go).
	gate mergeGateFlags
}

func addPolicyFlags(cmd *cobra.Command, f *policyFlags, what string) {
	fl := cmd.Flags()
	fl.StringVar(&f.name, flagOnIncumbentAdvance, "",
		"what promotion does when the scheduler advanced the incumbent after the plan was built: strict, trailing-gap, catch-up, replan or lock (default: "+what+")")
	fl.IntVar(&f.maxGap, flagMaxTrailingGapIntervals, 0,
		"trailing-gap's bound: the most scheduler advances an accepted trailing gap may span (default: "+what+")")
	fl.IntVar(&f.maxAttempts, flagMaxAttempts, 0,
		fmt.Sprintf("catch-up rounds or replans before giving up (default: %s, else %d)", what, promotion.DefaultMaxAttempts))
	fl.DurationVar(&f.leaseTTL, flagLeaseTTL, lease.DefaultTTL,
		"lock policy: lifetime of the deploy's version leases (renewed every third of it); a crashed deploy's leases expire after it")
	fl.DurationVar(&f.leaseWait, flagLeaseWait, lease.DefaultWait,
		"lock policy: how long to wait for each version lease another owner (a scheduler) holds before failing")
	addMergeGateFlags(cmd, &f.gate)
}

// leaseOptions are the lock policy's lease options from --lease-ttl and
// --lease-wait. A TTL that is not positive, or a negative wait, is a usage
// error.
func (f *policyFlags) leaseOptions() (lease.Options, error) {
	if f.leaseTTL <= 0 {
		return lease.Options{}, usagef("--%s must be positive, got %s", flagLeaseTTL, f.leaseTTL)
	}
	if f.leaseWait < 0 {
		return lease.Options{}, usagef("--%s must not be negative, got %s", flagLeaseWait, f.leaseWait)
	}
	wait := f.leaseWait
	if wait == 0 {
		wait = -1 // lease.Options: a negative wait does not wait; 0 is the default
	}
	return lease.Options{TTL: f.leaseTTL, Wait: wait}, nil
}

// policyOverride is what the policy flags that were given change of a
// policy; the flags not given leave their field alone.
type policyOverride struct {
	name                         promotion.Name
	maxGap, maxAttempts          int
	setName, setGap, setAttempts bool
}

// override reads the policy flags that cmd was given. A bad value is a
// usage error naming its flag.
func (f *policyFlags) override(cmd *cobra.Command) (policyOverride, error) {
	var o policyOverride
	fl := cmd.Flags()
	if fl.Changed(flagOnIncumbentAdvance) {
		n, err := promotion.Parse(f.name)
		if err != nil {
			return o, usagef("--%s: %w", flagOnIncumbentAdvance, err)
		}
		o.name, o.setName = n, true
	}
	if fl.Changed(flagMaxTrailingGapIntervals) {
		if f.maxGap < 0 {
			return o, usagef("--%s must not be negative, got %d", flagMaxTrailingGapIntervals, f.maxGap)
		}
		o.maxGap, o.setGap = f.maxGap, true
	}
	if fl.Changed(flagMaxAttempts) {
		if f.maxAttempts < 0 {
			return o, usagef("--%s must not be negative, got %d", flagMaxAttempts, f.maxAttempts)
		}
		o.maxAttempts, o.setAttempts = f.maxAttempts, true
	}
	return o, nil
}

// given reports whether any policy flag was given.
func (o policyOverride) given() bool { return o.setName || o.setGap || o.setAttempts }

// on returns base with the given flags' fields replaced, validated. base is
// what the flags override: the environment's policy from gapless.yaml (plan)
// or the policy the saved plan recorded (apply).
func (o policyOverride) on(base promotion.Policy) (promotion.Policy, error) {
	p := base.OrDefault()
	if o.setName {
		p.Name = o.name
	}
	if o.setGap {
		p.MaxTrailingGapIntervals = o.maxGap
	}
	if o.setAttempts {
		p.MaxAttempts = o.maxAttempts
	}
	if err := p.Validate(); err != nil {
		return p, usagef("promotion policy %s: %w", p, err)
	}
	return p, nil
}

// warnings name what is suspicious in a policy the flags produced: a
// policy given to a plan without the no-gap check (checked false: it never
// acts), a bound given for a policy that ignores it, or trailing-gap with a
// bound of 0 (it then accepts no gap at all).
func (o policyOverride) warnings(p promotion.Policy, checked bool) []string {
	var out []string
	if o.given() && !checked {
		return []string{"the plan runs no no-gap check at promotion (--no-gaps is off), so its promotion policy never acts"}
	}
	if o.setGap && p.Name != promotion.TrailingGap {
		out = append(out, fmt.Sprintf("--%s has no effect under %s", flagMaxTrailingGapIntervals, p))
	}
	if o.setAttempts && p.Name != promotion.CatchUp && p.Name != promotion.Replan {
		out = append(out, fmt.Sprintf("--%s has no effect under %s", flagMaxAttempts, p))
	}
	if o.setName && p.Name == promotion.TrailingGap && p.MaxTrailingGapIntervals == 0 {
		out = append(out, fmt.Sprintf("trailing-gap(0) accepts no trailing gap; set --%s N", flagMaxTrailingGapIntervals))
	}
	return out
}

// policySummary is a plan's promotion policy in `plan --json`; its field
// names are stable.
type policySummary struct {
	// Name is the policy: strict, trailing-gap, catch-up, replan or lock.
	Name string `json:"name"`
	// Text is the policy with its bound, as printed: "trailing-gap(1)".
	Text                    string `json:"text"`
	MaxTrailingGapIntervals int    `json:"max_trailing_gap_intervals"`
	// MaxAttempts is the bound catch-up and replan use (the default when
	// none is set).
	MaxAttempts int `json:"max_attempts"`
	// Checked: the plan runs the no-gap check at promotion (--no-gaps, on
	// for prod); without it the policy never acts.
	Checked bool `json:"checked"`
}

func summarizePolicy(p promotion.Policy, checked bool) policySummary {
	p = p.OrDefault()
	return policySummary{Name: string(p.Name), Text: p.String(), MaxTrailingGapIntervals: p.MaxTrailingGapIntervals,
		MaxAttempts: p.Attempts(), Checked: checked}
}

// policyLine is the promotion policy of a plan as `plan` prints it.
func policyLine(pl *plan.Plan) string {
	if !pl.Options.Checks() {
		return fmt.Sprintf("none: no no-gap check at promotion (--no-gaps is off for %s)", pl.Environment)
	}
	return pl.Options.Policy.OrDefault().String()
}
