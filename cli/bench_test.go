package cli

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/cadence"
	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/macro"
	"github.com/gapless-dev/gapless/model"
	"github.com/gapless-dev/gapless/plan"
	"github.com/gapless-dev/gapless/project"
	"github.com/gapless-dev/gapless/snapshot"
	"github.com/gapless-dev/gapless/sqlparse"
	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/state/sqlite"
)

// benchSizes are the project sizes the listing benchmarks run at: 1,000
// always, 10,000 with GAPLESS_BENCH_LARGE=1 (too slow for make bench-smoke).
func benchSizes() []int {
	if os.Getenv("GAPLESS_BENCH_LARGE") == "1" {
		return []int{1_000, 10_000}
	}
	return []int{1_000}
}

// benchExecTime is the execution time of the listing benchmarks.
var benchExecTime = time.Date(2024, 3, 1, 10, 30, 0, 0, time.UTC)

// writeLayeredProject writes a project of n hourly incremental models in
// ten layers to dir: every model of a layer but the first reads one model
// of the layer above. With dailyEvery > 0, every dailyEvery-th model (the
// first included) is daily instead.
func writeLayeredProject(tb testing.TB, dir string, n, dailyEvery int) {
	tb.Helper()
	require.NoError(tb, os.MkdirAll(filepath.Join(dir, project.ModelsDir), 0o755))
	require.NoError(tb, os.WriteFile(filepath.Join(dir, "gapless.yaml"), []byte(
		"warehouse: duckdb://warehouse.duckdb\nstate: sqlite://.gapless/state.db\nmodel_defaults:\n  dialect: duckdb\n  start: '2024-01-01'\n"), 0o644))
	perLayer := max(n/10, 1)
	for i := range n {
		name := fmt.Sprintf("m%05d", i)
		query := "SELECT g.ts AS ts, 1 AS v FROM generate_series(@start_ts, @end_ts, INTERVAL '1 hour') AS g(ts)"
		if i >= perLayer {
			query = fmt.Sprintf("SELECT p.ts AS ts, p.v + 1 AS v FROM bench.m%05d AS p WHERE p.ts BETWEEN @start_ts AND @end_ts", i-perLayer)
		}
		cron := "@hourly"
		if dailyEvery > 0 && i%dailyEvery == 0 {
			cron = "@daily"
		}
		src := fmt.Sprintf("MODEL (\n  name bench.%s,\n  kind INCREMENTAL_BY_TIME_RANGE (time_column ts),\n  cron '%s'\n);\n\n%s\n", name, cron, query)
		require.NoError(tb, os.WriteFile(filepath.Join(dir, project.ModelsDir, name+".sql"), []byte(src), 0o644))
	}
}

// loadLayeredProject writes and loads a project of n models.
func loadLayeredProject(tb testing.TB, n int) *project.Project {
	tb.Helper()
	dir := tb.TempDir()
	writeLayeredProject(tb, dir, n, 0)
	return loadLayeredProjectAt(tb, dir)
}

// loadLayeredProjectAt loads the project written at dir.
func loadLayeredProjectAt(tb testing.TB, dir string) *project.Project {
	tb.Helper()
	p, err := sqlparse.Open()
	require.NoError(tb, err)
	defer p.Close()
	pr, _, err := project.Load(context.Background(), dir, p)
	require.NoError(tb, err)
	return pr
}

// servedProject records pr's snapshots in a fresh SQLite state store,
// promotes prod to them and covers every version through the execution
// time but for every tenth model, which misses its last hour.
func servedProject(tb testing.TB, pr *project.Project) state.Store {
	tb.Helper()
	return servedProjectAt(tb, pr, filepath.Join(tb.TempDir(), "state.db"))
}

// servedProjectAt is servedProject with the SQLite state file at path.
func servedProjectAt(tb testing.TB, pr *project.Project, path string) state.Store {
	tb.Helper()
	ctx := context.Background()
	require.NoError(tb, os.MkdirAll(filepath.Dir(path), 0o755))
	st, err := sqlite.Open(ctx, path)
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = st.Close() })
	list := make([]*snapshot.Snapshot, 0, len(pr.Snapshots))
	refs := make([]state.SnapshotRef, 0, len(pr.Snapshots))
	for _, name := range pr.Graph.Order() {
		s := pr.Snapshots[name]
		list = append(list, s)
		refs = append(refs, state.SnapshotRef{Name: s.Name, Fingerprint: s.Fingerprint.String(), Version: s.Version})
	}
	require.NoError(tb, st.PushSnapshots(ctx, list))
	slices.SortFunc(refs, func(a, b state.SnapshotRef) int { return strings.Compare(a.Name, b.Name) })
	start := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	_, err = st.Promote(ctx, state.PromoteParams{Environment: plan.Prod, PlanID: "bench", Snapshots: refs, Now: start})
	require.NoError(tb, err)
	for i, r := range refs {
		end := time.Date(2024, 3, 1, 10, 0, 0, 0, time.UTC)
		if i%10 == 0 {
			end = end.Add(-time.Hour)
		}
		require.NoError(tb, st.AddIntervals(ctx, state.IntervalsParams{Key: r.VersionKey(),
			Ranges: interval.NewSet(interval.NewRange(start, end)), Now: start}))
	}
	return st
}

// BenchmarkPlanFirstDeploy measures planning a first deploy of n models
// (`plan --out` without the warehouse): loading the project, then building
// the plan against an empty state.
func BenchmarkPlanFirstDeploy(b *testing.B) {
	for _, n := range benchSizes() {
		b.Run(fmt.Sprintf("models=%d", n), func(b *testing.B) {
			dir := b.TempDir()
			writeLayeredProject(b, dir, n, 0)
			ctx := b.Context()
			p, err := sqlparse.Open()
			require.NoError(b, err)
			defer p.Close()
			st, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "state.db"))
			require.NoError(b, err)
			defer func() { _ = st.Close() }()
			b.ReportAllocs()
			for b.Loop() {
				pr, _, err := project.Load(ctx, dir, p)
				require.NoError(b, err)
				pl, err := plan.Build(ctx, plan.BuildParams{ID: "bench", Environment: plan.Prod, Next: pr.Snapshots,
					Graph: pr.Graph, Intervals: st, Additive: project.Additive(ctx, p), ExecutionTime: benchExecTime,
					Now: benchExecTime})
				require.NoError(b, err)
				require.Len(b, pl.Backfills, n)
			}
		})
	}
}

// BenchmarkServedSchedules measures what every run, status and scheduler
// process does first: read and decode the snapshots prod serves and compile
// each model's schedule (cadence.ForModel).
func BenchmarkServedSchedules(b *testing.B) {
	for _, n := range benchSizes() {
		b.Run(fmt.Sprintf("models=%d", n), func(b *testing.B) {
			st := servedProject(b, loadLayeredProject(b, n))
			ctx := b.Context()
			e, err := st.GetEnvironment(ctx, plan.Prod)
			require.NoError(b, err)
			b.ReportAllocs()
			for b.Loop() {
				snaps, err := plan.Served(ctx, st, e)
				require.NoError(b, err)
				require.Len(b, snaps, n)
				for _, s := range snaps {
					_, err := cadence.ForModel(s.Model)
					require.NoError(b, err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*n), "µs/model")
		})
	}
}

// BenchmarkModelRows measures `gapless models`' domain function over a
// loaded project (loading excluded).
func BenchmarkModelRows(b *testing.B) {
	for _, n := range benchSizes() {
		b.Run(fmt.Sprintf("models=%d", n), func(b *testing.B) {
			pr := loadLayeredProject(b, n)
			b.ReportAllocs()
			for b.Loop() {
				rows, err := modelRows(pr, benchExecTime)
				require.NoError(b, err)
				require.Len(b, rows, n)
			}
		})
	}
}

// BenchmarkEnvironmentStatus measures `gapless status`' domain function
// over a SQLite state whose prod serves n models.
func BenchmarkEnvironmentStatus(b *testing.B) {
	for _, n := range benchSizes() {
		b.Run(fmt.Sprintf("models=%d", n), func(b *testing.B) {
			st := servedProject(b, loadLayeredProject(b, n))
			b.ReportAllocs()
			for b.Loop() {
				rep, err := environmentStatus(b.Context(), st, plan.Prod, benchExecTime)
				require.NoError(b, err)
				require.Len(b, rep.Models, n)
			}
		})
	}
}

// BenchmarkEnvironments measures `gapless environments`' domain function
// over a SQLite state whose prod serves n models.
func BenchmarkEnvironments(b *testing.B) {
	for _, n := range benchSizes() {
		b.Run(fmt.Sprintf("models=%d", n), func(b *testing.B) {
			st := servedProject(b, loadLayeredProject(b, n))
			b.ReportAllocs()
			for b.Loop() {
				envs, err := st.ListEnvironments(b.Context())
				require.NoError(b, err)
				rows := environmentRows(envs)
				require.Len(b, rows, 1)
				require.Equal(b, n, rows[0].Models)
			}
		})
	}
}

// BenchmarkListingCommands measures each listing command whole, as a
// process runs it (cli.Run: flags, config, loading the project or opening
// the state, the domain function, printing), over a project of n models
// whose prod serves every one of them from the project's own SQLite state
// (.gapless/state.db). `models` runs twice per size: cold, with no parse
// cache (removed before every iteration), and warm, with the cache the
// previous run left; raw-parse is the floor a load without the cache
// cannot go under: raw DuckDB serialising each model's query
// (json_serialize_sql, what sqlparse asks), one statement at a time.
func BenchmarkListingCommands(b *testing.B) {
	for _, n := range benchSizes() {
		dir := b.TempDir()
		writeLayeredProject(b, dir, n, 0)
		st := servedProjectAt(b, loadLayeredProjectAt(b, dir), filepath.Join(dir, ".gapless", "state.db"))
		require.NoError(b, st.Close())
		b.Run(fmt.Sprintf("models=%d/raw-parse", n), func(b *testing.B) {
			queries := parserInputs(b, dir)
			db, err := sql.Open("duckdb", "?threads=1")
			require.NoError(b, err)
			defer func() { require.NoError(b, db.Close()) }()
			stmt, err := db.PrepareContext(b.Context(), "SELECT json_serialize_sql(?::VARCHAR)::VARCHAR")
			require.NoError(b, err)
			defer func() { require.NoError(b, stmt.Close()) }()
			for b.Loop() {
				for _, q := range queries {
					var tree string
					require.NoError(b, stmt.QueryRowContext(b.Context(), q).Scan(&tree))
				}
			}
		})
		for _, c := range []struct {
			name string
			args []string
			cold bool
		}{
			{"models/cold", []string{"models"}, true},
			{"models/warm", []string{"models"}, false},
			{"status", []string{"status"}, false},
			{"environments", []string{"environments"}, false},
		} {
			b.Run(fmt.Sprintf("models=%d/%s", n, c.name), func(b *testing.B) {
				args := append([]string{"-p", dir, "--execution-time", benchExecTime.Format(time.RFC3339)}, c.args...)
				require.Equal(b, ExitOK, runBench(b, dir, args), "warming up")
				b.ReportAllocs()
				for b.Loop() {
					if c.cold {
						b.StopTimer()
						require.NoError(b, os.RemoveAll(filepath.Join(dir, project.CacheDir)))
						b.StartTimer()
					}
					require.Equal(b, ExitOK, runBench(b, dir, args))
				}
			})
		}
	}
}

// runBench runs the command line args in-process in the folder wd, its
// output discarded.
func runBench(b *testing.B, wd string, args []string) int {
	b.Helper()
	var out, errb strings.Builder
	code := Run(context.Background(), args, Env{Stdout: &out, Stderr: &errb,
		Getwd: func() (string, error) { return wd, nil }})
	if code != ExitOK {
		b.Log(errb.String())
	}
	return code
}

// parserInputs reads the project at dir's model files and returns each
// query as loading gives it to the parser (macro.ForParse).
func parserInputs(tb testing.TB, dir string) []string {
	tb.Helper()
	files, err := filepath.Glob(filepath.Join(dir, project.ModelsDir, "*.sql"))
	require.NoError(tb, err)
	out := make([]string, 0, len(files))
	for _, f := range files {
		src, err := os.ReadFile(f)
		require.NoError(tb, err)
		m, err := model.ParseFile(f, src, model.Defaults{})
		require.NoError(tb, err)
		q, _, err := macro.ForParse(m.Query)
		require.NoError(tb, err)
		out = append(out, q)
	}
	return out
}
