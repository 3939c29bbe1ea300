// Package postgres is the PostgreSQL warehouse engine: warehouse.Engine over
// a pgx v5 connection pool.
//
// Invariants this engine keeps, beyond those of warehouse.Engine:
//
//   - Every session runs with TimeZone=UTC, whatever the connection URL
//     says, so that every implicit conversion between timestamp and
//     timestamptz happens in UTC and interval bounds mean the same instant on
//     every column type.
//   - Every identifier is validated before use: non-empty, valid UTF-8, no
//     NUL byte, and no longer than the server's max_identifier_length (63
//     bytes by default). PostgreSQL silently truncates longer names, which
//     would let two physical tables (say two versions of one long model
//     name) collide on one truncated name; this engine refuses them with
//     warehouse.ErrInvalidIdentifier instead.
//   - Identifiers are rendered with pgx.Identifier.Sanitize (double quotes,
//     embedded quotes doubled); values are bound parameters; the few
//     literals DDL needs (comments restored after a swap) are rendered by
//     the server's own format('%L'). Column types given to CreateTable are
//     checked lexically and then by the server (to_regtype) to be exactly
//     one type name before they are rendered.
//   - Every statement that writes to a gapless table (InsertInterval,
//     MergeByKey, ReplaceTable) first takes a SHARE ROW EXCLUSIVE lock on the
//     target in its transaction. That lock conflicts with itself and with
//     plain INSERT/UPDATE/DELETE but not with readers, so two writers of the
//     same table are serialised: under READ COMMITTED, two concurrent
//     delete-then-insert transactions would otherwise each miss the other's
//     rows and leave two copies.
//   - ReplaceTable and CreateOrReplaceView also take a transaction-scoped
//     advisory lock on the relation's name (see lockName), so racing
//     rebuilds of one table, or promotions of one view, take turns and all
//     succeed, even when the relation does not exist yet.
//     CreateOrReplaceViews takes the same lock for every view of its batch,
//     in one global order (see lockNames), before changing any of them.
//   - PostgreSQL views bind to the identity (OID) of what they read, not its
//     name. A swap (ReplaceTable, or a CreateOrReplaceView that changes
//     columns) therefore re-creates, in the same transaction, every view
//     that reads the swapped relation, with its grants and comments (see
//     swapIn): environment views keep serving between promotions, and a
//     swap that cannot keep them fails whole. DropTable and DropView, by
//     contrast, never cascade: a dependent makes them fail.
//   - Every statement the engine sends, its own and model SQL alike, goes
//     through the extended protocol as exactly one statement (see execOne):
//     a model query cannot smuggle a second statement past the subquery it
//     is wrapped in.
//   - Queries run in pgx's QueryExecModeDescribeExec: no server-side
//     prepared statement outlives its call, so a table swapped under a
//     cached plan never yields "cached plan must not change result type".
package postgres

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gapless-dev/gapless/warehouse"
)

// Dialect is what (*Engine).Dialect returns.
const Dialect = "postgres"

// Errors: the engine returns package warehouse's sentinels
// (warehouse.ErrNotFound, warehouse.ErrInvalidArgument, ...) inside a
// *warehouse.Error; test with errors.Is. Server errors are wrapped as
// *pgconn.PgError: test with errors.As and read its Code (SQLSTATE).

// Engine is the PostgreSQL warehouse engine. It is safe for concurrent use.
type Engine struct {
	pool *pgxpool.Pool
	// object names the database in errors not about one table (the
	// redacted URL).
	object string
	// maxIdent is the server's max_identifier_length in bytes.
	maxIdent int
	// ingest remembers that the fence and marker tables exist.
	ingest ingestReady
}

var _ warehouse.Engine = (*Engine)(nil)

// Open connects to the PostgreSQL database at url (a libpq URL or DSN, as
// pgx accepts) and checks that it answers. Sessions are forced to
// TimeZone=UTC.
func Open(ctx context.Context, url string) (*Engine, error) {
	obj := redact(url)
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		// pgx's parse errors can quote the connection string; keep only
		// the redacted form.
		return nil, &warehouse.Error{Op: "open", Object: obj, Err: errors.New("cannot parse connection string")}
	}
	if cfg.ConnConfig.RuntimeParams == nil {
		cfg.ConnConfig.RuntimeParams = map[string]string{}
	}
	cfg.ConnConfig.RuntimeParams["timezone"] = "UTC"
	cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeDescribeExec
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, &warehouse.Error{Op: "open", Object: obj, Err: err}
	}
	const q = "SELECT current_setting('max_identifier_length')"
	var s string
	if err := pool.QueryRow(ctx, q).Scan(&s); err != nil {
		pool.Close()
		return nil, &warehouse.Error{Op: "open", Object: obj, SQL: q, Err: err}
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		pool.Close()
		return nil, &warehouse.Error{Op: "open", Object: obj, SQL: q, Err: fmt.Errorf("unexpected max_identifier_length %q", s)}
	}
	return &Engine{pool: pool, object: obj, maxIdent: n}, nil
}

// Pool exposes the underlying pool, for tests and tools that need a raw
// connection. Statements run through it bypass the engine's checks.
func (e *Engine) Pool() *pgxpool.Pool { return e.pool }

// Dialect returns "postgres".
func (e *Engine) Dialect() string { return Dialect }

// QuoteIdent quotes one identifier: double quotes around it, embedded double
// quotes doubled. (pgx also drops NUL bytes, which PostgreSQL cannot store;
// the engine's own operations reject such names before quoting.)
func (e *Engine) QuoteIdent(name string) string { return pgx.Identifier{name}.Sanitize() }

// QuoteTable quotes schema.name. An empty schema renders the bare quoted
// name, resolved through the session's search_path.
func (e *Engine) QuoteTable(t warehouse.Table) string { return quoteTable(t) }

// Close closes the pool and the in-memory DuckDB that reads staged files.
// It is safe to call more than once.
func (e *Engine) Close() error {
	e.pool.Close()
	return e.closeStagedReader()
}

func quoteTable(t warehouse.Table) string {
	if t.Schema == "" {
		return pgx.Identifier{t.Name}.Sanitize()
	}
	return pgx.Identifier{t.Schema, t.Name}.Sanitize()
}

func quoteIdent(name string) string { return pgx.Identifier{name}.Sanitize() }

// checkIdent enforces the identifier invariant of the package doc.
func (e *Engine) checkIdent(what, name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty %s name", warehouse.ErrInvalidIdentifier, what)
	case !utf8.ValidString(name):
		return fmt.Errorf("%w: %s name %q is not valid UTF-8", warehouse.ErrInvalidIdentifier, what, name)
	case containsNUL(name):
		return fmt.Errorf("%w: %s name %q contains a NUL byte", warehouse.ErrInvalidIdentifier, what, name)
	case len(name) > e.maxIdent:
		return fmt.Errorf("%w: %s name %q is %d bytes, longer than the server's max_identifier_length %d (PostgreSQL would truncate it)",
			warehouse.ErrInvalidIdentifier, what, name, len(name), e.maxIdent)
	}
	return nil
}

// checkTable validates t's name and, when set, its schema.
func (e *Engine) checkTable(t warehouse.Table) error {
	if t.Schema != "" {
		if err := e.checkIdent("schema", t.Schema); err != nil {
			return err
		}
	}
	return e.checkIdent("table", t.Name)
}

func (e *Engine) checkIdents(what string, names []string) error {
	for _, n := range names {
		if err := e.checkIdent(what, n); err != nil {
			return err
		}
	}
	return nil
}

func containsNUL(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			return true
		}
	}
	return false
}

// fail builds the engine's error. A nil err yields nil, so call sites can
// write `return fail(...)` after a statement.
func fail(op string, object, sql string, err error) error {
	if err == nil {
		return nil
	}
	var we *warehouse.Error
	if errors.As(err, &we) {
		return err
	}
	return &warehouse.Error{Op: op, Object: object, SQL: sql, Err: err}
}

// stepError carries the SQL of the statement that failed inside a
// multi-statement operation up to the operation's *warehouse.Error.
type stepError struct {
	sql string
	err error
}

func (s *stepError) Error() string { return s.err.Error() }
func (s *stepError) Unwrap() error { return s.err }

// failStep is fail for operations that ran several statements: the SQL
// recorded is the failing statement's.
func failStep(op, object string, err error) error {
	if err == nil {
		return nil
	}
	var we *warehouse.Error
	if errors.As(err, &we) {
		return err
	}
	var se *stepError
	if errors.As(err, &se) {
		return &warehouse.Error{Op: op, Object: object, SQL: se.sql, Err: err}
	}
	return &warehouse.Error{Op: op, Object: object, Err: err}
}

// execer is what pgx.Tx and *pgxpool.Pool share. It deliberately leaves out
// Exec: see execOne.
type execer interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// execOne runs sql as exactly one statement. pgx's Exec switches to the
// simple protocol when there are no arguments, and the simple protocol runs
// every statement of a string, so a model query like
// "SELECT 1) AS q; DROP TABLE x; SELECT (1" wrapped in CREATE TABLE … AS
// (…) would run a second statement. Query in QueryExecModeDescribeExec
// always goes through the extended protocol, where the server refuses more
// than one statement (SQLSTATE 42601) and runs nothing.
func execOne(ctx context.Context, db execer, sql string, args ...any) (pgconn.CommandTag, error) {
	rows, err := db.Query(ctx, sql, args...)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	rows.Close()
	return rows.CommandTag(), rows.Err()
}

// exec runs one statement of a multi-statement operation, tagging a failure
// with its SQL.
func exec(ctx context.Context, db execer, sql string, args ...any) (pgconn.CommandTag, error) {
	tag, err := execOne(ctx, db, sql, args...)
	if err != nil {
		return tag, &stepError{sql: sql, err: err}
	}
	return tag, nil
}

// lockClass is the first key of every advisory lock the engine takes
// ("gapl"). Two-key advisory locks live apart from single-bigint ones, and
// the class keeps them apart from other two-key users of the database.
const lockClass int32 = 0x6761706c

const lockNameSQL = "SELECT pg_catalog.pg_advisory_xact_lock($1::int4, pg_catalog.hashtext($2))"

// lockName serialises, until tx ends, the transactions that rebuild or
// replace the relation named t, whether or not it exists yet: a table lock
// cannot cover a name nothing holds, and PostgreSQL's own CREATE OR
// REPLACE VIEW fails ("tuple concurrently updated") instead of waiting when
// raced. A hash collision between two names only makes them wait for each
// other.
func lockName(ctx context.Context, tx pgx.Tx, t warehouse.Table) error {
	_, err := exec(ctx, tx, lockNameSQL, lockClass, quoteTable(t))
	return err
}

// inTx runs fn in one transaction, committing when fn returns nil and
// rolling back otherwise.
func (e *Engine) inTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, e.pool, fn)
}

func redact(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" {
		return "(connection string)"
	}
	return u.Redacted()
}

// Capabilities: PostgreSQL changes a batch of views in one transaction
// (transactional DDL), keeps quoted names' case, and ingests exactly once
// (Ingester).
func (e *Engine) Capabilities() warehouse.Capabilities {
	return warehouse.Capabilities{AtomicViews: true, CaseSensitiveNames: true, Ingest: true}
}
