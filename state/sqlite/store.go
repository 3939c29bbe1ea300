// Package sqlite is gapless's embedded state store: one SQLite file, by
// default .gapless/state.db in the project, through the pure-Go
// modernc.org/sqlite driver.
//
// Concurrency model. The file is in WAL mode, so readers never block the
// writer and see a consistent snapshot per statement or transaction. Every
// write runs in a BEGIN IMMEDIATE transaction: it takes SQLite's single write
// lock before it reads anything, so a read-merge-write (compacting interval
// ranges, checking a fence, comparing a plan id) can never interleave with
// another writer, in this process or in another process on the same file.
// Inside one process, writers also queue on a semaphore first, so that they
// wait in Go rather than in SQLite's busy handler; between processes the busy
// timeout does the waiting.
//
// Durability. Every write that a later decision or a warehouse action rests
// on (a promotion, an invalidation, a removal of intervals or snapshots, a
// debt, a plan, an event, every code-host record but webhook deliveries)
// commits with synchronous=FULL: it survives power loss. The two writes a
// scheduler makes for every model, an interval record and a lease (taken,
// renewed, taken over, released), the one an ingest pass makes for every
// batch, a source generation's applied record (RecordApplied: a cache of
// the warehouse's ingest markers, healed from them by the next pass when
// lost), and the webhook intake's record of each delivery (RecordDelivery,
// FinishDelivery: a lost one only lets a replay of that delivery through,
// whose jobs are idempotent and whose domain writes are compare-and-swaps)
// commit by default with synchronous=NORMAL (SyncNormal): they survive a
// crash of the process, not always a power loss or an OS crash, which may
// roll back the last of them (with a debt's repair stamp and gap_repaired event when the
// record completed the debt: lost with it, they are written again when the
// interval is recomputed). That is safe because:
//   - WAL keeps every transaction of one file in commit order, and recovery
//     keeps a prefix of them: a transaction that survives keeps every
//     earlier one, and a FULL commit syncs every earlier commit with it. So
//     a synced decision never outlives a record it read (a promotion's
//     check, a child's coverage of its parent), and state is never ahead
//     of the warehouse, whose commits are durable: a lost interval record
//     only makes its interval due again, and recomputing it replaces
//     exactly its rows (invariant 3);
//   - WAL works only between processes of one host, so a power loss ends
//     every process that could hold a lease or a token: a lost lease write
//     leaves a lease that is free, or held by a process that no longer runs
//     and expires at its TTL (as when a holder dies holding it, which
//     leases are built for), and a lost token fences only writers that are
//     gone.
//
// WithSync(SyncFull) syncs every write (about three fsyncs per model of a
// scheduler tick more).
//
// The schema is created and upgraded by the goose migrations embedded in the
// binary, automatically at Open. A database migrated by a newer gapless is
// refused with state.ErrSchemaTooNew and left untouched.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	sqlitedrv "modernc.org/sqlite" // also registers the "sqlite" database/sql driver
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/gapless-dev/gapless/state"
)

// DefaultDir and DefaultFile name the state file inside a project:
// <project>/.gapless/state.db.
const (
	DefaultDir  = ".gapless"
	DefaultFile = "state.db"
)

// DefaultPath returns the default state file of the project in projectDir.
func DefaultPath(projectDir string) string {
	return filepath.Join(projectDir, DefaultDir, DefaultFile)
}

// DefaultBusyTimeout is how long a write waits for another process's write
// lock before it fails.
const DefaultBusyTimeout = 10 * time.Second

// Store is the SQLite state store. It is safe for concurrent use by many
// goroutines, and several processes may open the same file.
type Store struct {
	// db serves the reads and the synced writes (synchronous=FULL); rec the
	// interval records and lease writes (synchronous as Sync says: the same
	// pool as db under SyncFull). See the package comment.
	db, rec *sql.DB
	path    string
	// writeSem (capacity 1) serialises this process's write transactions,
	// on both pools, before they reach SQLite; see the package comment.
	writeSem chan struct{}
	// stmts are prepared on db, recStmts on rec: a transaction uses its
	// pool's.
	stmts, recStmts *stmts
	sync            Sync
	// committed, when set (by tests), is called with the pool of every
	// write transaction that committed.
	committed func(pool *sql.DB)
}

// Compile-time checks: Store implements the state store and the test hook
// the conformance suite uses to see that interval storage is compacted.
var (
	_ state.Store = (*Store)(nil)
	_ interface {
		CountIntervalRows(context.Context) (int, error)
	} = (*Store)(nil)
)

// Option configures Open.
type Option func(*options)

type options struct {
	busyTimeout time.Duration
	sync        Sync
}

// Sync is how the interval records and lease writes reach the disk; every
// other write is synced (see the package comment).
type Sync int

const (
	// SyncNormal (the default): interval records and lease writes commit
	// with synchronous=NORMAL, without an fsync: durable against a crash of
	// the process; a power loss may roll back the last of them.
	SyncNormal Sync = iota
	// SyncFull: every write commits with synchronous=FULL.
	SyncFull
)

// ParseSync reads a Sync by name: "normal" or "full".
func ParseSync(s string) (Sync, error) {
	switch strings.ToLower(s) {
	case "normal":
		return SyncNormal, nil
	case "full":
		return SyncFull, nil
	}
	return 0, fmt.Errorf("sqlite: sync %q: want normal or full", s)
}

// String is the name ParseSync reads.
func (s Sync) String() string {
	if s == SyncFull {
		return "full"
	}
	return "normal"
}

// WithSync sets how interval records and lease writes reach the disk
// (default SyncNormal).
func WithSync(s Sync) Option {
	return func(o *options) { o.sync = s }
}

// WithBusyTimeout sets how long a write waits for another process's lock
// (default DefaultBusyTimeout). Values below one millisecond are raised to
// one millisecond.
func WithBusyTimeout(d time.Duration) Option {
	return func(o *options) { o.busyTimeout = max(d, time.Millisecond) }
}

// Open opens (creating it and its parent folder if needed) the state file at
// path and migrates its schema to the newest embedded version.
//
// It fails, wrapping state.ErrSchemaTooNew, when the file was migrated by a
// newer gapless; the file is then left exactly as it was.
func Open(ctx context.Context, path string, opts ...Option) (*Store, error) {
	o := options{busyTimeout: DefaultBusyTimeout}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if path == "" {
		return nil, errors.New("sqlite: open: empty path")
	}
	if strings.ContainsRune(path, '?') {
		return nil, fmt.Errorf("sqlite: open %q: a state file path cannot contain '?'", path)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("sqlite: open %s: creating its folder: %w", path, err)
	}
	db, err := sql.Open("sqlite", dsn(path, o, SyncFull))
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	// Keep as many idle connections as a busy process uses, so that the
	// per-connection pragmas and prepared statements are not redone.
	db.SetMaxIdleConns(8)
	if err := migrateRetryingBusy(ctx, db, o.busyTimeout); err != nil {
		return nil, errors.Join(fmt.Errorf("sqlite: open %s: %w", path, err), db.Close())
	}
	s := &Store{db: db, rec: db, path: path, writeSem: make(chan struct{}, 1), sync: o.sync}
	if o.sync != SyncFull {
		if s.rec, err = sql.Open("sqlite", dsn(path, o, o.sync)); err != nil {
			return nil, errors.Join(fmt.Errorf("sqlite: open %s: %w", path, err), db.Close())
		}
		// Writes are serialised (writeSem): one connection is all it uses.
		s.rec.SetMaxIdleConns(2)
	}
	if s.stmts, err = prepareStmts(ctx, db); err != nil {
		return nil, errors.Join(fmt.Errorf("sqlite: open %s: %w", path, err), s.closePools())
	}
	s.recStmts = s.stmts
	if s.rec != db {
		if s.recStmts, err = prepareStmts(ctx, s.rec); err != nil {
			return nil, errors.Join(fmt.Errorf("sqlite: open %s: %w", path, err), s.stmts.close(), s.closePools())
		}
	}
	return s, nil
}

// closePools closes the connection pools (once each).
func (s *Store) closePools() error {
	if s.rec == nil || s.rec == s.db {
		return s.db.Close()
	}
	return errors.Join(s.rec.Close(), s.db.Close())
}

// migrateRetryingBusy runs migrate, retrying it while it fails with
// SQLITE_BUSY, for at most budget in all. Two processes opening one fresh
// file race to switch it to WAL mode, and SQLite answers the loser's first
// read SQLITE_BUSY without consulting the busy handler (the WAL index is
// being built); the loser's retry then finds the file in WAL mode. migrate
// is idempotent, so a retry repeats nothing that succeeded.
func migrateRetryingBusy(ctx context.Context, db *sql.DB, budget time.Duration) error {
	deadline := time.Now().Add(budget)
	wait := 5 * time.Millisecond
	for {
		err := migrate(ctx, db)
		var se *sqlitedrv.Error
		if err == nil || !errors.As(err, &se) || se.Code()&0xff != sqlite3.SQLITE_BUSY || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(wait):
		}
		wait = min(2*wait, 200*time.Millisecond)
	}
}

// dsn builds the modernc.org/sqlite data source name: every connection of the
// pool gets the busy timeout, foreign keys, WAL mode and the synchronous
// level of sync, and non-read-only transactions begin IMMEDIATE (the
// driver's _txlock parameter).
func dsn(path string, o options, sync Sync) string {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", o.busyTimeout.Milliseconds()))
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "journal_mode(WAL)")
	// FULL: a committed write survives power loss, not only a crash of the
	// process. NORMAL: it survives a crash of the process (see the package
	// comment for which writes may use it).
	q.Add("_pragma", "synchronous("+strings.ToUpper(sync.String())+")")
	q.Set("_txlock", "immediate")
	// A plain file name, not a file: URI: the driver cuts the parameters at
	// the first '?', which Open refuses in paths.
	return path + "?" + q.Encode()
}

// Sync returns how the store syncs interval records and lease writes.
func (s *Store) Sync() Sync { return s.sync }

// Path returns the file the store was opened on.
func (s *Store) Path() string { return s.path }

// Close releases the store's connections. It is safe to call once.
func (s *Store) Close() error {
	var errs []error
	if s.recStmts != s.stmts {
		errs = append(errs, s.recStmts.close())
	}
	if err := errors.Join(append(errs, s.stmts.close(), s.closePools())...); err != nil {
		return fmt.Errorf("sqlite: close %s: %w", s.path, err)
	}
	return nil
}

// querier is what reads and writes need: the pool or a transaction.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// write runs fn in one synced (synchronous=FULL) BEGIN IMMEDIATE
// transaction and commits it when fn returns nil; otherwise it rolls back
// and returns fn's error unchanged.
//
// Invariant: everything fn reads and writes is atomic with respect to every
// other writer of the file, in any process: the write lock is held from the
// first statement to the commit.
func (s *Store) write(ctx context.Context, fn func(tx *sql.Tx) error) error {
	return s.writeOn(ctx, s.db, fn)
}

// writeRecord is write for an interval record or a lease write: on the
// rec pool, synced as Sync says (see the package comment); fn's
// transaction uses s.recStmts.
func (s *Store) writeRecord(ctx context.Context, fn func(tx *sql.Tx) error) error {
	return s.writeOn(ctx, s.rec, fn)
}

// writeOn is write on the pool db.
func (s *Store) writeOn(ctx context.Context, db *sql.DB, fn func(tx *sql.Tx) error) (err error) {
	select {
	case s.writeSem <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("waiting for the write lock: %w", ctx.Err())
	}
	defer func() { <-s.writeSem }()

	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin immediate: %w", err)
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, ignoreDone(tx.Rollback()))
		}
	}()
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	if s.committed != nil {
		s.committed(db)
	}
	return nil
}

// ignoreDone drops the error a rollback reports when the transaction is
// already finished (the driver rolled it back when its context ended).
func ignoreDone(err error) error {
	if errors.Is(err, sql.ErrTxDone) {
		return nil
	}
	return err
}
