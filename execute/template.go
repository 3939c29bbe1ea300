package execute

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/macro"
	"github.com/gapless-dev/gapless/model"
	"github.com/gapless-dev/gapless/snapshot"
	"github.com/gapless-dev/gapless/sqlparse"
	"github.com/gapless-dev/gapless/warehouse"
)

// Template is one snapshot's query pointed at a target snapshot set: every
// reference to another model of the set is rewritten to the physical table
// of the version that set uses; EXTERNAL models and anything else are left
// as written. Macros are kept, so a template is built once per apply or run
// and rendered per interval.
type Template struct {
	Snapshot *snapshot.Snapshot
	// Table is the snapshot's physical table (quoted into @this_model).
	Table warehouse.Table
	// Query is the rewritten model query, macros intact; "" for kinds
	// without a query (SEED, EXTERNAL).
	Query string
	// ReadsItself is set when the query reads the model's own table (by
	// its name or @this_model): its batches then depend on each other's
	// rows and run one after another whatever batch_concurrency says.
	ReadsItself bool
	// Columns, when set, are the columns Check derived for the query: the
	// create stage passes them to the engine to make a FULL model's empty
	// table from (warehouse.CreateTableAsParams.Columns).
	Columns []warehouse.Column

	thisModel string
	dialect   string
	// macros gives Render the columns @STAR and @UNION need (a query
	// keeps those calls when its project could not know the columns).
	macros *macro.Env
}

// Templates builds a template for every snapshot of set (keyed by model
// name), pointing each at the physical tables of set.
//
// Invariant: a reference is rewritten only when it names a model of set
// that is not EXTERNAL, and only the characters of the name change (see
// sqlparse.RewriteTables), so the rendered SQL reads exactly the versions
// the environment will serve.
func Templates(ctx context.Context, p *sqlparse.Parser, e warehouse.Engine, set map[string]*snapshot.Snapshot) (map[string]*Template, error) {
	out := make(map[string]*Template, len(set))
	for name, s := range set {
		t, err := newTemplate(ctx, p, e, s, set)
		if err != nil {
			return nil, fmt.Errorf("model %s: %w", name, err)
		}
		out[name] = t
	}
	return out, nil
}

// TemplateOf builds the template of one snapshot s of set, pointing it at
// the physical tables of set, as Templates does for every snapshot: for a
// caller (the scheduler's run) that renders only the few models with due
// work, since building a template parses its SQL.
func TemplateOf(ctx context.Context, p *sqlparse.Parser, e warehouse.Engine, s *snapshot.Snapshot, set map[string]*snapshot.Snapshot) (*Template, error) {
	t, err := newTemplate(ctx, p, e, s, set)
	if err != nil {
		return nil, fmt.Errorf("model %s: %w", s.Name, err)
	}
	return t, nil
}

func newTemplate(ctx context.Context, p *sqlparse.Parser, e warehouse.Engine, s *snapshot.Snapshot, set map[string]*snapshot.Snapshot) (*Template, error) {
	t := &Template{Snapshot: s, Table: PhysicalTable(s), dialect: e.Dialect()}
	t.thisModel = e.QuoteTable(t.Table)
	t.macros = &macro.Env{Columns: func(name string) ([]macro.Column, error) {
		return relationColumns(ctx, e, name)
	}}
	m := s.Model
	if m.Query == "" || m.Kind == model.KindSeed || m.Kind == model.KindExternal {
		return t, nil
	}
	occ, err := occurrences(ctx, p, s)
	if err != nil {
		return nil, err
	}
	rewritten, err := sqlparse.RewriteTables(m.Query, occ, func(ref sqlparse.TableRef) (string, bool) {
		if ref.Schema == "" {
			return "", false
		}
		target, ok := set[ref.Schema+"."+ref.Name]
		if !ok || target.Model.Kind == model.KindExternal {
			return "", false
		}
		if target.Name == s.Name {
			t.ReadsItself = true
		}
		return e.QuoteTable(PhysicalTable(target)), true
	})
	if err != nil {
		return nil, fmt.Errorf("pointing the query at physical tables: %w", err)
	}
	t.Query = rewritten
	// Conservative: @this_model anywhere (even in a comment) counts.
	if strings.Contains(strings.ToLower(m.Query), "@this_model") {
		t.ReadsItself = true
	}
	return t, nil
}

// Render is the template's SQL for the interval r (zero for kinds built
// whole) at execution time exec: macros substituted, @this_model the quoted
// physical table.
func (t *Template) Render(r interval.Range, exec time.Time) (string, error) {
	if t.Query == "" {
		return "", errors.New("the model has no query")
	}
	sql, err := macro.Render(t.Query, macro.Vars{Start: r.Start, End: r.End, Execution: exec, ThisModel: t.thisModel, Env: t.macros}, t.dialect)
	if err != nil {
		return "", fmt.Errorf("rendering macros for %s: %w", r, err)
	}
	return sql, nil
}

// relationColumns are the columns of the relation a macro names (as the
// query spells it after its model references were pointed at physical
// tables: "schema"."table" or schema.table), read from the engine.
func relationColumns(ctx context.Context, e warehouse.Engine, name string) ([]macro.Column, error) {
	parts := macro.SplitName(name)
	if len(parts) < 2 {
		return nil, fmt.Errorf("%s: name the relation with its schema (schema.table)", name)
	}
	cols, err := e.Columns(ctx, warehouse.Table{Schema: parts[len(parts)-2], Name: parts[len(parts)-1]})
	if err != nil {
		return nil, err
	}
	if len(cols) == 0 {
		return nil, fmt.Errorf("%s has no columns (does it exist?)", name)
	}
	out := make([]macro.Column, len(cols))
	for i, c := range cols {
		out[i] = macro.Column{Name: c.Name, Type: c.Type}
	}
	return out, nil
}

// occurrences is every place s's query names a table, offsets into
// s.Model.Query: the references the snapshot kept from loading the project
// (snapshot.Snapshot.Refs), or, for a snapshot saved without them, what
// parsing the query gives. RewriteTables checks each against the text
// either way.
func occurrences(ctx context.Context, p *sqlparse.Parser, s *snapshot.Snapshot) ([]sqlparse.TableRef, error) {
	if s.Refs != nil {
		occ := make([]sqlparse.TableRef, len(s.Refs))
		for i, r := range s.Refs {
			occ[i] = sqlparse.TableRef{Catalog: r.Catalog, Schema: r.Schema, Name: r.Name, Offset: r.Offset}
		}
		return occ, nil
	}
	parsable, mapper, err := macro.ForParse(s.Model.Query)
	if err != nil {
		return nil, fmt.Errorf("preparing the query for parsing: %w", err)
	}
	q, err := p.Parse(ctx, parsable)
	if err != nil {
		return nil, fmt.Errorf("parsing the query: %w", err)
	}
	occ := make([]sqlparse.TableRef, len(q.Occurrences))
	for i, o := range q.Occurrences {
		if o.Offset >= 0 {
			o.Offset = mapper.Original(o.Offset)
		}
		occ[i] = o
	}
	return occ, nil
}
