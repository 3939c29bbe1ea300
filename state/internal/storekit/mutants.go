package storekit

import (
	"context"
	"os"
	"testing"
)

// MutantEnv names the environment variable that switches on one mutant of
// the sources state machine, the code-host store or the merge gate: a transition rewritten
// wrongly, the way a plausible implementation would, so that a test can
// show the suite catches it (statetest.CatchesMutants, and ingest's
// TestSeedSuiteCatchesStoreMutants, run the test binary again as a child
// process with it set).
//
// It is safe to ship: the variable is read once, at start, and only in a
// binary built by go test (testing.Testing, which the go command's linker
// flag sets for test binaries alone). A gapless binary never reads it, so
// setting it in production changes nothing, and with it unset every mutant
// branch below is a comparison with the empty string.
const MutantEnv = "GAPLESS_STATE_TEST_MUTANT"

// The mutants, each breaking one promise of the state machine.
const (
	// MutantSwapWithoutGenerationPredicate: RecordSwap promotes whatever
	// builds, filtering only on the source's state (a build in flight),
	// not on the generation named: the seed's bug 1.
	MutantSwapWithoutGenerationPredicate = "swap-without-generation-predicate"
	// MutantPlanNotExclusive: PlanGeneration plans with a build in
	// flight: the seed's bug 2.
	MutantPlanNotExclusive = "plan-not-exclusive"
	// MutantRetireAnyGeneration: RetireGeneration, and RequestBuild with
	// Retire, retire whatever builds, not the generation named.
	MutantRetireAnyGeneration = "retire-any-generation"
	// MutantAppliedMovesBackward: RecordApplied writes a seq below the
	// stored one.
	MutantAppliedMovesBackward = "applied-moves-backward"
	// MutantStageRenumbers: StageBatches stages a known position again,
	// under a new seq, instead of returning the staged batch.
	MutantStageRenumbers = "stage-renumbers"

	// The code-host store's (codehost.go):

	// MutantPRCheckIgnoresRevision: PutPRCheck overwrites a stored check
	// whatever revision the caller read.
	MutantPRCheckIgnoresRevision = "pr-check-ignores-revision"
	// MutantRenderMovesBackward: MarkCheckRendered accepts a revision below
	// the rendered one (a late render).
	MutantRenderMovesBackward = "render-moves-backward"
	// MutantCommentClaimIgnoresHolder: ClaimComment takes a claim another
	// holder has, unexpired.
	MutantCommentClaimIgnoresHolder = "comment-claim-ignores-holder"
	// MutantDeployFinishIgnoresToken: FinishDeploy ends a running attempt
	// whatever token the caller holds.
	MutantDeployFinishIgnoresToken = "deploy-finish-ignores-token"
	// MutantDeployStartIgnoresActive: StartDeploy neither checks nor
	// abandons the other active attempts of the environment (the schema's
	// index still admits one running attempt).
	MutantDeployStartIgnoresActive = "deploy-start-ignores-active"

	// The merge gate's (gate.go):

	// MutantSettleReleasesEveryHold: SettleDeploy releases every active
	// hold on the attempt's environment, other attempts' included (G5).
	MutantSettleReleasesEveryHold = "settle-releases-every-hold"
	// MutantPromoteSkipsFence: Promote neither refuses a gated environment
	// without a valid fence nor checks the fence it is given (G2).
	MutantPromoteSkipsFence = "promote-skips-fence"
	// MutantPRCheckSkipsHold: PutPRCheck writes the check without the
	// write-path guard (a PR opened or pushed during a deploy is not held).
	MutantPRCheckSkipsHold = "pr-check-skips-hold"
	// MutantRunIgnoresRender: RunDeploy opens the gate of a held attempt
	// in mode rendered (its holds are not rendered: fail-open, G7).
	MutantRunIgnoresRender = "run-ignores-render"
)

// Mutants lists every mutant MutantEnv can switch on.
var Mutants = []string{
	MutantSwapWithoutGenerationPredicate, MutantPlanNotExclusive, MutantRetireAnyGeneration,
	MutantAppliedMovesBackward, MutantStageRenumbers,
	MutantPRCheckIgnoresRevision, MutantRenderMovesBackward, MutantCommentClaimIgnoresHolder,
	MutantDeployFinishIgnoresToken, MutantDeployStartIgnoresActive,
	MutantSettleReleasesEveryHold, MutantPromoteSkipsFence, MutantPRCheckSkipsHold, MutantRunIgnoresRender,
}

// mutant is the mutant switched on, "" outside a test binary or when
// MutantEnv is unset.
var mutant = switchedOn()

func switchedOn() string {
	if !testing.Testing() {
		return ""
	}
	return os.Getenv(MutantEnv)
}

// mutated reports whether mutant m is switched on.
func mutated(m string) bool { return mutant == m }

// whateverBuilds returns, under mutant m, the generation the source builds
// (g when none builds), and g otherwise: the generation a transition
// unpinned from g acts on.
func whateverBuilds(ctx context.Context, tx SourceTx, m, source string, g int64) int64 {
	if !mutated(m) {
		return g
	}
	row, err := defined(ctx, tx, source)
	if err != nil || row.Building == 0 {
		return g
	}
	return row.Building
}
