package bot_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/bot"
	"github.com/gapless-dev/gapless/gate"
	"github.com/gapless-dev/gapless/state"
)

func TestScenarioTwoReplicasOnPostgreSQLShareTheWork(t *testing.T) {
	t.Parallel()
	// Scenario: two `gapless serve` processes run behind a load balancer
	// on one PostgreSQL state store (and the queue in it). Deliveries land
	// on both; their workers take jobs from one queue. Three PRs are
	// opened, one is pushed to and one is deployed: every PR ends with its
	// three checks green and exactly one summary comment, prod is deployed
	// once, and every check run exists once per head and name.
	h := newHarness(t, options{postgres: true, replicas: 2})
	a := h.openPR("amount", changed())
	b := h.openPR("regions", map[string]string{"models/regions.sql": "MODEL (name ref.regions, kind FULL, cron '@daily');\n\nSELECT 1 AS region_id, 'all' AS name\n"})
	c := h.openPR("notes", map[string]string{"NOTES.md": "notes\n"})
	h.fake.Commit(repoName, "notes", map[string]string{"NOTES.md": "more notes\n"}, "more")
	h.idle()
	h.fake.AddComment(repoName, a, writer, "/deploy")
	h.idle()

	require.True(t, h.fake.PR(repoName, a).Merged)
	ds, err := h.store.ListDeploys(h.ctx, state.ListDeploysParams{Env: "prod"})
	require.NoError(t, err)
	require.Len(t, ds, 1, "one deploy, whichever replica ran it")
	for _, n := range []int{b, c} {
		h.requireGreen(n)
		require.Len(t, h.withMarker(n, bot.SummaryMarker), 1, "PR %d: one summary", n)
		seen := map[string]int{}
		for _, r := range h.fake.CheckRuns(repoName, h.fake.PR(repoName, n).HeadSHA) {
			seen[r.Name]++
		}
		for _, name := range []string{gate.CheckEnvironment, gate.CheckPreview, gate.CheckAggregate} {
			require.Equal(t, 1, seen[name], "PR %d: one %q run", n, name)
		}
	}
	require.Len(t, h.servers, 2)
}
