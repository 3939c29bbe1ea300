package model_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/model"
)

func TestPartitionedByKeepsExpressionsAsWritten(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		header string
		want   []string
	}{
		{"partitioned_by DS", []string{"ds"}},
		{`partitioned_by "Ds"`, []string{"Ds"}},
		{"partitioned_by day(ts)", []string{"day(ts)"}},
		{"partitioned_by (ds, bucket(id, 16))", []string{"ds", "bucket(id, 16)"}},
		{"partitioned_by [region, month(ts)]", []string{"region", "month(ts)"}},
	} {
		m := mustParse(t, "MODEL (name s.t, kind FULL, "+tc.header+");\nSELECT 1 AS ds, 2 AS id")
		require.Equal(t, tc.want, m.PartitionedBy, tc.header)
	}
}

func TestPartitionedByRefusesAnEmptyItem(t *testing.T) {
	t.Parallel()
	_, err := model.ParseFile("models/m.sql", []byte("MODEL (name s.t, kind FULL, partitioned_by (ds,,ts));\nSELECT 1"), model.Defaults{})
	require.ErrorContains(t, err, "models/m.sql:1:")
	require.ErrorContains(t, err, "expected an expression in partitioned_by")
}

func TestPhysicalAttributesParse(t *testing.T) {
	t.Parallel()
	m := mustParse(t, `MODEL (
  name s.t,
  kind FULL,
  clustered_by (Region),
  column_descriptions (id = 'the key', "Amount" = "money"),
  physical_properties (fillfactor = 70, partitioning = ARRAY['day(ts)']),
  table_format iceberg,
  storage_format 'PARQUET'
);
SELECT 1 AS id, 2 AS "Amount", 'x' AS region`)
	require.Equal(t, []string{"region"}, m.ClusteredBy)
	require.Equal(t, []model.ColumnDescription{
		{Column: "id", Text: "the key", Pos: model.Pos{File: "models/m.sql", Line: 5, Col: 24}},
		{Column: "Amount", Text: "money", Pos: model.Pos{File: "models/m.sql", Line: 5, Col: 40}},
	}, m.Descriptions())
	require.Equal(t, []model.Property{
		{Key: "fillfactor", Value: "70", Pos: model.Pos{File: "models/m.sql", Line: 6, Col: 24}},
		{Key: "partitioning", Value: "ARRAY['day(ts)']", Pos: model.Pos{File: "models/m.sql", Line: 6, Col: 41}},
	}, m.PhysicalProperties)
	require.Equal(t, "iceberg", m.TableFormat)
	require.Equal(t, "parquet", m.StorageFormat)
}

func TestPhysicalAttributesRefuseDuplicates(t *testing.T) {
	t.Parallel()
	for src, want := range map[string]string{
		"MODEL (name s.t, column_descriptions (a = 'x', A = 'y')); SELECT 1 AS a": "models/m.sql:1:48: column_descriptions describes column a twice",
		"MODEL (name s.t, physical_properties (k = 1, K = 2)); SELECT 1 AS a":     "models/m.sql:1:46: physical_properties sets k twice",
		"MODEL (name s.t, column_descriptions (a = 1)); SELECT 1 AS a":            "models/m.sql:1:43: expected a quoted string for column_descriptions a",
	} {
		_, err := model.ParseFile("models/m.sql", []byte(src), model.Defaults{})
		require.ErrorContains(t, err, want, src)
	}
}

func TestInlineColumnCommentsDescribeTheFinalSelect(t *testing.T) {
	t.Parallel()
	m := mustParse(t, `MODEL (name s.t, kind FULL);
WITH c AS (
  SELECT 1 AS inner_col -- not the final select
)
SELECT
  o.id, -- the order's key
  amount::DOUBLE /* money */,
  -- a comment on its own line describes nothing
  upper(name) AS "Name" -- shouted
  , 1 + 2
  , 3 AS three
FROM c AS o -- not a column
UNION ALL SELECT 1, 2, 3, 4 -- nor this`)
	got := m.Descriptions()
	require.Equal(t, []model.ColumnDescription{
		{Column: "id", Text: "the order's key", Pos: model.Pos{File: "models/m.sql", Line: 6, Col: 5}},
		{Column: "amount", Text: "money", Pos: model.Pos{File: "models/m.sql", Line: 7, Col: 3}},
		{Column: "Name", Text: "shouted", Pos: model.Pos{File: "models/m.sql", Line: 9, Col: 18}},
	}, got)
}

func TestColumnDescriptionsTurnOffInlineComments(t *testing.T) {
	t.Parallel()
	m := mustParse(t, "MODEL (name s.t, kind FULL, column_descriptions ());\nSELECT 1 AS a -- ignored")
	require.Empty(t, m.Descriptions())
}
