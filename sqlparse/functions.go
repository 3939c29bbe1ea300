package sqlparse

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
)

// funcKind says what calling a function in a select list can do to the
// number of rows a query returns.
type funcKind uint8

const (
	// kindUnknown: not in DuckDB's catalog (a user-defined or
	// PostgreSQL-only function) or a macro whose body could not be
	// classified. Treated as possibly changing cardinality.
	kindUnknown funcKind = iota
	// kindScalar: one value per input row.
	kindScalar
	// kindAggregate: collapses rows (turns a plain SELECT into an
	// aggregate query).
	kindAggregate
	// kindSetReturning: may return several rows per input row (unnest, and
	// anything registered as a table function, e.g. generate_series, which
	// PostgreSQL expands in a select list).
	kindSetReturning
)

// funcCatalog maps a lower-cased function name to its kind. It is built
// from DuckDB's duckdb_functions() and never modified after.
type funcCatalog map[string]funcKind

var (
	catalogMu sync.Mutex
	catalog   funcCatalog // nil until loaded once
)

// processFuncCatalog returns the function catalog, read through db (a
// fresh in-memory DuckDB) by the first Open that succeeds and shared by
// every Parser of the process after that: a fresh database of the linked
// DuckDB library always lists the same built-ins, and reading them costs
// more than the rest of Open. A failed read is not cached.
func processFuncCatalog(ctx context.Context, db *sql.DB) (funcCatalog, error) {
	catalogMu.Lock()
	defer catalogMu.Unlock()
	if catalog != nil {
		return catalog, nil
	}
	cat, err := loadFuncCatalog(ctx, db)
	if err != nil {
		return nil, err
	}
	catalog = cat
	return cat, nil
}

// loadFuncCatalog reads DuckDB's built-in functions. Macros are classified
// by the functions their bodies call, iterated to a fixpoint because macros
// call macros; a macro that cannot be resolved stays unknown.
func loadFuncCatalog(ctx context.Context, db *sql.DB) (funcCatalog, error) {
	const q = `SELECT lower(function_name), function_type,
       CASE WHEN function_type = 'macro' THEN json_serialize_sql('SELECT ' || macro_definition)::VARCHAR END
FROM duckdb_functions()`
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("sqlparse: read function catalog: %w", err)
	}
	defer rows.Close()

	type seen struct{ scalar, aggregate, table bool }
	base := map[string]*seen{}
	macroBodies := map[string][]map[string]any{} // name -> bodies (one per overload)
	for rows.Next() {
		var name, typ string
		var body sql.NullString
		if err := rows.Scan(&name, &typ, &body); err != nil {
			return nil, fmt.Errorf("sqlparse: read function catalog: %w", err)
		}
		s := base[name]
		if s == nil {
			s = &seen{}
			base[name] = s
		}
		switch typ {
		case "scalar":
			s.scalar = true
		case "aggregate":
			s.aggregate = true
		case "table", "table_macro":
			s.table = true
		case "macro":
			stmt, err := decodeStatement("", body.String)
			if err != nil {
				macroBodies[name] = append(macroBodies[name], nil) // unclassifiable
				continue
			}
			macroBodies[name] = append(macroBodies[name], stmt)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlparse: read function catalog: %w", err)
	}

	cat := funcCatalog{}
	for name, s := range base {
		switch {
		case s.aggregate:
			cat[name] = kindAggregate
		case s.table:
			cat[name] = kindSetReturning
		case s.scalar && len(macroBodies[name]) == 0:
			cat[name] = kindScalar
		}
	}
	// Resolve macros until nothing changes. Each pass settles at least one
	// macro or stops, so this ends after at most len(macroBodies) passes.
	for changed := true; changed; {
		changed = false
		for name, bodies := range macroBodies {
			if _, done := cat[name]; done {
				continue
			}
			kind, resolved := cat.classifyMacro(bodies)
			if resolved {
				cat[name] = kind
				changed = true
			}
		}
	}
	return cat, nil
}

// classifyMacro combines the kinds of the calls in a macro's bodies. It is
// resolved once the worst call is known: any aggregate or set-returning
// call settles it; otherwise every call must be a settled scalar.
func (c funcCatalog) classifyMacro(bodies []map[string]any) (funcKind, bool) {
	eff := effect(0)
	for _, body := range bodies {
		if body == nil {
			return kindUnknown, true
		}
		eff |= c.effects(body)
	}
	switch {
	case eff&effectAggregate != 0:
		return kindAggregate, true
	case eff&effectSetReturning != 0:
		return kindSetReturning, true
	case eff&effectUnknown != 0:
		return kindUnknown, false // may still resolve in a later pass
	default:
		return kindScalar, true
	}
}

// classify returns the kind of one FUNCTION expression node. Operators
// (+, ||, ~~*, ->>, ...) are scalar. A function qualified with a schema
// other than DuckDB's built-in ones is a user function and unknown.
func (c funcCatalog) classify(fn map[string]any) funcKind {
	if op, _ := fn["is_operator"].(bool); op {
		return kindScalar
	}
	if stringField(fn, "catalog") != "" {
		return kindUnknown
	}
	switch strings.ToLower(stringField(fn, "schema")) {
	case "", "main", "pg_catalog":
	default:
		return kindUnknown
	}
	return c[strings.ToLower(stringField(fn, "function_name"))]
}

// effect is a set of function kinds found in an expression.
type effect uint8

const (
	effectAggregate effect = 1 << iota
	effectSetReturning
	effectUnknown
)

// effects collects the kinds of the functions an expression calls at its
// own level. Subquery expressions are not entered: a scalar subquery yields
// at most one value per row whatever it calls inside (SQLMesh reasons the
// same way), and IN/EXISTS yield booleans. A window's own function is not
// classified (a window keeps the row count); its arguments are.
func (c funcCatalog) effects(v any) effect {
	var eff effect
	var visit func(any)
	visit = func(v any) {
		switch x := v.(type) {
		case []any:
			for _, e := range x {
				visit(e)
			}
		case map[string]any:
			switch stringField(x, "class") {
			case "SUBQUERY":
				return
			case "FUNCTION":
				switch c.classify(x) {
				case kindAggregate:
					eff |= effectAggregate
				case kindSetReturning:
					eff |= effectSetReturning
				case kindUnknown:
					eff |= effectUnknown
				}
			}
			for _, child := range x {
				visit(child)
			}
		}
	}
	visit(v)
	return eff
}
