//go:build !linux

package lease

import "errors"

// errNoProc: only Linux's /proc tells a process's start time here, so
// elsewhere Self uses a random identity and ProcessGone never says gone.
var errNoProc = errors.New("process start times are read from /proc on Linux only")

func startIdentity(int) (string, error) { return "", errNoProc }

func readProcStat(int) (procStat, error) { return procStat{}, errNoProc }
