package multiproc

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql's "pgx" driver, to read a PostgreSQL warehouse
	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/internal/trinotest"
	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/state"
)

// timeColumns are the served views' time columns, by model.
var timeColumns = map[string]string{
	"shop.events": "event_ts",
	"shop.clicks": "click_ts",
	"shop.hourly": "hour",
	"shop.slow":   "event_ts",
}

// servedDB reads the views a project's warehouse serves, through
// database/sql: on PostgreSQL (pgx's driver, names as they are) or on
// Trino (a pool with no catalog, so every name is qualified by the
// project's catalog). Its queries are plain SQL both engines run.
type servedDB struct {
	db      *sql.DB
	catalog string // Trino: the project's catalog; "" on PostgreSQL
}

// warehouse opens a servedDB on the project's warehouse, closed when the
// test ends.
func (p *project) warehouse(t *testing.T) *servedDB {
	t.Helper()
	if strings.HasPrefix(p.warehouseURL, "trino://") {
		return &servedDB{db: trinotest.Admin(t), catalog: p.warehouseURL[strings.LastIndex(p.warehouseURL, "/")+1:]}
	}
	db, err := sql.Open("pgx", p.warehouseURL)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, db.Close()) })
	return &servedDB{db: db}
}

// name is how a query names view (schema.name).
func (w *servedDB) name(view string) string {
	if w.catalog == "" {
		return view
	}
	return w.catalog + "." + view
}

// param is the placeholder of the i-th argument (from 1).
func (w *servedDB) param(i int) string {
	if w.catalog == "" {
		return fmt.Sprintf("$%d", i)
	}
	return "?"
}

// servedHours is the set of hours in which view (a model's served view in
// prod) has rows.
func servedHours(ctx context.Context, wh *servedDB, view string) (interval.Set, error) {
	col, ok := timeColumns[view]
	if !ok {
		return interval.Set{}, fmt.Errorf("no time column known for %s", view)
	}
	rows, err := wh.db.QueryContext(ctx, fmt.Sprintf("SELECT DISTINCT date_trunc('hour', %s) FROM %s", col, wh.name(view)))
	if err != nil {
		return interval.Set{}, err
	}
	defer rows.Close()
	var s interval.Set
	for rows.Next() {
		var h time.Time
		if err := rows.Scan(&h); err != nil {
			return interval.Set{}, err
		}
		s = s.Add(interval.NewRange(h.UTC(), h.UTC().Add(time.Hour)))
	}
	return s, rows.Err()
}

// gapCheck checks design invariant 2 (no unaccepted gap is ever served) on
// prod against the incumbents a deploy replaces: for every model whose
// served version is not the incumbent's, every part of the incumbent's
// covered span that the served version does not cover, in state and in the
// served view, must be covered by an open freshness debt of that version.
type gapCheck struct {
	st         state.Store
	wh         *servedDB
	incumbents map[string]state.SnapshotRef // prod's models before the deploy
}

// sample checks the invariant once and returns what breaks it.
//
// The reads are ordered so that a sample taken while daemons repair debts
// cannot see a false gap: the environment first (a promotion writes its
// debts in the same transaction, so debts read after it include them), then
// the open debts, then the intervals and the views. Between the debts and
// the later reads a repair only closes debts and adds coverage, so what is
// missing by the later reads was missing when the debts were read.
func (g *gapCheck) sample(ctx context.Context) (violations []string, gaps int, err error) {
	env, err := g.st.GetEnvironment(ctx, "prod")
	if err != nil {
		return nil, 0, fmt.Errorf("reading prod: %w", err)
	}
	debts, err := g.st.ListDebts(ctx, state.DebtFilter{Environment: "prod", OpenOnly: true})
	if err != nil {
		return nil, 0, fmt.Errorf("listing debts: %w", err)
	}
	accepted := map[state.VersionKey]interval.Set{}
	for _, d := range debts {
		accepted[d.Key()] = accepted[d.Key()].Add(d.Range)
	}
	var replaced []state.SnapshotRef
	var keys []state.VersionKey
	for _, r := range env.Snapshots {
		old, ok := g.incumbents[r.Name]
		if !ok || old.Version == r.Version {
			continue
		}
		replaced = append(replaced, r)
		keys = append(keys, r.VersionKey(), old.VersionKey())
	}
	if len(replaced) == 0 {
		return nil, 0, nil
	}
	covered, err := g.st.GetIntervals(ctx, keys)
	if err != nil {
		return nil, 0, fmt.Errorf("reading intervals: %w", err)
	}
	for _, r := range replaced {
		old := covered[g.incumbents[r.Name].VersionKey()]
		if old.IsEmpty() {
			continue
		}
		span := interval.NewSet(old.Span())
		missing := span.Subtract(covered[r.VersionKey()])
		if !missing.IsEmpty() {
			gaps++
		}
		if bad := missing.Subtract(accepted[r.VersionKey()]); !bad.IsEmpty() {
			violations = append(violations, fmt.Sprintf("generation %d serves %s@%s missing %s of the incumbent's %s; open debt covers only %s",
				env.Generation, r.Name, r.Version, bad, old, accepted[r.VersionKey()]))
		}
		hours, err := servedHours(ctx, g.wh, r.Name)
		if err != nil {
			return nil, 0, fmt.Errorf("reading the view %s: %w", r.Name, err)
		}
		if bad := span.Subtract(hours).Subtract(accepted[r.VersionKey()]); !bad.IsEmpty() {
			violations = append(violations, fmt.Sprintf("generation %d: the view %s has no rows in %s (the incumbent covered %s); open debt covers only %s",
				env.Generation, r.Name, bad, old, accepted[r.VersionKey()]))
		}
	}
	return violations, gaps, nil
}

// monitor samples g every pollTick in a goroutine until stop is called;
// stop returns the violations seen (the first ten distinct ones), how many
// samples were taken and how many saw a (covered) gap.
func (g *gapCheck) monitor(ctx context.Context) (stop func() (violations []string, samples, withGap int, err error)) {
	ctx, cancel := context.WithCancel(ctx)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
		vs   []string
		n, w int
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		ticker := time.NewTicker(pollTick)
		defer ticker.Stop()
		for {
			v, gaps, err := g.sample(ctx)
			mu.Lock()
			switch {
			case ctx.Err() != nil:
			case err != nil:
				errs = append(errs, err)
			default:
				n++
				for _, x := range v {
					if len(vs) < 10 && !slices.Contains(vs, x) {
						vs = append(vs, x)
					}
				}
				if gaps > 0 {
					w++
				}
			}
			mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
			}
		}
	}()
	return func() ([]string, int, int, error) {
		cancel()
		wg.Wait()
		return vs, n, w, errors.Join(errs...)
	}
}
