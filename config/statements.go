package config

import (
	"path/filepath"
	"strings"

	"github.com/goccy/go-yaml/ast"

	"github.com/gapless-dev/gapless/internal/strictyaml"
	"github.com/gapless-dev/gapless/model"
)

// strictPos is p's line and column for an error of the file.
func strictPos(p model.Pos) strictyaml.Pos { return strictyaml.Pos{Line: p.Line, Col: p.Col} }

// statements reads the before_all or after_all list (key) of the file
// being loaded: one SQL statement per item, kept as written (macros
// included, SQLMesh's @this_env too) with the item's position, for
// execute.EnvironmentStatements. An item that is empty, or whose effect
// would last only for a session (model.SessionScoped: SET, USE,
// CREATE TEMP ...), is an error at its line: gapless runs each statement
// on its own pooled connection.
func (l *loader) statements(dir, key string, raw []string) ([]model.Statement, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	file := l.File
	if rel, err := filepath.Rel(dir, l.File); err == nil && !strings.HasPrefix(rel, "..") {
		file = rel
	}
	var items []ast.Node
	if seq, ok := l.ValNode[key].(*ast.SequenceNode); ok {
		items = seq.Values
	}
	out := make([]model.Statement, 0, len(raw))
	for i, sql := range raw {
		pos := model.Pos{File: file, Line: l.ValPos[key].Line, Col: l.ValPos[key].Col}
		if i < len(items) && items[i] != nil && items[i].GetToken() != nil && items[i].GetToken().Position != nil {
			p := items[i].GetToken().Position
			pos.Line, pos.Col = p.Line, p.Column
		}
		sql = strings.TrimRight(strings.TrimSpace(sql), ";")
		if strings.TrimSpace(sql) == "" {
			return nil, l.ErrAt(key, strictPos(pos), nil, "%s: item %d is empty: write one SQL statement per item", key, i+1)
		}
		if why := model.SessionScoped(sql); why != "" {
			return nil, l.ErrAt(key, strictPos(pos), nil,
				"%s: item %d: %s; gapless runs each statement on its own pooled connection, so its effect would reach nothing that follows", key, i+1, why)
		}
		out = append(out, model.Statement{SQL: sql, Pos: pos})
	}
	return out, nil
}
