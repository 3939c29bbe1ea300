package githubfake_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"

	gh "github.com/google/go-github/v88/github"
	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/codehost"
	"github.com/gapless-dev/gapless/codehost/githubfake"
)

var secret = []byte("s3cret")

// hook starts a webhook receiver and points the fake at it.
func hook(t *testing.T, f *githubfake.Fake) *receiver {
	t.Helper()
	rc := &receiver{}
	srv := httptest.NewServer(rc)
	t.Cleanup(srv.Close)
	f.SetWebhook(srv.URL+"/webhook", secret)
	return rc
}

var guid = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

func sha1Sig(body []byte) string {
	mac := hmac.New(sha1.New, secret)
	mac.Write(body)
	return "sha1=" + hex.EncodeToString(mac.Sum(nil))
}

// requireSigned checks a delivery carries every header GitHub sends, both
// signatures valid.
func requireSigned(t *testing.T, f *githubfake.Fake, r received, event string) {
	t.Helper()
	require.Equal(t, event, r.header.Get("X-GitHub-Event"))
	require.Regexp(t, guid, r.header.Get("X-GitHub-Delivery"))
	require.NotEmpty(t, r.header.Get("X-GitHub-Hook-ID"))
	require.Equal(t, strconv.FormatInt(f.AppID(), 10), r.header.Get("X-GitHub-Hook-Installation-Target-ID"))
	require.Equal(t, "integration", r.header.Get("X-GitHub-Hook-Installation-Target-Type"))
	require.True(t, strings.HasPrefix(r.header.Get("User-Agent"), "GitHub-Hookshot/"))
	require.Equal(t, "application/json", r.header.Get("Content-Type"))
	require.NoError(t, codehost.VerifySignature(secret, r.body, r.header.Get(codehost.SignatureHeader)))
	require.Equal(t, sha1Sig(r.body), r.header.Get("X-Hub-Signature"))
}

// Scenario: every control method delivers GitHub's webhook, signed,
// synchronously, with GitHub's payload: pull_request opened and
// synchronize, push, issue_comment created on a pull request, closed with
// merged true.
func TestControlMethodsDeliverSignedWebhooks(t *testing.T) {
	f, _, _ := setup(t, githubfake.Options{})
	rc := hook(t, f)

	n := openPR(f, map[string]string{"models/a.sql": "select 1"})
	got := rc.all()
	require.Len(t, got, 2, "the push that made the branch, then opened")
	requireSigned(t, f, got[0], "push")
	requireSigned(t, f, got[1], "pull_request")
	require.NotEqual(t, got[0].header.Get("X-GitHub-Delivery"), got[1].header.Get("X-GitHub-Delivery"))

	var opened gh.PullRequestEvent
	require.NoError(t, json.Unmarshal(got[1].body, &opened))
	require.Equal(t, "opened", opened.GetAction())
	require.Equal(t, n, opened.GetNumber())
	require.Equal(t, testRepo, opened.GetRepo().GetFullName())
	require.Equal(t, "alice", opened.GetSender().GetLogin())
	require.Equal(t, f.InstallationID(testRepo), opened.GetInstallation().GetID())
	require.Equal(t, "feature", opened.GetPullRequest().GetHead().GetRef())
	require.Equal(t, f.PR(testRepo, n).HeadSHA, opened.GetPullRequest().GetHead().GetSHA())
	raw := decode[object](t, got[1].body)["pull_request"].(object)
	require.Contains(t, raw, "mergeable")
	require.Nil(t, raw["mergeable"], "mergeability is not known when the event is sent")

	before := f.PR(testRepo, n).HeadSHA
	after := f.Commit(testRepo, "feature", map[string]string{"models/b.sql": "select 2"}, "push")
	got = rc.all()[2:]
	require.Len(t, got, 2)
	requireSigned(t, f, got[0], "push")
	var push gh.PushEvent
	require.NoError(t, json.Unmarshal(got[0].body, &push))
	require.Equal(t, "refs/heads/feature", push.GetRef())
	require.Equal(t, before, push.GetBefore())
	require.Equal(t, after, push.GetAfter())
	require.Equal(t, []string{"models/b.sql"}, push.GetHeadCommit().Added)
	var sync gh.PullRequestEvent
	require.NoError(t, json.Unmarshal(got[1].body, &sync))
	require.Equal(t, "synchronize", sync.GetAction())
	require.Equal(t, before, sync.GetBefore())
	require.Equal(t, after, sync.GetAfter())

	id := f.AddComment(testRepo, n, "bob", "/deploy")
	got = rc.all()[4:]
	require.Len(t, got, 1)
	requireSigned(t, f, got[0], "issue_comment")
	var ic gh.IssueCommentEvent
	require.NoError(t, json.Unmarshal(got[0].body, &ic))
	require.Equal(t, "created", ic.GetAction())
	require.Equal(t, id, ic.GetComment().GetID())
	require.Equal(t, "/deploy", ic.GetComment().GetBody())
	require.Equal(t, "bob", ic.GetSender().GetLogin())
	require.True(t, ic.GetIssue().IsPullRequest(), "a pull request's comment has issue.pull_request")
	require.Equal(t, n, ic.GetIssue().GetNumber())

	sha := f.MergeByUser(testRepo, n, "carol")
	got = rc.all()[5:]
	require.Len(t, got, 2)
	var closed gh.PullRequestEvent
	require.NoError(t, json.Unmarshal(got[0].body, &closed))
	require.Equal(t, "closed", closed.GetAction())
	require.True(t, closed.GetPullRequest().GetMerged())
	require.Equal(t, sha, closed.GetPullRequest().GetMergeCommitSHA())
	require.Equal(t, "carol", closed.GetSender().GetLogin())
	require.NoError(t, json.Unmarshal(got[1].body, &push))
	require.Equal(t, "refs/heads/main", push.GetRef())
	require.Equal(t, sha, push.GetAfter())

	f.Commit(testRepo, "other", map[string]string{"c.sql": "select 3"}, "other")
	o := f.OpenPR(testRepo, githubfake.PRSpec{Author: "dan", Head: "other"})
	f.ClosePR(testRepo, o)
	last := rc.all()[len(rc.all())-1]
	require.NoError(t, json.Unmarshal(last.body, &closed))
	require.Equal(t, "closed", closed.GetAction())
	require.False(t, closed.GetPullRequest().GetMerged())

	ds := f.Deliveries()
	require.Len(t, ds, len(rc.all()))
	for i, d := range ds {
		require.Equal(t, http.StatusAccepted, d.Status)
		require.NoError(t, d.Err)
		require.Equal(t, rc.all()[i].header.Get("X-GitHub-Delivery"), d.ID)
		require.Equal(t, rc.all()[i].body, d.Body)
	}
}

// Scenario: each tamper mode spoils exactly what it says.
func TestDeliverTamperedModes(t *testing.T) {
	f, _, _ := setup(t, githubfake.Options{})
	rc := hook(t, f)
	n := openPR(f, map[string]string{"models/a.sql": "select 1"})
	payload := f.PullRequestPayload(testRepo, n, "synchronize")
	require.NotNil(t, payload)
	skip := len(rc.all())

	for _, tc := range []struct {
		name   string
		tamper githubfake.Tamper
		check  func(t *testing.T, r received)
	}{
		{"none", githubfake.TamperNone, func(t *testing.T, r received) {
			requireSigned(t, f, r, "pull_request")
		}},
		{"bad signature", githubfake.TamperBadSignature, func(t *testing.T, r received) {
			require.NotEmpty(t, r.header.Get(codehost.SignatureHeader))
			require.ErrorIs(t, codehost.VerifySignature(secret, r.body, r.header.Get(codehost.SignatureHeader)), codehost.ErrSignature)
			require.NotEqual(t, sha1Sig(r.body), r.header.Get("X-Hub-Signature"))
		}},
		{"no signature", githubfake.TamperNoSignature, func(t *testing.T, r received) {
			require.Empty(t, r.header.Get(codehost.SignatureHeader))
			require.Empty(t, r.header.Get("X-Hub-Signature"))
			require.NotEmpty(t, r.header.Get("X-GitHub-Delivery"))
		}},
		{"sha1 only", githubfake.TamperSHA1Only, func(t *testing.T, r received) {
			require.Empty(t, r.header.Get(codehost.SignatureHeader))
			require.Equal(t, sha1Sig(r.body), r.header.Get("X-Hub-Signature"))
		}},
		{"no delivery id", githubfake.TamperNoDeliveryID, func(t *testing.T, r received) {
			require.Empty(t, r.header.Get("X-GitHub-Delivery"))
			require.NoError(t, codehost.VerifySignature(secret, r.body, r.header.Get(codehost.SignatureHeader)))
		}},
		{"oversized", githubfake.TamperOversized, func(t *testing.T, r received) {
			require.Len(t, r.body, githubfake.OversizedBytes)
			// Padded with JSON whitespace before the closing brace: the body
			// stays the same JSON.
			require.True(t, bytes.HasPrefix(r.body, payload[:len(payload)-1]))
			require.Equal(t, byte('}'), r.body[len(r.body)-1])
			require.Equal(t, len(r.body)-len(payload), bytes.Count(r.body[len(payload)-1:], []byte(" ")))
			require.NoError(t, codehost.VerifySignature(secret, r.body, r.header.Get(codehost.SignatureHeader)))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, err := f.DeliverTampered("pull_request", payload, tc.tamper)
			require.NoError(t, err)
			require.Equal(t, http.StatusAccepted, status)
			got := rc.all()
			require.Len(t, got, skip+1)
			skip++
			tc.check(t, got[len(got)-1])
		})
	}

	status, err := f.DeliverOversized("pull_request", payload, 1<<20+1)
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, status)
	require.Len(t, rc.all()[skip].body, 1<<20+1)
}

// Scenario: a redelivery repeats the id, body and signature: a replay the
// receiver must recognise by its id.
func TestRedeliverKeepsTheIDBodyAndSignature(t *testing.T) {
	f, _, _ := setup(t, githubfake.Options{})
	rc := hook(t, f)
	rc.status = http.StatusInternalServerError // GitHub never retries on its own
	n := openPR(f, map[string]string{"models/a.sql": "select 1"})
	ds := f.Deliveries()
	require.Len(t, ds, 2)
	require.Equal(t, http.StatusInternalServerError, ds[1].Status)
	require.Len(t, rc.all(), 2, "a failed delivery is not retried")

	rc.mu.Lock()
	rc.status = http.StatusAccepted
	rc.mu.Unlock()
	status, err := f.Redeliver(ds[1].ID)
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, status)
	got := rc.all()
	require.Len(t, got, 3)
	require.Equal(t, got[1].header.Get("X-GitHub-Delivery"), got[2].header.Get("X-GitHub-Delivery"))
	require.Equal(t, got[1].body, got[2].body)
	require.Equal(t, got[1].header.Get(codehost.SignatureHeader), got[2].header.Get(codehost.SignatureHeader))
	last := f.Deliveries()[2]
	require.True(t, last.Redelivery)
	require.Equal(t, ds[1].ID, last.ID)
	require.Equal(t, n, int(decode[object](t, last.Body)["number"].(float64)))

	_, err = f.Redeliver("no-such-id")
	require.Error(t, err)
}

// Scenario: a comment the bot posts through the API comes back as an
// issue_comment "created" (GitHub delivers the bot's own comments),
// asynchronously; Flush waits for it. NoAPIEvents turns that off.
func TestAPIChangesDeliverWebhooksAsynchronously(t *testing.T) {
	f, _, a := setup(t, githubfake.Options{})
	rc := hook(t, f)
	n := openPR(f, map[string]string{"models/a.sql": "select 1"})
	skip := len(rc.all())
	resp, body := a.do("POST", fmt.Sprintf("repos/%s/issues/%d/comments", testRepo, n), object{"body": "plan: 2 models"})
	require.Equal(t, http.StatusCreated, resp.StatusCode, "%s", body)
	id := int64(decode[object](t, body)["id"].(float64))
	resp, _ = a.do("PATCH", fmt.Sprintf("repos/%s/issues/comments/%d", testRepo, id), object{"body": "plan: 3 models"})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	f.Flush()
	got := rc.all()[skip:]
	require.Len(t, got, 2)
	var created, edited gh.IssueCommentEvent
	require.NoError(t, json.Unmarshal(got[0].body, &created))
	require.Equal(t, "created", created.GetAction())
	require.Equal(t, "ci-bot", created.GetSender().GetLogin())
	require.NoError(t, json.Unmarshal(got[1].body, &edited))
	require.Equal(t, "edited", edited.GetAction())
	require.Equal(t, "plan: 2 models", edited.GetChanges().GetBody().GetFrom())

	quiet, _, qa := setup(t, githubfake.Options{NoAPIEvents: true})
	qrc := hook(t, quiet)
	qn := openPR(quiet, map[string]string{"models/a.sql": "select 1"})
	resp, _ = qa.do("POST", fmt.Sprintf("repos/%s/issues/%d/comments", testRepo, qn), object{"body": "x"})
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	quiet.Flush()
	require.Len(t, qrc.all(), 2, "only the control methods' push and opened")
}

func TestDeliverWithoutAWebhookIsAnError(t *testing.T) {
	f, _, _ := setup(t, githubfake.Options{})
	_, err := f.Deliver("ping", object{"zen": "Keep it logically awesome."})
	require.ErrorIs(t, err, githubfake.ErrNoWebhook)
	openPR(f, map[string]string{"a.sql": "select 1"}) // no webhook: nothing is sent, nothing blocks
	require.Empty(t, f.Deliveries())
}
