package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"
)

// runTerminal runs the CLI as if on a terminal: stdin answers prompts, and
// stderr is a terminal (progress bars).
func runTerminal(t *testing.T, wd, stdin string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	code := Run(context.Background(), args, Env{
		Stdout: &out, Stderr: &errb, Stdin: strings.NewReader(stdin),
		Clock:       clockwork.NewFakeClockAt(time.Date(2024, 3, 1, 10, 30, 0, 0, time.UTC)),
		Getwd:       func() (string, error) { return wd, nil },
		Interactive: true, StderrTerminal: true,
	})
	return result{code, out.String(), errb.String()}
}

// Scenario: on a terminal, plan asks before applying. "n" applies nothing;
// "y" applies, with progress bars on stderr.
func TestPlanAsksOnATerminal(t *testing.T) {
	t.Parallel()
	dir := initProject(t)
	r := runTerminal(t, dir, "n\n", "plan", "--execution-time", t0)
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "Apply this plan to prod? [y/N]")
	require.Contains(t, r.stdout, "Not applied.")
	require.Equal(t, "[]\n", mustRun(t, dir, "environments", "--json"))

	r = runTerminal(t, dir, "y\n", "plan", "--execution-time", t0)
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "Applied plan")
	require.Contains(t, r.stderr, "demo.events")
	require.Equal(t, float64(24*12), count(t, dir, "demo.events"))
}

// Scenario: without a terminal there are never progress bars, only logs.
func TestNoProgressBarsOffATerminal(t *testing.T) {
	t.Parallel()
	dir := initProject(t)
	r := run(t, dir, "plan", "--auto-apply", "--log-format", "json", "--execution-time", t0)
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.NotContains(t, r.stderr, "1/1 batches")
	for _, line := range strings.Split(strings.TrimSpace(r.stderr), "\n") {
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &rec), "every stderr line is a JSON log record: %q", line)
		require.Contains(t, rec, "msg")
	}
}

// Scenario: two models change, but the plan selects one: the other keeps
// the version prod serves until a later plan.
func TestPlanSelectModel(t *testing.T) {
	t.Parallel()
	dir := initProject(t)
	mustRun(t, dir, "plan", "--auto-apply", "--execution-time", t0)
	before := statusOf(t, dir, "--execution-time", t0)

	edit := func(name, old, new string) {
		file := filepath.Join(dir, "models", name)
		src, err := os.ReadFile(file)
		require.NoError(t, err)
		require.Contains(t, string(src), old)
		require.NoError(t, os.WriteFile(file, []byte(strings.Replace(string(src), old, new, 1)), 0o644))
	}
	edit("daily_revenue.sql", "sum(e.amount) AS revenue", "sum(e.amount) AS revenue,\n  max(e.amount) AS biggest")
	edit("top_customers.sql", "LIMIT 3", "LIMIT 2")

	var sum planSummary
	out := mustRun(t, dir, "plan", "--json", "--select-model", "demo.daily_revenue", "--execution-time", t0)
	require.NoError(t, json.Unmarshal([]byte(out), &sum))
	require.Equal(t, []string{"demo.daily_revenue"}, sum.Direct)
	require.Empty(t, sum.Indirect, "children keep what prod serves")

	mustRun(t, dir, "plan", "--auto-apply", "--select-model", "demo.daily_revenue", "--execution-time", t0)
	after := statusOf(t, dir, "--execution-time", t0)
	require.NotEqual(t, before["demo.daily_revenue"].Version, after["demo.daily_revenue"].Version)
	require.Equal(t, before["demo.top_customers"].Version, after["demo.top_customers"].Version)
	require.Equal(t, float64(3), count(t, dir, "demo.top_customers"))
	res := queryRows(t, dir, "SELECT max(biggest)::float8 FROM demo.daily_revenue")
	require.Equal(t, 9.0, res.Rows[0][0])

	// Selecting a model also takes its upstream changes.
	require.NoError(t, json.Unmarshal([]byte(mustRun(t, dir, "plan", "--json", "--select-model", "demo.top_customers", "--execution-time", t0)), &sum))
	require.Equal(t, []string{"demo.top_customers"}, sum.Direct)

	r := run(t, dir, "plan", "--select-model", "demo.nope", "--execution-time", t0)
	require.Equal(t, ExitFailure, r.code)
	require.Contains(t, r.stderr, "model demo.nope: no such model")
}
