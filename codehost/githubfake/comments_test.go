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

// Scenario: a client asks the per-issue comments list for the newest
// first (sort=created&direction=desc), as SchemaBot did; GitHub ignores
// both and answers oldest first, so must the fake.
func TestCommentsAreOldestFirstIgnoringSortAndDirection(t *testing.T) {
	f, clock, a := setup(t, githubfake.Options{})
	n := openPR(f, map[string]string{"models/a.sql": "select 1"})
	var ids []int64
	for i := range 5 {
		ids = append(ids, f.AddComment(testRepo, n, "alice", fmt.Sprintf("comment %d", i)))
		clock.Advance(time.Minute)
	}
	for _, q := range []string{"", "?sort=created&direction=desc", "?direction=desc", "?sort=updated&direction=asc"} {
		resp, body := a.do("GET", fmt.Sprintf("repos/%s/issues/%d/comments%s", testRepo, n, q), nil)
		require.Equal(t, http.StatusOK, resp.StatusCode, "query %q", q)
		got := decode[[]object](t, body)
		require.Len(t, got, 5)
		for i, c := range got {
			require.EqualValues(t, ids[i], c["id"], "query %q: position %d", q, i)
			require.Equal(t, fmt.Sprintf("comment %d", i), c["body"])
		}
		require.Empty(t, resp.Header.Get("Link"), "one page has no Link header")
	}
	// created_at comes from the fake clock.
	resp, body := a.do("GET", fmt.Sprintf("repos/%s/issues/comments/%d", testRepo, ids[2]), nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, start.Add(2*time.Minute).Format(time.RFC3339), decode[object](t, body)["created_at"])
}

// Scenario: a pull request has 150 comments; the marker is on the last
// one. A client reading only the first page of 100 misses it; following
// Link rel="next" finds it.
func TestCommentsPageByHundredWithLinkNext(t *testing.T) {
	f, _, a := setup(t, githubfake.Options{})
	n := openPR(f, map[string]string{"models/a.sql": "select 1"})
	for i := range 150 {
		body := fmt.Sprintf("chatter %d", i)
		if i == 149 {
			body = "<!-- gapless:summary --> plan"
		}
		f.AddComment(testRepo, n, "alice", body)
	}
	path := fmt.Sprintf("repos/%s/issues/%d/comments", testRepo, n)
	base := strings.TrimSuffix(f.URL(), "/") + "/" + path

	resp, body := a.do("GET", path+"?per_page=100", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	first := decode[[]object](t, body)
	require.Len(t, first, 100)
	for _, c := range first {
		require.NotContains(t, c["body"], "gapless:summary")
	}
	require.Equal(t,
		fmt.Sprintf(`<%s?per_page=100&page=2>; rel="next", <%s?per_page=100&page=2>; rel="last"`, base, base),
		resp.Header.Get("Link"))

	resp, body = a.do("GET", path+"?per_page=100&page=2", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	second := decode[[]object](t, body)
	require.Len(t, second, 50)
	require.Contains(t, second[49]["body"], "gapless:summary")
	require.Equal(t,
		fmt.Sprintf(`<%s?per_page=100&page=1>; rel="prev", <%s?per_page=100&page=1>; rel="first"`, base, base),
		resp.Header.Get("Link"))

	// per_page defaults to 30 and is clamped to 100.
	resp, body = a.do("GET", path, nil)
	require.Len(t, decode[[]object](t, body), 30)
	require.Contains(t, resp.Header.Get("Link"), `page=2>; rel="next"`)
	require.Contains(t, resp.Header.Get("Link"), `page=5>; rel="last"`)
	resp, body = a.do("GET", path+"?per_page=500&page=2", nil)
	require.Len(t, decode[[]object](t, body), 50)
	require.Contains(t, resp.Header.Get("Link"), `rel="prev"`)
	require.NotContains(t, resp.Header.Get("Link"), `rel="next"`)

	// A middle page carries all four relations, in GitHub's order.
	resp, _ = a.do("GET", path+"?page=3", nil)
	link := resp.Header.Get("Link")
	require.Equal(t, []string{"prev", "next", "last", "first"}, rels(link), link)
}

func rels(link string) []string {
	var out []string
	for _, part := range strings.Split(link, ", ") {
		_, rel, _ := strings.Cut(part, `rel="`)
		out = append(out, strings.TrimSuffix(rel, `"`))
	}
	return out
}

func TestCommentsSinceFiltersByUpdatedAt(t *testing.T) {
	f, clock, a := setup(t, githubfake.Options{})
	n := openPR(f, map[string]string{"models/a.sql": "select 1"})
	f.AddComment(testRepo, n, "alice", "old")
	clock.Advance(time.Hour)
	cut := clock.Now()
	f.AddComment(testRepo, n, "alice", "new")
	resp, body := a.do("GET", fmt.Sprintf("repos/%s/issues/%d/comments?since=%s", testRepo, n, cut.Format(time.RFC3339)), nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	got := decode[[]object](t, body)
	require.Len(t, got, 1)
	require.Equal(t, "new", got[0]["body"])
}

// Scenario: GitHub refuses a comment body past 65535 characters with 422
// "Validation Failed", on create and on edit.
func TestCommentBodyOver65535CharactersIs422(t *testing.T) {
	f, clock, a := setup(t, githubfake.Options{})
	n := openPR(f, map[string]string{"models/a.sql": "select 1"})
	path := fmt.Sprintf("repos/%s/issues/%d/comments", testRepo, n)

	// 65535 characters, multi-byte: characters count, not bytes.
	longest := strings.Repeat("é", codehost.MaxBodyLength)
	resp, body := a.do("POST", path, object{"body": longest})
	require.Equal(t, http.StatusCreated, resp.StatusCode, "%s", body)
	created := decode[object](t, body)
	require.Equal(t, "ci-bot", created["user"].(object)["login"])

	resp, body = a.do("POST", path, object{"body": strings.Repeat("x", codehost.MaxBodyLength+1)})
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	refusal := decode[object](t, body)
	require.Equal(t, "Validation Failed", refusal["message"])
	require.Equal(t, "IssueComment", refusal["errors"].([]any)[0].(object)["resource"])
	require.NotEmpty(t, refusal["documentation_url"])

	clock.Advance(time.Minute)
	id := int64(created["id"].(float64))
	edit := fmt.Sprintf("repos/%s/issues/comments/%d", testRepo, id)
	resp, _ = a.do("PATCH", edit, object{"body": strings.Repeat("x", codehost.MaxBodyLength+1)})
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	resp, body = a.do("PATCH", edit, object{"body": "short"})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	edited := decode[object](t, body)
	require.Equal(t, "short", edited["body"])
	require.Equal(t, start.Add(time.Minute).Format(time.RFC3339), edited["updated_at"])
	require.Equal(t, start.Format(time.RFC3339), edited["created_at"])

	resp, _ = a.do("POST", path, object{"body": ""})
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	resp, _ = a.do("POST", fmt.Sprintf("repos/%s/issues/999/comments", testRepo), object{"body": "x"})
	require.Equal(t, http.StatusNotFound, resp.StatusCode)

	require.Len(t, f.Comments(testRepo, n), 1)
	require.Equal(t, "short", f.Comments(testRepo, n)[0].Body)
}

func TestReactionIs201ThenOKWhenItExists(t *testing.T) {
	f, _, a := setup(t, githubfake.Options{})
	n := openPR(f, map[string]string{"models/a.sql": "select 1"})
	id := f.AddComment(testRepo, n, "alice", "/deploy")
	path := fmt.Sprintf("repos/%s/issues/comments/%d/reactions", testRepo, id)
	resp, body := a.do("POST", path, object{"content": "eyes"})
	require.Equal(t, http.StatusCreated, resp.StatusCode, "%s", body)
	first := decode[object](t, body)
	resp, body = a.do("POST", path, object{"content": "eyes"})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, first["id"], decode[object](t, body)["id"])
	resp, _ = a.do("POST", path, object{"content": "party"})
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	resp, _ = a.do("POST", fmt.Sprintf("repos/%s/issues/comments/1/reactions", testRepo), object{"content": "eyes"})
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
}
