package lease_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/gapless-dev/gapless/lease"
	"github.com/gapless-dev/gapless/state"
)

// startChild starts this test binary as a child process (see childEnv)
// and returns it with the holder identity it reported.
func startChild(t *testing.T) (*exec.Cmd, state.LeaseHolder) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=1")
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err)
	var h state.LeaseHolder
	require.NoError(t, json.Unmarshal([]byte(line), &h))
	require.Equal(t, cmd.Process.Pid, h.PID)
	return cmd, h
}

// Scenario: the default liveness check on a real process of this host. A
// child process records its identity (host, PID, start time): while it
// runs it is not gone; killed with SIGKILL it is gone, both as a zombie
// not yet reaped and once reaped. This very process is never gone, nor a
// holder on another host, nor one whose identity cannot be checked; a
// holder with this process's PID but another start time (a PID reused) is
// gone.
func TestProcessGoneOnARealProcess(t *testing.T) {
	t.Parallel()
	self := lease.Self()
	require.Equal(t, os.Getpid(), self.PID)
	require.True(t, strings.HasPrefix(self.Start, "linux:"), self.Start)
	require.False(t, lease.ProcessGone(self))

	cmd, child := startChild(t)
	require.Equal(t, self.Host, child.Host)
	require.False(t, lease.ProcessGone(child), "a running child is gone")
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	// Wait for it to die without reaping it (WNOWAIT): a zombie.
	var info unix.Siginfo
	require.NoError(t, unix.Waitid(unix.P_PID, child.PID, &info, unix.WEXITED|unix.WNOWAIT, nil))
	require.True(t, lease.ProcessGone(child), "a killed, unreaped child (a zombie) is not gone")
	err := cmd.Wait()
	var ee *exec.ExitError
	require.True(t, errors.As(err, &ee), "%v", err)
	require.True(t, lease.ProcessGone(child), "a reaped child is not gone")

	reused := self
	i := strings.LastIndexByte(reused.Start, ':')
	reused.Start = reused.Start[:i+1] + "1"
	require.True(t, lease.ProcessGone(reused), "a PID now held by a later process")
	for _, h := range []state.LeaseHolder{
		{},
		{Host: "elsewhere", PID: child.PID, Start: child.Start},
		{Host: self.Host, PID: child.PID, Start: "random:0123"},
		{Host: self.Host, PID: child.PID, Start: strings.Replace(child.Start, "linux:", "linux:another-boot", 1)},
		{Host: self.Host, PID: child.PID, Start: strings.Replace(child.Start, "pid:[", "pid:[9", 1)},
	} {
		require.False(t, lease.ProcessGone(h), "%+v", h)
	}
}
