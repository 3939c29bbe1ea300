package model

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"unicode/utf8"
)

// FormatOptions are the choices of Format.
type FormatOptions struct {
	// Defaults are the project's model defaults: Format parses the file
	// with them, as loading the project does.
	Defaults Defaults
	// WhitespaceOnly changes nothing in the query but whitespace: no
	// keyword case, no comma spacing. Format chooses it by itself for a
	// query with macro calls (@IF(...), @STAR(...)), whose fingerprint
	// covers the query's words as written.
	WhitespaceOnly bool
	// AppendNewline ends the file with a newline when it has none.
	AppendNewline bool
}

// Format returns src, a model file, in gapless's canonical layout (what
// `gapless format` writes):
//
//   - comments before the header and the statements before and after the
//     query (pre- and post-statements, AUDIT blocks) are kept as written,
//     with blank lines around them trimmed;
//   - the MODEL (...) header has one attribute per line, indented by two
//     spaces, attribute and kind property names in lower case, the kind's
//     name in upper case and its properties one per line, columns one per
//     line, and a trailing ';'. Comments in the header stay attached to
//     the attribute they precede or follow;
//   - in the query, runs of spaces become one space, trailing whitespace
//     and repeated blank lines go, and (unless WhitespaceOnly) reserved
//     keywords are upper-cased and a comma is followed by one space and
//     preceded by none. Strings, quoted identifiers, comments and macros
//     (@DEF, @{x}, @start_ds) are kept byte for byte.
//
// Invariants: Format(Format(src)) == Format(src); the result parses
// (ParseFile) to the same Model as src, positions aside, with a query
// equal token for token up to keyword case (or, WhitespaceOnly, word for
// word). Format checks the second itself: where the layout of an
// attribute's value would change what it parses to, the value is kept as
// written. A file that does not parse is returned with the *Error of
// ParseFile and no output.
func Format(path string, src []byte, opts FormatOptions) ([]byte, error) {
	before, err := ParseFile(path, src, opts.Defaults)
	if err != nil {
		return nil, err
	}
	if !opts.WhitespaceOnly && hasMacroCall(before.Query) {
		opts.WhitespaceOnly = true
	}
	var lastErr error
	// Tiers, most canonical first: the header's values laid out, then
	// kept as written.
	for _, verbatim := range []bool{false, true} {
		out, err := formatFile(src, before, opts, verbatim)
		if err != nil {
			lastErr = err
			continue
		}
		if err := sameModel(path, before, out, opts); err != nil {
			lastErr = err
			continue
		}
		return out, nil
	}
	return nil, fmt.Errorf("%s: formatting would change the model, so the file is left as it is: %w", path, lastErr)
}

// sameModel checks that out parses to before, positions aside, with an
// equivalent query (queryEquivalent).
func sameModel(path string, before *Model, out []byte, opts FormatOptions) error {
	after, err := ParseFile(path, out, opts.Defaults)
	if err != nil {
		return fmt.Errorf("the formatted file does not parse: %w", err)
	}
	if !queryEquivalent(before.Query, after.Query, opts.WhitespaceOnly) {
		return fmt.Errorf("the formatted query differs")
	}
	a, err := settingsOf(before)
	if err != nil {
		return err
	}
	b, err := settingsOf(after)
	if err != nil {
		return err
	}
	if !reflect.DeepEqual(a, b) {
		return fmt.Errorf("the formatted header parses to different settings")
	}
	return nil
}

// settingsOf is m without its query and positions, as a fresh copy.
func settingsOf(m *Model) (*Model, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("copying model %s: %w", m.Name, err)
	}
	var c Model
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("copying model %s: %w", m.Name, err)
	}
	c.Query = ""
	zeroPositions(reflect.ValueOf(&c).Elem())
	return &c, nil
}

var posType = reflect.TypeFor[Pos]()

// zeroPositions sets every Pos reachable from v to its zero value.
func zeroPositions(v reflect.Value) {
	switch v.Kind() {
	case reflect.Struct:
		if v.Type() == posType {
			if v.CanSet() {
				v.Set(reflect.Zero(posType))
			}
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				zeroPositions(v.Field(i))
			}
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			zeroPositions(v.Index(i))
		}
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			zeroPositions(v.Elem())
		}
	case reflect.Map:
		// Map values are not addressable; models hold no Pos in maps.
	}
}

// queryEquivalent: a and b have the same tokens, keywords compared without
// case (whitespaceOnly: the same words, whitespace aside).
func queryEquivalent(a, b string, whitespaceOnly bool) bool {
	if whitespaceOnly {
		return reflect.DeepEqual(strings.Fields(a), strings.Fields(b))
	}
	ta, err := sqlTokens(a)
	if err != nil {
		return false
	}
	tb, err := sqlTokens(b)
	if err != nil {
		return false
	}
	ta, tb = significant(ta, true), significant(tb, true)
	if len(ta) != len(tb) {
		return false
	}
	for i := range ta {
		if ta[i].text != tb[i].text && !(ta[i].kind == ftWord && strings.EqualFold(ta[i].text, tb[i].text) && isFormatKeyword(ta[i].text)) {
			return false
		}
	}
	return true
}

// hasMacroCall reports a macro function call (@NAME followed by '(') in q.
func hasMacroCall(q string) bool {
	toks, err := sqlTokens(q)
	if err != nil {
		return true
	}
	sig := significant(toks, true)
	for i := 0; i+1 < len(sig); i++ {
		if sig[i].kind == ftMacro && sig[i+1].text == "(" {
			return true
		}
	}
	return false
}

// ftKind is the class of a token of Format's SQL tokenizer.
type ftKind int

const (
	ftSpace   ftKind = iota // spaces, tabs, newlines
	ftComment               // -- to end of line, or /* ... */
	ftString                // '...' with '' inside
	ftQuoted                // "..." or `...`
	ftDollar                // $tag$ ... $tag$
	ftNumber
	ftWord  // identifier or keyword
	ftMacro // @name or @{...}
	ftPunct // operators and punctuation
)

// ftok is one token: its class, its text as written and its byte offset.
type ftok struct {
	kind ftKind
	text string
	off  int
}

// multiPunct are the operators of more than one character, longest first.
var multiPunct = []string{"->>", "::", ":=", "=>", "<=", ">=", "<>", "!=", "||", "->", "**", "//"}

// sqlTokens splits s into tokens that, concatenated, give s back. It
// refuses an unterminated string, quoted identifier, comment or macro.
func sqlTokens(s string) ([]ftok, error) {
	var out []ftok
	i := 0
	for i < len(s) {
		start := i
		c := s[i]
		var kind ftKind
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			for i < len(s) && strings.IndexByte(" \t\n\r\f\v", s[i]) >= 0 {
				i++
			}
			kind = ftSpace
		case c == '-' && strings.HasPrefix(s[i:], "--"):
			j := strings.IndexByte(s[i:], '\n')
			if j < 0 {
				i = len(s)
			} else {
				i += j
			}
			kind = ftComment
		case c == '/' && strings.HasPrefix(s[i:], "/*"):
			j := strings.Index(s[i+2:], "*/")
			if j < 0 {
				return nil, fmt.Errorf("unterminated /* comment at byte %d", start)
			}
			i += 2 + j + 2
			kind = ftComment
		case c == '\'' || c == '"' || c == '`':
			j := i + 1
			for {
				k := strings.IndexByte(s[j:], c)
				if k < 0 {
					return nil, fmt.Errorf("unterminated %c at byte %d", c, start)
				}
				j += k + 1
				if j < len(s) && s[j] == c {
					j++
					continue
				}
				break
			}
			i = j
			kind = ftQuoted
			if c == '\'' {
				kind = ftString
			}
		case c == '$' && dollarTag(s[i:]) != "":
			tag := dollarTag(s[i:])
			k := strings.Index(s[i+len(tag):], tag)
			if k < 0 {
				return nil, fmt.Errorf("unterminated %s string at byte %d", tag, start)
			}
			i += len(tag) + k + len(tag)
			kind = ftDollar
		case c == '@' && i+1 < len(s) && s[i+1] == '{':
			k := strings.IndexByte(s[i:], '}')
			if k < 0 {
				return nil, fmt.Errorf("unterminated @{ at byte %d", start)
			}
			i += k + 1
			kind = ftMacro
		case c == '@' && i+1 < len(s) && startsWord(s[i+1:]):
			i = wordEnd(s, i+1)
			kind = ftMacro
		case c >= '0' && c <= '9':
			for i < len(s) && (isDigit(s[i]) || s[i] == '.' || s[i] == '_' || s[i] >= 'a' && s[i] <= 'z' || s[i] >= 'A' && s[i] <= 'Z') {
				i++
			}
			kind = ftNumber
		case startsWord(s[i:]):
			i = wordEnd(s, i)
			kind = ftWord
		default:
			kind = ftPunct
			i++
			for _, p := range multiPunct {
				if strings.HasPrefix(s[start:], p) {
					i = start + len(p)
					break
				}
			}
			if c >= utf8.RuneSelf {
				_, n := utf8.DecodeRuneInString(s[start:])
				i = start + n
			}
		}
		out = append(out, ftok{kind: kind, text: s[start:i], off: start})
	}
	return out, nil
}

func startsWord(s string) bool {
	r, _ := utf8.DecodeRuneInString(s)
	return s != "" && isIdentStart(r)
}

func wordEnd(s string, i int) int {
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		if !isIdentPart(r) && r != '$' {
			break
		}
		i += n
	}
	return i
}

// dollarTag is the $tag$ opening s, or "".
func dollarTag(s string) string {
	for j := 1; j < len(s); j++ {
		c := s[j]
		if c == '$' {
			return s[:j+1]
		}
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || j > 1 && isDigit(c)) {
			return ""
		}
	}
	return ""
}

// significant is toks without whitespace, and without comments when
// dropComments.
func significant(toks []ftok, dropComments bool) []ftok {
	var out []ftok
	for _, t := range toks {
		if t.kind == ftSpace || dropComments && t.kind == ftComment {
			continue
		}
		out = append(out, t)
	}
	return out
}

// formatKeywords are the words Format upper-cases in a query: DuckDB's
// reserved keywords, which cannot be a column or table name without
// quotes, and the join words. A word right after '.' or AS, or right
// before '.', is a name and is left as written, and so are LEFT and RIGHT
// before '(' (the functions).
var formatKeywords = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`ALL ANALYSE ANALYZE AND ANY ARRAY AS ASC ASYMMETRIC BOTH CASE CAST CHECK
		COLLATE COLUMN CONSTRAINT CREATE DEFAULT DEFERRABLE DESC DISTINCT DO ELSE END EXCEPT FALSE FETCH
		FOR FOREIGN FROM GRANT GROUP HAVING IN INITIALLY INTERSECT INTO LATERAL LEADING LIMIT NOT NULL
		OFFSET ON ONLY OR ORDER PLACING PRIMARY QUALIFY REFERENCES RETURNING SELECT SOME SYMMETRIC TABLE THEN
		TO TRAILING TRUE UNION UNIQUE USING VARIADIC WHEN WHERE WINDOW WITH
		JOIN INNER OUTER CROSS NATURAL FULL LEFT RIGHT SEMI ANTI ASOF BETWEEN LIKE ILIKE IS EXISTS OVER BY`) {
		formatKeywords[w] = true
	}
}

func isFormatKeyword(w string) bool { return formatKeywords[strings.ToUpper(w)] }

// formatQuery lays out a query's whitespace and, unless whitespaceOnly,
// its keywords and commas. Every token other than whitespace is kept as
// written but for a keyword's case.
func formatQuery(q string, whitespaceOnly bool) (string, error) {
	toks, err := sqlTokens(q)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	// prev and next significant (non-space) tokens around index i.
	prevSig := func(i int) *ftok {
		for j := i - 1; j >= 0; j-- {
			if toks[j].kind != ftSpace {
				return &toks[j]
			}
		}
		return nil
	}
	nextTok := func(i int) *ftok {
		if i+1 < len(toks) {
			return &toks[i+1]
		}
		return nil
	}
	nextSig := func(i int) *ftok {
		for j := i + 1; j < len(toks); j++ {
			if toks[j].kind != ftSpace {
				return &toks[j]
			}
		}
		return nil
	}
	for i, t := range toks {
		switch t.kind {
		case ftSpace:
			if i == 0 || i == len(toks)-1 {
				continue // the query is trimmed
			}
			if n := strings.Count(t.text, "\n"); n > 0 {
				b.WriteString(strings.Repeat("\n", min(n, 2)))
				b.WriteString(t.text[strings.LastIndexByte(t.text, '\n')+1:])
				continue
			}
			if nx := nextTok(i); !whitespaceOnly && nx != nil && nx.text == "," {
				continue
			}
			b.WriteByte(' ')
		case ftWord:
			text := t.text
			if !whitespaceOnly && isFormatKeyword(text) && keywordAt(prevSig(i), nextSig(i), text) {
				text = strings.ToUpper(text)
			}
			b.WriteString(text)
		default:
			b.WriteString(t.text)
			if !whitespaceOnly && t.text == "," {
				if nx := nextTok(i); nx != nil && nx.kind != ftSpace {
					b.WriteByte(' ')
				}
			}
		}
	}
	return b.String(), nil
}

// keywordAt: a keyword-looking word between prev and next is a keyword,
// not a name.
func keywordAt(prev, next *ftok, w string) bool {
	if prev != nil && (prev.text == "." || prev.kind == ftWord && strings.EqualFold(prev.text, "AS") && !strings.EqualFold(w, "AS")) {
		return false
	}
	if next != nil && next.text == "." {
		return false
	}
	up := strings.ToUpper(w)
	if (up == "LEFT" || up == "RIGHT") && next != nil && next.text == "(" {
		return false
	}
	return true
}

// formatFile lays out src, whose parse is m. verbatim keeps each header
// attribute's value as written.
func formatFile(src []byte, m *Model, opts FormatOptions, verbatim bool) ([]byte, error) {
	s := string(src)
	toks, err := sqlTokens(s)
	if err != nil {
		return nil, err
	}
	// The header: MODEL ( ... ) [;]
	i := 0
	for i < len(toks) && (toks[i].kind == ftSpace || toks[i].kind == ftComment) {
		i++
	}
	if i >= len(toks) || !strings.EqualFold(toks[i].text, "MODEL") {
		return nil, fmt.Errorf("no MODEL header")
	}
	prefix := strings.TrimSpace(s[:toks[i].off])
	j := i + 1
	for j < len(toks) && toks[j].kind == ftSpace {
		j++
	}
	if j >= len(toks) || toks[j].text != "(" {
		return nil, fmt.Errorf("no '(' after MODEL")
	}
	closeAt, err := matching(toks, j)
	if err != nil {
		return nil, err
	}
	end := toks[closeAt].off + 1
	if k := closeAt + 1; k < len(toks) {
		if toks[k].kind == ftSpace && k+1 < len(toks) {
			k++
		}
		if toks[k].text == ";" {
			end = toks[k].off + 1
		}
	}
	f := &headerFormatter{src: s, verbatim: verbatim}
	var out strings.Builder
	if prefix != "" {
		out.WriteString(trimLines(prefix))
		out.WriteString("\n")
	}
	out.WriteString("MODEL (\n")
	f.list(&out, toks[j+1:closeAt], "  ", f.attribute)
	out.WriteString(");")

	rest := s[end:]
	qoff := -1
	if m.Query != "" {
		qoff = offsetOf(src, m.QueryPos)
	}
	if qoff < end || qoff+len(m.Query) > len(s) || s[qoff:qoff+len(m.Query)] != m.Query {
		// No query, or not where the parser says: the rest is kept.
		if r := strings.TrimSpace(rest); r != "" {
			out.WriteString("\n\n")
			out.WriteString(r)
		}
	} else {
		if mid := strings.TrimSpace(s[end:qoff]); mid != "" {
			out.WriteString("\n\n")
			out.WriteString(mid)
		}
		q, err := formatQuery(m.Query, opts.WhitespaceOnly)
		if err != nil {
			return nil, err
		}
		out.WriteString("\n\n")
		out.WriteString(q)
		after := s[qoff+len(m.Query):]
		if t := strings.TrimSpace(after); strings.HasPrefix(t, ";") {
			if endsInLineComment(q) {
				out.WriteString("\n")
			}
			out.WriteString(";")
			after = strings.TrimPrefix(t, ";")
		}
		if t := strings.TrimSpace(after); t != "" {
			out.WriteString("\n\n")
			out.WriteString(t)
		}
	}
	res := out.String()
	if opts.AppendNewline || strings.HasSuffix(s, "\n") {
		res += "\n"
	}
	return []byte(res), nil
}

// endsInLineComment: q's last line ends in a -- comment, which a ';' on
// the same line would join.
func endsInLineComment(q string) bool {
	toks, err := sqlTokens(q)
	if err != nil || len(toks) == 0 {
		return false
	}
	t := toks[len(toks)-1]
	return t.kind == ftComment && strings.HasPrefix(t.text, "--")
}

// trimLines removes trailing whitespace from each line of s.
func trimLines(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " \t\r")
	}
	return strings.Join(lines, "\n")
}

// offsetOf converts a parser position back to a byte offset in src; -1
// when it is outside src.
func offsetOf(src []byte, p Pos) int {
	line := 1
	for i := range src {
		if line == p.Line {
			return i + p.Col - 1
		}
		if src[i] == '\n' {
			line++
		}
	}
	if line == p.Line {
		return len(src) + p.Col - 1
	}
	return -1
}

// matching is the index of the bracket closing toks[open].
func matching(toks []ftok, open int) (int, error) {
	depth := 0
	for i := open; i < len(toks); i++ {
		if toks[i].kind != ftPunct {
			continue
		}
		switch toks[i].text {
		case "(", "[", "{":
			depth++
		case ")", "]", "}":
			depth--
			if depth == 0 {
				return i, nil
			}
		}
	}
	return 0, fmt.Errorf("unbalanced '%s'", toks[open].text)
}

// headerFormatter lays out the header's lists.
type headerFormatter struct {
	src      string
	verbatim bool
}

// listItem is one element of a comma-separated list, with the comments on
// the lines before it and the one after it on its line.
type listItem struct {
	leading  []string
	body     []ftok // without whitespace or comments
	all      []ftok // without whitespace, comments included
	trailing string
	after    []string // comments on lines of their own after the body
	// messy: a comment inside the value; the item is kept as written.
	messy bool
}

// split divides toks (the inside of a bracket, whitespace included) into
// items at top-level commas, attaching comments: one on the line where an
// item ends trails it, others lead the next item. An item with a comment
// inside its value is marked messy. Comments after the last item are
// returned as closing.
func split(toks []ftok) (items []*listItem, closing []string) {
	cur := &listItem{}
	var last *listItem // the item the current line ended
	newline := true    // a newline since the last significant token
	depth := 0
	for _, t := range toks {
		switch {
		case t.kind == ftSpace:
			if strings.Contains(t.text, "\n") {
				newline = true
				last = nil
			}
			continue
		case t.kind == ftComment && depth == 0 && len(cur.body) == 0:
			if !newline && last != nil && last.trailing == "" {
				last.trailing = t.text
			} else {
				cur.leading = append(cur.leading, t.text)
			}
		case t.kind == ftComment && depth == 0:
			cur.all = append(cur.all, t)
			if !newline && cur.trailing == "" && len(cur.after) == 0 {
				cur.trailing = t.text
			} else {
				cur.after = append(cur.after, t.text)
			}
		case t.kind == ftComment:
			cur.all = append(cur.all, t)
			cur.messy = true
		case t.kind == ftPunct && t.text == "," && depth == 0:
			items = append(items, cur)
			next := &listItem{}
			if !cur.messy {
				next.leading, cur.after = cur.after, nil
			}
			last, cur = cur, next
		default:
			if t.kind == ftPunct {
				switch t.text {
				case "(", "[", "{":
					depth++
				case ")", "]", "}":
					depth--
				}
			}
			if cur.trailing != "" || len(cur.after) > 0 {
				cur.messy = true
			}
			cur.body = append(cur.body, t)
			cur.all = append(cur.all, t)
		}
		newline = false
	}
	if len(cur.body) > 0 {
		items = append(items, cur)
		if !cur.messy {
			closing, cur.after = cur.after, nil
		}
	} else {
		closing = cur.leading
	}
	return items, closing
}

// list writes the items of toks one per line at indent, each rendered by
// render, commas between them.
func (f *headerFormatter) list(out *strings.Builder, toks []ftok, indent string, render func([]ftok, string) string) {
	items, closing := split(toks)
	for n, it := range items {
		for _, c := range it.leading {
			out.WriteString(indent + c + "\n")
		}
		if it.messy {
			out.WriteString(indent + f.raw(it.all))
		} else {
			out.WriteString(indent + render(it.body, indent))
		}
		if n < len(items)-1 {
			out.WriteString(",")
		}
		if it.trailing != "" && !it.messy {
			out.WriteString(" " + it.trailing)
		}
		out.WriteString("\n")
	}
	for _, c := range closing {
		out.WriteString(indent + c + "\n")
	}
}

// raw is body as written in the file.
func (f *headerFormatter) raw(body []ftok) string {
	if len(body) == 0 {
		return ""
	}
	last := body[len(body)-1]
	return f.src[body[0].off : last.off+len(last.text)]
}

func hasComment(body []ftok) bool {
	for _, t := range body {
		if t.kind == ftComment {
			return true
		}
	}
	return false
}

// attribute renders one header attribute: its name in lower case, then its
// value (kind and columns laid out one property or column per line).
func (f *headerFormatter) attribute(body []ftok, indent string) string {
	if len(body) == 0 || body[0].kind != ftWord || hasComment(body) {
		return f.raw(body)
	}
	name := strings.ToLower(body[0].text)
	value := body[1:]
	if len(value) == 0 {
		return name
	}
	if f.verbatim || rawSQLAttributes[name] {
		return name + " " + f.raw(value)
	}
	switch {
	case name == "kind" && value[0].kind == ftWord:
		kind := strings.ToUpper(value[0].text)
		if len(value) == 1 {
			return name + " " + kind
		}
		if inner, ok := group(value[1:]); ok {
			return name + " " + kind + " " + f.block(inner, indent, f.property)
		}
	case name == "columns":
		if inner, ok := group(value); ok {
			return name + " " + f.block(inner, indent, func(b []ftok, _ string) string { return f.inline(b) })
		}
	}
	return name + " " + f.inline(value)
}

// rawSQLAttributes are the attributes whose values hold SQL kept as text
// (audit arguments, properties, signals): their spacing is part of what
// they parse to, so Format keeps them as written.
var rawSQLAttributes = map[string]bool{"audits": true, "physical_properties": true, "virtual_properties": true,
	"session_properties": true, "signals": true, "partitioned_by": true, "clustered_by": true}

// property renders a kind property: its name in lower case, then its value.
func (f *headerFormatter) property(body []ftok, _ string) string {
	if len(body) == 0 || body[0].kind != ftWord || hasComment(body) {
		return f.raw(body)
	}
	if len(body) == 1 {
		return strings.ToLower(body[0].text)
	}
	return strings.ToLower(body[0].text) + " " + f.inline(body[1:])
}

// block renders "(" then inner's items one per line, then ")" at indent.
func (f *headerFormatter) block(inner []ftok, indent string, render func([]ftok, string) string) string {
	if len(significant(inner, false)) == 0 {
		return "()"
	}
	var b strings.Builder
	b.WriteString("(\n")
	f.list(&b, inner, indent+"  ", render)
	b.WriteString(indent + ")")
	return b.String()
}

// group returns the inside of value when value is one bracketed group
// "( ... )" (value holds no whitespace; the inside is taken from the
// source, whitespace included, for comment placement).
func group(value []ftok) ([]ftok, bool) {
	if len(value) < 2 || value[0].text != "(" {
		return nil, false
	}
	close, err := matching(value, 0)
	if err != nil || close != len(value)-1 {
		return nil, false
	}
	return value[1:close], true
}

// inline renders tokens on one line with canonical spacing: none inside
// brackets' edges, before ',' or around '.' and '::', none between a name
// and its '(' (a call), one elsewhere. Tokens are kept as written.
func (f *headerFormatter) inline(body []ftok) string {
	if hasComment(body) {
		return f.raw(body)
	}
	var b strings.Builder
	for i, t := range body {
		if i > 0 && spaceBetween(body[i-1], t) {
			b.WriteByte(' ')
		}
		b.WriteString(t.text)
	}
	return b.String()
}

func spaceBetween(a, b ftok) bool {
	switch {
	case b.text == "," || b.text == ")" || b.text == "]" || a.text == "(" || a.text == "[":
		return false
	case a.text == "." || b.text == "." || a.text == "::" || b.text == "::":
		return false
	case b.text == "(" && (a.kind == ftWord || a.kind == ftMacro || a.kind == ftQuoted):
		return false
	}
	return true
}
