package ingest_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/ingest"
)

func TestFileWithWrongColumnsBlocksItsBatch(t *testing.T) {
	// Scenario: raw.events is primed from a.csv (columns id, v). b.csv
	// lands with its columns in another order (v, id): columns are matched
	// by name, so it applies as it should. c.csv lands with a column the
	// table does not have (w instead of v), then d.csv, a good file: the
	// pass fails the source at c.csv's batch, naming the file and the
	// column, applies nothing of it and leaves d.csv waiting. Once c.csv is
	// rewritten with the table's columns, the next pass applies c then d.
	eachStore(t, func(t *testing.T, e *env) {
		e.csv("a.csv", 1, 2)
		require.NoError(t, e.pass().Err)
		e.write("b.csv", "v,id\nv3,3\n")
		r := e.pass()
		require.NoError(t, r.Err)
		require.Equal(t, 1, r.Applied)
		e.requireServes(3)
		rows, err := e.wh.ReadOnlyQuery(t.Context(), "SELECT v FROM raw.events WHERE id = 3")
		require.NoError(t, err)
		require.Equal(t, [][]any{{"v3"}}, rows.Rows, "a reordered file lands by column name")

		e.write("c.csv", "id,w\n4,x\n")
		e.csv("d.csv", 5)
		r = e.pass()
		var be *ingest.BatchError
		require.ErrorAs(t, r.Err, &be)
		require.Equal(t, int64(3), be.Index)
		require.Contains(t, r.Err.Error(), "c.csv")
		require.Regexp(t, `column (with name )?"w"`, r.Err.Error(), "the reason names the column")
		require.Zero(t, r.Applied)
		require.NotNil(t, r.Blocked)
		require.Equal(t, int64(3), r.Blocked.Seq)
		e.requireServes(3)

		e.csv("c.csv", 4)
		r = e.pass()
		require.NoError(t, r.Err)
		require.Equal(t, 2, r.Applied)
		e.requireServes(5)
	})
}
