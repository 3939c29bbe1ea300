package model

import (
	"strings"

	"github.com/gapless-dev/gapless/model/suggest"
)

// Kinds lists every supported kind, in the order messages list them.
var Kinds = []Kind{
	KindIncrementalByTimeRange, KindIncrementalByUniqueKey, KindFull, KindView, KindSeed, KindExternal,
}

// ParseKind returns the Kind named s, compared case-insensitively.
func ParseKind(s string) (Kind, bool) {
	for _, k := range Kinds {
		if strings.EqualFold(string(k), s) {
			return k, true
		}
	}
	return "", false
}

// sqlmeshOnlyKinds are SQLMesh kinds gapless does not support.
var sqlmeshOnlyKinds = []string{
	"SCD_TYPE_2", "SCD_TYPE_2_BY_TIME", "SCD_TYPE_2_BY_COLUMN", "INCREMENTAL_BY_PARTITION",
	"INCREMENTAL_UNMANAGED", "EMBEDDED", "CUSTOM", "MANAGED",
}

// kindProperties lists the properties each kind accepts inside its
// parentheses; kinds not listed take none.
var kindProperties = map[Kind][]string{
	KindIncrementalByTimeRange: {"time_column", "lookback", "batch_size", "batch_concurrency", "forward_only"},
	KindIncrementalByUniqueKey: {"unique_key", "forward_only"},
	KindSeed:                   {"path"},
}

// sqlmeshOnlyKindProperties are SQLMesh kind properties gapless does not
// support.
var sqlmeshOnlyKindProperties = []string{
	"auto_restatement_cron", "auto_restatement_intervals", "csv_settings",
	"disable_restatement", "materialized", "merge_filter", "on_additive_change",
	"on_destructive_change", "partition_by_time_column", "when_matched",
}

// kindsForProperty names the kinds that accept property name.
func kindsForProperty(name string) []string {
	var out []string
	for _, k := range Kinds {
		if containsFold(kindProperties[k], name) {
			out = append(out, string(k))
		}
	}
	return out
}

func kindList() string {
	names := make([]string, len(Kinds))
	for i, k := range Kinds {
		names[i] = string(k)
	}
	return strings.Join(names, ", ")
}

// kind parses "KIND" or "KIND (prop value, ...)" and checks the kind's
// required properties.
func (p *parser) kind() error {
	t := p.tok
	if t.kind != tokIdent {
		return p.unexpected("a model kind")
	}
	k, ok := ParseKind(t.val)
	if !ok {
		return p.unknownKind(t)
	}
	p.m.Kind, p.kindTok, p.m.KindPos = k, t, p.pos(t)
	if err := p.advance(); err != nil {
		return err
	}
	props := map[string]token{}
	if p.isPunct("(") {
		if err := p.advance(); err != nil {
			return err
		}
		for !p.isPunct(")") {
			if err := p.kindProperty(k, props); err != nil {
				return err
			}
			if p.isPunct(",") {
				if err := p.advance(); err != nil {
					return err
				}
				continue
			}
			if !p.isPunct(")") {
				return p.unexpected("',' or ')' after a property of kind " + string(k))
			}
		}
		if err := p.advance(); err != nil {
			return err
		}
	}
	pos := p.pos(t)
	switch k {
	case KindIncrementalByTimeRange:
		if _, ok := props["time_column"]; !ok {
			return errorf(pos, CodeInvalid,
				"kind %s needs a time column: write kind %s (time_column COLUMN)", k, k)
		}
	case KindIncrementalByUniqueKey:
		if _, ok := props["unique_key"]; !ok {
			return errorf(pos, CodeInvalid,
				"kind %s needs a unique key: write kind %s (unique_key COLUMN) or (unique_key (C1, C2))", k, k)
		}
	case KindSeed:
		if _, ok := props["path"]; !ok {
			return errorf(pos, CodeInvalid, "kind SEED needs the CSV file: write kind SEED (path 'file.csv')")
		}
	}
	return nil
}

func (p *parser) unknownKind(t token) error {
	written := t.val
	if containsFold(sqlmeshOnlyKinds, written) {
		return errorf(p.pos(t), CodeUnknownKind,
			"kind %s is a SQLMesh kind that gapless does not support (kinds: %s)", written, kindList())
	}
	names := make([]string, len(Kinds))
	for i, k := range Kinds {
		names[i] = string(k)
	}
	if s, ok := suggest.Closest(strings.ToUpper(written), names); ok {
		return errorf(p.pos(t), CodeUnknownKind,
			"unknown model kind %s: did you mean %s? (kinds: %s)", written, s, kindList())
	}
	return errorf(p.pos(t), CodeUnknownKind, "unknown model kind %s (kinds: %s)", written, kindList())
}

// kindProperty parses one "prop value" inside a kind's parentheses.
func (p *parser) kindProperty(k Kind, props map[string]token) error {
	nameTok := p.tok
	if nameTok.kind != tokIdent {
		return p.unexpected("a property of kind " + string(k))
	}
	name := strings.ToLower(nameTok.val)
	if !containsFold(kindProperties[k], name) {
		return p.unknownKindProperty(k, nameTok)
	}
	if first, dup := props[name]; dup {
		return errorf(p.pos(nameTok), CodeDuplicateAttribute,
			"duplicate property %s of kind %s (first set on line %d)", name, k, p.pos(first).Line)
	}
	props[name] = nameTok
	if err := p.advance(); err != nil {
		return err
	}
	if p.tok.kind == tokEOF {
		return p.unterminated()
	}
	if p.isPunct(",") || p.isPunct(")") {
		return errorf(p.pos(p.tok), CodeSyntax, "property %s of kind %s has no value", name, k)
	}
	m := p.m
	var err error
	switch name {
	case "time_column":
		m.TimeColumn, m.TimeColumnFormat, err = p.timeColumn()
	case "lookback":
		m.Lookback, err = p.intValue(name, 0)
	case "batch_size":
		m.BatchSize, err = p.intValue(name, 1)
	case "batch_concurrency":
		at := p.tok
		if m.BatchConcurrency, err = p.intValue(name, 1); err == nil && m.BatchConcurrency > MaxBatchConcurrency {
			err = errorf(p.pos(at), CodeBadValue, "batch_concurrency %d is too high; want at most %d batches at once",
				m.BatchConcurrency, MaxBatchConcurrency)
		}
	case "forward_only":
		m.ForwardOnly, err = p.boolValue(name)
	case "unique_key":
		at := p.tok
		if m.UniqueKey, err = p.list(name, p.identifier); err == nil && len(m.UniqueKey) == 0 {
			err = errorf(p.pos(at), CodeBadValue, "unique_key is empty; name at least one column")
		}
	case "path":
		var t token
		if t, err = p.stringValue(name); err == nil {
			m.SeedPath = strings.TrimSpace(t.val)
			if m.SeedPath == "" {
				err = errorf(p.pos(t), CodeBadValue, "path is empty; name the seed's CSV file")
			}
		}
	}
	return err
}

// timeColumn parses "col", "(col)" or SQLMesh's "(col, 'format')" for a
// string-typed time column. The format is checked here (see
// ParseTimeFormat); whether it is fine enough for the interval unit is
// checked once the unit is settled (see finish).
func (p *parser) timeColumn() (col, format string, err error) {
	if !p.isPunct("(") {
		p.m.TimeColumnPos = p.pos(p.tok)
		col, err = p.identifier("time_column")
		return col, "", err
	}
	if err := p.advance(); err != nil {
		return "", "", err
	}
	p.m.TimeColumnPos = p.pos(p.tok)
	if col, err = p.identifier("time_column"); err != nil {
		return "", "", err
	}
	if p.isPunct(",") {
		if err := p.advance(); err != nil {
			return "", "", err
		}
		t, err := p.stringValue("the format of time_column")
		if err != nil {
			return "", "", err
		}
		if _, ferr := ParseTimeFormat(t.val); ferr != nil {
			return "", "", wrapErr(p.pos(t), CodeBadValue, ferr, "bad time_column format %s", string(p.src[t.off:t.end]))
		}
		format, p.timeFormatTok = t.val, t
	}
	if !p.isPunct(")") {
		return "", "", p.unexpected("')' after the time column")
	}
	return col, format, p.advance()
}

func (p *parser) unknownKindProperty(k Kind, t token) error {
	name := strings.ToLower(t.val)
	pos := p.pos(t)
	allowed := kindProperties[k]
	if owners := kindsForProperty(name); len(owners) > 0 {
		return errorf(pos, CodeUnknownAttribute, "%s is not a property of kind %s (only of %s)",
			name, k, strings.Join(owners, " and "))
	}
	if containsFold(attributeNames, name) {
		return errorf(pos, CodeUnknownAttribute,
			"%s is not a property of kind %s; is the ')' that closes the kind's properties missing?", name, k)
	}
	if containsFold(sqlmeshOnlyKindProperties, name) {
		return errorf(pos, CodeUnknownAttribute,
			"kind property %s is a SQLMesh setting that gapless does not support", name)
	}
	if s, ok := suggest.Closest(name, allowed); ok {
		return errorf(pos, CodeUnknownAttribute,
			"unknown property %s of kind %s: did you mean %s?", t.val, k, s)
	}
	if len(allowed) == 0 {
		return errorf(pos, CodeUnknownAttribute, "unknown property %s: kind %s takes no properties", t.val, k)
	}
	return errorf(pos, CodeUnknownAttribute, "unknown property %s of kind %s (properties: %s)",
		t.val, k, strings.Join(allowed, ", "))
}
