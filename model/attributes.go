package model

import (
	"fmt"
	"strings"
	"time"
	_ "time/tzdata" // cron_tz names resolve the same on every machine, with or without system zone data

	"github.com/gapless-dev/gapless/model/suggest"
)

// Warning is a SQLMesh attribute of a model file that gapless reads past
// because it only describes the model: ignoring it changes no row and no
// schedule. Project loading collects them; the CLI prints them.
type Warning struct {
	Pos  Pos
	Attr string
	Msg  string
}

// String renders the warning as "file:line:col: message".
func (w Warning) String() string { return w.Pos.String() + ": " + w.Msg }

// Signal is one entry of the signals attribute: a built-in signal the model
// waits on before an interval is computed.
//
// gapless runs no Python, so SQLMesh's user-defined signals cannot run; the
// one built-in is SignalSourceLanded, which holds every interval back until
// Source (a source of the project, see package source) has landed it.
type Signal struct {
	Name   string // SignalSourceLanded
	Source string // schema.table of a source, lower case
	Pos    Pos
}

// SignalSourceLanded is the built-in signal: signals [source_landed(source := raw.events)].
const SignalSourceLanded = "source_landed"

// honouredAttributes are SQLMesh attributes that gapless supports beside
// attributeNames; their values are parsed by sqlmeshValue.
var honouredAttributes = []string{"cron_tz", "signals", "stamp", "blueprints"}

// describingAttributes are SQLMesh attributes that only describe a model:
// gapless reads past them with a Warning saying why nothing is lost.
var describingAttributes = map[string]string{
	"project":        "it names the repository of a multi-repo SQLMesh project; gapless loads one project",
	"formatting":     "it only tells `sqlmesh format` whether to format this file",
	"ignored_rules":  "it silences SQLMesh linter rules; gapless has no linter",
	"references":     "it declares join keys for SQLMesh's semantic layer; gapless has none",
	"optimize_query": "gapless never rewrites a query: it always runs the query as written (SQLMesh's optimizer keeps results the same)",
}

// refusedAttributes are SQLMesh attributes that gapless does not apply and
// whose absence would change results, with why; the physical ones are
// model/physical.go's.
var refusedAttributes = map[string]string{
	"gateway":                  "the model would be built on the default warehouse instead of that gateway's",
	"session_properties":       "the query would run without those session settings, which can change its rows",
	"physical_version":         "gapless versions a table by its fingerprint alone, so a pinned version would be rebuilt",
	"virtual_properties":       "the views gapless serves would lack those properties (security, comments)",
	"virtual_environment_mode": "gapless always serves every environment through views",
	"depends_on":               "gapless reads dependencies from the query alone; a declared one would not hold back the model",
	"grants":                   "gapless grants no privileges, so readers would lose access",
	"grants_target_layer":      "gapless grants no privileges, so readers would lose access",
	"retention":                "gapless would keep rows SQLMesh deletes",
}

// sqlmeshOnly handles a SQLMesh attribute that gapless warns about or
// refuses. It reports false when name is neither, leaving the token alone.
func (p *parser) sqlmeshOnly(nameTok token, name string) (bool, error) {
	if why, ok := refusedAttributes[name]; ok {
		return true, errorf(p.pos(nameTok), CodeUnknownAttribute,
			"attribute %s is not supported by gapless and ignoring it would change results: %s; remove it", name, why)
	}
	why, ok := describingAttributes[name]
	if !ok {
		return false, nil
	}
	if first, dup := p.seen[name]; dup {
		return true, errorf(p.pos(nameTok), CodeDuplicateAttribute,
			"duplicate attribute %s (first set on line %d)", name, p.pos(first).Line)
	}
	p.seen[name] = nameTok
	p.m.Warnings = append(p.m.Warnings, Warning{Pos: p.pos(nameTok), Attr: name,
		Msg: fmt.Sprintf("attribute %s is ignored: %s", name, why)})
	if err := p.advance(); err != nil {
		return true, err
	}
	if p.tok.kind == tokEOF {
		return true, p.unterminated()
	}
	if p.isPunct(",") || p.isPunct(")") {
		return true, errorf(p.pos(p.tok), CodeSyntax, "attribute %s has no value", name)
	}
	return true, p.skipValue(name)
}

// sqlmeshValue parses the value of one of honouredAttributes.
func (p *parser) sqlmeshValue(name string) error {
	switch name {
	case "cron_tz":
		t, err := p.wordValue(name)
		if err != nil {
			return err
		}
		zone := strings.TrimSpace(t.val)
		if _, lerr := LoadCronTZ(zone); lerr != nil {
			return &Error{Pos: p.pos(t), Code: CodeBadValue, Err: lerr,
				Msg: fmt.Sprintf("bad cron_tz %s: not an IANA time zone name (for example 'America/Los_Angeles' or 'UTC')", quoteSQL(zone))}
		}
		if zone != "UTC" {
			p.m.CronTZ = zone
		}
		return nil
	case "stamp":
		t, err := p.wordValue(name)
		if err == nil {
			p.m.Stamp = t.val
		}
		return err
	case "signals":
		return p.signals()
	case "blueprints":
		// Each blueprint is a model of its own: the project loader
		// instantiates the file once per blueprint (see Blueprints); the
		// attribute itself says nothing more about one model.
		return p.skipValue(name)
	}
	return nil
}

// LoadCronTZ is the location of a cron_tz name ("" is UTC). Zone names are
// case-sensitive, as in SQLMesh (zoneinfo).
func LoadCronTZ(name string) (*time.Location, error) {
	if name == "" {
		return time.UTC, nil
	}
	if strings.HasPrefix(name, "/") || strings.Contains(name, "..") || strings.EqualFold(name, "local") {
		return nil, fmt.Errorf("unknown time zone %s", name)
	}
	return time.LoadLocation(name)
}

// signals parses "signals [call, ...]", "signals (call, ...)" or one call.
func (p *parser) signals() error {
	closer := ""
	switch {
	case p.isPunct("("):
		closer = ")"
	case p.isPunct("["):
		closer = "]"
	default:
		return p.signal()
	}
	if err := p.advance(); err != nil {
		return err
	}
	for !p.isPunct(closer) {
		if err := p.signal(); err != nil {
			return err
		}
		if p.isPunct(",") {
			if err := p.advance(); err != nil {
				return err
			}
			continue
		}
		if !p.isPunct(closer) {
			return p.unexpected("',' or '" + closer + "' in signals")
		}
	}
	return p.advance()
}

// signal parses one signal call. Only the built-in SignalSourceLanded is
// known: a SQLMesh signal is a Python function, which gapless cannot run.
func (p *parser) signal() error {
	t := p.tok
	if t.kind != tokIdent && t.kind != tokQuoted {
		return p.unexpected("a signal name in signals")
	}
	name := strings.ToLower(t.val)
	if name != SignalSourceLanded {
		return errorf(p.pos(t), CodeBadValue,
			"unknown signal %s: SQLMesh signals are Python functions, which gapless does not run; gapless offers the built-in "+
				"signal %s(source := schema.table), which waits until a source of sources/ has landed each interval", t.val, SignalSourceLanded)
	}
	if err := p.advance(); err != nil {
		return err
	}
	if !p.isPunct("(") {
		return errorf(p.pos(t), CodeBadValue, "signal %s needs the source it waits for: %s(source := schema.table)", name, name)
	}
	args, err := p.auditArgs("signal "+name, false)
	if err != nil {
		return err
	}
	s := Signal{Name: name, Pos: p.pos(t)}
	for _, a := range args {
		if a.Name != "source" {
			msg := fmt.Sprintf("signal %s has no argument %s; it takes source := schema.table", name, a.Name)
			if hint, ok := suggest.Closest(a.Name, []string{"source"}); ok {
				msg += "; did you mean " + hint + "?"
			}
			return errorf(a.Pos, CodeBadValue, "%s", msg)
		}
		v := strings.TrimSpace(a.SQL)
		if len(v) >= 2 && v[0] == '\'' && v[len(v)-1] == '\'' {
			v = v[1 : len(v)-1]
		}
		s.Source = strings.ToLower(strings.ReplaceAll(v, `"`, ""))
	}
	if s.Source == "" {
		return errorf(s.Pos, CodeBadValue, "signal %s needs the source it waits for: %s(source := schema.table)", name, name)
	}
	p.m.Signals = append(p.m.Signals, s)
	return nil
}
