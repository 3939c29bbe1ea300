package project

import (
	"context"
	"fmt"
	"strings"

	"github.com/gapless-dev/gapless/snapshot"
	"github.com/gapless-dev/gapless/sqlparse"
)

// Additive adapts package sqlparse to snapshot.Additive: it parses
// canonical queries with p, compares two of them (sqlparse.Compare: whether
// the new one only adds projections, why, and which columns it touches),
// and lists the columns a query may read (Query.Reads).
func Additive(ctx context.Context, p *sqlparse.Parser) snapshot.Additive {
	return sqlJudge{ctx: ctx, p: p}
}

type sqlJudge struct {
	ctx context.Context
	p   *sqlparse.Parser
}

func (j sqlJudge) Compare(oldSQL, newSQL string) (snapshot.QueryChange, error) {
	if unparsable(oldSQL) || unparsable(newSQL) {
		return snapshot.QueryChange{AllChanged: true, Reason: "the query changes"}, nil
	}
	oldQ, err := j.p.Parse(j.ctx, oldSQL)
	if err != nil {
		return snapshot.QueryChange{}, fmt.Errorf("parsing previous query: %w", err)
	}
	newQ, err := j.p.Parse(j.ctx, newSQL)
	if err != nil {
		return snapshot.QueryChange{}, fmt.Errorf("parsing new query: %w", err)
	}
	c := sqlparse.Compare(oldQ, newQ)
	return snapshot.QueryChange{Additive: c.Additive, Reason: c.Reason, Added: c.Added, Removed: c.Removed,
		Changed: c.Changed, AllChanged: c.AllChanged}, nil
}

// Reads parses a canonical query and returns the columns it may read; a
// query it cannot parse may read anything.
func (j sqlJudge) Reads(sql string) (snapshot.ColumnReads, error) {
	if unparsable(sql) {
		return snapshot.ColumnReads{All: true}, nil
	}
	q, err := j.p.Parse(j.ctx, sql)
	if err != nil {
		if ctxErr := j.ctx.Err(); ctxErr != nil {
			return snapshot.ColumnReads{}, ctxErr
		}
		return snapshot.ColumnReads{All: true}, nil
	}
	r := q.Reads()
	return snapshot.ColumnReads{Columns: r.Columns, All: r.All}, nil
}

// unparsable reports a canonical form that is not SQL: the parse tree
// fallback sqlparse uses when DuckDB cannot render a tree back.
func unparsable(canonical string) bool { return strings.HasPrefix(canonical, "ast:") }
