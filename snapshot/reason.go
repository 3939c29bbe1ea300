package snapshot

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
)

// fieldChange is one hashed attribute that differs between two snapshots:
// its name as the fingerprint spells it (kind, time_column, owner, ...) and
// its value before and after, as JSON.
type fieldChange struct {
	Name          string
	Before, After string
}

// changedFields compares two values of the same hashed struct (dataParts
// or metadataParts) field by field. Since it walks the struct, an attribute
// added to the fingerprint is named here without further work.
func changedFields(a, b any) []fieldChange {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	t := va.Type()
	var out []fieldChange
	for i := range t.NumField() {
		before, _ := json.Marshal(va.Field(i).Interface())
		after, _ := json.Marshal(vb.Field(i).Interface())
		if string(before) == string(after) {
			continue
		}
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		out = append(out, fieldChange{Name: name, Before: string(before), After: string(after)})
	}
	return out
}

// describe renders one physical attribute's change: "kind changes from FULL
// to VIEW", "the seed's CSV content changes".
func (f fieldChange) describe() string {
	switch f.Name {
	case "seed_hash":
		return "the seed's CSV content changes"
	case "columns":
		return "its declared columns change"
	case "query":
		return "the query changes"
	}
	before, after := plain(f.Before), plain(f.After)
	if before == "" || after == "" || len(before)+len(after) > 60 {
		return f.Name + " changes"
	}
	return fmt.Sprintf("%s changes from %s to %s", f.Name, before, after)
}

// plain is a JSON scalar as a person writes it: a string unquoted, a
// number or boolean as is; "" for null, an empty string or anything
// structured.
func plain(j string) string {
	var v any
	if json.Unmarshal([]byte(j), &v) != nil {
		return ""
	}
	switch x := v.(type) {
	case string:
		return x
	case float64, bool:
		return j
	}
	return ""
}

// names joins attribute names: "owner", "cron and owner", "cron, owner and
// tags".
func names(fs []fieldChange) string {
	ns := make([]string, len(fs))
	for i, f := range fs {
		ns[i] = f.Name
	}
	return andList(ns)
}

// andList joins words as a sentence does: "a", "a and b", "a, b and c".
func andList(ws []string) string {
	switch len(ws) {
	case 0:
		return ""
	case 1:
		return ws[0]
	}
	return strings.Join(ws[:len(ws)-1], ", ") + " and " + ws[len(ws)-1]
}

// metadataFields is what changed in a model's metadata between p and n.
func metadataFields(p, n *Snapshot) []fieldChange {
	return changedFields(metadataPartsOf(p.Model), metadataPartsOf(n.Model))
}

// physicalFields is what changed in a model's data definition between p and
// n, besides its query.
func physicalFields(p, n *Snapshot) []fieldChange {
	var out []fieldChange
	for _, f := range changedFields(dataPartsOf(p.input()), dataPartsOf(n.input())) {
		if f.Name != "query" {
			out = append(out, f)
		}
	}
	return out
}

// input is what s was built from.
func (s *Snapshot) input() Input {
	return Input{Model: s.Model, Canonical: s.Canonical, SeedHash: s.SeedHash}
}

// categoryVerb says how a parent changes, for its children's reasons.
func categoryVerb(c Category) string {
	switch c {
	case Breaking:
		return "changes breakingly"
	case NonBreaking:
		return "changes non-breakingly"
	case IndirectBreaking:
		return "is indirectly breaking"
	case IndirectNonBreaking:
		return "is indirectly non-breaking"
	case Added:
		return "is new"
	}
	return "changes"
}
