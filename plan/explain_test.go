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

// fakeSQL is the SQL layer for these tests: every query change compares
// as change, and every query reads reads.
type fakeSQL struct {
	change snapshot.QueryChange
	reads  snapshot.ColumnReads
}

func (f fakeSQL) Compare(string, string) (snapshot.QueryChange, error) { return f.change, nil }
func (f fakeSQL) Reads(string) (snapshot.ColumnReads, error)           { return f.reads, nil }

// promote makes env serve snaps in st, as an applied plan would.
func promote(t *testing.T, st state.Store, env, planID string, snaps map[string]*snapshot.Snapshot) *state.Environment {
	t.Helper()
	ctx := context.Background()
	var list []*snapshot.Snapshot
	var refs []state.SnapshotRef
	for _, name := range mustGraph(t).Order() {
		s := snaps[name]
		list = append(list, s)
		refs = append(refs, state.SnapshotRef{Name: s.Name, Fingerprint: s.Fingerprint.String(), Version: s.Version})
	}
	require.NoError(t, st.PushSnapshots(ctx, list))
	e, err := st.Promote(ctx, state.PromoteParams{Environment: env, PlanID: planID, Snapshots: refs, Now: at(1, 0)})
	require.NoError(t, err)
	return e
}

func cover(t *testing.T, st state.Store, s *snapshot.Snapshot, r interval.Range) {
	t.Helper()
	require.NoError(t, st.AddIntervals(context.Background(), state.IntervalsParams{
		Key: state.VersionKey{Name: s.Name, Version: s.Version}, Ranges: interval.NewSet(r), Now: at(1, 0)}))
}

// Scenario: dev built a change; prod then plans the same change. The
// versions are dev's, so prod's plan lists as work only what dev's
// interval records lack within prod's bounds: events (fully built) and
// totals (a FULL model dev built at this very bound) have no backfill and
// say they reuse dev's tables; daily, which dev built only in part, lists
// only the missing day.
func TestBuildReusesWhatAnotherEnvironmentBuilt(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	withStart := newFixture().edit("demo.totals", func(m *model.Model) { m.Start = at(1, 0) })
	base, _ := withStart.snapshots(t)
	cur := promote(t, st, Prod, "p-0", base)
	cover(t, st, base["demo.events"], interval.NewRange(at(1, 0), at(3, 0)))
	cover(t, st, base["demo.daily"], interval.NewRange(at(1, 0), at(3, 0)))
	cover(t, st, base["demo.totals"], interval.NewRange(at(1, 0), at(3, 0)))

	changed := withStart.edit("demo.events", func(m *model.Model) { m.Query = "SELECT ts FROM src.events WHERE ts > '2000-01-01'" })
	devPlan := build(t, st, "dev", nil, base, changed, at(3, 0), Options{})
	next := map[string]*snapshot.Snapshot{}
	for _, s := range devPlan.Snapshots {
		next[s.Name] = s
	}
	promote(t, st, "dev", devPlan.ID, next)
	cover(t, st, next["demo.events"], interval.NewRange(at(1, 0), at(3, 0)))
	cover(t, st, next["demo.daily"], interval.NewRange(at(1, 0), at(2, 0)))
	cover(t, st, next["demo.totals"], interval.NewRange(at(1, 0), at(3, 0)))

	p := build(t, st, Prod, cur, base, changed, at(3, 0), Options{})
	require.Len(t, p.Backfills, 1, "only daily has work left")
	daily, ok := p.BackfillFor("demo.daily")
	require.True(t, ok)
	require.Equal(t, "{[2024-01-02T00:00:00Z, 2024-01-03T00:00:00Z)}", daily.Ranges.String())
	_, ok = p.BackfillFor("demo.totals")
	require.False(t, ok, "dev built totals at this bound; apply would skip it")

	require.Equal(t, []Reuse{
		{Name: "demo.events", Version: next["demo.events"].Version, Covered: interval.NewSet(interval.NewRange(at(1, 0), at(3, 0))),
			Complete: true, BuiltBy: []string{"dev"}},
		{Name: "demo.daily", Version: next["demo.daily"].Version, Covered: interval.NewSet(interval.NewRange(at(1, 0), at(2, 0))),
			BuiltBy: []string{"dev"}},
		{Name: "demo.totals", Version: next["demo.totals"].Version, Covered: interval.NewSet(interval.NewRange(at(1, 0), at(3, 0))),
			Complete: true, BuiltBy: []string{"dev"}},
	}, normalised(p.Reuses))
	b, err := Encode(p)
	require.NoError(t, err)
	saved, err := Decode(b)
	require.NoError(t, err)
	require.Equal(t, normalised(p.Reuses), normalised(saved.Reuses), "reuses travel in the plan file")

	// A day later the FULL model's bound has moved: it is built again.
	later := build(t, st, Prod, cur, base, changed, at(4, 0), Options{})
	tot, ok := later.BackfillFor("demo.totals")
	require.True(t, ok)
	require.True(t, tot.Whole)

	// Restating recomputes whatever dev built.
	restated := build(t, st, Prod, cur, base, changed, at(3, 0), Options{Restate: []string{"demo.events"}})
	ev, ok := restated.BackfillFor("demo.events")
	require.True(t, ok)
	require.Equal(t, 48, ev.Buckets)
	require.Empty(t, restated.Reuses)
}

// normalised makes reuses comparable with require.Equal (interval sets
// built differently compare equal by value).
func normalised(rs []Reuse) []Reuse {
	out := make([]Reuse, len(rs))
	for i, r := range rs {
		r.Covered = interval.NewSet(r.Covered.Ranges()...)
		out[i] = r
	}
	return out
}

// Scenario: every change in a plan carries its reason, and a change to a
// model's header (cron, owner, kind properties) shows a diff of the header,
// as a query change shows a diff of the query.
func TestBuildExplainsChanges(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	base, _ := newFixture().snapshots(t)
	cur := &state.Environment{Name: Prod, PlanID: "p-0", Generation: 1}
	edited := newFixture().
		edit("demo.events", func(m *model.Model) { m.Owner, m.Cron, m.Lookback = "finance", "0 * * * *", 2 }).
		edit("demo.daily", func(m *model.Model) {
			m.Query = "SELECT date_trunc('day', ts) AS ts FROM demo.events WHERE ts > '2000-01-01'"
		})
	p := build(t, st, Prod, cur, base, edited, at(2, 0), Options{})
	byName := map[string]Change{}
	for _, c := range p.Changes {
		byName[c.Name] = c
	}
	ev := byName["demo.events"]
	require.Equal(t, snapshot.MetadataOnly, ev.Category)
	require.Equal(t, "only cron, lookback and owner changed", ev.Reason)
	require.Empty(t, ev.Diff, "the query is unchanged")
	require.Contains(t, ev.HeaderDiff, "--- demo.events header (current)")
	require.Contains(t, ev.HeaderDiff, "-  kind INCREMENTAL_BY_TIME_RANGE (time_column ts),\n")
	require.Contains(t, ev.HeaderDiff, "+  kind INCREMENTAL_BY_TIME_RANGE (time_column ts, lookback 2),\n")
	require.Contains(t, ev.HeaderDiff, "-  cron '@hourly',\n+  cron '0 * * * *',\n")
	require.Contains(t, ev.HeaderDiff, "+  owner 'finance'\n")

	daily := byName["demo.daily"]
	require.Equal(t, snapshot.Breaking, daily.Category)
	require.Equal(t, "the query changes", daily.Reason, "without a SQL layer gapless cannot say more")
	require.Empty(t, daily.HeaderDiff, "the header is unchanged")
	require.NotEmpty(t, daily.Diff)
	require.Equal(t, "reads demo.daily, which changes breakingly", byName["demo.totals"].Reason)

	// The reasons travel in the plan file.
	b, err := Encode(p)
	require.NoError(t, err)
	got, err := Decode(b)
	require.NoError(t, err)
	require.Equal(t, p.Changes, got.Changes)
}

// Scenario: the operator chooses non-breaking for a breaking change whose
// changed column no child reads. The choice is recorded in the plan's
// options, the child keeps its table (no backfill), it survives the plan
// file, and a replan (Rebuild, the replan policy) makes the same choice.
// The same choice over a column the child reads is refused.
func TestBuildCategoryChoice(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openStore(t)
	base, _ := newFixture().snapshots(t)
	promote(t, st, Prod, "p-0", base)
	for _, name := range []string{"demo.events", "demo.daily"} {
		cover(t, st, base[name], interval.NewRange(at(1, 0), at(2, 0)))
	}
	current, against, err := Against(ctx, st, Prod)
	require.NoError(t, err)
	changed := newFixture().edit("demo.events", func(m *model.Model) { m.Query = "SELECT ts, 1 AS other FROM src.events" })
	next, g := changed.snapshots(t)
	sql := fakeSQL{change: snapshot.QueryChange{Changed: []string{"other"}, Reason: "column other changes"},
		reads: snapshot.ColumnReads{Columns: []string{"ts"}}}
	opts := Options{Categories: map[string]snapshot.Choice{"demo.events": snapshot.ChooseNonBreaking}}
	params := BuildParams{ID: "p-1", Environment: Prod, Current: current, Base: against, Next: next, Graph: g,
		Intervals: st, Additive: sql, ExecutionTime: at(2, 0), Now: at(2, 0), Options: opts}
	p, err := Build(ctx, params)
	require.NoError(t, err)
	check := func(p *Plan) {
		t.Helper()
		require.Equal(t, "demo.events", p.Changes[0].Name)
		require.Equal(t, snapshot.NonBreaking, p.Changes[0].Category)
		require.Equal(t, snapshot.ChooseNonBreaking, p.Changes[0].Chosen)
		require.Equal(t, snapshot.Breaking, p.Changes[0].AutoCategory)
		require.Equal(t, "chosen with --category, over breaking (column other changes); no child reads a column it removes or changes", p.Changes[0].Reason)
		require.Equal(t, snapshot.IndirectNonBreaking, p.Changes[1].Category)
		_, ok := p.BackfillFor("demo.daily")
		require.False(t, ok, "the child keeps its table")
		require.Equal(t, opts.Categories, p.Options.Categories)
	}
	check(p)

	b, err := Encode(p)
	require.NoError(t, err)
	saved, err := Decode(b)
	require.NoError(t, err)
	check(saved)

	re, err := Rebuild(ctx, RebuildParams{Prev: saved, ID: "p-1-r", Store: st, Additive: sql, ExecutionTime: at(2, 0), Now: at(2, 0)})
	require.NoError(t, err)
	check(re)

	params.Additive = fakeSQL{change: snapshot.QueryChange{Changed: []string{"ts"}, Reason: "column ts changes"},
		reads: snapshot.ColumnReads{Columns: []string{"ts"}}}
	_, err = Build(ctx, params)
	var ce *snapshot.ChoiceError
	require.ErrorAs(t, err, &ce)
	require.EqualError(t, err, "categorising changes: category non-breaking for demo.events refused: demo.daily reads column ts, which this change alters (column ts changes)")
}
