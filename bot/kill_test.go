package bot_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/backend"
	"github.com/gapless-dev/gapless/codehost"
	"github.com/gapless-dev/gapless/config"
	"github.com/gapless-dev/gapless/deploygate"
	"github.com/gapless-dev/gapless/state"
)

// TestMain runs the tests, or, with GAPLESS_TEST_GATE_CHILD set, the
// child process of TestScenarioKilledDeployIsResolvedBySweep.
func TestMain(m *testing.M) {
	if what := os.Getenv("GAPLESS_TEST_GATE_CHILD"); what != "" {
		if err := gateChild(what); err != nil {
			fmt.Fprintln(os.Stderr, "gate child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// gateChild is a deploy from a terminal on another machine, which the
// parent kills with SIGKILL. It records its attempt and holds (mode
// recorded), and with what "promote" also opens the gate and promotes
// prod under the attempt's fence (prod's own snapshots again: a new
// generation), says so on stdout, and waits to be killed.
func gateChild(what string) error {
	ctx := context.Background()
	cfg, err := config.Load(os.Getenv("GAPLESS_TEST_GATE_DIR"))
	if err != nil {
		return err
	}
	at, err := time.Parse(time.RFC3339Nano, os.Getenv("GAPLESS_TEST_GATE_NOW"))
	if err != nil {
		return err
	}
	clock := clockwork.NewFakeClockAt(at)
	st, err := backend.OpenStore(ctx, cfg.State)
	if err != nil {
		return err
	}
	id := "cli-killed-" + what
	g, err := deploygate.Begin(ctx, deploygate.Params{Store: st, Clock: clock, Owner: "ops@other-machine", TTL: time.Minute}, state.BeginDeployParams{
		ID: id, Mode: state.GateRecorded, Now: clock.Now(),
		Request: &state.RequestDeployParams{ID: id, Env: "prod", Origin: "cli:ops@other-machine", Trigger: state.TriggerCLI, RequestedBy: "ops", Now: clock.Now()},
	})
	if err != nil {
		return err
	}
	fmt.Println("HELD", g.Attempt().ID)
	if what == "promote" {
		if err := g.Open(ctx); err != nil {
			return err
		}
		prod, err := st.GetEnvironment(ctx, "prod")
		if err != nil {
			return err
		}
		if _, err := st.Promote(ctx, state.PromoteParams{Environment: "prod", ExpectedPlanID: prod.PlanID, PlanID: "plan-from-the-killed-deploy",
			Snapshots: prod.Snapshots, Now: clock.Now(), Gate: g.Fence()}); err != nil {
			return err
		}
		fmt.Println("PROMOTED")
	}
	<-ctx.Done() // never: the parent kills this process
	return nil
}

func TestScenarioKilledDeployIsResolvedBySweep(t *testing.T) {
	t.Parallel()
	for _, what := range []string{"held", "promote"} {
		t.Run(what, func(t *testing.T) {
			t.Parallel()
			stores(t, func(t *testing.T, o options) {
				// Scenario: prod is at generation 1 and PR 7 is green against
				// it. A deploy from a terminal on another machine records its
				// holds (PR 7 held) and is killed with SIGKILL: before it
				// changed anything, or right after its promotion committed.
				// Nothing settles it; PR 7 stays held. Once its lease has
				// expired past the grace, the sweep resolves it from the
				// state (abandoned, or promoted when its fenced promotion
				// committed) and settles it: the hold is released, and PR 7
				// re-plans green, at the unchanged generation or at the new
				// one.
				h := newHarness(t, o)
				seven := h.openPR("amount", changed())
				eight := h.openPR("regions", regionsChange())
				h.fake.AddComment(repoName, eight, writer, "/deploy")
				h.idle()
				h.requireGreen(seven)
				before, _, err := h.store.EnvironmentGeneration(h.ctx, "prod")
				require.NoError(t, err)
				require.Equal(t, int64(1), before)

				cmd, out := h.startChild(what)
				id := strings.TrimPrefix(expect(t, out, "HELD "), "HELD ")
				if what == "promote" {
					expect(t, out, "PROMOTED")
				}
				require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
				require.Error(t, cmd.Wait(), "killed")

				// serve's sweep renders the hold the dead process recorded.
				require.NoError(t, h.srv.Bot.Sweep(h.ctx, 1))
				h.idle()
				require.Equal(t, codehost.ConclusionActionRequired, h.aggregate(seven).Conclusion, "PR 7 is held")
				require.False(t, h.fake.MergeAllowed(repoName, seven))

				// The lease expired, but not the grace: still held.
				h.clock.Advance(time.Minute + 10*time.Second)
				require.NoError(t, h.srv.Bot.Sweep(h.ctx, 2))
				h.idle()
				a, err := h.store.GetDeploy(h.ctx, id)
				require.NoError(t, err)
				require.False(t, a.Terminal(), "resolved before the grace passed: %s", a.State)
				require.Equal(t, codehost.ConclusionActionRequired, h.aggregate(seven).Conclusion)

				h.clock.Advance(time.Minute)
				require.NoError(t, h.srv.Bot.Sweep(h.ctx, 3))
				h.idle()
				a, err = h.store.GetDeploy(h.ctx, id)
				require.NoError(t, err)
				wantState, wantGen := state.DeployAbandoned, before
				if what == "promote" {
					wantState, wantGen = state.DeployPromoted, before+1
				}
				require.Equal(t, wantState, a.State)
				require.False(t, a.SettledAt.IsZero(), "settled by the sweep")
				for _, hd := range h.holds(seven) {
					require.False(t, hd.Active(), "no hold outlives its attempt: %+v", hd)
				}
				h.requireGreen(seven)
				pc, err := h.store.GetPRCheck(h.ctx, repoName, seven, "prod")
				require.NoError(t, err)
				require.Equal(t, wantGen, pc.PlannedGeneration, "PR 7 re-planned at prod's generation now")
				require.Len(t, h.events(state.EventGateResolved), 1)
			})
		})
	}
}

// startChild runs gateChild as a process of its own (the test binary
// again, see TestMain) and
// returns it once it printed its first line.
func (h *harness) startChild(what string) (*exec.Cmd, *bufio.Scanner) {
	h.t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "GAPLESS_TEST_GATE_CHILD="+what, "GAPLESS_TEST_GATE_DIR="+h.dir,
		"GAPLESS_TEST_GATE_NOW="+h.clock.Now().UTC().Format(time.RFC3339Nano))
	out, err := cmd.StdoutPipe()
	require.NoError(h.t, err)
	cmd.Stderr = os.Stderr
	require.NoError(h.t, cmd.Start())
	h.t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd, bufio.NewScanner(out)
}

// expect reads lines until one starts with prefix and returns it.
func expect(t *testing.T, sc *bufio.Scanner, prefix string) string {
	t.Helper()
	for sc.Scan() {
		if line := sc.Text(); strings.HasPrefix(line, prefix) {
			return line
		}
	}
	require.FailNow(t, "the child ended before printing "+prefix, "%v", sc.Err())
	return ""
}
