package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/project"
)

// Scenario: a project of 60 models (40 hourly, 20 daily), more than a
// listing prints one per line. `models` prints counts by kind and unit and
// no model; --all and --json list all 60. After a deploy at midnight,
// `status` five hours later summarises (20 up to date, 40 missing) and lists
// the first 20 of the 40 hourly models that miss intervals, parents first,
// saying how to see the rest; --all and --wide --all list all 60, and
// --json has every model.
func TestListingCommandsSummariseALargeProject(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeLayeredProject(t, dir, 60, 3)

	out := mustRun(t, dir, "models", "--execution-time", "2024-01-02")
	require.Contains(t, out, "60 models, at 2024-01-02T00:00:00Z")
	require.Contains(t, out, "By kind: 60 INCREMENTAL_BY_TIME_RANGE\nBy interval unit: 40 hour, 20 day\n")
	require.Contains(t, out, "0 of 60 models shown; --all lists every one")
	require.NotContains(t, out, "bench.m00000")
	all := mustRun(t, dir, "models", "--all", "--execution-time", "2024-01-02")
	require.Len(t, regexp.MustCompile(`(?m)^bench\.m000\d\d `).FindAllString(all, -1), 60)
	require.NotContains(t, all, "shown")
	var rows []modelRow
	require.NoError(t, json.Unmarshal([]byte(mustRun(t, dir, "models", "--json", "--execution-time", "2024-01-02")), &rows))
	require.Len(t, rows, 60)

	mustRun(t, dir, "plan", "--auto-apply", "--execution-time", "2024-01-02")
	st := mustRun(t, dir, "status", "--execution-time", "2024-01-02T05:00:00Z")
	require.Contains(t, st, "60 models: 20 up to date, 40 missing intervals, 0 with open debt\n")
	require.Contains(t, st, "Needing attention (missing intervals or open debt), 20 of 40, parents first:")
	listed := regexp.MustCompile(`(?m)^bench\.m000\d\d .*5 hours`).FindAllString(st, -1)
	require.Len(t, listed, 20)
	// Layer one (m00000..m00005) comes first; its daily models are up to date.
	for i, want := range []string{"m00001", "m00002", "m00004", "m00005"} {
		require.True(t, strings.HasPrefix(listed[i], "bench."+want), listed[i])
	}
	require.Contains(t, st, "20 of 60 models shown; --all lists every one")

	for _, args := range [][]string{{"status", "--all"}, {"status", "--all", "--wide"}} {
		out := mustRun(t, dir, append(args, "--execution-time", "2024-01-02T05:00:00Z")...)
		require.Len(t, regexp.MustCompile(`(?m)^bench\.m000\d\d `).FindAllString(out, -1), 60, args)
		require.NotContains(t, out, "shown", args)
	}
	rep := statusOf(t, dir, "--execution-time", "2024-01-02T05:00:00Z")
	require.Len(t, rep, 60)
	require.Equal(t, 5, rep["bench.m00001"].MissingBuckets)
	require.Zero(t, rep["bench.m00000"].MissingBuckets)
}

// Scenario: a project whose every model is up to date prints the summary
// and no table: nothing needs attention.
func TestStatusSummaryWithNothingToAttendTo(t *testing.T) {
	t.Parallel()
	rep := &statusReport{Environment: "prod", Generation: 1, PlanID: "p1", ExecutionTime: testNow}
	for i := range listLimit + 1 {
		rep.Models = append(rep.Models, statusRow{Name: fmt.Sprintf("m.m%02d", i), Version: "v1"})
	}
	var out strings.Builder
	rows, elided := statusListed(&out, rep, false)
	require.True(t, elided)
	require.Empty(t, rows)
	require.Equal(t, "51 models: 51 up to date, 0 missing intervals, 0 with open debt\n", out.String())
	rows, elided = statusListed(&out, rep, true)
	require.False(t, elided)
	require.Len(t, rows, 51)
}

// Scenario: 53 environments, two of them not live. `environments` prints
// counts by state and only the two; --all prints all 53 rows.
func TestEnvironmentsSummaryAndAll(t *testing.T) {
	t.Parallel()
	at := time.Date(2024, 1, 2, 0, 0, 0, 0, time.UTC)
	var rows []environmentRow
	for i := range 51 {
		rows = append(rows, environmentRow{Name: fmt.Sprintf("pr%02d", i), Generation: 1, PlanID: "p", Models: 3,
			PromotedAt: at, Finalized: true})
	}
	rows = append(rows, environmentRow{Name: "stale", Generation: 2, PlanID: "p", PromotedAt: at, Finalized: true, Invalidated: true},
		environmentRow{Name: "halfway", Generation: 1, PlanID: "p", PromotedAt: at})
	var out strings.Builder
	require.NoError(t, printEnvironmentRows(&out, rows, false))
	require.Contains(t, out.String(), "53 environments: 51 live, 1 invalidated, 1 pending finalisation\n")
	require.Contains(t, out.String(), "Not live, 2 of 2:")
	require.Regexp(t, `(?m)^stale +2 .* invalidated$`, out.String())
	require.Regexp(t, `(?m)^halfway +1 .* pending finalisation$`, out.String())
	require.NotContains(t, out.String(), "pr00")
	require.Contains(t, out.String(), "2 of 53 environments shown; --all lists every one")

	out.Reset()
	require.NoError(t, printEnvironmentRows(&out, rows, true))
	require.Len(t, regexp.MustCompile(`(?m)^(pr\d\d|stale|halfway) `).FindAllString(out.String(), -1), 53)
	require.NotContains(t, out.String(), "shown")
}

// Scenario: `models` runs three times on a project: without a parse cache
// (it writes .gapless/cache/queries), with the cache, and with the cache
// file damaged. The three print the same versions and parents, exit 0, and
// the damaged file is rewritten, not reported as a failure.
func TestModelsPrintsTheSameWithAndWithoutTheParseCache(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeLayeredProject(t, dir, 30, 3)
	cache := filepath.Join(dir, project.CacheDir, "queries")
	cold := mustRun(t, dir, "models", "--json", "--execution-time", "2024-01-02")
	require.FileExists(t, cache)
	info, err := os.Stat(cache)
	require.NoError(t, err)
	warm := mustRun(t, dir, "models", "--json", "--execution-time", "2024-01-02")
	require.JSONEq(t, cold, warm)
	again, err := os.Stat(cache)
	require.NoError(t, err)
	require.Equal(t, info.ModTime(), again.ModTime(), "a cache that answered every query is not rewritten")

	require.NoError(t, os.WriteFile(cache, []byte("damaged"), 0o644))
	r := run(t, dir, "models", "--json", "--execution-time", "2024-01-02")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Empty(t, r.stderr)
	require.JSONEq(t, cold, r.stdout)
	b, err := os.ReadFile(cache)
	require.NoError(t, err)
	require.NotEqual(t, "damaged", string(b))
}
