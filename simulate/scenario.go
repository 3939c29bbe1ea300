package simulate

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gapless-dev/gapless/interval"
)

// Random streams: each draws from its own generator, so that the deploys
// and the scheduler's jitter do not depend on how many draws the other
// made, and every policy sees exactly the same of both.
const (
	streamDeploys = 1
	streamTicks   = 2
)

// deploySpec is one deploy of the scenario, the same for every policy.
type deploySpec struct {
	// Start is when the deploy is planned to start: its plan's execution
	// time. A deploy never starts before the previous one returned (see
	// runner.deploy).
	Start time.Time
	// Backfill is how long its planned backfill takes in simulated time.
	Backfill time.Duration
	// Model indexes the edited model in the DAG.
	Model int
	// Constant is the edited model's new constant: a breaking change.
	Constant int
}

// scenario is every random draw of a simulation but the scheduler's
// jitter, which tickStream draws as the ticks come.
type scenario struct {
	deploys []deploySpec
	// end is the planned end: two cadences (plus jitter) after the last
	// deploy's planned end, so that the scheduler can repair what the last
	// promotion left.
	end time.Time
}

func newScenario(p Params, models int) scenario {
	rng := rand.New(rand.NewPCG(uint64(p.Seed), streamDeploys))
	var sc scenario
	t := p.Start
	for i := range p.Deploys {
		gap := time.Duration(rng.ExpFloat64() * float64(p.DeployGap)).Round(time.Second)
		d := drawBackfill(p, rng)
		start := t.Add(gap)
		sc.deploys = append(sc.deploys, deploySpec{Start: start, Backfill: d, Model: rng.IntN(models), Constant: (i + 1) * 1000})
		t = start.Add(d + p.LockHold)
	}
	sc.end = t.Add(2*p.Cadence + p.Jitter)
	return sc
}

// drawBackfill draws one backfill duration, rounded to the second, never
// below MinBackfill.
func drawBackfill(p Params, rng *rand.Rand) time.Duration {
	mean, sd := float64(p.BackfillMean), float64(p.BackfillStddev)
	var d float64
	switch p.BackfillDist {
	case DistFixed:
		d = mean
	case DistLognormal:
		s2 := math.Log1p(sd * sd / (mean * mean))
		d = math.Exp(math.Log(mean) - s2/2 + math.Sqrt(s2)*rng.NormFloat64())
	default:
		d = mean + sd*rng.NormFloat64()
	}
	return max(time.Duration(d).Round(time.Second), MinBackfill)
}

// tickStream is the scheduler's ticks: tick k (k >= 1) fires at
// start + k*cadence + a uniform draw in [0, jitter), rounded to the second.
type tickStream struct {
	rng             *rand.Rand
	start           time.Time
	cadence, jitter time.Duration
	k               int
	// at is the next tick's time.
	at time.Time
}

func newTicks(p Params) *tickStream {
	t := &tickStream{rng: rand.New(rand.NewPCG(uint64(p.Seed), streamTicks)), start: p.Start, cadence: p.Cadence, jitter: p.Jitter}
	t.next()
	return t
}

func (t *tickStream) next() {
	t.k++
	var j time.Duration
	if t.jitter > 0 {
		j = time.Duration(t.rng.Int64N(int64(t.jitter))).Truncate(time.Second)
	}
	t.at = t.start.Add(time.Duration(t.k)*t.cadence + j)
}

// project writes the simulated project: one incremental model per node of
// the DAG, on p.Unit's cron, starting p.History before p.Start. Each
// model's value carries a constant (consts, by node index) that a deploy
// changes: a breaking change of that model and, indirectly, of everything
// downstream.
type project struct {
	dir     string
	nodes   []node
	unit    interval.Unit
	cron    string
	start   time.Time
	consts  []int
	byIndex map[string]int
}

func newProject(dir string, p Params, nodes []node) *project {
	pr := &project{dir: dir, nodes: nodes, unit: interval.Unit(p.Unit), cron: units[p.Unit],
		start: p.Start.Add(-p.History), consts: make([]int, len(nodes)), byIndex: map[string]int{}}
	for i, n := range nodes {
		pr.byIndex[n.name] = i
	}
	return pr
}

// source is node i's model file with constant c.
func (pr *project) source(i, c int) string {
	n := pr.nodes[i]
	step := map[interval.Unit]string{interval.FiveMinute: "5 minute", interval.Hour: "1 hour", interval.Day: "1 day"}[pr.unit]
	header := fmt.Sprintf(`MODEL (
  name %s,
  kind INCREMENTAL_BY_TIME_RANGE (time_column ts),
  cron '%s',
  start '%s'
);
`, n.name, pr.cron, pr.start.Format(time.RFC3339))
	switch len(n.parents) {
	case 0:
		return header + fmt.Sprintf(`SELECT g.ts AS ts, CAST(EXTRACT(HOUR FROM g.ts) AS BIGINT) + %d AS v
FROM generate_series(@start_ts, @end_ts, INTERVAL '%s') AS g(ts)
`, c, step)
	case 1:
		return header + fmt.Sprintf(`SELECT p.ts AS ts, p.v * 2 + %d AS v
FROM %s AS p
WHERE p.ts BETWEEN @start_ts AND @end_ts
`, c, n.parents[0])
	}
	var sum, from []string
	for j, par := range n.parents {
		alias := fmt.Sprintf("p%d", j)
		sum = append(sum, alias+".v")
		if j == 0 {
			from = append(from, par+" AS "+alias)
		} else {
			from = append(from, "JOIN "+par+" AS "+alias+" ON "+alias+".ts = p0.ts")
		}
	}
	return header + fmt.Sprintf(`SELECT p0.ts AS ts, %s + %d AS v
FROM %s
WHERE p0.ts BETWEEN @start_ts AND @end_ts
`, strings.Join(sum, " + "), c, strings.Join(from, "\n"))
}

// path is node i's file.
func (pr *project) path(i int) string {
	return filepath.Join(pr.dir, "models", fmt.Sprintf("%02d_%s.sql", i, strings.ReplaceAll(pr.nodes[i].name, ".", "_")))
}

// set writes node i's model with constant c.
func (pr *project) set(i, c int) error {
	if err := os.WriteFile(pr.path(i), []byte(pr.source(i, c)), 0o644); err != nil {
		return fmt.Errorf("writing model %s: %w", pr.nodes[i].name, err)
	}
	pr.consts[i] = c
	return nil
}

// write writes every model with its current constant.
func (pr *project) write() error {
	if err := os.MkdirAll(filepath.Join(pr.dir, "models"), 0o755); err != nil {
		return fmt.Errorf("creating the simulated project: %w", err)
	}
	for i := range pr.nodes {
		if err := pr.set(i, pr.consts[i]); err != nil {
			return err
		}
	}
	return nil
}
