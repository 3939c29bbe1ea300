package trino_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gapless-dev/gapless/internal/trinotest"
)

// catalogs is a pool of Iceberg catalogs the package's tests reuse: on
// this cluster CREATE CATALOG and the first query on it take 3 to 8
// seconds (the worker loads the catalog), while emptying a catalog
// (DROP SCHEMA ... CASCADE of each schema) takes about 100 ms a schema.
// A test takes a catalog no other running test holds, and gives it back
// empty; the pool's catalogs are dropped when the package's tests end.
// The pool holds at most maxCatalogs (GAPLESS_TEST_TRINO_CATALOGS, or 6):
// CREATE CATALOGs queue on the coordinator, and more of them at once
// only make each slower. A test waits for a free one.
var catalogs struct {
	mu    sync.Mutex
	free  []string // catalog names, empty
	all   []string
	admin *sql.DB // trinotest's, kept for TestMain
	once  sync.Once
	slots chan struct{} // one token per catalog a test may hold
}

// maxCatalogs is how many catalogs the pool makes at most.
func maxCatalogs() int {
	if n, err := strconv.Atoi(os.Getenv("GAPLESS_TEST_TRINO_CATALOGS")); err == nil && n > 0 {
		return n
	}
	return 6
}

// pooledCatalog returns the warehouse URL of an empty catalog that only t
// uses, emptied and returned to the pool when t ends.
func pooledCatalog(t testing.TB) string {
	t.Helper()
	admin := trinotest.Admin(t)
	catalogs.once.Do(func() { catalogs.slots = make(chan struct{}, maxCatalogs()) })
	select {
	case catalogs.slots <- struct{}{}:
	case <-t.Context().Done():
		t.Fatalf("waiting for a test catalog: %v", t.Context().Err())
	}
	catalogs.mu.Lock()
	catalogs.admin = admin
	var name string
	if n := len(catalogs.free); n > 0 {
		name, catalogs.free = catalogs.free[n-1], catalogs.free[:n-1]
	}
	catalogs.mu.Unlock()
	if name == "" {
		var err error
		if name, err = createCatalog(admin); err != nil {
			<-catalogs.slots
			t.Fatalf("creating a test catalog: %v", err)
		}
	}
	t.Cleanup(func() {
		defer func() { <-catalogs.slots }()
		if err := emptyCatalog(admin, name); err != nil {
			t.Errorf("emptying the test catalog %s (it is dropped instead): %v", name, err)
			dropCatalog(admin, name)
			return
		}
		catalogs.mu.Lock()
		catalogs.free = append(catalogs.free, name)
		catalogs.mu.Unlock()
	})
	return trinotest.ServerURL() + "/" + name
}

func createCatalog(admin *sql.DB) (string, error) {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	name := "gt_" + hex.EncodeToString(b[:])
	dir := filepath.Join(trinotest.LakeDir(), name)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	stmt := fmt.Sprintf(`CREATE CATALOG %s USING iceberg WITH ("iceberg.catalog.type" = 'TESTING_FILE_METASTORE', `+
		`"hive.metastore.catalog.dir" = '%s', "fs.hadoop.enabled" = 'true')`, name, "file://"+dir)
	if _, err := admin.ExecContext(ctx, stmt); err != nil {
		return "", err
	}
	catalogs.mu.Lock()
	catalogs.all = append(catalogs.all, name)
	catalogs.mu.Unlock()
	return name, nil
}

// emptyCatalog drops every schema of the catalog with what it holds.
func emptyCatalog(admin *sql.DB, name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rows, err := admin.QueryContext(ctx, "SELECT schema_name FROM "+name+".information_schema.schemata WHERE schema_name NOT IN ('information_schema', 'system')")
	if err != nil {
		return err
	}
	var schemas []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			rows.Close()
			return err
		}
		schemas = append(schemas, s)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, s := range schemas {
		stmt := "DROP SCHEMA " + name + `."` + strings.ReplaceAll(s, `"`, `""`) + `" CASCADE`
		if _, err := admin.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("%s: %w", stmt, err)
		}
	}
	return nil
}

func dropCatalog(admin *sql.DB, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, _ = admin.ExecContext(ctx, "DROP CATALOG IF EXISTS "+name)
	_ = os.RemoveAll(filepath.Join(trinotest.LakeDir(), name))
}

// dropPool drops every catalog of the pool (TestMain, after the tests).
func dropPool() {
	catalogs.mu.Lock()
	defer catalogs.mu.Unlock()
	for _, name := range catalogs.all {
		dropCatalog(catalogs.admin, name)
	}
	catalogs.all, catalogs.free = nil, nil
}
