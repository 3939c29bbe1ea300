package multiproc

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/internal/pgtest"
	"github.com/gapless-dev/gapless/internal/trinotest"
	"github.com/gapless-dev/gapless/state/postgres"
)

// Bounds of the waits across processes. They are generous: they only
// matter when something is wrong, and each wait returns as soon as its
// signal arrives.
const (
	waitProcess = 60 * time.Second // a short-lived command, or a daemon's clean stop
	waitSignal  = 30 * time.Second // a log line or a state change
	pollTick    = 20 * time.Millisecond
)

// project is a copy of a testdata fixture whose gapless.yaml points the
// warehouse and the state at one fresh PostgreSQL database (newProject),
// or the warehouse at an empty Trino test catalog and the state at a fresh
// PostgreSQL database (newTrinoProject), with every model starting at
// start.
type project struct {
	dir          string
	warehouseURL string
	stateURL     string
	store        *postgres.Store
}

// newProject copies the fixture into a temporary folder, on a fresh
// database as both warehouse and state. Under -short (make test-short) it
// skips the test: every test here starts real processes.
func newProject(t *testing.T, fixture string, start time.Time) *project {
	t.Helper()
	skipShort(t)
	url := pgtest.NewDatabase(t)
	return writeProject(t, fixture, url, url, "postgres", start)
}

// newTrinoProject copies the fixture (its models written in Trino's
// dialect) into a temporary folder, on an empty test catalog of the Trino
// cluster as the warehouse and a fresh PostgreSQL database as the state.
// Under -short it skips the test.
func newTrinoProject(t *testing.T, fixture string, start time.Time) *project {
	t.Helper()
	skipShort(t)
	return writeProject(t, fixture, trinotest.NewCatalog(t), pgtest.NewDatabase(t), "trino", start)
}

func writeProject(t *testing.T, fixture, warehouseURL, stateURL, dialect string, start time.Time) *project {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.CopyFS(dir, os.DirFS(filepath.Join("testdata", fixture))))
	yaml := fmt.Sprintf("warehouse: %s\nstate: %s\nmodel_defaults:\n  dialect: %s\n  start: '%s'\n",
		warehouseURL, stateURL, dialect, start.UTC().Format(time.RFC3339))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "gapless.yaml"), []byte(yaml), 0o644))
	return &project{dir: dir, warehouseURL: warehouseURL, stateURL: stateURL}
}

// openStore opens the project's state store from the test process (after a
// first command migrated it).
func (p *project) openStore(t *testing.T) *postgres.Store {
	t.Helper()
	if p.store == nil {
		st, err := postgres.Open(t.Context(), p.stateURL)
		require.NoError(t, err)
		t.Cleanup(func() { st.Close() })
		p.store = st
	}
	return p.store
}

// edit replaces old with new in one of the project's files.
func (p *project) edit(t *testing.T, file, old, new string) {
	t.Helper()
	path := filepath.Join(p.dir, file)
	src, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Contains(t, string(src), old)
	require.NoError(t, os.WriteFile(path, []byte(strings.Replace(string(src), old, new, 1)), 0o644))
}

// record is one JSON log record of a process.
type record struct {
	proc  string
	pid   int
	time  time.Time
	level string
	msg   string
	attrs map[string]any
}

func (r record) str(key string) string {
	s, _ := r.attrs[key].(string)
	return s
}

// proc is a gapless process started by a test. Its stderr is read line by
// line: JSON log records are kept (the commands run with --log-format json
// --log-level debug), anything else is kept as text.
type proc struct {
	name string
	cmd  *exec.Cmd
	pid  int
	out  bytes.Buffer // stdout, read only after exit

	mu      sync.Mutex
	records []record
	text    []string      // stderr lines that are not JSON records
	changed chan struct{} // closed and replaced at every new line
	done    chan struct{} // closed once the process exited and stderr is drained
	ended   time.Time
	err     error // cmd.Wait's
}

// start starts gapless with args in p's folder. The process is killed, if
// still running, when the test ends.
func (p *project) start(t *testing.T, name string, args ...string) *proc {
	t.Helper()
	args = append(args, "--log-format", "json", "--log-level", "debug")
	cmd := binaryCommand(t, args...)
	cmd.Dir = p.dir
	pr := &proc{name: name, cmd: cmd, changed: make(chan struct{}), done: make(chan struct{})}
	cmd.Stdout = &pr.out
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	pr.pid = cmd.Process.Pid
	go pr.read(stderr)
	t.Cleanup(func() {
		select {
		case <-pr.done:
		default:
			_ = cmd.Process.Kill()
			<-pr.done
		}
	})
	return pr
}

func (pr *proc) read(stderr interface{ Read([]byte) (int, error) }) {
	sc := bufio.NewScanner(stderr)
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	for sc.Scan() {
		line := sc.Bytes()
		var raw map[string]any
		pr.mu.Lock()
		if json.Unmarshal(line, &raw) == nil {
			rec := record{proc: pr.name, pid: pr.pid, attrs: raw}
			rec.msg, _ = raw["msg"].(string)
			rec.level, _ = raw["level"].(string)
			if ts, ok := raw["time"].(string); ok {
				rec.time, _ = time.Parse(time.RFC3339Nano, ts)
			}
			pr.records = append(pr.records, rec)
		} else {
			pr.text = append(pr.text, string(line))
		}
		close(pr.changed)
		pr.changed = make(chan struct{})
		pr.mu.Unlock()
	}
	err := pr.cmd.Wait()
	pr.mu.Lock()
	pr.err, pr.ended = err, time.Now()
	close(pr.changed)
	pr.changed = make(chan struct{})
	pr.mu.Unlock()
	close(pr.done)
}

// Records returns the records so far.
func (pr *proc) Records() []record {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return append([]record(nil), pr.records...)
}

// waitLog returns the first record (from the start) that match accepts,
// waiting at most waitSignal for it; it fails the test if the process exits
// without one.
func (pr *proc) waitLog(t *testing.T, what string, match func(record) bool) record {
	t.Helper()
	deadline := time.After(waitSignal)
	seen := 0
	for {
		pr.mu.Lock()
		for ; seen < len(pr.records); seen++ {
			if match(pr.records[seen]) {
				rec := pr.records[seen]
				pr.mu.Unlock()
				return rec
			}
		}
		changed := pr.changed
		exited := !pr.ended.IsZero()
		pr.mu.Unlock()
		if exited {
			t.Fatalf("%s exited without logging %s:\n%s", pr.name, what, pr.stderrText())
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("%s did not log %s within %s:\n%s", pr.name, what, waitSignal, pr.stderrText())
		}
	}
}

// wait waits (bounded) for the process to exit and returns its exit code.
func (pr *proc) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-pr.done:
	case <-time.After(waitProcess):
		_ = pr.cmd.Process.Kill()
		<-pr.done
		t.Fatalf("%s did not exit within %s:\n%s", pr.name, waitProcess, pr.stderrText())
	}
	var ee *exec.ExitError
	switch {
	case pr.err == nil:
		return 0
	case errors.As(pr.err, &ee):
		return ee.ExitCode()
	default:
		t.Fatalf("%s: %v", pr.name, pr.err)
		return -1
	}
}

// kill sends SIGKILL and waits for the process to die.
func (pr *proc) kill(t *testing.T) {
	t.Helper()
	require.NoError(t, pr.cmd.Process.Kill())
	<-pr.done
	var ee *exec.ExitError
	require.ErrorAs(t, pr.err, &ee)
	require.Equal(t, syscall.SIGKILL, ee.Sys().(syscall.WaitStatus).Signal())
}

// stop sends SIGTERM and requires a clean exit (status 0).
func (pr *proc) stop(t *testing.T) {
	t.Helper()
	require.NoError(t, pr.cmd.Process.Signal(syscall.SIGTERM))
	require.Equal(t, 0, pr.wait(t), "%s: a clean stop exits 0:\n%s", pr.name, pr.stderrText())
}

// Stdout is the process's stdout; only complete after it exited.
func (pr *proc) Stdout() string {
	<-pr.done
	return pr.out.String()
}

// stderrText is the tail of what the process wrote on stderr, for failure
// messages.
func (pr *proc) stderrText() string {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	var lines []string
	for _, r := range pr.records {
		b, _ := json.Marshal(r.attrs)
		lines = append(lines, string(b))
	}
	lines = append(lines, pr.text...)
	if len(lines) > 60 {
		lines = lines[len(lines)-60:]
	}
	return strings.Join(lines, "\n")
}

// run runs a short-lived command to its end and requires exit status 0.
func (p *project) run(t *testing.T, name string, args ...string) *proc {
	t.Helper()
	pr := p.start(t, name, args...)
	code := pr.wait(t)
	require.Equal(t, 0, code, "%s %v:\n%s\n%s", name, args, pr.Stdout(), pr.stderrText())
	return pr
}
