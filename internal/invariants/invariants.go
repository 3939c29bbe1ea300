// Package invariants switches on the checks that structures run on
// themselves, as cockroachdb/pebble does: under the build tags invariants
// or race (every `make test` run), a structure with an invariant verifies
// it after each construction or mutation and panics, naming the invariant,
// when it does not hold. A violation is a programmer bug, never bad input:
// input is refused with an error before it reaches the structure.
//
// Without those tags Enabled is the constant false and the checks compile
// away, so benchmarks and release builds pay nothing. Checks are O(n) in
// the structure they check.
package invariants

import "fmt"

// Violated panics with a message naming the invariant that does not hold
// (what) and the evidence (detail). Call it only under Enabled.
func Violated(what string, detail error) {
	panic(fmt.Sprintf("invariant violated: %s: %v", what, detail))
}
