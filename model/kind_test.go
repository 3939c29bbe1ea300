package model_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/model"
)

func parseKind(t *testing.T, header string) (*model.Model, error) {
	t.Helper()
	return model.ParseFile("models/h.sql", []byte("MODEL (\n  name s.h,\n  "+header+"\n);\nSELECT 1 AS id"), model.Defaults{})
}

// Scenario: a SQLMesh SCD type 2 model moves over as written: SCD_TYPE_2 is
// SCD_TYPE_2_BY_TIME, the defaults are SQLMesh's (valid_from, valid_to,
// updated_at, TIMESTAMP, invalidate_hard_deletes false, forward-only), and
// every documented property is read.
func TestSCDType2KindsReadSQLMeshProperties(t *testing.T) {
	t.Parallel()
	m, err := parseKind(t, "kind SCD_TYPE_2 (unique_key id)")
	require.NoError(t, err)
	require.Equal(t, model.KindSCDType2ByTime, m.Kind)
	require.True(t, m.Kind.IsIncremental())
	require.True(t, m.ForwardOnly, "SQLMesh makes SCD type 2 forward-only by default")
	require.Equal(t, model.SCDType2{ValidFrom: "valid_from", ValidTo: "valid_to", UpdatedAt: "updated_at", TimeDataType: "TIMESTAMP"}, m.SCD)

	m, err = parseKind(t, "kind SCD_TYPE_2_BY_TIME (unique_key [id, region], updated_at_name changed_at, valid_from_name start_at, "+
		"valid_to_name end_at, invalidate_hard_deletes true, updated_at_as_valid_from true, time_data_type TIMESTAMP WITH TIME ZONE, forward_only false)")
	require.NoError(t, err)
	require.Equal(t, []string{"id", "region"}, m.UniqueKey)
	require.False(t, m.ForwardOnly)
	require.Equal(t, model.SCDType2{ValidFrom: "start_at", ValidTo: "end_at", UpdatedAt: "changed_at", InvalidateHardDeletes: true,
		UpdatedAtAsValidFrom: true, TimeDataType: "TIMESTAMP WITH TIME ZONE"}, m.SCD)

	m, err = parseKind(t, "kind SCD_TYPE_2_BY_COLUMN (unique_key id, columns [name, price], execution_time_as_valid_from true, time_data_type 'timestamptz')")
	require.NoError(t, err)
	require.Equal(t, model.KindSCDType2ByColumn, m.Kind)
	require.Equal(t, model.SCDType2{ValidFrom: "valid_from", ValidTo: "valid_to", ExecutionTimeAsValidFrom: true,
		TimeDataType: "TIMESTAMPTZ", Columns: []string{"name", "price"}}, m.SCD)
	m, err = parseKind(t, "kind SCD_TYPE_2_BY_COLUMN (unique_key id, columns *, updated_at_name seen_at)")
	require.NoError(t, err)
	require.True(t, m.SCD.AllColumns)
	require.Equal(t, "seen_at", m.SCD.UpdatedAt)
}

// Scenario: INCREMENTAL_BY_PARTITION and INCREMENTAL_UNMANAGED are read with
// SQLMesh's defaults: both forward-only, insert_overwrite off; the
// partition kind refuses forward_only false as SQLMesh does.
func TestPartitionAndUnmanagedKinds(t *testing.T) {
	t.Parallel()
	m, err := parseKind(t, "kind INCREMENTAL_BY_PARTITION,\n  partitioned_by region")
	require.NoError(t, err)
	require.Equal(t, model.KindIncrementalByPartition, m.Kind)
	require.True(t, m.ForwardOnly)
	require.Equal(t, []string{"region"}, m.PartitionedBy)

	m, err = parseKind(t, "kind INCREMENTAL_UNMANAGED")
	require.NoError(t, err)
	require.True(t, m.ForwardOnly)
	require.False(t, m.InsertOverwrite)
	m, err = parseKind(t, "kind INCREMENTAL_UNMANAGED (insert_overwrite true)")
	require.NoError(t, err)
	require.True(t, m.InsertOverwrite)

	_, err = parseKind(t, "kind INCREMENTAL_BY_PARTITION (forward_only false)")
	require.EqualError(t, err, "models/h.sql:3:34: kind INCREMENTAL_BY_PARTITION is always forward-only: remove forward_only false (SQLMesh refuses it too)")
}

// Scenario: bad SCD type 2 headers are refused at the file, line and
// column, naming what is wrong.
func TestSCDType2KindsRefuseBadInput(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ header, want string }{
		{"kind SCD_TYPE_2_BY_TIME", "models/h.sql:3:8: kind SCD_TYPE_2_BY_TIME needs a unique key: write kind SCD_TYPE_2_BY_TIME (unique_key COLUMN) or (unique_key (C1, C2))"},
		{"kind SCD_TYPE_2_BY_COLUMN (unique_key id)", "models/h.sql:3:8: kind SCD_TYPE_2_BY_COLUMN needs the columns to check: write columns [C1, C2] or columns *"},
		{"kind SCD_TYPE_2_BY_TIME (unique_key id, columns [a])", "models/h.sql:3:43: columns is not a property of kind SCD_TYPE_2_BY_TIME (only of SCD_TYPE_2_BY_COLUMN)"},
		{"kind SCD_TYPE_2_BY_TIME (unique_key id, valid_fro x)", "models/h.sql:3:43: unknown property valid_fro of kind SCD_TYPE_2_BY_TIME: did you mean valid_from_name?"},
		{"kind SCD_TYPE_2_BY_TIME (unique_key id, invalidate_hard_deletes maybe)", "models/h.sql:3:67: bad boolean for invalidate_hard_deletes: maybe; want true or false"},
		{"kind SCD_TYPE_2_BY_TIME (unique_key id, time_data_type 'TIMESTAMP); DROP')", "models/h.sql:3:58: bad time_data_type TIMESTAMP); DROP: want a SQL type name such as TIMESTAMP, TIMESTAMPTZ or DATE"},
		{"kind SCD_TYPE_2_BY_TIME (unique_key valid_from)", "models/h.sql:3:8: kind SCD_TYPE_2_BY_TIME: valid_from is a history column gapless writes; it cannot also be a key, checked or updated_at column"},
		{"kind INCREMENTAL_UNMANAGED (unique_key id)", "models/h.sql:3:31: unique_key is not a property of kind INCREMENTAL_UNMANAGED (only of INCREMENTAL_BY_UNIQUE_KEY and SCD_TYPE_2_BY_TIME and SCD_TYPE_2_BY_COLUMN)"},
	} {
		_, err := parseKind(t, tc.header)
		require.EqualError(t, err, tc.want, tc.header)
	}
}
