package warehousetest

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Mutant is an engine broken on purpose in one way, the way a plausible
// implementation would break it, and the test that must catch it.
type Mutant struct {
	Name string
	// Test is the test that must fail: "Group/Scenario", a scenario of
	// Run that MutantRun.Child runs against the mutant; or "own:Name", a
	// subtest of MutantRun.OwnChild (a promise the suite cannot see).
	Test string
}

// MutantRun says how CatchMutants starts a mutant's child process.
type MutantRun struct {
	// Env is the environment variable that names the mutant to a child.
	Env string
	// Child is the test function that runs Run against the mutant Env
	// names, and does nothing when Env is unset.
	Child string
	// OwnChild, for "own:" tests, is the test function whose subtests are
	// the package's own checks run against the mutant.
	OwnChild string
	// Environ, when set, returns more variables for a child: what the
	// parent lends it for the test (a Trino catalog).
	Environ func(t *testing.T) []string
}

// CatchMutants proves the tests are the contract: each mutant runs its test
// in a child process of the test binary, which must fail, and on exactly
// that test (so a mutant caught by some other breakage does not count).
// The mutants run in parallel.
func CatchMutants(t *testing.T, r MutantRun, mutants []Mutant) {
	t.Helper()
	for _, m := range mutants {
		t.Run(m.Name, func(t *testing.T) {
			t.Parallel()
			var run, want string
			if own, ok := strings.CutPrefix(m.Test, "own:"); ok {
				require.NotEmpty(t, r.OwnChild, "mutant %s names an own test, and MutantRun has no OwnChild", m.Name)
				run, want = "^"+r.OwnChild+"$/^"+own+"$", "--- FAIL: "+r.OwnChild+"/"+own+" "
			} else {
				group, scenario, ok := strings.Cut(m.Test, "/")
				require.True(t, ok, "mutant %s: test %q is not Group/Scenario", m.Name, m.Test)
				run, want = "^"+r.Child+"$/^"+group+"$/^"+scenario+"$", "--- FAIL: "+r.Child+"/"+m.Test+" "
			}
			cmd := exec.Command(os.Args[0], "-test.count=1", "-test.run", run)
			cmd.Env = append(os.Environ(), r.Env+"="+m.Name)
			if r.Environ != nil {
				cmd.Env = append(cmd.Env, r.Environ(t)...)
			}
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			require.True(t, errors.As(err, &exit), "the tests passed against mutant %s:\n%s", m.Name, out)
			require.Contains(t, string(out), want, "mutant %s:\n%s", m.Name, out)
		})
	}
}
