package multiproc

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/execute"
	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/state"
)

// execution is one batch as the processes' logs tell it: from its "batch
// started" record (execute.Executor, debug) to the record that ended it in
// the same process ("batch committed", "batch failed", "batch interrupted",
// "interval write fenced"), or to the process's exit when none did (a SIGKILL, or a batch
// that never finished).
type execution struct {
	proc       string
	pid        int
	key        state.VersionKey
	rng        interval.Range
	start, end time.Time
	// committed: the batch's interval was recorded ("batch committed" is
	// logged only after the state write succeeded).
	committed bool
	// open: nothing in the log ended it; end is the process's exit.
	open bool
}

func (e execution) String() string {
	state := "committed"
	switch {
	case e.open:
		state = "unfinished"
	case !e.committed:
		state = "not recorded"
	}
	return fmt.Sprintf("%s (pid %d) %s@%s %s from %s to %s (%s)", e.proc, e.pid, e.key.Name, e.key.Version, e.rng,
		e.start.Format("15:04:05.000000"), e.end.Format("15:04:05.000000"), state)
}

// parseRange reads an interval as the logs print it: "[start, end)", or a
// one-range set "{[start, end)}".
func parseRange(t *testing.T, s string) interval.Range {
	t.Helper()
	s = strings.TrimSuffix(strings.TrimPrefix(s, "{"), "}")
	require.True(t, strings.HasPrefix(s, "[") && strings.HasSuffix(s, ")") && !strings.Contains(s, ") ["), "interval %q", s)
	a, b, ok := strings.Cut(s[1:len(s)-1], ", ")
	require.True(t, ok, "interval %q", s)
	start, err := time.Parse(time.RFC3339Nano, a)
	require.NoError(t, err)
	end, err := time.Parse(time.RFC3339Nano, b)
	require.NoError(t, err)
	return interval.NewRange(start, end)
}

// executions extracts every batch execution from the processes' logs. The
// processes must have exited.
func executions(t *testing.T, procs ...*proc) []execution {
	t.Helper()
	var out []execution
	for _, pr := range procs {
		<-pr.done
		open := map[string][]int{} // by model|version|interval: indexes into out, oldest first
		for _, r := range pr.Records() {
			var ends, committed bool
			switch {
			case r.msg == execute.MsgBatchStarted && r.level == "DEBUG":
			case r.msg == execute.MsgBatchCommitted && r.level == "INFO": // apply also logs its event at DEBUG
				ends, committed = true, true
			case r.msg == execute.MsgBatchFailed, r.msg == execute.MsgBatchInterrupted, r.msg == execute.MsgIntervalWriteFenced:
				ends = true
			default:
				continue
			}
			rng := parseRange(t, r.str("interval"))
			key := state.VersionKey{Name: r.str("model"), Version: r.str("version")}
			id := key.Name + "|" + key.Version + "|" + rng.String()
			if !ends {
				out = append(out, execution{proc: pr.name, pid: pr.pid, key: key, rng: rng, start: r.time, open: true})
				open[id] = append(open[id], len(out)-1)
				continue
			}
			q := open[id]
			require.NotEmpty(t, q, "%s logged %q for %s with no batch started", pr.name, r.msg, id)
			e := &out[q[0]]
			open[id] = q[1:]
			e.end, e.committed, e.open = r.time, committed, false
		}
		for _, q := range open {
			for _, i := range q {
				out[i].end = pr.ended
			}
		}
	}
	return out
}

// requireNoConcurrentExecutions: no two executions of overlapping intervals
// of one model version ever ran at the same time, in any two processes.
func requireNoConcurrentExecutions(t *testing.T, execs []execution) {
	t.Helper()
	for i, a := range execs {
		for _, b := range execs[i+1:] {
			if a.key != b.key || a.rng.Intersect(b.rng).Empty() {
				continue
			}
			overlap := a.start.Before(b.end) && b.start.Before(a.end)
			require.False(t, overlap, "two executions of the same interval ran at once:\n  %s\n  %s", a, b)
		}
	}
}

// requireRecordedOnce: no interval of a version was committed twice, and
// what the logs say was committed is exactly what state records for every
// version they name (state merges intervals, so only the log can show a
// double write). With exact false, state may hold more than the logs show
// (a process killed between its state write and its log line).
func requireRecordedOnce(ctx context.Context, t *testing.T, st state.Store, execs []execution, exact bool) map[state.VersionKey]interval.Set {
	t.Helper()
	committed := map[state.VersionKey][]execution{}
	for _, e := range execs {
		if e.committed {
			committed[e.key] = append(committed[e.key], e)
		}
	}
	var keys []state.VersionKey
	for k := range committed {
		keys = append(keys, k)
	}
	got, err := st.GetIntervals(ctx, keys)
	require.NoError(t, err)
	union := map[state.VersionKey]interval.Set{}
	for k, es := range committed {
		for i, a := range es {
			for _, b := range es[i+1:] {
				require.True(t, a.rng.Intersect(b.rng).Empty(), "an interval was recorded twice:\n  %s\n  %s", a, b)
			}
			union[k] = union[k].Add(a.rng)
		}
		if exact {
			require.True(t, got[k].Equal(union[k]), "%s@%s: state records %s but the processes committed %s",
				k.Name, k.Version, got[k], union[k])
		} else {
			require.True(t, union[k].Subtract(got[k]).IsEmpty(),
				"%s@%s: committed %s but state records %s", k.Name, k.Version, union[k], got[k])
		}
	}
	return union
}

// summary counts executions by process, for the test log.
func summary(execs []execution) string {
	n := map[string]int{}
	unrecorded := 0
	for _, e := range execs {
		if e.committed {
			n[e.proc]++
		} else {
			unrecorded++
		}
	}
	var parts []string
	for p, c := range n {
		parts = append(parts, fmt.Sprintf("%s %d", p, c))
	}
	slices.Sort(parts)
	return fmt.Sprintf("%d executions (%d fenced, failed or cut short), committed by process: %s",
		len(execs), unrecorded, strings.Join(parts, ", "))
}
