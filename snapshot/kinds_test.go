package snapshot

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/model"
)

// Scenario: the properties of the SCD type 2 kinds and INCREMENTAL_UNMANAGED's
// insert_overwrite decide the rows a run writes: changing one changes the
// data hash (a new version, or a forward-only change), as in SQLMesh; the
// forward_only flag stays metadata.
func TestKindPropertiesFingerprint(t *testing.T) {
	t.Parallel()
	base := baseProject()
	m := base.models["stg.events"]
	m.Kind, m.UniqueKey, m.ForwardOnly = model.KindSCDType2ByTime, []string{"id"}, true
	m.SCD = model.SCDType2{ValidFrom: "valid_from", ValidTo: "valid_to", UpdatedAt: "ts", TimeDataType: "TIMESTAMP"}
	before, _ := base.build(t)
	fp := before["stg.events"].Fingerprint
	for name, edit := range map[string]func(m *model.Model){
		"invalidate_hard_deletes":  func(m *model.Model) { m.SCD.InvalidateHardDeletes = true },
		"valid_to_name":            func(m *model.Model) { m.SCD.ValidTo = "ended_at" },
		"time_data_type":           func(m *model.Model) { m.SCD.TimeDataType = "TIMESTAMPTZ" },
		"updated_at_as_valid_from": func(m *model.Model) { m.SCD.UpdatedAtAsValidFrom = true },
		"by column": func(m *model.Model) {
			m.Kind, m.SCD.UpdatedAt, m.SCD.AllColumns = model.KindSCDType2ByColumn, "", true
		},
		"unmanaged overwrite": func(m *model.Model) {
			m.Kind, m.SCD, m.InsertOverwrite = model.KindIncrementalUnmanaged, model.SCDType2{}, true
		},
	} {
		p := base.clone()
		edit(p.models["stg.events"])
		after, _ := p.build(t)
		require.NotEqual(t, fp.DataHash, after["stg.events"].Fingerprint.DataHash, name)
	}
	p := base.clone()
	p.models["stg.events"].ForwardOnly = false
	after, _ := p.build(t)
	require.Equal(t, fp.DataHash, after["stg.events"].Fingerprint.DataHash)
	require.NotEqual(t, fp.MetadataHash, after["stg.events"].Fingerprint.MetadataHash)
}
