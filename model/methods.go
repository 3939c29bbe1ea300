package model

import "strings"

// Schema is the part of Name before the dot. Name is "schema.table" for every
// Model the parser returns; for a hand-built Model without a dot it is "".
func (m *Model) Schema() string {
	schema, _, ok := strings.Cut(m.Name, ".")
	if !ok {
		return ""
	}
	return schema
}

// Table is the part of Name after the dot (all of Name if it has no dot).
func (m *Model) Table() string {
	_, table, ok := strings.Cut(m.Name, ".")
	if !ok {
		return m.Name
	}
	return table
}

// PosOf maps a byte offset in Query to its position in the model file, so
// that an error found while parsing the query (for example by package
// sqlparse, after mapping macro placeholders back with macro.Mapper) can be
// reported at the file's line and column.
//
// It relies on Query being a verbatim slice of the file starting at QueryPos,
// which the parser guarantees. Offsets outside [0, len(Query)] are clamped.
// Columns count bytes, like Pos.
func (m *Model) PosOf(queryOffset int) Pos {
	off := min(max(queryOffset, 0), len(m.Query))
	before := m.Query[:off]
	nl := strings.LastIndexByte(before, '\n')
	if nl < 0 {
		return Pos{File: m.QueryPos.File, Line: m.QueryPos.Line, Col: m.QueryPos.Col + off}
	}
	return Pos{
		File: m.QueryPos.File,
		Line: m.QueryPos.Line + strings.Count(before, "\n"),
		Col:  off - nl,
	}
}
