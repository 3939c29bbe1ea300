package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/gapless-dev/gapless/backend"
	"github.com/gapless-dev/gapless/ingest"
	"github.com/gapless-dev/gapless/warehouse"
)

func newSourcesCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "sources",
		Short: "List the sources: state, generations, applied position, lag, watermark, blocked batches",
		Long: `Lists every source the state store has registered (the first ingest
pass registers the project's sources): its connector, state, the
generation that serves and the one building (with its chunks applied of
total), the last staged batch applied against the last staged (seq and
position), the lag (how long the oldest batch not applied yet has
waited), the watermark (complete through), and the batches a failing one
holds back, with how long it has failed and why, and the late rows
applied. It reads the state store alone, so it answers while the
scheduler (or another command) holds the DuckDB warehouse file. --json
prints the fields documented in the README; --execution-time is the
"now" ages are measured at.`,
		Args: rangeArgs(0, 0),
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			ctx := cmd.Context()
			return g.withSources(ctx, false, func(p ingest.InspectParams) error {
				rows, err := ingest.ListSummaries(ctx, p)
				if err != nil {
					return err
				}
				if asJSON {
					return writeJSON(g.env.Stdout, rows)
				}
				return printSources(g.env.Stdout, rows)
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.AddCommand(newSourcesShowCmd(g), newSourcesResyncCmd(g))
	return cmd
}

func newSourcesShowCmd(g *globals) *cobra.Command {
	var asJSON bool
	var recent int
	cmd := &cobra.Command{
		Use:   "show SOURCE",
		Short: "Show a source's generations, recent batches and warehouse markers",
		Long: `Shows one source: its summary (as gapless sources), every generation
(kind, pin, chunks applied of total, status, why it was retired), the last
--recent staged batches and whether the serving generation applied each,
and the warehouse's fence and markers against the state store. It does
not wait for the warehouse: when another process holds the DuckDB file it
says so and shows the state store's view.`,
		Args: rangeArgs(1, 1),
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			ctx := cmd.Context()
			if recent < 1 {
				return usagef("--recent must be at least 1, got %d", recent)
			}
			return g.withSources(ctx, true, func(p ingest.InspectParams) error {
				p.Recent = recent
				d, err := ingest.Inspect(ctx, p, args[0])
				if err != nil {
					return err
				}
				if asJSON {
					return writeJSON(g.env.Stdout, d)
				}
				return printSource(g.env.Stdout, d)
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().IntVar(&recent, "recent", 20, "how many of the last staged batches to list")
	return cmd
}

func newSourcesResyncCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "resync SOURCE",
		Short: "Rebuild a source: retire the build in flight, if any, and plan a new generation",
		Long: `Retires the source's build in flight, if any, clears a NEEDS_RESYNC park
and plans the next generation at once, printing both numbers. The serving
generation keeps serving; the next ingest pass (gapless ingest --once, or
the scheduler's) pins the new generation, builds it from a new snapshot,
catches it up and swaps it in. A retired build's late writes are refused
by the warehouse fence.`,
		Args: rangeArgs(1, 1),
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			ctx := cmd.Context()
			_, b, err := g.open(ctx, true)
			if err != nil {
				return err
			}
			defer g.closeBackend(b, &err)
			res, err := ingest.Resync(ctx, b.Store, args[0], g.now())
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(g.env.Stdout, res)
			}
			printResync(g.env.Stdout, res)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// withSources opens the state store and hands fn the parameters the
// sources reads take, with --execution-time as the now ages are measured
// at. With markers it also opens the warehouse to read its fences and
// markers, without waiting: a DuckDB file another process holds leaves
// Engine nil and says why in NotRead.
func (g *globals) withSources(ctx context.Context, markers bool, fn func(ingest.InspectParams) error) (err error) {
	now, err := g.execTime()
	if err != nil {
		return err
	}
	cfg, b, err := g.open(ctx, true)
	if err != nil {
		return err
	}
	defer g.closeBackend(b, &err)
	p := ingest.InspectParams{Store: b.Store, Now: now}
	if !markers {
		return fn(p)
	}
	opts := g.backendOptions(false)
	opts.LockWait = -1 // do not wait: show the state store's view instead
	e, err := backend.OpenEngine(ctx, cfg.Warehouse, opts)
	var locked *backend.LockedError
	switch {
	case errors.As(err, &locked):
		p.NotRead = fmt.Sprintf("the warehouse file %s is in use by another process", locked.Path)
		return fn(p)
	case err != nil:
		return err
	}
	defer func() {
		if cerr := e.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("closing the warehouse: %w", cerr))
		}
	}()
	if in, ok := e.(warehouse.Ingester); ok {
		p.Engine = in
	}
	return fn(p)
}

func genOrDash(g int64) string {
	if g == 0 {
		return "-"
	}
	return fmt.Sprintf("g%d", g)
}

func ageText(seconds float64) string {
	return (time.Duration(seconds * float64(time.Second))).Round(time.Second).String()
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func printSources(w io.Writer, rows []ingest.Summary) error {
	if len(rows) == 0 {
		_, err := fmt.Fprintln(w, "No sources registered (the first `gapless ingest --once` registers the project's sources).")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SOURCE\tCONNECTOR\tSTATE\tSERVING\tBUILDING\tAPPLIED/HEAD\tLAG\tWATERMARK\tBLOCKED")
	for _, r := range rows {
		building := genOrDash(r.BuildingGeneration)
		if r.BuildingGeneration != 0 {
			building += fmt.Sprintf(" (%d/%d)", r.ChunksApplied, r.Chunks)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\tseq %d / %d\t%s\t%s\t%d\n", r.Source, r.Connector, r.State, genOrDash(r.ServingGeneration),
			building, r.AppliedSeq, r.HeadSeq, ageText(r.LagSeconds), stamp(r.Watermark), r.BlockedBatches)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range rows {
		if r.ParkedReason != "" {
			fmt.Fprintf(w, "  %s: %s; run `gapless sources resync %s`\n", r.Source, r.ParkedReason, r.Source)
		}
		if b := r.Blocked; b != nil {
			fmt.Fprintf(w, "  %s: blocked for %s at batch %d (%s); fix or remove the file and ingest again\n",
				r.Source, ageText(b.FailingSeconds), b.Seq, b.Location)
			fmt.Fprintf(w, "    %s, last: %s\n", attemptsText(b.Attempts), firstLine(b.Reason))
		}
	}
	return nil
}

func printSource(w io.Writer, d *ingest.Detail) error {
	fmt.Fprintf(w, "%s (%s): %s, serving %s, building %s\n", d.Source, d.Connector, d.State, genOrDash(d.ServingGeneration), genOrDash(d.BuildingGeneration))
	fmt.Fprintf(w, "Applied: seq %d (position %d) of head seq %d (position %d), %d pending, lag %s, watermark %s\n",
		d.AppliedSeq, d.AppliedPosition, d.HeadSeq, d.HeadPosition, d.PendingBatches, ageText(d.LagSeconds), stamp(d.Watermark))
	if d.ParkedReason != "" {
		fmt.Fprintf(w, "Parked NEEDS_RESYNC: %s\n", d.ParkedReason)
	}
	if b := d.Blocked; b != nil {
		fmt.Fprintf(w, "Blocked: %d batch(es) held back, from batch %d (%s), staged %s, %s ago\n", d.BlockedBatches, b.Seq, b.Location, stamp(b.StagedAt), ageText(b.AgeSeconds))
		fmt.Fprintf(w, "  on g%d since %s (%s ago), %s, last: %s\n", b.Generation, stamp(b.FirstFailedAt), ageText(b.FailingSeconds),
			attemptsText(b.Attempts), firstLine(b.Reason))
	}
	if d.LateRows > 0 {
		fmt.Fprintf(w, "Late rows: %d applied older than the watermark already published\n", d.LateRows)
	}
	fmt.Fprintln(w, "Generations:")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, g := range d.Generations {
		pin := "unpinned"
		if g.Pin != nil {
			pin = fmt.Sprintf("pin %d", *g.Pin)
			if g.PinLabel != "" {
				pin += " (" + g.PinLabel + ")"
			}
		}
		status := string(g.Status)
		if g.Reason != "" {
			status += ": " + g.Reason
		}
		fmt.Fprintf(tw, "  g%d\t%s\t%s\tchunks %d/%d\tlast batch %d\t%s\n", g.Generation, g.Kind, pin, g.ChunksApplied, g.Chunks, g.LastBatch, status)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "Recent batches (%d):\n", len(d.RecentBatches))
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, b := range d.RecentBatches {
		applied := "pending"
		if b.Applied {
			applied = "applied"
		}
		kind := string(b.Kind)
		if b.ReplaceRun != "" {
			kind += " " + b.ReplaceRun
		}
		loc := b.Location
		if b.Rows > 0 {
			loc += fmt.Sprintf(" (%d rows)", b.Rows)
		}
		fmt.Fprintf(tw, "  seq %d\t[%d, %d)\t%s\t%s\tstaged %s\t%s\n", b.Seq, b.From, b.To, kind, loc, stamp(b.StagedAt), applied)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	wh := d.Warehouse
	if !wh.Read {
		fmt.Fprintf(w, "Warehouse: markers not read: %s; shown: the state store's record\n", wh.NotRead)
		return nil
	}
	if !wh.Exists {
		fmt.Fprintln(w, "Warehouse: no fence yet (nothing planned there)")
	} else {
		fmt.Fprintf(w, "Warehouse: fenced for %s, serving %s, %d marker(s)\n", genOrDash(wh.PlannedGeneration), genOrDash(wh.ServingGeneration), wh.Markers)
	}
	if len(wh.Disagreements) == 0 {
		fmt.Fprintln(w, "  agrees with the state store")
	}
	for _, s := range wh.Disagreements {
		fmt.Fprintln(w, "  "+s)
	}
	return nil
}

// firstLine is s up to its first line break: a failure's reason may go on
// with the SQL that failed, which --json keeps.
func firstLine(s string) string {
	first, _, _ := strings.Cut(s, "\n")
	return first
}

func attemptsText(n int) string {
	if n == 1 {
		return "failed once"
	}
	return fmt.Sprintf("failed %d times", n)
}

func printResync(w io.Writer, r ingest.ResyncResult) {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: ", r.Source)
	if r.Retired != 0 {
		fmt.Fprintf(&b, "retired generation %d (the build in flight), ", r.Retired)
	} else {
		b.WriteString("no build was in flight, ")
	}
	fmt.Fprintf(&b, "planned generation %d", r.Planned)
	if r.Unparked {
		b.WriteString("; cleared NEEDS_RESYNC")
	}
	b.WriteString(".\n")
	if r.Serving != 0 {
		fmt.Fprintf(&b, "Generation %d serves until %d swaps in; the next ingest pass builds it.\n", r.Serving, r.Planned)
	} else {
		fmt.Fprintf(&b, "The next ingest pass builds generation %d.\n", r.Planned)
	}
	fmt.Fprint(w, b.String())
}
