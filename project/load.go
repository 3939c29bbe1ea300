package project

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/gapless-dev/gapless/config"
	"github.com/gapless-dev/gapless/sqlparse"
)

// ConfigFile is the name of a project's configuration file.
const ConfigFile = "gapless.yaml"

// ErrNoProject is returned by FindRoot when neither start nor any of its
// parents is a project folder.
var ErrNoProject = errors.New("not inside a gapless project (no gapless.yaml or models/ folder found here or in any parent folder)")

// FindRoot finds the project folder the way git finds its repository: start
// itself, then each parent in turn, until a folder holds gapless.yaml or a
// models/ folder.
func FindRoot(start string) (string, error) {
	dir, err := filepath.Abs(start)
	if err != nil {
		return "", fmt.Errorf("resolving %s: %w", start, err)
	}
	for {
		if isFile(filepath.Join(dir, ConfigFile)) || isDir(filepath.Join(dir, ModelsDir)) {
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
	pr, err := loadModels(ctx, dir, cfg.ModelDefaults, opts)
	if err != nil {
		return nil, cfg, err
	}
	return pr, cfg, nil
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}
