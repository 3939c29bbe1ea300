package lease

import (
	"fmt"
	"os"
	"strings"
)

// startIdentity is pid's start identity (see Self).
func startIdentity(pid int) (string, error) {
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return "", err
	}
	ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", pid))
	if err != nil {
		return "", err
	}
	st, err := readProcStat(pid)
	if err != nil {
		return "", err
	}
	id := strings.TrimSpace(string(boot))
	if id == "" || strings.Contains(id, ":") || !strings.HasPrefix(ns, "pid:[") {
		return "", fmt.Errorf("unexpected boot id %q or pid namespace %q", id, ns)
	}
	return "linux:" + id + ":" + ns + ":" + st.start, nil
}

// readProcStat reads /proc/<pid>/stat: an error wrapping os.ErrNotExist
// when no such process exists.
func readProcStat(pid int) (procStat, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, err
	}
	return parseProcStat(string(b))
}
