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

// fakeSQL stands in for the SQL layer in these plain-Go tests. Queries are
// "SELECT e1, e2 AS n2 FROM rest": a column is named by its last word; a
// change is additive when the new select list is the old one with columns
// appended and rest is unchanged. Reads are every word of the query. The
// real check (sqlparse) is exercised by the project package's tests.
type fakeSQL struct{}

var prefixAdditive fakeSQL

func fakeColumns(sql string) (cols map[string]string, order []string, rest string) {
	list, rest, _ := strings.Cut(strings.TrimPrefix(sql, "SELECT "), " FROM ")
	cols = map[string]string{}
	for _, c := range strings.Split(list, ", ") {
		words := strings.Fields(c)
		name := words[len(words)-1]
		cols[name] = c
		order = append(order, name)
	}
	return cols, order, rest
}

func (fakeSQL) Compare(oldSQL, newSQL string) (QueryChange, error) {
	oc, oo, orest := fakeColumns(oldSQL)
	nc, no, nrest := fakeColumns(newSQL)
	if orest != nrest {
		return QueryChange{AllChanged: true, Reason: "the FROM clause changes"}, nil
	}
	var q QueryChange
	var msgs []string
	for _, name := range oo {
		switch e, ok := nc[name]; {
		case !ok:
			q.Removed = append(q.Removed, name)
			msgs = append(msgs, "column "+name+" is removed")
		case e != oc[name]:
			q.Changed = append(q.Changed, name)
			msgs = append(msgs, "column "+name+" changes")
		}
	}
	for _, name := range no {
		if _, ok := oc[name]; !ok {
			q.Added = append(q.Added, name)
			msgs = append(msgs, "adds column "+name)
		}
	}
	o, _, _ := strings.Cut(oldSQL, " FROM ")
	n, _, _ := strings.Cut(newSQL, " FROM ")
	q.Additive = n != o && strings.HasPrefix(n, o+",")
	q.Reason = strings.Join(msgs, "; ")
	return q, nil
}

func (fakeSQL) Reads(sql string) (ColumnReads, error) {
	var r ColumnReads
	for _, w := range strings.FieldsFunc(sql, func(c rune) bool { return strings.ContainsRune(" ,()=<>", c) }) {
		if w == "*" && (strings.Contains(sql, "SELECT *") || strings.Contains(sql, ", *")) {
			r.All = true
		}
		r.Columns = append(r.Columns, strings.ToLower(w))
	}
	return r, nil
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
			name: "an audit added or changed is metadata only, and keeps every version",
			edit: func(p project) {
				p.models["stg.events"].Audits = []model.AuditRef{{Name: "not_null", Args: []model.AuditArg{{Name: "columns", SQL: "(id)"}}}}
				p.models["stg.events"].InlineAudits = []model.AuditDef{{Name: "positive", Blocking: true, Query: "SELECT * FROM @this_model WHERE id < 0"}}
			},
			want:  map[string]Category{"raw.events": Unchanged, "stg.events": MetadataOnly, "mart.daily": Unchanged},
			reuse: map[string]bool{"raw.events": true, "stg.events": true, "mart.daily": true},
		},
		{
			name:  "a pre-statement added changes the data: breaking",
			edit:  func(p project) { p.models["stg.events"].PreStatements = []model.Statement{{SQL: "SET threads = 1"}} },
			want:  map[string]Category{"raw.events": Unchanged, "stg.events": Breaking, "mart.daily": IndirectBreaking},
			reuse: map[string]bool{"raw.events": true, "stg.events": false, "mart.daily": false},
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
	reasons := map[string]string{}
	for _, c := range changes {
		cats[c.Name] = c.Category
		reasons[c.Name] = c.Reason
	}
	require.Equal(t, "new model", reasons["mart.other"])
	require.Equal(t, "no longer in the project", reasons["mart.daily"])
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

// Scenario: every change carries its reason, decided where its category is:
// what about a query, a physical attribute or the metadata changed, and for
// an indirect change which parent and how; forward-only says why too.
func TestCategoryReasons(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		edit func(p project)
		opts Options
		want map[string]string // model -> "category: reason"
		fwd  map[string]string // model -> forward-only reason
	}{
		{
			name: "breaking and its child",
			edit: func(p project) { p.queries["stg.events"] = "SELECT id, ts FROM raw.events WHERE id > 0" },
			want: map[string]string{
				"stg.events": "breaking: the FROM clause changes",
				"mart.daily": "indirect-breaking: reads stg.events, which changes breakingly",
			},
		},
		{
			name: "non-breaking no child reads",
			edit: func(p project) { p.queries["stg.events"] = "SELECT id, ts, 1 AS one FROM raw.events" },
			want: map[string]string{
				"stg.events": "non-breaking: adds column one, which no child reads",
				"mart.daily": "indirect-non-breaking: reads stg.events, which changes non-breakingly",
			},
		},
		{
			name: "non-breaking a child reads",
			edit: func(p project) {
				p.queries["stg.events"] = "SELECT id, ts, 1 AS one FROM raw.events"
				p.queries["mart.daily"] = "SELECT ts, count(*) AS n, max(one) AS m FROM stg.events GROUP BY ts"
			},
			want: map[string]string{
				"stg.events": "non-breaking: adds column one, read by mart.daily",
				"mart.daily": "non-breaking: adds column m, which no child reads",
			},
		},
		{
			name: "metadata only",
			edit: func(p project) {
				p.models["stg.events"].Owner = "someone-else"
				p.models["stg.events"].Cron = "0 * * * *"
			},
			want: map[string]string{"stg.events": "metadata-only: only cron and owner changed"},
		},
		{
			name: "physical attribute",
			edit: func(p project) { p.models["stg.events"].TimeColumn = "id" },
			want: map[string]string{
				"stg.events": "breaking: time_column changes from ts to id",
				"mart.daily": "indirect-breaking: reads stg.events, which changes breakingly",
			},
		},
		{
			name: "kind",
			edit: func(p project) { p.models["mart.daily"].Kind = model.KindFull },
			want: map[string]string{"mart.daily": "breaking: kind changes from INCREMENTAL_BY_TIME_RANGE to FULL"},
		},
		{
			name: "indirect change with new metadata",
			edit: func(p project) {
				p.queries["raw.events"] = "SELECT id, ts FROM src.events WHERE id > 0"
				p.models["mart.daily"].Owner = "finance"
			},
			want: map[string]string{
				"stg.events": "indirect-breaking: reads raw.events, which changes breakingly",
				"mart.daily": "indirect-breaking: reads stg.events, which is indirectly breaking; owner changed too",
			},
		},
		{
			name: "declared forward-only",
			edit: func(p project) {
				p.queries["stg.events"] = "SELECT id, ts FROM raw.events WHERE id > 0"
				p.models["stg.events"].ForwardOnly = true
			},
			want: map[string]string{"stg.events": "breaking: the FROM clause changes; forward_only changed too"},
			fwd:  map[string]string{"stg.events": "declared forward_only", "mart.daily": "reads stg.events, which is forward-only"},
		},
		{
			name: "forward-only plan",
			edit: func(p project) { p.queries["raw.events"] = "SELECT id, ts FROM src.events WHERE ts IS NOT NULL" },
			opts: Options{ForwardOnly: true},
			fwd: map[string]string{"raw.events": "the plan is forward-only (--forward-only)",
				"stg.events": "the plan is forward-only (--forward-only)"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			next := baseProject().clone()
			tc.edit(next)
			got, _, _ := categorize(t, baseProject(), next, tc.opts)
			for name, want := range tc.want {
				require.Equal(t, want, string(got[name].Category)+": "+got[name].Reason, name)
			}
			for name, want := range tc.fwd {
				require.True(t, got[name].ForwardOnly, name)
				require.Equal(t, want, got[name].ForwardOnlyReason, name)
			}
		})
	}
}

// Scenario: the operator chooses a category for a directly changed model
// (plan --category). A safe choice replaces gapless's own, and the children
// follow it; an unsafe one, a model the plan does not change, or a name
// that is no model, is refused with the reason.
func TestCategoryChoices(t *testing.T) {
	t.Parallel()
	editID := func(p project) { p.queries["stg.events"] = "SELECT id + 0 AS id, ts FROM raw.events" }
	editTS := func(p project) { p.queries["stg.events"] = "SELECT id, ts + 1 AS ts FROM raw.events" }
	addOne := func(p project) { p.queries["stg.events"] = "SELECT id, ts, 1 AS one FROM raw.events" }
	where := func(p project) { p.queries["stg.events"] = "SELECT id, ts FROM raw.events WHERE id > 0" }
	choose := func(name string, c Choice) Options { return Options{Choices: map[string]Choice{name: c}} }

	t.Run("non-breaking over breaking when no child reads the changed column", func(t *testing.T) {
		t.Parallel()
		next := baseProject().clone()
		editID(next)
		got, ps, ns := categorize(t, baseProject(), next, choose("stg.events", ChooseNonBreaking))
		stg := got["stg.events"]
		require.Equal(t, NonBreaking, stg.Category)
		require.Equal(t, ChooseNonBreaking, stg.Chosen)
		require.Equal(t, Breaking, stg.Auto)
		require.Equal(t, "chosen with --category, over breaking (column id changes); no child reads a column it removes or changes", stg.Reason)
		require.Equal(t, IndirectNonBreaking, got["mart.daily"].Category)
		require.Equal(t, ps["mart.daily"].Version, ns["mart.daily"].Version, "the child keeps its table")
		require.NotEqual(t, ps["stg.events"].Version, ns["stg.events"].Version)
	})
	t.Run("breaking over non-breaking", func(t *testing.T) {
		t.Parallel()
		next := baseProject().clone()
		addOne(next)
		got, ps, ns := categorize(t, baseProject(), next, choose("stg.events", ChooseBreaking))
		require.Equal(t, Breaking, got["stg.events"].Category)
		require.Equal(t, IndirectBreaking, got["mart.daily"].Category)
		require.NotEqual(t, ps["mart.daily"].Version, ns["mart.daily"].Version, "the child is rebuilt")
	})
	t.Run("forward-only keeps the table and its children's", func(t *testing.T) {
		t.Parallel()
		next := baseProject().clone()
		editID(next)
		got, ps, ns := categorize(t, baseProject(), next, choose("stg.events", ChooseForwardOnly))
		require.True(t, got["stg.events"].ForwardOnly)
		require.Equal(t, "chosen with --category", got["stg.events"].ForwardOnlyReason)
		require.Equal(t, Breaking, got["stg.events"].Category)
		require.Equal(t, ps["stg.events"].Version, ns["stg.events"].Version)
		require.Equal(t, "reads stg.events, which is forward-only", got["mart.daily"].ForwardOnlyReason)
	})
	t.Run("non-breaking on a leaf whose rows change", func(t *testing.T) {
		t.Parallel()
		next := baseProject().clone()
		next.queries["mart.daily"] = "SELECT ts, count(*) AS n FROM stg.events WHERE ts > 0 GROUP BY ts"
		got, _, _ := categorize(t, baseProject(), next, choose("mart.daily", ChooseNonBreaking))
		require.Equal(t, NonBreaking, got["mart.daily"].Category)
	})

	refused := []struct {
		name   string
		edit   func(p project)
		model  string
		choice Choice
		reason string
	}{
		{"non-breaking when a child reads the changed column", editTS, "stg.events", ChooseNonBreaking,
			"mart.daily reads column ts, which this change alters (column ts changes)"},
		{"non-breaking when the rows change", where, "stg.events", ChooseNonBreaking,
			"mart.daily reads stg.events, whose every column may change (the FROM clause changes)"},
		{"non-breaking when a physical attribute changes", func(p project) { p.models["stg.events"].TimeColumn = "id" }, "stg.events", ChooseNonBreaking,
			"mart.daily reads stg.events, whose every column may change (time_column changes from ts to id)"},
		{"non-breaking on a forward-only model", func(p project) { editTS(p); p.models["stg.events"].ForwardOnly = true }, "stg.events", ChooseNonBreaking,
			"stg.events is forward-only (declared forward_only): it keeps its table whatever its category"},
		{"forward-only adding a column", addOne, "stg.events", ChooseForwardOnly,
			"the change adds column one, which the existing table does not have; choose breaking or non-breaking to rebuild it"},
		{"forward-only removing a column", func(p project) { p.queries["stg.events"] = "SELECT ts FROM raw.events" }, "stg.events", ChooseForwardOnly,
			"the change removes column id, which the existing table has; choose breaking to rebuild it"},
		{"forward-only over a physical change", func(p project) { p.models["stg.events"].TimeColumn = "id" }, "stg.events", ChooseForwardOnly,
			"time_column changes from ts to id, which the existing table cannot follow; choose breaking"},
		{"unchanged", editID, "raw.events", ChooseBreaking, "raw.events is not changed by this plan"},
		{"indirect", editID, "mart.daily", ChooseBreaking,
			"mart.daily changes only through its parents (reads stg.events, which changes breakingly); choose a category for the parent"},
		{"metadata only", func(p project) { p.models["stg.events"].Owner = "x" }, "stg.events", ChooseNonBreaking,
			"only its metadata changes (only owner changed): nothing is rebuilt whichever the category"},
		{"unknown model", editID, "stg.event", ChooseNonBreaking, "no such model; did you mean stg.events?"},
		{"not a choice", editID, "stg.events", Choice("metadata-only"), "not a category one can choose: choose breaking, non-breaking or forward-only"},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			next := baseProject().clone()
			tc.edit(next)
			ps, _ := baseProject().build(t)
			ns, g := next.build(t)
			_, err := Categorize(ps, ns, g, prefixAdditive, choose(tc.model, tc.choice))
			var ce *ChoiceError
			require.ErrorAs(t, err, &ce)
			require.Equal(t, tc.model, ce.Model)
			require.Equal(t, tc.reason, ce.Reason)
			require.Contains(t, err.Error(), "category "+string(tc.choice)+" for "+tc.model+" refused: ")
		})
	}

	t.Run("forward-only on a model built whole", func(t *testing.T) {
		t.Parallel()
		prev := baseProject()
		prev.models["mart.daily"].Kind = model.KindFull
		next := prev.clone()
		next.queries["mart.daily"] = "SELECT ts, count(*) + 0 AS n FROM stg.events GROUP BY ts"
		ps, _ := prev.build(t)
		ns, g := next.build(t)
		_, err := Categorize(ps, ns, g, prefixAdditive, choose("mart.daily", ChooseForwardOnly))
		require.EqualError(t, err, "category forward-only for mart.daily refused: mart.daily is a FULL model, built whole at every run: there is no history to keep; choose breaking or non-breaking")
	})
	t.Run("removed", func(t *testing.T) {
		t.Parallel()
		ps, _ := baseProject().build(t)
		ns, _ := baseProject().build(t)
		delete(ns, "mart.daily")
		g, err := dag.New(map[string][]string{"raw.events": nil, "stg.events": {"raw.events"}})
		require.NoError(t, err)
		_, err = Categorize(ps, ns, g, prefixAdditive, choose("mart.daily", ChooseBreaking))
		require.EqualError(t, err, "category breaking for mart.daily refused: mart.daily is removed by this plan: there is no new version to categorise")
	})

	c, err := ParseChoice(" Non-Breaking ")
	require.NoError(t, err)
	require.Equal(t, ChooseNonBreaking, c)
	_, err = ParseChoice("indirect-breaking")
	require.EqualError(t, err, `unknown category "indirect-breaking": choose breaking, non-breaking or forward-only`)
}
