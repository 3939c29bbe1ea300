package janitor

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/state"
)

func TestRetainUnserved(t *testing.T) {
	// Scenario: the janitor at day 10 with a snapshot_ttl of 7 days. a@v1
	// stopped being served on day 2 (expired on day 9: dropped); b@v1 on
	// day 5 (kept until day 12); c@v1 was never served, only built by a
	// plan refused on day 4 (kept until day 11); d@v1 stopped on day 1 but
	// a plan referenced it on day 6 (kept until day 13); e@v1 is served
	// and f@v1 is referenced by a plan in flight (neither listed); g@v1 has
	// no recorded use at all (dropped); h@v1 stopped exactly 7 days ago
	// (dropped: the TTL has passed at its end). Two uses of b@v1 merge.
	t.Parallel()
	day := func(n int) time.Time { return time.Date(2024, 1, n, 0, 0, 0, 0, time.UTC) }
	k := func(name string) state.VersionKey { return state.VersionKey{Name: name, Version: "v1"} }
	uses := []VersionUse{
		{Key: k("m.a"), LastServed: day(2)},
		{Key: k("m.b"), LastServed: day(5)},
		{Key: k("m.b"), LastPlanned: day(3)},
		{Key: k("m.c"), LastPlanned: day(4)},
		{Key: k("m.d"), LastServed: day(1), LastPlanned: day(6)},
		{Key: k("m.e"), Served: true, LastServed: day(1)},
		{Key: k("m.f"), LastServed: day(1)},
		{Key: k("m.f"), InFlight: true},
		{Key: k("m.g")},
		{Key: k("m.h"), LastServed: day(3)},
	}
	week := 7 * 24 * time.Hour
	drop, keep := RetainUnserved(uses, week, day(10))
	require.Equal(t, []state.VersionKey{k("m.a"), k("m.g"), k("m.h")}, drop)
	require.Equal(t, []Retained{
		{Key: k("m.b"), UnusedSince: day(5), ExpiresAt: day(12)},
		{Key: k("m.c"), UnusedSince: day(4), ExpiresAt: day(11)},
		{Key: k("m.d"), UnusedSince: day(6), ExpiresAt: day(13)},
	}, keep)

	// A TTL of 0 drops every unused version at once; Forever keeps them
	// all but the one with no recorded use.
	drop, keep = RetainUnserved(uses, 0, day(10))
	require.Equal(t, []state.VersionKey{k("m.a"), k("m.b"), k("m.c"), k("m.d"), k("m.g"), k("m.h")}, drop)
	require.Empty(t, keep)
	drop, keep = RetainUnserved(uses, Forever, day(10))
	require.Equal(t, []state.VersionKey{k("m.g")}, drop)
	require.Len(t, keep, 5)
	for _, r := range keep {
		require.True(t, r.ExpiresAt.IsZero(), "%+v: never expires", r)
	}
}
