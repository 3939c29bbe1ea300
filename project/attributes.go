package project

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gapless-dev/gapless/model"
	"github.com/gapless-dev/gapless/model/suggest"
)

// loadFile loads one model file: one model, or one per blueprint when the
// file has a blueprints attribute (model.Blueprints). Each blueprint is the
// file with its variables substituted (model.Blueprint.Apply), loaded as a
// model of its own; its errors name the file, line and blueprint.
func (ld *loader) loadFile(ctx context.Context, path string) []loaded {
	src, err := os.ReadFile(path)
	if err != nil {
		return []loaded{{err: fmt.Errorf("reading model file: %w", err)}}
	}
	rel, err := filepath.Rel(ld.dir, path)
	if err != nil {
		rel = path
	}
	bps, err := model.Blueprints(rel, src)
	if err != nil {
		return []loaded{{err: err}}
	}
	if bps == nil {
		m, q, err := ld.loadOne(ctx, rel, src)
		return []loaded{{m, q, err}}
	}
	out := make([]loaded, 0, len(bps))
	for _, b := range bps {
		m, q, err := ld.loadOne(ctx, rel, b.Apply(src))
		if err != nil {
			out = append(out, loaded{err: inBlueprint(err, b)})
			continue
		}
		m.Blueprint = b.String()
		out = append(out, loaded{m, q, nil})
	}
	return out
}

// inBlueprint names blueprint b in err's message, keeping its position.
func inBlueprint(err error, b model.Blueprint) error {
	var me *model.Error
	if errors.As(err, &me) {
		c := *me
		c.Msg = b.Label() + ": " + me.Msg
		return &c
	}
	return fmt.Errorf("%s: %w", b.Label(), err)
}

// RootPrefix starts a SEED path relative to the project folder, as in
// SQLMesh: path '$root/seeds/x.csv'.
const RootPrefix = "$root"

// rootSeedPath rewrites a SEED path written from the project folder
// ($root/...) as one relative to the model file's folder, the form the
// rest of gapless reads (execute's seedFile, seedHash). The fingerprint
// hashes the CSV's content, not its path.
func rootSeedPath(m *model.Model) error {
	if m.Kind != model.KindSeed || !strings.HasPrefix(m.SeedPath, RootPrefix) {
		return nil
	}
	rest := strings.TrimPrefix(m.SeedPath, RootPrefix)
	if rest != "" && rest[0] != '/' && rest[0] != '\\' {
		return nil // $rooted/...: a plain folder name
	}
	rest = strings.TrimLeft(rest, `/\`)
	rel, err := filepath.Rel(filepath.Dir(m.Path), filepath.FromSlash(rest))
	if err != nil || rest == "" {
		return &model.Error{Pos: m.KindPos, Code: model.CodeBadValue,
			Msg: fmt.Sprintf("seed %s: path %s does not name a file under the project folder", m.Name, m.SeedPath)}
	}
	m.SeedPath = rel
	return nil
}

// signalEdges checks m's signals (model.Signal) and adds each one's source
// to edges[m.Name] as a parent: a model is then held back, interval by
// interval, until the source has landed it, as a model reading the source
// is (run.DueWork). A signal naming no source of the project is an error at
// the signal, with the closest source's name.
func (pr *Project) signalEdges(m *model.Model, edges map[string][]string) Errors {
	var errs Errors
	for _, sg := range m.Signals {
		if _, ok := pr.Sources[sg.Source]; ok {
			if !slices.Contains(edges[m.Name], sg.Source) {
				edges[m.Name] = append(edges[m.Name], sg.Source)
			}
			continue
		}
		sources := make([]string, 0, len(pr.Sources))
		for n := range pr.Sources {
			sources = append(sources, n)
		}
		slices.Sort(sources)
		msg := fmt.Sprintf("model %s: signal %s names %s, which is not a source of the project", m.Name, sg.Name, sg.Source)
		if other, ok := pr.Models[sg.Source]; ok {
			msg = fmt.Sprintf("model %s: signal %s names %s, a %s model, not a source: the signal waits for a source of sources/ to land; "+
				"a model's own parents already hold it back", m.Name, sg.Name, sg.Source, other.Kind)
		} else if len(sources) == 0 {
			msg += " (the project declares no source: declare one in sources/*.yaml)"
		} else if guess, ok := suggest.Closest(sg.Source, sources); ok {
			msg += "; did you mean " + guess + "?"
		} else {
			msg += " (sources: " + strings.Join(sources, ", ") + ")"
		}
		errs = append(errs, &model.Error{Pos: sg.Pos, Code: model.CodeInvalid, Msg: msg})
	}
	return errs
}

// Warnings lists the warnings of every model (model.Warning: SQLMesh
// attributes gapless reads past), each once (a blueprint file's are shared by
// its models), in file, line and column order.
func (pr *Project) Warnings() []model.Warning {
	seen := map[model.Warning]bool{}
	var out []model.Warning
	for _, m := range pr.Models {
		for _, w := range m.Warnings {
			if !seen[w] {
				seen[w] = true
				out = append(out, w)
			}
		}
	}
	slices.SortFunc(out, func(a, b model.Warning) int {
		return strings.Compare(fmt.Sprintf("%s\x00%09d\x00%09d", a.Pos.File, a.Pos.Line, a.Pos.Col),
			fmt.Sprintf("%s\x00%09d\x00%09d", b.Pos.File, b.Pos.Line, b.Pos.Col))
	})
	return out
}
