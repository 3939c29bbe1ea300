package githubfake_test

import (
	"context"
	"net/http"
	"testing"

	gh "github.com/google/go-github/v88/github"
	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/codehost/githubfake"
)

// Scenario: go-github v88 behind ghinstallation, the client gapless uses,
// reads and writes the fake: its JSON decodes into go-github's types and
// its errors into go-github's error types.
func TestGoGitHubClientSpeaksToTheFake(t *testing.T) {
	f, _, _ := setup(t, githubfake.Options{})
	ctx := context.Background()
	tr := installationTransport(t, f, f.AppPrivateKeyPEM())
	base := f.URL()
	client, err := gh.NewClient(gh.WithTransport(tr), gh.WithURLs(&base, nil))
	require.NoError(t, err)

	n := openPR(f, map[string]string{"models/a.sql": "select 1"})
	f.SetRequiredChecks(testRepo, "main", "gapless")
	pr, _, err := client.PullRequests.Get(ctx, "acme", "warehouse", n)
	require.NoError(t, err)
	require.Equal(t, "feature", pr.GetHead().GetRef())
	require.Equal(t, "blocked", pr.GetMergeableState())
	require.True(t, pr.GetMergeable())

	run, _, err := client.Checks.CreateCheckRun(ctx, "acme", "warehouse", gh.CreateCheckRunOptions{
		Name: "gapless", HeadSHA: pr.GetHead().GetSHA(), Conclusion: gh.Ptr("neutral"),
		Output: &gh.CheckRunOutput{Title: gh.Ptr("plan"), Summary: gh.Ptr("nothing changes")},
	})
	require.NoError(t, err)
	require.Equal(t, "completed", run.GetStatus())
	require.Equal(t, f.AppSlug(), run.GetApp().GetSlug())
	require.True(t, f.MergeAllowed(testRepo, n))

	runs, _, err := client.Checks.ListCheckRunsForRef(ctx, "acme", "warehouse", pr.GetHead().GetSHA(), &gh.ListCheckRunsOptions{CheckName: gh.Ptr("gapless")})
	require.NoError(t, err)
	require.Equal(t, 1, runs.GetTotal())

	c, _, err := client.Issues.CreateComment(ctx, "acme", "warehouse", n, &gh.IssueComment{Body: gh.Ptr("<!-- gapless --> plan")})
	require.NoError(t, err)
	require.Equal(t, f.AppSlug()+"[bot]", c.GetUser().GetLogin())
	comments, _, err := client.Issues.ListComments(ctx, "acme", "warehouse", n, &gh.IssueListCommentsOptions{Sort: gh.Ptr("created"), Direction: gh.Ptr("desc")})
	require.NoError(t, err)
	require.Len(t, comments, 1)

	prot, _, err := client.Repositories.GetBranchProtection(ctx, "acme", "warehouse", "main")
	require.NoError(t, err)
	require.Equal(t, []string{"gapless"}, *prot.GetRequiredStatusChecks().Contexts)
	_, _, err = client.Repositories.GetBranchProtection(ctx, "acme", "warehouse", "feature")
	require.ErrorIs(t, err, gh.ErrBranchNotProtected)

	link, _, err := client.Repositories.GetArchiveLink(ctx, "acme", "warehouse", gh.Tarball, &gh.RepositoryContentGetOptions{Ref: pr.GetHead().GetSHA()}, 0)
	require.NoError(t, err)
	require.Contains(t, link.String(), "legacy.tar.gz")

	_, resp, err := client.PullRequests.Merge(ctx, "acme", "warehouse", n, "", &gh.PullRequestOptions{SHA: "0000000000000000000000000000000000000000"})
	require.Error(t, err)
	require.Equal(t, http.StatusConflict, resp.StatusCode)
	res, _, err := client.PullRequests.Merge(ctx, "acme", "warehouse", n, "", &gh.PullRequestOptions{SHA: pr.GetHead().GetSHA(), MergeMethod: "squash"})
	require.NoError(t, err)
	require.True(t, res.GetMerged())
	require.Equal(t, res.GetSHA(), f.Branch(testRepo, "main"))

	f.Fail(githubfake.RouteGetPull, http.StatusTooManyRequests, 1)
	_, _, err = client.PullRequests.Get(ctx, "acme", "warehouse", n)
	var abuse *gh.AbuseRateLimitError
	require.ErrorAs(t, err, &abuse)
	require.NotNil(t, abuse.RetryAfter)
}
