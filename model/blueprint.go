package model

import (
	"slices"
	"strconv"
	"strings"
)

// Blueprint is one entry of a model file's blueprints attribute (SQLMesh's
// blueprinting): the values of its variables, each kept as the SQL written.
// Every blueprint makes a model of its own from the same file, with its own
// name, fingerprint and table.
type Blueprint struct {
	// Index is the blueprint's place in the list, from 1.
	Index int
	Vars  []BlueprintVar
	Pos   Pos
}

// BlueprintVar is one variable := value of a blueprint; Name is lower case.
type BlueprintVar struct {
	Name string
	SQL  string
}

// String renders the blueprint as it is written: "customer := a, region := 'eu'".
func (b Blueprint) String() string {
	parts := make([]string, len(b.Vars))
	for i, v := range b.Vars {
		parts[i] = v.Name + " := " + v.SQL
	}
	return strings.Join(parts, ", ")
}

// Label names the blueprint in messages: "blueprint 2 (customer := b)".
func (b Blueprint) Label() string {
	return "blueprint " + strconv.Itoa(b.Index) + " (" + b.String() + ")"
}

// Blueprints reads the blueprints attribute of a model file without parsing
// the rest of its header (whose name holds @{var} until a blueprint is
// applied). It returns nil for a file without one. The value is a list of
// blueprints, each a parenthesised list of name := value:
//
//	blueprints ((customer := a, region := 'eu'), (customer := b, region := 'us'))
//
// A malformed list, a blueprint without variables, a variable given twice in
// one blueprint, and blueprints that do not all set the same variables are
// *Error at the place written.
func Blueprints(path string, src []byte) ([]Blueprint, error) {
	p := &parser{lx: newLexer(path, src), src: src, seen: map[string]token{}, m: &Model{}}
	// A file that does not lex or start as a model has no blueprints:
	// ParseFile reports what is wrong with it.
	if !p.step() || !p.isWord("MODEL") {
		return nil, nil
	}
	p.modelTok = p.tok
	if !p.step() || !p.isPunct("(") {
		return nil, nil
	}
	depth, atName := 0, true
	for {
		if !p.step() {
			return nil, nil
		}
		switch {
		case p.tok.kind == tokEOF:
			return nil, nil
		case depth == 0 && p.isPunct(")"):
			return nil, nil
		case p.isPunct("(") || p.isPunct("["):
			depth++
		case p.isPunct(")") || p.isPunct("]"):
			depth--
		case depth == 0 && p.isPunct(","):
			atName = true
			continue
		case depth == 0 && atName && p.isWord("blueprints"):
			at := p.tok
			if err := p.advance(); err != nil {
				return nil, err
			}
			return p.blueprintList(at)
		}
		atName = false
	}
}

// step advances, reporting whether the next token could be read.
func (p *parser) step() bool { return p.advance() == nil }

// blueprintList parses the value of blueprints, p.tok on its first token.
func (p *parser) blueprintList(attr token) ([]Blueprint, error) {
	closer := map[string]string{"(": ")", "[": "]"}[p.tok.val]
	if p.tok.kind != tokPunct || closer == "" {
		return nil, p.unexpected("a list of blueprints, ((name := value, ...), ...), for blueprints")
	}
	open := p.tok
	if err := p.advance(); err != nil {
		return nil, err
	}
	var out []Blueprint
	if !p.isPunct("(") {
		// blueprints (customer := a): one blueprint.
		b, err := p.blueprintVars(open, closer, 1)
		if err != nil {
			return nil, err
		}
		return checkBlueprints(p, attr, []Blueprint{b})
	}
	for !p.isPunct(closer) {
		at := p.tok
		if !p.isPunct("(") {
			return nil, p.unexpected("'(' to start a blueprint (name := value, ...)")
		}
		if err := p.advance(); err != nil {
			return nil, err
		}
		b, err := p.blueprintVars(at, ")", len(out)+1)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
		if p.isPunct(",") {
			if err := p.advance(); err != nil {
				return nil, err
			}
			continue
		}
		if !p.isPunct(closer) {
			return nil, p.unexpected("',' or '" + closer + "' in blueprints")
		}
	}
	return checkBlueprints(p, attr, out)
}

// blueprintVars parses "name := value, ..." up to closer, and consumes it.
func (p *parser) blueprintVars(at token, closer string, index int) (Blueprint, error) {
	b := Blueprint{Index: index, Pos: p.pos(at)}
	label := "blueprint " + strconv.Itoa(index)
	seen := map[string]bool{}
	for !p.isPunct(closer) {
		nameTok := p.tok
		if nameTok.kind != tokIdent {
			return b, p.unexpected("a variable name (name := value) in " + label)
		}
		name := strings.ToLower(nameTok.val)
		if err := p.advance(); err != nil {
			return b, err
		}
		if p.isPunct(":") {
			if err := p.advance(); err != nil {
				return b, err
			}
		}
		if !p.isPunct("=") {
			return b, p.unexpected("':=' after " + name + " in " + label)
		}
		if err := p.advance(); err != nil {
			return b, err
		}
		if seen[name] {
			return b, errorf(p.pos(nameTok), CodeDuplicateAttribute, "%s sets %s twice", label, name)
		}
		seen[name] = true
		val, err := p.rawValue(label + " variable " + name)
		if err != nil {
			return b, err
		}
		b.Vars = append(b.Vars, BlueprintVar{Name: name, SQL: strings.TrimSpace(val)})
		if p.isPunct(",") {
			if err := p.advance(); err != nil {
				return b, err
			}
			continue
		}
		if !p.isPunct(closer) {
			return b, p.unexpected("',' or '" + closer + "' in " + label)
		}
	}
	if len(b.Vars) == 0 {
		return b, errorf(b.Pos, CodeBadValue, "%s sets no variable; write (name := value, ...)", label)
	}
	return b, p.advance()
}

// checkBlueprints refuses an empty list and blueprints that set different
// variables (a model would then read a variable its blueprint lacks).
func checkBlueprints(p *parser, attr token, bs []Blueprint) ([]Blueprint, error) {
	if len(bs) == 0 {
		return nil, errorf(p.pos(attr), CodeBadValue, "blueprints is empty; write at least one blueprint (name := value, ...)")
	}
	names := func(b Blueprint) string {
		n := make([]string, len(b.Vars))
		for i, v := range b.Vars {
			n[i] = v.Name
		}
		slices.Sort(n)
		return strings.Join(n, ", ")
	}
	first := names(bs[0])
	for _, b := range bs[1:] {
		if got := names(b); got != first {
			return nil, errorf(b.Pos, CodeBadValue, "blueprint %d sets (%s) but blueprint 1 sets (%s); every blueprint must set the same variables",
				b.Index, got, first)
		}
	}
	return bs, nil
}

// Apply returns src with b's variables substituted, lines kept:
//   - @{name} anywhere outside comments (the model's name, a string, an
//     identifier) becomes the value as text: a string value without its
//     quotes, so @{customer}.orders names a table;
//   - @name and @BLUEPRINT_VAR('name'[, default]) outside strings and
//     comments become the value's SQL (@BLUEPRINT_VAR of a name b does not
//     set becomes the default, or NULL).
//
// Other macros are left to macro expansion, which runs later; a blueprint
// variable shadows a configuration variable of the same name, as in SQLMesh.
func (b Blueprint) Apply(src []byte) []byte {
	vars := map[string]string{}
	for _, v := range b.Vars {
		vars[v.Name] = v.SQL
	}
	s := string(src)
	var out strings.Builder
	out.Grow(len(s))
	inString := false
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case inString:
			if c == '\'' {
				inString = false
			}
		case c == '\'':
			inString = true
		case c == '-' && strings.HasPrefix(s[i:], "--"):
			end := strings.IndexByte(s[i:], '\n')
			if end < 0 {
				end = len(s) - i
			}
			out.WriteString(s[i : i+end])
			i += end
			continue
		case c == '/' && strings.HasPrefix(s[i:], "/*"):
			end := strings.Index(s[i+2:], "*/")
			if end < 0 {
				out.WriteString(s[i:])
				return []byte(out.String())
			}
			out.WriteString(s[i : i+2+end+2])
			i += 2 + end + 2
			continue
		}
		if c != '@' {
			out.WriteByte(c)
			i++
			continue
		}
		if strings.HasPrefix(s[i:], "@{") {
			if end := strings.IndexByte(s[i:], '}'); end > 0 {
				if v, ok := vars[strings.ToLower(strings.TrimSpace(s[i+2:i+end]))]; ok {
					out.WriteString(unquote(v))
					i += end + 1
					continue
				}
			}
		}
		if !inString {
			if text, n, ok := b.blueprintVarCall(s[i:], vars); ok {
				out.WriteString(text)
				i += n
				continue
			}
			j := i + 1
			for j < len(s) && isIdentByte(s[j]) {
				j++
			}
			if v, ok := vars[strings.ToLower(s[i+1:j])]; ok && j > i+1 && (j == len(s) || s[j] != '(') {
				out.WriteString(v)
				i = j
				continue
			}
		}
		out.WriteByte(c)
		i++
	}
	return []byte(out.String())
}

// blueprintVarCall reads @BLUEPRINT_VAR('name'[, default]) at the start of
// s: its replacement and length.
func (b Blueprint) blueprintVarCall(s string, vars map[string]string) (string, int, bool) {
	const fn = "@blueprint_var"
	if len(s) < len(fn) || !strings.EqualFold(s[:len(fn)], fn) {
		return "", 0, false
	}
	rest := s[len(fn):]
	trimmed := strings.TrimLeft(rest, " \t")
	if !strings.HasPrefix(trimmed, "(") {
		return "", 0, false
	}
	start := len(s) - len(trimmed) + 1
	depth, inStr, end := 1, false, -1
	for k := start; k < len(s) && end < 0; k++ {
		switch ch := s[k]; {
		case inStr:
			if ch == '\'' {
				inStr = false
			}
		case ch == '\'':
			inStr = true
		case ch == '(':
			depth++
		case ch == ')':
			depth--
			if depth == 0 {
				end = k
			}
		}
	}
	if end < 0 {
		return "", 0, false
	}
	args := splitTop(s[start:end])
	if len(args) == 0 || len(args) > 2 {
		return "", 0, false
	}
	name := strings.ToLower(unquote(strings.TrimSpace(args[0])))
	if v, ok := vars[name]; ok {
		return v, end + 1, true
	}
	if len(args) == 2 {
		return strings.TrimSpace(args[1]), end + 1, true
	}
	return "NULL", end + 1, true
}

// splitTop splits s at commas outside brackets and strings.
func splitTop(s string) []string {
	var out []string
	depth, inStr, last := 0, false, 0
	for k := 0; k < len(s); k++ {
		switch ch := s[k]; {
		case inStr:
			if ch == '\'' {
				inStr = false
			}
		case ch == '\'':
			inStr = true
		case ch == '(' || ch == '[':
			depth++
		case ch == ')' || ch == ']':
			depth--
		case ch == ',' && depth == 0:
			out = append(out, s[last:k])
			last = k + 1
		}
	}
	if strings.TrimSpace(s[last:]) != "" || len(out) > 0 {
		out = append(out, s[last:])
	}
	return out
}

// unquote strips one pair of single quotes from a string literal.
func unquote(v string) string {
	if len(v) >= 2 && v[0] == '\'' && v[len(v)-1] == '\'' {
		return strings.ReplaceAll(v[1:len(v)-1], "''", "'")
	}
	return v
}

func isIdentByte(c byte) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
}
