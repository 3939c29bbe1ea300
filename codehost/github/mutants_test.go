package github_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/codehost"
	"github.com/gapless-dev/gapless/codehost/codehosttest"
	"github.com/gapless-dev/gapless/codehost/github"
)

// envMutant selects the mutant TestMutantTarget runs the suite on.
const envMutant = "GAPLESS_TEST_CODEHOST_MUTANT"

// mutant is a Host with one property broken, the way a real bug would
// break it.
type mutant struct {
	*github.Client
	kind string

	mu    sync.Mutex
	cache map[int]*codehost.PR
}

// FindComment, mutated "oldest-page-only", reads what SchemaBot's
// sort=desc single-page read really gets: the oldest 100 comments.
func (m *mutant) FindComment(ctx context.Context, repo string, n int, marker string) (*codehost.Comment, error) {
	if m.kind != "oldest-page-only" {
		return m.Client.FindComment(ctx, repo, n, marker)
	}
	all, err := m.Comments(ctx, repo, n)
	if err != nil {
		return nil, err
	}
	if len(all) > 100 {
		all = all[:100]
	}
	for i := range all {
		if strings.Contains(all[i].Body, marker) {
			return &all[i], nil
		}
	}
	return nil, nil
}

// Merge, mutated "unpinned", merges whatever the head is now.
func (m *mutant) Merge(ctx context.Context, repo string, n int, headSHA string, method codehost.MergeMethod) (string, error) {
	if m.kind == "unpinned" {
		if pr, err := m.Client.PullRequest(ctx, repo, n); err == nil {
			headSHA = pr.HeadSHA
		}
	}
	return m.Client.Merge(ctx, repo, n, headSHA, method)
}

// OpenPullRequests, mutated "first-page-prs", reads one page.
func (m *mutant) OpenPullRequests(ctx context.Context, repo, base string) ([]*codehost.PR, error) {
	prs, err := m.Client.OpenPullRequests(ctx, repo, base)
	if m.kind == "first-page-prs" && len(prs) > 100 {
		prs = prs[:100]
	}
	return prs, err
}

// PullRequest, mutated "cached", answers from a cache.
func (m *mutant) PullRequest(ctx context.Context, repo string, n int) (*codehost.PR, error) {
	if m.kind != "cached" {
		return m.Client.PullRequest(ctx, repo, n)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if pr, ok := m.cache[n]; ok {
		return pr, nil
	}
	pr, err := m.Client.PullRequest(ctx, repo, n)
	if err == nil {
		m.cache[n] = pr
	}
	return pr, err
}

// TestMutantTarget runs the suite on the mutant GAPLESS_TEST_CODEHOST_MUTANT
// names; TestSuiteCatchesMutants runs it in a child process and requires it
// to fail.
func TestMutantTarget(t *testing.T) {
	kind := os.Getenv(envMutant)
	if kind == "" {
		t.Skip("run by TestSuiteCatchesMutants in a child process")
	}
	codehosttest.Run(t, func(t *testing.T) codehosttest.Target {
		tg := fakeTarget(t, false)
		tg.Host = &mutant{Client: tg.Host.(*github.Client), kind: kind, cache: map[int]*codehost.PR{}}
		return tg
	})
}

// TestSuiteCatchesMutants: each mutant, a Host with one property broken,
// fails the case that guards that property.
func TestSuiteCatchesMutants(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts child processes")
	}
	for _, m := range []struct{ kind, run, fails string }{
		{"oldest-page-only", "Comments/OldestFirstAcrossPagesAndFoundAtEveryBoundary", "the marker of comment 101 is found"},
		{"unpinned", "Merge/PinnedToTheHead", "a head that moved is a conflict"},
		{"first-page-prs", "PullRequests/OpenAcrossPages", "104 open PRs on the base"},
		{"cached", "PullRequests/ReadFresh", "ReadFresh"},
	} {
		t.Run(m.kind+"/"+m.run, func(t *testing.T) {
			t.Parallel()
			group, name, _ := strings.Cut(m.run, "/")
			cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestMutantTarget$/^"+group+"$/^"+name+"$", "-test.count=1")
			cmd.Env = append(os.Environ(), envMutant+"="+m.kind)
			out, err := cmd.CombinedOutput()
			require.Error(t, err, "the suite passed on mutant %s:\n%s", m.kind, out)
			require.Contains(t, string(out), "--- FAIL: TestMutantTarget/"+m.run)
			require.Contains(t, string(out), m.fails)
		})
	}
}
