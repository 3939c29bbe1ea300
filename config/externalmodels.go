package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"

	"github.com/gapless-dev/gapless/internal/strictyaml"
)

// SQLMesh's external model files, at the project root: external_models.yaml,
// schema.yaml (its older name), and every *.yaml in external_models/.
const (
	ExternalModelsFile    = "external_models.yaml"
	ExternalModelsOldFile = "schema.yaml"
	ExternalModelsDir     = "external_models"
)

// ExternalModel is one entry of an external models file: a table gapless
// does not build, declared with its columns, as SQLMesh's EXTERNAL model.
type ExternalModel struct {
	// Name is the name as written, e.g. "db"."main"."raw_events";
	// Catalog (may be ""), Schema and Table are its parts, unquoted.
	Name                   string
	Catalog, Schema, Table string
	// Columns are the declared columns, in file order.
	Columns     []ExternalColumn
	Description string
	// Gateway, when set, limits the entry to that gateway.
	Gateway string
	// File and Line locate the entry's name.
	File string
	Line int
}

// ExternalColumn is a declared column: its name and type as written.
type ExternalColumn struct{ Name, Type string }

type fileExternalModel struct {
	Name        string         `yaml:"name"`
	Columns     map[string]any `yaml:"columns"`
	Description string         `yaml:"description"`
	Gateway     string         `yaml:"gateway"`
	Dialect     string         `yaml:"dialect"`
}

// ExternalModelFiles lists the external model files of the project at dir,
// in the order they are read.
func ExternalModelFiles(dir string) ([]string, error) {
	var out []string
	for _, name := range []string{ExternalModelsFile, ExternalModelsOldFile} {
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			out = append(out, p)
		}
	}
	for _, pat := range []string{"*.yaml", "*.yml"} {
		m, err := filepath.Glob(filepath.Join(dir, ExternalModelsDir, pat))
		if err != nil {
			return nil, fmt.Errorf("listing %s: %w", ExternalModelsDir, err)
		}
		sort.Strings(m)
		out = append(out, m...)
	}
	return out, nil
}

// LoadExternalModels reads every external model file of the project at dir
// (see ExternalModelFiles): a list of entries with name, columns (a map of
// column name to type), description and gateway. An entry for another
// gateway than gateway is left out (when gateway is "", entries naming a
// gateway are kept). Errors name the file and line; a name given twice is
// an error naming both places.
func LoadExternalModels(dir, gateway string) ([]ExternalModel, error) {
	files, err := ExternalModelFiles(dir)
	if err != nil {
		return nil, err
	}
	var out []ExternalModel
	seen := map[string]ExternalModel{}
	for _, f := range files {
		ems, err := readExternalModels(f)
		if err != nil {
			return nil, err
		}
		for _, em := range ems {
			if em.Gateway != "" && gateway != "" && !strings.EqualFold(em.Gateway, gateway) {
				continue
			}
			key := strings.ToLower(em.Schema + "." + em.Table)
			if prev, dup := seen[key]; dup {
				return nil, &Error{File: em.File, Line: em.Line, Col: 1, Msg: fmt.Sprintf("external model %s is already declared at %s:%d", em.Name, prev.File, prev.Line)}
			}
			seen[key] = em
			out = append(out, em)
		}
	}
	return out, nil
}

// readExternalModels reads one external models file.
func readExternalModels(file string) ([]ExternalModel, error) {
	src, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, &Error{File: file, Msg: "cannot read: " + err.Error(), Err: err}
	}
	f, err := parser.ParseBytes(src, 0)
	if err != nil {
		return nil, withoutSource(strictyaml.New(file).Decode(src, &[]any{}, filepath.Base(file)))
	}
	var body ast.Node
	for _, d := range f.Docs {
		if d != nil && d.Body != nil && d.Body.Type() != ast.NullType {
			body = d.Body
			break
		}
	}
	if body == nil {
		return nil, nil
	}
	seq, ok := body.(*ast.SequenceNode)
	if !ok {
		p := body.GetToken().Position
		return nil, &Error{File: file, Line: p.Line, Col: p.Column, Msg: "want a list of external models (- name: db.schema.table, columns: {...})"}
	}
	var out []ExternalModel
	for _, item := range seq.Values {
		p := item.GetToken().Position
		var raw fileExternalModel
		if err := yaml.NodeToValue(item, &raw, yaml.Strict()); err != nil {
			var ye yaml.Error
			if errors.As(err, &ye) && ye.GetToken() != nil && ye.GetToken().Position != nil {
				tp := ye.GetToken().Position
				msg, _, _ := strings.Cut(ye.GetMessage(), "\n")
				return nil, &Error{File: file, Line: tp.Line, Col: tp.Column, Msg: "external model: " + msg + " (keys: name, columns, description, gateway, dialect)"}
			}
			return nil, &Error{File: file, Line: p.Line, Col: p.Column, Msg: "external model: does not decode (want name, columns, description, gateway)"}
		}
		keyLines := map[string]int{}
		if pairs, ok := item.(*ast.MappingNode); ok {
			for _, kv := range pairs.Values {
				k := kv.Key.GetToken().Value
				keyLines[k] = kv.Key.GetToken().Position.Line
				if k == "columns" {
					if cm, ok := kv.Value.(*ast.MappingNode); ok {
						for _, c := range cm.Values {
							keyLines["columns."+c.Key.GetToken().Value] = c.Key.GetToken().Position.Line
						}
					} else if c, ok := kv.Value.(*ast.MappingValueNode); ok {
						keyLines["columns."+c.Key.GetToken().Value] = c.Key.GetToken().Position.Line
					}
				}
			}
		} else if kv, ok := item.(*ast.MappingValueNode); ok {
			keyLines[kv.Key.GetToken().Value] = kv.Key.GetToken().Position.Line
		}
		line := func(key string) int {
			if l, ok := keyLines[key]; ok {
				return l
			}
			return p.Line
		}
		em := ExternalModel{Name: strings.TrimSpace(raw.Name), Description: raw.Description, Gateway: raw.Gateway, File: file, Line: line("name")}
		bad := func(key, format string, args ...any) error {
			return &Error{File: file, Line: line(key), Col: 1, Key: key, Msg: fmt.Sprintf(format, args...)}
		}
		if em.Name == "" {
			return nil, bad("name", "an external model needs a name: db.schema.table or schema.table")
		}
		parts, err := splitTableName(em.Name)
		if err != nil {
			return nil, bad("name", "external model %s: %v", em.Name, err)
		}
		switch len(parts) {
		case 2:
			em.Schema, em.Table = parts[0], parts[1]
		case 3:
			em.Catalog, em.Schema, em.Table = parts[0], parts[1], parts[2]
		default:
			return nil, bad("name", "external model %s: want schema.table or catalog.schema.table", em.Name)
		}
		cols := make([]string, 0, len(raw.Columns))
		for c := range raw.Columns {
			cols = append(cols, c)
		}
		sort.Slice(cols, func(i, j int) bool { return line("columns."+cols[i]) < line("columns."+cols[j]) })
		for _, c := range cols {
			typ, ok := raw.Columns[c].(string)
			if !ok || strings.TrimSpace(typ) == "" {
				return nil, bad("columns."+c, "external model %s: column %s: want its type as a string, such as INT or TEXT", em.Name, c)
			}
			em.Columns = append(em.Columns, ExternalColumn{Name: c, Type: strings.TrimSpace(typ)})
		}
		if len(em.Columns) == 0 {
			return nil, bad("name", "external model %s declares no columns: add columns: {name: TYPE, ...} (gapless create_external_models reads them from the warehouse)", em.Name)
		}
		out = append(out, em)
	}
	return out, nil
}

// splitTableName splits a dotted name whose parts may be double-quoted
// ("db"."main"."t", db.main.t); a quoted part keeps its case, "" inside
// quotes is one quote.
func splitTableName(s string) ([]string, error) {
	var parts []string
	for i := 0; ; {
		var part strings.Builder
		if i < len(s) && s[i] == '"' {
			i++
			closed := false
			for i < len(s) {
				if s[i] == '"' {
					if i+1 < len(s) && s[i+1] == '"' {
						part.WriteByte('"')
						i += 2
						continue
					}
					i++
					closed = true
					break
				}
				part.WriteByte(s[i])
				i++
			}
			if !closed {
				return nil, errors.New("unterminated quoted name")
			}
		} else {
			for i < len(s) && s[i] != '.' {
				if s[i] == '"' || s[i] == ' ' {
					return nil, fmt.Errorf("unexpected %q in the name", s[i])
				}
				part.WriteByte(s[i])
				i++
			}
		}
		if part.Len() == 0 {
			return nil, errors.New("empty part in the name")
		}
		parts = append(parts, part.String())
		if i == len(s) {
			return parts, nil
		}
		if s[i] != '.' {
			return nil, fmt.Errorf("unexpected %q after a quoted part", s[i])
		}
		i++
	}
}

// WarehouseCatalog is the catalog of the warehouse conn in SQLMesh's fully
// qualified names: a DuckDB file's name without its extension ("memory" in
// memory), a PostgreSQL database's name; "" when unknown.
func WarehouseCatalog(c Conn) string {
	switch c.Driver {
	case DriverDuckDB:
		if c.Path == Memory {
			return "memory"
		}
		base := filepath.Base(c.Path)
		return strings.TrimSuffix(base, filepath.Ext(base))
	case DriverPostgres:
		u := strings.TrimPrefix(c.DSN, "postgres://")
		if _, rest, ok := strings.Cut(u, "/"); ok {
			db, _, _ := strings.Cut(rest, "?")
			return db
		}
	}
	return ""
}

// WriteExternalModels merges add into the project's external_models.yaml at
// dir, as SQLMesh's create_external_models does: the entries already in the
// file are kept (an entry of add with the same schema.table replaces
// nothing), and the file is rewritten with every entry sorted by name, each
// with its columns in order. Comments are not kept. It returns the file's
// path.
func WriteExternalModels(dir string, add []ExternalModel) (string, error) {
	file := filepath.Join(dir, ExternalModelsFile)
	existing, err := readExternalModels(file)
	if err != nil {
		return file, err
	}
	have := map[string]bool{}
	for _, em := range existing {
		have[strings.ToLower(em.Schema+"."+em.Table)] = true
	}
	all := existing
	for _, em := range add {
		if key := strings.ToLower(em.Schema + "." + em.Table); !have[key] {
			have[key] = true
			all = append(all, em)
		}
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].Name < all[j].Name })
	var b strings.Builder
	for _, em := range all {
		fmt.Fprintf(&b, "- name: %s\n", yamlScalar(em.Name))
		if em.Description != "" {
			fmt.Fprintf(&b, "  description: %s\n", yamlScalar(em.Description))
		}
		if em.Gateway != "" {
			fmt.Fprintf(&b, "  gateway: %s\n", yamlScalar(em.Gateway))
		}
		b.WriteString("  columns:\n")
		for _, c := range em.Columns {
			fmt.Fprintf(&b, "    %s: %s\n", yamlScalar(c.Name), yamlScalar(c.Type))
		}
	}
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o644); err != nil {
		return file, fmt.Errorf("writing %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, file); err != nil {
		return file, fmt.Errorf("replacing %s: %w", file, err)
	}
	return file, nil
}

// QualifiedName is SQLMesh's fully qualified, quoted name of a table:
// "catalog"."schema"."table", or "schema"."table" without a catalog.
func QualifiedName(catalog, schema, table string) string {
	q := func(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }
	if catalog == "" {
		return q(schema) + "." + q(table)
	}
	return q(catalog) + "." + q(schema) + "." + q(table)
}

// yamlScalar renders s as one YAML scalar, quoted when YAML needs it.
func yamlScalar(s string) string {
	out, err := yaml.Marshal(s)
	if err != nil {
		return strconv.Quote(s)
	}
	q := strings.TrimSpace(string(out))
	if strings.HasPrefix(q, `"`) && !strings.ContainsAny(s, "\n\r\t\\") {
		// SQLMesh writes single quotes: '"db"."raw"."t"'.
		return "'" + strings.ReplaceAll(s, "'", "''") + "'"
	}
	return q
}
