package unittest

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// Write prints the report as SQLMesh's test runner does, in text: one
// block per test that did not pass (its name, file and line, and the diff
// of its rows or why it could not run), then a summary line, "OK" or
// "FAILED (failures=N, errors=M)".
func (r Report) Write(w io.Writer) error {
	var b strings.Builder
	for _, res := range r.Results {
		if res.Status == Passed {
			continue
		}
		t := res.Test
		b.WriteString(strings.Repeat("=", 70) + "\n")
		fmt.Fprintf(&b, "%s: %s (%s:%d), model %s\n", res.Status, t.Name, t.File, t.Line, t.Model)
		if t.Description != "" {
			fmt.Fprintf(&b, "  %s\n", t.Description)
		}
		b.WriteString(strings.Repeat("-", 70) + "\n")
		if res.Err != nil {
			b.WriteString(res.Err.Error() + "\n")
		}
		for _, mm := range res.Mismatches {
			writeMismatch(&b, t, mm)
		}
		b.WriteString("\n")
	}
	b.WriteString(strings.Repeat("-", 70) + "\n")
	plural := "s"
	if len(r.Results) == 1 {
		plural = ""
	}
	fmt.Fprintf(&b, "Ran %d test%s in %.3fs\n\n", len(r.Results), plural, r.Duration.Seconds())
	if r.OK() {
		b.WriteString("OK\n")
	} else {
		var parts []string
		if n := r.Count(Failed); n > 0 {
			parts = append(parts, fmt.Sprintf("failures=%d", n))
		}
		if n := r.Count(Errored); n > 0 {
			parts = append(parts, fmt.Sprintf("errors=%d", n))
		}
		fmt.Fprintf(&b, "FAILED (%s)\n", strings.Join(parts, ", "))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func writeMismatch(b *strings.Builder, t *Test, mm *Mismatch) {
	how := "rows compared in any order"
	if mm.Ordered {
		how = "rows compared in order: the query has ORDER BY"
	}
	fmt.Fprintf(b, "%s:%d: %s: data mismatch (%s)\n", t.File, mm.Line, mm.Output, how)
	if len(mm.Changed) > 0 {
		b.WriteString("\n  Differing rows (expected -> actual):\n")
		for _, c := range mm.Changed {
			fmt.Fprintf(b, "    %s:\n", c.Key)
			tw := tabwriter.NewWriter(b, 0, 2, 2, ' ', 0)
			for _, d := range c.Columns {
				fmt.Fprintf(tw, "      %s\texpected %s\tactual %s\n", d.Column, d.Expected, d.Actual)
			}
			_ = tw.Flush()
		}
	}
	writeRows(b, "Missing rows (expected, not returned)", mm.Columns, mm.Missing)
	writeRows(b, "Unexpected rows (returned, not expected)", mm.Columns, mm.Unexpected)
}

func writeRows(b *strings.Builder, title string, cols []string, rows [][]string) {
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(b, "\n  %s:\n", title)
	tw := tabwriter.NewWriter(b, 0, 2, 2, ' ', 0)
	fmt.Fprintf(tw, "    %s\n", strings.Join(cols, "\t"))
	for _, r := range rows {
		fmt.Fprintf(tw, "    %s\n", strings.Join(r, "\t"))
	}
	_ = tw.Flush()
}
