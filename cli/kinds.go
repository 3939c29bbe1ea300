package cli

import (
	"fmt"
	"io"

	"github.com/gapless-dev/gapless/execute"
	"github.com/gapless-dev/gapless/model"
	"github.com/gapless-dev/gapless/plan"
)

// printKindNotes writes what a plan must say about the kinds whose writes
// are not idempotent: each INCREMENTAL_UNMANAGED model the plan computes
// (appends are not atomic with the record of their interval; see
// execute/kinds.go).
func printKindNotes(w io.Writer, pl *plan.Plan) {
	computed := map[string]bool{}
	for _, b := range pl.Backfills {
		computed[b.Name] = true
	}
	for _, s := range pl.Snapshots {
		if s.Model.Kind == model.KindIncrementalUnmanaged && !s.Model.InsertOverwrite && computed[s.Name] {
			fmt.Fprintf(w, "\nNote on %s: %s.\n", s.Name, execute.UnmanagedWarning)
		}
	}
}
