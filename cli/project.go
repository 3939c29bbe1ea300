package cli

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/gapless-dev/gapless/backend"
	"github.com/gapless-dev/gapless/config"
	"github.com/gapless-dev/gapless/internal/logkey"
	"github.com/gapless-dev/gapless/project"
	"github.com/gapless-dev/gapless/sqlparse"
	"github.com/gapless-dev/gapless/warehouse"
)

// projectRoot finds the project folder: -p, or the working directory and
// its parents, the way git finds its repository.
func (g *globals) projectRoot() (string, error) {
	start := g.projectDir
	if start == "" {
		wd, err := g.env.Getwd()
		if err != nil {
			return "", fmt.Errorf("finding the project: %w", err)
		}
		start = wd
	}
	return project.FindRoot(start)
}

// openProject finds the project (from -p or the working directory upwards)
// and loads it, through the project's parse cache: the SQL parser is
// started only for queries the cache does not hold, and closed before
// returning.
func (g *globals) openProject(ctx context.Context) (*project.Project, *config.Config, error) {
	root, err := g.projectRoot()
	if err != nil {
		return nil, nil, err
	}
	var p *sqlparse.Parser
	pr, cfg, err := g.loadProject(ctx, root, func() (*sqlparse.Parser, error) {
		var err error
		p, err = sqlparse.Open()
		return p, err
	})
	if p != nil {
		p.Close()
	}
	if err != nil {
		return nil, nil, err
	}
	return pr, cfg, nil
}

// openProjectWithParser is openProject that keeps the SQL parser open, for
// commands that parse more SQL afterwards (plan categorises changes with
// it). The caller closes the parser.
func (g *globals) openProjectWithParser(ctx context.Context) (*project.Project, *config.Config, *sqlparse.Parser, error) {
	root, err := g.projectRoot()
	if err != nil {
		return nil, nil, nil, err
	}
	p, err := sqlparse.Open()
	if err != nil {
		return nil, nil, nil, fmt.Errorf("starting the SQL parser: %w", err)
	}
	pr, cfg, err := g.loadProject(ctx, root, func() (*sqlparse.Parser, error) { return p, nil })
	if err != nil {
		p.Close()
		return nil, nil, nil, err
	}
	return pr, cfg, p, nil
}

// loadProject loads the project at root with its parse cache
// (project.OpenQueryCache), parsing with what parser returns. A cache that
// could not be used or written costs only time: it is logged, at debug
// level, never reported as a failure.
func (g *globals) loadProject(ctx context.Context, root string, parser func() (*sqlparse.Parser, error)) (*project.Project, *config.Config, error) {
	cache := project.OpenQueryCache(root)
	pr, cfg, err := project.LoadWith(ctx, root, project.Options{Parser: parser, Cache: cache})
	st := cache.Stats()
	if st.Ignored != nil {
		g.log.Debug("parse cache ignored", logkey.Error, st.Ignored)
	}
	if st.SaveErr != nil {
		g.log.Debug("parse cache not saved", logkey.Error, st.SaveErr)
	}
	if err != nil {
		return nil, nil, err
	}
	for _, w := range pr.Warnings() {
		g.log.Warn(w.String(), logkey.Path, w.Pos.File)
	}
	g.log.Debug("project loaded", logkey.Project, root, logkey.Models, len(pr.Models),
		logkey.CachedQueries, st.Hits, logkey.ParsedQueries, st.Misses)
	return pr, cfg, nil
}

// checkModels refuses a name given with flag that is not a model of pr,
// with the closest model name as a suggestion.
func checkModels(pr *project.Project, flag string, names []string) error {
	for _, name := range names {
		if _, ok := pr.Models[name]; !ok {
			return fmt.Errorf("%s: model %s: no such model in %s%s", flag, name, pr.Dir, didYouMean(name, modelNames(pr)))
		}
	}
	return nil
}

// modelNames lists pr's models by name.
func modelNames(pr *project.Project) []string {
	return slices.Sorted(maps.Keys(pr.Models))
}

// openConfig finds the project and reads its gapless.yaml only, for commands
// that do not need the models (environments, query, migrate, ...).
func (g *globals) openConfig() (*config.Config, error) {
	root, err := g.projectRoot()
	if err != nil {
		return nil, err
	}
	return config.Load(root)
}

// openBackend opens the state store and the warehouse that cfg names. With
// stateOnly the warehouse is not opened (Engine is nil). The caller closes
// the backend with closeBackend.
func (g *globals) openBackend(ctx context.Context, cfg *config.Config, stateOnly bool) (*backend.Backend, error) {
	b, err := backend.Open(ctx, cfg, g.backendOptions(stateOnly))
	if err != nil {
		return nil, err
	}
	g.log.Debug("backend opened", logkey.State, cfg.State.String(), logkey.Warehouse, cfg.Warehouse.String())
	return b, nil
}

// openEngine opens the warehouse alone, for a backend opened state-only.
func (g *globals) openEngine(ctx context.Context, cfg *config.Config) (warehouse.Engine, error) {
	e, err := backend.OpenEngine(ctx, cfg.Warehouse, g.backendOptions(false))
	if err != nil {
		return nil, err
	}
	g.log.Debug("warehouse opened", logkey.Warehouse, cfg.Warehouse.String())
	return e, nil
}

// backendOptions are how commands open backends: waiting up to --lock-wait
// for a DuckDB file another process holds, and saying so after a second.
func (g *globals) backendOptions(stateOnly bool) backend.Options {
	return backend.Options{LockWait: g.duckdbLockWait(), Clock: g.env.WaitClock, Log: g.log, StateOnly: stateOnly,
		OnLockWait: func(path string, _ time.Duration) {
			g.say(fmt.Sprintf("waiting for the warehouse, held by another process: %s (up to --lock-wait %s)", path, g.lockWait),
				logkey.Path, path, logkey.LockWaitMS, g.lockWait.Milliseconds())
		}}
}

// say tells the person at the terminal something the command is doing
// that they would otherwise wonder about (a wait): one plain line on stderr,
// or a warning record under --log-format json, so that stderr stays JSON.
func (g *globals) say(line string, attrs ...any) {
	if g.logFormat == "json" {
		g.log.Warn(line, attrs...)
		return
	}
	fmt.Fprintln(g.env.Stderr, "gapless: "+line)
}

// duckdbLockWait maps --lock-wait to duckdb's convention, where zero means
// the default and a negative value means do not wait.
func (g *globals) duckdbLockWait() time.Duration {
	if g.lockWait <= 0 {
		return -1
	}
	return g.lockWait
}

// closeBackend closes b and joins a close failure into *errp, so that a
// command that succeeded still fails when its state could not be closed.
func (g *globals) closeBackend(b *backend.Backend, errp *error) {
	if err := b.Close(); err != nil {
		g.log.Warn("closing the backend", logkey.Error, err)
		*errp = errors.Join(*errp, err)
	}
}

// path resolves a file name given on the command line against the working
// directory (Env.Getwd, which tests set).
func (g *globals) path(name string) (string, error) {
	if filepath.IsAbs(name) {
		return name, nil
	}
	wd, err := g.env.Getwd()
	if err != nil {
		return "", fmt.Errorf("resolving %s: %w", name, err)
	}
	return filepath.Join(wd, name), nil
}

// clock is Env.Clock, or the real clock when it is nil: the one place the
// command line decides its time source.
func (g *globals) clock() clockwork.Clock {
	if g.env.Clock != nil {
		return g.env.Clock
	}
	return clockwork.NewRealClock()
}

// now is the wall clock for records (created_at, promoted_at); the
// execution time is execTime.
func (g *globals) now() time.Time { return g.clock().Now().UTC() }

// open reads the project's config and opens the backends it names (only the
// state store when stateOnly): the first step of every command that touches
// state. The caller closes the backend with closeBackend.
func (g *globals) open(ctx context.Context, stateOnly bool) (*config.Config, *backend.Backend, error) {
	cfg, err := g.openConfig()
	if err != nil {
		return nil, nil, err
	}
	b, err := g.openBackend(ctx, cfg, stateOnly)
	if err != nil {
		return nil, nil, err
	}
	return cfg, b, nil
}
