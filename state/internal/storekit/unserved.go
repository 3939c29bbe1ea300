package storekit

import (
	"slices"

	"github.com/gapless-dev/gapless/state"
)

// Unserved is the versions before serves that after does not, sorted by
// name then version, without repetitions: what a change of an environment
// from before to after stops serving (Promote, RemoveEnvironment).
func Unserved(before, after []state.SnapshotRef) []state.VersionKey {
	kept := make(map[state.VersionKey]bool, len(after))
	for _, r := range after {
		kept[r.VersionKey()] = true
	}
	var out []state.VersionKey
	for _, r := range before {
		if k := r.VersionKey(); !kept[k] {
			out = append(out, k)
		}
	}
	state.SortVersionKeys(out)
	return slices.Compact(out)
}
