package duckdb_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/warehouse"
	"github.com/gapless-dev/gapless/warehouse/duckdb"
)

// holder is a second OS process (this test binary, re-executed with
// holderEnv) that holds a database file open.
type holder struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  *bufio.Scanner
	stderr *bytes.Buffer
}

// startHolder starts a holder of path and returns once it reported
// "ready": from then on the file is locked.
func startHolder(t *testing.T, path string) *holder {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), holderEnv+"="+path)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	h := &holder{cmd: cmd, stdin: stdin, lines: bufio.NewScanner(stdout), stderr: &bytes.Buffer{}}
	cmd.Stderr = h.stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Wait()
	})
	require.True(t, h.lines.Scan(), "the holder exited before it was ready: %s", h.stderr)
	require.Equal(t, "ready", h.lines.Text())
	return h
}

// release makes the holder close the file and returns once it has.
func (h *holder) release(t *testing.T) {
	t.Helper()
	_, err := io.WriteString(h.stdin, "release\n")
	require.NoError(t, err)
	require.True(t, h.lines.Scan(), "the holder exited before releasing: %s", h.stderr)
	require.Equal(t, "released", h.lines.Text())
}

// fakeClock advances only when Open sleeps, and records the sleeps: a
// clockwork fake clock whose timers fire as soon as they are made, having
// advanced the clock by their duration.
type fakeClock struct {
	*clockwork.FakeClock
	mu      sync.Mutex
	sleeps  []time.Duration
	onSleep func(n int) // called after the n-th sleep (1-based), outside the lock
}

func newFakeClock() *fakeClock {
	return &fakeClock{FakeClock: clockwork.NewFakeClockAt(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))}
}

func (c *fakeClock) NewTimer(d time.Duration) clockwork.Timer {
	t := c.FakeClock.NewTimer(d)
	c.mu.Lock()
	c.sleeps = append(c.sleeps, d)
	n := len(c.sleeps)
	c.mu.Unlock()
	c.Advance(d)
	if c.onSleep != nil {
		c.onSleep(n)
	}
	return t
}

func (c *fakeClock) recorded() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.sleeps...)
}

func sum(ds []time.Duration) time.Duration {
	var total time.Duration
	for _, d := range ds {
		total += d
	}
	return total
}

// requireLocked checks err is the *warehouse.Error of a locked file.
func requireLocked(t *testing.T, err error, path string) {
	t.Helper()
	require.ErrorIs(t, err, warehouse.ErrLocked)
	var we *warehouse.Error
	require.ErrorAs(t, err, &we)
	require.Equal(t, "open", we.Op)
	require.Equal(t, path, we.Object)
	require.Contains(t, err.Error(), path)
	require.Contains(t, err.Error(), "another gapless process")
}

// Scenario: `gapless run` starts while a scheduler process holds
// warehouse.duckdb and does not let go. Open backs off (10 ms, doubling,
// at most 1 s), stops exactly at LockWait, and fails with ErrLocked naming
// the file, instead of crashing or hanging.
func TestOpenWaitsThenFailsWhenLocked(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "warehouse.duckdb")
	startHolder(t, path)

	clock := newFakeClock()
	_, err := duckdb.Open(t.Context(), path, duckdb.Options{LockWait: 5 * time.Second, Clock: clock})
	requireLocked(t, err, path)

	sleeps := clock.recorded()
	require.Equal(t, 5*time.Second, sum(sleeps), "the wait is not bounded by LockWait")
	require.Equal(t, []time.Duration{10 * time.Millisecond, 20 * time.Millisecond, 40 * time.Millisecond}, sleeps[:3])
	for _, d := range sleeps {
		require.LessOrEqual(t, d, time.Second)
	}
}

// Scenario: the other process finishes while Open waits; Open then gets
// the file and the engine works.
func TestOpenSucceedsOnceTheHolderLetsGo(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "warehouse.duckdb")
	h := startHolder(t, path)

	clock := newFakeClock()
	clock.onSleep = func(n int) {
		if n == 3 {
			h.release(t)
		}
	}
	e, err := duckdb.Open(t.Context(), path, duckdb.Options{LockWait: time.Minute, Clock: clock})
	require.NoError(t, err)
	defer func() { require.NoError(t, e.Close()) }()
	require.Len(t, clock.recorded(), 3)
	require.NoError(t, e.CreateSchema(t.Context(), "after_wait"))
}

// Scenario: with the real clock and a short LockWait, Open gives up after
// about that long.
func TestOpenRealClockGivesUp(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "warehouse.duckdb")
	startHolder(t, path)

	start := time.Now()
	_, err := duckdb.Open(t.Context(), path, duckdb.Options{LockWait: 50 * time.Millisecond})
	requireLocked(t, err, path)
	require.GreaterOrEqual(t, time.Since(start), 50*time.Millisecond)
}

// Scenario: with a negative LockWait (a command that must not wait) Open
// fails at the first refusal, without sleeping.
func TestOpenNoWait(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "warehouse.duckdb")
	startHolder(t, path)

	clock := newFakeClock()
	_, err := duckdb.Open(t.Context(), path, duckdb.Options{LockWait: -1, Clock: clock})
	requireLocked(t, err, path)
	require.Empty(t, clock.recorded())
}

// Scenario: the user presses Ctrl-C while Open waits for the file; Open
// returns at once with an error that is both ErrLocked and
// context.Canceled.
func TestOpenCanceledWhileWaiting(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "warehouse.duckdb")
	startHolder(t, path)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	clock := newFakeClock()
	clock.onSleep = func(n int) {
		if n == 2 {
			cancel()
		}
	}
	_, err := duckdb.Open(ctx, path, duckdb.Options{LockWait: time.Hour, Clock: clock})
	require.ErrorIs(t, err, context.Canceled)
	requireLocked(t, err, path)
	require.Len(t, clock.recorded(), 2)
}

// Scenario: a file that cannot be opened for another reason (its folder
// does not exist, or the path would be misread) fails at once, and not as
// ErrLocked.
func TestOpenOtherFailuresDoNotWait(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, path := range []string{
		filepath.Join(dir, "missing", "warehouse.duckdb"),
		filepath.Join(dir, "what?.duckdb"),
		filepath.Join(dir, "nul\x00.duckdb"),
	} {
		clock := newFakeClock()
		_, err := duckdb.Open(t.Context(), path, duckdb.Options{LockWait: time.Hour, Clock: clock})
		require.Error(t, err, path)
		require.False(t, errors.Is(err, warehouse.ErrLocked), "%s: %v", path, err)
		var we *warehouse.Error
		require.ErrorAs(t, err, &we)
		require.Equal(t, "open", we.Op)
		require.Empty(t, clock.recorded())
	}
}

// Scenario: a command waits for warehouse.duckdb, which another process
// holds. After a second of waiting, and only once, Open says so (OnWait
// with the file and how long it waited); when the holder lets go within
// the second, Open never says anything.
func TestOpenSaysItIsWaitingAfterASecond(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "warehouse.duckdb")
	h := startHolder(t, path)

	type notice struct {
		path   string
		waited time.Duration
		sleeps int
	}
	var notices []notice
	clock := newFakeClock()
	onWait := func(p string, waited time.Duration) {
		notices = append(notices, notice{p, waited, len(clock.recorded())})
	}
	_, err := duckdb.Open(t.Context(), path, duckdb.Options{LockWait: 5 * time.Second, Clock: clock, OnWait: onWait})
	requireLocked(t, err, path)
	require.Len(t, notices, 1, "said once, not at every retry")
	require.Equal(t, path, notices[0].path)
	require.GreaterOrEqual(t, notices[0].waited, duckdb.WaitNotice)
	require.Less(t, sum(clock.recorded()[:notices[0].sleeps-1]), duckdb.WaitNotice, "said as soon as a second had passed")

	// A holder that lets go after 70 ms of waiting: nothing to say.
	notices = nil
	clock = newFakeClock()
	clock.onSleep = func(n int) {
		if n == 3 {
			h.release(t)
		}
	}
	e, err := duckdb.Open(t.Context(), path, duckdb.Options{LockWait: time.Minute, Clock: clock, OnWait: onWait})
	require.NoError(t, err)
	require.NoError(t, e.Close())
	require.Empty(t, notices)
}
