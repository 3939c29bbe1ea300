package duckdb_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/gapless-dev/gapless/warehouse"
	"github.com/gapless-dev/gapless/warehouse/duckdb"
	"github.com/gapless-dev/gapless/warehouse/warehousetest"
)

// holderEnv makes the test binary a lock holder instead of running tests:
// it opens the database file named by the variable, prints "ready", and
// holds the file until it reads a line (or EOF) on stdin, then closes it
// and prints "released".
const holderEnv = "GAPLESS_DUCKDB_TEST_HOLD"

func TestMain(m *testing.M) {
	if path := os.Getenv(holderEnv); path != "" {
		os.Exit(holdFile(path))
	}
	goleak.VerifyTestMain(m)
}

func holdFile(path string) int {
	e, err := duckdb.Open(context.Background(), path, duckdb.Options{LockWait: -1})
	if err != nil {
		fmt.Fprintln(os.Stderr, "holder:", err)
		return 1
	}
	fmt.Println("ready")
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	if err := e.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "holder:", err)
		return 1
	}
	fmt.Println("released")
	return 0
}

func memoryEngine(t testing.TB) *duckdb.Engine {
	t.Helper()
	e, err := duckdb.Open(t.Context(), "", duckdb.Options{})
	require.NoError(t, err)
	return e
}

func fileEngine(t testing.TB) *duckdb.Engine {
	t.Helper()
	e, err := duckdb.Open(t.Context(), filepath.Join(t.TempDir(), "warehouse.duckdb"), duckdb.Options{})
	require.NoError(t, err)
	return e
}

// Scenario: the conformance suite, on an in-memory database per test.
func TestConformanceInMemory(t *testing.T) {
	t.Parallel()
	warehousetest.Run(t, func(t *testing.T) warehouse.Engine { return memoryEngine(t) })
}

// Scenario: the conformance suite, on a database file per test, as a
// project's warehouse.duckdb.
func TestConformanceFile(t *testing.T) {
	t.Parallel()
	warehousetest.Run(t, func(t *testing.T) warehouse.Engine { return fileEngine(t) })
}

func BenchmarkInMemory(b *testing.B) {
	warehousetest.RunBenchmarks(b, func(b *testing.B) warehouse.Engine { return memoryEngine(b) })
}

func BenchmarkFile(b *testing.B) {
	warehousetest.RunBenchmarks(b, func(b *testing.B) warehouse.Engine { return fileEngine(b) })
}
