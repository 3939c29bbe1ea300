package plan

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/model"
	"github.com/gapless-dev/gapless/snapshot"
	"github.com/gapless-dev/gapless/state"
)

// Scenario: the options of SQLMesh's plan flags are checked per
// environment: --backfill-model is refused for prod, an empty backfill
// with a skipped one anywhere; an empty backfill is allowed in prod, as in
// SQLMesh. Both options survive a plan file and a stored plan, with the
// plan's empty backfill.
func TestSQLMeshFlagOptions(t *testing.T) {
	t.Parallel()
	require.ErrorIs(t, CheckOptions(Prod, Options{BackfillModels: []string{"demo.daily"}}), ErrBackfillModelInProd)
	require.NoError(t, CheckOptions("dev", Options{BackfillModels: []string{"demo.daily"}}))
	require.Error(t, CheckOptions("dev", Options{EmptyBackfill: true, SkipBackfill: true}))
	require.NoError(t, CheckOptions(Prod, Options{EmptyBackfill: true}))

	p := samplePlan()
	p.Environment = "dev"
	p.Options.BackfillModels = []string{"demo.daily"}
	p.Options.EmptyBackfill = true
	p.Empty = []Backfill{{Name: "a.b", Version: "v1", Ranges: interval.NewSet(interval.NewRange(hour(0), hour(2))), Buckets: 2}}
	b, err := Encode(p)
	require.NoError(t, err)
	require.Contains(t, string(b), `"backfill_models": [`)
	require.Contains(t, string(b), `"empty_backfill": true`)
	require.Contains(t, string(b), `"empty_backfills": [`)
	got, err := Decode(b)
	require.NoError(t, err)
	require.Equal(t, p.Options.BackfillModels, got.Options.BackfillModels)
	require.True(t, got.Options.EmptyBackfill)
	require.Equal(t, p.Empty[0].Ranges.String(), got.Empty[0].Ranges.String())

	plain, err := Encode(samplePlan())
	require.NoError(t, err)
	require.NotContains(t, string(plain), "empty_backfill", "a plan without the flags encodes as before")
	require.NotContains(t, string(plain), "backfill_models")
}

// Scenario: prod serves the fixture (demo.totals starting 2024-01-01);
// demo.daily changes breakingly, so demo.totals changes indirectly. An
// empty backfill plans no work: every missing range goes to Empty
// (demo.totals, built whole, with the range it records). RecordEmpty records them as covered
// and writes one empty_backfill event per model, naming the plan, the
// version and the ranges; recording again changes nothing.
func TestEmptyBackfillIsRecordedNotComputed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openStore(t)
	started := newFixture().edit("demo.totals", func(m *model.Model) { m.Start = at(1, 0) })
	base, _ := started.snapshots(t)
	changed := started.edit("demo.daily", func(m *model.Model) { m.Query = "SELECT date_trunc('day', ts) + 1 AS ts FROM demo.events" })
	exec := at(3, 0)

	p := build(t, st, "dev", nil, base, changed, exec, Options{AllowGaps: true, EmptyBackfill: true})
	require.Empty(t, p.Backfills, "nothing is computed")
	byName := map[string]Backfill{}
	for _, e := range p.Empty {
		byName[e.Name] = e
	}
	require.Len(t, byName, 2)
	require.Equal(t, "{[2024-01-01T00:00:00Z, 2024-01-03T00:00:00Z)}", byName["demo.daily"].Ranges.String())
	require.True(t, byName["demo.totals"].Whole)
	require.False(t, byName["demo.totals"].Ranges.IsEmpty())

	require.NoError(t, RecordEmpty(ctx, st, p, exec))
	require.NoError(t, RecordEmpty(ctx, st, p, exec))
	key := state.VersionKey{Name: "demo.daily", Version: byName["demo.daily"].Version}
	cov, err := st.GetIntervals(ctx, []state.VersionKey{key})
	require.NoError(t, err)
	require.Equal(t, byName["demo.daily"].Ranges.String(), cov[key].String())

	evs, err := st.ListEvents(ctx, state.EventFilter{Kinds: []string{state.EventEmptyBackfill}})
	require.NoError(t, err)
	require.Len(t, evs, 4, "one event per model and recording")
	require.Equal(t, p.ID, evs[0].PlanID)
	require.Equal(t, "dev", evs[0].Environment)
	require.Contains(t, string(evs[0].Data), byName[evs[0].Model].Version)

	again := build(t, st, "dev", nil, base, changed, exec, Options{AllowGaps: true})
	_, ok := again.BackfillFor("demo.daily")
	require.False(t, ok, "what was recorded is covered: a later plan does not compute it")
}

// Scenario: --backfill-model demo.daily with demo.daily and demo.totals
// changed: demo.daily and what it reads take the project's snapshots,
// demo.totals (downstream, not selected) keeps the one base serves, so the
// plan neither backfills nor promotes it; Deferred names it. A model not
// in the plan is an error.
func TestSelectBackfillKeepsTheRestAsServed(t *testing.T) {
	t.Parallel()
	base, _ := newFixture().snapshots(t)
	changed := newFixture().edit("demo.daily", func(m *model.Model) { m.Query = "SELECT date_trunc('day', ts) + 1 AS ts FROM demo.events" })
	next, g := changed.snapshots(t)

	sel, sg, err := SelectBackfill(next, g, base, []string{"demo.daily"})
	require.NoError(t, err)
	require.Equal(t, next["demo.daily"].Fingerprint, sel["demo.daily"].Fingerprint)
	require.Equal(t, base["demo.totals"].Fingerprint, sel["demo.totals"].Fingerprint)
	require.ElementsMatch(t, g.Order(), sg.Order())

	st := openStore(t)
	p, err := Build(context.Background(), BuildParams{ID: "p", Environment: "dev", Base: base, Next: sel, Graph: sg,
		Intervals: st, ExecutionTime: at(3, 0), Now: at(3, 0), Options: Options{AllowGaps: true, BackfillModels: []string{"demo.daily"}}})
	require.NoError(t, err)
	_, ok := p.BackfillFor("demo.totals")
	require.False(t, ok)
	require.Equal(t, []string{"demo.totals"}, Deferred(p, next))
	require.Nil(t, Deferred(&Plan{}, next), "no --backfill-model, nothing deferred")

	_, _, err = SelectBackfill(next, g, base, []string{"demo.nope"})
	require.ErrorContains(t, err, "--backfill-model demo.nope")

	same, _, err := SelectBackfill(next, g, base, nil)
	require.NoError(t, err)
	require.Equal(t, map[string]*snapshot.Snapshot(next), same)
}
