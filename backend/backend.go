// Package backend opens what a project's gapless.yaml points at: the state
// store (SQLite embedded, or PostgreSQL) and the warehouse engine (DuckDB
// embedded, PostgreSQL, or a Trino cluster). The command line opens one Backend per command;
// tests open it the same way.
//
// The DuckDB warehouse file is held by one process at a time. Open waits a
// bounded time for another process to let go (Options.LockWait) and then
// fails with an error wrapping ErrLocked that names the file and says what
// to do.
package backend

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/gapless-dev/gapless/config"
	"github.com/gapless-dev/gapless/internal/logkey"
	"github.com/gapless-dev/gapless/state"
	pgstate "github.com/gapless-dev/gapless/state/postgres"
	"github.com/gapless-dev/gapless/state/sqlite"
	"github.com/gapless-dev/gapless/warehouse"
	"github.com/gapless-dev/gapless/warehouse/duckdb"
	pgwarehouse "github.com/gapless-dev/gapless/warehouse/postgres"
	"github.com/gapless-dev/gapless/warehouse/trino"
)

// ErrLocked is wrapped by Open's error when another process holds the DuckDB
// warehouse file for longer than Options.LockWait. It is the same sentinel
// as warehouse.ErrLocked, so either may be tested with errors.Is.
var ErrLocked = warehouse.ErrLocked

// ErrUnsupported is wrapped by Open's error when a connection names a driver
// that cannot play the role asked of it (a SQLite warehouse, a DuckDB state
// store).
var ErrUnsupported = errors.New("unsupported backend")

// Options configures Open. The zero value is the production default.
type Options struct {
	// LockWait bounds how long opening a DuckDB warehouse waits while another
	// process holds the file: zero means duckdb.DefaultLockWait, negative
	// means fail at once.
	LockWait time.Duration
	// Clock paces the lock wait (nil: the real clock). Tests inject one.
	Clock clockwork.Clock
	// OnLockWait, when set, is called once when opening a DuckDB warehouse
	// has waited duckdb.WaitNotice for another process holding the file.
	OnLockWait func(path string, waited time.Duration)
	// Log receives one record per opened component; nil discards.
	Log *slog.Logger
	// StateOnly opens the state store alone (Engine stays nil), for
	// commands that never touch the warehouse.
	StateOnly bool
}

// Backend is an opened state store and warehouse engine.
type Backend struct {
	Store  state.Store
	Engine warehouse.Engine
	// Config is the configuration the backend was opened from.
	Config *config.Config
}

// Open opens the state store, then the warehouse, as cfg says. If the
// warehouse fails to open, the store is closed again: on error nothing is
// left open.
func Open(ctx context.Context, cfg *config.Config, opts Options) (*Backend, error) {
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	store, err := OpenStore(ctx, cfg.State)
	if err != nil {
		return nil, err
	}
	log.Debug("state store opened", logkey.State, cfg.State.String())
	b := &Backend{Store: store, Config: cfg}
	if opts.StateOnly {
		return b, nil
	}
	engine, err := OpenEngine(ctx, cfg.Warehouse, opts)
	if err != nil {
		if cerr := store.Close(); cerr != nil {
			log.Warn("closing the state store after a failed open", logkey.State, cfg.State.String(), logkey.Error, cerr)
		}
		return nil, err
	}
	log.Debug("warehouse opened", logkey.Warehouse, cfg.Warehouse.String())
	b.Engine = engine
	return b, nil
}

// OpenStore opens (and migrates) the state store that conn names.
func OpenStore(ctx context.Context, conn config.Conn) (state.Store, error) {
	switch conn.Driver {
	case config.DriverSQLite:
		opts, err := sqliteOptions(conn)
		if err != nil {
			return nil, fmt.Errorf("opening the state store %s: %w", conn.String(), err)
		}
		s, err := sqlite.Open(ctx, conn.Path, opts...)
		if err != nil {
			return nil, fmt.Errorf("opening the state store %s: %w", conn.String(), err)
		}
		return s, nil
	case config.DriverPostgres:
		s, err := pgstate.Open(ctx, conn.DSN)
		if err != nil {
			return nil, fmt.Errorf("opening the state store %s: %w", conn.String(), err)
		}
		return s, nil
	default:
		return nil, fmt.Errorf("state store %s: %w: the state store is sqlite:// or postgres://", conn.String(), ErrUnsupported)
	}
}

// ErrBadStateOption is wrapped when a sqlite:// state store names a
// parameter it does not know, or a bad value.
var ErrBadStateOption = errors.New("bad state store parameter")

// sqliteOptions reads the parameters of a sqlite:// state store:
// sync=normal|full (sqlite.WithSync). Any other parameter is refused.
func sqliteOptions(conn config.Conn) ([]sqlite.Option, error) {
	_, query, ok := strings.Cut(conn.DSN, "?")
	if !ok {
		return nil, nil
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return nil, fmt.Errorf("%w: the parameters after '?' do not parse: %w", ErrBadStateOption, err)
	}
	var opts []sqlite.Option
	for name, values := range q {
		if name != "sync" {
			return nil, fmt.Errorf("%w: unknown parameter %q; the one known is sync (normal or full)", ErrBadStateOption, name)
		}
		if len(values) != 1 {
			return nil, fmt.Errorf("%w: sync is given %d times", ErrBadStateOption, len(values))
		}
		sync, err := sqlite.ParseSync(values[0])
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrBadStateOption, err)
		}
		opts = append(opts, sqlite.WithSync(sync))
	}
	return opts, nil
}

// OpenEngine opens the warehouse engine that conn names. For a DuckDB file
// it creates the file's folder if needed and waits up to opts.LockWait for
// another process holding the file; DuckDB runs with conn.Settings
// (warehouse_settings).
func OpenEngine(ctx context.Context, conn config.Conn, opts Options) (warehouse.Engine, error) {
	switch conn.Driver {
	case config.DriverDuckDB:
		if conn.Path != config.Memory {
			if err := os.MkdirAll(filepath.Dir(conn.Path), 0o755); err != nil {
				return nil, fmt.Errorf("creating the warehouse folder: %w", err)
			}
		}
		e, err := duckdb.Open(ctx, conn.Path, duckdb.Options{LockWait: opts.LockWait, Clock: opts.Clock, OnWait: opts.OnLockWait,
			MemoryLimit: conn.Settings.MemoryLimit, Threads: conn.Settings.Threads})
		if errors.Is(err, warehouse.ErrLocked) {
			return nil, &LockedError{Path: conn.Path, Err: err}
		}
		if err != nil {
			return nil, fmt.Errorf("opening the warehouse %s: %w", conn.String(), err)
		}
		return e, nil
	case config.DriverPostgres:
		e, err := pgwarehouse.Open(ctx, conn.DSN)
		if err != nil {
			return nil, fmt.Errorf("opening the warehouse %s: %w", conn.String(), err)
		}
		return e, nil
	case config.DriverTrino:
		e, err := trino.Open(ctx, conn.DSN)
		if err != nil {
			return nil, fmt.Errorf("opening the warehouse %s: %w", conn.String(), err)
		}
		return e, nil
	default:
		return nil, fmt.Errorf("warehouse %s: %w: the warehouse is duckdb://, postgres:// or trino://", conn.String(), ErrUnsupported)
	}
}

// OpenForPlanning opens an engine on which a plan describes its models'
// queries (warehouse.Engine.Describe), which writes nothing: for a DuckDB
// warehouse a fresh in-memory DuckDB, the same engine and dialect, with the
// warehouse's settings (its memory limit and threads), so that
// planning never waits for the warehouse file another process may hold;
// for PostgreSQL and Trino the warehouse itself, whose reused tables
// Describe then reads as they are (on Trino, Describe's stand-ins for
// parents not built yet are real empty tables, dropped again at once). The caller closes it.
func OpenForPlanning(ctx context.Context, conn config.Conn) (warehouse.Engine, error) {
	if conn.Driver == config.DriverDuckDB {
		e, err := duckdb.Open(ctx, config.Memory, duckdb.Options{MemoryLimit: conn.Settings.MemoryLimit, Threads: conn.Settings.Threads})
		if err != nil {
			return nil, fmt.Errorf("opening a scratch DuckDB to check the models: %w", err)
		}
		return e, nil
	}
	return OpenEngine(ctx, conn, Options{})
}

// LockedError reports a DuckDB warehouse file held by another process. Its
// message is one line that names the file and says what to do; the driver's
// detail stays reachable through Unwrap.
type LockedError struct {
	Path string
	Err  error
}

// Error implements error.
func (e *LockedError) Error() string {
	return fmt.Sprintf("the warehouse file %s is in use by another process (another gapless command, or a DuckDB client); "+
		"wait for it to finish or close it, then try again", e.Path)
}

// Unwrap returns the engine's error, which wraps ErrLocked.
func (e *LockedError) Unwrap() error { return e.Err }

// Close closes the warehouse and the store, and returns both errors joined.
func (b *Backend) Close() error {
	var errs []error
	if b.Engine != nil {
		if err := b.Engine.Close(); err != nil {
			errs = append(errs, fmt.Errorf("closing the warehouse: %w", err))
		}
	}
	if b.Store != nil {
		if err := b.Store.Close(); err != nil {
			errs = append(errs, fmt.Errorf("closing the state store: %w", err))
		}
	}
	return errors.Join(errs...)
}
