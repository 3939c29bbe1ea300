package snapshot

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/model"
)

// Scenario: a model gains a description, column descriptions or a changed
// inline column comment: only its metadata hash changes (its table is not
// rebuilt). Partitioning, clustering, properties or a format change its
// data hash: the table gapless makes differs.
func TestPhysicalAttributesFingerprint(t *testing.T) {
	t.Parallel()
	base := baseProject()
	before, _ := base.build(t)
	fp := before["stg.events"].Fingerprint

	for name, edit := range map[string]func(m *model.Model){
		"description": func(m *model.Model) { m.Description = "events, cleaned" },
		"column_descriptions": func(m *model.Model) {
			m.ColumnDescriptionsSet = true
			m.ColumnDescriptions = []model.ColumnDescription{{Column: "id", Text: "key"}}
		},
		"inline comment": func(m *model.Model) { m.Query = "SELECT id, -- the key\n ts FROM raw.events" },
	} {
		p := base.clone()
		edit(p.models["stg.events"])
		after, _ := p.build(t)
		got := after["stg.events"].Fingerprint
		require.Equal(t, fp.DataHash, got.DataHash, name)
		require.NotEqual(t, fp.MetadataHash, got.MetadataHash, name)
	}
	for name, edit := range map[string]func(m *model.Model){
		"partitioned_by":      func(m *model.Model) { m.PartitionedBy = []string{"day(ts)"} },
		"clustered_by":        func(m *model.Model) { m.ClusteredBy = []string{"id"} },
		"physical_properties": func(m *model.Model) { m.PhysicalProperties = []model.Property{{Key: "format_version", Value: "2"}} },
		"storage_format":      func(m *model.Model) { m.StorageFormat = "orc" },
	} {
		p := base.clone()
		edit(p.models["stg.events"])
		after, _ := p.build(t)
		got := after["stg.events"].Fingerprint
		require.NotEqual(t, fp.DataHash, got.DataHash, name)
		require.Equal(t, fp.MetadataHash, got.MetadataHash, name)
	}
	// A property's position in the file is not part of it.
	p := base.clone()
	p.models["stg.events"].PhysicalProperties = []model.Property{{Key: "k", Value: "1", Pos: model.Pos{Line: 3}}}
	q := base.clone()
	q.models["stg.events"].PhysicalProperties = []model.Property{{Key: "k", Value: "1", Pos: model.Pos{Line: 9}}}
	a, _ := p.build(t)
	b, _ := q.build(t)
	require.Equal(t, a["stg.events"].Fingerprint, b["stg.events"].Fingerprint)
}
