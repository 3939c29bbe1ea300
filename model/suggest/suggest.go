// Package suggest picks the known word closest to a misspelt one, for the
// "did you mean ...?" hints in gapless's error messages.
//
// It lives under model/ because the model header parser is its main user; the
// config and macro packages use it too. It has no dependencies and never
// panics, whatever the input.
package suggest

import (
	"strings"
	"unicode/utf8"
)

// Distance is the optimal-string-alignment edit distance between a and b,
// compared case-insensitively and by runes: the number of single-rune
// insertions, deletions, substitutions and adjacent transpositions that turn
// one into the other. Invalid UTF-8 bytes count as one rune each.
func Distance(a, b string) int {
	ra := []rune(strings.ToLower(a))
	rb := []rune(strings.ToLower(b))
	// d[i][j] is the distance between ra[:i] and rb[:j]; three rows suffice
	// because a transposition looks back two rows.
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			best := min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				best = min(best, prev2[j-2]+1)
			}
			cur[j] = best
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}

// Closest returns the candidate nearest to word, and whether it is near
// enough to be worth suggesting: within an edit distance of max(2, n/3) where
// n is the rune length of word, or else (a truncated word) the first
// candidate that word is a prefix of, when word has at least minPrefix runes.
// Ties go to the earlier candidate, so callers control preference by
// ordering. An exact (case-insensitive) match is never "suggested": it
// returns ("", false), since the caller's problem lies elsewhere.
func Closest(word string, candidates []string) (string, bool) {
	n := utf8.RuneCountInString(word)
	limit := max(2, n/3)
	best, bestDist := "", limit+1
	for _, c := range candidates {
		d := Distance(word, c)
		if d == 0 {
			return "", false
		}
		if d < bestDist {
			best, bestDist = c, d
		}
	}
	if best != "" || n < minPrefix {
		return best, best != ""
	}
	lower := strings.ToLower(word)
	for _, c := range candidates {
		if strings.HasPrefix(strings.ToLower(c), lower) {
			return c, true
		}
	}
	return "", false
}

// minPrefix is the shortest word Closest completes by prefix.
const minPrefix = 4
