package apply_test

import (
	"database/sql"
	"fmt"
	"os"
	"testing"
	"time"

	_ "github.com/duckdb/duckdb-go/v2" // the raw baseline's driver
	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/apply"
	"github.com/gapless-dev/gapless/execute/executetest"
	"github.com/gapless-dev/gapless/plan"
)

// deploySizes are the project sizes of the deploy benchmarks: 1,000
// models, and 10,000 with GAPLESS_BENCH_LARGE=1 (too slow for the smoke
// pass).
func deploySizes() []int {
	if os.Getenv("GAPLESS_BENCH_LARGE") == "1" {
		return []int{1000, 10000}
	}
	return []int{1000}
}

const deployLayers = 10

// layeredProject is n tiny FULL models in ten layers: model j of a layer
// reads model j of the layer above. rev changes the query of the last
// model (a leaf) when it is not zero.
func layeredProject(n, rev int) map[string]string {
	per := n / deployLayers
	files := make(map[string]string, n)
	for i := range n {
		layer, j := i/per, i%per
		q := "SELECT 1 AS id"
		if layer > 0 {
			q = fmt.Sprintf("SELECT id + 1 AS id FROM bench.m%05d", (layer-1)*per+j)
		}
		if i == n-1 && rev > 0 {
			q += fmt.Sprintf(" WHERE id > -%d", rev)
		}
		files[fmt.Sprintf("models/m%05d.sql", i)] = fmt.Sprintf("MODEL (name bench.m%05d, kind FULL, cron '@daily', start '2024-01-01');\n%s", i, q)
	}
	return files
}

// rawDeploy runs in a fresh in-memory DuckDB what a first deploy of
// layeredProject(n, 0) amounts to, one statement at a time: the create
// stage's empty tables (CREATE TABLE AS ... LIMIT 0), then the backfill
// (INSERT ... SELECT) and the environment's views. It returns the time of
// the creates and of the whole.
func rawDeploy(b *testing.B, n int) (creates, whole time.Duration) {
	db, err := sql.Open("duckdb", "")
	require.NoError(b, err)
	defer func() { require.NoError(b, db.Close()) }()
	db.SetMaxOpenConns(1)
	per := n / deployLayers
	query := func(i int) string {
		if i < per {
			return "SELECT 1 AS id"
		}
		return fmt.Sprintf("SELECT id + 1 AS id FROM raw_bench.m%05d", i-per)
	}
	exec := func(q string) {
		_, err := db.ExecContext(b.Context(), q)
		require.NoError(b, err, q)
	}
	start := time.Now()
	exec("CREATE SCHEMA raw_bench")
	for i := range n {
		exec(fmt.Sprintf("CREATE TABLE raw_bench.m%05d AS SELECT * FROM (%s) AS q LIMIT 0", i, query(i)))
	}
	creates = time.Since(start)
	for i := range n {
		exec(fmt.Sprintf("INSERT INTO raw_bench.m%05d %s", i, query(i)))
	}
	exec("CREATE SCHEMA bench")
	for i := range n {
		exec(fmt.Sprintf("CREATE VIEW bench.m%05d AS SELECT * FROM raw_bench.m%05d", i, i))
	}
	return creates, time.Since(start)
}

// stageTimer returns an OnEvent that adds up how long stage takes.
func stageTimer(stage apply.Stage, total *time.Duration) func(apply.Event) {
	var began time.Time
	return func(e apply.Event) {
		switch e := e.(type) {
		case apply.StageStarted:
			if e.Stage == stage {
				began = time.Now()
			}
		case apply.StageFinished:
			if e.Stage == stage {
				*total += time.Since(began)
			}
		}
	}
}

// BenchmarkFirstDeploy measures the first deploy of N tiny models (ten
// layers, each model reads one of the layer above) on DuckDB + SQLite: the
// create_tables stage and the whole apply, against raw DuckDB running the
// same statements one by one in the same run (the ratios), and the models'
// check (apply.Check, before the first stage) and the backfill stage, to
// set beside the raw run's inserts and views (s-raw-rest).
//
//	go test -run '^$' -bench FirstDeploy -benchtime 1x ./apply/
//	GAPLESS_BENCH_LARGE=1 go test -run '^$' -bench FirstDeploy -benchtime 1x -timeout 60m ./apply/
func BenchmarkFirstDeploy(b *testing.B) {
	for _, n := range deploySizes() {
		b.Run(fmt.Sprintf("duckdb+sqlite/N=%d", n), func(b *testing.B) {
			exec := at(2024, 1, 3, 0)
			var stage, check, backfill, whole, rawCreates, rawWhole time.Duration
			b.ResetTimer()
			b.StopTimer()
			for range b.N {
				bu := executetest.Setup(b, false, layeredProject(n, 0))
				p := bu.Plan(b, "p0", plan.Prod, exec, plan.Options{})
				start := time.Now()
				b.StartTimer()
				timers := []func(apply.Event){stageTimer(apply.StageCreateTables, &stage), stageTimer(apply.StageBackfill, &backfill)}
				checked := false
				_, err := doApply(bu, p, exec, apply.Hooks{}, func(e apply.Event) {
					if _, ok := e.(apply.StageStarted); ok && !checked {
						check += time.Since(start) // apply.Check, before the first stage
						checked = true
					}
					for _, t := range timers {
						t(e)
					}
				})
				b.StopTimer()
				require.NoError(b, err)
				whole += time.Since(start)
				c, w := rawDeploy(b, n)
				rawCreates += c
				rawWhole += w
			}
			per := float64(b.N)
			b.ReportMetric(stage.Seconds()/per, "s-create_tables/op")
			b.ReportMetric(rawCreates.Seconds()/per, "s-raw-creates/op")
			b.ReportMetric(stage.Seconds()/rawCreates.Seconds(), "create_tables/raw")
			b.ReportMetric(check.Seconds()/per, "s-check-models/op")
			b.ReportMetric(backfill.Seconds()/per, "s-backfill/op")
			b.ReportMetric((rawWhole-rawCreates).Seconds()/per, "s-raw-rest/op")
			b.ReportMetric(whole.Seconds()/per, "s-deploy/op")
			b.ReportMetric(rawWhole.Seconds()/per, "s-raw-deploy/op")
			b.ReportMetric(whole.Seconds()/rawWhole.Seconds(), "deploy/raw")
		})
	}
}

// BenchmarkOneModelDeploy measures a deploy that changes one model (a
// leaf) of an N-model project already deployed, on DuckDB + SQLite: the
// plan (loading the project) and the apply, and the apply's create_tables
// stage. Target: under 10 s at N = 10,000.
//
//	GAPLESS_BENCH_LARGE=1 go test -run '^$' -bench OneModelDeploy -benchtime 1x -timeout 60m ./apply/
func BenchmarkOneModelDeploy(b *testing.B) {
	for _, n := range deploySizes() {
		b.Run(fmt.Sprintf("duckdb+sqlite/N=%d", n), func(b *testing.B) {
			exec := at(2024, 1, 3, 0)
			bu := executetest.Setup(b, false, layeredProject(n, 0))
			p := bu.Plan(b, "p0", plan.Prod, exec, plan.Options{})
			_, err := doApply(bu, p, exec, apply.Hooks{}, nil)
			require.NoError(b, err)
			var stage, planning time.Duration
			b.ResetTimer()
			for rev := 1; rev <= b.N; rev++ {
				b.StopTimer()
				executetest.WriteFiles(b, bu.Dir, layeredProject(n, rev))
				b.StartTimer()
				start := time.Now()
				p := bu.Plan(b, fmt.Sprintf("p%d", rev), plan.Prod, exec, plan.Options{})
				planning += time.Since(start)
				res, err := doApply(bu, p, exec, apply.Hooks{}, stageTimer(apply.StageCreateTables, &stage))
				require.NoError(b, err)
				require.NotNil(b, res)
			}
			per := float64(b.N)
			b.ReportMetric(planning.Seconds()/per, "s-plan/op")
			b.ReportMetric(stage.Seconds()/per, "s-create_tables/op")
		})
	}
}
