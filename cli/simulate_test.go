package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/simulate"
)

// quickSim are flags for a small simulation: three deploys on a two-model
// chain with three hours of history.
var quickSim = []string{"simulate", "--deploys", "3", "--dag", "chain:2", "--history", "3h", "--seed", "3"}

// Scenario: `gapless simulate` needs no project. It prints one table row
// per policy; --json prints a report that parses, with every policy and
// deploy, and is the same on a second run; --chart writes a PNG.
func TestSimulatePrintsTheTableJSONAndChart(t *testing.T) {
	t.Parallel()
	wd := t.TempDir()
	chart := filepath.Join(t.TempDir(), "policies.png")

	r := run(t, wd, append(quickSim, "--chart", chart)...)
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "3 deploys, seed 3, dag chain:2 (2 hour models)")
	require.Contains(t, r.stdout, "POLICY")
	require.Contains(t, r.stdout, "EXTRA")
	for _, p := range []string{"strict", "trailing-gap(1)", "catch-up(3)", "replan(3)", "lock"} {
		require.Regexp(t, `(?m)^`+regexp.QuoteMeta(p)+`\s+\d+/3 \(`, r.stdout, p)
	}
	require.Contains(t, r.stderr, "Chart written to "+chart)
	png, err := os.ReadFile(chart)
	require.NoError(t, err)
	require.Greater(t, len(png), 8)
	require.Equal(t, "\x89PNG\r\n\x1a\n", string(png[:8]))

	r = run(t, wd, append(quickSim, "--json", "--policy", "strict,lock", "--max-attempts", "2")...)
	require.Equal(t, ExitOK, r.code, r.stderr)
	var rep simulate.Report
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep), r.stdout)
	require.Equal(t, int64(3), rep.Params.Seed)
	require.Equal(t, 2, rep.Params.MaxAttempts)
	require.Len(t, rep.Policies, 2)
	require.Equal(t, "strict", rep.Policies[0].Policy)
	require.Equal(t, "lock", rep.Policies[1].Policy)
	for _, p := range rep.Policies {
		require.Len(t, p.DeployOutcomes, 3)
	}
	again := run(t, wd, append(quickSim, "--json", "--policy", "strict,lock", "--max-attempts", "2")...)
	require.Equal(t, r.stdout, again.stdout, "a fixed seed gives the same JSON")
}

// Scenario: bad simulation flags are usage errors (exit 2) naming the
// problem.
func TestSimulateRejectsBadFlags(t *testing.T) {
	t.Parallel()
	for msg, args := range map[string][]string{
		`dag "loop"`:               {"simulate", "--dag", "loop"},
		"jitter":                   {"simulate", "--jitter", "2h"},
		"unknown promotion policy": {"simulate", "--policy", "stric"},
		"takes 0":                  {"simulate", "extra"},
	} {
		r := run(t, t.TempDir(), args...)
		require.Equal(t, ExitUsage, r.code, "%v: %s", args, r.stderr)
		require.Contains(t, r.stderr, msg)
	}
}
