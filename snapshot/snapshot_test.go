package snapshot

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/dag"
	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/model"
)

// project is a tiny three-model chain raw.events -> stg.events -> mart.daily
// used by the tests below; each test edits a copy.
type project struct {
	models  map[string]*model.Model
	queries map[string]string
}

func baseProject() project {
	mk := func(name, q string) *model.Model {
		return &model.Model{
			Name: name, Kind: model.KindIncrementalByTimeRange, TimeColumn: "ts",
			Dialect: model.DialectDuckDB, Cron: "@hourly", IntervalUnit: interval.Hour,
			Enabled: true, Owner: "data", Query: q,
		}
	}
	p := project{models: map[string]*model.Model{}, queries: map[string]string{}}
	for name, q := range map[string]string{
		"raw.events": "SELECT id, ts FROM src.events",
		"stg.events": "SELECT id, ts FROM raw.events",
		"mart.daily": "SELECT ts, count(*) AS n FROM stg.events GROUP BY ts",
	} {
		p.models[name] = mk(name, q)
		p.queries[name] = q
	}
	return p
}

func (p project) clone() project {
	c := project{models: map[string]*model.Model{}, queries: map[string]string{}}
	for k, m := range p.models {
		mm := *m
		c.models[k] = &mm
	}
	for k, q := range p.queries {
		c.queries[k] = q
	}
	return c
}

func (p project) graph(t *testing.T) *dag.Graph {
	edges := map[string][]string{}
	for name := range p.models {
		edges[name] = nil
	}
	edges["stg.events"] = []string{"raw.events"}
	edges["mart.daily"] = []string{"stg.events"}
	g, err := dag.New(edges)
	require.NoError(t, err)
	return g
}

func (p project) build(t *testing.T) (map[string]*Snapshot, *dag.Graph) {
	g := p.graph(t)
	in := map[string]Input{}
	for name, m := range p.models {
		in[name] = Input{Model: m, Canonical: p.queries[name]}
	}
	s, err := BuildAll(g, in)
	require.NoError(t, err)
	return s, g
}

// prefixAdditive stands in for the SQL layer's projection check in these
// plain-Go tests: new is additive when it is old with extra text appended to
// the select list. The real check (sqlparse) is exercised by the project
// package's tests.
func prefixAdditive(oldSQL, newSQL string) (bool, error) {
	o, _, _ := strings.Cut(oldSQL, " FROM ")
	n, _, _ := strings.Cut(newSQL, " FROM ")
	return n != o && strings.HasPrefix(n, o+","), nil
}

func categorize(t *testing.T, prev, next project, opts Options) (map[string]Change, map[string]*Snapshot, map[string]*Snapshot) {
	ps, _ := prev.build(t)
	ns, g := next.build(t)
	changes, err := Categorize(ps, ns, g, prefixAdditive, opts)
	require.NoError(t, err)
	AssignVersions(changes)
	byName := map[string]Change{}
	for _, c := range changes {
		byName[c.Name] = c
	}
	return byName, ps, ns
}

func TestFingerprintsAreDeterministic(t *testing.T) {
	t.Parallel()
	a, _ := baseProject().build(t)
	b, _ := baseProject().build(t)
	for name := range a {
		require.Equal(t, a[name].Fingerprint, b[name].Fingerprint, name)
		require.Equal(t, a[name].Version, b[name].Version, name)
		require.Len(t, a[name].Version, hashLen)
	}
	require.NotEqual(t, a["stg.events"].Version, a["mart.daily"].Version)
}

func TestCategories(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		edit  func(p project)
		opts  Options
		want  map[string]Category
		reuse map[string]bool // true: keeps the previous version
		fwd   map[string]bool
	}{
		{
			name:  "breaking change propagates as indirect-breaking",
			edit:  func(p project) { p.queries["stg.events"] = "SELECT id, ts FROM raw.events WHERE id > 0" },
			want:  map[string]Category{"raw.events": Unchanged, "stg.events": Breaking, "mart.daily": IndirectBreaking},
			reuse: map[string]bool{"raw.events": true, "stg.events": false, "mart.daily": false},
		},
		{
			name:  "added projection is non-breaking and children keep their tables",
			edit:  func(p project) { p.queries["stg.events"] = "SELECT id, ts, 1 AS one FROM raw.events" },
			want:  map[string]Category{"raw.events": Unchanged, "stg.events": NonBreaking, "mart.daily": IndirectNonBreaking},
			reuse: map[string]bool{"raw.events": true, "stg.events": false, "mart.daily": true},
		},
		{
			name: "metadata only keeps every version",
			edit: func(p project) {
				p.models["stg.events"].Owner = "someone-else"
				p.models["stg.events"].Cron = "0 * * * *"
			},
			want:  map[string]Category{"raw.events": Unchanged, "stg.events": MetadataOnly, "mart.daily": Unchanged},
			reuse: map[string]bool{"raw.events": true, "stg.events": true, "mart.daily": true},
		},
		{
			name: "a physical attribute change with an additive query is breaking",
			edit: func(p project) {
				p.queries["stg.events"] = "SELECT id, ts, 1 AS one FROM raw.events"
				p.models["stg.events"].TimeColumn = "id"
			},
			want:  map[string]Category{"stg.events": Breaking, "mart.daily": IndirectBreaking},
			reuse: map[string]bool{"stg.events": false, "mart.daily": false},
		},
		{
			name: "forward-only model reuses its table and so do its descendants",
			edit: func(p project) {
				p.queries["stg.events"] = "SELECT id, ts FROM raw.events WHERE id > 0"
				p.models["stg.events"].ForwardOnly = true
			},
			want:  map[string]Category{"stg.events": Breaking, "mart.daily": IndirectBreaking},
			reuse: map[string]bool{"stg.events": true, "mart.daily": true},
			fwd:   map[string]bool{"raw.events": false, "stg.events": true, "mart.daily": true},
		},
		{
			name:  "forward-only plan reuses every changed table",
			edit:  func(p project) { p.queries["raw.events"] = "SELECT id, ts FROM src.events WHERE ts IS NOT NULL" },
			opts:  Options{ForwardOnly: true},
			want:  map[string]Category{"raw.events": Breaking, "stg.events": IndirectBreaking, "mart.daily": IndirectBreaking},
			reuse: map[string]bool{"raw.events": true, "stg.events": true, "mart.daily": true},
			fwd:   map[string]bool{"raw.events": true, "stg.events": true, "mart.daily": true},
		},
		{
			name:  "interval unit is physical",
			edit:  func(p project) { p.models["mart.daily"].IntervalUnit = interval.Day },
			want:  map[string]Category{"mart.daily": Breaking},
			reuse: map[string]bool{"mart.daily": false},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			prev := baseProject()
			next := prev.clone()
			tc.edit(next)
			got, ps, ns := categorize(t, prev, next, tc.opts)
			for name, want := range tc.want {
				require.Equal(t, want, got[name].Category, name)
			}
			for name, reuse := range tc.reuse {
				if reuse {
					require.Equal(t, ps[name].Version, ns[name].Version, "%s should keep its version", name)
				} else {
					require.NotEqual(t, ps[name].Version, ns[name].Version, "%s should get a new version", name)
				}
			}
			for name, f := range tc.fwd {
				require.Equal(t, f, got[name].ForwardOnly, name)
			}
		})
	}
}

func TestAddedRemovedAndRevert(t *testing.T) {
	t.Parallel()
	prev := baseProject()
	next := prev.clone()
	delete(next.models, "mart.daily")
	delete(next.queries, "mart.daily")
	next.models["mart.other"] = &model.Model{Name: "mart.other", Kind: model.KindFull, Dialect: model.DialectDuckDB,
		Cron: "@daily", IntervalUnit: interval.Day, Enabled: true}
	next.queries["mart.other"] = "SELECT 1 AS x"
	ps, _ := prev.build(t)
	g, err := dag.New(map[string][]string{"raw.events": nil, "stg.events": {"raw.events"}, "mart.other": nil})
	require.NoError(t, err)
	in := map[string]Input{}
	for name, m := range next.models {
		in[name] = Input{Model: m, Canonical: next.queries[name]}
	}
	ns, err := BuildAll(g, in)
	require.NoError(t, err)
	changes, err := Categorize(ps, ns, g, prefixAdditive, Options{})
	require.NoError(t, err)
	cats := map[string]Category{}
	for _, c := range changes {
		cats[c.Name] = c.Category
	}
	require.Equal(t, map[string]Category{"raw.events": Unchanged, "stg.events": Unchanged, "mart.other": Added, "mart.daily": Removed}, cats)
	require.Equal(t, "mart.daily", changes[len(changes)-1].Name, "removed models come last")

	// Scenario: a breaking edit that is then reverted lands back on the
	// original version, so the original physical table and its intervals are
	// reused instead of rebuilt.
	edited := prev.clone()
	edited.queries["stg.events"] = "SELECT id, ts FROM raw.events WHERE false"
	reverted := prev.clone()
	_, _, rs := categorize(t, edited, reverted, Options{})
	require.Equal(t, ps["stg.events"].Version, rs["stg.events"].Version)
	require.Equal(t, ps["mart.daily"].Version, rs["mart.daily"].Version)
}
