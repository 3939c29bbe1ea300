package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/execute"
)

// lines splits output into its lines, without the empty last one.
func lines(s string) []string {
	s = strings.TrimSuffix(s, "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// backfilled parses apply's summary lines ("  demo.events 0a75...: 61
// batches, 17400 rows, computed ...") into batches and rows per model.
func backfilled(t *testing.T, stdout string) map[string][2]int64 {
	t.Helper()
	out := map[string][2]int64{}
	re := regexp.MustCompile(`(?m)^  (\S+) [0-9a-f]+: (\d+) batch(?:es)?, (\d+) rows?`)
	for _, m := range re.FindAllStringSubmatch(stdout, -1) {
		b, err := strconv.ParseInt(m[2], 10, 64)
		require.NoError(t, err)
		r, err := strconv.ParseInt(m[3], 10, 64)
		require.NoError(t, err)
		out[m[1]] = [2]int64{b, r}
	}
	return out
}

// Scenario: a new user's first deploy: `gapless init`, then `plan
// --auto-apply` at the default log level, stderr a pipe. Stderr stays
// (nearly) empty: no per-batch records, where there used to be one per
// batch. What the user needs is on stdout: per model what was backfilled
// with true row counts (the FULL and VIEW models hold 5 and 3 rows, not 0),
// which policy promoted prod, and the plan applied. `--log-level info` and
// `-v` bring the per-batch records back, one per batch of the summary.
func TestFirstDeployStderrHasNoPerBatchLines(t *testing.T) {
	t.Parallel()
	dir := initProject(t)
	r := run(t, dir, "plan", "--auto-apply")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.NotContains(t, r.stderr, execute.MsgBatchCommitted)
	require.LessOrEqual(t, len(lines(r.stderr)), 2, "stderr:\n%s", r.stderr)

	done := backfilled(t, r.stdout)
	require.Len(t, done, 5, r.stdout)
	require.Equal(t, [2]int64{61, 1450 * 12}, done["demo.events"], "1450 hours in batches of 24")
	require.Equal(t, int64(5), done["demo.customers"][1], "SEED")
	require.Equal(t, int64(5), done["demo.customer_totals"][1], "FULL: one row per customer")
	require.Equal(t, int64(3), done["demo.top_customers"][1], "VIEW: the top three")
	require.Equal(t, float64(3), count(t, dir, "demo.top_customers"))
	require.Contains(t, r.stdout, "Promotion policy strict: no gap; prod was promoted as planned.")
	require.Regexp(t, `Applied plan [0-9a-f]+ to prod\.\n$`, r.stdout)

	var batches int64
	for _, d := range done {
		batches += d[0]
	}
	for _, flag := range []string{"--log-level=info", "-v"} {
		r := run(t, initProject(t), "plan", "--auto-apply", flag)
		require.Equal(t, ExitOK, r.code, r.stderr)
		require.Equal(t, int(batches), strings.Count(r.stderr, `msg="`+execute.MsgBatchCommitted+`"`), flag)
	}
}

// Scenario: the first deploy on a terminal: one progress bar per model
// being built, named after it and counting its batches, and no log lines.
func TestFirstDeployOnATerminalShowsABarPerModel(t *testing.T) {
	t.Parallel()
	dir := initProject(t)
	r := runTerminal(t, dir, "", "plan", "--auto-apply", "--execution-time", t0)
	require.Equal(t, ExitOK, r.code, r.stderr)
	for _, m := range []string{"demo.customers", "demo.events", "demo.daily_revenue", "demo.customer_totals", "demo.top_customers"} {
		require.Contains(t, r.stderr, m)
	}
	require.Contains(t, r.stderr, "1/1 batches")
	require.NotContains(t, r.stderr, "level=")
	require.Contains(t, r.stdout, "Applied plan")
}

// cancelAt is a stderr that cancels the command's context when it sees
// the n-th "batch started" record (debug) of model: Ctrl-C arriving while
// a known batch is in flight, with no sleep.
type cancelAt struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	model  string
	n      int
	seen   int
	cancel context.CancelFunc
}

func (c *cancelAt) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := string(p)
	if strings.Contains(s, `msg="`+execute.MsgBatchStarted+`"`) && strings.Contains(s, "model="+c.model+" ") {
		if c.seen++; c.seen == c.n {
			c.cancel()
		}
	}
	return c.buf.Write(p)
}

func (c *cancelAt) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.String()
}

// interruptAt runs args with --log-level debug, pressing Ctrl-C
// (cancelling the context) as the fourth batch of demo.events starts, and
// returns the exit code, stdout and stderr.
func interruptAt(t *testing.T, dir string, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stderr := &cancelAt{model: "demo.events", n: 4, cancel: cancel}
	var stdout bytes.Buffer
	code := Run(ctx, append(args, "--log-level", "debug"), Env{
		Stdout: &stdout, Stderr: stderr, Clock: clockwork.NewFakeClockAt(testNow),
		Getwd: func() (string, error) { return dir, nil },
	})
	return code, stdout.String(), stderr.String()
}

// Scenario: the user presses Ctrl-C during a backfill, while the fourth
// batch of demo.events is in flight: in the first deploy (plan
// --auto-apply), and in a scheduler run (run) ten days later. The command
// exits 1 saying it was interrupted, how many batches were committed and
// kept, and to rerun; there is no ERROR or WARN record, no SQL, and no
// model reported as failed. Running the same command again resumes: it
// computes only the rest, and prod serves every row.
func TestCtrlCDuringBackfillSaysHowToResume(t *testing.T) {
	t.Parallel()
	requireInterrupted := func(t *testing.T, code int, stdout, out string) {
		t.Helper()
		require.Equal(t, ExitFailure, code, out)
		require.NotContains(t, stdout, "failed")
		require.NotContains(t, out, "level=WARN", "an interruption is not a failure, not even of one model")
		committed := strings.Count(out, `level=INFO msg="`+execute.MsgBatchCommitted+`"`) // execute's, once per batch
		require.GreaterOrEqual(t, committed, 3)
		last := lines(out)[len(lines(out))-1]
		require.Equal(t, "gapless: interrupted: "+strconv.Itoa(committed)+" batches committed and kept; run the same command again to resume", last)
		require.NotContains(t, out, "level=ERROR")
		require.NotContains(t, out, "SQL")
		require.NotContains(t, out, "SELECT")
	}

	t.Run("plan", func(t *testing.T) {
		t.Parallel()
		dir := initProject(t)
		const exec = "2024-01-11T00:30:00Z" // ten daily batches of events
		code, stdout, out := interruptAt(t, dir, "plan", "--auto-apply", "--execution-time", exec)
		requireInterrupted(t, code, stdout, out)

		r := run(t, dir, "plan", "--auto-apply", "--execution-time", exec)
		require.Equal(t, ExitOK, r.code, r.stderr)
		require.Less(t, backfilled(t, r.stdout)["demo.events"][0], int64(10), "resumed: the committed days are not computed again")
		require.Equal(t, float64(10*24*12), count(t, dir, "demo.events"))
	})
	t.Run("run", func(t *testing.T) {
		t.Parallel()
		dir := initProject(t)
		mustRun(t, dir, "plan", "--auto-apply", "--execution-time", t0)
		const exec = "2024-01-11T00:30:00Z" // nine more days of events
		code, stdout, out := interruptAt(t, dir, "run", "--execution-time", exec)
		requireInterrupted(t, code, stdout, out)
		require.Equal(t, []string{"[2024-01-01T00:00:00Z, 2024-01-05T00:00:00Z)"}, statusOf(t, dir, "--execution-time", exec)["demo.events"].Covered)

		out = mustRun(t, dir, "run", "--execution-time", exec)
		require.Contains(t, out, "computed {[2024-01-05T00:00:00Z, 2024-01-11T00:00:00Z)}")
		require.Equal(t, float64(10*24*12), count(t, dir, "demo.events"))
	})
}

// Scenario: `gapless query` prints a DATE as a date and a TIMESTAMP as a
// time, in the table and in --json, on DuckDB and on PostgreSQL; before,
// a DATE printed as its midnight timestamp.
func TestQueryPrintsDatesAsDates(t *testing.T) {
	t.Parallel()
	for name, dir := range map[string]string{"duckdb": initProject(t), "postgres": pgProject(t)} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			const q = "SELECT CAST('2024-01-02' AS DATE) AS d, CAST('2024-01-02 00:00:00' AS TIMESTAMP) AS ts"
			out := mustRun(t, dir, "query", q)
			require.Regexp(t, `(?m)^2024-01-02\s+2024-01-02T00:00:00Z\s*$`, out)

			var res struct {
				Types []string `json:"types"`
				Rows  [][]any  `json:"rows"`
			}
			require.NoError(t, json.Unmarshal([]byte(mustRun(t, dir, "query", "--json", q)), &res))
			require.Equal(t, []any{"2024-01-02", "2024-01-02T00:00:00Z"}, res.Rows[0])
			require.Equal(t, []string{"DATE", "TIMESTAMP"}, res.Types)
		})
	}
}

// Scenario: `status` on the example project, right after its first deploy
// and five hours later with intervals missing, fits a 120-column terminal;
// the range each model's last run wrote is in --wide (and --json) only.
func TestStatusFits120Columns(t *testing.T) {
	t.Parallel()
	dir := initProject(t)
	mustRun(t, dir, "plan", "--auto-apply", "--execution-time", t0)
	for _, at := range []string{t0, t1} {
		out := mustRun(t, dir, "status", "--execution-time", at)
		for _, line := range lines(out) {
			require.LessOrEqual(t, len(line), 120, "%q", line)
		}
		require.Regexp(t, `(?m)^demo\.events\s+[0-9a-f]{16}\s+\[2024-01-01 00:00, 2024-01-02 00:00\)\s`, out)
		require.Regexp(t, `(?m)^demo\.daily_revenue\s+[0-9a-f]{16}\s+\[2024-01-01, 2024-01-02\)\s`, out)
		require.NotContains(t, out, "2024-03-01T10:30:00Z [", "no last-run range")
	}
	out := mustRun(t, dir, "status", "--execution-time", t1)
	require.Regexp(t, `(?m)^demo\.events\s.*\s5 hours\s+-\s+2024-03-01 10:30$`, out)

	wide := mustRun(t, dir, "status", "--wide", "--execution-time", t1)
	require.Contains(t, wide, "2024-03-01T10:30:00Z [2024-01-01T00:00:00Z, 2024-01-02T00:00:00Z)")
	require.Contains(t, wide, "5 hour intervals in [2024-01-02T00:00:00Z, 2024-01-02T05:00:00Z)")
	require.Contains(t, wide, "INCREMENTAL_BY_TIME_RANGE")
}

// waitClock is a lock-wait clock that advances only when the command
// sleeps (a clockwork fake whose timers fire as soon as they are made,
// having advanced the clock), and calls onSleep with the time waited after
// each sleep.
type waitClock struct {
	*clockwork.FakeClock
	start   time.Time
	onSleep func(waited time.Duration)
}

func (c *waitClock) NewTimer(d time.Duration) clockwork.Timer {
	t := c.FakeClock.NewTimer(d)
	c.Advance(d)
	c.onSleep(c.Now().Sub(c.start))
	return t
}

// Scenario: `gapless query` starts while another process holds the
// warehouse file. After a second of waiting it says so on stderr, instead
// of hanging silently for up to --lock-wait; once the other process lets
// go, the query runs.
func TestWaitingForTheWarehouseSaysSo(t *testing.T) {
	t.Parallel()
	dir := initProject(t)
	mustRun(t, dir, "plan", "--auto-apply", "--execution-time", t0)
	release := startHolder(t, filepath.Join(dir, "warehouse.duckdb"))

	var stdout, stderr bytes.Buffer
	start := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	var saidAfter time.Duration
	clock := &waitClock{FakeClock: clockwork.NewFakeClockAt(start), start: start, onSleep: func(waited time.Duration) {
		if saidAfter == 0 && strings.Contains(stderr.String(), "waiting for the warehouse") {
			saidAfter = waited
			release() // the other process finishes
		}
	}}
	code := Run(context.Background(), []string{"query", "SELECT count(*) AS n FROM demo.customers"}, Env{
		Stdout: &stdout, Stderr: &stderr, Clock: clockwork.NewFakeClockAt(testNow),
		Getwd: func() (string, error) { return dir, nil }, WaitClock: clock,
	})
	require.Equal(t, ExitOK, code, stderr.String())
	require.Equal(t, 1, strings.Count(stderr.String(), "\n"), stderr.String())
	require.Contains(t, stderr.String(), "gapless: waiting for the warehouse, held by another process: "+filepath.Join(dir, "warehouse.duckdb"))
	require.Contains(t, stderr.String(), "(up to --lock-wait 30s)")
	require.GreaterOrEqual(t, saidAfter, time.Second)
	require.Less(t, saidAfter, 3*time.Second, "said about a second in, not at the end of the wait")
	require.Contains(t, stdout.String(), "(1 row)")
}

// Scenario: `gapless --version` and `gapless version` print the version
// (from the build, or the -ldflags variable), the Go version and the
// DuckDB library's, and exit 0; so does gapless run as a process.
func TestVersion(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--version"}, {"version"}} {
		r := run(t, t.TempDir(), args...)
		require.Equal(t, ExitOK, r.code, r.stderr)
		require.Regexp(t, `^gapless \S+.*\ngo: go1\.\d+.* \w+/\w+\nduckdb: v\d+\.\d+\.\d+\n$`, r.stdout, args)
	}
	r := runBinary(t, t.TempDir(), "--version")
	require.Equal(t, 0, r.code, r.stderr)
	require.True(t, strings.HasPrefix(r.stdout, "gapless "), r.stdout)
}

// Scenario: a release build sets cli.Version with -ldflags; both forms
// print it. (Not parallel: it sets the package variable, and parallel tests
// wait until the sequential ones are done.)
func TestVersionFromLdflags(t *testing.T) {
	old := Version
	Version = "v1.2.3"
	defer func() { Version = old }()
	r := run(t, t.TempDir(), "--version")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.True(t, strings.HasPrefix(r.stdout, "gapless v1.2.3"), r.stdout)
	r = run(t, t.TempDir(), "version")
	require.True(t, strings.HasPrefix(r.stdout, "gapless v1.2.3"), r.stdout)
}

// Scenario: mistyped names get the closest right one, as mistyped
// references in models do: a command (still a usage error, exit 2), a
// --select-model or --restate-model of plan, a model to render, and a
// --select-model of run.
func TestDidYouMean(t *testing.T) {
	t.Parallel()
	dir := initProject(t)
	r := run(t, dir, "stauts")
	require.Equal(t, ExitUsage, r.code)
	require.Equal(t, "gapless: unknown command \"stauts\" for \"gapless\"; did you mean \"status\"?\n", r.stderr)
	r = run(t, dir, "frobnicate")
	require.Equal(t, ExitUsage, r.code)
	require.NotContains(t, r.stderr, "did you mean")

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"plan", "--select-model", "demo.event"}, "--select-model: model demo.event: no such model in " + dir + "; did you mean demo.events?"},
		{[]string{"plan", "--restate-model", "demo.daily_revenu"}, "--restate-model: model demo.daily_revenu: no such model in " + dir + "; did you mean demo.daily_revenue?"},
		{[]string{"render", "demo.top_customer"}, "model demo.top_customer: no such model in " + dir + "; did you mean demo.top_customers?"},
	} {
		r := run(t, dir, append(c.args, "--execution-time", t0)...)
		require.Equal(t, ExitFailure, r.code, c.args)
		require.Equal(t, "gapless: "+c.want+"\n", r.stderr, c.args)
	}

	mustRun(t, dir, "plan", "--auto-apply", "--execution-time", t0)
	r = run(t, dir, "run", "--select-model", "demo.customer", "--execution-time", t1)
	require.Equal(t, ExitFailure, r.code)
	require.Equal(t, "gapless: --select-model demo.customer: prod serves no such model; did you mean demo.customers?\n", r.stderr)
}

// Scenario: prod is deployed at 00:30; a run at 00:40 finds nothing due and
// says so, and when the next interval is due (demo.events' 00:00-01:00
// hour, at 01:00); a run at 05:30 computes what is due and says it ran.
func TestRunSaysWhenNothingIsDue(t *testing.T) {
	t.Parallel()
	dir := initProject(t)
	mustRun(t, dir, "plan", "--auto-apply", "--execution-time", t0)
	out := mustRun(t, dir, "run", "--execution-time", "2024-01-02T00:40:00Z")
	require.Equal(t, "Nothing due in prod at 2024-01-02T00:40:00Z; the next interval is due at 2024-01-02T01:00:00Z (demo.events).\n", out)
	out = mustRun(t, dir, "run", "--execution-time", "2024-01-02T00:40:00Z", "--select-model", "demo.daily_revenue")
	require.Equal(t, "Nothing due in prod at 2024-01-02T00:40:00Z; the next interval is due at 2024-01-03T00:00:00Z (demo.daily_revenue).\n", out)

	out = mustRun(t, dir, "run", "--execution-time", t1)
	require.Contains(t, out, "demo.events")
	require.True(t, strings.HasSuffix(out, "Ran prod at "+t1+".\n"), out)
}
