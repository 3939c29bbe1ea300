package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"
)

type result struct {
	code           int
	stdout, stderr string
}

// run executes the CLI in-process with a fixed clock and working directory.
func run(t *testing.T, wd string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	code := Run(context.Background(), args, Env{
		Stdout: &out, Stderr: &errb,
		Clock: clockwork.NewFakeClockAt(time.Date(2024, 3, 1, 10, 30, 0, 0, time.UTC)),
		Getwd: func() (string, error) { return wd, nil },
	})
	return result{code, out.String(), errb.String()}
}

var quickstart = filepath.Join("..", "examples", "quickstart")

func TestModelsListsTheExampleProject(t *testing.T) {
	t.Parallel()
	r := run(t, quickstart, "models")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "7 models, at 2024-03-01T10:30:00Z")
	require.Regexp(t, `raw\.orders +SOURCE `, r.stdout)
	require.Regexp(t, `demo\.orders_hourly +INCREMENTAL_BY_TIME_RANGE +@hourly +hour +\w+ +raw\.orders `, r.stdout)
	require.Contains(t, r.stdout, "demo.daily_revenue")
	// hourly cron at 10:30: the newest due hour is [09:00, 10:00)
	require.Contains(t, r.stdout, "1450 hour intervals in [2024-01-01T00:00:00Z, 2024-03-01T10:00:00Z)")
}

func TestModelsJSONAndFoundFromASubfolder(t *testing.T) {
	t.Parallel()
	r := run(t, filepath.Join(quickstart, "models"), "models", "--json", "--execution-time", "2024-01-02")
	require.Equal(t, ExitOK, r.code, r.stderr)
	var rows []modelRow
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rows))
	require.Len(t, rows, 7)
	byName := map[string]modelRow{}
	for _, row := range rows {
		byName[row.Name] = row
	}
	require.Equal(t, 24, byName["demo.events"].DueBuckets)
	require.Equal(t, 1, byName["demo.daily_revenue"].DueBuckets)
	require.Equal(t, []string{"demo.customers", "demo.events"}, byName["demo.daily_revenue"].Parents)
}

func TestUsageErrorsExitTwo(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"models", "--no-such-flag"},
		{"no-such-command"},
		{"models", "extra-arg"},
		{"models", "--execution-time", "yesterday"},
		{"models", "--log-format", "xml"},
	} {
		r := run(t, quickstart, args...)
		require.Equal(t, ExitUsage, r.code, "%v: %s", args, r.stderr)
		require.Contains(t, r.stderr, "gapless: ")
	}
}

// Scenario: a project with a broken model. The command fails with exit 1 and
// one clear message naming the file, line and column — no stack trace.
func TestBadProjectExitsOneWithPosition(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "models"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "models", "a.sql"),
		[]byte("MODEL (\n  name s.a,\n  kind FULL,\n  cron '61 * * * *'\n);\nSELECT 1"), 0o644))
	r := run(t, dir, "models")
	require.Equal(t, ExitFailure, r.code)
	require.Contains(t, r.stderr, "models/a.sql:4:8:")
	require.NotContains(t, r.stderr, "goroutine")
	require.NotContains(t, r.stderr, "panic")

	r = run(t, t.TempDir(), "models")
	require.Equal(t, ExitFailure, r.code)
	require.Contains(t, r.stderr, "not inside a gapless project")
}
