package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/gapless-dev/gapless/apply"
	"github.com/gapless-dev/gapless/backend"
	"github.com/gapless-dev/gapless/config"
	"github.com/gapless-dev/gapless/execute"
	"github.com/gapless-dev/gapless/internal/logkey"
	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/model"
	"github.com/gapless-dev/gapless/plan"
	"github.com/gapless-dev/gapless/project"
	"github.com/gapless-dev/gapless/snapshot"
	"github.com/gapless-dev/gapless/source"
	"github.com/gapless-dev/gapless/sqlparse"
	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/warehouse"
)

// planFlags are the flags of `gapless plan`.
type planFlags struct {
	start, end   string
	restate      []string
	selectModels []string
	categories   []string
	skipBackfill bool
	forwardOnly  bool
	noGaps       bool
	out          string
	autoApply    bool
	asJSON       bool
	policy       policyFlags
	// SQLMesh's plan flags (see planflags.go).
	includeUnmodified bool
	backfillModels    []string
	emptyBackfill     bool
	explain           bool
}

func newPlanCmd(g *globals) *cobra.Command {
	var f planFlags
	cmd := &cobra.Command{
		Use:   "plan [ENV]",
		Short: "Build a plan against ENV (default prod), print it, and apply it when asked to",
		Long: `Compares the project with what ENV serves and prints the plan: added,
removed, directly and indirectly modified models, each with its change
category and the reason for it (with a diff of the query and of the MODEL
header where they changed), and per model the intervals to backfill. A
version another environment already built is not backfilled again: the
plan says whose table it reuses, and lists only what is missing.

--category MODEL=CATEGORY chooses a directly modified model's category
(breaking, non-breaking or forward-only) instead of gapless's own; a choice
that could serve wrong rows is refused with the reason.

A new development environment starts as a copy of prod and reuses prod's
tables for every model it does not change.

Then:
  --out FILE      writes the plan as JSON and applies nothing (gapless apply FILE);
  --auto-apply    applies it without asking;
  on a terminal   asks before applying;
  otherwise       applies nothing and says how to.

The plan records its promotion policy: what promotion does when the
scheduler advanced what ENV serves after the plan was built. It is ENV's
on_incumbent_advance (with max_trailing_gap_intervals and max_attempts) in
gapless.yaml, strict when unset; --on-incumbent-advance,
--max-trailing-gap-intervals and --max-attempts override it field by field.`,
		Args: rangeArgs(0, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			env, err := envArg(args)
			if err != nil {
				return err
			}
			if !cmd.Flags().Changed("no-gaps") {
				f.noGaps = env == plan.Prod
			}
			if f.out != "" && f.autoApply {
				return usagef("--out writes the plan without applying it; it cannot be combined with --auto-apply")
			}
			if err := f.checkSQLMeshFlags(env); err != nil {
				return err
			}
			pol, err := f.policy.override(cmd)
			if err != nil {
				return err
			}
			if _, err := f.policy.leaseOptions(); err != nil {
				return err
			}
			return g.runPlan(cmd.Context(), env, f, pol)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.start, "start", "", "backfill from this time (default: each model's start)")
	fl.StringVar(&f.end, "end", "", "backfill up to this time (default: the execution time)")
	fl.StringArrayVar(&f.restate, "restate-model", nil, "recompute this model's intervals, and those of everything downstream (repeatable)")
	fl.StringArrayVar(&f.selectModels, "select-model", nil, "restrict the plan to this model (repeatable)")
	fl.StringArrayVar(&f.categories, "category", nil, "MODEL=CATEGORY: choose a directly modified model's category: breaking, non-breaking or forward-only (repeatable)")
	fl.BoolVar(&f.skipBackfill, "skip-backfill", false, "do not backfill")
	fl.BoolVar(&f.forwardOnly, "forward-only", false, "reuse the existing physical tables: changes apply from now on")
	fl.BoolVar(&f.noGaps, "no-gaps", false, "the strict check: never promote a table with a gap (always on for prod)")
	fl.StringVar(&f.out, "out", "", "write the plan as JSON to FILE and apply nothing")
	fl.BoolVar(&f.autoApply, "auto-apply", false, "apply without asking")
	fl.BoolVar(&f.asJSON, "json", false, "print a machine-readable summary")
	addPolicyFlags(cmd, &f.policy, "the environment's on_incumbent_advance in gapless.yaml")
	addSQLMeshPlanFlags(cmd, &f)
	return cmd
}

// checkEnvName refuses, as a usage error, names that cannot be served
// (snapshot.CheckEnvironmentName).
func checkEnvName(name string) error {
	if err := snapshot.CheckEnvironmentName(name); err != nil {
		return &UsageError{Err: err}
	}
	return nil
}

func (g *globals) runPlan(ctx context.Context, env string, f planFlags, pol policyOverride) (err error) {
	exec, err := g.execTime()
	if err != nil {
		return err
	}
	opts, err := planOptions(f)
	if err != nil {
		return err
	}
	if err := plan.CheckOptions(env, opts); err != nil {
		if errors.Is(err, plan.ErrGapsInProd) {
			return usagef("--no-gaps=false: %w", err)
		}
		return usagef("%w", err)
	}
	pr, cfg, parser, err := g.openProjectWithParser(ctx)
	if err != nil {
		return err
	}
	defer parser.Close()
	if opts.Policy, err = pol.on(cfg.Environment(env).Policy()); err != nil {
		return err
	}
	for _, w := range pol.warnings(opts.Policy, opts.Checks()) {
		g.log.Warn(w)
	}
	if err := checkModels(pr, "--select-model", f.selectModels); err != nil {
		return err
	}
	if err := checkModels(pr, "--restate-model", f.restate); err != nil {
		return err
	}
	if err := checkModels(pr, "--backfill-model", f.backfillModels); err != nil {
		return err
	}
	// Planning reads state only; the warehouse (a DuckDB file is held by one
	// process at a time) is opened only to apply.
	b, err := g.openBackend(ctx, cfg, true)
	if err != nil {
		return err
	}
	defer g.closeBackend(b, &err)

	pl, err := buildPlan(ctx, b.Store, pr, parser, env, exec, g.now(), opts)
	if err != nil {
		return err
	}
	caps, notes, err := g.checkPlan(ctx, cfg, parser, pr.Dir, pl)
	if err != nil {
		return err
	}
	g.log.Debug("plan built", logkey.Plan, pl.ID, logkey.Environment, env, logkey.Changes, len(pl.Changes), logkey.Backfills, len(pl.Backfills))

	if f.out != "" {
		data, err := plan.Encode(pl)
		if err != nil {
			return err
		}
		file, err := g.path(f.out)
		if err != nil {
			return err
		}
		if err := os.WriteFile(file, data, 0o644); err != nil {
			return fmt.Errorf("writing the plan: %w", err)
		}
	}
	deferred := plan.Deferred(pl, selectedProject(pr, pl))
	if f.asJSON {
		sum := summarize(pl)
		sum.Views = viewsOf(cfg, caps)
		sum.NotBackfilled = nonNil(deferred)
		sum.LayoutNotes = nonNil(notes)
		if err := writeJSON(g.env.Stdout, sum); err != nil {
			return err
		}
	} else {
		printPlan(g.env.Stdout, pl)
		printSQLMeshFlags(g.env.Stdout, pl, f, deferred)
		printViewPromotion(g.env.Stdout, cfg, caps)
		printLayoutNotes(g.env.Stdout, cfg, notes)
	}
	out := g.env.Stdout
	if f.asJSON {
		out = g.env.Stderr // keep stdout one JSON document
	}
	switch {
	case f.explain:
		printExplain(out, pl, deferred)
		fmt.Fprintf(out, "\nExplained only (--explain): nothing applied, state and warehouse untouched.\n")
		return nil
	case f.out != "":
		fmt.Fprintf(out, "\nPlan written to %s; nothing applied. Apply it with:\n  gapless apply %s\n", f.out, f.out)
		return nil
	case isEmpty(pl):
		fmt.Fprintf(out, "\n%s is up to date; nothing to apply.\n", env)
		return nil
	case f.autoApply:
	case g.env.Interactive:
		yes, err := confirm(g.env.Stdin, out, fmt.Sprintf("\nApply this plan to %s? [y/N] ", env))
		if err != nil {
			return err
		}
		if !yes {
			fmt.Fprintln(out, "Not applied.")
			return nil
		}
	default:
		fmt.Fprintf(out, "\nNot applied. To apply it, run:\n  gapless plan %s --auto-apply\nor save it and apply it later:\n  gapless plan %s --out plan.json && gapless apply plan.json\n", env, env)
		return nil
	}
	if b.Engine, err = g.openEngine(ctx, cfg); err != nil {
		return err
	}
	lopts, err := f.policy.leaseOptions()
	if err != nil {
		return err
	}
	res, err := g.applyPlan(ctx, out, b, cfg.Dir, pl, nil, lopts, f.policy.gate)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "\n%s\n", appliedLine(pl, res))
	return nil
}

// checkPlan checks the plan's models before anything is printed, saved or
// applied (apply.Check), on the engine backend.OpenForPlanning opens: for a
// DuckDB warehouse an in-memory one, so planning still never waits for the
// warehouse file. It returns what the warehouse's engine guarantees (the
// planning engine is the same engine, so it declares the same).
//
// notes are the parts of the layout of each model the plan adds or changes
// that the engine does not apply (execute.LayoutNotes: partitions on
// DuckDB, say), one line each; a part it refuses fails the check.
func (g *globals) checkPlan(ctx context.Context, cfg *config.Config, parser *sqlparse.Parser, dir string, pl *plan.Plan) (caps warehouse.Capabilities, notes []string, err error) {
	e, err := backend.OpenForPlanning(ctx, cfg.Warehouse)
	if err != nil {
		return caps, nil, err
	}
	defer func() {
		if cerr := e.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("closing the engine the plan was checked on: %w", cerr))
		}
	}()
	if err := apply.Check(ctx, pl, e, parser, dir); err != nil {
		return caps, nil, err
	}
	byName := make(map[string]*snapshot.Snapshot, len(pl.Snapshots))
	for _, s := range pl.Snapshots {
		byName[s.Name] = s
	}
	for _, c := range pl.Changes {
		s := byName[c.Name]
		if s == nil || c.Version == "" {
			continue // removed
		}
		n, err := execute.LayoutNotes(e, s.Model)
		if err != nil {
			return caps, nil, err
		}
		notes = append(notes, n...)
	}
	return e.Capabilities(), notes, nil
}

// printLayoutNotes lists what the warehouse will not apply of the changed
// models' physical layout, so that nothing written is dropped silently.
func printLayoutNotes(w io.Writer, cfg *config.Config, notes []string) {
	if len(notes) == 0 {
		return
	}
	fmt.Fprintf(w, "\nNot applied on %s:\n", cfg.Warehouse.Driver)
	for _, n := range notes {
		fmt.Fprintf(w, "  %s\n", n)
	}
}

// viewPromotion is how the warehouse changes an environment's views at
// promotion, in plan --json.
type viewPromotion struct {
	Engine string `json:"engine"`
	Atomic bool   `json:"atomic"`
	How    string `json:"how"`
}

func viewsOf(cfg *config.Config, caps warehouse.Capabilities) viewPromotion {
	return viewPromotion{Engine: string(cfg.Warehouse.Driver), Atomic: caps.AtomicViews, How: caps.Promotion()}
}

// printViewPromotion says, on an engine that cannot change several views in
// one transaction, how the promotion will change them instead. An engine
// with atomic views prints nothing: that is the guarantee users expect.
func printViewPromotion(w io.Writer, cfg *config.Config, caps warehouse.Capabilities) {
	if caps.AtomicViews {
		return
	}
	fmt.Fprintf(w, "\nViews on %s: %s.\n", cfg.Warehouse.Driver, caps.Promotion())
}

// planOptions parses the flags into plan.Options.
func planOptions(f planFlags) (plan.Options, error) {
	o := plan.Options{
		ForwardOnly: f.forwardOnly, SkipBackfill: f.skipBackfill, AllowGaps: !f.noGaps,
		Restate: f.restate, Select: f.selectModels,
		BackfillModels: f.backfillModels, EmptyBackfill: f.emptyBackfill,
	}
	var err error
	if f.start != "" {
		if o.Start, err = model.ParseTime(f.start); err != nil {
			return o, usagef("--start: %w", err)
		}
	}
	if f.end != "" {
		if o.End, err = model.ParseTime(f.end); err != nil {
			return o, usagef("--end: %w", err)
		}
	}
	if !o.Start.IsZero() && !o.End.IsZero() && !o.Start.Before(o.End) {
		return o, usagef("--start %s is not before --end %s", f.start, f.end)
	}
	for _, arg := range f.categories {
		name, cat, ok := strings.Cut(arg, "=")
		name = strings.ToLower(strings.TrimSpace(name))
		if !ok || name == "" {
			return o, usagef("--category %q: write MODEL=CATEGORY, e.g. --category demo.daily_revenue=non-breaking", arg)
		}
		choice, err := snapshot.ParseChoice(cat)
		if err != nil {
			return o, usagef("--category %s: %w", arg, err)
		}
		if prev, dup := o.Categories[name]; dup && prev != choice {
			return o, usagef("--category: %s is given both %s and %s", name, prev, choice)
		}
		if o.Categories == nil {
			o.Categories = map[string]snapshot.Choice{}
		}
		o.Categories[name] = choice
	}
	return o, nil
}

// categoryError is a --category choice the plan refused, in the flag's
// words.
type categoryError struct{ *snapshot.ChoiceError }

func (e categoryError) Error() string {
	return fmt.Sprintf("--category %s=%s refused: %s", e.Model, e.Choice, e.Reason)
}

func (e categoryError) Unwrap() error { return e.ChoiceError }

// buildPlan builds a plan for env from the project (plan.Assemble), with a
// refused --category choice said in the flag's words.
func buildPlan(ctx context.Context, store state.Store, pr *project.Project, parser *sqlparse.Parser,
	env string, exec, now time.Time, opts plan.Options) (*plan.Plan, error) {
	pl, err := plan.Assemble(ctx, plan.AssembleParams{
		Store: store, Environment: env, Snapshots: pr.Snapshots, Graph: pr.Graph,
		Additive: project.Additive(ctx, parser), ExecutionTime: exec, Now: now, Options: opts,
	})
	var ce *snapshot.ChoiceError
	if errors.As(err, &ce) {
		return nil, categoryError{ce}
	}
	return pl, err
}

// isEmpty: the environment exists and the plan changes nothing and computes
// nothing.
func isEmpty(pl *plan.Plan) bool {
	return pl.Expected.PlanID != "" && len(pl.Changes) == 0 && len(pl.Backfills) == 0 && len(pl.Empty) == 0
}

func confirm(in io.Reader, out io.Writer, prompt string) (bool, error) {
	fmt.Fprint(out, prompt)
	if in == nil {
		return false, nil
	}
	line, err := bufio.NewReader(in).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return false, fmt.Errorf("reading the answer: %w", err)
	}
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return true, nil
	}
	return false, nil
}

// planSummary is the --json form of a plan; its field names are stable.
type planSummary struct {
	ID            string        `json:"id"`
	Environment   string        `json:"environment"`
	ExecutionTime time.Time     `json:"execution_time"`
	Expected      plan.Expected `json:"expected"`
	Added         []string      `json:"added"`
	Removed       []string      `json:"removed"`
	Direct        []string      `json:"directly_modified"`
	Indirect      []string      `json:"indirectly_modified"`
	Changes       []plan.Change `json:"changes"`
	Backfills     []backfillRow `json:"backfills"`
	// Reuses are the new versions whose work another environment (or an
	// earlier plan) already did, in whole or in part.
	Reuses []reuseRow `json:"reuses"`
	// Policy is the promotion policy the plan records.
	Policy policySummary `json:"policy"`
	// Waits are the new versions whose work waits on a source (see
	// plan.SourceWait): what is held back, and why.
	Waits []waitRow `json:"waits"`
	// Views says how the warehouse will change the environment's views
	// (warehouse.Capabilities): atomically, or one at a time.
	Views viewPromotion `json:"views"`
	// EmptyBackfills are the intervals --empty-backfill records as
	// computed without computing them: they will hold no rows.
	EmptyBackfills []backfillRow `json:"empty_backfills"`
	// NotBackfilled are the changed models --backfill-model leaves for a
	// later plan: neither backfilled nor promoted.
	NotBackfilled []string `json:"not_backfilled"`
	// LayoutNotes are the parts of the changed models' layout the
	// warehouse does not apply (partitioned_by on DuckDB, say).
	LayoutNotes []string `json:"layout_notes"`
}

type waitRow struct {
	Name    string   `json:"name"`
	Version string   `json:"version"`
	Whole   bool     `json:"whole,omitempty"`
	Held    []string `json:"held,omitempty"`
	Buckets int      `json:"buckets,omitempty"`
	// Reasons: one per source, "waiting on raw.events (not landed yet)".
	Reasons []string `json:"reasons"`
}

type backfillRow struct {
	Name    string   `json:"name"`
	Version string   `json:"version"`
	Whole   bool     `json:"whole,omitempty"`
	Ranges  []string `json:"ranges,omitempty"`
	Buckets int      `json:"buckets"`
}

type reuseRow struct {
	Name    string   `json:"name"`
	Version string   `json:"version"`
	Covered []string `json:"covered"`
	// Complete: nothing is left to compute for the version.
	Complete bool     `json:"complete"`
	BuiltBy  []string `json:"built_by"`
}

func summarize(pl *plan.Plan) planSummary {
	s := planSummary{ID: pl.ID, Environment: pl.Environment, ExecutionTime: pl.ExecutionTime, Expected: pl.Expected,
		Added: []string{}, Removed: []string{}, Direct: []string{}, Indirect: []string{},
		Changes: pl.Changes, Backfills: []backfillRow{}, Reuses: []reuseRow{}, Policy: summarizePolicy(pl.Options.Policy, pl.Options.Checks())}
	for _, r := range pl.Reuses {
		row := reuseRow{Name: r.Name, Version: r.Version, Covered: rangeStrings(r.Covered), Complete: r.Complete, BuiltBy: r.BuiltBy}
		if row.BuiltBy == nil {
			row.BuiltBy = []string{}
		}
		s.Reuses = append(s.Reuses, row)
	}
	if s.Changes == nil {
		s.Changes = []plan.Change{}
	}
	for _, c := range pl.Changes {
		switch {
		case c.Category == snapshot.Added:
			s.Added = append(s.Added, c.Name)
		case c.Category == snapshot.Removed:
			s.Removed = append(s.Removed, c.Name)
		case c.Category.Direct():
			s.Direct = append(s.Direct, c.Name)
		default:
			s.Indirect = append(s.Indirect, c.Name)
		}
	}
	s.Waits = []waitRow{}
	units := map[string]interval.Unit{}
	for _, snap := range pl.Snapshots {
		units[snap.Name] = snap.Model.IntervalUnit
	}
	for _, w := range pl.Waits {
		row := waitRow{Name: w.Name, Version: w.Version, Whole: w.Whole, Held: rangeStrings(w.Held), Reasons: []string{}}
		if !w.Whole {
			row.Buckets = w.Held.Buckets(units[w.Name])
		}
		for _, src := range w.Sources {
			row.Reasons = append(row.Reasons, source.WaitReason(src.Name, src.CompleteThrough))
		}
		s.Waits = append(s.Waits, row)
	}
	for _, b := range pl.Backfills {
		r := backfillRow{Name: b.Name, Version: b.Version, Whole: b.Whole, Buckets: b.Buckets}
		for rg := range b.Ranges.All() {
			r.Ranges = append(r.Ranges, rg.String())
		}
		s.Backfills = append(s.Backfills, r)
	}
	s.EmptyBackfills, s.NotBackfilled = []backfillRow{}, []string{}
	for _, b := range pl.Empty {
		r := backfillRow{Name: b.Name, Version: b.Version, Whole: b.Whole, Buckets: b.Buckets}
		for rg := range b.Ranges.All() {
			r.Ranges = append(r.Ranges, rg.String())
		}
		s.EmptyBackfills = append(s.EmptyBackfills, r)
	}
	return s
}

// printPlan writes the human form of a plan.
func printPlan(w io.Writer, pl *plan.Plan) {
	s := summarize(pl)
	fmt.Fprintf(w, "Plan %s for %s at %s\n", pl.ID, pl.Environment, pl.ExecutionTime.Format(time.RFC3339))
	if pl.Expected.PlanID == "" {
		fmt.Fprintf(w, "%s does not exist yet: this plan creates it.\n", pl.Environment)
	}
	fmt.Fprintf(w, "Promotion policy: %s\n", policyLine(pl))
	byName := map[string]plan.Change{}
	for _, c := range pl.Changes {
		byName[c.Name] = c
	}
	section := func(title, mark string, names []string) {
		if len(names) == 0 {
			return
		}
		fmt.Fprintf(w, "\n%s (%d):\n", title, len(names))
		for _, n := range names {
			printChange(w, mark, byName[n])
		}
	}
	section("Added", "+", s.Added)
	section("Removed", "-", s.Removed)
	section("Directly modified", "~", s.Direct)
	section("Indirectly modified", "~", s.Indirect)
	if len(pl.Changes) == 0 {
		fmt.Fprintln(w, "\nNo model changed.")
	}
	printBackfills(w, pl, s)
	printWaitsOnSources(w, s.Waits)
	printKindNotes(w, pl) // cli/kinds.go
}

// printWaitsOnSources writes the work the plan holds back until a source
// has landed: the scheduler computes it once the source publishes it.
func printWaitsOnSources(w io.Writer, waits []waitRow) {
	if len(waits) == 0 {
		return
	}
	fmt.Fprintln(w, "\nWaiting on sources (computed by `gapless run` once they have landed):")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, r := range waits {
		what := "whole table"
		if !r.Whole {
			what = plural(int64(r.Buckets), "interval", "intervals") + " in " + strings.Join(r.Held, ", ")
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s: %s\n", r.Name, r.Version, what, strings.Join(r.Reasons, "; "))
	}
	_ = tw.Flush()
}

// printChange writes one change: its category and reason, why it is
// forward-only, and the diffs of its query and header.
func printChange(w io.Writer, mark string, c plan.Change) {
	line := fmt.Sprintf("  %s %s  %s", mark, c.Name, c.Category)
	if c.Reason != "" {
		line += ": " + c.Reason
	} else if c.MetadataChanged {
		line += ", metadata changed" // a plan file from before plans carried reasons
	}
	fmt.Fprintln(w, line)
	if c.ForwardOnly {
		fwd := "forward-only"
		if c.ForwardOnlyReason != "" {
			fwd += ": " + c.ForwardOnlyReason
		}
		fmt.Fprintf(w, "      %s\n", fwd)
	}
	for _, d := range []string{c.Diff, c.HeaderDiff} {
		if d == "" {
			continue
		}
		for _, l := range strings.Split(strings.TrimRight(d, "\n"), "\n") {
			fmt.Fprintf(w, "      %s\n", l)
		}
	}
}

// printBackfills writes the plan's work, one line per new version in DAG
// order: the intervals to compute, and whose table a version reuses when
// another environment built it.
func printBackfills(w io.Writer, pl *plan.Plan, s planSummary) {
	if len(s.Backfills) == 0 && len(s.Reuses) == 0 {
		if pl.Options.SkipBackfill {
			fmt.Fprintln(w, "\nBackfill: skipped (--skip-backfill).")
		} else {
			fmt.Fprintln(w, "\nBackfill: nothing to compute.")
		}
		return
	}
	work := map[string]backfillRow{}
	for _, b := range s.Backfills {
		work[b.Name] = b
	}
	reuse := map[string]reuseRow{}
	for _, r := range s.Reuses {
		reuse[r.Name] = r
	}
	fmt.Fprintln(w, "\nBackfill:")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, snap := range pl.Snapshots {
		b, hasWork := work[snap.Name]
		r, reused := reuse[snap.Name]
		var what, version string
		switch {
		case hasWork && b.Whole:
			what, version = "whole table", b.Version
		case hasWork:
			what, version = plural(int64(b.Buckets), "interval", "intervals")+" in "+strings.Join(b.Ranges, ", "), b.Version
		case reused:
			what, version = reusedTable(r.BuiltBy)+"; nothing to compute", r.Version
		default:
			continue
		}
		if hasWork && reused {
			what += fmt.Sprintf(" (%s for %s)", reusedTable(r.BuiltBy), strings.Join(r.Covered, ", "))
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", snap.Name, version, what)
	}
	_ = tw.Flush()
}

// reusedTable says whose table a version reuses: "reuses the table dev
// built".
func reusedTable(builtBy []string) string {
	if len(builtBy) == 0 {
		return "reuses the table an earlier plan built"
	}
	who := builtBy[0]
	if n := len(builtBy); n > 1 {
		who = strings.Join(builtBy[:n-1], ", ") + " and " + builtBy[n-1]
	}
	return "reuses the table " + who + " built"
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("writing JSON: %w", err)
	}
	return nil
}
