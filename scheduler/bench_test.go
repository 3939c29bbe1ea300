package scheduler_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/dag"
	"github.com/gapless-dev/gapless/execute/executetest"
	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/model"
	"github.com/gapless-dev/gapless/plan"
	"github.com/gapless-dev/gapless/scheduler"
	"github.com/gapless-dev/gapless/snapshot"
	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/warehouse"
)

const benchModels = 10_000

// benchExec is the benchmark's execution time: the hourly models are due
// through 10:00.
var benchExec = time.Date(2024, 3, 1, 10, 30, 0, 0, time.UTC)

// servedBy10k pushes 10,000 tiny hourly incremental models (chains of ten:
// every model but each chain's first reads the previous one) to st,
// promotes prod to them, and records every version's intervals through the
// execution time, so that nothing is due.
func servedBy10k(b *testing.B, st state.Store) {
	b.Helper()
	ctx := b.Context()
	start := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	edges := make(map[string][]string, benchModels)
	inputs := make(map[string]snapshot.Input, benchModels)
	for i := range benchModels {
		name := fmt.Sprintf("bench.m%05d", i)
		edges[name] = []string{}
		query := "SELECT g.ts AS ts, 1 AS v FROM generate_series(@start_ts, @end_ts, INTERVAL '1 hour') AS g(ts)"
		if i%10 != 0 {
			parent := fmt.Sprintf("bench.m%05d", i-1)
			edges[name] = []string{parent}
			query = "SELECT p.ts AS ts, p.v + 1 AS v FROM " + parent + " AS p WHERE p.ts BETWEEN @start_ts AND @end_ts"
		}
		inputs[name] = snapshot.Input{Canonical: query, Model: &model.Model{
			Name: name, Kind: model.KindIncrementalByTimeRange, Dialect: model.DialectDuckDB, TimeColumn: "ts",
			Cron: "@hourly", IntervalUnit: interval.Hour, Start: start, Enabled: true, Query: query,
			Path: "models/" + name + ".sql",
		}}
	}
	g, err := dag.New(edges)
	require.NoError(b, err)
	snaps, err := snapshot.BuildAll(g, inputs)
	require.NoError(b, err)
	list := make([]*snapshot.Snapshot, 0, len(snaps))
	for _, s := range snaps {
		list = append(list, s)
	}
	require.NoError(b, st.PushSnapshots(ctx, list))
	refs := make([]state.SnapshotRef, 0, len(snaps))
	for _, name := range g.Order() {
		s := snaps[name]
		refs = append(refs, state.SnapshotRef{Name: s.Name, Fingerprint: s.Fingerprint.String(), Version: s.Version})
	}
	slices.SortFunc(refs, func(a, b state.SnapshotRef) int { return strings.Compare(a.Name, b.Name) })
	_, err = st.Promote(ctx, state.PromoteParams{Environment: plan.Prod, PlanID: "bench", Snapshots: refs, Now: start})
	require.NoError(b, err)
	covered := interval.NewSet(interval.NewRange(start, time.Date(2024, 3, 1, 10, 0, 0, 0, time.UTC)))
	for _, r := range refs {
		require.NoError(b, st.AddIntervals(ctx, state.IntervalsParams{Key: r.VersionKey(), Ranges: covered, Now: start}))
	}
}

// BenchmarkSchedulerTickNothingDue measures the daemon's tick over 10,000
// models that prod serves with nothing due: the environment, the cached
// snapshots and one GetIntervals call, evaluated per model. The warehouse
// is never opened. Target: under 100 ms per tick.
func BenchmarkSchedulerTickNothingDue(b *testing.B) {
	for _, backend := range []string{"sqlite", "postgres"} {
		b.Run(backend, func(b *testing.B) {
			var bundle *executetest.Bundle
			if backend == "sqlite" {
				bundle = executetest.Setup(b, false, nil)
			} else {
				bundle = executetest.SetupPostgres(b, false, nil)
			}
			servedBy10k(b, bundle.Store)
			s, err := scheduler.New(scheduler.Params{
				Envs: []string{plan.Prod}, Store: bundle.Store, Parser: bundle.Parser, ProjectDir: bundle.Dir,
				Clock: clockwork.NewFakeClockAt(benchExec), Logger: quiet,
				OpenEngine: func(context.Context) (warehouse.Engine, error) {
					return nil, errors.New("the warehouse must not be opened when nothing is due")
				},
			})
			require.NoError(b, err)
			// The first tick fills the snapshot cache; a daemon pays it once.
			first := time.Now()
			res, err := s.Tick(b.Context())
			require.NoError(b, err)
			b.Logf("first tick (fills the snapshot cache): %s", time.Since(first).Round(time.Millisecond))
			require.Empty(b, res.Envs[0].Due)
			require.False(b, res.OpenedEngine)
			for b.Loop() {
				res, err = s.Tick(b.Context())
				if err != nil || len(res.Envs[0].Due) != 0 || res.OpenedEngine {
					b.Fatalf("tick: %v, due %v, opened %v", err, res.Envs[0].Due, res.OpenedEngine)
				}
			}
		})
	}
}
