package sqlite_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/state/sqlite"
)

// The two-process test re-executes this test binary as its children; these
// variables tell a child its role, its state file and where to report.
const (
	envRole = "GAPLESS_SQLITE_HELPER_ROLE"
	envPath = "GAPLESS_SQLITE_HELPER_PATH"
	envOut  = "GAPLESS_SQLITE_HELPER_OUT"
)

// processRounds is how many rounds of work each child does.
const processRounds = 200

var (
	sharedKey = state.VersionKey{Name: "m.shared", Version: "v1"}
	leasedKey = state.VersionKey{Name: "m.leased", Version: "v1"}
	t0        = day.Start
)

// childReport is what a child writes for the parent to check.
type childReport struct {
	EventIDs []int64 `json:"event_ids"`
	Acquired int     `json:"acquired"`
}

func TestTwoProcessesOnOneFile(t *testing.T) {
	t.Parallel()
	// Scenario: two OS processes open one fresh state file (racing to
	// migrate it) and, released together, each do 200 rounds of: record an
	// hour of a shared key (process p records hours p, p+2, p+4, ...), append
	// an event, and try to take a lease; while holding it, record the next
	// hour of a second key under the lease fence, then release. Afterwards
	// the shared key is one unbroken range (no add was lost), the leased key
	// holds exactly one hour per acquisition (no two processes ever held the
	// lease at once), and all 400 event ids are distinct.
	dir := t.TempDir()
	path := filepath.Join(dir, "state.db")
	type child struct {
		cmd    *exec.Cmd
		gun    io.WriteCloser
		out    string
		stderr bytes.Buffer
	}
	children := make([]*child, 2)
	for role := range children {
		c := &child{out: filepath.Join(dir, fmt.Sprintf("report-%d.json", role))}
		c.cmd = exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
		c.cmd.Env = append(os.Environ(),
			fmt.Sprintf("%s=%d", envRole, role), envPath+"="+path, envOut+"="+c.out)
		c.cmd.Stdout, c.cmd.Stderr = &c.stderr, &c.stderr
		gun, err := c.cmd.StdinPipe()
		require.NoError(t, err)
		c.gun = gun
		require.NoError(t, c.cmd.Start())
		children[role] = c
	}
	for _, c := range children { // the starting gun: EOF on every child's stdin
		require.NoError(t, c.gun.Close())
	}
	reports := make([]childReport, len(children))
	for role, c := range children {
		require.NoErrorf(t, c.cmd.Wait(), "child %d:\n%s", role, c.stderr.String())
		b, err := os.ReadFile(c.out)
		require.NoErrorf(t, err, "child %d wrote no report:\n%s", role, c.stderr.String())
		require.NoError(t, json.Unmarshal(b, &reports[role]))
	}

	st, err := sqlite.Open(t.Context(), path)
	require.NoError(t, err)
	defer func() { require.NoError(t, st.Close()) }()
	got, err := st.GetIntervals(t.Context(), []state.VersionKey{sharedKey, leasedKey})
	require.NoError(t, err)
	want := interval.NewSet(interval.NewRange(t0, t0.Add(2*processRounds*time.Hour)))
	require.Truef(t, want.Equal(got[sharedKey]), "shared key: want %v, got %v", want, got[sharedKey])

	acquired := reports[0].Acquired + reports[1].Acquired
	t.Logf("lease acquisitions: process 0 %d, process 1 %d", reports[0].Acquired, reports[1].Acquired)
	require.Positive(t, acquired)
	want = interval.NewSet(interval.NewRange(t0, t0.Add(time.Duration(acquired)*time.Hour)))
	require.Truef(t, want.Equal(got[leasedKey]), "leased key after %d acquisitions: got %v", acquired, got[leasedKey])

	seen := map[int64]bool{}
	for _, r := range reports {
		require.Len(t, r.EventIDs, processRounds)
		for _, id := range r.EventIDs {
			require.False(t, seen[id], "event id %d handed out twice", id)
			seen[id] = true
		}
	}
	events, err := st.ListEvents(t.Context(), state.EventFilter{})
	require.NoError(t, err)
	require.Len(t, events, 2*processRounds)
}

// roleKilled is the role of TestUnsyncedRecordsSurviveAKilledProcess's
// child.
const roleKilled = "killed"

func TestUnsyncedRecordsSurviveAKilledProcess(t *testing.T) {
	t.Parallel()
	// Scenario: a process records an interval and takes a lease with the
	// default sync (synchronous=NORMAL for both: no fsync at commit) and is
	// killed with SIGKILL right after, its store never closed. The next
	// process to open the file finds the interval recorded and the lease
	// held by the dead process's token: the unsynced commits survive a crash
	// of the process (only a power loss could roll them back).
	dir := t.TempDir()
	path := filepath.Join(dir, "state.db")
	out := filepath.Join(dir, "lease.json")
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), envRole+"="+roleKilled, envPath+"="+path, envOut+"="+out)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	require.ErrorAsf(t, err, &exit, "the child should die by SIGKILL:\n%s", stderr.String())
	require.Equalf(t, "signal: killed", exit.Error(), "child:\n%s", stderr.String())
	b, err := os.ReadFile(out)
	require.NoErrorf(t, err, "the child reported no lease:\n%s", stderr.String())
	var want state.Lease
	require.NoError(t, json.Unmarshal(b, &want))

	st, err := sqlite.Open(t.Context(), path)
	require.NoError(t, err)
	defer func() { require.NoError(t, st.Close()) }()
	got, err := st.GetIntervals(t.Context(), []state.VersionKey{sharedKey})
	require.NoError(t, err)
	require.True(t, interval.NewSet(day).Equal(got[sharedKey]), "interval recorded before the kill: %v", got[sharedKey])
	l, err := st.GetLease(t.Context(), want.Key)
	require.NoError(t, err)
	require.Equal(t, want.Token, l.Token)
}

// killedChild is TestUnsyncedRecordsSurviveAKilledProcess's child: it
// records, takes a lease, reports it, and kills itself.
func killedChild(t *testing.T) {
	ctx := t.Context()
	st, err := sqlite.Open(ctx, os.Getenv(envPath))
	require.NoError(t, err)
	require.NoError(t, st.AddIntervals(ctx, state.IntervalsParams{Key: sharedKey, Ranges: interval.NewSet(day), Now: t0}))
	l, err := st.AcquireLease(ctx, state.AcquireLeaseParams{Key: "killed", Owner: "child", TTL: time.Hour, Now: t0})
	require.NoError(t, err)
	b, err := json.Marshal(l)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(os.Getenv(envOut), b, 0o600))
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGKILL))
	select {} // the signal ends the process
}

// TestHelperProcess is one child of TestTwoProcessesOnOneFile or of
// TestUnsyncedRecordsSurviveAKilledProcess; run directly, it returns at
// once.
func TestHelperProcess(t *testing.T) {
	role := os.Getenv(envRole)
	if role == "" {
		return // only meaningful as a child process of TestTwoProcessesOnOneFile; nothing to check here
	}
	if role == roleKilled {
		killedChild(t)
		return
	}
	var p int
	_, err := fmt.Sscan(role, &p)
	require.NoError(t, err)
	_, err = io.Copy(io.Discard, os.Stdin) // wait for the starting gun
	require.NoError(t, err)

	ctx := t.Context()
	st, err := sqlite.Open(ctx, os.Getenv(envPath))
	require.NoError(t, err)
	defer func() { require.NoError(t, st.Close()) }()

	var rep childReport
	for i := range processRounds {
		h := t0.Add(time.Duration(p+2*i) * time.Hour)
		require.NoError(t, st.AddIntervals(ctx, state.IntervalsParams{
			Key: sharedKey, Ranges: interval.NewSet(interval.NewRange(h, h.Add(time.Hour))), Now: t0,
		}))
		ev, err := st.AppendEvents(ctx, state.Event{At: t0, Kind: state.EventPlanApplied, Reason: role})
		require.NoError(t, err)
		rep.EventIDs = append(rep.EventIDs, ev[0].ID)

		l, err := st.AcquireLease(ctx, state.AcquireLeaseParams{Key: "two-processes", Owner: role, TTL: time.Hour, Now: t0})
		if errors.Is(err, state.ErrLeaseHeld) {
			continue
		}
		require.NoError(t, err)
		rep.Acquired++
		require.NoError(t, recordNextHour(t, st, l))
		require.NoError(t, st.ReleaseLease(ctx, state.ReleaseLeaseParams{Key: l.Key, Token: l.Token}))
	}
	b, err := json.Marshal(rep)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(os.Getenv(envOut), b, 0o600))
}

// recordNextHour reads leasedKey's frontier and records the hour after it
// under l's fence: two holders at once would record the same hour.
func recordNextHour(t *testing.T, st *sqlite.Store, l state.Lease) error {
	got, err := st.GetIntervals(t.Context(), []state.VersionKey{leasedKey})
	if err != nil {
		return err
	}
	next := t0
	if !got[leasedKey].IsEmpty() {
		next = got[leasedKey].Frontier()
	}
	return st.AddIntervals(t.Context(), state.IntervalsParams{
		Key:    leasedKey,
		Ranges: interval.NewSet(interval.NewRange(next, next.Add(time.Hour))),
		Fence:  &state.Fence{LeaseKey: l.Key, LeaseToken: l.Token},
		Now:    t0,
	})
}
