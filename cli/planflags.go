package cli

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/gapless-dev/gapless/execute"
	"github.com/gapless-dev/gapless/model"
	"github.com/gapless-dev/gapless/plan"
	"github.com/gapless-dev/gapless/project"
	"github.com/gapless-dev/gapless/snapshot"
)

// addSQLMeshPlanFlags adds the plan flags SQLMesh users type:
// --include-unmodified, --backfill-model, --empty-backfill and --explain.
func addSQLMeshPlanFlags(cmd *cobra.Command, f *planFlags) {
	fl := cmd.Flags()
	fl.BoolVar(&f.includeUnmodified, "include-unmodified", false,
		"give the environment a view for every model, not only the changed ones (what gapless always does)")
	fl.StringArrayVar(&f.backfillModels, "backfill-model", nil,
		"backfill only this model and its upstream models; other changed models wait for a later plan (repeatable; not for prod)")
	fl.BoolVar(&f.emptyBackfill, "empty-backfill", false,
		"record the missing intervals as computed without computing them: they hold no rows (recorded in the history)")
	fl.BoolVar(&f.explain, "explain", false, "explain the plan step by step and apply nothing")
}

// checkSQLMeshFlags refuses the combinations of the SQLMesh plan flags that
// cannot mean anything, as usage errors.
func (f *planFlags) checkSQLMeshFlags(env string) error {
	switch {
	case f.explain && f.out != "":
		return usagef("--explain applies nothing and writes nothing; it cannot be combined with --out")
	case f.emptyBackfill && f.skipBackfill:
		return usagef("--empty-backfill records the missing intervals as computed, --skip-backfill leaves them missing: choose one")
	case len(f.backfillModels) > 0 && env == plan.Prod:
		return usagef("--backfill-model is only for development environments (as in SQLMesh): prod serves every model it changes, backfilled")
	}
	return nil
}

// selectedProject is the project's snapshots the plan was built from: all
// of them, or the --select-model selection and its upstream models.
func selectedProject(pr *project.Project, pl *plan.Plan) map[string]*snapshot.Snapshot {
	if len(pl.Options.Select) == 0 {
		return pr.Snapshots
	}
	take := map[string]bool{}
	for _, n := range append(pr.Graph.Upstream(pl.Options.Select...), pl.Options.Select...) {
		take[n] = true
	}
	out := map[string]*snapshot.Snapshot{}
	for n, s := range pr.Snapshots {
		if take[n] {
			out[n] = s
		}
	}
	return out
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// printSQLMeshFlags writes what the SQLMesh plan flags change in the plan:
// the intervals recorded empty, the models left for later, the views.
func printSQLMeshFlags(w io.Writer, pl *plan.Plan, f planFlags, deferred []string) {
	if len(pl.Empty) > 0 {
		fmt.Fprintln(w, "\nEmpty backfill (--empty-backfill): recorded as computed WITHOUT computing them; these intervals will hold no rows:")
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		for _, e := range pl.Empty {
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", e.Name, e.Version, describeRanges(e))
		}
		_ = tw.Flush()
		fmt.Fprintln(w, "  Each is written to the history as an empty_backfill event. To compute them later: gapless plan --restate-model MODEL.")
	} else if pl.Options.EmptyBackfill {
		fmt.Fprintln(w, "\nEmpty backfill (--empty-backfill): nothing is missing; nothing to record.")
	}
	if len(deferred) > 0 {
		fmt.Fprintf(w, "\nNot backfilled (--backfill-model), left for a later plan and not promoted: %s\n", strings.Join(deferred, ", "))
		fmt.Fprintf(w, "  %s keeps serving the versions it serves now for them (a new environment: prod's; a new model is left out).\n", pl.Environment)
	}
	if f.includeUnmodified && pl.Environment != plan.Prod {
		fmt.Fprintf(w, "\n--include-unmodified: %s has a view for every model it serves; gapless always does this.\n", pl.Environment)
	}
}

// describeRanges is a backfill's ranges, in words.
func describeRanges(b plan.Backfill) string {
	var rs []string
	for r := range b.Ranges.All() {
		rs = append(rs, r.String())
	}
	if b.Whole && len(rs) == 0 {
		return "whole table"
	}
	if b.Whole {
		return "whole table (" + strings.Join(rs, ", ") + ")"
	}
	return plural(int64(b.Buckets), "interval", "intervals") + " in " + strings.Join(rs, ", ")
}

// printExplain writes what applying pl would do, step by step, as
// SQLMesh's plan --explain does: the snapshots recorded, the physical
// tables made, the work, the promotion and its check, the views
// repointed and dropped.
func printExplain(w io.Writer, pl *plan.Plan, deferred []string) {
	fmt.Fprintf(w, "\nExplained plan %s for %s:\n", pl.ID, pl.Environment)
	byName := map[string]*snapshot.Snapshot{}
	for _, s := range pl.Snapshots {
		byName[s.Name] = s
	}
	newEnv := pl.Expected.PlanID == ""

	fmt.Fprintf(w, "\n1. Record the %s %s serves in state.\n", plural(int64(len(pl.Snapshots)), "snapshot", "snapshots"), pl.Environment)

	fmt.Fprintln(w, "\n2. Create the physical tables and views of new versions (those that do not exist yet):")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	n := 0
	for _, c := range pl.Changes {
		s := byName[c.Name]
		if s == nil || c.Category == snapshot.Removed || s.Model.Kind == model.KindExternal {
			continue
		}
		what := "new version " + c.Version
		if c.PreviousVersion != "" && c.PreviousVersion == c.Version {
			what = "keeps the table of version " + c.Version
		}
		why := string(c.Category)
		if c.Reason != "" {
			why += ": " + c.Reason
		}
		fmt.Fprintf(tw, "   %s\t%s\t%s\t(%s)\n", c.Name, execute.PhysicalTable(s), what, why)
		n++
	}
	_ = tw.Flush()
	if n == 0 {
		fmt.Fprintln(w, "   none: no model changes")
	}

	fmt.Fprintln(w, "\n3. Backfill, in DAG order (a model starts once its parents' work is done):")
	work := map[string]plan.Backfill{}
	for _, b := range pl.Backfills {
		work[b.Name] = b
	}
	empty := map[string]plan.Backfill{}
	for _, b := range pl.Empty {
		empty[b.Name] = b
	}
	reuse := map[string]plan.Reuse{}
	for _, r := range pl.Reuses {
		reuse[r.Name] = r
	}
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	n = 0
	for _, s := range pl.Snapshots {
		var what string
		if b, ok := work[s.Name]; ok {
			what = "compute " + describeRanges(b)
		} else if e, ok := empty[s.Name]; ok {
			what = "record " + describeRanges(e) + " as computed, WITHOUT rows (--empty-backfill)"
		} else if r, ok := reuse[s.Name]; ok {
			what = reusedTable(r.BuiltBy) + "; nothing to compute"
		} else {
			continue
		}
		fmt.Fprintf(tw, "   %s\t%s\t%s\n", s.Name, s.Version, what)
		n++
	}
	_ = tw.Flush()
	switch {
	case n > 0:
	case pl.Options.SkipBackfill:
		fmt.Fprintln(w, "   nothing: --skip-backfill")
	default:
		fmt.Fprintln(w, "   nothing to compute")
	}
	for _, wt := range pl.Waits {
		fmt.Fprintf(w, "   %s waits on its sources; `gapless run` computes it once they have landed\n", wt.Name)
	}

	fmt.Fprintf(w, "\n4. Promote %s: ", pl.Environment)
	if pl.Options.Checks() {
		fmt.Fprintln(w, "the no-gap check runs first: every replaced model's new version must cover what it replaces, or nothing is promoted.")
	} else {
		fmt.Fprintln(w, "without the no-gap check (--no-gaps=false): a new version may be promoted with a gap.")
	}
	if pl.Options.Checks() {
		fmt.Fprintf(w, "   Policy if the scheduler advanced %s meanwhile: %s\n", pl.Environment, policyLine(pl))
	}
	if len(deferred) > 0 {
		fmt.Fprintf(w, "   Not promoted (--backfill-model did not select them): %s\n", strings.Join(deferred, ", "))
	}

	fmt.Fprintf(w, "\n5. Point the views of %s at the tables, in one transaction where the engine allows:\n", pl.Environment)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	n = 0
	changed := map[string]bool{}
	for _, c := range pl.Changes {
		if c.Category != snapshot.Removed && c.PreviousVersion != c.Version {
			changed[c.Name] = true
		}
	}
	for _, s := range pl.Snapshots {
		if s.Model.Kind == model.KindExternal || !(newEnv || changed[s.Name]) {
			continue
		}
		fmt.Fprintf(tw, "   %s\t-> %s\n", execute.ViewTable(s, pl.Environment), execute.PhysicalTable(s))
		n++
	}
	_ = tw.Flush()
	if n == 0 {
		fmt.Fprintln(w, "   none: every view already points at its table")
	}
	var removed []string
	for _, c := range pl.Changes {
		if c.Category == snapshot.Removed {
			removed = append(removed, c.Name)
		}
	}
	if len(removed) > 0 {
		fmt.Fprintf(w, "\n6. Drop the views of removed models: %s\n", strings.Join(removed, ", "))
	}
}
