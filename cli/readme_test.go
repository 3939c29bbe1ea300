package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Scenario: the README's promotion-policy story, as written, on the
// project `gapless init` writes. prod is deployed at 00:30; a breaking
// change of demo.events is planned at 00:40 and saved; the scheduler runs
// at 01:30 and advances the incumbent through 01:00; applying the plan
// under strict is refused naming demo.events and the missing hour; under
// trailing-gap(1) it is promoted with that hour as open debt; the next run
// repairs it. The README's own sed command makes the change, so the story
// breaks here if the example project or the README drift apart.
func TestREADMEPromotionPolicyStory(t *testing.T) {
	t.Parallel()
	dir := initProject(t)
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	require.NoError(t, err)
	require.Contains(t, string(readme), `$ sed -i 's/\* 1.5 AS amount/* 2.5 AS amount/' models/events.sql`)

	mustRun(t, dir, "plan", "--auto-apply", "--execution-time", "2024-01-02T00:30:00Z")
	events := filepath.Join(dir, "models", "events.sql")
	src, err := os.ReadFile(events)
	require.NoError(t, err)
	require.Contains(t, string(src), "* 1.5 AS amount", "the README's sed must find its text in the example")
	require.NoError(t, os.WriteFile(events, []byte(strings.Replace(string(src), "* 1.5 AS amount", "* 2.5 AS amount", 1)), 0o644))

	out := mustRun(t, dir, "plan", "--out", "p.json", "--execution-time", "2024-01-02T00:40:00Z")
	require.Contains(t, out, "Promotion policy: strict")
	require.Contains(t, out, "~ demo.events  breaking: column amount changes")

	out = mustRun(t, dir, "run", "--execution-time", "2024-01-02T01:30:00Z")
	require.Regexp(t, `demo\.events \w+: 1 batch, 12 rows, computed \{\[2024-01-02T00:00:00Z, 2024-01-02T01:00:00Z\)\}`, out)

	r := run(t, dir, "apply", "p.json")
	require.Equal(t, ExitFailure, r.code, r.stdout)
	require.Contains(t, r.stderr, "was not promoted; prod serves what it served before. Promotion refused:")
	require.Contains(t, r.stderr, "demo.events [incumbent_advanced] under strict: the scheduler advanced the incumbent 1 time(s) after the plan was built, so the replacement is missing [2024-01-02T00:00:00Z, 2024-01-02T01:00:00Z)")
	require.Equal(t, 2, strings.Count(r.stderr, "\n"), "the refusal is said once, without log records before it:\n%s", r.stderr)

	out = mustRun(t, dir, "apply", "p.json", "--on-incumbent-advance", "trailing-gap", "--max-trailing-gap-intervals", "1")
	require.Regexp(t, regexp.MustCompile(`(?m)^  demo\.events  \[2024-01-02T00:00:00Z, 2024-01-02T01:00:00Z\)  1/1 advances$`), out)
	require.Contains(t, out, "Applied plan ")

	debts := func() debtReport {
		var rep debtReport
		require.NoError(t, json.Unmarshal([]byte(mustRun(t, dir, "debt", "--json")), &rep))
		return rep
	}
	rep := debts()
	require.Equal(t, 1, rep.Open)
	require.Len(t, rep.Debts, 1)
	require.Equal(t, "demo.events", rep.Debts[0].Model)
	require.Equal(t, "open", rep.Debts[0].Status)

	mustRun(t, dir, "run", "--execution-time", "2024-01-02T02:05:00Z")
	rep = debts()
	require.Equal(t, 0, rep.Open)
	require.Len(t, rep.Debts, 1)
	require.Equal(t, "repaired", rep.Debts[0].Status)
	require.NotNil(t, rep.Debts[0].RepairLatencySeconds)
}
