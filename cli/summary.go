package cli

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
)

// A listing command (models, status, environments) prints every row when
// it has at most listLimit of them, or with --all; above that it prints a
// summary (counts) and at most attentionLimit rows that need attention, so
// that a project of 10,000 models answers with a screenful. --json always
// has every row.
const (
	listLimit      = 50
	attentionLimit = 20
)

// listAll reports whether a listing of n rows prints them all.
func listAll(all bool, n int) bool { return all || n <= listLimit }

// countLine is counts as "990 INCREMENTAL_BY_TIME_RANGE, 10 FULL": largest
// first, then by name; "" when empty.
func countLine(counts map[string]int) string {
	keys := slices.SortedFunc(maps.Keys(counts), func(a, b string) int {
		return cmp.Or(cmp.Compare(counts[b], counts[a]), strings.Compare(a, b))
	})
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%d %s", counts[k], k))
	}
	return strings.Join(parts, ", ")
}

// printElided writes the line under a summary's rows: how many of total
// were shown, and that --all lists every row of noun.
func printElided(w io.Writer, shown, total int, noun string) {
	fmt.Fprintf(w, "\n%d of %d %s shown; --all lists every one, --json has every one in full\n", shown, total, noun)
}
