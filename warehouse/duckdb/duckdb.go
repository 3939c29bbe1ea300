// Package duckdb is the embedded default warehouse engine: a DuckDB database
// in one file (warehouse.duckdb in the project, by the caller's choice) or
// in memory, driven through duckdb-go v2 and database/sql.
//
// Invariants, beyond those of warehouse.Engine:
//
//   - Every statement the engine sends is prepared as exactly one statement.
//     DuckDB's driver would otherwise run every statement of a string, so a
//     model query such as "SELECT 1) AS q; DROP TABLE x; SELECT (1" could
//     smuggle a second statement past the subquery it is wrapped in. Here
//     it is an error and nothing runs.
//   - Identifiers are double-quoted with '"' doubled, and must be non-empty
//     valid UTF-8 without NUL (DuckDB reads SQL as a C string, so a NUL
//     would silently cut the statement short). Values are bound parameters;
//     the only SQL text the engine renders besides identifiers is a column
//     type, which must pass a strict grammar (see CreateTable).
//   - Writes (every method but TableExists and Columns, and Query of
//     anything but a SELECT or EXPLAIN) are serialised per database (one
//     in-memory database per Engine, one database per file across all
//     Engines of the process), with two exceptions: InsertInterval writes
//     of different tables, or of disjoint ranges of one table, run
//     together, and so does a first build's append into a table empty as
//     made with the writes of other tables (see writeLock). DuckDB's
//     optimistic concurrency would otherwise fail one of two transactions
//     touching the same rows; ordering turns that into waiting. Reads
//     never wait for writes: DuckDB's MVCC serves them a committed
//     snapshot.
//   - The write path (InsertInterval, MergeByKey) reads a table's column
//     names from a cache shared like the write lock, not from the catalog
//     on every batch. Every statement that can change a table's columns
//     forgets, before it lets go of the write lock, what it may have
//     changed: the engine's own DDL (CreateTable, CreateTableAs,
//     ReplaceTable, DropTable, DropView, the view methods) forgets that
//     name, any statement run through Query but a SELECT or EXPLAIN
//     forgets every table, and a failed write forgets its table. The same
//     cache knows which tables are empty as CreateTableAs made them, until
//     a write through the engine touches them: a first build appends to
//     such a table without asking whether it holds rows (see
//     ReplaceTable). A change made outside the engine while it holds the
//     database is not seen; no other process can hold the file meanwhile
//     (see Open).
//   - Every connection runs with TimeZone 'UTC', so casts between TIMESTAMP
//     and TIMESTAMPTZ in model SQL do not depend on the host's zone, in line
//     with gapless's UTC intervals.
//   - Only one process may hold a database file. Open waits a bounded time
//     for another process to let go and then fails with warehouse.ErrLocked.
package duckdb

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	duckdb "github.com/duckdb/duckdb-go/v2"
	"github.com/duckdb/duckdb-go/v2/mapping"
	"github.com/jonboulle/clockwork"

	"github.com/gapless-dev/gapless/warehouse"
)

// Dialect is what Engine.Dialect returns.
const Dialect = "duckdb"

// DefaultLockWait is how long Open waits for another process to release the
// database file when Options.LockWait is zero.
const DefaultLockWait = 30 * time.Second

// Options configures Open. The zero value is the production default.
type Options struct {
	// LockWait bounds how long Open waits while another process holds the
	// database file. Zero means DefaultLockWait; a negative value means fail
	// at the first refusal. It does not apply to in-memory databases.
	LockWait time.Duration
	// Clock paces the lock wait. Nil means the real clock; tests inject one
	// to drive the wait without sleeping.
	Clock clockwork.Clock
	// OnWait, when set, is called once when Open has waited WaitNotice for
	// another process to let go of the file and is still waiting, so that
	// a command says why it does not proceed instead of hanging silently.
	OnWait func(path string, waited time.Duration)
	// MemoryLimit is DuckDB's memory_limit ("2GB", "512MiB"): how much
	// memory the database may take before it spills to disk or fails a
	// query. "" leaves DuckDB's default, 80% of the machine's memory.
	MemoryLimit string
	// Threads is DuckDB's threads; 0 leaves DuckDB's default, one per
	// core.
	Threads int
}

// settings are the SET statements of opts, each with the name of its
// setting, run on every connection (see initConn).
func (opts Options) settings() ([][2]string, error) {
	var out [][2]string
	if opts.MemoryLimit != "" {
		if err := checkText(warehouse.ErrInvalidArgument, "memory_limit", opts.MemoryLimit); err != nil {
			return nil, err
		}
		out = append(out, [2]string{"memory_limit", "SET memory_limit = '" + strings.ReplaceAll(opts.MemoryLimit, "'", "''") + "'"})
	}
	if opts.Threads < 0 {
		return nil, invalidf("threads must be at least 1, got %d", opts.Threads)
	}
	if opts.Threads > 0 {
		out = append(out, [2]string{"threads", fmt.Sprintf("SET threads = %d", opts.Threads)})
	}
	return out, nil
}

// WaitNotice is how long Open waits for a held file before it calls
// Options.OnWait: a gapless command holding the file usually finishes
// sooner, so a wait that short is not worth a word.
const WaitNotice = time.Second

// Engine is a warehouse.Engine on one DuckDB database. It is safe for
// concurrent use.
type Engine struct {
	db     *sql.DB
	path   string  // absolute path, or "" in memory
	object string  // how errors name the database itself
	shared *shared // the write lock and column cache of the database

	closeOnce sync.Once
	closeErr  error
}

var _ warehouse.Engine = (*Engine)(nil)

// Open opens (creating if needed) the DuckDB database at path, or a fresh
// in-memory database when path is "" or ":memory:". Each in-memory Engine
// is its own database.
//
// When another process holds the file, Open retries with backoff for
// opts.LockWait and then returns a *warehouse.Error wrapping warehouse.ErrLocked that
// names the file. Any other failure is returned at once. Open never
// creates directories: the caller chooses where the file lives.
//
// opts.MemoryLimit and opts.Threads are set on every connection; a value
// DuckDB refuses fails Open with an error naming the setting, and leaves
// nothing open.
func Open(ctx context.Context, path string, opts Options) (*Engine, error) {
	settings, err := opts.settings()
	if err != nil {
		return nil, &warehouse.Error{Op: "open", Object: path, Err: err}
	}
	init := initConn(settings)
	var e *Engine
	if path == "" || path == ":memory:" {
		connector, err := duckdb.NewConnector("", init)
		if err != nil {
			return nil, &warehouse.Error{Op: "open", Object: "in-memory database", Err: err}
		}
		e = newEngine(connector, "", "in-memory database", newShared())
	} else {
		abs, err := checkPath(path)
		if err != nil {
			return nil, &warehouse.Error{Op: "open", Object: path, Err: err}
		}
		connector, err := openFile(ctx, abs, opts, init)
		if err != nil {
			return nil, &warehouse.Error{Op: "open", Object: abs, Err: err}
		}
		e = newEngine(connector, abs, abs, acquireShared(abs))
	}
	if len(settings) > 0 {
		// Connections are made on first use: make one now, so that a
		// setting DuckDB refuses fails here, not at the first statement.
		if err := e.read(ctx, func(*session) error { return nil }); err != nil {
			return nil, errors.Join(&warehouse.Error{Op: "open", Object: e.object, Err: err}, e.Close())
		}
	}
	return e, nil
}

func newEngine(c *duckdb.Connector, path, object string, sh *shared) *Engine {
	return &Engine{db: sql.OpenDB(c), path: path, object: object, shared: sh}
}

// checkPath makes path absolute and refuses what the driver would misread:
// duckdb-go takes everything after a '?' as configuration.
func checkPath(path string) (string, error) {
	if strings.ContainsAny(path, "?\x00") {
		return "", fmt.Errorf("database path %q must not contain '?' or NUL", path)
	}
	if !utf8.ValidString(path) {
		return "", fmt.Errorf("database path %q is not valid UTF-8", path)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("resolving database path: %w", err)
	}
	return abs, nil
}

// initConn returns what runs on every new connection: TimeZone UTC, then
// settings (name and statement; see Options.settings). A setting DuckDB
// refuses fails the connection with an error naming it and wrapping
// warehouse.ErrInvalidArgument.
func initConn(settings [][2]string) func(driver.ExecerContext) error {
	return func(execer driver.ExecerContext) error {
		if _, err := execer.ExecContext(context.Background(), "SET TimeZone = 'UTC'", nil); err != nil {
			return fmt.Errorf("setting TimeZone to UTC: %w", err)
		}
		for _, st := range settings {
			if _, err := execer.ExecContext(context.Background(), st[1], nil); err != nil {
				return fmt.Errorf("%w: DuckDB refuses the setting %s: %w", warehouse.ErrInvalidArgument, st[0], err)
			}
		}
		return nil
	}
}

// Dialect returns "duckdb".
func (e *Engine) Dialect() string { return Dialect }

// Path returns the absolute path of the database file, or "" in memory.
func (e *Engine) Path() string { return e.path }

// QuoteIdent quotes name as a DuckDB identifier: double quotes, with '"'
// doubled. It does not validate name; the methods do.
func (e *Engine) QuoteIdent(name string) string { return quoteIdent(name) }

// QuoteTable quotes t as schema.name; with an empty schema it renders the
// name alone (DuckDB's default schema), which the methods never accept but
// ad-hoc queries may use.
func (e *Engine) QuoteTable(t warehouse.Table) string { return quoteTable(t) }

func quoteIdent(name string) string {
	return `"` + strings.ReplaceAll(name, `"`, `""`) + `"`
}

func quoteTable(t warehouse.Table) string {
	if t.Schema == "" {
		return quoteIdent(t.Name)
	}
	return quoteIdent(t.Schema) + "." + quoteIdent(t.Name)
}

// Close closes the database. It may be called more than once; later calls
// return the first call's result. Methods called after Close fail with an
// error.
func (e *Engine) Close() error {
	e.closeOnce.Do(func() {
		e.closeErr = e.db.Close()
		if e.path != "" {
			releaseShared(e.path)
		}
		if e.closeErr != nil {
			e.closeErr = &warehouse.Error{Op: "close", Object: e.object, Err: e.closeErr}
		}
	})
	return e.closeErr
}

// shared is what every Engine on one database holds in common: the write
// lock and the cache of its tables' column names.
type shared struct {
	// wl is the write lock (see writeLock): exclusive writes run alone,
	// range writes of disjoint ranges run together.
	wl   *writeLock
	refs int // guarded by registry.mu
	cols columnCache
	// ingestReady says the fence and marker tables exist (ingestDDL ran
	// and committed); written under the exclusive write lock.
	ingestReady atomic.Bool
}

func newShared() *shared { return &shared{wl: newWriteLock()} }

// lock takes the write lock exclusively.
func (w *shared) lock(ctx context.Context) error { return w.wl.lockExclusive(ctx) }

func (w *shared) unlock() { w.wl.unlockExclusive() }

// registry holds one shared per open database file: duckdb-go shares one
// database instance among all connectors of a process on the same file, so
// its Engines must share the write lock and the column cache too.
var registry = struct {
	mu    sync.Mutex
	byAbs map[string]*shared
}{byAbs: map[string]*shared{}}

func acquireShared(abs string) *shared {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	w, ok := registry.byAbs[abs]
	if !ok {
		w = newShared()
		registry.byAbs[abs] = w
	}
	w.refs++
	return w
}

func releaseShared(abs string) {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	w, ok := registry.byAbs[abs]
	if !ok {
		return
	}
	w.refs--
	if w.refs <= 0 {
		delete(registry.byAbs, abs)
	}
}

// refusef is input the engine refused before sending any SQL, wrapping
// sentinel (one of package warehouse's errors).
func refusef(sentinel error, format string, args ...any) error {
	return fmt.Errorf("%w: %s", sentinel, fmt.Sprintf(format, args...))
}

// invalidf is a refusal of parameters that make no sense
// (warehouse.ErrInvalidArgument).
func invalidf(format string, args ...any) error {
	return refusef(warehouse.ErrInvalidArgument, format, args...)
}

// checkIdent refuses names DuckDB cannot hold faithfully.
func checkIdent(kind, name string) error {
	switch {
	case name == "":
		return refusef(warehouse.ErrInvalidIdentifier, "%s name is empty", kind)
	case strings.ContainsRune(name, 0):
		return refusef(warehouse.ErrInvalidIdentifier, "%s name %q contains a NUL byte", kind, name)
	case !utf8.ValidString(name):
		return refusef(warehouse.ErrInvalidIdentifier, "%s name %q is not valid UTF-8", kind, name)
	}
	return nil
}

func checkTable(t warehouse.Table) error {
	if err := checkIdent("schema", t.Schema); err != nil {
		return err
	}
	return checkIdent("table", t.Name)
}

// checkSQL refuses SQL text the driver cannot carry faithfully
// (warehouse.ErrInvalidArgument).
func checkSQL(what, q string) error { return checkText(warehouse.ErrInvalidArgument, what, q) }

// checkText refuses text the driver cannot carry faithfully, wrapping
// sentinel.
func checkText(sentinel error, what, q string) error {
	switch {
	case strings.TrimSpace(q) == "":
		return refusef(sentinel, "%s is empty", what)
	case strings.ContainsRune(q, 0):
		return refusef(sentinel, "%s contains a NUL byte", what)
	case !utf8.ValidString(q):
		return refusef(sentinel, "%s is not valid UTF-8", what)
	}
	return nil
}

// body prepares a model query for embedding in a larger statement: trailing
// semicolons are dropped, and the caller puts it on lines of its own so that
// a trailing line comment cannot swallow what follows.
func body(q string) string {
	return strings.TrimRight(q, " \t\r\n;")
}

// checkType accepts a column type only if it is made of words, numbers,
// dots, quoted strings, quoted identifiers, and balanced () and [] with
// commas only inside them:
// enough for DECIMAL(12,2), TIMESTAMP WITH TIME ZONE, VARCHAR[], INTEGER[3],
// STRUCT("a b" INTEGER), MAP(VARCHAR, INTEGER) and ENUM('x', 'y'), and not
// enough to end the statement, open a comment or write an expression.
func checkType(typ string) error {
	if err := checkText(warehouse.ErrInvalidType, "column type", typ); err != nil {
		return err
	}
	var stack []rune
	for i := 0; i < len(typ); {
		r, size := utf8.DecodeRuneInString(typ[i:])
		switch {
		case r == '\'' || r == '"':
			end := closingQuote(typ, i+size, byte(r))
			if end < 0 {
				return refusef(warehouse.ErrInvalidType, "column type %q has an unterminated quote", typ)
			}
			i = end + 1
			continue
		case r == '(' || r == '[':
			stack = append(stack, r)
		case r == ')' || r == ']':
			want := '('
			if r == ']' {
				want = '['
			}
			if len(stack) == 0 || stack[len(stack)-1] != want {
				return refusef(warehouse.ErrInvalidType, "column type %q has unbalanced brackets", typ)
			}
			stack = stack[:len(stack)-1]
		case r == ',':
			if len(stack) == 0 {
				return refusef(warehouse.ErrInvalidType, "column type %q has a comma outside brackets", typ)
			}
		case r == '_' || r == '.' || r == ' ' || r == '\t' || r == '\n' || r == '\r':
		case r >= '0' && r <= '9', r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
		default:
			return refusef(warehouse.ErrInvalidType, "column type %q contains %q, which no type needs", typ, r)
		}
		i += size
	}
	if len(stack) != 0 {
		return refusef(warehouse.ErrInvalidType, "column type %q has unbalanced brackets", typ)
	}
	return nil
}

// closingQuote returns the index of the quote closing a quoted token that
// starts at from (just after the opening quote), honouring doubled quotes,
// or -1.
func closingQuote(s string, from int, q byte) int {
	for i := from; i < len(s); i++ {
		if s[i] != q {
			continue
		}
		if i+1 < len(s) && s[i+1] == q {
			i++
			continue
		}
		return i
	}
	return -1
}

// asciiFoldEqual is DuckDB's catalog name comparison: case-insensitive for
// ASCII letters only ("Abc" is "abc", "É" is not "é").
func asciiFoldEqual(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// LibraryVersion is the version of the DuckDB library linked in ("v1.3.0").
func LibraryVersion() string { return mapping.LibraryVersion() }

// Capabilities: DuckDB changes a batch of views in one transaction, keeps
// names' case, and ingests exactly once (Ingester).
func (e *Engine) Capabilities() warehouse.Capabilities {
	return warehouse.Capabilities{AtomicViews: true, CaseSensitiveNames: true, Ingest: true}
}
