package plan

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/dag"
	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/model"
	"github.com/gapless-dev/gapless/snapshot"
	"github.com/gapless-dev/gapless/state/sqlite"
)

// changedProd is a store in which prod serves the fixture (plan p-0), its
// snapshots, and the snapshots and graph of project with demo.events's
// query changed.
func changedProd(t *testing.T, project fixture) (*sqlite.Store, map[string]*snapshot.Snapshot, map[string]*snapshot.Snapshot, *dag.Graph) {
	t.Helper()
	st := openStore(t)
	base, _ := newFixture().snapshots(t)
	promote(t, st, Prod, "p-0", base)
	next, graph := project.edit("demo.events", func(m *model.Model) { m.Query = "SELECT ts, 1 AS x FROM src.events" }).snapshots(t)
	return st, base, next, graph
}

// Scenario: prod serves the fixture (plan p-0, demo.events computed
// through 2024-01-03). The project changes demo.events and demo.totals.
// Assemble for a new dev environment with --select-model demo.daily starts
// dev from prod (no expected plan, prod's demo.totals kept, its change
// waiting) and takes the selection with its upstream; for prod it expects
// p-0 and takes every change. Ids come from the id source, in order; a
// failing id source fails the plan; a category choice Build refuses comes
// back as the *snapshot.ChoiceError it is, and any other build error says
// which environment it is for.
func TestAssembleReadsTheEnvironmentSelectsAndBuilds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, base, project, graph := changedProd(t, newFixture().
		edit("demo.totals", func(m *model.Model) { m.Query = "SELECT count(*) + 1 FROM demo.daily" }))
	cover(t, st, base["demo.events"], interval.NewRange(at(1, 0), at(3, 0)))
	ids := Numbered("a-")
	params := func(env string, opts Options) AssembleParams {
		return AssembleParams{Store: st, Environment: env, Snapshots: project, Graph: graph, IDs: ids,
			ExecutionTime: at(3, 0), Now: at(3, 0), Options: opts}
	}

	dev, err := Assemble(ctx, params("dev", Options{Select: []string{"demo.daily"}}))
	require.NoError(t, err)
	require.Equal(t, "a-1", dev.ID)
	require.Equal(t, Expected{}, dev.Expected, "dev does not exist yet")
	changed := map[string]snapshot.Category{}
	for _, c := range dev.Changes {
		changed[c.Name] = c.Category
	}
	require.Equal(t, map[string]snapshot.Category{"demo.events": snapshot.Breaking, "demo.daily": snapshot.IndirectBreaking}, changed,
		"against prod's snapshots, demo.totals outside the selection")
	for _, s := range dev.Snapshots {
		if s.Name == "demo.totals" {
			require.Equal(t, base["demo.totals"].Fingerprint, s.Fingerprint, "prod's demo.totals, unchanged")
		}
	}

	prod, err := Assemble(ctx, params(Prod, Options{}))
	require.NoError(t, err)
	require.Equal(t, "a-2", prod.ID)
	require.Equal(t, "p-0", prod.Expected.PlanID)
	require.Len(t, prod.Changes, 3, "demo.events, demo.daily and demo.totals")
	ev, ok := prod.BackfillFor("demo.events")
	require.True(t, ok)
	require.Equal(t, "{[2024-01-01T00:00:00Z, 2024-01-03T00:00:00Z)}", ev.Ranges.String(), "bounded by the incumbent's frontier")

	broken := errors.New("no ids left")
	p := params(Prod, Options{})
	p.IDs = func() (string, error) { return "", broken }
	_, err = Assemble(ctx, p)
	require.ErrorIs(t, err, broken)

	_, err = Assemble(ctx, params(Prod, Options{Categories: map[string]snapshot.Choice{"demo.daily": snapshot.ChooseNonBreaking}}))
	var ce *snapshot.ChoiceError
	require.ErrorAs(t, err, &ce)
	require.NotContains(t, err.Error(), "building the plan", "returned as Build returned it")

	_, err = Assemble(ctx, params(Prod, Options{Restate: []string{"demo.nope"}}))
	require.EqualError(t, err, "building the plan for prod: --restate-model demo.nope: no such model in the project")
}

// Scenario: the replanner apply's replan policy calls rebuilds the refused
// plan from its own snapshots against the environment as it is now, with
// ids from its source, at the replan's time; the creation time is the
// replan's time, or the clock's when one is given.
func TestReplannerRebuildsWithFreshIDs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, _, project, graph := changedProd(t, newFixture())
	prev, err := Assemble(ctx, AssembleParams{Store: st, Environment: Prod, Snapshots: project, Graph: graph, IDs: Fixed("p-1"),
		ExecutionTime: at(3, 0), Now: at(3, 0)})
	require.NoError(t, err)

	replan := Replanner(ReplannerParams{Store: st, IDs: Numbered("p-1-r")})
	first, err := replan(ctx, prev, at(3, 2))
	require.NoError(t, err)
	require.Equal(t, "p-1-r1", first.ID)
	require.Equal(t, at(3, 2), first.ExecutionTime)
	require.Equal(t, at(3, 2), first.CreatedAt)
	require.Equal(t, prev.Expected, first.Expected)
	require.Equal(t, prev.Changes, first.Changes, "the same source, the same changes")
	second, err := replan(ctx, prev, at(3, 3))
	require.NoError(t, err)
	require.Equal(t, "p-1-r2", second.ID)

	wall := at(4, 0).Add(17 * time.Minute)
	clocked, err := Replanner(ReplannerParams{Store: st, IDs: Fixed("p-1-x"), Now: func() time.Time { return wall }})(ctx, prev, at(3, 2))
	require.NoError(t, err)
	require.Equal(t, wall, clocked.CreatedAt)
	require.Equal(t, at(3, 2), clocked.ExecutionTime)
}

// RandomID gives distinct 16-hex-digit ids.
func TestRandomIDs(t *testing.T) {
	t.Parallel()
	a, err := RandomID()
	require.NoError(t, err)
	b, err := RandomID()
	require.NoError(t, err)
	require.Regexp(t, `^[0-9a-f]{16}$`, a)
	require.NotEqual(t, a, b)
}
