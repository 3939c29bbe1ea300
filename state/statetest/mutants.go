package statetest

import (
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/state/internal/storekit"
)

// MutantEnv is the environment variable that switches on a mutant of the
// sources state machine or the code-host store the stores share, in a test
// binary only (see storekit.MutantEnv for why it is safe to ship).
const MutantEnv = storekit.MutantEnv

// Mutants are the mutants of the sources state machine, the code-host
// store and the merge gate, each with the conformance scenarios (Group/Scenario of Run) that
// must fail against it.
var Mutants = []struct {
	Name      string
	Scenarios []string
}{
	{storekit.MutantSwapWithoutGenerationPredicate, []string{"Sources/RecordSwapPinnedToGeneration"}},
	{storekit.MutantPlanNotExclusive, []string{"Sources/PlanGenerationIsExclusive", "Sources/PlanDefersOncePerBuildInFlight"}},
	{storekit.MutantRetireAnyGeneration, []string{"Sources/RetireRefusesOtherGeneration", "Sources/RequestBuildRetiresOnlyTheGenerationRead"}},
	{storekit.MutantAppliedMovesBackward, []string{"Applied/MovesOnlyForward"}},
	{storekit.MutantStageRenumbers, []string{"Batches/StageIsIdempotentByPosition", "Batches/SeqsAreNeverReused"}},
	{storekit.MutantPRCheckIgnoresRevision, []string{"CodeHost/PRCheckStaleRevisionChangesNothing", "CodeHost/PRCheckRacingWritersOneWins"}},
	{storekit.MutantRenderMovesBackward, []string{"CodeHost/LateRenderNeverMovesBackward"}},
	{storekit.MutantCommentClaimIgnoresHolder, []string{"CodeHost/CommentClaimLifecycle", "CodeHost/ClaimCommentIsExclusiveUnderConcurrency"}},
	{storekit.MutantDeployFinishIgnoresToken, []string{"CodeHost/StaleTokenFinishWritesNothing"}},
	{storekit.MutantDeployStartIgnoresActive, []string{"CodeHost/ExpiredLeaseIsAbandonedAndANewOneStarts"}},
	{storekit.MutantSettleReleasesEveryHold, []string{"Gate/SettleReleasesOnlyItsOwnHolds"}},
	{storekit.MutantPromoteSkipsFence, []string{"Gate/PromoteWithoutTheFenceWritesNothing"}},
	{storekit.MutantPRCheckSkipsHold, []string{"Gate/PRCheckDuringADeployIsHeld"}},
	{storekit.MutantRunIgnoresRender, []string{"Gate/RunDeployWaitsForTheRenderInModeRendered"}},
}

// CatchesMutants requires every mutant of Mutants to fail each of its
// scenarios: for each, it runs this test binary again as a child process
// with MutantEnv set to the mutant and only that scenario of test (the
// caller's test that calls Run, e.g. "TestConformance"), which must fail
// on exactly that scenario. Every mutant the stores know has a row.
func CatchesMutants(t *testing.T, test string) {
	t.Helper()
	known := make([]string, len(Mutants))
	for i, m := range Mutants {
		known[i] = m.Name
	}
	require.ElementsMatch(t, storekit.Mutants, known, "every mutant of the stores needs a scenario that catches it")
	for _, m := range Mutants {
		for _, sc := range m.Scenarios {
			t.Run(m.Name+"/"+strings.ReplaceAll(sc, "/", "_"), func(t *testing.T) {
				t.Parallel()
				RequireChildFails(t, m.Name, test+"/"+sc)
			})
		}
	}
}

// RequireChildFails runs this test binary again as a child process with
// mutant switched on (MutantEnv) and only the (sub)test named by path
// (Test/Sub/..., each element matched exactly), and requires it to fail,
// reporting that subtest failed.
func RequireChildFails(t *testing.T, mutant, path string) {
	t.Helper()
	require.True(t, slices.Contains(storekit.Mutants, mutant), "unknown mutant %q", mutant)
	elems := strings.Split(path, "/")
	for i, e := range elems {
		elems[i] = "^" + e + "$"
	}
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.count=1", "-test.run", strings.Join(elems, "/"))
	cmd.Env = append(os.Environ(), MutantEnv+"="+mutant)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	require.True(t, errors.As(err, &exit), "%s passed against mutant %s (err %v):\n%s", path, mutant, err, out)
	require.Contains(t, string(out), "--- FAIL: "+path+" ", "mutant %s:\n%s", mutant, out)
}

// RequireChildPasses runs this test binary again as a child process with
// mutant switched on (MutantEnv) and only the (sub)test named by path, as
// RequireChildFails does, and requires it to pass: what the mutant removes
// is guarded by something else too (the schema), and the test proves that
// guard holds on its own.
func RequireChildPasses(t *testing.T, mutant, path string) {
	t.Helper()
	require.True(t, slices.Contains(storekit.Mutants, mutant), "unknown mutant %q", mutant)
	elems := strings.Split(path, "/")
	for i, e := range elems {
		elems[i] = "^" + e + "$"
	}
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.count=1", "-test.v", "-test.run", strings.Join(elems, "/"))
	cmd.Env = append(os.Environ(), MutantEnv+"="+mutant)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s failed against mutant %s:\n%s", path, mutant, out)
	require.Contains(t, string(out), "--- PASS: "+path+" ", "mutant %s: the test did not run:\n%s", mutant, out)
}
