package lease

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/gapless-dev/gapless/state"
)

// Self is this process as a lease holder: the host name, the PID, and a
// start identity that tells it from any later process reusing the PID.
//
// On Linux the start identity is "linux:<boot id>:<pid namespace>:<start
// time>", the start time being field 22 of /proc/self/stat (clock ticks
// since boot): together with the PID it names one process of one boot of
// one kernel, and ProcessGone can check it against /proc/<pid>/stat. On
// other systems, or when /proc cannot be read, it is "random:<hex>", a
// per-process token nothing can check, so no lease of this process is
// ever taken over before it expires.
func Self() state.LeaseHolder { return self() }

var self = sync.OnceValue(func() state.LeaseHolder {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown-host"
	}
	start, err := startIdentity(os.Getpid())
	if err != nil {
		start = randomIdentity()
	}
	return state.LeaseHolder{Host: host, PID: os.Getpid(), Start: start}
})

// randomIdentity is a start identity for a process whose start cannot be
// read: unique, and never recognised as gone.
func randomIdentity() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on supported systems
	return "random:" + hex.EncodeToString(b)
}

// ProcessGone reports whether h is known not to run any more: a process of
// this host (same host name, and on Linux the same boot and PID
// namespace as this process) whose PID no longer exists, now belongs to a
// process that started at another time, or is a zombie. It is the default
// Options.HolderGone.
//
// It is conservative: false for this very process, for a holder of another
// host (its liveness cannot be seen from here), of another boot or
// container, with an unknown or unchecked start identity (on systems other
// than Linux), and when /proc cannot be read. A false "gone" would let two
// processes hold one lease; a false "alive" only delays the takeover until
// the lease expires.
func ProcessGone(h state.LeaseHolder) bool { return processGone(h, Self()) }

// processGone is ProcessGone as seen from me.
func processGone(h, me state.LeaseHolder) bool {
	if h.IsZero() || h.PID <= 0 || h.Host != me.Host || h == me {
		return false
	}
	rec, ok := parseIdentity(h.Start)
	if !ok {
		return false
	}
	mine, ok := parseIdentity(me.Start)
	if !ok || rec.boot != mine.boot || rec.pidns != mine.pidns {
		return false
	}
	st, err := readProcStat(h.PID)
	if errors.Is(err, os.ErrNotExist) {
		return true
	}
	if err != nil {
		return false
	}
	return st.start != rec.start || st.state == 'Z' || st.state == 'X'
}

// identity is a parsed Linux start identity.
type identity struct {
	boot, pidns, start string
}

func parseIdentity(s string) (identity, bool) {
	parts := strings.Split(s, ":")
	// "linux", boot id, "pid", "[<inode>]", start time: the namespace
	// link ("pid:[4026531836]") holds a colon itself.
	if len(parts) != 5 || parts[0] != "linux" || parts[1] == "" || parts[4] == "" {
		return identity{}, false
	}
	return identity{boot: parts[1], pidns: parts[2] + ":" + parts[3], start: parts[4]}, true
}

// procStat is what ProcessGone reads of /proc/<pid>/stat.
type procStat struct {
	state byte   // field 3: R, S, D, Z (zombie), X (dead), ...
	start string // field 22: start time, clock ticks after boot
}

// parseProcStat reads fields 3 and 22 of a /proc/<pid>/stat line. The
// command name (field 2) is in parentheses and may hold spaces and
// parentheses itself, so fields are counted from the last ')'.
func parseProcStat(line string) (procStat, error) {
	end := strings.LastIndexByte(line, ')')
	if end < 0 {
		return procStat{}, fmt.Errorf("no command name in %q", line)
	}
	fields := strings.Fields(line[end+1:])
	// fields[0] is field 3, so field 22 is fields[19].
	if len(fields) < 20 || len(fields[0]) != 1 {
		return procStat{}, fmt.Errorf("too few fields in %q", line)
	}
	return procStat{state: fields[0][0], start: fields[19]}, nil
}

// Describe names a lease's holder for messages: the owner, and the
// process (PID and host) when the lease records it.
func Describe(l state.Lease) string {
	if l.Holder.IsZero() {
		return l.Owner
	}
	return fmt.Sprintf("%s (pid %d on %s)", l.Owner, l.Holder.PID, l.Holder.Host)
}

// HeldError is returned when a lease is held, unexpired, by another owner
// whose process is not known to be gone. It wraps state.ErrLeaseHeld and
// carries the lease as last read: who holds it and until when.
type HeldError struct {
	Key   string
	Lease state.Lease
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("lease %s is held by %s until %s", e.Key, Describe(e.Lease), e.Lease.ExpiresAt.UTC().Format(time.RFC3339))
}

func (e *HeldError) Unwrap() error { return state.ErrLeaseHeld }
