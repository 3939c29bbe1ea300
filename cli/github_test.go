package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/codehost"
	"github.com/gapless-dev/gapless/codehost/githubfake"
	"github.com/gapless-dev/gapless/gate"
)

// actionsRepo is a repository's project for the GitHub Actions tests.
func actionsRepo(amount string) map[string]string {
	return map[string]string{
		"gapless.yaml": "model_defaults:\n  dialect: duckdb\n  start: '2024-02-28'\n",
		"models/events.sql": `MODEL (name demo.events, kind INCREMENTAL_BY_TIME_RANGE (time_column ts), cron '@hourly');

SELECT g.ts AS ts, ` + amount + ` AS amount FROM generate_series(@start_ts, @end_ts, INTERVAL 1 HOUR) AS g(ts)
`,
		"models/total.sql": `MODEL (name demo.total, kind FULL, cron '@daily');

SELECT sum(amount) AS amount FROM demo.events
`,
	}
}

func TestGitHubRunInActions(t *testing.T) {
	t.Parallel()
	// Scenario: a team runs gapless from a GitHub Actions workflow, with
	// no server: the workflow runs `gapless github run` on each event with
	// GITHUB_TOKEN. A pull_request event plans the PR (its checks and its
	// summary comment, written as GitHub Actions); an issue_comment event
	// with /deploy from a writer deploys prod and merges the PR at its
	// head. The runner's checkout holds the state (here a SQLite file; in
	// a real workflow, PostgreSQL).
	fake := githubfake.NewT(t, githubfake.Options{NoAPIEvents: true})
	const repo = "acme/analytics"
	fake.CreateRepo(repo, "main")
	fake.Commit(repo, "main", actionsRepo("1.0"), "initial")
	fake.SetPermission(repo, "alice", codehost.PermissionWrite)
	fake.Commit(repo, "feature", map[string]string{"models/events.sql": actionsRepo("2.0")["models/events.sql"]}, "double it")
	n := fake.OpenPR(repo, githubfake.PRSpec{Title: "double", Author: "alice", Head: "feature", Base: "main"})
	fake.Commit(repo, "docs", map[string]string{"NOTES.md": "notes\n"}, "notes")
	other := fake.OpenPR(repo, githubfake.PRSpec{Title: "notes", Author: "alice", Head: "docs", Base: "main"})

	dir := t.TempDir()
	cfg := fmt.Sprintf("state: sqlite://state.db\nwarehouse: duckdb://warehouse.duckdb\ngithub:\n  token: %s\n  repositories: [%s]\n  api_url: %s\n",
		fake.PersonalToken("github-actions"), repo, fake.URL())
	require.NoError(t, os.WriteFile(filepath.Join(dir, "gapless.yaml"), []byte(cfg), 0o644))
	event := func(name string, payload any) string {
		data, err := json.Marshal(payload)
		require.NoError(t, err)
		f := filepath.Join(t.TempDir(), name+".json")
		require.NoError(t, os.WriteFile(f, data, 0o644))
		return f
	}

	res := run(t, dir, "github", "run", "--event", event("pr", fake.PullRequestPayload(repo, n, "opened")), "--event-name", "pull_request")
	require.Equal(t, ExitOK, res.code, "stdout:\n%s\nstderr:\n%s", res.stdout, res.stderr)
	require.Contains(t, res.stdout, "Done: pull_request opened on acme/analytics")
	head := fake.PR(repo, n).HeadSHA
	runs := map[string]codehost.CheckRun{}
	for _, r := range fake.CheckRuns(repo, head) {
		runs[r.Name] = r
	}
	for _, name := range []string{gate.CheckEnvironment, gate.CheckPreview, gate.CheckAggregate} {
		require.Equal(t, codehost.ConclusionSuccess, runs[name].Conclusion, "%s: %s", name, runs[name].Summary)
		require.Equal(t, "github-actions", runs[name].AppSlug, "written as GitHub Actions")
	}
	require.Len(t, withMarker(fake.Comments(repo, n), "<!-- gapless:summary -->"), 1)

	res = run(t, dir, "github", "run", "--event", event("other", fake.PullRequestPayload(repo, other, "opened")), "--event-name", "pull_request")
	require.Equal(t, ExitOK, res.code, "stdout:\n%s\nstderr:\n%s", res.stdout, res.stderr)

	// The deploy holds the other PR (prod is merge-gated by default): in
	// one run, with its inline queue, the hold is rendered and read back,
	// the gate opens, prod is deployed, and the settle releases the hold
	// and re-plans the other PR against the new prod.
	id := fake.AddComment(repo, n, "alice", "/deploy")
	res = run(t, dir, "github", "run", "--event", event("comment", fake.IssueCommentPayload(repo, id, "created")), "--event-name", "issue_comment")
	require.Equal(t, ExitOK, res.code, "stdout:\n%s\nstderr:\n%s", res.stdout, res.stderr)
	require.True(t, fake.PR(repo, n).Merged, "deployed, then merged at its head")
	held := false
	for _, c := range fake.CheckRunLog() {
		if c.Run.HeadSHA == fake.PR(repo, other).HeadSHA && c.Run.Name == gate.CheckAggregate && c.Run.Conclusion == codehost.ConclusionActionRequired {
			held = true
		}
	}
	require.True(t, held, "the other PR was shown held during the deploy")
	hold := withMarker(fake.Comments(repo, other), "<!-- gapless:hold:")
	require.Len(t, hold, 1)
	require.Contains(t, hold[0].Body, "Released")
	for _, r := range fake.CheckRuns(repo, fake.PR(repo, other).HeadSHA) {
		if r.Name == gate.CheckAggregate {
			require.Equal(t, codehost.ConclusionSuccess, r.Conclusion, "re-planned green after the settle: %s", r.Summary)
			require.Contains(t, r.Title, "generation 1")
		}
	}
	res = run(t, dir, "status")
	require.Equal(t, ExitOK, res.code, res.stderr)
	require.Contains(t, res.stdout, "prod")
}

func TestGitHubRunNeedsAnEvent(t *testing.T) {
	t.Parallel()
	// Scenario: `gapless github run` outside a workflow, with no event:
	// a usage error that says which flags (or variables) give it one.
	dir := t.TempDir()
	res := run(t, dir, "github", "run", "--event-name", "pull_request")
	require.Equal(t, ExitUsage, res.code)
	require.Contains(t, res.stderr, "--event FILE")
}

func withMarker(cs []codehost.Comment, marker string) []codehost.Comment {
	var out []codehost.Comment
	for _, c := range cs {
		if strings.Contains(c.Body, marker) {
			out = append(out, c)
		}
	}
	return out
}
