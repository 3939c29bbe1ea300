package apply_test

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/apply"
	"github.com/gapless-dev/gapless/execute/executetest"
	"github.com/gapless-dev/gapless/plan"
	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/state/sqlite"
)

// stateBytes returns the bytes the SQLite state file at path uses: its
// pages less its free ones, as a fresh read transaction sees them (the
// write-ahead log included).
func stateBytes(b *testing.B, db *sql.DB) int64 {
	b.Helper()
	var pages, free, size int64
	require.NoError(b, db.QueryRowContext(b.Context(), `PRAGMA page_count`).Scan(&pages))
	require.NoError(b, db.QueryRowContext(b.Context(), `PRAGMA freelist_count`).Scan(&free))
	require.NoError(b, db.QueryRowContext(b.Context(), `PRAGMA page_size`).Scan(&size))
	return (pages - free) * size
}

// BenchmarkOneModelDeployStateGrowth measures how much the SQLite state
// grows with a deploy that changes one model (a leaf) of an N-model
// project already deployed (layeredProject): B-state/op, the used bytes of
// the state file after the deploy less before, and B-plan/op, the saved
// plan's payload (plan.StoredFormat). The same run measures what the plan
// saved the way gapless did before (plan.Encode, format 2: every snapshot
// whole) costs: B-plan-format2/op, and B-state-format2/op, the deploy's
// growth with the stored plan's cost replaced by the format-2 one's (both
// measured by saving a copy of each in the same file). Target: a few KB
// per deploy whatever N. B-plan-whole/op is the plan stored whole (what
// a chain of stored changes ends at, see plan.StoredFormat), and
// B-plan-amortized/op a change plus the whole plan's share over the
// longest chain the rule allows for these sizes.
//
//	go test -run '^$' -bench OneModelDeployStateGrowth -benchtime 3x ./apply/
//	GAPLESS_BENCH_LARGE=1 go test -run '^$' -bench OneModelDeployStateGrowth -benchtime 3x -timeout 60m ./apply/
func BenchmarkOneModelDeployStateGrowth(b *testing.B) {
	for _, n := range deploySizes() {
		b.Run(fmt.Sprintf("duckdb+sqlite/N=%d", n), func(b *testing.B) {
			exec := at(2024, 1, 3, 0)
			bu := executetest.Setup(b, false, layeredProject(n, 0))
			db, err := sql.Open("sqlite", bu.Store.(*sqlite.Store).Path()+"?mode=ro")
			require.NoError(b, err)
			b.Cleanup(func() { require.NoError(b, db.Close()) })
			_, err = doApply(bu, bu.Plan(b, "p0", plan.Prod, exec, plan.Options{}), exec, apply.Hooks{}, nil)
			require.NoError(b, err)
			// saveCopy saves payload under a new id and returns what it
			// cost the file.
			saveCopy := func(id string, p *plan.Plan, payload []byte) int64 {
				before := stateBytes(b, db)
				require.NoError(b, bu.Store.SavePlan(bu.Ctx, state.Plan{ID: id, Environment: p.Environment, Payload: payload, CreatedAt: p.CreatedAt}))
				return stateBytes(b, db) - before
			}
			var grown, grown2, grown3, plan3, plan2, whole int64
			b.ResetTimer()
			for rev := 1; rev <= b.N; rev++ {
				b.StopTimer()
				executetest.WriteFiles(b, bu.Dir, layeredProject(n, rev))
				p := bu.Plan(b, fmt.Sprintf("p%d", rev), plan.Prod, exec, plan.Options{})
				before := stateBytes(b, db)
				b.StartTimer()
				_, err := doApply(bu, p, exec, apply.Hooks{}, nil)
				b.StopTimer()
				require.NoError(b, err)
				grown += stateBytes(b, db) - before

				stored, err := plan.EncodeStored(bu.Ctx, bu.Store, p)
				require.NoError(b, err)
				file, err := plan.Encode(p)
				require.NoError(b, err)
				var old bytes.Buffer
				require.NoError(b, json.Compact(&old, file)) // as the store keeps it
				alone := *p
				alone.Expected.PlanID = "" // no base: stored whole
				wholePayload, err := plan.EncodeStored(bu.Ctx, bu.Store, &alone)
				require.NoError(b, err)
				plan3 += int64(len(stored))
				plan2 += int64(old.Len())
				whole += int64(len(wholePayload))
				grown3 += saveCopy(p.ID+"-copy-stored", p, stored)
				grown2 += saveCopy(p.ID+"-copy-format2", p, old.Bytes())
			}
			per := float64(b.N)
			b.ReportMetric(float64(grown)/per, "B-state/op")
			b.ReportMetric(float64(plan3)/per, "B-plan/op")
			// A chain of changes ends at a whole plan, stored again once
			// the changes outweigh it or after plan.MaxChain plans: its
			// cost spread over the chain's plans.
			chain := min(float64(plan.MaxChain), float64(whole)/float64(plan3))
			b.ReportMetric(float64(whole)/per, "B-plan-whole/op")
			b.ReportMetric(float64(plan3)/per+float64(whole)/per/max(chain, 1), "B-plan-amortized/op")
			b.ReportMetric(float64(grown-grown3+grown2)/per, "B-state-format2/op")
			b.ReportMetric(float64(plan2)/per, "B-plan-format2/op")
		})
	}
}
