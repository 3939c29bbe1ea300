package unittest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/duckdb/duckdb-go/v2"
	"github.com/goccy/go-yaml"

	"github.com/gapless-dev/gapless/project"
	"github.com/gapless-dev/gapless/warehouse"
)

// Reader runs read-only queries on the project's warehouse
// (warehouse.Engine has it).
type Reader interface {
	ReadOnlyQuery(ctx context.Context, sql string, args ...any) (*warehouse.Result, error)
}

// InputQuery is one --query TABLE SQL of create_test.
type InputQuery struct {
	Table, SQL string
}

// CreateOptions are create_test's arguments.
type CreateOptions struct {
	Model   string
	Queries []InputQuery
	// Vars are --var name value, in order.
	Vars []Var
	// Path is the test file: relative to the project's tests folder (as
	// in SQLMesh), or to the project when it starts with tests/; default
	// tests/<Name>.yaml.
	Path string
	// Name is the test's name; default test_<the model's table name>.
	Name string
	// Overwrite replaces a test of the same name in the file.
	Overwrite bool
	// IncludeCTEs also writes the expected rows of every top-level CTE.
	IncludeCTEs bool
	// Now is what CURRENT_TIMESTAMP reads when no execution_time is set.
	Now time.Time
}

// ErrTestExists is wrapped by Create when the file already has a test of
// that name and Overwrite is not set.
var ErrTestExists = errors.New("a test of that name already exists")

// Create writes a unit test for a model from real data, as SQLMesh's
// create_test does: each query runs on the warehouse through r (read-only)
// and its rows become the input of its table; the model then runs on
// those rows on an in-memory DuckDB, and its rows become the expected
// output. The test is checked to pass before it is written; a file's other
// tests are kept. It returns the file written, relative to the project.
func Create(ctx context.Context, pr *project.Project, r Reader, opts CreateOptions) (string, error) {
	m, ok := pr.Models[strings.ToLower(opts.Model)]
	if !ok {
		return "", fmt.Errorf("create_test: model %s: no such model in %s%s", opts.Model, pr.Dir, closest(opts.Model, modelNames(pr)))
	}
	name := opts.Name
	if name == "" {
		name = "test_" + m.Name[strings.LastIndexByte(m.Name, '.')+1:]
	}
	rel := opts.Path
	if rel == "" {
		rel = name + ".yaml"
	}
	if ext := strings.ToLower(filepath.Ext(rel)); ext != ".yaml" && ext != ".yml" {
		rel += ".yaml"
	}
	if !filepath.IsAbs(rel) && !strings.HasPrefix(filepath.ToSlash(rel), TestsDir+"/") {
		rel = filepath.Join(TestsDir, rel)
	}
	path := rel
	if !filepath.IsAbs(path) {
		path = filepath.Join(pr.Dir, rel)
	}
	existing, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("create_test: reading %s: %w", rel, err)
	}
	if existing != nil {
		tests, err := LoadFile(pr.Dir, path)
		if err != nil {
			return "", fmt.Errorf("create_test: %s cannot take another test: %w", rel, err)
		}
		if slices.ContainsFunc(tests, func(t *Test) bool { return t.Name == name }) {
			if !opts.Overwrite {
				return "", fmt.Errorf("create_test: %s: %w: %s (give --overwrite to replace it, or --name for another name)", rel, ErrTestExists, name)
			}
			existing = removeTopLevelKey(existing, name)
		}
	}

	t := &Test{Name: name, File: rel, Line: 1, Model: m.Name, Vars: opts.Vars}
	for _, q := range opts.Queries {
		res, err := r.ReadOnlyQuery(ctx, q.SQL)
		if err != nil {
			return "", fmt.Errorf("create_test: --query %s: %w", q.Table, err)
		}
		t.Inputs = append(t.Inputs, Input{Table: strings.ToLower(q.Table), Rows: resultRows(res)})
	}
	outputs, err := modelOutputs(ctx, pr, t, opts)
	if err != nil {
		return "", err
	}
	t.Outputs = outputs
	check := *t
	rep := Run(ctx, pr, []*Test{&check}, Options{Now: opts.Now})
	if res := rep.Results[0]; res.Status != Passed {
		var b strings.Builder
		_ = rep.Write(&b)
		return "", fmt.Errorf("create_test: the generated test does not pass, so it was not written:\n%s", b.String())
	}
	text, err := render(t)
	if err != nil {
		return "", fmt.Errorf("create_test: writing the test: %w", err)
	}
	if len(existing) > 0 {
		if !bytes.HasSuffix(existing, []byte("\n")) {
			existing = append(existing, '\n')
		}
		text = append(append(existing, '\n'), text...)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", fmt.Errorf("create_test: %w", err)
	}
	if err := os.WriteFile(path, text, 0o644); err != nil { //nolint:gosec // a test file is as readable as the project
		return "", fmt.Errorf("create_test: writing %s: %w", rel, err)
	}
	return rel, nil
}

func modelNames(pr *project.Project) []string {
	out := make([]string, 0, len(pr.Models))
	for n := range pr.Models {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// modelOutputs runs t's model on its inputs and returns its rows (and its
// CTEs' with IncludeCTEs) as expected outputs.
func modelOutputs(ctx context.Context, pr *project.Project, t *Test, opts CreateOptions) ([]Output, error) {
	cat := newCatalog(pr)
	defer cat.close()
	tr, err := newTestRun(ctx, pr, cat, t, Options{Now: opts.Now})
	if err != nil {
		return nil, fmt.Errorf("create_test: %w", err)
	}
	defer tr.close()
	if err := tr.createInputs(ctx); err != nil {
		return nil, fmt.Errorf("create_test: %w", err)
	}
	rendered, err := tr.render(ctx)
	if err != nil {
		return nil, fmt.Errorf("create_test: %w", err)
	}
	tree, err := tr.parse(ctx, rendered)
	if err != nil {
		return nil, fmt.Errorf("create_test: %w", err)
	}
	var outs []Output
	if opts.IncludeCTEs {
		for _, c := range tree.ctes {
			q, _, err := tr.cteQuery(ctx, tree, Output{CTE: strings.ToLower(c)})
			if err != nil {
				return nil, fmt.Errorf("create_test: %w", err)
			}
			rows, err := tr.query(ctx, q)
			if err != nil {
				return nil, fmt.Errorf("create_test: running CTE %s: %w", c, err)
			}
			outs = append(outs, Output{CTE: strings.ToLower(c), Rows: tableRows(rows)})
		}
	}
	rows, err := tr.query(ctx, rendered)
	if err != nil {
		return nil, fmt.Errorf("create_test: running model %s: %w", t.Model, err)
	}
	return append(outs, Output{Rows: tableRows(rows)}), nil
}

// tableRows turns canonical text back into YAML values: numbers and
// booleans as such, NULL as null, dates and timestamps as their text.
func tableRows(t *table) []Row {
	out := make([]Row, 0, len(t.rows))
	for _, r := range t.rows {
		row := Row{}
		for i, v := range r {
			row.Cells = append(row.Cells, Cell{Column: t.cols[i], Value: yamlValue(v, t.types[i])})
		}
		out = append(out, row)
	}
	return out
}

func yamlValue(s, typ string) any {
	if s == "NULL" {
		return nil
	}
	switch {
	case typ == "BOOLEAN":
		return s == "true"
	case strings.Contains(typ, "INT") && !strings.Contains(typ, "INTERVAL") && !strings.HasSuffix(typ, "]"):
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return i
		}
	case typ == "DOUBLE" || typ == "FLOAT" || typ == "REAL" || strings.HasPrefix(typ, "DECIMAL"):
		if f, err := strconv.ParseFloat(s, 64); err == nil {
			return f
		}
	}
	return s
}

// resultRows turns a warehouse result into input rows.
func resultRows(res *warehouse.Result) []Row {
	out := make([]Row, 0, len(res.Rows))
	for _, r := range res.Rows {
		row := Row{}
		for i, v := range r {
			typ := ""
			if i < len(res.Types) {
				typ = res.Types[i]
			}
			row.Cells = append(row.Cells, warehouseCell(strings.ToLower(res.Columns[i]), v, typ))
		}
		out = append(out, row)
	}
	return out
}

func warehouseCell(col string, v any, typ string) Cell {
	c := Cell{Column: col}
	switch x := v.(type) {
	case string:
		c.Value = x
		// PostgreSQL's NUMERIC arrives as its text.
		if t := strings.ToUpper(typ); strings.HasPrefix(t, "NUMERIC") || strings.HasPrefix(t, "DECIMAL") {
			if f, err := strconv.ParseFloat(x, 64); err == nil {
				c.Value = f
			}
		}
	case nil, bool, int64, uint64, float64:
		c.Value = x
	case int:
		c.Value = int64(x)
	case int32:
		c.Value = int64(x)
	case int16:
		c.Value = int64(x)
	case int8:
		c.Value = int64(x)
	case uint32:
		c.Value = uint64(x)
	case uint16:
		c.Value = uint64(x)
	case uint8:
		c.Value = uint64(x)
	case float32:
		c.Value = float64(x)
	case *big.Int:
		if x.IsInt64() {
			c.Value = x.Int64()
		} else {
			c.Value = x.String()
		}
	case duckdb.Decimal:
		f, _ := new(big.Rat).SetFrac(x.Value, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(x.Scale)), nil)).Float64()
		c.Value = f
	case time.Time:
		x = x.UTC()
		if typ == "DATE" {
			c.Value, c.Kind = x.Format("2006-01-02"), KindDate
		} else {
			c.Value, c.Kind = x.Format("2006-01-02 15:04:05.999999"), KindTimestamp
		}
	case []byte:
		c.Value = string(x)
	default:
		c.Value = canonical(v, typ)
	}
	return c
}

// render is t as YAML, in SQLMesh's layout: model, inputs (rows by table),
// outputs (query, ctes), vars.
func render(t *Test) ([]byte, error) {
	body := yaml.MapSlice{{Key: "model", Value: t.Model}}
	if len(t.Inputs) > 0 {
		inputs := yaml.MapSlice{}
		for _, in := range t.Inputs {
			inputs = append(inputs, yaml.MapItem{Key: in.Table, Value: rowsValue(in.Rows)})
		}
		body = append(body, yaml.MapItem{Key: "inputs", Value: inputs})
	}
	outputs := yaml.MapSlice{}
	ctes := yaml.MapSlice{}
	for _, o := range t.Outputs {
		if o.CTE != "" {
			ctes = append(ctes, yaml.MapItem{Key: o.CTE, Value: rowsValue(o.Rows)})
		}
	}
	if len(ctes) > 0 {
		outputs = append(outputs, yaml.MapItem{Key: "ctes", Value: ctes})
	}
	for _, o := range t.Outputs {
		if o.CTE == "" {
			outputs = append(outputs, yaml.MapItem{Key: "query", Value: rowsValue(o.Rows)})
		}
	}
	body = append(body, yaml.MapItem{Key: "outputs", Value: outputs})
	if len(t.Vars) > 0 {
		vars := yaml.MapSlice{}
		for _, v := range t.Vars {
			vars = append(vars, yaml.MapItem{Key: v.Name, Value: v.Value})
		}
		body = append(body, yaml.MapItem{Key: "vars", Value: vars})
	}
	out, err := yaml.MarshalWithOptions(yaml.MapSlice{{Key: t.Name, Value: body}}, yaml.IndentSequence(false))
	if err != nil {
		return nil, err
	}
	// Dates and timestamps in rows are written unquoted, as YAML dates,
	// as SQLMesh writes them.
	return quotedDate.ReplaceAll(out, []byte("$1$2")), nil
}

var quotedDate = regexp.MustCompile(`(?m)^((?: {6,}| *- )[^:\n]+: )"(\d{4}-\d{2}-\d{2}(?: \d{2}:\d{2}:\d{2}(?:\.\d+)?)?)"$`)

func rowsValue(rows []Row) any {
	out := make([]yaml.MapSlice, 0, len(rows))
	for _, r := range rows {
		m := yaml.MapSlice{}
		for _, c := range r.Cells {
			m = append(m, yaml.MapItem{Key: c.Column, Value: c.Value})
		}
		out = append(out, m)
	}
	return out
}

// removeTopLevelKey removes the block of the top-level key name from a
// YAML document: from its line to the next top-level key.
func removeTopLevelKey(src []byte, name string) []byte {
	lines := strings.SplitAfter(string(src), "\n")
	var out strings.Builder
	skipping := false
	for _, ln := range lines {
		top := ln != "" && ln[0] != ' ' && ln[0] != '\t' && ln[0] != '#' && ln[0] != '-' && strings.TrimSpace(ln) != ""
		if top {
			key := strings.TrimSpace(ln[:max(strings.IndexByte(ln, ':'), 0)])
			key = strings.Trim(key, `"'`)
			skipping = key == name
		}
		if !skipping {
			out.WriteString(ln)
		}
	}
	return []byte(out.String())
}
