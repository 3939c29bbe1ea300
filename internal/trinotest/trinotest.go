// Package trinotest gives tests a real Trino cluster (a coordinator and a
// worker, started by `make services`): an Iceberg catalog lent to one test
// at a time, emptied, so tests run in parallel (in one process or several)
// and never see each other's schemas or tables.
//
// The cluster is GAPLESS_TEST_TRINO_URL, or trino://gapless@127.0.0.1:8080.
// Its test catalogs (gapless_test_0, ...) keep their files under the lake
// folder of scripts/services, GAPLESS_TEST_TRINO_LAKE or
// $HOME/.cache/gapless/trino/lake, which holds the catalogs' lock files too. When the cluster cannot be
// reached, tests are skipped with the reason, except when CI=true, where
// they fail: CI must never pass by skipping.
package trinotest

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
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
	defer func() { _ = resp.Body.Close() }()
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

// Pool catalogs are named PoolPrefix and a number: scripts/services
// configures them statically on both nodes (a catalog created at run time
// would load the Iceberg plugin's classes again, for seconds and hundreds
// of MB of memory on each node that are never given back).
const PoolPrefix = "gapless_test_"

var (
	poolOnce sync.Once
	poolErr  error
	pool     []string
)

// poolCatalogs lists the cluster's test catalogs, once per process.
func poolCatalogs(db *sql.DB) ([]string, error) {
	poolOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		rows, err := db.QueryContext(ctx, "SELECT catalog_name FROM system.metadata.catalogs WHERE catalog_name LIKE 'gapless\\_test\\_%' ESCAPE '\\' ORDER BY 1")
		if err != nil {
			poolErr = fmt.Errorf("listing the test catalogs: %w", err)
			return
		}
		defer rows.Close()
		for rows.Next() {
			var name string
			if err := rows.Scan(&name); err != nil {
				poolErr = err
				return
			}
			pool = append(pool, name)
		}
		if poolErr = rows.Err(); poolErr == nil && len(pool) == 0 {
			poolErr = fmt.Errorf("the cluster has no test catalogs (%s0, ...): run make services", PoolPrefix)
		}
	})
	return pool, poolErr
}

// NewCatalog lends t one of the cluster's test catalogs, emptied, and
// returns the warehouse URL that names it
// (trino://user@host:port/<catalog>). No other test, in this process or
// another, holds it meanwhile: each catalog is guarded by an exclusive
// file lock under LakeDir()/.locks, which the kernel releases when the
// process ends, however it ends. A test waits (in flock, not in a sleep)
// while every catalog is lent. The catalog is emptied (every schema
// dropped with what it holds) when it is taken, so whatever the previous
// holder left, a test killed mid-way included, is gone before t sees it.
func NewCatalog(t testing.TB) string {
	t.Helper()
	admin := Admin(t)
	names, err := poolCatalogs(admin)
	if err != nil {
		t.Fatalf("Trino at %s: %v", ServerURL(), err)
	}
	lockDir := filepath.Join(LakeDir(), ".locks")
	if err := os.MkdirAll(lockDir, 0o755); err != nil {
		t.Fatalf("creating the test catalogs' lock folder: %v", err)
	}
	name, unlock, err := lockOne(lockDir, names, t.Name())
	if err != nil {
		t.Fatalf("taking a test catalog: %v", err)
	}
	if err := emptyCatalog(admin, name); err != nil {
		unlock()
		t.Fatalf("emptying the test catalog %s: %v", name, err)
	}
	t.Cleanup(unlock)
	return ServerURL() + "/" + name
}

// held counts the catalogs this process's tests hold, so that a test that
// must wait waits on a catalog another process holds (which its tests
// will give back) rather than on one a test of its own may hold for long.
var held struct {
	sync.Mutex
	n map[string]int
}

// lockOne takes the file lock of a free catalog of names without waiting;
// when every one is held it waits for one chosen by key, preferring those
// held by other processes. The returned func releases it.
func lockOne(dir string, names []string, key string) (string, func(), error) {
	open := func(name string) (*os.File, error) {
		return os.OpenFile(filepath.Join(dir, name+".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	}
	taken := func(name string, f *os.File) (string, func(), error) {
		held.Lock()
		if held.n == nil {
			held.n = map[string]int{}
		}
		held.n[name]++
		held.Unlock()
		return name, func() {
			held.Lock()
			held.n[name]--
			held.Unlock()
			_ = f.Close()
		}, nil
	}
	for _, name := range names {
		f, err := open(name)
		if err != nil {
			return "", nil, err
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err == nil {
			return taken(name, f)
		}
		_ = f.Close()
	}
	candidates := names
	held.Lock()
	var elsewhere []string
	for _, name := range names {
		if held.n[name] == 0 {
			elsewhere = append(elsewhere, name)
		}
	}
	held.Unlock()
	if len(elsewhere) > 0 {
		candidates = elsewhere
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	name := candidates[int(h.Sum32()%uint32(len(candidates)))]
	f, err := open(name)
	if err != nil {
		return "", nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		_ = f.Close()
		return "", nil, fmt.Errorf("locking %s: %w", name, err)
	}
	return taken(name, f)
}

// emptyCatalog drops every schema of catalog name with what it holds.
func emptyCatalog(admin *sql.DB, name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	schemas, err := listSchemas(ctx, admin, name)
	if err != nil {
		return err
	}
	for _, s := range schemas {
		q := name + `."` + strings.ReplaceAll(s, `"`, `""`) + `"`
		if _, err := admin.ExecContext(ctx, "DROP SCHEMA IF EXISTS "+q+" CASCADE"); err != nil {
			return fmt.Errorf("dropping schema %s: %w", q, err)
		}
	}
	return nil
}

// listSchemas lists the schemas tests made in catalog name.
func listSchemas(ctx context.Context, admin *sql.DB, name string) ([]string, error) {
	rows, err := admin.QueryContext(ctx, "SELECT schema_name FROM "+name+".information_schema.schemata WHERE schema_name NOT IN ('information_schema', 'system')")
	if err != nil {
		return nil, err
	}
	defer func() { _ = rows.Close() }()
	var schemas []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		schemas = append(schemas, s)
	}
	return schemas, rows.Err()
}
