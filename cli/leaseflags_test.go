package cli

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Scenario: plan and apply take the lock policy's lease options;
// --lease-ttl must be positive and --lease-wait not negative, else the
// command exits 2 naming the flag, before it reads anything.
func TestLeaseFlagsUsage(t *testing.T) {
	t.Parallel()
	dir := initProject(t)
	for _, args := range [][]string{
		{"plan", "--lease-ttl", "0s"},
		{"plan", "--lease-wait", "-1s"},
		{"apply", "missing.json", "--lease-ttl", "-5s"},
		{"apply", "missing.json", "--lease-wait", "-1s"},
	} {
		r := run(t, dir, args...)
		require.Equal(t, ExitUsage, r.code, "%v: %s", args, r.stderr)
		require.Contains(t, r.stderr, args[len(args)-2], "%v", args)
	}
	r := run(t, dir, "apply", "missing.json", "--on-incumbent-advance", "lock", "--lease-ttl", "5s", "--lease-wait", "0s")
	require.Equal(t, ExitFailure, r.code, r.stderr)
	require.Contains(t, r.stderr, "reading the plan")
}
