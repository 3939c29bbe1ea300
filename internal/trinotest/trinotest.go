// Package trinotest gives tests a real Trino cluster (a coordinator and a
// worker, started by `make services`): its own Iceberg catalog per test, so
// tests run in parallel and never see each other's schemas or tables.
//
// The cluster is GAPLESS_TEST_TRINO_URL, or trino://gapless@127.0.0.1:8080.
// A test's catalog keeps its files under GAPLESS_TEST_TRINO_LAKE, or the
// lake folder of scripts/services ($HOME/.cache/gapless/trino/lake), which
// every node of the cluster reads and writes. When the cluster cannot be
// reached, tests are skipped with the reason, except when CI=true, where
// they fail: CI must never pass by skipping.
package trinotest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	trinoclient "github.com/trinodb/trino-go-client/trino"
)

// DefaultURL is used when GAPLESS_TEST_TRINO_URL is not set.
const DefaultURL = "trino://gapless@127.0.0.1:8080"

// ServerURL returns the cluster's URL, without a catalog.
func ServerURL() string {
	if u := os.Getenv("GAPLESS_TEST_TRINO_URL"); u != "" {
		return strings.TrimRight(u, "/")
	}
	return DefaultURL
}

// LakeDir returns the folder under which each test catalog keeps its files.
func LakeDir() string {
	if d := os.Getenv("GAPLESS_TEST_TRINO_LAKE"); d != "" {
		return d
	}
	home, err := os.UserHomeDir()
	if err != nil {
		home = os.TempDir()
	}
	return filepath.Join(home, ".cache", "gapless", "trino", "lake")
}

// DriverDSN turns a trino:// URL (trino://user@host:port[/catalog]) into the
// http:// DSN the Go client takes, with the catalog as a parameter.
func DriverDSN(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("parsing the Trino URL: %w", err)
	}
	if u.Scheme != "trino" {
		return "", fmt.Errorf("the Trino URL %s does not start with trino://", raw)
	}
	q := u.Query()
	if c := strings.Trim(u.Path, "/"); c != "" {
		q.Set("catalog", c)
	}
	d := url.URL{Scheme: "http", User: u.User, Host: u.Host, RawQuery: q.Encode()}
	return d.String(), nil
}

var (
	reachOnce sync.Once
	reachErr  error
)

// openDB opens a pool on the cluster with an HTTP transport of its own;
// closing it with closeDB leaves no goroutine behind (goleak-clean).
func openDB(raw string) (*sql.DB, func() error, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, nil, fmt.Errorf("parsing the Trino URL: %w", err)
	}
	server := url.URL{Scheme: "http", User: u.User, Host: u.Host}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	connector, err := trinoclient.NewConnector(&trinoclient.Config{
		ServerURI: server.String(), Source: "gapless-tests", TimeZone: "UTC",
		HTTPClient: &http.Client{Transport: transport},
	})
	if err != nil {
		return nil, nil, err
	}
	db := sql.OpenDB(connector)
	return db, func() error {
		err := db.Close()
		transport.CloseIdleConnections()
		return err
	}, nil
}

// Require skips (or, under CI=true, fails) t when the cluster is
// unreachable or has fewer than two active nodes.
func Require(t testing.TB) {
	t.Helper()
	reachOnce.Do(func() {
		dsn, err := DriverDSN(ServerURL())
		if err != nil {
			reachErr = err
			return
		}
		// A plain HTTP probe first: the driver retries a refused
		// connection for a long time, the probe answers at once.
		if reachErr = probe(dsn); reachErr != nil {
			return
		}
		db, closeDB, err := openDB(ServerURL())
		if err != nil {
			reachErr = err
			return
		}
		defer func() { _ = closeDB() }()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		var n int
		if err := db.QueryRowContext(ctx, "SELECT count(*) FROM system.runtime.nodes WHERE state = 'active'").Scan(&n); err != nil {
			reachErr = err
			return
		}
		if n < 2 {
			reachErr = fmt.Errorf("%d active node(s), want a coordinator and a worker", n)
		}
	})
	if reachErr == nil {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("Trino at %s is unreachable and CI=true (run make services): %v", ServerURL(), reachErr)
	}
	t.Skipf("Trino at %s is unreachable, skipping (run make services, or set GAPLESS_TEST_TRINO_URL; under CI=true this fails): %v", ServerURL(), reachErr)
}

// probe asks the coordinator's /v1/info, which answers without a query,
// and fails unless it has finished starting.
func probe(dsn string) error {
	u, err := url.Parse(dsn)
	if err != nil {
		return err
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	defer transport.CloseIdleConnections()
	client := http.Client{Timeout: 5 * time.Second, Transport: transport}
	resp, err := client.Get(u.Scheme + "://" + u.Host + "/v1/info")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var info struct {
		Starting bool `json:"starting"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&info); err != nil {
		return fmt.Errorf("reading /v1/info: %w", err)
	}
	if info.Starting {
		return fmt.Errorf("the coordinator is still starting")
	}
	return nil
}

// Admin returns a connection pool on the cluster with no catalog, for a
// test's own checks (system.runtime tables, another catalog's tables); it
// is closed when t ends.
func Admin(t testing.TB) *sql.DB {
	t.Helper()
	Require(t)
	db, closeDB, err := openDB(ServerURL())
	if err != nil {
		t.Fatalf("opening a connection to Trino: %v", err)
	}
	t.Cleanup(func() {
		if err := closeDB(); err != nil {
			t.Errorf("closing the connection to Trino: %v", err)
		}
	})
	return db
}

// NewCatalog creates a fresh Iceberg catalog for t, its files in a folder
// of its own under LakeDir, and returns the warehouse URL that names it
// (trino://user@host:port/<catalog>). The catalog is dropped and its files
// removed when t ends.
func NewCatalog(t testing.TB) string {
	t.Helper()
	Require(t)
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatalf("random catalog name: %v", err)
	}
	name := "gt_" + hex.EncodeToString(b[:])
	admin := Admin(t)
	dir := filepath.Join(LakeDir(), name)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stmt := fmt.Sprintf(`CREATE CATALOG %s USING iceberg WITH ("iceberg.catalog.type" = 'TESTING_FILE_METASTORE', `+
		`"hive.metastore.catalog.dir" = '%s', "fs.hadoop.enabled" = 'true')`, name, "file://"+dir)
	if _, err := admin.ExecContext(ctx, stmt); err != nil {
		t.Fatalf("creating the test catalog %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := admin.ExecContext(ctx, "DROP CATALOG IF EXISTS "+name); err != nil {
			t.Errorf("dropping the test catalog %s: %v", name, err)
		}
		if err := os.RemoveAll(dir); err != nil {
			t.Errorf("removing the test catalog's files %s: %v", dir, err)
		}
	})
	return ServerURL() + "/" + name
}
