package snapshot_test

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/model"
	"github.com/gapless-dev/gapless/snapshot"
)

// Scenario: names up to 63 bytes are generated as they always were, so an
// existing deployment finds its tables again; a 64-byte name is shortened to
// exactly 63 bytes: its first 52 bytes, "_" and 10 hex digits of the
// SHA-256 of the whole name.
func TestFitIdentBoundary(t *testing.T) {
	t.Parallel()
	require.Equal(t, 63, snapshot.MaxIdentBytes)
	for _, n := range []int{1, 10, 62, 63} {
		name := strings.Repeat("a", n)
		require.Equal(t, name, snapshot.FitIdent(name), "%d bytes", n)
	}
	require.Equal(t, "gapless__demo", snapshot.FitIdent("gapless__demo"))

	name := strings.Repeat("a", 64)
	sum := sha256.Sum256([]byte(name))
	got := snapshot.FitIdent(name)
	require.Equal(t, strings.Repeat("a", 52)+"_"+hex.EncodeToString(sum[:])[:10], got)
	require.Len(t, got, 63)

	for _, n := range []int{65, 100, 1000} {
		got := snapshot.FitIdent(strings.Repeat("b", n))
		require.Len(t, got, 63, "%d bytes", n)
		require.True(t, strings.HasPrefix(got, strings.Repeat("b", 52)+"_"), got)
	}
}

// Scenario: a name of multi-byte UTF-8 characters is measured in bytes, as
// PostgreSQL measures it: 32 two-byte characters (64 bytes, 32 characters)
// are too long, 31 of them (62 bytes) are not; the shortened name never cuts
// a character in half and stays valid UTF-8 within 63 bytes.
func TestFitIdentCountsBytesAndKeepsUTF8Whole(t *testing.T) {
	t.Parallel()
	fits := strings.Repeat("é", 31)
	require.Equal(t, fits, snapshot.FitIdent(fits))

	for _, name := range []string{
		strings.Repeat("é", 32),             // 2-byte characters; byte 52 starts one
		"a" + strings.Repeat("é", 40),       // byte 52 is the middle of one
		strings.Repeat("表", 30),             // 3-byte characters
		"ab" + strings.Repeat("😀", 20),      // 4-byte characters, cut mid-character
		"x" + strings.Repeat("\x80", 80),    // invalid UTF-8: still within the limit
		"sales__" + strings.Repeat("ü", 40), // a schema and environment
	} {
		got := snapshot.FitIdent(name)
		require.NotEqual(t, name, got)
		require.LessOrEqual(t, len(got), snapshot.MaxIdentBytes, "%q", name)
		require.GreaterOrEqual(t, len(got), snapshot.MaxIdentBytes-3, "%q: the prefix keeps all it can", name)
		prefix := got[:len(got)-11]
		require.True(t, strings.HasPrefix(name, prefix), "%q is a prefix of the name", prefix)
		if utf8.ValidString(name) {
			require.True(t, utf8.ValidString(got), "%q", got)
		}
	}
}

// Scenario: two versions of one long model name share a long prefix and
// differ only at the end, where the truncation cuts; their shortened names
// still differ (by the hash), as do those of many such names, while each
// name always shortens to the same thing.
func TestFitIdentUniqueAndStable(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("s", 40) + "__" + strings.Repeat("t", 40) + "__"
	a, b := snapshot.FitIdent(long+"0a75ef4600000001"), snapshot.FitIdent(long+"0a75ef4600000002")
	require.NotEqual(t, a, b)
	require.Equal(t, a[:52], b[:52], "they share the readable prefix")

	seen := map[string]string{}
	for i := range 5000 {
		name := long + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + strings.Repeat("y", i)
		got := snapshot.FitIdent(name)
		if prev, ok := seen[got]; ok {
			require.Equal(t, prev, name, "two names shortened to %s", got)
		}
		seen[got] = name
		require.Equal(t, got, snapshot.FitIdent(name), "stable")
	}

	// Pinned: the result must never change between releases, or deployed
	// tables would be lost.
	require.Equal(t, "gapless__sssssssssssssssssssssssssssssssssssssssssss_b8068c03a9",
		snapshot.FitIdent("gapless__"+strings.Repeat("s", 63)))
}

// Scenario: a snapshot of a model whose schema and table are each at the
// 63-byte limit gets a physical schema and table within 63 bytes; two
// versions get two tables, a short model keeps its historical names.
func TestPhysicalNamesFit(t *testing.T) {
	t.Parallel()
	schema, table := strings.Repeat("s", 63), strings.Repeat("t", 63)
	m := &model.Model{Name: schema + "." + table}
	v1 := &snapshot.Snapshot{Name: m.Name, Model: m, Version: "0a75ef46a1b2c3d4"}
	v2 := &snapshot.Snapshot{Name: m.Name, Model: m, Version: "0a75ef46a1b2c3d5"}
	require.LessOrEqual(t, len(v1.PhysicalSchema()), 63)
	require.LessOrEqual(t, len(v1.PhysicalTable()), 63)
	require.True(t, strings.HasPrefix(v1.PhysicalSchema(), "gapless__sss"), v1.PhysicalSchema())
	require.True(t, strings.HasPrefix(v1.PhysicalTable(), schema[:52]), v1.PhysicalTable())
	require.Equal(t, v1.PhysicalSchema(), v2.PhysicalSchema())
	require.NotEqual(t, v1.PhysicalTable(), v2.PhysicalTable())

	short := &snapshot.Snapshot{Name: "demo.events", Model: &model.Model{Name: "demo.events"}, Version: "0a75ef46a1b2c3d4"}
	require.Equal(t, "gapless__demo", short.PhysicalSchema())
	require.Equal(t, "demo__events__0a75ef46a1b2c3d4", short.PhysicalTable())
}

// The environment-name rule, beside the naming it protects: a valid name
// gives a view schema no model schema or other environment can produce,
// and every other name is refused with an *EnvironmentNameError.
func TestEnvironmentNames(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"prod", "dev", "dev_2", "a", "feature_x1"} {
		require.NoError(t, snapshot.CheckEnvironmentName(ok), ok)
	}
	for _, bad := range []string{"", "Prod", "2dev", "_dev", "dev__x", "dev-x", "dév"} {
		err := snapshot.CheckEnvironmentName(bad)
		var ne *snapshot.EnvironmentNameError
		require.ErrorAs(t, err, &ne, "%q", bad)
		require.Equal(t, bad, ne.Name)
		require.EqualError(t, err, `bad environment name "`+bad+`": use lower-case letters, digits and single underscores, starting with a letter`)
	}
	require.Equal(t, "demo", snapshot.EnvironmentSchema("demo", snapshot.Prod))
	require.Equal(t, "demo", snapshot.EnvironmentSchema("demo", ""))
	require.Equal(t, "demo__dev", snapshot.EnvironmentSchema("demo", "dev"))
	long := strings.Repeat("e", 70)
	require.Equal(t, snapshot.FitIdent("demo__"+long), snapshot.EnvironmentSchema("demo", long))
}
