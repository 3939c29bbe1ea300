package execute_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/execute"
	"github.com/gapless-dev/gapless/execute/executetest"
	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/state"
)

// auditFiles is a daily model with a text time column ('%Y-%m-%d') whose
// second day holds a negative amount, audited per batch (SQLMesh restricts
// @this_model to the batch's interval).
var auditFiles = map[string]string{
	"gapless.yaml": "warehouse: duckdb://w.duckdb\nstate: sqlite://s.db\nmodel_defaults:\n  start: '2024-01-01'\n",
	"models/items.sql": `MODEL (
  name shop.items,
  kind INCREMENTAL_BY_TIME_RANGE (time_column (ds, '%Y-%m-%d'), batch_size 1),
  cron '@daily',
  audits (accepted_range(column := amount, min_v := 0), positive_ds(day := '2024-01-01'), unique_values(columns := (id)), by_name)
);
SELECT id, ds, amount
FROM (VALUES (1, '2024-01-01', 5), (2, '2024-01-02', -3), (3, '2024-01-03', 1)) AS v(id, ds, amount)
WHERE ds BETWEEN @start_ds AND @end_ds;
`,
	"audits/ds.sql": "AUDIT (name positive_ds, blocking false);\nSELECT * FROM @this_model WHERE ds = @day AND amount <= 0;\n" +
		// As SQLMesh's first example: the model by its name, the interval by macros.
		"AUDIT (name by_name);\nSELECT * FROM shop.items WHERE ds BETWEEN @start_ds AND @end_ds AND amount < -100;\n",
}

// Scenario: on each engine, a batch's audits see only the batch's rows:
// the first day passes; the second fails the blocking accepted_range,
// naming the audit, the model, the interval and the offending row, and is
// neither recorded nor left in the table; a third day still runs when
// resumed. Audit.Audit on demand over the whole table finds the same row;
// every outcome is a history event.
func TestAuditsRunPerBatch(t *testing.T) {
	t.Parallel()
	for _, b := range []func() *executetest.Bundle{
		func() *executetest.Bundle { return executetest.Setup(t, false, auditFiles) },
		func() *executetest.Bundle { return executetest.SetupPostgres(t, false, auditFiles) },
	} {
		b := b()
		t.Run(b.Backends, func(t *testing.T) {
			pr := b.Load(t)
			tpls, err := execute.Templates(b.Ctx, b.Parser, b.Engine, pr.Snapshots)
			require.NoError(t, err)
			tpl := tpls["shop.items"]
			x := &execute.Executor{Engine: b.Engine, Store: b.Store, ProjectDir: b.Dir, Logger: quiet}
			exec := at(2024, 1, 4, 0)
			require.NoError(t, x.Prepare(b.Ctx, tpl, exec))
			work := interval.NewSet(interval.NewRange(at(2024, 1, 1, 0), at(2024, 1, 4, 0)))
			res, err := x.Execute(b.Ctx, execute.Work{Template: tpl, Ranges: work, Execution: exec, InOrder: true})
			var ae *execute.AuditError
			require.ErrorAs(t, err, &ae)
			require.ErrorIs(t, err, execute.ErrAuditFailed)
			require.Len(t, ae.Failed, 1)
			require.Equal(t, "accepted_range", ae.Failed[0].Audit)
			require.Equal(t, interval.NewRange(at(2024, 1, 2, 0), at(2024, 1, 3, 0)), ae.Failed[0].Interval)
			require.ErrorContains(t, err, "model shop.items (version ")
			require.ErrorContains(t, err, "blocking audit accepted_range of model shop.items failed for interval [2024-01-02T00:00:00Z, 2024-01-03T00:00:00Z): 1 offending row(s); sample (1):\n    id=2, ds=\"2024-01-02\", amount=-3")
			require.Equal(t, "{[2024-01-01T00:00:00Z, 2024-01-02T00:00:00Z)}", res.Recorded.String())
			table := b.Engine.QuoteTable(tpl.Table)
			require.Equal(t, []string{"1"}, b.Rows(t, "SELECT id FROM "+table+" ORDER BY id"))

			all, err := x.Audit(b.Ctx, execute.AuditParams{Template: tpl, Execution: exec})
			require.NoError(t, err)
			require.Len(t, all, 4)
			require.True(t, all[0].Passed(), "the refused row was taken out: %s", all[0].Describe())

			evs, err := b.Store.ListEvents(b.Ctx, state.EventFilter{Kinds: []string{state.EventAuditFailed}, Model: "shop.items"})
			require.NoError(t, err)
			require.Len(t, evs, 1)
			passed, err := b.Store.ListEvents(b.Ctx, state.EventFilter{Kinds: []string{state.EventAuditPassed}})
			require.NoError(t, err)
			require.Len(t, passed, 4+3+4, "day one, day two's other audits, the audits on demand")
		})
	}
}
