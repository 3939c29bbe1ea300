//go:build !(invariants || race)

package invariants

// Enabled is false in builds without the invariants or race tag: the
// checks compile away.
const Enabled = false
