package execute

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"

	"github.com/gapless-dev/gapless/internal/logkey"
	"github.com/gapless-dev/gapless/model"
	"github.com/gapless-dev/gapless/snapshot"
	"github.com/gapless-dev/gapless/warehouse"
)

// LayoutOf is the layout of m's physical table: partitioned_by,
// clustered_by, physical_properties, table_format and storage_format as
// written, the description as the table comment and the column
// descriptions (column_descriptions, or the query's inline comments) as
// column comments. A VIEW model's view takes only the comments.
func LayoutOf(m *model.Model) warehouse.Layout {
	l := warehouse.Layout{Comment: m.Description}
	for _, d := range m.Descriptions() {
		l.ColumnComments = append(l.ColumnComments, warehouse.ColumnComment{Column: d.Column, Comment: d.Text})
	}
	if m.Kind == model.KindView {
		return l
	}
	// INCREMENTAL_BY_PARTITION's keys are what each batch replaces (see
	// kinds.go), applied by the kind on every engine that runs it, not a
	// physical layout to note as not applied.
	if m.Kind != model.KindIncrementalByPartition {
		l.PartitionedBy = m.PartitionedBy
	}
	l.ClusteredBy = m.ClusteredBy
	l.TableFormat = m.TableFormat
	l.Format = m.StorageFormat
	for _, p := range m.PhysicalProperties {
		l.Properties = append(l.Properties, warehouse.Property{Key: p.Key, Value: p.Value})
	}
	return l
}

// LayoutNotes are the lines plan prints for m on engine e: each part of
// m's layout the engine does not apply (partitions on DuckDB, say), prefixed
// with the model's name. A part the engine refuses is an error naming the
// model's file and line (see checkLayout).
func LayoutNotes(e warehouse.Engine, m *model.Model) ([]string, error) {
	notes, err := layoutNotes(e, m)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(notes))
	for i, n := range notes {
		out[i] = m.Name + ": " + n
	}
	return out, nil
}

// layoutNotes is CheckLayout of m's layout, its refusal as a *model.Error.
func layoutNotes(e warehouse.Engine, m *model.Model) ([]string, error) {
	if m.Kind == model.KindExternal {
		return nil, nil
	}
	l := LayoutOf(m)
	if m.Kind == model.KindView {
		var notes []string
		if len(m.PartitionedBy)+len(m.ClusteredBy)+len(m.PhysicalProperties) > 0 || m.TableFormat != "" || m.StorageFormat != "" {
			notes = append(notes, "partitioned_by, clustered_by, physical_properties and formats are not applied to a VIEW model")
		}
		return notes, nil
	}
	notes, err := e.CheckLayout(l)
	if err != nil {
		pos := m.HeaderPos
		var le *warehouse.LayoutError
		if errors.As(err, &le) {
			for _, p := range m.PhysicalProperties {
				if strings.HasSuffix(le.Part, " "+p.Key) {
					pos = p.Pos
				}
			}
		}
		return nil, &model.Error{Pos: pos, Code: model.CodeInvalid, Err: err,
			Msg: fmt.Sprintf("model %s: %v on %s", m.Name, err, e.Dialect())}
	}
	return notes, nil
}

// layoutColumn is the column a partition or sort expression names: the
// expression itself, or the first name inside a transform's brackets
// (day(ts), bucket(id, 16)), without ASC/DESC.
var layoutColumn = regexp.MustCompile(`^(?:[A-Za-z_][A-Za-z0-9_]*\s*\(\s*)?"?([^",()\s]+)"?`)

// checkLayout checks, before anything is written, that m's column
// descriptions and partition and clustering columns name columns of its
// query (cols), and that the engine takes m's layout. Each error names the
// model's file and line: a description's where the column is described.
func checkLayout(e warehouse.Engine, m *model.Model, cols []warehouse.Column) error {
	for _, d := range m.Descriptions() {
		if _, ok := findColumn(cols, d.Column); !ok {
			return &model.Error{Pos: d.Pos, Code: model.CodeInvalid, Msg: fmt.Sprintf(
				"model %s: column_descriptions describes %s, which is not a column of its query (%s)%s",
				m.Name, d.Column, columnNames(cols), didYouMean(d.Column, cols))}
		}
	}
	for attr, exprs := range map[string][]string{"partitioned_by": m.PartitionedBy, "clustered_by": m.ClusteredBy} {
		for _, x := range exprs {
			sub := layoutColumn.FindStringSubmatch(strings.TrimSpace(x))
			if sub == nil {
				continue
			}
			if _, ok := findColumn(cols, sub[1]); !ok {
				return &model.Error{Pos: m.HeaderPos, Code: model.CodeInvalid, Msg: fmt.Sprintf(
					"model %s: %s %s names %s, which is not a column of its query (%s)%s",
					m.Name, attr, x, sub[1], columnNames(cols), didYouMean(sub[1], cols))}
			}
		}
	}
	_, err := layoutNotes(e, m)
	return err
}

// warnLayout logs, once per table made, each part of t's layout the engine
// does not apply: a warning, never a silent drop.
func (x *Executor) warnLayout(ctx context.Context, m *model.Model) {
	notes, err := layoutNotes(x.Engine, m)
	if err != nil {
		return // the create that follows refuses it, naming the part
	}
	for _, n := range notes {
		x.logger().LogAttrs(ctx, slog.LevelWarn, "layout not applied", slog.String(logkey.Model, m.Name), slog.String(logkey.Reason, n))
	}
}

// RegisterComments registers s's description and column descriptions on
// its existing physical table (a VIEW model: its view), replacing those
// registered before: what a metadata-only change (a new description) needs,
// since it rebuilds nothing. Safe to repeat; nothing for a model without
// descriptions or an EXTERNAL one.
func (x *Executor) RegisterComments(ctx context.Context, s *snapshot.Snapshot) error {
	if s.Model.Kind == model.KindExternal {
		return nil
	}
	l := LayoutOf(s.Model)
	if !l.HasComments() {
		return nil
	}
	return x.Engine.SetComments(ctx, warehouse.CommentParams{Table: PhysicalTable(s), View: s.Model.Kind == model.KindView,
		Comment: l.Comment, Columns: l.ColumnComments})
}

// ViewComments are the comments of an environment's view of m (view):
// the description and the column descriptions, as on its physical table.
// The zero CommentParams' Table is set; nothing else when m has none.
func ViewComments(view warehouse.Table, m *model.Model) warehouse.CommentParams {
	l := LayoutOf(m)
	return warehouse.CommentParams{Table: view, View: true, Comment: l.Comment, Columns: l.ColumnComments}
}
