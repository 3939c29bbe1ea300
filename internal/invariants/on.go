//go:build invariants || race

package invariants

// Enabled is true in builds tagged invariants or race: structures check
// their invariants after every mutation.
const Enabled = true
