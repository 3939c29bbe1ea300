package bot

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/codehost"
)

func TestClipKeepsTextWithinTheCodeHostsLimitInBytes(t *testing.T) {
	t.Parallel()
	// Scenario: a plan preview of 70,000 bytes of multi-byte characters
	// (GitHub counts a check run's summary in bytes) is cut below the
	// limit, at a character boundary, with a note; a short one is kept.
	long := strings.Repeat("é", 35_000)
	got := clip(long)
	require.LessOrEqual(t, len(got), codehost.MaxBodyLength)
	require.True(t, utf8.ValidString(got))
	require.Contains(t, got, "truncated")
	require.Equal(t, "short", clip("short"))
	exact := strings.Repeat("a", codehost.MaxBodyLength)
	require.Equal(t, exact, clip(exact))
}
