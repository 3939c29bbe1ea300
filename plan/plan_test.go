package plan

import (
	"bytes"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/model"
	"github.com/gapless-dev/gapless/snapshot"
	"github.com/gapless-dev/gapless/state"
)

func hour(h int) time.Time { return time.Date(2024, 1, 1, h, 0, 0, 0, time.UTC) }

func samplePlan() *Plan {
	m := &model.Model{Name: "demo.events", Kind: model.KindIncrementalByTimeRange, TimeColumn: "ts",
		Dialect: model.DialectDuckDB, Cron: "@hourly", IntervalUnit: interval.Hour, Enabled: true,
		Start: hour(0), Query: "SELECT 1 AS ts"}
	s := &snapshot.Snapshot{Name: m.Name, Version: "v2", Model: m,
		Fingerprint: snapshot.Fingerprint{DataHash: "d", MetadataHash: "m", ParentDataHash: "p", ParentMetadataHash: "q"}}
	return &Plan{
		ID: "plan-1", Environment: "prod", ExecutionTime: hour(11), CreatedAt: hour(11),
		Expected:  Expected{PlanID: "plan-0", Generation: 3},
		Options:   Options{},
		Snapshots: []*snapshot.Snapshot{s},
		Changes:   []Change{{Name: m.Name, Category: snapshot.Breaking, PreviousVersion: "v1", Version: "v2"}},
		Backfills: []Backfill{{Name: m.Name, Version: "v2",
			Ranges: interval.NewSet(interval.NewRange(hour(0), hour(10))), Buckets: 10, End: hour(10)}},
		Incumbents: []Incumbent{{Name: m.Name, Snapshot: state.SnapshotRef{Name: m.Name, Fingerprint: "f1", Version: "v1"}, Frontier: hour(10)}},
	}
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	t.Parallel()
	p := samplePlan()
	b, err := Encode(p)
	require.NoError(t, err)
	got, err := Decode(b)
	require.NoError(t, err)
	require.Equal(t, FileKind, got.Kind)
	require.Equal(t, FormatVersion, got.Format)
	require.Equal(t, p.Expected, got.Expected)
	require.True(t, p.Backfills[0].Ranges.Equal(got.Backfills[0].Ranges))
	require.Equal(t, hour(10), got.Incumbents[0].Frontier)
	require.Equal(t, "demo.events", got.Snapshots[0].Model.Name)
	// encoding is deterministic: the same plan gives the same bytes
	b2, err := Encode(got)
	require.NoError(t, err)
	require.Equal(t, string(b), string(b2))
}

// Scenario: a plan file that is not an intact plan of this format is refused
// with a reason, before anything is applied.
func TestDecodeRefusesBadFiles(t *testing.T) {
	t.Parallel()
	good, err := Encode(samplePlan())
	require.NoError(t, err)
	cases := map[string]struct {
		in   []byte
		want string
	}{
		"not json":  {[]byte("MODEL (name x.y);"), "not JSON"},
		"truncated": {good[:len(good)/2], "not JSON"},
		"foreign":   {[]byte(`{"kind":"terraform.plan","format":1}`), `kind is "terraform.plan"`},
		"future format": {bytes.Replace(good, []byte(`"format": 2`), []byte(`"format": 4`), 1),
			"format 4 was written by a newer gapless (this one reads formats 1 to 2); apply it with that gapless, or build the plan again with this one"},
		"stored format": {bytes.Replace(good, []byte(`"format": 2`), []byte(`"format": 3`), 1),
			"format 3 is a plan saved in a state store, which names its snapshots instead of holding them, not a plan file"},
		"ancient format": {bytes.Replace(good, []byte(`"format": 2`), []byte(`"format": 0`), 1), "format 0, this gapless reads formats 1 to 2; build a new plan"},
		"edited":         {bytes.Replace(good, []byte(`"buckets": 10`), []byte(`"buckets": 11`), 1), "checksum mismatch"},
		"unknown field":  {bytes.Replace(good, []byte(`"id": "plan-1"`), []byte(`"id": "plan-1", "sneaky": true`), 1), "unknown field"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := Decode(tc.in)
			require.ErrorIs(t, err, ErrInvalidPlan)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

// Scenario: a plan file written by the previous gapless (format 1, before
// plans carried reasons, header diffs, category choices and reuses) still
// decodes, checksum and all, and reads as a plan without them; encoding it
// again writes the current format.
func TestDecodeReadsFormat1(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("testdata/format1.plan.json")
	require.NoError(t, err)
	require.Contains(t, string(b), `"format": 1,`)
	p, err := Decode(b)
	require.NoError(t, err)
	require.Equal(t, 1, p.Format)
	require.Equal(t, "dev", p.Environment)
	require.Len(t, p.Changes, 3)
	require.Equal(t, snapshot.Breaking, p.Changes[0].Category)
	require.Empty(t, p.Changes[0].Reason)
	require.Empty(t, p.Options.Categories)
	require.Empty(t, p.Reuses)
	require.Len(t, p.Backfills, 3)
	require.True(t, p.Options.AllowGaps, "a dev plan that recorded no no_gaps allows gaps, as it did")

	again, err := Encode(p)
	require.NoError(t, err)
	got, err := Decode(again)
	require.NoError(t, err)
	require.Equal(t, FormatVersion, got.Format)
	require.Equal(t, p.Changes, got.Changes)
}

// Scenario: plan files keep their meaning while the Go zero value became
// the safe one. Zero Options run the no-gap check and are written as
// "no_gaps": true, as a checked plan always was; AllowGaps is written as
// no no_gaps key, which every older plan file means too. Both read back
// as written, and unknown option keys are refused.
func TestOptionsKeepTheirMeaningInPlanFiles(t *testing.T) {
	t.Parallel()
	require.True(t, Options{}.Checks(), "the zero value checks")
	require.False(t, Options{AllowGaps: true}.Checks())

	p := samplePlan()
	b, err := Encode(p)
	require.NoError(t, err)
	require.Contains(t, string(b), `"no_gaps": true`)
	got, err := Decode(b)
	require.NoError(t, err)
	require.True(t, got.Options.Checks())

	p.Environment = "dev"
	p.Options.AllowGaps = true
	b, err = Encode(p)
	require.NoError(t, err)
	require.NotContains(t, string(b), "no_gaps")
	got, err = Decode(b)
	require.NoError(t, err)
	require.True(t, got.Options.AllowGaps)

	require.Contains(t, string(b), `"options": {}`)
	bad := bytes.Replace(b, []byte(`"options": {}`), []byte(`"options": {"allow_gapz": true}`), 1)
	_, err = Decode(bad)
	require.ErrorIs(t, err, ErrInvalidPlan)
	require.ErrorContains(t, err, `unknown field "allow_gapz"`)

	require.ErrorIs(t, CheckOptions(Prod, Options{AllowGaps: true}), ErrGapsInProd)
	require.NoError(t, CheckOptions(Prod, Options{}))
	require.NoError(t, CheckOptions("dev", Options{AllowGaps: true}))
}
