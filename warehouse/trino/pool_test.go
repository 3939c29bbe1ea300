package trino_test

import (
	"testing"

	"github.com/gapless-dev/gapless/internal/trinotest"
)

// pooledCatalog returns the warehouse URL of an empty catalog that only t
// uses: one of the cluster's static test catalogs, lent by trinotest under
// a file lock shared with every other test process.
func pooledCatalog(t testing.TB) string {
	t.Helper()
	return trinotest.NewCatalog(t)
}
