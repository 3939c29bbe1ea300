package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"

	"github.com/pressly/goose/v3"

	"github.com/gapless-dev/gapless/state"
)

// migrationFiles are the schema's versioned migrations, embedded in the
// binary: NNNNN_name.sql files in goose's format. Append new files; never
// edit one that has shipped.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

// versionTable is goose's bookkeeping table in the state file.
const versionTable = "gapless_schema_migrations"

// newProvider returns a goose provider over the embedded migrations.
func newProvider(db *sql.DB) (*goose.Provider, error) {
	sub, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		return nil, fmt.Errorf("embedded migrations: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectSQLite3, db, sub,
		goose.WithTableName(versionTable),
		goose.WithDisableGlobalRegistry(true),
		goose.WithLogger(goose.NopLogger()),
	)
	if err != nil {
		return nil, fmt.Errorf("goose provider: %w", err)
	}
	return p, nil
}

// newestVersion is the version of the last embedded migration.
func newestVersion(p *goose.Provider) int64 {
	src := p.ListSources()
	return src[len(src)-1].Version // goose refuses an empty set of migrations
}

// migrate brings the schema to the newest embedded version.
//
// Invariants:
//   - a database whose version is newer than the newest embedded migration
//     is refused with state.ErrSchemaTooNew before anything is written;
//   - an up-to-date database is only read;
//   - several processes may migrate one file at once: each migration runs in
//     its own BEGIN IMMEDIATE transaction together with its version row, so
//     a process that lost the race fails that transaction atomically (the
//     tables already exist) and retries from the version the winner left.
//     It retries only while the version keeps advancing, so it terminates.
func migrate(ctx context.Context, db *sql.DB) error {
	p, err := newProvider(db)
	if err != nil {
		return err
	}
	newest := newestVersion(p)
	current, err := currentVersion(ctx, db)
	if err != nil {
		return err
	}
	for {
		if current > newest {
			return fmt.Errorf("%w: the state file is at schema version %d, this gapless knows versions up to %d; upgrade gapless", state.ErrSchemaTooNew, current, newest)
		}
		if current == newest {
			return nil
		}
		_, upErr := p.Up(ctx)
		after, err := currentVersion(ctx, db)
		if err != nil {
			return errors.Join(upErr, err)
		}
		if upErr == nil && after == newest {
			return nil
		}
		if after <= current {
			if upErr == nil {
				upErr = fmt.Errorf("migrations ran but the schema is at version %d, not %d", after, newest)
			}
			return fmt.Errorf("migrating the schema from version %d to %d: %w", current, newest, upErr)
		}
		current = after // someone (we or another process) made progress
	}
}

// currentVersion reads the schema version without creating anything: 0 for a
// database goose has never touched.
func currentVersion(ctx context.Context, q querier) (int64, error) {
	var exists bool
	err := q.QueryRowContext(ctx,
		`SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?)`, versionTable,
	).Scan(&exists)
	if err != nil {
		return 0, fmt.Errorf("reading the schema version: %w", err)
	}
	if !exists {
		return 0, nil
	}
	var v sql.NullInt64
	if err := q.QueryRowContext(ctx, `SELECT MAX(version_id) FROM `+versionTable).Scan(&v); err != nil {
		return 0, fmt.Errorf("reading the schema version: %w", err)
	}
	return v.Int64, nil
}

// SchemaVersion returns the schema version the file is migrated to.
func (s *Store) SchemaVersion(ctx context.Context) (int64, error) {
	v, err := currentVersion(ctx, s.db)
	if err != nil {
		return 0, fmt.Errorf("sqlite: %w", err)
	}
	return v, nil
}
