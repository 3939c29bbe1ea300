package project

import (
	"context"
	"fmt"

	"github.com/gapless-dev/gapless/snapshot"
	"github.com/gapless-dev/gapless/sqlparse"
)

// Additive adapts sqlparse.AdditiveOnly to snapshot.Additive: it parses
// both canonical queries with p and reports whether the new one only adds
// projections to the old one.
func Additive(ctx context.Context, p *sqlparse.Parser) snapshot.Additive {
	return func(oldSQL, newSQL string) (bool, error) {
		oldQ, err := p.Parse(ctx, oldSQL)
		if err != nil {
			return false, fmt.Errorf("parsing previous query: %w", err)
		}
		newQ, err := p.Parse(ctx, newSQL)
		if err != nil {
			return false, fmt.Errorf("parsing new query: %w", err)
		}
		return sqlparse.AdditiveOnly(oldQ, newQ), nil
	}
}
