package githubfake_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/codehost"
	"github.com/gapless-dev/gapless/codehost/githubfake"
)

func (a *api) createRun(body object) (int, object) {
	a.t.Helper()
	resp, out := a.do("POST", "repos/"+testRepo+"/check-runs", body)
	return resp.StatusCode, decode[object](a.t, out)
}

// Scenario: check runs live per head SHA and name; a new push gets its
// own, and the list of a commit shows only that commit's.
func TestCheckRunsArePerHeadAndName(t *testing.T) {
	f, clock, a := setup(t, githubfake.Options{})
	n := openPR(f, map[string]string{"models/a.sql": "select 1"})
	head1 := f.PR(testRepo, n).HeadSHA

	status, run := a.createRun(object{"name": "gapless", "head_sha": head1, "status": "in_progress", "external_id": "rev-1"})
	require.Equal(t, http.StatusCreated, status, "%v", run)
	require.Equal(t, "in_progress", run["status"])
	require.Nil(t, run["conclusion"], "a running check has conclusion null")
	require.Nil(t, run["completed_at"])
	require.Equal(t, "github-actions", run["app"].(object)["slug"], "a GITHUB_TOKEN's runs belong to GitHub Actions")
	require.Equal(t, start.Format(time.RFC3339), run["started_at"])
	prs := run["pull_requests"].([]any)
	require.Len(t, prs, 1)
	require.EqualValues(t, n, prs[0].(object)["number"])

	status, _ = a.createRun(object{"name": "gapless / prod plan preview", "head_sha": head1, "conclusion": "neutral",
		"output": object{"title": "preview", "summary": "2 models change"}})
	require.Equal(t, http.StatusCreated, status)

	head2 := f.Commit(testRepo, "feature", map[string]string{"models/b.sql": "select 2"}, "second")
	status, _ = a.createRun(object{"name": "gapless", "head_sha": head2, "status": "queued"})
	require.Equal(t, http.StatusCreated, status)

	list := func(ref, query string) object {
		resp, body := a.do("GET", fmt.Sprintf("repos/%s/commits/%s/check-runs%s", testRepo, ref, query), nil)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
		return decode[object](t, body)
	}
	got := list(head1, "")
	require.EqualValues(t, 2, got["total_count"])
	require.Len(t, got["check_runs"], 2)
	got = list(head1, "?check_name=gapless")
	require.EqualValues(t, 1, got["total_count"])
	require.Equal(t, "rev-1", got["check_runs"].([]any)[0].(object)["external_id"])
	got = list(head2, "")
	require.EqualValues(t, 1, got["total_count"])
	require.Equal(t, head2, got["check_runs"].([]any)[0].(object)["head_sha"])
	got = list("feature", "") // a branch resolves to its head
	require.EqualValues(t, 1, got["total_count"])

	// A second run of the same name on one head: filter=latest (the
	// default) shows the newest, filter=all both.
	clock.Advance(time.Minute)
	status, newer := a.createRun(object{"name": "gapless", "head_sha": head1, "conclusion": "success"})
	require.Equal(t, http.StatusCreated, status)
	got = list(head1, "?check_name=gapless")
	require.EqualValues(t, 1, got["total_count"])
	require.Equal(t, newer["id"], got["check_runs"].([]any)[0].(object)["id"])
	got = list(head1, "?check_name=gapless&filter=all")
	require.EqualValues(t, 2, got["total_count"])

	// Paging.
	resp, body := a.do("GET", fmt.Sprintf("repos/%s/commits/%s/check-runs?filter=all&per_page=1", testRepo, head1), nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.EqualValues(t, 3, decode[object](t, body)["total_count"])
	require.Len(t, decode[object](t, body)["check_runs"], 1)
	require.Contains(t, resp.Header.Get("Link"), `rel="next"`)

	// PATCH updates in place; GET reads it back.
	id := int64(run["id"].(float64))
	resp, body = a.do("PATCH", fmt.Sprintf("repos/%s/check-runs/%d", testRepo, id), object{"conclusion": "failure",
		"output": object{"title": "plan failed", "summary": "boom"}})
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	patched := decode[object](t, body)
	require.Equal(t, "completed", patched["status"], "a conclusion completes the run")
	require.Equal(t, "failure", patched["conclusion"])
	require.Equal(t, start.Add(time.Minute).Format(time.RFC3339), patched["completed_at"])
	require.Equal(t, "boom", patched["output"].(object)["summary"])
	resp, body = a.do("GET", fmt.Sprintf("repos/%s/check-runs/%d", testRepo, id), nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "failure", decode[object](t, body)["conclusion"])

	runs := f.CheckRuns(testRepo, head1)
	require.Len(t, runs, 3)
	require.Equal(t, codehost.ConclusionFailure, runs[0].Conclusion)
	require.Equal(t, "github-actions", runs[0].AppSlug)
	require.Len(t, f.CheckRunLog(), 5)

	resp, _ = a.do("GET", fmt.Sprintf("repos/%s/check-runs/12345", testRepo), nil)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	resp, _ = a.do("GET", fmt.Sprintf("repos/%s/commits/%s/check-runs", testRepo, strings.Repeat("a", 40)), nil)
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
}

// Scenario: summaries and texts past 65535 are refused with 422; GitHub
// counts bytes, so 40000 two-byte characters are too many.
func TestCheckRunOutputOver65535BytesIs422(t *testing.T) {
	f, _, a := setup(t, githubfake.Options{})
	n := openPR(f, map[string]string{"models/a.sql": "select 1"})
	head := f.PR(testRepo, n).HeadSHA
	run := func(summary, text string) (int, object) {
		out := object{"title": "t", "summary": summary}
		if text != "" {
			out["text"] = text
		}
		return a.createRun(object{"name": "gapless", "head_sha": head, "status": "in_progress", "output": out})
	}
	status, body := run(strings.Repeat("x", codehost.MaxBodyLength), strings.Repeat("y", codehost.MaxBodyLength))
	require.Equal(t, http.StatusCreated, status, "%v", body)

	status, body = run(strings.Repeat("x", codehost.MaxBodyLength+1), "")
	require.Equal(t, http.StatusUnprocessableEntity, status)
	require.Equal(t, "Validation Failed", body["message"])
	require.Equal(t, "summary", body["errors"].([]any)[0].(object)["field"])

	status, body = run("ok", strings.Repeat("é", 40000))
	require.Equal(t, http.StatusUnprocessableEntity, status)
	require.Equal(t, "text", body["errors"].([]any)[0].(object)["field"])

	// A PATCH is held to the same limit and changes nothing when refused.
	id := int64(decode[object](t, mustJSON(t, f, head))["id"].(float64))
	resp, _ := a.do("PATCH", fmt.Sprintf("repos/%s/check-runs/%d", testRepo, id),
		object{"output": object{"title": "t", "summary": strings.Repeat("x", codehost.MaxBodyLength+1)}})
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	require.Len(t, f.CheckRuns(testRepo, head)[0].Summary, codehost.MaxBodyLength)
}

// mustJSON returns the first check run on head as the REST API shows it.
func mustJSON(t *testing.T, f *githubfake.Fake, head string) []byte {
	t.Helper()
	a := &api{t: t, f: f, token: f.PersonalToken("reader")}
	runs := f.CheckRuns(testRepo, head)
	require.NotEmpty(t, runs)
	resp, body := a.do("GET", fmt.Sprintf("repos/%s/check-runs/%d", testRepo, runs[0].ID), nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	return body
}

// Scenario: status and conclusion are validated as GitHub validates them.
func TestCheckRunStatusAndConclusionAreValidated(t *testing.T) {
	f, _, a := setup(t, githubfake.Options{})
	n := openPR(f, map[string]string{"models/a.sql": "select 1"})
	head := f.PR(testRepo, n).HeadSHA
	for _, tc := range []struct {
		name string
		body object
		want int
	}{
		{"unknown status", object{"status": "running"}, http.StatusUnprocessableEntity},
		{"status only GitHub Actions sets", object{"status": "waiting"}, http.StatusUnprocessableEntity},
		{"unknown conclusion", object{"conclusion": "passed"}, http.StatusUnprocessableEntity},
		{"stale is GitHub's own", object{"conclusion": "stale"}, http.StatusUnprocessableEntity},
		{"completed without a conclusion", object{"status": "completed"}, http.StatusUnprocessableEntity},
		{"completed_at without a conclusion", object{"completed_at": start.Format(time.RFC3339)}, http.StatusUnprocessableEntity},
		{"output without summary", object{"output": object{"title": "t"}}, http.StatusUnprocessableEntity},
		{"no name", object{"name": ""}, http.StatusUnprocessableEntity},
		{"unknown head", object{"head_sha": strings.Repeat("b", 40)}, http.StatusUnprocessableEntity},
		{"defaults to queued", object{}, http.StatusCreated},
		{"action_required", object{"conclusion": "action_required", "details_url": "https://gapless.invalid/holds/1"}, http.StatusCreated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := object{"name": "gapless", "head_sha": head}
			for k, v := range tc.body {
				body[k] = v
			}
			status, out := a.createRun(body)
			require.Equal(t, tc.want, status, "%v", out)
			if status == http.StatusCreated && tc.body["conclusion"] == nil {
				require.Equal(t, "queued", out["status"])
			}
		})
	}
}

// Scenario: branch protection requires "gapless"; the oracle answers as
// the merge button: success, neutral and skipped pass; action_required,
// failure, cancelled, timed_out, a running check or none block. The
// latest run of the name decides.
func TestMergeAllowedCountsNeutralAndSkippedAsPassing(t *testing.T) {
	for _, tc := range []struct {
		conclusions []string // runs of "gapless" in order; "" is in_progress
		allowed     bool
	}{
		{[]string{"success"}, true},
		{[]string{"neutral"}, true},
		{[]string{"skipped"}, true},
		{[]string{"action_required"}, false},
		{[]string{"failure"}, false},
		{[]string{"cancelled"}, false},
		{[]string{"timed_out"}, false},
		{[]string{""}, false},
		{nil, false},
		{[]string{"failure", "success"}, true},
		{[]string{"success", "action_required"}, false},
		{[]string{"success", ""}, false},
	} {
		t.Run(strings.Join(tc.conclusions, ",")+"/"+fmt.Sprint(tc.allowed), func(t *testing.T) {
			f, _, a := setup(t, githubfake.Options{})
			n := openPR(f, map[string]string{"models/a.sql": "select 1"})
			f.SetRequiredChecks(testRepo, "main", "gapless")
			head := f.PR(testRepo, n).HeadSHA
			for _, c := range tc.conclusions {
				body := object{"name": "gapless", "head_sha": head, "status": "in_progress"}
				if c != "" {
					body["conclusion"] = c
				}
				status, out := a.createRun(body)
				require.Equal(t, http.StatusCreated, status, "%v", out)
			}
			require.Equal(t, tc.allowed, f.MergeAllowed(testRepo, n))
			state := f.PR(testRepo, n).MergeableState
			if tc.allowed {
				require.Equal(t, "clean", state)
			} else {
				require.Equal(t, "blocked", state)
			}
			// The merge endpoint agrees with the oracle.
			resp, body := a.do("PUT", fmt.Sprintf("repos/%s/pulls/%d/merge", testRepo, n), object{"sha": head})
			if tc.allowed {
				require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
			} else {
				require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
				require.Contains(t, decode[object](t, body)["message"], `Required status check "gapless"`)
			}
		})
	}
}

// Scenario: a required check on another head does not count, nor does a
// run of another name.
func TestMergeAllowedLooksOnlyAtTheHead(t *testing.T) {
	f, _, a := setup(t, githubfake.Options{})
	n := openPR(f, map[string]string{"models/a.sql": "select 1"})
	f.SetRequiredChecks(testRepo, "main", "gapless", "lint")
	old := f.PR(testRepo, n).HeadSHA
	for _, name := range []string{"gapless", "lint"} {
		status, _ := a.createRun(object{"name": name, "head_sha": old, "conclusion": "success"})
		require.Equal(t, http.StatusCreated, status)
	}
	require.True(t, f.MergeAllowed(testRepo, n))
	head := f.Commit(testRepo, "feature", map[string]string{"models/a.sql": "select 10"}, "push")
	require.False(t, f.MergeAllowed(testRepo, n), "the checks were on the old head")
	status, _ := a.createRun(object{"name": "gapless", "head_sha": head, "conclusion": "success"})
	require.Equal(t, http.StatusCreated, status)
	require.False(t, f.MergeAllowed(testRepo, n), "lint is still missing")
	status, _ = a.createRun(object{"name": "lint", "head_sha": head, "conclusion": "skipped"})
	require.Equal(t, http.StatusCreated, status)
	require.True(t, f.MergeAllowed(testRepo, n))

	f.SetMergeable(testRepo, n, nil, "dirty")
	require.False(t, f.MergeAllowed(testRepo, n), "an override saying dirty blocks")
	f.SetMergeable(testRepo, n, nil, "")
	require.True(t, f.MergeAllowed(testRepo, n))
}
