package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/gapless-dev/gapless/warehouse"
)

// ReplaceTable rebuilds p.Table from p.Query beside it and swaps it in.
//
// Racing ReplaceTable calls on one table take turns (an advisory lock on
// the name, which also covers a table that does not exist yet): each
// succeeds, and the last one's rows stay. Everything happens in one
// transaction, so a failure at any step (the
// query, the swap, rebuilding a dependent view) rolls back to the old table,
// intact and serving, and leaves no temporary table behind, not even when
// the process dies mid-way:
//
//  1. lock the old table SHARE ROW EXCLUSIVE: readers go on reading it, but
//     a concurrent InsertInterval/MergeByKey/ReplaceTable waits, so no
//     writer's rows land in the old table after it was copied and are lost
//     with it;
//  2. CREATE TABLE <schema>.gapless_tmp_<random> AS <query>;
//  3. swapIn: drop the old table and rename the new one to its name,
//     rebuilding the views that read the old table (see swapIn).
//
// Readers are blocked only during step 3 (DROP takes ACCESS EXCLUSIVE),
// never while the query runs. When the table does not exist yet, it is
// simply created. The new table carries the query's columns only: indexes,
// constraints, triggers and column-level grants of the old one are not
// carried over (gapless creates none).
func (e *Engine) ReplaceTable(ctx context.Context, p warehouse.ReplaceTableParams) error {
	const op = "replace table"
	obj := p.Table.String()
	if err := e.checkQualified(p.Table); err != nil {
		return fail(op, obj, "", err)
	}
	q, err := trimQuery(p.Query)
	if err != nil {
		return fail(op, obj, "", err)
	}
	if _, err := e.CheckLayout(p.Layout); err != nil {
		return fail(op, obj, "", err)
	}
	err = e.inTx(ctx, func(tx pgx.Tx) error {
		if err := lockName(ctx, tx, p.Table); err != nil {
			return err
		}
		old, found, err := resolve(ctx, tx, p.Table)
		if err != nil {
			return err
		}
		if found {
			if !old.isTable() {
				return fmt.Errorf("%w: relkind %q", warehouse.ErrNotATable, old.kind)
			}
			if _, err := exec(ctx, tx, "LOCK TABLE "+quoteTable(p.Table)+" IN SHARE ROW EXCLUSIVE MODE"); err != nil {
				return err
			}
			// A concurrent swap may have replaced the table while we
			// waited for the lock: LOCK TABLE follows the name, so look
			// the name up again.
			if old, found, err = resolve(ctx, tx, p.Table); err != nil {
				return err
			}
			if found && !old.isTable() {
				return fmt.Errorf("%w: relkind %q", warehouse.ErrNotATable, old.kind)
			}
		}
		tmp, err := tempName()
		if err != nil {
			return err
		}
		tmpTable := warehouse.Table{Schema: p.Table.Schema, Name: tmp}
		if _, err := exec(ctx, tx, "CREATE TABLE "+quoteTable(tmpTable)+withClause(p.Layout)+" AS "+subquery(q)+" WITH DATA"); err != nil {
			return err
		}
		if !found {
			if _, err := exec(ctx, tx, "ALTER TABLE "+quoteTable(tmpTable)+" RENAME TO "+quoteIdent(p.Table.Name)); err != nil {
				return err
			}
		} else if err := swapIn(ctx, tx, p.Table, old, tmp); err != nil {
			return err
		}
		// The rebuilt table is a new relation: its comments are
		// registered again, in the swap's transaction.
		return execAll(ctx, tx, commentsOf(p.Table, p.Layout))
	})
	return failStep(op, obj, err)
}

// tempName is a fresh name for a relation built beside another one. It is
// short enough for any max_identifier_length PostgreSQL allows.
func tempName() (string, error) {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("random name: %w", err)
	}
	return "gapless_tmp_" + hex.EncodeToString(b), nil
}

// dependent is a view that reads (directly or through other views) a
// relation being swapped out.
type dependent struct {
	oid     uint32
	name    string // quoted schema.name
	kind    string // pg_class.relkind
	def     string // pg_get_viewdef, fully qualified
	options string // rendered WITH (...) list, or ""
	restore []string
}

// dependentsSQL lists every relation whose rewrite rule depends on $1,
// transitively, with the longest path length from $1 as depth: creating in
// increasing depth (and dropping in decreasing depth) respects every
// dependency among them.
const dependentsSQL = `WITH RECURSIVE dep(oid, depth) AS (
    SELECT r.ev_class, 1
    FROM pg_catalog.pg_depend d
    JOIN pg_catalog.pg_rewrite r ON r.oid = d.objid
    WHERE d.classid = 'pg_catalog.pg_rewrite'::pg_catalog.regclass
      AND d.refclassid = 'pg_catalog.pg_class'::pg_catalog.regclass
      AND d.refobjid = $1 AND r.ev_class <> $1
  UNION
    SELECT r.ev_class, dep.depth + 1
    FROM dep
    JOIN pg_catalog.pg_depend d ON d.refobjid = dep.oid
    JOIN pg_catalog.pg_rewrite r ON r.oid = d.objid
    WHERE d.classid = 'pg_catalog.pg_rewrite'::pg_catalog.regclass
      AND d.refclassid = 'pg_catalog.pg_class'::pg_catalog.regclass
      AND r.ev_class <> dep.oid
)
SELECT c.oid,
       pg_catalog.format('%I.%I', n.nspname, c.relname),
       c.relkind::text,
       CASE WHEN c.relkind = 'v' THEN pg_catalog.pg_get_viewdef(c.oid) ELSE '' END,
       coalesce((SELECT pg_catalog.string_agg(pg_catalog.format('%I = %L',
                        pg_catalog.split_part(o, '=', 1),
                        pg_catalog.substr(o, pg_catalog.strpos(o, '=') + 1)), ', ')
                 FROM pg_catalog.unnest(c.reloptions) AS o), '')
FROM (SELECT oid, max(depth) AS depth FROM dep GROUP BY oid) x
JOIN pg_catalog.pg_class c ON c.oid = x.oid
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
ORDER BY x.depth, c.oid`

// restoreSQL renders, server-side with format's %I and %L, the statements
// that give a re-created relation the grants and comments relation $1 had:
// $2 is the quoted name to apply them to, $3 the relation whose columns
// must exist for a column comment to be restored, $4 "TABLE" or "VIEW".
// Privileges come from the ACL, or from the owner's defaults when the ACL is
// NULL, so an owner other than the current user keeps its access; entries
// for the current user are skipped (it owns the re-created relation).
const restoreSQL = `SELECT pg_catalog.format('COMMENT ON %s %s IS %L', $4::text, $2::text, d.description)
FROM pg_catalog.pg_description d
WHERE d.objoid = $1 AND d.classoid = 'pg_catalog.pg_class'::pg_catalog.regclass AND d.objsubid = 0
UNION ALL
SELECT pg_catalog.format('COMMENT ON COLUMN %s.%I IS %L', $2::text, a.attname, d.description)
FROM pg_catalog.pg_description d
JOIN pg_catalog.pg_attribute a ON a.attrelid = d.objoid AND a.attnum = d.objsubid
JOIN pg_catalog.pg_attribute b ON b.attrelid = $3 AND b.attname = a.attname AND b.attnum > 0 AND NOT b.attisdropped
WHERE d.objoid = $1 AND d.classoid = 'pg_catalog.pg_class'::pg_catalog.regclass AND d.objsubid > 0
UNION ALL
SELECT pg_catalog.format('GRANT %s ON TABLE %s TO %s%s', a.privilege_type, $2::text,
         CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(a.grantee)) END,
         CASE WHEN a.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END)
FROM pg_catalog.pg_class c,
     pg_catalog.aclexplode(coalesce(c.relacl, pg_catalog.acldefault('r', c.relowner))) a
WHERE c.oid = $1
  AND a.grantee <> (SELECT oid FROM pg_catalog.pg_roles WHERE rolname = current_user)`

func restoreStatements(ctx context.Context, tx pgx.Tx, oid uint32, name string, colsOf uint32, kind string) ([]string, error) {
	rows, err := tx.Query(ctx, restoreSQL, oid, name, colsOf, kind)
	if err != nil {
		return nil, &stepError{sql: restoreSQL, err: err}
	}
	stmts, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, &stepError{sql: restoreSQL, err: err}
	}
	return stmts, nil
}

// swapIn replaces relation old, named target, with the relation tmp built
// beside it in the same schema (a table for ReplaceTable, a view for
// CreateOrReplaceView), inside tx. It must be the transaction's last step:
// it empties search_path until the commit.
//
// PostgreSQL views bind to the OID of what they read, not its name, so
// dropping the old relation would either fail (RESTRICT) or drop every view
// over it (CASCADE) — and environment views read physical tables, so with
// CASCADE a scheduled rebuild of a FULL model would take prod's view away
// until the next promotion: a gap served. Instead swapIn rebuilds them:
//
//  1. it locks every view that depends on old, transitively, ACCESS
//     EXCLUSIVE (see lockDependents), then, with search_path empty so that
//     pg_get_viewdef qualifies every name, records each one's definition,
//     options, grants and comments, and old's own grants and comments; a
//     dependent that is not a plain view (a materialized view) stops the
//     swap with warehouse.ErrDependentObject;
//  2. drops those views, deepest first, and old, all without CASCADE, so
//     that any other kind of dependent (a foreign key, a function body)
//     fails the transaction instead of vanishing;
//  3. renames tmp to target's name;
//  4. re-creates the views in dependency order and restores grants and
//     comments on them and on the new relation (column comments only for
//     columns it still has).
//
// A view that no longer fits the new relation (it reads a column that is
// gone) fails step 4 and so the whole swap. Re-created views are owned by
// the current user; INSTEAD OF triggers and rules on them are not kept.
func swapIn(ctx context.Context, tx pgx.Tx, target warehouse.Table, old relation, tmp string) error {
	if _, err := exec(ctx, tx, "SELECT pg_catalog.set_config('search_path', '', true)"); err != nil {
		return err
	}
	tmpTable := warehouse.Table{Schema: target.Schema, Name: tmp}
	tmpRel, found, err := resolve(ctx, tx, tmpTable)
	if err != nil {
		return err
	}
	if !found {
		return fmt.Errorf("%w: %s vanished before the swap", warehouse.ErrNotFound, tmpTable)
	}
	noun := "TABLE"
	if old.kind == relkindView {
		noun = "VIEW"
	}
	deps, err := lockDependents(ctx, tx, old.oid)
	if err != nil {
		return err
	}
	for i := range deps {
		d := &deps[i]
		if d.restore, err = restoreStatements(ctx, tx, d.oid, d.name, d.oid, "VIEW"); err != nil {
			return err
		}
	}
	own, err := restoreStatements(ctx, tx, old.oid, quoteTable(target), tmpRel.oid, noun)
	if err != nil {
		return err
	}
	for i := len(deps) - 1; i >= 0; i-- {
		if _, err := exec(ctx, tx, "DROP VIEW "+deps[i].name); err != nil {
			return err
		}
	}
	if _, err := exec(ctx, tx, "DROP "+noun+" "+quoteTable(target)); err != nil {
		return err
	}
	if _, err := exec(ctx, tx, "ALTER "+noun+" "+quoteTable(tmpTable)+" RENAME TO "+quoteIdent(target.Name)); err != nil {
		return err
	}
	for _, d := range deps {
		sql := "CREATE VIEW " + d.name
		if d.options != "" {
			sql += " WITH (" + d.options + ")"
		}
		def, err := trimQuery(d.def)
		if err != nil {
			return err
		}
		sql += " AS\n" + def
		if _, err := exec(ctx, tx, sql); err != nil {
			return fmt.Errorf("re-creating view %s over the new %s: %w", d.name, target, err)
		}
		for _, s := range d.restore {
			if _, err := exec(ctx, tx, s); err != nil {
				return err
			}
		}
	}
	for _, s := range own {
		if _, err := exec(ctx, tx, s); err != nil {
			return err
		}
	}
	return nil
}

// maxDependentRounds bounds lockDependents' rounds: each round locks the
// dependents that appeared since the last, which only happens while other
// sessions keep creating views over the relation.
const maxDependentRounds = 10

// lockDependents returns the views that depend on oid, transitively, having
// locked them all ACCESS EXCLUSIVE first. Without the lock a concurrent
// CreateOrReplaceView (say a promotion repointing prod's view to another
// physical table) could commit between reading a view's definition and
// re-creating it, and the swap would silently restore the old definition.
// With it, such a promotion either committed before (and the definition
// read is its own, or the view no longer depends on oid) or waits until
// this transaction commits and then applies on top.
func lockDependents(ctx context.Context, tx pgx.Tx, oid uint32) ([]dependent, error) {
	locked := map[uint32]bool{}
	for round := 0; ; round++ {
		rows, err := tx.Query(ctx, dependentsSQL, oid)
		if err != nil {
			return nil, &stepError{sql: dependentsSQL, err: err}
		}
		deps, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (dependent, error) {
			var d dependent
			err := r.Scan(&d.oid, &d.name, &d.kind, &d.def, &d.options)
			return d, err
		})
		if err != nil {
			return nil, &stepError{sql: dependentsSQL, err: err}
		}
		var names []string
		for _, d := range deps {
			if d.kind != relkindView {
				return nil, fmt.Errorf("%w: %s (relkind %q) reads it", warehouse.ErrDependentObject, d.name, d.kind)
			}
			if !locked[d.oid] {
				locked[d.oid] = true
				names = append(names, d.name)
			}
		}
		if len(names) == 0 {
			return deps, nil
		}
		if round == maxDependentRounds {
			return nil, fmt.Errorf("%w: the views over the relation kept changing while locking them", warehouse.ErrDependentObject)
		}
		if _, err := exec(ctx, tx, "LOCK TABLE "+strings.Join(names, ", ")+" IN ACCESS EXCLUSIVE MODE"); err != nil {
			return nil, err
		}
	}
}
