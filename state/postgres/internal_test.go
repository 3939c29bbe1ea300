package postgres

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/state/internal/storekit"
)

func TestFirstSchemaOfSearchPath(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		path, want string
		ok         bool
	}{
		{`"$user", public`, "public", true},
		{`Gapless`, "gapless", true},
		{` "Blue Team" , public`, "Blue Team", true},
		{`"a,b", c`, "a,b", true},
		{`"say ""hi""", x`, `say "hi"`, true},
		{`$user`, "", false},
		{``, "", false},
	} {
		got, ok := firstSchema(tc.path)
		require.Equal(t, tc.ok, ok, tc.path)
		require.Equal(t, tc.want, got, tc.path)
	}
}

func TestDiffRangesRewritesOnlyWhatChanged(t *testing.T) {
	t.Parallel()
	r := func(a, b int64) storekit.RangeMicros { return storekit.RangeMicros{Start: a, End: b} }
	del, ins := diffRanges([]storekit.RangeMicros{r(0, 10), r(20, 30), r(40, 50)}, []storekit.RangeMicros{r(0, 10), r(20, 50)})
	require.Equal(t, []int64{20, 40}, del)
	require.Equal(t, []storekit.RangeMicros{r(20, 50)}, ins)
	del, ins = diffRanges(nil, nil)
	require.Empty(t, del)
	require.Empty(t, ins)
}

func TestNewestEmbeddedVersion(t *testing.T) {
	t.Parallel()
	v, err := newestEmbedded()
	require.NoError(t, err)
	require.Equal(t, int64(13), v) // 00013_gate.sql
	require.Equal(t, v, NewestSchemaVersion())
}
