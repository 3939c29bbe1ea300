// Package promotion holds the promotion policies: what a promotion does when
// the incumbent it replaces moved after the plan was built (seed 000's
// race), and the verdict of the promotion check for one model.
//
// It is plain Go and knows no database: the apply stage gathers the facts
// (frontiers, coverage, schedules) inside the promotion transaction and asks
// Judge for a verdict. The verdict is the same whoever asks, so a test can
// check every rule without a warehouse.
//
// Invariant (design, invariant 2): no verdict accepts a gap unless the
// policy is trailing-gap, the gap is one contiguous suffix created after
// the plan was built, it counts at most the policy's bound of scheduler
// advances, the schedules agree, and no downstream candidate already holds
// rows computed over it. Every accepted gap is returned as a Debt, to be
// recorded in the promotion's own transaction.
package promotion

import (
	"errors"
	"fmt"
	"strings"

	"github.com/gapless-dev/gapless/model/suggest"
)

// Name names a promotion policy.
type Name string

// The promotion policies (DESIGN.md, Concepts).
const (
	// Strict fails the promotion when the replacement does not cover
	// everything the incumbent covers now.
	Strict Name = "strict"
	// TrailingGap accepts a bounded, contiguous, post-plan trailing suffix
	// and records it as freshness debt.
	TrailingGap Name = "trailing-gap"
	// CatchUp backfills the new tail just before a strict promotion, at
	// most MaxAttempts times.
	CatchUp Name = "catch-up"
	// Replan builds a fresh plan for the same source and choices when the
	// only failure is an incumbent advance, at most MaxAttempts times.
	Replan Name = "replan"
	// Lock has the deploy and the scheduler coordinate through leases on
	// the affected part of the DAG.
	Lock Name = "lock"
)

// Names lists every policy, in the order the documentation gives them.
var Names = []Name{Strict, TrailingGap, CatchUp, Replan, Lock}

// DefaultMaxAttempts bounds catch-up and replan when no bound is given.
const DefaultMaxAttempts = 3

// ErrUnknown is wrapped by Parse's error.
var ErrUnknown = errors.New("unknown promotion policy")

// ErrInvalid is wrapped by Validate's error.
var ErrInvalid = errors.New("invalid promotion policy")

// Parse returns the policy named s (case-insensitive), or an error naming
// the closest policy.
func Parse(s string) (Name, error) {
	names := make([]string, len(Names))
	for i, p := range Names {
		if strings.EqualFold(string(p), strings.TrimSpace(s)) {
			return p, nil
		}
		names[i] = string(p)
	}
	if hint, ok := suggest.Closest(s, names); ok {
		return "", fmt.Errorf("%w %q: did you mean %s?", ErrUnknown, s, hint)
	}
	return "", fmt.Errorf("%w %q (policies: %s)", ErrUnknown, s, strings.Join(names, ", "))
}

// Policy is a promotion policy with its bounds, as recorded in a plan.
type Policy struct {
	Name Name `json:"name"`
	// MaxTrailingGapIntervals is trailing-gap's bound: the most scheduler
	// advances a trailing gap may count.
	MaxTrailingGapIntervals int `json:"max_trailing_gap_intervals,omitempty"`
	// MaxAttempts bounds catch-up rounds and replans; 0 means
	// DefaultMaxAttempts.
	MaxAttempts int `json:"max_attempts,omitempty"`
}

// Default is the policy of an environment nothing configures: fail closed.
var Default = Policy{Name: Strict}

// OrDefault returns p, or Default when p has no name (a plan written
// before policies were recorded).
func (p Policy) OrDefault() Policy {
	if p.Name == "" {
		return Default
	}
	return p
}

// Attempts is catch-up's and replan's bound.
func (p Policy) Attempts() int {
	if p.MaxAttempts > 0 {
		return p.MaxAttempts
	}
	return DefaultMaxAttempts
}

// Validate reports a policy gapless cannot run, wrapping ErrInvalid.
func (p Policy) Validate() error {
	known := false
	for _, n := range Names {
		known = known || n == p.Name
	}
	switch {
	case !known:
		return fmt.Errorf("%w: unknown policy %q", ErrInvalid, p.Name)
	case p.MaxTrailingGapIntervals < 0:
		return fmt.Errorf("%w: max trailing gap intervals must not be negative, got %d", ErrInvalid, p.MaxTrailingGapIntervals)
	case p.MaxAttempts < 0:
		return fmt.Errorf("%w: max attempts must not be negative, got %d", ErrInvalid, p.MaxAttempts)
	}
	return nil
}

// String is the policy with its bound, as the CLI prints it:
// "strict", "trailing-gap(2)", "catch-up(3)", "replan(3)", "lock".
func (p Policy) String() string {
	p = p.OrDefault()
	switch p.Name {
	case TrailingGap:
		return fmt.Sprintf("%s(%d)", p.Name, p.MaxTrailingGapIntervals)
	case CatchUp, Replan:
		return fmt.Sprintf("%s(%d)", p.Name, p.Attempts())
	}
	return string(p.Name)
}
