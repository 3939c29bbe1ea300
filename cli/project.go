package cli

import (
	"context"
	"fmt"

	"github.com/gapless-dev/gapless/config"
	"github.com/gapless-dev/gapless/project"
	"github.com/gapless-dev/gapless/sqlparse"
)

// openProject finds the project (from -p or the working directory upwards)
// and loads it. The SQL parser is closed before returning.
func (g *globals) openProject(ctx context.Context) (*project.Project, *config.Config, error) {
	start := g.projectDir
	if start == "" {
		wd, err := g.env.Getwd()
		if err != nil {
			return nil, nil, fmt.Errorf("finding the project: %w", err)
		}
		start = wd
	}
	root, err := project.FindRoot(start)
	if err != nil {
		return nil, nil, err
	}
	p, err := sqlparse.Open()
	if err != nil {
		return nil, nil, fmt.Errorf("starting the SQL parser: %w", err)
	}
	defer p.Close()
	pr, cfg, err := project.Load(ctx, root, p)
	if err != nil {
		return nil, nil, err
	}
	g.log.Debug("project loaded", "project", root, "models", len(pr.Models))
	return pr, cfg, nil
}
