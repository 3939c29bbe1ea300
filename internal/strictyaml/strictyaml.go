// Package strictyaml decodes a YAML file strictly, the way gapless reads
// gapless.yaml and sources/*.yaml: a key the target struct does not name is
// an error at its line and column that suggests the closest known key, and
// every key's and value's position is kept, so that a problem found after
// decoding still points into the file.
package strictyaml

import (
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"

	"github.com/gapless-dev/gapless/model/suggest"
)

// Error is a problem in a YAML file. Its text is "file:line:col: message",
// or "file: message" when it is not tied to a place. Err, when set, is the
// underlying cause; its text is already part of Msg.
type Error struct {
	File string
	Line int // 1-based; 0 when unknown
	Col  int
	// Key is the dotted path of the setting concerned, e.g.
	// "environments.prod.on_incumbent_advance"; "" when none.
	Key string
	Msg string
	Err error
}

// Error implements error.
func (e *Error) Error() string {
	if e.Line == 0 {
		return fmt.Sprintf("%s: %s", e.File, e.Msg)
	}
	return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Col, e.Msg)
}

// Unwrap returns the underlying cause, if any.
func (e *Error) Unwrap() error { return e.Err }

// Pos is a line and column in the file, 1-based; the zero Pos is unknown.
type Pos struct{ Line, Col int }

// Doc is one file being decoded: its name, and the positions of its keys
// and values by dotted path ("files.settle"), filled by Decode.
type Doc struct {
	File    string
	KeyPos  map[string]Pos
	ValPos  map[string]Pos
	ValNode map[string]ast.Node
}

// New returns a Doc for the file named file (as errors should name it).
func New(file string) *Doc {
	return &Doc{File: file, KeyPos: map[string]Pos{}, ValPos: map[string]Pos{}, ValNode: map[string]ast.Node{}}
}

// ErrAt is an *Error at p about key, with cause's text appended when set.
func (d *Doc) ErrAt(key string, p Pos, cause error, format string, args ...any) *Error {
	msg := fmt.Sprintf(format, args...)
	if cause != nil {
		msg += ": " + cause.Error()
	}
	return &Error{File: d.File, Line: p.Line, Col: p.Col, Key: key, Msg: msg, Err: cause}
}

// ValueErr reports a problem with the value at key.
func (d *Doc) ValueErr(key string, cause error, format string, args ...any) *Error {
	return d.ErrAt(key, d.ValPos[key], cause, format, args...)
}

// KeyErr reports a problem at key itself (where it is written).
func (d *Doc) KeyErr(key string, cause error, format string, args ...any) *Error {
	return d.ErrAt(key, d.KeyPos[key], cause, format, args...)
}

// Decode parses src, checks its keys strictly against dst's yaml tags, and
// decodes it into dst (a pointer to a struct). An empty document leaves dst
// alone. More than one document is an error; what names the file's kind in
// that message ("gapless.yaml", "a source file").
func (d *Doc) Decode(src []byte, dst any, what string) error {
	f, err := parser.ParseBytes(src, 0)
	if err != nil {
		return d.yamlErr(err)
	}
	var body ast.Node
	for _, doc := range f.Docs {
		if doc == nil || doc.Body == nil {
			continue
		}
		if body != nil {
			return d.ErrAt("", posOf(doc.Body), nil, "%s must hold a single YAML document", what)
		}
		body = doc.Body
	}
	if body == nil || body.Type() == ast.NullType {
		return nil
	}
	if err := d.checkKeys(body, reflect.TypeOf(dst).Elem(), ""); err != nil {
		return err
	}
	if err := yaml.NodeToValue(body, dst, yaml.Strict()); err != nil {
		return d.yamlErr(err)
	}
	return nil
}

// yamlErr converts a go-yaml error (which carries a token) into an *Error.
func (d *Doc) yamlErr(err error) *Error {
	var ye yaml.Error
	if errors.As(err, &ye) && ye.GetToken() != nil && ye.GetToken().Position != nil {
		p := ye.GetToken().Position
		e := &Error{File: d.File, Line: p.Line, Col: p.Column, Msg: ye.GetMessage(), Err: err}
		// go-yaml names Go types and struct fields; say it in the file's
		// terms instead.
		var te *yaml.TypeError
		if errors.As(err, &te) && te.DstType != nil && te.SrcType != nil {
			e.Key = d.keyAt(Pos{Line: p.Line, Col: p.Column})
			e.Msg = fmt.Sprintf("%s: want %s, got %s", e.Key, yamlKind(te.DstType), yamlKind(te.SrcType))
		}
		return e
	}
	return &Error{File: d.File, Msg: err.Error(), Err: err}
}

// keyAt returns the dotted key whose value is at p, or "value" if none is.
func (d *Doc) keyAt(p Pos) string {
	for k, v := range d.ValPos {
		if v == p {
			return k
		}
	}
	return "value"
}

// yamlKind names a Go type the way a YAML author thinks of it.
func yamlKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "a mapping"
	}
	return t.Kind().String()
}

func posOf(n ast.Node) Pos {
	if n == nil || n.GetToken() == nil || n.GetToken().Position == nil {
		return Pos{}
	}
	p := n.GetToken().Position
	return Pos{Line: p.Line, Col: p.Column}
}

// mappingValues returns the key/value pairs of a mapping node (go-yaml
// represents a one-pair mapping as a bare *ast.MappingValueNode), or false if
// n is not a mapping.
func mappingValues(n ast.Node) ([]*ast.MappingValueNode, bool) {
	switch v := n.(type) {
	case *ast.MappingNode:
		return v.Values, true
	case *ast.MappingValueNode:
		return []*ast.MappingValueNode{v}, true
	case *ast.AnchorNode:
		return mappingValues(v.Value)
	case *ast.TagNode:
		return mappingValues(v.Value)
	}
	return nil, false
}

// checkKeys walks node against the Go type it decodes into: mappings into
// structs may only use the struct's yaml keys (suggesting the closest on a
// miss); mappings into map[string]T take any key and recurse into T.
// (Duplicate keys are already refused by go-yaml's parser.) Along the way it
// records where every key and value is. Shapes that do not match (a list
// where a mapping belongs, ...) are left to the decoder, which reports them
// with a position.
func (d *Doc) checkKeys(node ast.Node, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	pairs, ok := mappingValues(node)
	if !ok || (t.Kind() != reflect.Struct && t.Kind() != reflect.Map) {
		return nil
	}
	var known []string
	fields := map[string]reflect.Type{}
	if t.Kind() == reflect.Struct {
		for i := 0; i < t.NumField(); i++ {
			name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
			known = append(known, name)
			fields[name] = t.Field(i).Type
		}
	}
	for _, pair := range pairs {
		if pair == nil || pair.Key == nil {
			continue
		}
		key := pair.Key.GetToken().Value
		if key == "<<" {
			continue // merge key: resolved by the decoder
		}
		child := key
		if path != "" {
			child = path + "." + key
		}
		kp := posOf(pair.Key)
		d.KeyPos[child], d.ValPos[child], d.ValNode[child] = kp, posOf(pair.Value), pair.Value
		if pair.Value == nil || d.ValPos[child] == (Pos{}) {
			d.ValPos[child] = kp
		}
		var next reflect.Type
		if t.Kind() == reflect.Map {
			next = t.Elem()
		} else {
			ft, ok := fields[key]
			if !ok {
				return d.unknownKey(child, kp, key, known, path)
			}
			next = ft
		}
		if err := d.checkKeys(pair.Value, next, child); err != nil {
			return err
		}
	}
	return nil
}

func (d *Doc) unknownKey(child string, kp Pos, key string, known []string, parent string) *Error {
	where := "at the top level"
	if parent != "" {
		where = "in " + parent
	}
	if s, ok := suggest.Closest(key, known); ok {
		return d.ErrAt(child, kp, nil, "unknown key %s %s: did you mean %s?", key, where, s)
	}
	return d.ErrAt(child, kp, nil, "unknown key %s %s (keys: %s)", key, where, strings.Join(known, ", "))
}
