package duckdb

import (
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/warehouse"
)

// catalogSizes are the catalog sizes of BenchmarkCatalogLookup: 1,000
// tables, and 10,000 with GAPLESS_BENCH_LARGE=1.
func catalogSizes() []int {
	if os.Getenv("GAPLESS_BENCH_LARGE") == "1" {
		return []int{1000, 10000}
	}
	return []int{1000}
}

// exactLookupSQL is the alternative to tablesSQL measured by
// BenchmarkCatalogLookup: DuckDB's catalog functions, exact names.
const exactLookupSQL = `SELECT schema_name, table_name FROM duckdb_tables()
WHERE database_name = current_database() AND schema_name = $1 AND table_name = $2
UNION ALL SELECT schema_name, view_name FROM duckdb_views()
WHERE database_name = current_database() AND schema_name = $1 AND view_name = $2`

// BenchmarkCatalogLookup measures, in a catalog of N tables, one existence
// question four ways: TableExists (information_schema.tables), the same
// question to duckdb_tables()/duckdb_views() by exact name, binding the
// name in a query (the floor of a by-name lookup), and the listing of one
// schema that TablesExist reads once for any number of tables of that
// schema. The catalog functions scan every entry: their cost grows with N
// whichever way they are asked, which is why the create-tables stage asks
// once (TablesExist), not per model.
//
//	GAPLESS_BENCH_LARGE=1 go test -run '^$' -bench CatalogLookup ./warehouse/duckdb/
func BenchmarkCatalogLookup(b *testing.B) {
	for _, n := range catalogSizes() {
		e, err := Open(b.Context(), "", Options{})
		require.NoError(b, err)
		b.Cleanup(func() { require.NoError(b, e.Close()) })
		require.NoError(b, e.write(b.Context(), func(s *session) error {
			if _, err := s.exec(b.Context(), "CREATE SCHEMA s"); err != nil {
				return err
			}
			for i := range n {
				if _, err := s.exec(b.Context(), fmt.Sprintf("CREATE TABLE s.t%05d (x INTEGER)", i)); err != nil {
					return err
				}
			}
			return nil
		}))
		probe := warehouse.Table{Schema: "s", Name: fmt.Sprintf("t%05d", n/2)}
		b.Run(fmt.Sprintf("N=%d/TableExists", n), func(b *testing.B) {
			for b.Loop() {
				ok, err := e.TableExists(b.Context(), probe)
				require.NoError(b, err)
				require.True(b, ok)
			}
		})
		b.Run(fmt.Sprintf("N=%d/duckdb_tables_exact", n), func(b *testing.B) {
			for b.Loop() {
				require.NoError(b, e.read(b.Context(), func(s *session) error {
					res, err := s.query(b.Context(), exactLookupSQL, probe.Schema, probe.Name)
					if err == nil && len(res.Rows) != 1 {
						err = fmt.Errorf("%d rows", len(res.Rows))
					}
					return err
				}))
			}
		})
		b.Run(fmt.Sprintf("N=%d/bind_existing", n), func(b *testing.B) {
			// Not a full answer (a view that no longer binds exists too),
			// measured as the floor of a by-name lookup.
			q := "SELECT 1 FROM " + quoteIdent("memory") + "." + quoteTable(probe) + " LIMIT 0"
			for b.Loop() {
				require.NoError(b, e.read(b.Context(), func(s *session) error {
					_, err := s.query(b.Context(), q)
					return err
				}))
			}
		})
		b.Run(fmt.Sprintf("N=%d/TablesExist_one_schema", n), func(b *testing.B) {
			for b.Loop() {
				ok, err := e.TablesExist(b.Context(), []warehouse.Table{probe})
				require.NoError(b, err)
				require.True(b, ok[0])
			}
		})
	}
}
