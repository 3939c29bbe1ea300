package githubfake_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/codehost"
	"github.com/gapless-dev/gapless/codehost/githubfake"
)

// Scenario: a SHA-pinned merge after a push answers 409; once pinned to
// the new head it merges: the base moves to a merge commit holding both
// sides, the pull request closes as merged, and a sibling pull request
// on the same base gets a new test merge.
func TestMergeIsPinnedToTheHeadAndMovesTheBase(t *testing.T) {
	f, _, a := setup(t, githubfake.Options{})
	f.Commit(testRepo, "main", map[string]string{"models/base.sql": "select 0"}, "base")
	n := openPR(f, map[string]string{"models/a.sql": "select 1"})
	f.Commit(testRepo, "other", map[string]string{"models/b.sql": "select 2"}, "other")
	sibling := f.OpenPR(testRepo, githubfake.PRSpec{Title: "Other", Author: "bob", Head: "other"})

	old := f.PR(testRepo, n).HeadSHA
	head := f.Commit(testRepo, "feature", map[string]string{"models/a.sql": "select 11"}, "push")
	siblingMerge := f.PR(testRepo, sibling).MergeCommitSHA
	require.NotEmpty(t, siblingMerge)

	path := fmt.Sprintf("repos/%s/pulls/%d/merge", testRepo, n)
	resp, body := a.do("PUT", path, object{"sha": old, "merge_method": "squash"})
	require.Equal(t, http.StatusConflict, resp.StatusCode)
	require.Equal(t, "Head branch was modified. Review and try the merge again.", decode[object](t, body)["message"])
	require.Equal(t, "open", f.PR(testRepo, n).State, "a refused merge changes nothing")

	resp, body = a.do("PUT", path, object{"sha": head, "merge_method": "nope"})
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, "%s", body)

	resp, body = a.do("PUT", path, object{"sha": head, "merge_method": "merge", "commit_title": "Deploy #1"})
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	result := decode[object](t, body)
	require.Equal(t, true, result["merged"])
	require.Equal(t, "Pull Request successfully merged", result["message"])
	sha := result["sha"].(string)
	require.Equal(t, sha, f.Branch(testRepo, "main"))
	require.Equal(t, map[string]string{"models/base.sql": "select 0", "models/a.sql": "select 11"}, f.Files(testRepo, sha))

	pr := f.PR(testRepo, n)
	require.Equal(t, "closed", pr.State)
	require.True(t, pr.Merged)
	require.Equal(t, sha, pr.MergeCommitSHA)
	resp, body = a.do("GET", fmt.Sprintf("repos/%s/pulls/%d", testRepo, n), nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	got := decode[object](t, body)
	require.Equal(t, true, got["merged"])
	require.Equal(t, "ci-bot", got["merged_by"].(object)["login"])
	require.Equal(t, sha, got["merge_commit_sha"])

	require.NotEqual(t, siblingMerge, f.PR(testRepo, sibling).MergeCommitSHA, "the sibling's test merge follows the new base")
	require.Equal(t, sha, f.PR(testRepo, sibling).BaseSHA)
	require.Equal(t, map[string]string{
		"models/base.sql": "select 0", "models/a.sql": "select 11", "models/b.sql": "select 2",
	}, f.Files(testRepo, f.PR(testRepo, sibling).MergeCommitSHA))

	resp, _ = a.do("PUT", path, object{"sha": head})
	require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode, "a merged pull request is not mergeable")
}

// Scenario: both sides changed one file differently: the pull request is
// dirty, mergeable false, and a merge answers 405. A draft answers 405
// too.
func TestConflictAndDraftAre405(t *testing.T) {
	f, _, a := setup(t, githubfake.Options{})
	f.Commit(testRepo, "main", map[string]string{"models/a.sql": "select 1"}, "base")
	n := openPR(f, map[string]string{"models/a.sql": "select 2"})
	require.Equal(t, "clean", f.PR(testRepo, n).MergeableState)
	f.Commit(testRepo, "main", map[string]string{"models/a.sql": "select 3"}, "conflicting")

	pr := f.PR(testRepo, n)
	require.NotNil(t, pr.Mergeable)
	require.False(t, *pr.Mergeable)
	require.Equal(t, "dirty", pr.MergeableState)
	require.Empty(t, pr.MergeCommitSHA)
	require.False(t, f.MergeAllowed(testRepo, n))
	resp, body := a.do("PUT", fmt.Sprintf("repos/%s/pulls/%d/merge", testRepo, n), object{"sha": pr.HeadSHA})
	require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
	require.Equal(t, "Pull Request is not mergeable", decode[object](t, body)["message"])

	f.Commit(testRepo, "draft", map[string]string{"models/d.sql": "select 4"}, "draft work")
	d := f.OpenPR(testRepo, githubfake.PRSpec{Title: "WIP", Author: "bob", Head: "draft", Draft: true})
	require.Equal(t, "draft", f.PR(testRepo, d).MergeableState)
	require.False(t, f.MergeAllowed(testRepo, d))
	resp, _ = a.do("PUT", fmt.Sprintf("repos/%s/pulls/%d/merge", testRepo, d), nil)
	require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)

	f.ClosePR(testRepo, d)
	require.False(t, f.MergeAllowed(testRepo, d))
	f.ReopenPR(testRepo, d)
	require.Equal(t, "open", f.PR(testRepo, d).State)
}

// Scenario: a test merge takes base's tree and the paths head changed
// since their merge base: a deletion on head deletes, a change on base
// stays, and one change made identically on both sides is no conflict.
func TestTestMergeOverlaysHeadChangesOnBase(t *testing.T) {
	f, _, _ := setup(t, githubfake.Options{})
	f.Commit(testRepo, "main", map[string]string{"a.sql": "select 1", "b.sql": "select 2", "same.sql": "v1"}, "base")
	n := openPR(f, map[string]string{"a.sql": "", "same.sql": "v2", "c.sql": "select 3"})
	require.Equal(t, map[string]string{"b.sql": "select 2", "same.sql": "v2", "c.sql": "select 3"}, f.Files(testRepo, "feature"))
	f.Commit(testRepo, "main", map[string]string{"b.sql": "select 22", "same.sql": "v2", "d.sql": "select 4"}, "main moves")
	pr := f.PR(testRepo, n)
	require.Equal(t, "clean", pr.MergeableState)
	require.Equal(t, f.Branch(testRepo, "main"), pr.BaseSHA)
	require.Equal(t, map[string]string{
		"b.sql": "select 22", "same.sql": "v2", "c.sql": "select 3", "d.sql": "select 4",
	}, f.Files(testRepo, pr.MergeCommitSHA))
	// Recomputing an unchanged pull request (closed and reopened) keeps
	// its test merge.
	f.ClosePR(testRepo, n)
	f.ReopenPR(testRepo, n)
	require.Equal(t, pr.MergeCommitSHA, f.PR(testRepo, n).MergeCommitSHA)
}

// Scenario: with LazyMergeability, mergeable is null and
// merge_commit_sha empty after every change until SettleMergeability.
func TestLazyMergeabilityStaysNullUntilSettled(t *testing.T) {
	f, _, a := setup(t, githubfake.Options{LazyMergeability: true})
	n := openPR(f, map[string]string{"models/a.sql": "select 1"})
	get := func() object {
		resp, body := a.do("GET", fmt.Sprintf("repos/%s/pulls/%d", testRepo, n), nil)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		return decode[object](t, body)
	}
	pr := get()
	require.Contains(t, pr, "mergeable")
	require.Nil(t, pr["mergeable"], "GitHub writes mergeable: null while computing")
	require.Nil(t, pr["merge_commit_sha"])
	require.Equal(t, "unknown", pr["mergeable_state"])

	f.SettleMergeability()
	pr = get()
	require.Equal(t, true, pr["mergeable"])
	require.Equal(t, "clean", pr["mergeable_state"])
	first := pr["merge_commit_sha"].(string)
	require.Len(t, first, 40)

	f.Commit(testRepo, "main", map[string]string{"models/z.sql": "select 9"}, "base moves")
	require.Nil(t, get()["mergeable"])
	f.SettleMergeability()
	require.NotEqual(t, first, get()["merge_commit_sha"])
	require.True(t, f.MergeAllowed(testRepo, n), "the merge button computes mergeability itself")
}

func TestListPullsFiltersAndPages(t *testing.T) {
	f, _, a := setup(t, githubfake.Options{})
	for i := range 5 {
		branch := fmt.Sprintf("b%d", i)
		f.Commit(testRepo, branch, map[string]string{branch + ".sql": "select 1"}, branch)
		f.OpenPR(testRepo, githubfake.PRSpec{Title: branch, Author: "alice", Head: branch})
	}
	f.Commit(testRepo, "release", nil, "release")
	f.Commit(testRepo, "hotfix", map[string]string{"h.sql": "select 1"}, "hotfix")
	f.OpenPR(testRepo, githubfake.PRSpec{Author: "alice", Head: "hotfix", Base: "release"})
	f.ClosePR(testRepo, 2)

	resp, body := a.do("GET", "repos/"+testRepo+"/pulls?base=main&per_page=2", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	got := decode[[]object](t, body)
	require.Len(t, got, 2)
	require.EqualValues(t, 5, got[0]["number"], "newest first by default")
	require.EqualValues(t, 4, got[1]["number"])
	require.NotContains(t, got[0], "mergeable", "the list's items carry no mergeability")
	require.Contains(t, resp.Header.Get("Link"), `rel="next"`)

	resp, body = a.do("GET", "repos/"+testRepo+"/pulls?base=main&per_page=2&page=2", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	got = decode[[]object](t, body)
	require.Len(t, got, 2)
	require.EqualValues(t, 3, got[0]["number"])
	require.EqualValues(t, 1, got[1]["number"], "the closed #2 is left out")

	resp, body = a.do("GET", "repos/"+testRepo+"/pulls?state=all&direction=asc&per_page=100", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Len(t, decode[[]object](t, body), 6)
	resp, body = a.do("GET", "repos/"+testRepo+"/pulls?base=release", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Len(t, decode[[]object](t, body), 1)
}

// Scenario: the tarball route redirects to a codeload-like link on the
// fake, which serves the commit's tree under GitHub's top folder
// "<owner>-<repo>-<sha7>/", after a pax global header carrying the sha.
func TestTarballRedirectsToAnArchiveOfTheCommit(t *testing.T) {
	f, clock, a := setup(t, githubfake.Options{})
	sha := f.Commit(testRepo, "main", map[string]string{
		"gapless.yaml": "name: acme", "models/orders.sql": "select 1", "models/sub/x.sql": "select 2",
	}, "project")
	resp, _ := a.do("GET", fmt.Sprintf("repos/%s/tarball/%s", testRepo, sha), nil)
	require.Equal(t, http.StatusFound, resp.StatusCode)
	loc := resp.Header.Get("Location")
	require.Contains(t, loc, f.URL())

	// The link needs no Authorization, like codeload.
	archive, err := noRedirects.Get(loc)
	require.NoError(t, err)
	defer archive.Body.Close()
	require.Equal(t, http.StatusOK, archive.StatusCode)
	gz, err := gzip.NewReader(archive.Body)
	require.NoError(t, err)
	tr := tar.NewReader(gz)
	top := fmt.Sprintf("acme-warehouse-%s/", sha[:7])
	files := map[string]string{}
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		if h.Typeflag == tar.TypeXGlobalHeader {
			// git archive's pax global header: a reader that treats every
			// entry as a file trips on it, as on GitHub's.
			require.Empty(t, names, "the global header comes first")
			require.Equal(t, sha, h.PAXRecords["comment"])
			names = append(names, "(global header)")
			continue
		}
		names = append(names, h.Name)
		if h.Typeflag == tar.TypeReg {
			b, err := io.ReadAll(tr)
			require.NoError(t, err)
			require.True(t, bytes.HasPrefix([]byte(h.Name), []byte(top)), h.Name)
			files[h.Name[len(top):]] = string(b)
		}
	}
	require.Equal(t, []string{"(global header)", top}, names[:2], "the top folder comes first")
	require.Equal(t, map[string]string{
		"gapless.yaml": "name: acme", "models/orders.sql": "select 1", "models/sub/x.sql": "select 2",
	}, files)
	require.Contains(t, names, top+"models/")
	require.Contains(t, names, top+"models/sub/")

	// A branch name works as the ref; the link expires after five minutes.
	resp, _ = a.do("GET", fmt.Sprintf("repos/%s/tarball/main", testRepo), nil)
	require.Equal(t, http.StatusFound, resp.StatusCode)
	clock.Advance(5 * time.Minute)
	expired, err := noRedirects.Get(resp.Header.Get("Location"))
	require.NoError(t, err)
	expired.Body.Close()
	require.Equal(t, http.StatusNotFound, expired.StatusCode)

	resp, _ = a.do("GET", fmt.Sprintf("repos/%s/tarball/nosuchref", testRepo), nil)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	resp, body := a.do("GET", fmt.Sprintf("repos/%s/commits/%s", testRepo, sha), nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, sha, decode[object](t, body)["sha"])
}

// Scenario: the permission endpoint maps maintain to write and triage to
// read, keeping the full role in role_name, as GitHub documents.
func TestPermissionMapsRolesToLegacyPermissions(t *testing.T) {
	f, _, a := setup(t, githubfake.Options{})
	f.SetPermission(testRepo, "mia", codehost.PermissionMaintain)
	f.SetPermission(testRepo, "tom", codehost.PermissionTriage)
	f.SetPermission(testRepo, "wes", codehost.PermissionWrite)
	f.SetPermission(testRepo, "rae", codehost.PermissionRead)
	for _, tc := range []struct{ user, permission, role string }{
		{"mia", "write", "maintain"},
		{"tom", "read", "triage"},
		{"wes", "write", "write"},
		{"rae", "read", "read"},
		{"acme", "admin", "admin"},
		{"stranger", "none", "none"},
	} {
		resp, body := a.do("GET", fmt.Sprintf("repos/%s/collaborators/%s/permission", testRepo, tc.user), nil)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		got := decode[object](t, body)
		require.Equal(t, tc.permission, got["permission"], tc.user)
		require.Equal(t, tc.role, got["role_name"], tc.user)
		require.Equal(t, tc.user, got["user"].(object)["login"])
	}
}

func TestBranchProtectionRequiredChecks(t *testing.T) {
	f, _, a := setup(t, githubfake.Options{})
	resp, body := a.do("GET", "repos/"+testRepo+"/branches/main/protection", nil)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	require.Equal(t, "Branch not protected", decode[object](t, body)["message"])

	f.SetRequiredChecks(testRepo, "main", "gapless", "lint")
	resp, body = a.do("GET", "repos/"+testRepo+"/branches/main/protection", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	rsc := decode[object](t, body)["required_status_checks"].(object)
	require.Equal(t, false, rsc["strict"])
	require.Equal(t, []any{"gapless", "lint"}, rsc["contexts"])
	checks := rsc["checks"].([]any)
	require.Len(t, checks, 2)
	require.Equal(t, "gapless", checks[0].(object)["context"])

	resp, body = a.do("GET", "repos/"+testRepo+"/branches/main", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	branch := decode[object](t, body)
	require.Equal(t, true, branch["protected"])

	f.SetRequiredChecks(testRepo, "main")
	resp, _ = a.do("GET", "repos/"+testRepo+"/branches/main/protection", nil)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
}

func TestControlMisuseIsReportedNotPanicked(t *testing.T) {
	f, err := githubfake.New(githubfake.Options{})
	require.NoError(t, err)
	defer f.Close()
	require.Zero(t, f.OpenPR("no/such", githubfake.PRSpec{Head: "x"}))
	require.Empty(t, f.Commit("no/such", "main", nil, "x"))
	f.Fail("GET /nowhere", 500, 1)
	require.Error(t, f.Err())
	require.Contains(t, f.Err().Error(), "no/such")
	require.Contains(t, f.Err().Error(), "/nowhere")
}
