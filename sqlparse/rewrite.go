package sqlparse

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ErrRewrite is wrapped when a table reference cannot be rewritten safely:
// its offset is unknown, or the text at the offset is not the name the
// parser reported.
var ErrRewrite = errors.New("cannot rewrite table reference")

// RewriteTables replaces table references in src, the exact text that was
// parsed into occurrences (Query.Occurrences, offsets into src). For each
// occurrence, replace returns the new text (already quoted for the target
// dialect) and true, or false to leave it as written.
//
// Invariant: only the characters of a reference's qualified name change;
// an alias, a comment or anything else around it stays byte for byte. The
// name at each offset is lexed and checked against what the parser
// reported, so a mismatch fails with ErrRewrite instead of producing wrong
// SQL.
func RewriteTables(src string, occurrences []TableRef, replace func(TableRef) (string, bool)) (string, error) {
	var b strings.Builder
	last := 0
	for _, occ := range occurrences {
		repl, ok := replace(occ)
		if !ok {
			continue
		}
		if occ.Offset < 0 || occ.Offset < last || occ.Offset >= len(src) {
			return "", fmt.Errorf("%w %s: no usable position in the query", ErrRewrite, occ)
		}
		parts, end, err := lexQualifiedName(src, occ.Offset)
		if err != nil {
			return "", fmt.Errorf("%w %s at byte %d: %w", ErrRewrite, occ, occ.Offset, err)
		}
		if got := strings.Join(parts, "."); got != occ.String() {
			return "", fmt.Errorf("%w %s at byte %d: the text there names %s", ErrRewrite, occ, occ.Offset, got)
		}
		b.WriteString(src[last:occ.Offset])
		b.WriteString(repl)
		last = end
	}
	b.WriteString(src[last:])
	return b.String(), nil
}

// lexQualifiedName reads up to three dot-separated identifiers starting at
// off (bare or double-quoted, whitespace allowed around the dots) and
// returns them lower-cased, as TableRef spells them, with the end offset.
func lexQualifiedName(src string, off int) ([]string, int, error) {
	var parts []string
	i := off
	for {
		part, next, err := lexIdent(src, i)
		if err != nil {
			return nil, 0, err
		}
		parts = append(parts, strings.ToLower(part))
		i = next
		j := skipSpace(src, i)
		if len(parts) == 3 || j >= len(src) || src[j] != '.' {
			return parts, i, nil
		}
		i = skipSpace(src, j+1)
	}
}

func lexIdent(src string, i int) (string, int, error) {
	if i >= len(src) {
		return "", 0, errors.New("end of query where a name should be")
	}
	if src[i] == '"' {
		var b strings.Builder
		for j := i + 1; j < len(src); j++ {
			if src[j] != '"' {
				b.WriteByte(src[j])
				continue
			}
			if j+1 < len(src) && src[j+1] == '"' {
				b.WriteByte('"')
				j++
				continue
			}
			return b.String(), j + 1, nil
		}
		return "", 0, errors.New("unterminated quoted name")
	}
	j := i
	for j < len(src) {
		r, size := utf8.DecodeRuneInString(src[j:])
		if !(r == '_' || unicode.IsLetter(r) || (j > i && (unicode.IsDigit(r) || r == '$'))) {
			break
		}
		j += size
	}
	if j == i {
		return "", 0, fmt.Errorf("unexpected %q where a name should be", src[i:min(i+10, len(src))])
	}
	return src[i:j], j, nil
}

func skipSpace(src string, i int) int {
	for i < len(src) && (src[i] == ' ' || src[i] == '\t' || src[i] == '\n' || src[i] == '\r') {
		i++
	}
	return i
}
