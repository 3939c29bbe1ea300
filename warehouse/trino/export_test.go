package trino

import (
	"context"
	"errors"

	"github.com/gapless-dev/gapless/warehouse"
)

// FailViewReplaceAt makes the k-th replace (from 1) of every later
// CreateOrReplaceViews batch fail before it runs, after the batch's checks
// passed: a replace failing part-way, which nothing else can induce. 0
// turns the hook off.
func (e *Engine) FailViewReplaceAt(k int) { e.failViewAt.Store(int64(k)) }

// CommitRetries is how many statements the engine ran again after Iceberg
// refused their commit.
func (e *Engine) CommitRetries() int64 { return e.retried.Load() }

// SetMaxStatementBytes makes InsertRows split its rows into statements of
// at most n bytes (so staging them), instead of Trino's query.max-length.
func (e *Engine) SetMaxStatementBytes(n int) { e.maxStatement.Store(int64(n)) }

// CountAdded runs stmt (an INSERT into t) tagged, and counts the rows it
// added both ways addedRecords can: by the query id the client reported,
// and by the tag in system.runtime.queries.
func (e *Engine) CountAdded(ctx context.Context, t warehouse.Table, stmt string) (byID, byTag int64, err error) {
	tag, prefix := tagged("count-added")
	id, err := e.execTracked(ctx, prefix+stmt)
	if err != nil {
		return 0, 0, err
	}
	if id == "" {
		return 0, 0, errors.New("the client reported no query id")
	}
	if byID, err = e.addedRecords(ctx, t, id, tag); err != nil {
		return 0, 0, err
	}
	byTag, err = e.addedRecords(ctx, t, "", tag)
	return byID, byTag, err
}
