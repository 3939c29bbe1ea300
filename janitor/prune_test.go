package janitor_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/apply"
	"github.com/gapless-dev/gapless/backend"
	"github.com/gapless-dev/gapless/execute/executetest"
	"github.com/gapless-dev/gapless/janitor"
	"github.com/gapless-dev/gapless/plan"
	"github.com/gapless-dev/gapless/state"
)

const day = 24 * time.Hour

// fourDeploys deploys prod four times, one a day at 06:00 from 2024-01-01
// (p1 to p4), each changing demo.hits breakingly; demo.other never
// changes. It returns the snapshot key of demo.hits each plan serves.
func fourDeploys(t *testing.T, b *executetest.Bundle) map[string]state.SnapshotKey {
	t.Helper()
	hits := map[string]state.SnapshotKey{}
	for i, id := range []string{"p1", "p2", "p3", "p4"} {
		executetest.WriteFiles(t, b.Dir, map[string]string{"models/hits.sql": hourly("demo.hits", i)})
		deploy(t, b, id, plan.Prod, at(2024, 1, 1+i, 6))
		served, _ := b.Served(t, plan.Prod)
		hits[id] = state.KeyOf(served["demo.hits"])
	}
	return hits
}

// saveUnapplied saves plan id as apply's first stage does (its snapshots,
// then the plan), created at created, and applies nothing.
func saveUnapplied(t *testing.T, b *executetest.Bundle, id string, created time.Time) {
	t.Helper()
	p := b.Plan(t, id, plan.Prod, created, plan.Options{})
	require.NoError(t, b.Store.PushSnapshots(b.Ctx, p.Snapshots))
	payload, err := plan.EncodeStored(b.Ctx, b.Store, p)
	require.NoError(t, err)
	require.NoError(t, b.Store.SavePlan(b.Ctx, state.Plan{ID: id, Environment: plan.Prod, Payload: payload, CreatedAt: created}))
}

// storedBase is the plan saved plan id is stored as a change of
// (plan.StoredFormat), "" when it is stored whole.
func storedBase(t *testing.T, b *executetest.Bundle, id string) string {
	t.Helper()
	sp, err := b.Store.GetPlan(b.Ctx, id)
	require.NoError(t, err)
	var head struct {
		Base string `json:"base"`
	}
	require.NoError(t, json.Unmarshal(sp.Payload, &head))
	return head.Base
}

func savedPlanIDs(t *testing.T, b *executetest.Bundle) []string {
	t.Helper()
	saved, err := b.Store.ListPlans(b.Ctx, state.PlanFilter{})
	require.NoError(t, err)
	ids := make([]string, len(saved))
	for i, p := range saved {
		ids[i] = p.ID
	}
	return ids
}

// requireEveryPlanResolves loads every saved plan through the store: each
// resolves every snapshot key it names.
func requireEveryPlanResolves(t *testing.T, b *executetest.Bundle) {
	t.Helper()
	saved, err := b.Store.ListPlans(b.Ctx, state.PlanFilter{})
	require.NoError(t, err)
	for i := range saved {
		_, err := plan.LoadStored(b.Ctx, b.Store, &saved[i])
		require.NoError(t, err, "plan %s", saved[i].ID)
	}
}

// Scenario: prod was deployed four times (p1 to p4, a day apart), and two
// plans were saved and never applied: u-old four days ago, u-new an hour
// ago. On day 6, with the default grace (24 h) and a snapshot_ttl of 2.5
// days (p1's and p2's versions of demo.hits have expired, p3's has not),
// the janitor prunes p1 and u-old, with their application histories. It
// keeps p4, which prod serves, p3, which prod served before (the rollback
// finds it and promotes it again), p2, which p3 is stored as a change of
// (plan.StoredFormat: p3 is read through it), and u-new, within the grace.
// A dry run first reports the same and deletes nothing.
func TestJanitorPrunesFinishedPlans(t *testing.T) {
	t.Parallel()
	files := map[string]string{"models/hits.sql": hourly("demo.hits", 0), "models/other.sql": hourly("demo.other", 0)}
	onBothBackends(t, files, func(t *testing.T, b *executetest.Bundle) {
		fourDeploys(t, b)
		exec := at(2024, 1, 6, 0)
		saveUnapplied(t, b, "u-old", at(2024, 1, 2, 0))
		saveUnapplied(t, b, "u-new", exec.Add(-time.Hour))
		all := []string{"u-new", "p4", "p3", "p2", "u-old", "p1"}
		require.Equal(t, all, savedPlanIDs(t, b))
		require.Equal(t, "p2", storedBase(t, b, "p3"), "p3 changes one model of p2")
		require.Empty(t, storedBase(t, b, "p2"), "two models: p2 weighs as much whole as a change of p1")
		bk := &backend.Backend{Store: b.Store, Engine: b.Engine}
		opts := janitor.Options{Grace: janitor.DefaultGrace, SnapshotTTL: 60 * time.Hour, Log: quiet, DryRun: true}

		rep, err := janitor.Run(b.Ctx, bk, exec, opts)
		require.NoError(t, err)
		require.Equal(t, []string{"p1", "u-old"}, rep.PrunedPlans)
		require.Equal(t, all, savedPlanIDs(t, b), "a dry run deletes nothing")

		opts.DryRun = false
		rep, err = janitor.Run(b.Ctx, bk, exec, opts)
		require.NoError(t, err)
		require.Equal(t, []string{"p1", "u-old"}, rep.PrunedPlans)
		require.Len(t, rep.Tables, 2, "p1's and p2's versions of demo.hits")
		require.Equal(t, []string{"u-new", "p4", "p3", "p2"}, savedPlanIDs(t, b))
		apps, err := b.Store.ListApplications(b.Ctx, "p1")
		require.NoError(t, err)
		require.Empty(t, apps)
		requireEveryPlanResolves(t, b)

		again, err := janitor.Run(b.Ctx, bk, exec, opts)
		require.NoError(t, err)
		require.Empty(t, again.PrunedPlans, "nothing else is prunable")

		rb, err := apply.RollbackPlan(b.Ctx, apply.RollbackParams{Store: b.Store, Engine: b.Engine, Environment: plan.Prod,
			ID: "r1", ExecutionTime: exec, Now: exec})
		require.NoError(t, err)
		require.Equal(t, "p3", rb.To)
		_, err = apply.Apply(b.Ctx, apply.Params{Plan: rb.Plan, Store: b.Store, Engine: b.Engine, Parser: b.Parser,
			ProjectDir: b.Dir, Clock: clockwork.NewFakeClockAt(exec), Logger: quiet})
		require.NoError(t, err)
		_, prod := b.Served(t, plan.Prod)
		require.Equal(t, "r1", prod.PlanID)
	})
}

// Scenario: snapshot_ttl is 7 days. On day 6 every replaced version of
// demo.hits is kept by it, so the plans that name them stay (through them
// the janitor finds those versions again): none of p1 to p4 is pruned. On
// day 12 the TTL has passed for p1's, p2's and p3's versions: their tables
// go, p1 is pruned and the snapshot record only it named is deleted; p3,
// prod's previous plan, is kept, and p2, which p3 is stored as a change
// of, and so are the snapshot records of their demo.hits, whose tables are
// gone: every kept plan still resolves every key, and a rollback to p3 is
// refused naming the dropped table, not a missing snapshot.
func TestJanitorNeverDeletesASnapshotAKeptPlanNames(t *testing.T) {
	t.Parallel()
	files := map[string]string{"models/hits.sql": hourly("demo.hits", 0), "models/other.sql": hourly("demo.other", 0)}
	onBothBackends(t, files, func(t *testing.T, b *executetest.Bundle) {
		hits := fourDeploys(t, b)
		bk := &backend.Backend{Store: b.Store, Engine: b.Engine}
		opts := janitor.Options{Grace: janitor.DefaultGrace, SnapshotTTL: 7 * day, Log: quiet}

		rep, err := janitor.Run(b.Ctx, bk, at(2024, 1, 6, 0), opts)
		require.NoError(t, err)
		require.Empty(t, rep.PrunedPlans, "every replaced version is retained, and named by its plans")
		require.Len(t, rep.Retained, 3)
		require.Equal(t, []string{"p4", "p3", "p2", "p1"}, savedPlanIDs(t, b))

		rep, err = janitor.Run(b.Ctx, bk, at(2024, 1, 12, 0), opts)
		require.NoError(t, err)
		require.Len(t, rep.Tables, 3)
		require.Equal(t, "p2", storedBase(t, b, "p3"))
		require.Equal(t, []string{"p1"}, rep.PrunedPlans)
		require.Equal(t, []string{"p4", "p3", "p2"}, savedPlanIDs(t, b))
		requireEveryPlanResolves(t, b)

		snaps, err := b.Store.GetSnapshots(b.Ctx, []state.SnapshotKey{hits["p1"], hits["p2"], hits["p3"]})
		require.NoError(t, err)
		require.Contains(t, snaps, hits["p3"], "p3 is kept and names it")
		require.Contains(t, snaps, hits["p2"], "p2 is kept and names it")
		require.NotContains(t, snaps, hits["p1"])

		_, err = apply.RollbackPlan(b.Ctx, apply.RollbackParams{Store: b.Store, Engine: b.Engine, Environment: plan.Prod,
			ID: "r1", ExecutionTime: at(2024, 1, 12, 0), Now: at(2024, 1, 12, 0)})
		var dropped *apply.DroppedError
		require.True(t, errors.As(err, &dropped), "%v", err)
		require.Equal(t, "p3", dropped.To)
	})
}

// Scenario: plan x was saved as a change of p1 (plan.StoredFormat), and p1
// was deleted meanwhile (a janitor pruned it while x's apply was saving x
// against it): x's chain is broken and x can no longer be read. Within
// the grace the janitor keeps it (its apply may be running); past the
// grace it prunes it, instead of warning about it at every pass.
func TestJanitorPrunesAPlanWhoseChainIsBroken(t *testing.T) {
	t.Parallel()
	files := map[string]string{"models/hits.sql": hourly("demo.hits", 0), "models/other.sql": hourly("demo.other", 0)}
	onBothBackends(t, files, func(t *testing.T, b *executetest.Bundle) {
		fourDeploys(t, b)
		created := at(2024, 1, 4, 12)
		x := b.Plan(t, "x", plan.Prod, created, plan.Options{})
		x.Expected.PlanID = "p1"
		payload, err := plan.EncodeStored(b.Ctx, b.Store, x)
		require.NoError(t, err)
		require.NoError(t, b.Store.SavePlan(b.Ctx, state.Plan{ID: "x", Environment: plan.Prod, Payload: payload, CreatedAt: created}))
		require.Equal(t, "p1", storedBase(t, b, "x"))
		deleted, err := b.Store.DeletePlans(b.Ctx, state.DeletePlansParams{IDs: []string{"p1"}, Before: created})
		require.NoError(t, err)
		require.Equal(t, []string{"p1"}, deleted)
		sp, err := b.Store.GetPlan(b.Ctx, "x")
		require.NoError(t, err)
		_, err = plan.LoadStored(b.Ctx, b.Store, sp)
		require.ErrorContains(t, err, "plan x is stored as a change of plan p1, which the state store does not hold")

		bk := &backend.Backend{Store: b.Store, Engine: b.Engine}
		opts := janitor.Options{Grace: janitor.DefaultGrace, SnapshotTTL: 7 * day, Log: quiet}
		rep, err := janitor.Run(b.Ctx, bk, created.Add(time.Hour), opts)
		require.NoError(t, err)
		require.Empty(t, rep.PrunedPlans, "within the grace")
		rep, err = janitor.Run(b.Ctx, bk, created.Add(janitor.DefaultGrace+time.Hour), opts)
		require.NoError(t, err)
		require.Equal(t, []string{"x"}, rep.PrunedPlans)
		requireEveryPlanResolves(t, b)
	})
}
