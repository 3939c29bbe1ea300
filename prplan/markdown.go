package prplan

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gapless-dev/gapless/apply"
	"github.com/gapless-dev/gapless/codehost"
	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/plan"
	"github.com/gapless-dev/gapless/promotion"
	"github.com/gapless-dev/gapless/snapshot"
	"github.com/gapless-dev/gapless/source"
)

// The markdown functions say, from the plan's own data (what `gapless plan`
// prints), what a preview or a build found. Their output is deterministic
// (the same plan and result give the same bytes) and at most
// codehost.MaxBodyLength bytes, which bounds GitHub's characters too: a
// longer one is cut between blocks (a fenced diff is cut between its lines
// and closed), and ends with a line saying so and how to see the rest.
//
// Text that comes from the pull request (model and column names in
// reasons, diffs) is escaped: inline text cannot open markdown or HTML, a
// fence is longer than any run of backticks it holds, and "<!--" never
// appears as such, so a diff cannot forge the hidden marker of a bot
// comment.

// PreviewMarkdown is the "Prod plan preview": the prod generation and plan
// pl was planned against; the changed models, each with its category and
// reason, and for a direct change the diff of its query and of its MODEL
// header (fenced ```diff) where they changed; the backfill per model (its
// intervals and their ranges, or the whole table, or whose table it
// reuses); what waits on sources; the promotion policy; "No changes" when
// deploying would do nothing.
func PreviewMarkdown(pl *plan.Plan) string {
	var d doc
	d.text("## Prod plan preview\n\n")
	if pl.Expected.PlanID == "" {
		d.text(fmt.Sprintf("Planned at %s. **prod does not exist yet**: deploying creates it (generation 1).\n\n", stamp(pl.ExecutionTime)))
	} else {
		d.text(fmt.Sprintf("Planned against **prod generation %d** (plan %s) at %s.\n\n",
			pl.Expected.Generation, code(pl.Expected.PlanID), stamp(pl.ExecutionTime)))
	}
	d.text(policyMarkdown(pl))
	if len(pl.Changes) == 0 && len(pl.Backfills) == 0 && len(pl.Waits) == 0 {
		if pl.Expected.PlanID == "" {
			d.text("**No changes**: the project has no model to deploy.\n")
		} else {
			d.text("**No changes**: prod already serves this project; deploying would change nothing and compute nothing.\n")
		}
		return d.render(codehost.MaxBodyLength, truncatedLine("`gapless plan prod`"))
	}
	changes(&d, pl, true)
	backfills(&d, pl)
	waits(&d, pl)
	return d.render(codehost.MaxBodyLength, truncatedLine("`gapless plan prod`"))
}

// EnvironmentMarkdown says what building environment env did (pl applied,
// with result res; nil res when nothing was applied): the generation
// promoted, the backfill window, the models changed (from prod for a new
// environment, since its previous build otherwise), what was computed per
// model and what was reused, what waits on sources, and how to query the
// environment (<schema>__<env>.<table>).
func EnvironmentMarkdown(env string, pl *plan.Plan, res *apply.Result) string {
	var d doc
	d.text(fmt.Sprintf("## PR environment %s\n\n", code(env)))
	switch {
	case res == nil || res.Environment == nil:
		d.text(fmt.Sprintf("Plan %s at %s was **not applied**; the environment is as it was.\n\n", code(pl.ID), stamp(pl.ExecutionTime)))
	case UpToDate(pl) && res.Environment.PlanID == pl.Expected.PlanID:
		d.text(fmt.Sprintf("Up to date at %s: generation %d (plan %s) already serves this commit; nothing was applied.\n\n",
			stamp(pl.ExecutionTime), res.Environment.Generation, code(res.Environment.PlanID)))
	case pl.Expected.PlanID == "":
		d.text(fmt.Sprintf("Created from prod by plan %s at %s: generation %d.\n\n",
			code(lastPlanID(pl, res)), stamp(pl.ExecutionTime), res.Environment.Generation))
	default:
		d.text(fmt.Sprintf("Updated by plan %s at %s: generation %d (it served plan %s).\n\n",
			code(lastPlanID(pl, res)), stamp(pl.ExecutionTime), res.Environment.Generation, code(pl.Expected.PlanID)))
	}
	switch {
	case pl.Options.Start.IsZero():
	case !pl.Options.Start.Before(pl.ExecutionTime):
		d.text(fmt.Sprintf("Backfill window: empty, since `pr_start` (%s) is not before the execution time; only what is built whole was computed.\n\n",
			stamp(pl.Options.Start)))
	default:
		d.text(fmt.Sprintf("Backfill window: from %s (`pr_start`) to %s; earlier intervals of the models it builds are not computed.\n\n",
			stamp(pl.Options.Start), stamp(pl.ExecutionTime)))
	}
	if len(pl.Changes) == 0 {
		if pl.Expected.PlanID == "" {
			d.text("No model differs from prod: the environment serves prod's tables.\n\n")
		} else {
			d.text("No model changed since the previous build.\n\n")
		}
	} else {
		changes(&d, pl, false)
	}
	computed(&d, pl, res)
	waits(&d, pl)
	queryHelp(&d, env, pl)
	return d.render(codehost.MaxBodyLength, truncatedLine(fmt.Sprintf("`gapless status %s`", env)))
}

// truncatedLine is the last line of a cut document: how to see the rest.
func truncatedLine(command string) string {
	return "\n---\n\n:warning: **Truncated**: the rest does not fit in what GitHub shows (" +
		fmt.Sprint(codehost.MaxBodyLength) + " characters). Run " + command + " locally to see all of it.\n"
}

// policyMarkdown is the plan's promotion policy and what it does.
func policyMarkdown(pl *plan.Plan) string {
	if !pl.Options.Checks() {
		return "**Promotion policy:** none: the plan runs no no-gap check at promotion.\n\n"
	}
	p := pl.Options.Policy.OrDefault()
	var what string
	switch p.Name {
	case promotion.Strict:
		what = "if the scheduler advances prod while the deploy backfills, the promotion is refused and prod keeps serving what it served"
	case promotion.TrailingGap:
		what = fmt.Sprintf("if the scheduler advances prod meanwhile, a trailing gap of at most %d interval(s) is accepted as freshness debt, which the next run repairs",
			p.MaxTrailingGapIntervals)
	case promotion.CatchUp:
		what = fmt.Sprintf("if the scheduler advances prod meanwhile, the deploy computes what it added (at most %d rounds) and promotes with no gap", p.Attempts())
	case promotion.Replan:
		what = fmt.Sprintf("if the scheduler advances prod meanwhile, the deploy plans again and applies the fresh plan (at most %d times)", p.Attempts())
	case promotion.Lock:
		what = "the deploy takes the replaced versions' leases, so the scheduler waits for it"
	default:
		what = "see the policy's documentation"
	}
	return fmt.Sprintf("**Promotion policy:** %s, with the no-gap check: %s.\n\n", code(p.String()), what)
}

// changes writes the plan's changes by kind; withDiffs adds, for each
// direct change, its query and header diffs.
func changes(d *doc, pl *plan.Plan, withDiffs bool) {
	var added, removed, direct, indirect []plan.Change
	for _, c := range pl.Changes {
		switch {
		case c.Category == snapshot.Added:
			added = append(added, c)
		case c.Category == snapshot.Removed:
			removed = append(removed, c)
		case c.Category.Direct():
			direct = append(direct, c)
		default:
			indirect = append(indirect, c)
		}
	}
	var parts []string
	for _, g := range []struct {
		n    int
		what string
	}{{len(added), "added"}, {len(removed), "removed"}, {len(direct), "directly modified"}, {len(indirect), "indirectly modified"}} {
		if g.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", g.n, g.what))
		}
	}
	title := "Changes"
	if pl.Environment != plan.Prod && pl.Expected.PlanID != "" {
		title = "Changes since the previous build"
	} else if pl.Environment != plan.Prod {
		title = "Changes from prod"
	}
	d.text(fmt.Sprintf("### %s\n\n%s: %s.\n\n", title, plural(len(pl.Changes), "model changes", "models change"), strings.Join(parts, ", ")))
	list := func(title string, cs []plan.Change) {
		if len(cs) == 0 {
			return
		}
		d.text(fmt.Sprintf("#### %s (%d)\n\n", title, len(cs)))
		for _, c := range cs {
			d.text("- " + changeLine(c) + "\n")
		}
		d.text("\n")
	}
	list("Added", added)
	list("Removed", removed)
	if withDiffs {
		if len(direct) > 0 {
			d.text(fmt.Sprintf("#### Directly modified (%d)\n\n", len(direct)))
		}
		for _, c := range direct {
			d.text(changeLine(c) + "\n\n")
			for _, diff := range []string{c.Diff, c.HeaderDiff} {
				if diff != "" {
					d.fence("diff", strings.Split(strings.TrimRight(diff, "\n"), "\n"))
				}
			}
		}
	} else {
		list("Directly modified", direct)
	}
	list("Indirectly modified", indirect)
}

// changeLine is one change: its model, category and reason, and why it is
// forward-only.
func changeLine(c plan.Change) string {
	line := fmt.Sprintf("%s **%s**", code(c.Name), c.Category)
	if c.Reason != "" {
		line += ": " + inline(c.Reason)
	} else if c.MetadataChanged {
		line += ": metadata changed"
	}
	if c.ForwardOnly {
		line += "; forward-only"
		if c.ForwardOnlyReason != "" {
			line += ": " + inline(c.ForwardOnlyReason)
		}
	}
	return line
}

// backfills writes the plan's work per model, in DAG order, as `gapless
// plan` prints it.
func backfills(d *doc, pl *plan.Plan) {
	d.text("### Backfill\n\n")
	if len(pl.Backfills) == 0 && len(pl.Reuses) == 0 {
		if pl.Options.SkipBackfill {
			d.text("Skipped (the plan skips its backfill).\n\n")
		} else {
			d.text("Nothing to compute.\n\n")
		}
		return
	}
	work := map[string]plan.Backfill{}
	for _, b := range pl.Backfills {
		work[b.Name] = b
	}
	reuse := map[string]plan.Reuse{}
	for _, r := range pl.Reuses {
		reuse[r.Name] = r
	}
	d.text("| Model | Version | Work |\n| --- | --- | --- |\n")
	for _, s := range pl.Snapshots {
		b, hasWork := work[s.Name]
		r, reused := reuse[s.Name]
		var what, version string
		switch {
		case hasWork && b.Whole:
			what, version = "whole table", b.Version
		case hasWork:
			what, version = plural(b.Buckets, "interval", "intervals")+" in "+ranges(b.Ranges), b.Version
		case reused:
			what, version = reusedTable(r.BuiltBy)+"; nothing to compute", r.Version
		default:
			continue
		}
		if hasWork && reused {
			what += fmt.Sprintf(" (%s for %s)", reusedTable(r.BuiltBy), ranges(r.Covered))
		}
		d.text(fmt.Sprintf("| %s | %s | %s |\n", code(s.Name), code(version), cell(what)))
	}
	d.text("\n")
}

// computed writes what an apply computed per model, and what it reused.
func computed(d *doc, pl *plan.Plan, res *apply.Result) {
	if res == nil {
		return
	}
	d.text("### Computed\n\n")
	if len(res.Models) == 0 {
		d.text("Nothing: every table it serves was built already.\n\n")
	} else {
		d.text("| Model | Version | Batches | Rows | Computed | Already done |\n| --- | --- | --- | --- | --- | --- |\n")
		for _, m := range res.Models {
			d.text(fmt.Sprintf("| %s | %s | %d | %d | %s | %s |\n", code(m.Model), code(m.Version), m.Batches, m.Rows,
				cell(rangesOrDash(m.Recorded)), cell(rangesOrDash(m.Skipped))))
		}
		d.text("\n")
	}
	if len(pl.Reuses) > 0 {
		d.text("Reused:\n\n")
		for _, r := range pl.Reuses {
			line := fmt.Sprintf("- %s %s %s", code(r.Name), code(r.Version), reusedTable(r.BuiltBy))
			if !r.Complete {
				line += " for " + ranges(r.Covered)
			}
			d.text(line + "\n")
		}
		d.text("\n")
	}
}

// waits writes the work the plan holds back until a source has landed.
func waits(d *doc, pl *plan.Plan) {
	if len(pl.Waits) == 0 {
		return
	}
	units := map[string]interval.Unit{}
	for _, s := range pl.Snapshots {
		units[s.Name] = s.Model.IntervalUnit
	}
	d.text("### Waiting on sources\n\nComputed by the scheduler once the sources have landed.\n\n| Model | Version | Held back | Why |\n| --- | --- | --- | --- |\n")
	for _, w := range pl.Waits {
		what := "whole table"
		if !w.Whole {
			what = plural(w.Held.Buckets(units[w.Name]), "interval", "intervals") + " in " + ranges(w.Held)
		}
		var why []string
		for _, src := range w.Sources {
			why = append(why, source.WaitReason(src.Name, src.CompleteThrough))
		}
		d.text(fmt.Sprintf("| %s | %s | %s | %s |\n", code(w.Name), code(w.Version), cell(what), cell(inline(strings.Join(why, "; ")))))
	}
	d.text("\n")
}

// queryHelp says how to query env: each schema's environment schema, and
// an example query.
func queryHelp(d *doc, env string, pl *plan.Plan) {
	var schemas []string
	seen := map[string]bool{}
	example := ""
	for _, s := range pl.Snapshots {
		if s.Model.Source {
			continue // sources are shared by every environment, under their own names
		}
		if sc := s.Model.Schema(); !seen[sc] {
			seen[sc] = true
			schemas = append(schemas, sc)
		}
		if example == "" {
			example = s.Name
		}
	}
	for _, c := range pl.Changes {
		if c.Category.Direct() || c.Category == snapshot.Added {
			for _, s := range pl.Snapshots {
				if s.Name == c.Name && !s.Model.Source {
					example = c.Name
				}
			}
			break
		}
	}
	if example == "" {
		return
	}
	d.text(fmt.Sprintf("### Query it\n\nEvery model is served in %s as %s:\n\n| Schema | In %s |\n| --- | --- |\n",
		code(env), code("<schema>__"+env+".<table>"), cell(inline(env))))
	for _, sc := range schemas {
		d.text(fmt.Sprintf("| %s | %s |\n", code(sc), code(snapshot.EnvironmentSchema(sc, env))))
	}
	var ex string
	for _, s := range pl.Snapshots {
		if s.Name == example {
			ex = snapshot.EnvironmentSchema(s.Model.Schema(), env) + "." + s.Model.Table()
		}
	}
	d.text("\n")
	d.fence("sql", []string{"SELECT * FROM " + ex + " LIMIT 10;"})
	d.text(fmt.Sprintf("or `gapless query \"SELECT * FROM %s LIMIT 10\"` in a checkout of this branch.\n", ex))
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// reusedTable says whose table a version reuses, as `gapless plan` does.
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

// ranges writes a set as its ranges, comma-separated.
func ranges(s interval.Set) string {
	parts := make([]string, 0, s.Len())
	for r := range s.All() {
		parts = append(parts, r.String())
	}
	return strings.Join(parts, ", ")
}

func rangesOrDash(s interval.Set) string {
	if s.IsEmpty() {
		return "-"
	}
	return ranges(s)
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// inline escapes text for a markdown paragraph or table cell: it can open
// no emphasis, link, code, HTML or table cell, and mentions no one.
func inline(s string) string {
	var b strings.Builder
	for _, r := range oneLine(s) {
		switch r {
		case '\\', '`', '*', '_', '[', ']', '<', '>', '|', '~', '#', '!', '&':
			b.WriteByte('\\')
			b.WriteRune(r)
		case '@':
			b.WriteString("@\u200b") // no mention
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// cell is text for a table cell (already escaped where it came from the
// pull request): no newline, no unescaped '|'.
func cell(s string) string {
	s = oneLine(s)
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '|' && (i == 0 || s[i-1] != '\\') {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// oneLine replaces line breaks with spaces and defuses "<!--".
func oneLine(s string) string {
	s = strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ").Replace(s)
	return noComment(s)
}

// noComment breaks every "<!--", so that no text gapless writes from a
// pull request can carry a bot comment's hidden marker.
func noComment(s string) string { return strings.ReplaceAll(s, "<!--", "<!-\u200b-") }

// code is s as an inline code span, safe in a table cell: the delimiter is
// one backtick more than the longest run inside, '|' is escaped, and
// "<!--" defused.
func code(s string) string {
	s = oneLine(s)
	fence := strings.Repeat("`", longestRun(s, '`')+1)
	pad := ""
	if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") {
		pad = " "
	}
	return fence + pad + strings.ReplaceAll(s, "|", `\|`) + pad + fence
}

// longestRun is the length of the longest run of c in s.
func longestRun(s string, c byte) int {
	best, cur := 0, 0
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			cur++
			best = max(best, cur)
		} else {
			cur = 0
		}
	}
	return best
}

// maxLineBytes bounds one line of a fenced block: a longer one (minified
// SQL) is cut, said with " …(cut)".
const maxLineBytes = 2000

// doc is a markdown document as blocks, so that it can be cut between
// them.
type doc struct{ blocks []block }

// block is text (complete markdown), or a fenced code block, which may be
// cut between its lines.
type block struct {
	text  string
	lang  string
	lines []string
}

func (d *doc) text(s string) { d.blocks = append(d.blocks, block{text: s}) }

// fence adds a fenced code block of lines in language lang.
func (d *doc) fence(lang string, lines []string) {
	out := make([]string, len(lines))
	for i, l := range lines {
		l = noComment(strings.TrimRight(l, "\r"))
		if len(l) > maxLineBytes {
			l = cutUTF8(l, maxLineBytes) + " …(cut)"
		}
		out[i] = l
	}
	d.blocks = append(d.blocks, block{lang: lang, lines: out})
}

// fenceMarks are the opening and closing lines of a fenced block holding
// lines: backticks one more than any run inside, at least three.
func fenceMarks(lang string, lines []string) (string, string) {
	n := 3
	for _, l := range lines {
		n = max(n, longestRun(l, '`')+1)
	}
	f := strings.Repeat("`", n)
	return f + lang + "\n", f + "\n\n"
}

// String renders the block whole.
func (b block) String() string {
	if b.lines == nil {
		return b.text
	}
	open, closing := fenceMarks(b.lang, b.lines)
	return open + strings.Join(b.lines, "\n") + "\n" + closing
}

// render is the document, or, when it is longer than limit bytes, as many
// whole blocks as fit with note after them, a fenced block that does not
// fit cut between its lines and closed.
func (d *doc) render(limit int, note string) string {
	var all strings.Builder
	for _, b := range d.blocks {
		all.WriteString(b.String())
	}
	if all.Len() <= limit {
		return all.String()
	}
	budget := limit - len(note)
	var out strings.Builder
	for _, b := range d.blocks {
		s := b.String()
		if out.Len()+len(s) <= budget {
			out.WriteString(s)
			continue
		}
		if b.lines != nil {
			out.WriteString(cutFence(b, budget-out.Len()))
		}
		break
	}
	out.WriteString(note)
	return out.String()
}

// cutFence is as much of the fenced block b as fits in room bytes, closed,
// with a line saying how many lines are left out; "" when not even one line
// fits.
func cutFence(b block, room int) string {
	open, closing := fenceMarks(b.lang, b.lines)
	var body strings.Builder
	for i, l := range b.lines {
		more := fmt.Sprintf("… %d more lines not shown\n", len(b.lines)-i)
		if len(open)+body.Len()+len(l)+1+len(more)+len(closing) > room {
			if i == 0 {
				return ""
			}
			return open + body.String() + more + closing
		}
		body.WriteString(l + "\n")
	}
	return open + body.String() + closing // not reached: the whole block did not fit
}

// cutUTF8 is the longest prefix of s of at most n bytes that ends on a
// character boundary.
func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
