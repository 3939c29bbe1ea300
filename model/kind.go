package model

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/gapless-dev/gapless/model/suggest"
)

// Kinds lists every supported kind, in the order messages list them.
var Kinds = []Kind{
	KindIncrementalByTimeRange, KindIncrementalByUniqueKey, KindFull, KindView, KindSeed, KindExternal,
	KindSCDType2ByTime, KindSCDType2ByColumn, KindIncrementalByPartition, KindIncrementalUnmanaged,
}

// The kinds SQLMesh users bring over besides the ones above (see
// execute/kinds.go for how each runs).
const (
	// KindSCDType2ByTime keeps a history of each unique key's rows with
	// valid_from / valid_to columns, a row changing when its updated_at
	// column moves forward. SQLMesh's SCD_TYPE_2 is the same kind.
	KindSCDType2ByTime Kind = "SCD_TYPE_2_BY_TIME"
	// KindSCDType2ByColumn is KindSCDType2ByTime where a row changes when
	// one of its checked columns differs, stamped with the execution time.
	KindSCDType2ByColumn Kind = "SCD_TYPE_2_BY_COLUMN"
	// KindIncrementalByPartition replaces, at each run, exactly the
	// partitions (partitioned_by values) present in the query's output.
	KindIncrementalByPartition Kind = "INCREMENTAL_BY_PARTITION"
	// KindIncrementalUnmanaged appends the query's rows at each run (or
	// overwrites the table with insert_overwrite true).
	KindIncrementalUnmanaged Kind = "INCREMENTAL_UNMANAGED"
)

// kindAliases are other names SQLMesh accepts for a kind.
var kindAliases = map[string]Kind{"SCD_TYPE_2": KindSCDType2ByTime}

// IsSCDType2 reports whether k keeps a valid_from / valid_to history.
func (k Kind) IsSCDType2() bool { return k == KindSCDType2ByTime || k == KindSCDType2ByColumn }

// SCDType2 holds the properties of the SCD type 2 kinds, with SQLMesh's
// defaults applied by the parser: ValidFrom and ValidTo are always set
// (valid_from, valid_to), TimeDataType too (TIMESTAMP), UpdatedAt is set for
// SCD_TYPE_2_BY_TIME (updated_at) and only when written for
// SCD_TYPE_2_BY_COLUMN, where it then stamps changes instead of the
// execution time. Columns are the checked columns of SCD_TYPE_2_BY_COLUMN;
// AllColumns is columns *.
type SCDType2 struct {
	ValidFrom                string
	ValidTo                  string
	UpdatedAt                string
	InvalidateHardDeletes    bool
	UpdatedAtAsValidFrom     bool
	ExecutionTimeAsValidFrom bool
	TimeDataType             string
	Columns                  []string
	AllColumns               bool
}

// String renders the properties as a model header writes them, in a fixed
// order (plan headers show it).
func (s SCDType2) String() string {
	ps := []string{"valid_from_name " + s.ValidFrom, "valid_to_name " + s.ValidTo}
	if s.UpdatedAt != "" {
		ps = append(ps, "updated_at_name "+s.UpdatedAt)
	}
	ps = append(ps, fmt.Sprintf("invalidate_hard_deletes %t", s.InvalidateHardDeletes))
	if s.UpdatedAtAsValidFrom {
		ps = append(ps, "updated_at_as_valid_from true")
	}
	if s.ExecutionTimeAsValidFrom {
		ps = append(ps, "execution_time_as_valid_from true")
	}
	ps = append(ps, "time_data_type "+s.TimeDataType)
	switch {
	case s.AllColumns:
		ps = append(ps, "columns *")
	case len(s.Columns) > 0:
		ps = append(ps, "columns ["+strings.Join(s.Columns, ", ")+"]")
	}
	return strings.Join(ps, ", ")
}

// ParseKind returns the Kind named s, compared case-insensitively
// (SQLMesh's alias SCD_TYPE_2 is SCD_TYPE_2_BY_TIME).
func ParseKind(s string) (Kind, bool) {
	if k, ok := kindAliases[strings.ToUpper(s)]; ok {
		return k, true
	}
	for _, k := range Kinds {
		if strings.EqualFold(string(k), s) {
			return k, true
		}
	}
	return "", false
}

// sqlmeshOnlyKinds are SQLMesh kinds gapless does not support.
var sqlmeshOnlyKinds = []string{"EMBEDDED", "CUSTOM", "MANAGED"}

// kindProperties lists the properties each kind accepts inside its
// parentheses; kinds not listed take none.
var kindProperties = map[Kind][]string{
	KindIncrementalByTimeRange: {"time_column", "lookback", "batch_size", "batch_concurrency", "forward_only"},
	KindIncrementalByUniqueKey: {"unique_key", "forward_only"},
	KindSeed:                   {"path", "batch_size"},
	KindSCDType2ByTime: {"unique_key", "updated_at_name", "valid_from_name", "valid_to_name",
		"invalidate_hard_deletes", "updated_at_as_valid_from", "time_data_type", "batch_size", "forward_only"},
	KindSCDType2ByColumn: {"unique_key", "columns", "execution_time_as_valid_from", "updated_at_name",
		"valid_from_name", "valid_to_name", "invalidate_hard_deletes", "time_data_type", "batch_size", "forward_only"},
	KindIncrementalByPartition: {"forward_only"},
	KindIncrementalUnmanaged:   {"insert_overwrite", "forward_only"},
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
	p.kindDefaults(k)
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
	return p.checkKindProperties(k, props, pos)
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
	case "valid_from_name", "valid_to_name", "updated_at_name", "time_data_type", "columns",
		"invalidate_hard_deletes", "updated_at_as_valid_from", "execution_time_as_valid_from", "insert_overwrite":
		err = p.newKindProperty(name)
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

// kindDefaults applies SQLMesh's defaults of kind k before its properties
// are read: the SCD type 2 column names and time type, and forward_only
// true for the four kinds SQLMesh makes forward-only by default (SCD type
// 2, INCREMENTAL_UNMANAGED) or always (INCREMENTAL_BY_PARTITION).
func (p *parser) kindDefaults(k Kind) {
	m := p.m
	switch k {
	case KindSCDType2ByTime, KindSCDType2ByColumn:
		m.SCD = SCDType2{ValidFrom: "valid_from", ValidTo: "valid_to", TimeDataType: "TIMESTAMP"}
		if k == KindSCDType2ByTime {
			m.SCD.UpdatedAt = "updated_at"
		}
		m.ForwardOnly = true
	case KindIncrementalByPartition, KindIncrementalUnmanaged:
		m.ForwardOnly = true
	}
}

// newKindProperty parses the value of one property of the SCD type 2 and
// INCREMENTAL_UNMANAGED kinds (name, already consumed, lower case).
func (p *parser) newKindProperty(name string) error {
	m := p.m
	var err error
	switch name {
	case "valid_from_name":
		m.SCD.ValidFrom, err = p.identifier(name)
	case "valid_to_name":
		m.SCD.ValidTo, err = p.identifier(name)
	case "updated_at_name":
		m.SCD.UpdatedAt, err = p.identifier(name)
	case "invalidate_hard_deletes":
		m.SCD.InvalidateHardDeletes, err = p.boolValue(name)
	case "updated_at_as_valid_from":
		m.SCD.UpdatedAtAsValidFrom, err = p.boolValue(name)
	case "execution_time_as_valid_from":
		m.SCD.ExecutionTimeAsValidFrom, err = p.boolValue(name)
	case "insert_overwrite":
		m.InsertOverwrite, err = p.boolValue(name)
	case "time_data_type":
		at := p.tok
		var typ string
		if at.kind == tokString {
			typ, err = strings.TrimSpace(at.val), p.advance()
		} else {
			typ, err = p.expression(name)
		}
		if err == nil && !sqlTypeName.MatchString(typ) {
			err = errorf(p.pos(at), CodeBadValue,
				"bad time_data_type %s: want a SQL type name such as TIMESTAMP, TIMESTAMPTZ or DATE", typ)
		}
		m.SCD.TimeDataType = strings.ToUpper(typ)
	case "columns":
		at := p.tok
		if p.isPunct("*") {
			m.SCD.AllColumns = true
			return p.advance()
		}
		if m.SCD.Columns, err = p.list(name, p.identifier); err == nil && len(m.SCD.Columns) == 0 {
			err = errorf(p.pos(at), CodeBadValue, "columns is empty; name the columns to check, or write columns *")
		}
	}
	return err
}

// sqlTypeName is the shape of a type name time_data_type accepts: words,
// optionally with a precision, nothing that could end the CAST it is put
// in.
var sqlTypeName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_ ]*(\([0-9]+\))?( [A-Za-z ]+)?$`)

// checkKindProperties checks what the properties of the kinds SQLMesh
// users bring over need together, at the kind (pos) or at the property
// (props) written wrong; it mirrors the errors SQLMesh raises for them.
func (p *parser) checkKindProperties(k Kind, props map[string]token, pos Pos) error {
	m := p.m
	if t, ok := props["forward_only"]; ok && k == KindIncrementalByPartition && !m.ForwardOnly {
		return errorf(p.pos(t), CodeBadValue,
			"kind %s is always forward-only: remove forward_only false (SQLMesh refuses it too)", k)
	}
	if !k.IsSCDType2() {
		return nil
	}
	if _, ok := props["unique_key"]; !ok {
		return errorf(pos, CodeInvalid,
			"kind %s needs a unique key: write kind %s (unique_key COLUMN) or (unique_key (C1, C2))", k, k)
	}
	if strings.EqualFold(m.SCD.ValidFrom, m.SCD.ValidTo) {
		return errorf(pos, CodeBadValue, "kind %s: valid_from_name and valid_to_name are both %s; name two columns", k, m.SCD.ValidFrom)
	}
	if k == KindSCDType2ByColumn {
		if _, ok := props["columns"]; !ok {
			return errorf(pos, CodeInvalid,
				"kind %s needs the columns to check: write columns [C1, C2] or columns *", k)
		}
	}
	if t, ok := props["updated_at_as_valid_from"]; ok && k == KindSCDType2ByTime && m.SCD.UpdatedAtAsValidFrom && m.SCD.UpdatedAt == "" {
		return errorf(p.pos(t), CodeInvalid, "updated_at_as_valid_from needs updated_at_name")
	}
	for _, c := range []string{m.SCD.ValidFrom, m.SCD.ValidTo} {
		if containsFold(m.UniqueKey, c) || containsFold(m.SCD.Columns, c) || strings.EqualFold(m.SCD.UpdatedAt, c) {
			return errorf(pos, CodeBadValue,
				"kind %s: %s is a history column gapless writes; it cannot also be a key, checked or updated_at column", k, c)
		}
	}
	return nil
}
