package trino

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/gapless-dev/gapless/warehouse"
)

// CreateOrReplaceView points view p.View at p.Query (CREATE OR REPLACE
// VIEW v AS (query)), which may change the view's columns. A table of that
// name is refused and kept. Racing replaces of one view take turns inside
// the engine.
func (e *Engine) CreateOrReplaceView(ctx context.Context, p warehouse.ViewParams) error {
	const op = "create or replace view"
	obj := p.View.String()
	if err := e.begin(ctx); err != nil {
		return fail(op, obj, "", err)
	}
	if err := checkQualified(kindView, p.View); err != nil {
		return fail(op, obj, "", err)
	}
	q, err := trimQuery(p.Query)
	if err != nil {
		return fail(op, obj, "", err)
	}
	unlock, err := e.locks.lock(ctx, tableKey(p.View))
	if err != nil {
		return fail(op, obj, "", err)
	}
	defer unlock()
	stmt := viewSQL(p.View, q)
	if _, err := e.exec(ctx, stmt); err != nil {
		return fail(op, obj, stmt, viewError(err))
	}
	return nil
}

func viewSQL(v warehouse.Table, q string) string {
	return "CREATE OR REPLACE VIEW " + quoteTable(v) + " AS " + subquery(q)
}

// viewError says why Trino refused a view's replace when a table is in
// the way.
func viewError(err error) error {
	if errorName(err) == "TABLE_ALREADY_EXISTS" {
		return fmt.Errorf("%w: %w", errTableInTheWay, err)
	}
	return err
}

// validateChunk is how many queries one validation statement checks.
const validateChunk = 50

// CreateOrReplaceViews repoints views in the order given, with the weaker
// guarantee of warehouse.Capabilities without AtomicViews (Trino has no
// multi-statement transactions):
//
//  1. It checks the whole batch first, and a batch that fails a check
//     changes nothing: every name valid, no view named twice (names
//     folded), no table holding a view's name (one catalog query), and
//     every query binds (EXPLAIN (TYPE VALIDATE), up to 50 queries per
//     statement, one at a time only to find the culprit when a group
//     fails). A query that names a view created earlier in the same batch
//     is not checked here (that view may not exist yet or may change): its
//     replace checks it.
//  2. It then replaces the views one at a time, in the given order, each
//     replace atomic. A reader meanwhile may see a prefix of the batch new
//     and the rest old, never a missing view. A replace failing part-way
//     returns a *warehouse.PartialViewsError (inside the *warehouse.Error)
//     naming the views already replaced and the one that failed; the rest
//     are unchanged, and running the same batch again completes it.
//
// The views' names are locked for the whole batch, so batches and single
// replaces of shared views take turns inside the engine.
func (e *Engine) CreateOrReplaceViews(ctx context.Context, views []warehouse.ViewParams) error {
	const op = "create or replace views"
	if len(views) == 0 {
		return nil
	}
	batch := make([]warehouse.Table, len(views))
	for i, v := range views {
		batch[i] = v.View
	}
	obj := batchObject(batch)
	if err := e.begin(ctx); err != nil {
		return fail(op, obj, "", err)
	}
	queries := make([]string, len(views))
	keys := make([]string, len(views))
	seen := make(map[warehouse.Table]int, len(views))
	for i, v := range views {
		vo := v.View.String()
		if err := checkQualified(kindView, v.View); err != nil {
			return fail(op, vo, "", err)
		}
		q, err := trimQuery(v.Query)
		if err != nil {
			return fail(op, vo, "", err)
		}
		f := foldTable(v.View)
		if j, dup := seen[f]; dup {
			return fail(op, vo, "", fmt.Errorf("%w: view %s is in the batch twice (positions %d and %d)", warehouse.ErrInvalidArgument, vo, j+1, i+1))
		}
		seen[f] = i
		queries[i] = q
		keys[i] = tableKey(v.View)
	}
	unlock, err := e.locks.lock(ctx, keys...)
	if err != nil {
		return fail(op, obj, "", err)
	}
	defer unlock()

	kinds, kq, err := e.kinds(ctx, batch)
	if err != nil {
		return fail(op, obj, kq, err)
	}
	for _, v := range views {
		if k := kinds[foldTable(v.View)]; k != "" && k != typeView {
			return fail(op, v.View.String(), kq, fmt.Errorf("%w (%s)", errTableInTheWay, strings.ToLower(k)))
		}
	}
	if err := e.validateViews(ctx, views, queries); err != nil {
		return err
	}

	fault := int(e.failViewAt.Load())
	for i, v := range views {
		stmt := viewSQL(v.View, queries[i])
		var err error
		if i+1 == fault {
			err = errInjected
		} else {
			_, err = e.exec(ctx, stmt)
		}
		if err != nil {
			partial := &warehouse.PartialViewsError{Done: batch[:i:i], Failed: v.View, Err: viewError(err)}
			if i == 0 {
				// Nothing was replaced: the batch failed whole.
				return fail(op, v.View.String(), stmt, viewError(err))
			}
			return fail(op, v.View.String(), stmt, partial)
		}
	}
	return nil
}

// errInjected is the failure of the test hook (see failViewAt).
var errInjected = errors.New("replace failed by the engine's test hook")

// validateViews checks that every query of the batch binds, except those
// that name a view earlier in the batch (see CreateOrReplaceViews). The
// error names the first view whose query does not bind, with its SQL.
func (e *Engine) validateViews(ctx context.Context, views []warehouse.ViewParams, queries []string) error {
	const op = "create or replace views"
	var check []int
	for i := range views {
		deferred := false
		for j := 0; j < i && !deferred; j++ {
			deferred = mentions(queries[i], views[j].View.Name)
		}
		if !deferred {
			check = append(check, i)
		}
	}
	for start := 0; start < len(check); start += validateChunk {
		group := check[start:min(start+validateChunk, len(check))]
		parts := make([]string, len(group))
		for k, i := range group {
			parts[k] = subquery(queries[i]) + fmt.Sprintf(" AS v%d", k)
		}
		stmt := "EXPLAIN (TYPE VALIDATE) SELECT 1 FROM " + strings.Join(parts, "\nCROSS JOIN ")
		if _, err := e.exec(ctx, stmt); err == nil {
			continue
		} else if len(group) == 1 || ctx.Err() != nil {
			i := group[0]
			return fail(op, views[i].View.String(), viewSQL(views[i].View, queries[i]), err)
		}
		for _, i := range group {
			one := "EXPLAIN (TYPE VALIDATE) SELECT 1 FROM " + subquery(queries[i]) + " AS v"
			if _, err := e.exec(ctx, one); err != nil {
				return fail(op, views[i].View.String(), viewSQL(views[i].View, queries[i]), err)
			}
		}
		return fail(op, batchObject(nil), stmt, errors.New("the batch's queries do not bind together, though each binds alone"))
	}
	return nil
}
