package duckdb_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/warehouse"
	"github.com/gapless-dev/gapless/warehouse/duckdb"
)

// FuzzIdentifier checks that any string is either refused as a name (empty,
// NUL, invalid UTF-8) or works as a schema, table and column name exactly,
// and never reaches another object.
func FuzzIdentifier(f *testing.F) {
	for _, seed := range []string{
		"plain", "select", "données", "表", `evil"; DROP TABLE "canary"."x"; --`, `"`, `""`, "a.b",
		"with space", "x", "canary", "-- c", "/* c", "$1", "?", "'", "\\", "\n", "MixedCase", "",
		"a\x00b", "\xff", strings.Repeat("long", 100),
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, name string) {
		ctx := context.Background()
		e, err := duckdb.Open(ctx, "", duckdb.Options{})
		require.NoError(t, err)
		defer e.Close()
		canary := warehouse.Table{Schema: "canary", Name: "x"}
		require.NoError(t, e.CreateSchema(ctx, canary.Schema))
		require.NoError(t, e.CreateTableAs(ctx, warehouse.CreateTableAsParams{Table: canary, Query: "SELECT 1 AS alive", WithData: true}))

		tbl := warehouse.Table{Schema: name, Name: name}
		err = e.CreateSchema(ctx, name)
		valid := name != "" && utf8.ValidString(name) && !strings.ContainsRune(name, 0)
		if !valid {
			var we *warehouse.Error
			require.True(t, errors.As(err, &we), "invalid name %q accepted: %v", name, err)
			return
		}
		require.NoError(t, err)
		err = e.CreateTable(ctx, warehouse.CreateTableParams{Table: tbl, Columns: []warehouse.Column{{Name: name, Type: "BIGINT"}}})
		require.NoError(t, err, "name %q", name)
		cols, err := e.Columns(ctx, tbl)
		require.NoError(t, err)
		require.Equal(t, []warehouse.Column{{Name: name, Type: "BIGINT"}}, cols)
		n, err := e.InsertRows(ctx, warehouse.InsertRowsParams{Table: tbl, Columns: []string{name}, Rows: [][]any{{int64(7)}}})
		require.NoError(t, err)
		require.Equal(t, int64(1), n)
		res, err := e.Query(ctx, "SELECT "+e.QuoteIdent(name)+" FROM "+e.QuoteTable(tbl))
		require.NoError(t, err)
		require.Equal(t, [][]any{{int64(7)}}, res.Rows)
		require.NoError(t, e.DropTable(ctx, tbl))

		res, err = e.Query(ctx, "SELECT alive FROM "+e.QuoteTable(canary))
		require.NoError(t, err)
		require.Equal(t, [][]any{{int32(1)}}, res.Rows)
	})
}
