package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/apply"
	"github.com/gapless-dev/gapless/internal/logkey"
	"github.com/gapless-dev/gapless/scheduler"
)

// requireLogKeys checks every line of stderr with logkey.CheckRecord and
// returns the records' messages and every key seen.
func requireLogKeys(t *testing.T, stderr string) (msgs []string, seen map[string]bool) {
	t.Helper()
	seen = map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(stderr), "\n") {
		if line == "" {
			continue
		}
		require.NoError(t, logkey.CheckRecord([]byte(line)))
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &rec))
		for k := range rec {
			seen[k] = true
		}
		msgs = append(msgs, rec["msg"].(string))
	}
	return msgs, seen
}

// Scenario: seed 000's race and its upkeep through the command line, every
// command in-process with --log-format json at debug level: prod is
// deployed, a breaking change is planned, the scheduler advances prod, the
// plan is applied under trailing-gap (accepting debt), the next run repairs
// it; then status, debt, a dev deploy, its invalidation, the janitor, the
// state migration and one scheduler tick. Every stderr line
// is one JSON record, each key is in logkey.All (or slog's time, level,
// msg) and appears once per record: the vocabulary holds across apply, run,
// execute, the scheduler, the janitor and the command line.
func TestLogKeys(t *testing.T) {
	t.Parallel()
	dir := storyProject(t, embeddedBackend, "")
	var msgs []string
	seen := map[string]bool{}
	check := func(stderr string) {
		t.Helper()
		m, s := requireLogKeys(t, stderr)
		msgs = append(msgs, m...)
		for k := range s {
			seen[k] = true
		}
	}
	js := func(now string, args ...string) {
		t.Helper()
		r := runAt(t, dir, now, append(args, "--log-format", "json", "--log-level", "debug")...)
		require.Equal(t, ExitOK, r.code, "%v\nstdout: %s\nstderr: %s", args, r.stdout, r.stderr)
		check(r.stderr)
	}
	js(storyDeploy, "plan", "--auto-apply")
	file := filepath.Join(dir, "models", "hits.sql")
	src, err := os.ReadFile(file)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(file, []byte(strings.Replace(string(src), "1 AS v", "2 AS v", 1)), 0o644))
	js(storyDeploy, "plan", "--out", "p.json")
	js(storyRun, "run")
	js(storyApply, "apply", "p.json", "--on-incumbent-advance", "trailing-gap", "--max-trailing-gap-intervals", "1")
	js(storyLater, "run")
	js(storyLater, "status")
	js(storyLater, "debt")
	js(storyLater, "plan", "dev", "--auto-apply")
	js(storyLater, "environments")
	js(storyLater, "invalidate", "dev")
	js(storyLater, "janitor")
	js(storyLater, "migrate")

	js(storyLater, "scheduler", "--once")

	// The run covered what it claims: the events whose keys were renamed
	// were logged, and their new spellings seen.
	for _, m := range []string{apply.MsgPromotionAccepted, scheduler.MsgTick} {
		require.True(t, slices.Contains(msgs, m), "no %q record", m)
	}
	for _, k := range []string{logkey.Environment, logkey.Plan, logkey.DurationMS, logkey.Generation, logkey.Model} {
		require.True(t, seen[k], "no record carried %q", k)
	}
}
