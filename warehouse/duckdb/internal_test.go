package duckdb

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCheckType(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{
		"BIGINT", "double precision", "DECIMAL(12,2)", "NUMERIC(12, 2)", "TIMESTAMP WITH TIME ZONE",
		"VARCHAR[]", "INTEGER[3]", `STRUCT("x y" INTEGER, z VARCHAR)`, "MAP(VARCHAR, INTEGER)",
		"ENUM('p', 'q;r')", `STRUCT("a""b" INTEGER)`, "ENUM('it''s')", "main.my_type", "timestamp(3) with time zone",
	} {
		require.NoError(t, checkType(ok), ok)
	}
	for _, bad := range []string{
		"", " ", "BIGINT); DROP TABLE x; --", "BIGINT; DROP TABLE x", "BIGINT -- c", "BIGINT /* c */",
		"BIGINT, y TEXT", "DECIMAL(12,2", "DECIMAL12,2)", "INTEGER[3)", "ENUM('open", `STRUCT("open INTEGER)`,
		"INTEGER CHECK (x > 0)", "INTEGER DEFAULT 1 + 1", "BIGINT\x00", "BIG\xffINT", "INTEGER := 1",
	} {
		require.Error(t, checkType(bad), bad)
	}
}

func TestBody(t *testing.T) {
	t.Parallel()
	require.Equal(t, "SELECT 1", body("SELECT 1;\n"))
	require.Equal(t, "SELECT 1", body("SELECT 1 ; ;  \t\r\n"))
	require.Equal(t, "SELECT 1 -- c", body("SELECT 1 -- c"))
	require.Equal(t, "SELECT ';'", body("SELECT ';'"))
}

func TestASCIIFoldEqual(t *testing.T) {
	t.Parallel()
	require.True(t, asciiFoldEqual("Events", "eVENTS"))
	require.True(t, asciiFoldEqual("données", "DONNéES"))
	require.False(t, asciiFoldEqual("É", "é"))
	require.False(t, asciiFoldEqual("a", "ab"))
	require.False(t, asciiFoldEqual("a[", "a{"))
}

func TestCheckIdent(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"a", "select", `"`, "表", "with space", `evil"; DROP TABLE x; --`} {
		require.NoError(t, checkIdent("table", ok), ok)
	}
	for _, bad := range []string{"", "a\x00", "\xff"} {
		require.ErrorIs(t, checkIdent("table", bad), errInvalid, bad)
	}
}
