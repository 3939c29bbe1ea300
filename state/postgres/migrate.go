package postgres

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/gapless-dev/gapless/state"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// schemaVersionTable is goose's version table. It has its own name, not
// goose's default, so that gapless can share a schema with an application
// that uses goose itself.
const schemaVersionTable = "gapless_schema_version"

// migrationLockID is the key of the session-level advisory lock held while
// migrating ("gapless" followed by 0x01 as eight bytes). Advisory locks are
// per database, so two gapless schemas in one database share the lock: their
// migrations serialise, which is harmless.
const migrationLockID int64 = 0x676170_6c657373_01

// migrations returns the embedded migration files, rooted so that goose sees
// the .sql files at the top level.
func migrations() (fs.FS, error) {
	sub, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		return nil, fmt.Errorf("postgres state: embedded migrations: %w", err)
	}
	return sub, nil
}

// NewestSchemaVersion is the version of the newest migration embedded in this
// binary: Open migrates a database to it, and refuses a database beyond it.
func NewestSchemaVersion() int64 {
	v, err := newestEmbedded()
	if err != nil {
		// The embedded files are fixed at build time and covered by tests;
		// an error here means a malformed file name was committed.
		return 0
	}
	return v
}

// newestEmbedded reads the highest version among the embedded migrations.
func newestEmbedded() (int64, error) {
	fsys, err := migrations()
	if err != nil {
		return 0, err
	}
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return 0, fmt.Errorf("postgres state: listing embedded migrations: %w", err)
	}
	var newest int64
	for _, e := range entries {
		v, err := goose.NumericComponent(e.Name())
		if err != nil {
			return 0, fmt.Errorf("postgres state: embedded migration %s: %w", e.Name(), err)
		}
		newest = max(newest, v)
	}
	if newest == 0 {
		return 0, errors.New("postgres state: no embedded migrations")
	}
	return newest, nil
}

// migrate brings the database to the newest embedded schema version.
//
// Invariant: at most one process migrates a database at a time, and nothing
// is changed in a database whose schema is newer than this binary knows.
// Both hold because the whole sequence — create the schema named by
// search_path if missing, read the current version, refuse a newer one, run
// goose — happens while this process holds a session-level advisory lock on
// a dedicated connection. The lock is taken with pg_advisory_lock, which
// waits inside the server and returns as soon as the holder releases it.
// (goose's own lock.NewPostgresSessionLocker polls pg_try_advisory_lock and
// sleeps at least a second between tries; it also could not cover the
// version check.) goose itself runs without a locker, on another connection
// of the same short-lived database handle, because the lock is already held.
// Closing that handle ends the session, which releases the lock even if the
// explicit unlock failed.
func migrate(ctx context.Context, connCfg *pgx.ConnConfig) (err error) {
	fsys, err := migrations()
	if err != nil {
		return err
	}
	newest, err := newestEmbedded()
	if err != nil {
		return err
	}
	db := stdlib.OpenDB(*connCfg.Copy())
	defer func() { err = errors.Join(err, closeErr("migration connections", db.Close())) }()

	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("postgres state: connecting to migrate: %w", err)
	}
	defer func() { err = errors.Join(err, closeErr("migration connection", conn.Close())) }()

	if _, err := conn.ExecContext(ctx, "SELECT pg_advisory_lock($1)", migrationLockID); err != nil {
		return fmt.Errorf("postgres state: taking the migration lock: %w", err)
	}
	defer func() {
		_, uerr := conn.ExecContext(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", migrationLockID)
		if uerr != nil {
			err = errors.Join(err, fmt.Errorf("postgres state: releasing the migration lock: %w", uerr))
		}
	}()

	schema, err := ensureSchema(ctx, conn)
	if err != nil {
		return err
	}
	current, err := versionIn(ctx, conn, schema)
	if err != nil {
		return err
	}
	if current > newest {
		return fmt.Errorf("postgres state: schema %q is at version %d, and the newest version this gapless knows is %d: %w",
			schema, current, newest, state.ErrSchemaTooNew)
	}
	if current == newest {
		return nil
	}
	provider, err := goose.NewProvider(goose.DialectPostgres, db, fsys,
		goose.WithTableName(schemaVersionTable),
		goose.WithDisableGlobalRegistry(true),
	)
	if err != nil {
		return fmt.Errorf("postgres state: preparing migrations: %w", err)
	}
	if _, err := provider.Up(ctx); err != nil {
		return fmt.Errorf("postgres state: migrating schema %q from version %d to %d: %w", schema, current, newest, err)
	}
	return nil
}

func closeErr(what string, err error) error {
	if err != nil {
		return fmt.Errorf("postgres state: closing %s: %w", what, err)
	}
	return nil
}

// ensureSchema creates the first schema named in search_path (skipping
// "$user") when it does not exist, so that the state tables go where the URL
// says rather than into a later schema of the path, and returns the schema
// unqualified tables are created in (current_schema()). It must run under
// the migration lock: CREATE SCHEMA IF NOT EXISTS is not safe against a
// concurrent twin.
func ensureSchema(ctx context.Context, conn *sql.Conn) (string, error) {
	var searchPath string
	if err := conn.QueryRowContext(ctx, "SELECT current_setting('search_path')").Scan(&searchPath); err != nil {
		return "", fmt.Errorf("postgres state: reading search_path: %w", err)
	}
	if name, ok := firstSchema(searchPath); ok {
		var exists bool
		if err := conn.QueryRowContext(ctx,
			"SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = $1)", name).Scan(&exists); err != nil {
			return "", fmt.Errorf("postgres state: looking for schema %q: %w", name, err)
		}
		if !exists {
			if _, err := conn.ExecContext(ctx, "CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{name}.Sanitize()); err != nil {
				return "", fmt.Errorf("postgres state: creating schema %q named by search_path: %w", name, err)
			}
		}
	}
	var current sql.NullString
	if err := conn.QueryRowContext(ctx, "SELECT current_schema()").Scan(&current); err != nil {
		return "", fmt.Errorf("postgres state: reading the current schema: %w", err)
	}
	if !current.Valid {
		return "", fmt.Errorf("postgres state: search_path %q names no existing schema to keep the state tables in", searchPath)
	}
	return current.String, nil
}

// firstSchema returns the first schema named in a search_path setting,
// skipping "$user": unquoted names are folded to lower case as PostgreSQL
// does, quoted ones are unquoted.
func firstSchema(searchPath string) (string, bool) {
	for _, item := range splitSearchPath(searchPath) {
		item = strings.TrimSpace(item)
		if item == "" || item == "$user" || item == `"$user"` {
			continue
		}
		if len(item) >= 2 && item[0] == '"' && item[len(item)-1] == '"' {
			return strings.ReplaceAll(item[1:len(item)-1], `""`, `"`), true
		}
		return strings.ToLower(item), true
	}
	return "", false
}

// splitSearchPath splits a search_path on the commas that are outside double
// quotes.
func splitSearchPath(s string) []string {
	var out []string
	inQuotes := false
	start := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '"':
			inQuotes = !inQuotes
		case ',':
			if !inQuotes {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	return append(out, s[start:])
}

// versionIn returns the highest schema version recorded in schema's version
// table (goose's own reading: max(version_id)), or 0 when the table does not
// exist yet.
func versionIn(ctx context.Context, conn *sql.Conn, schema string) (int64, error) {
	var exists bool
	err := conn.QueryRowContext(ctx,
		"SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_tables WHERE schemaname = $1 AND tablename = $2)",
		schema, schemaVersionTable).Scan(&exists)
	if err != nil {
		return 0, fmt.Errorf("postgres state: looking for the schema version table: %w", err)
	}
	if !exists {
		return 0, nil
	}
	var v int64
	q := "SELECT coalesce(max(version_id), 0) FROM " + pgx.Identifier{schema, schemaVersionTable}.Sanitize()
	if err := conn.QueryRowContext(ctx, q).Scan(&v); err != nil {
		return 0, fmt.Errorf("postgres state: reading the schema version: %w", err)
	}
	return v, nil
}

// SchemaVersion returns the highest migration version applied to the
// store's schema.
func (s *Store) SchemaVersion(ctx context.Context) (int64, error) {
	var v int64
	if err := s.pool.QueryRow(ctx, "SELECT coalesce(max(version_id), 0) FROM "+schemaVersionTable).Scan(&v); err != nil {
		return 0, fmt.Errorf("postgres state: reading the schema version: %w", err)
	}
	return v, nil
}
