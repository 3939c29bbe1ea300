package suggest_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/model/suggest"
)

func TestDistance(t *testing.T) {
	t.Parallel()
	tests := []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"abc", "", 3},
		{"", "abc", 3},
		{"name", "NAME", 0},
		{"intervl_unit", "interval_unit", 1},
		{"naem", "name", 1}, // a transposition counts once
		{"kitten", "sitting", 3},
		{"über", "uber", 1}, // runes, not bytes
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, suggest.Distance(tt.a, tt.b), "%q vs %q", tt.a, tt.b)
		require.Equal(t, tt.want, suggest.Distance(tt.b, tt.a), "%q vs %q", tt.b, tt.a)
	}
}

func TestClosest(t *testing.T) {
	t.Parallel()
	words := []string{"name", "kind", "cron", "interval_unit", "start", "end"}
	got, ok := suggest.Closest("intervl_unit", words)
	require.True(t, ok)
	require.Equal(t, "interval_unit", got)

	got, ok = suggest.Closest("crn", words)
	require.True(t, ok)
	require.Equal(t, "cron", got)

	got, ok = suggest.Closest("interv", words)
	require.True(t, ok, "a truncated word is completed")
	require.Equal(t, "interval_unit", got)

	_, ok = suggest.Closest("frobnicate", words)
	require.False(t, ok, "nothing is close")

	_, ok = suggest.Closest("NAME", words)
	require.False(t, ok, "an exact match is not a suggestion")

	_, ok = suggest.Closest("x", nil)
	require.False(t, ok)
}

func FuzzDistance(f *testing.F) {
	f.Add("kitten", "sitting")
	f.Add("\xff\xfe", "ü")
	f.Fuzz(func(t *testing.T, a, b string) {
		d := suggest.Distance(a, b)
		require.GreaterOrEqual(t, d, 0)
		require.Equal(t, d, suggest.Distance(b, a))
		require.LessOrEqual(t, d, max(len([]rune(a)), len([]rune(b))))
	})
}
