package project

import (
	"errors"
	"fmt"

	"github.com/gapless-dev/gapless/config"
	"github.com/gapless-dev/gapless/dialect"
	"github.com/gapless-dev/gapless/macro"
	"github.com/gapless-dev/gapless/model"
)

// transpile rewrites m.Query, its macros expanded, from m's dialect to the
// engine's (see package dialect), so that dependency extraction, the checks
// and execution all read SQL the engine understands. A model in an engine
// dialect is left as written (the zero Mapper). A construct that cannot be
// carried over is a *model.Error at its line in the model file as written
// (written, through expMap), wrapping the *dialect.Error.
//
// The returned mapper takes offsets of the rewritten m.Query back to the
// expanded query (then expMap takes them to the file).
func transpile(m, written *model.Model, expMap macro.Mapper, engine string) (dialect.Mapper, error) {
	if dialect.Engine(string(m.Dialect)) {
		return dialect.Mapper{}, nil
	}
	out, tmap, err := dialect.Transpile(m.Query, string(m.Dialect), engine)
	if err != nil {
		var de *dialect.Error
		if errors.As(err, &de) {
			return dialect.Mapper{}, &model.Error{Pos: written.PosOf(expMap.Original(de.Offset)), Code: model.CodeInvalid,
				Msg: fmt.Sprintf("model %s cannot be carried over to the %s engine: %s", m.Name, engineName(engine), de.Error()), Err: err}
		}
		return dialect.Mapper{}, &model.Error{Pos: written.QueryPos, Code: model.CodeInvalid, Msg: err.Error(), Err: err}
	}
	m.Query = out
	return tmap, nil
}

// dialectCanonical is what the fingerprint of a model written in a dialect
// other than the engines' covers: the dialect and the query as written
// (macros expanded), with layout, comments and keyword case normalised
// (dialect.Canonical), not the rewritten query. So a later gapless whose
// rewrite of the same text is better (a construct it refused now carried
// over, a different but equivalent spelling) rebuilds nothing, while any
// change the author makes to the text does. The "ast:" prefix marks it as
// not the engine's SQL: a change is judged breaking, as for a query whose
// macros run at execution.
func dialectCanonical(m *model.Model, expanded string) string {
	return "ast:dialect " + string(m.Dialect) + ": " + dialect.Canonical(expanded, string(m.Dialect))
}

// engineName is the engine dialect's name, "" meaning DuckDB.
func engineName(engine string) string {
	if engine == "" {
		return dialect.DuckDB
	}
	return engine
}

// engineOf is the engine dialect of a warehouse driver.
func engineOf(d config.Driver) string {
	switch d {
	case config.DriverPostgres:
		return dialect.Postgres
	case config.DriverTrino:
		return dialect.Trino
	}
	return dialect.DuckDB
}
