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
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
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
