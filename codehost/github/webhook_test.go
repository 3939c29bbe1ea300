package github_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/codehost"
	"github.com/gapless-dev/gapless/codehost/github"
	"github.com/gapless-dev/gapless/codehost/githubfake"
)

// Scenario: the fake delivers what GitHub would for a PR opened, pushed
// to, commented on, merged, a push to main and a check run; each verified
// delivery parses into the event gapless acts on.
func TestParseWebhookOnTheFakesDeliveries(t *testing.T) {
	t.Parallel()
	f, clock := newFake(t)
	secret := []byte("whsec")
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusAccepted)
	}))
	t.Cleanup(receiver.Close)
	f.SetWebhook(receiver.URL, secret)

	first := f.Commit(testRepo, "feature", map[string]string{"models/a.sql": "select 1"}, "feature")
	n := f.OpenPR(testRepo, githubfake.PRSpec{Title: "Feature", Author: "alice", Head: "feature", Base: "main"})
	second := f.Commit(testRepo, "feature", map[string]string{"models/a.sql": "select 2"}, "push")
	commentID := f.AddComment(testRepo, n, "bob", "/deploy")
	c := newAppClient(t, f, clock, nil)
	_, err := c.UpsertCheckRun(t.Context(), testRepo, codehost.CheckRun{HeadSHA: second, Name: "gapless", Status: codehost.StatusQueued})
	require.NoError(t, err)
	merged, err := c.Merge(t.Context(), testRepo, n, second, codehost.MergeSquash)
	require.NoError(t, err)
	f.Flush()

	var events []codehost.Event
	for _, d := range f.Deliveries() {
		require.NoError(t, codehost.VerifySignature(secret, d.Body, d.Header.Get(codehost.SignatureHeader)), d.Event)
		ev, err := github.ParseWebhook(d.Header.Get("X-GitHub-Event"), d.Header.Get("X-GitHub-Delivery"), d.Body)
		require.NoError(t, err, d.Event)
		require.Equal(t, d.ID, ev.DeliveryID)
		require.Equal(t, testRepo, ev.Repo, d.Event)
		require.Equal(t, f.InstallationID(testRepo), ev.InstallationID, d.Event)
		require.NotEmpty(t, ev.Sender, d.Event)
		events = append(events, ev)
	}

	find := func(kind, action string, match func(codehost.Event) bool) codehost.Event {
		t.Helper()
		for _, ev := range events {
			if ev.Kind == kind && ev.Action == action && (match == nil || match(ev)) {
				return ev
			}
		}
		require.Failf(t, "no such delivery", "%s %s among %d deliveries", kind, action, len(events))
		return codehost.Event{}
	}

	push := find("push", "", func(ev codehost.Event) bool { return ev.After == first })
	require.Equal(t, "refs/heads/feature", push.Ref)

	opened := find("pull_request", "opened", nil)
	require.Equal(t, n, opened.Number)
	require.NotNil(t, opened.PR)
	require.Equal(t, n, opened.PR.Number)
	require.Equal(t, first, opened.PR.HeadSHA)
	require.Equal(t, "feature", opened.PR.HeadRef)
	require.Equal(t, "main", opened.PR.BaseRef)
	require.Equal(t, "alice", opened.PR.Author)
	require.True(t, opened.PR.Open())
	require.Nil(t, opened.PR.Mergeable, "a delivery carries no mergeability")
	require.Empty(t, opened.PR.MergeCommitSHA)
	require.Equal(t, "alice", opened.Sender)

	sync := find("pull_request", "synchronize", nil)
	require.Equal(t, second, sync.PR.HeadSHA)

	comment := find("issue_comment", "created", func(ev codehost.Event) bool { return ev.Comment != nil && ev.Comment.ID == commentID })
	require.True(t, comment.OnPR)
	require.Equal(t, n, comment.Number)
	require.Equal(t, "/deploy", comment.Comment.Body)
	require.Equal(t, "bob", comment.Comment.Author)
	require.Equal(t, "bob", comment.Sender)

	closed := find("pull_request", "closed", nil)
	require.True(t, closed.PR.Merged)
	require.False(t, closed.PR.Open())
	require.Equal(t, merged, closed.PR.MergeCommitSHA, "a merged PR's merge commit is kept")

	mainPush := find("push", "", func(ev codehost.Event) bool { return ev.Ref == "refs/heads/main" })
	require.Equal(t, merged, mainPush.After)
}

func TestParseWebhookRefusesWhatIsNoPayload(t *testing.T) {
	t.Parallel()
	_, err := github.ParseWebhook("pull_request", "d1", []byte("not json"))
	require.ErrorContains(t, err, `the pull_request delivery "d1" is not a JSON object`)
	_, err = github.ParseWebhook("pull_request", "d2", []byte(`{"action":"opened"}`))
	require.ErrorContains(t, err, "carries no pull_request")
	_, err = github.ParseWebhook("issue_comment", "d3", []byte(`{"action":"created"}`))
	require.ErrorContains(t, err, "carries no issue or comment")
	_, err = github.ParseWebhook("", "d4", []byte(`{}`))
	require.ErrorContains(t, err, "event type")

	ev, err := github.ParseWebhook("ping", "d5", []byte(`{"zen":"Keep it logically awesome.","hook_id":1}`))
	require.NoError(t, err)
	require.Equal(t, codehost.Event{Kind: "ping", DeliveryID: "d5"}, ev)
	ev, err = github.ParseWebhook("workflow_run", "d6", []byte(`{"action":"requested","repository":{"full_name":"acme/x"},"installation":{"id":7},"sender":{"login":"eve"}}`))
	require.NoError(t, err)
	require.Equal(t, codehost.Event{Kind: "workflow_run", DeliveryID: "d6", Action: "requested", Repo: "acme/x", InstallationID: 7, Sender: "eve"}, ev)

	_, err = github.ParseWebhook("check_run", "d7", []byte(`{"action":"rerequested"}`))
	require.ErrorContains(t, err, "carries no check_run")
	_, err = github.ParseWebhook("check_suite", "d8", []byte(`{"action":"rerequested"}`))
	require.ErrorContains(t, err, "carries no check_suite")
	ev, err = github.ParseWebhook("check_run", "d9", []byte(`{"action":"rerequested","check_run":{"head_sha":"abc","pull_requests":[{"number":7}]},"repository":{"full_name":"acme/x"}}`))
	require.NoError(t, err)
	require.Equal(t, codehost.Event{Kind: "check_run", DeliveryID: "d9", Action: "rerequested", Repo: "acme/x", After: "abc", Number: 7}, ev)
	ev, err = github.ParseWebhook("check_suite", "d10", []byte(`{"action":"rerequested","check_suite":{"head_sha":"def","pull_requests":[]},"repository":{"full_name":"acme/x"}}`))
	require.NoError(t, err)
	require.Equal(t, codehost.Event{Kind: "check_suite", DeliveryID: "d10", Action: "rerequested", Repo: "acme/x", After: "def"}, ev)
}

// FuzzParseWebhook: never a panic, whatever the body.
func FuzzParseWebhook(f *testing.F) {
	f.Add("pull_request", []byte(`{"action":"opened","number":1,"pull_request":{"number":1,"head":{"sha":"a"}}}`))
	f.Add("issue_comment", []byte(`{"action":"created","issue":{"number":2,"pull_request":{}},"comment":{"id":3,"body":"/deploy"}}`))
	f.Add("push", []byte(`{"ref":"refs/heads/main","after":"b"}`))
	f.Add("push", []byte(`[]`))
	f.Fuzz(func(t *testing.T, kind string, body []byte) {
		_, _ = github.ParseWebhook(kind, "d", body)
	})
}
