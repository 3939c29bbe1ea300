package project

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gapless-dev/gapless/config"
	"github.com/gapless-dev/gapless/model"
	"github.com/gapless-dev/gapless/sqlparse"
)

// ConfigFile is the name of a project's configuration file.
const ConfigFile = "gapless.yaml"

// ErrNoProject is returned by FindRoot when neither start nor any of its
// parents is a project folder.
var ErrNoProject = errors.New("not inside a gapless project (no gapless.yaml, SQLMesh config.yaml or models/ folder found here or in any parent folder)")

// FindRoot finds the project folder the way git finds its repository: start
// itself, then each parent in turn, until a folder holds gapless.yaml,
// SQLMesh's config.yaml, config.yml or config.py, or a models/ folder.
func FindRoot(start string) (string, error) {
	dir, err := filepath.Abs(start)
	if err != nil {
		return "", fmt.Errorf("resolving %s: %w", start, err)
	}
	for {
		if isFile(filepath.Join(dir, ConfigFile)) || isDir(filepath.Join(dir, ModelsDir)) ||
			isFile(filepath.Join(dir, config.SQLMeshFile)) || isFile(filepath.Join(dir, config.SQLMeshFileAlt)) ||
			isFile(filepath.Join(dir, config.SQLMeshPythonFile)) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("%w: started at %s", ErrNoProject, start)
		}
		dir = parent
	}
}

// Load reads the project at dir: its gapless.yaml (defaults when absent),
// then every model, as LoadModels does with the config's model defaults.
func Load(ctx context.Context, dir string, p *sqlparse.Parser) (*Project, *config.Config, error) {
	return LoadWith(ctx, dir, Options{Parser: func() (*sqlparse.Parser, error) { return p, nil }})
}

// Options are how LoadWith parses queries.
type Options struct {
	// Parser returns the SQL parser. LoadWith calls it at most once, and
	// only when a query is not in Cache; the caller closes the parser.
	Parser func() (*sqlparse.Parser, error)
	// Cache, when not nil, answers for the queries it holds and learns the
	// others; LoadWith saves it (see QueryCache).
	Cache *QueryCache
	// LookupEnv expands ${VAR} in source files; nil is os.LookupEnv.
	LookupEnv func(string) (string, bool)
	// Variables are the configuration's macro variables (config.Config's
	// Variables), which @name and @VAR('name') read in model queries.
	Variables map[string]any
	// External are the project's external model files' entries
	// (config.LoadExternalModels), added as EXTERNAL models; LoadWith
	// reads them.
	External []config.ExternalModel
	// Catalog is the warehouse's catalog (config.WarehouseCatalog): an
	// external model named catalog.schema.table must name it.
	Catalog string
	// Undeclared, when not nil, collects the schema-qualified tables the
	// models read that are neither a model, a source nor declared, instead
	// of refusing them: each is added as an EXTERNAL model without
	// columns, so that the rest loads (gapless create_external_models).
	Undeclared *[]sqlparse.TableRef
	// Engine is the dialect of the project's engine (duckdb, postgres or
	// trino), which a query written in another dialect is rewritten for
	// (package dialect); "" is DuckDB. LoadWith sets it from the
	// configuration's warehouse when it is "".
	Engine string
}

// LoadWith is Load with opts: the parser opened only when needed, and a
// parse cache.
func LoadWith(ctx context.Context, dir string, opts Options) (*Project, *config.Config, error) {
	cfg, err := config.Load(dir)
	if err != nil {
		return nil, nil, err
	}
	if opts.Variables == nil {
		opts.Variables = cfg.Variables
	}
	if opts.External == nil {
		ext, err := config.LoadExternalModels(dir, cfg.Gateway)
		if err != nil {
			return nil, cfg, err
		}
		opts.External = ext
		opts.Catalog = config.WarehouseCatalog(cfg.Warehouse)
	}
	if opts.Engine == "" {
		opts.Engine = engineOf(cfg.Warehouse.Driver)
	}
	pr, err := loadModels(ctx, dir, cfg.ModelDefaults, opts)
	if err != nil {
		return nil, cfg, err
	}
	return pr, cfg, nil
}

// addExternals adds opts.External to pr as EXTERNAL models, as if each were
// declared in a model file (a model or source of the same name is an error
// naming both files), then, with opts.Undeclared, stand-ins for the tables
// read that nothing declares. It returns every problem found.
func (pr *Project) addExternals(opts Options, defaults model.Defaults) Errors {
	var errs Errors
	for _, em := range opts.External {
		m, err := externalModel(em, opts.Catalog, defaults)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if other, dup := pr.Models[m.Name]; dup {
			errs = append(errs, &model.Error{Pos: m.HeaderPos, Code: model.CodeInvalid, Msg: fmt.Sprintf(
				"external model %s is already defined in %s", m.Name, other.HeaderPos)})
			continue
		}
		pr.Models[m.Name] = m
	}
	if opts.Undeclared == nil {
		return errs
	}
	seen := map[string]bool{}
	for _, name := range slices.Sorted(maps.Keys(pr.Queries)) {
		for _, ref := range pr.Queries[name].Tables {
			target := ref.Schema + "." + ref.Name
			if _, ok := pr.Models[target]; ok || ref.Schema == "" || seen[target] {
				continue
			}
			seen[target] = true
			m, err := model.ParseFile(pr.Models[name].Path, []byte("MODEL (name "+target+", kind EXTERNAL, columns (x INT));"), defaults)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			m.Columns = nil
			m.HeaderPos, m.KindPos, m.QueryPos = pr.Models[name].HeaderPos, pr.Models[name].HeaderPos, pr.Models[name].HeaderPos
			pr.Models[target] = m
			*opts.Undeclared = append(*opts.Undeclared, ref)
		}
	}
	return errs
}

// externalModel is the EXTERNAL model an external models entry declares,
// parsed from the MODEL block it stands for, so that it is checked and
// fingerprinted as one. A catalog other than catalog (the warehouse's) is
// refused: gapless reads the warehouse's own catalog only.
func externalModel(em config.ExternalModel, catalog string, defaults model.Defaults) (*model.Model, error) {
	pos := model.Pos{File: em.File, Line: em.Line, Col: 1}
	bad := func(format string, args ...any) error {
		return &model.Error{Pos: pos, Code: model.CodeInvalid, Msg: fmt.Sprintf(format, args...)}
	}
	if em.Catalog != "" && catalog != "" && !strings.EqualFold(em.Catalog, catalog) {
		return nil, bad("external model %s: catalog %s is not the warehouse's (%s); gapless reads tables of the warehouse's own catalog", em.Name, em.Catalog, catalog)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "MODEL (name %s.%s, kind EXTERNAL, columns (", quoteIdent(em.Schema), quoteIdent(em.Table))
	for i, c := range em.Columns {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %s", quoteIdent(c.Name), c.Type)
	}
	b.WriteString("));")
	m, err := model.ParseFile(em.File, []byte(b.String()), defaults)
	if err != nil {
		var me *model.Error
		if errors.As(err, &me) {
			return nil, bad("external model %s: %s", em.Name, me.Msg)
		}
		return nil, bad("external model %s: %v", em.Name, err)
	}
	m.Description = em.Description
	m.Path = em.File
	m.HeaderPos, m.KindPos, m.QueryPos = pos, pos, pos
	return m, nil
}

// quoteIdent writes name as a SQL identifier: bare when it is a plain
// lower-case word, else double-quoted.
func quoteIdent(name string) string {
	plain := name != ""
	for i, c := range name {
		if !(c == '_' || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9' && i > 0)) {
			plain = false
		}
	}
	if plain {
		return name
	}
	return `"` + strings.ReplaceAll(name, `"`, `""`) + `"`
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}
