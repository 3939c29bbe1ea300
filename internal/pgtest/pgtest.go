// Package pgtest gives tests a real PostgreSQL: its own database per test,
// so tests run in parallel and never see each other's objects.
//
// The server is GAPLESS_TEST_DATABASE_URL, or postgres://postgres@127.0.0.1:5432/postgres.
// When it cannot be reached, tests are skipped with the reason — except when
// CI=true, where they fail: CI must never pass by skipping.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// DefaultURL is used when GAPLESS_TEST_DATABASE_URL is not set.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// ServerURL returns the admin URL of the test server.
func ServerURL() string {
	if u := os.Getenv("GAPLESS_TEST_DATABASE_URL"); u != "" {
		return u
	}
	return DefaultURL
}

var (
	reachOnce sync.Once
	reachErr  error
)

// Require skips (or, under CI=true, fails) t when the server is unreachable.
func Require(t testing.TB) {
	t.Helper()
	reachOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, ServerURL())
		if err != nil {
			reachErr = err
			return
		}
		reachErr = conn.Ping(ctx)
		_ = conn.Close(ctx)
	})
	if reachErr == nil {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("PostgreSQL at %s is unreachable and CI=true: %v", redact(ServerURL()), reachErr)
	}
	t.Skipf("PostgreSQL at %s is unreachable, skipping (set GAPLESS_TEST_DATABASE_URL; under CI=true this fails): %v", redact(ServerURL()), reachErr)
}

// NewDatabase creates a fresh database for t and returns its URL. It is
// dropped (forcibly) when t ends.
func NewDatabase(t testing.TB) string {
	t.Helper()
	Require(t)
	return newDatabase(t, "")
}

// NewDatabaseFrom is NewDatabase for a database that starts as a copy of
// the template named by key, which prepare made from an empty database
// (typically by migrating it). The template is made once per key on the
// server and kept across test runs, so key must change whenever what
// prepare does changes: name it after a hash of the migrations it runs.
// key holds only lower-case letters, digits and '_'.
//
// Invariant: a test's database is only ever copied from a complete
// template. The template is made under a server-wide advisory lock, so
// parallel test processes never race; it is marked as a template (and
// closed to connections) only after prepare succeeded, and a database of
// that name that is not marked — left by a process that died while
// preparing it — is dropped and made again.
func NewDatabaseFrom(t testing.TB, key string, prepare func(ctx context.Context, url string) error) string {
	t.Helper()
	Require(t)
	name, err := template(key, prepare)
	if err != nil {
		t.Fatalf("preparing the template database for %s: %v", key, err)
	}
	return newDatabase(t, name)
}

// templateLockID is the key of the advisory lock held (in the server's
// admin database) while a template is checked or made: "gapless" then 0x7e.
const templateLockID int64 = 0x676170_6c657373_7e

var templates sync.Map // key -> *templateOnce

type templateOnce struct {
	once sync.Once
	name string
	err  error
}

// template returns the name of key's template database, making it first
// when the server has none. Within a process it runs once per key.
func template(key string, prepare func(ctx context.Context, url string) error) (string, error) {
	for _, r := range key {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '_' {
			return "", fmt.Errorf("template key %q: only a-z, 0-9 and _ are allowed", key)
		}
	}
	v, _ := templates.LoadOrStore(key, &templateOnce{name: "gapless_tmpl_" + key})
	o := v.(*templateOnce)
	o.once.Do(func() { o.err = makeTemplate(o.name, prepare) })
	return o.name, o.err
}

func makeTemplate(name string, prepare func(ctx context.Context, url string) error) (err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	admin, err := pgx.Connect(ctx, ServerURL())
	if err != nil {
		return fmt.Errorf("connecting to PostgreSQL: %w", err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "SELECT pg_advisory_lock($1)", templateLockID); err != nil {
		return fmt.Errorf("taking the template lock: %w", err)
	}
	defer func() {
		if _, uerr := admin.Exec(ctx, "SELECT pg_advisory_unlock($1)", templateLockID); uerr != nil && err == nil {
			err = fmt.Errorf("releasing the template lock: %w", uerr)
		}
	}()
	ident := pgx.Identifier{name}.Sanitize()
	var ready bool
	err = admin.QueryRow(ctx, "SELECT datistemplate FROM pg_database WHERE datname = $1", name).Scan(&ready)
	switch {
	case err == nil && ready:
		return nil
	case err == nil: // half made by a process that died: make it again
		if _, err := admin.Exec(ctx, "DROP DATABASE "+ident+" WITH (FORCE)"); err != nil {
			return fmt.Errorf("dropping the unfinished template %s: %w", name, err)
		}
	case !errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("looking for the template %s: %w", name, err)
	}
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+ident); err != nil {
		return fmt.Errorf("creating the template %s: %w", name, err)
	}
	u, err := url.Parse(ServerURL())
	if err != nil {
		return fmt.Errorf("parsing %s: %w", redact(ServerURL()), err)
	}
	u.Path = "/" + name
	if err := prepare(ctx, u.String()); err != nil {
		return err
	}
	// CREATE DATABASE ... TEMPLATE refuses a template anyone is connected
	// to: close it to connections, then end any session prepare left.
	if _, err := admin.Exec(ctx, "ALTER DATABASE "+ident+" WITH ALLOW_CONNECTIONS false"); err != nil {
		return fmt.Errorf("closing the template %s to connections: %w", name, err)
	}
	if _, err := admin.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1", name); err != nil {
		return fmt.Errorf("ending the sessions on the template %s: %w", name, err)
	}
	if _, err := admin.Exec(ctx, "ALTER DATABASE "+ident+" WITH IS_TEMPLATE true"); err != nil {
		return fmt.Errorf("marking %s as a template: %w", name, err)
	}
	return nil
}

// newDatabase creates a database copied from template ("" for the
// server's default), dropped when t ends, and returns its URL.
func newDatabase(t testing.TB, template string) string {
	t.Helper()
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatalf("random database name: %v", err)
	}
	name := "gapless_test_" + hex.EncodeToString(b)
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, ServerURL())
	if err != nil {
		t.Fatalf("connecting to PostgreSQL: %v", err)
	}
	defer admin.Close(ctx)
	create := "CREATE DATABASE " + pgx.Identifier{name}.Sanitize()
	if template != "" {
		create += " TEMPLATE " + pgx.Identifier{template}.Sanitize()
	}
	if _, err := admin.Exec(ctx, create); err != nil {
		t.Fatalf("creating test database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		admin, err := pgx.Connect(ctx, ServerURL())
		if err != nil {
			t.Errorf("connecting to drop %s: %v", name, err)
			return
		}
		defer admin.Close(ctx)
		if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			t.Errorf("dropping test database %s: %v", name, err)
		}
	})
	u, err := url.Parse(ServerURL())
	if err != nil {
		t.Fatalf("parsing %s: %v", redact(ServerURL()), err)
	}
	u.Path = "/" + name
	return u.String()
}

func redact(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

// Describe is for failure messages: the redacted server URL.
func Describe() string { return fmt.Sprintf("PostgreSQL at %s", redact(ServerURL())) }
