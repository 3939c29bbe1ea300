package janitor_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/apply"
	"github.com/gapless-dev/gapless/backend"
	"github.com/gapless-dev/gapless/config"
	"github.com/gapless-dev/gapless/execute/executetest"
	"github.com/gapless-dev/gapless/janitor"
	"github.com/gapless-dev/gapless/plan"
	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/warehouse"
)

// The example project's story times: the plans are built at t0 (one day of
// history), the promotions stamped at clock0.
var (
	t0     = time.Date(2024, 1, 2, 0, 30, 0, 0, time.UTC)
	clock0 = time.Date(2024, 3, 1, 10, 30, 0, 0, time.UTC)
	week   = 7 * 24 * time.Hour
)

// deployExample plans the example project for env at t0 and applies it at
// clock0, with the default environment_ttl.
func deployExample(t *testing.T, b *executetest.Bundle, id, env string) {
	t.Helper()
	p := b.Plan(t, id, env, t0, plan.Options{AllowGaps: env != plan.Prod}) // as the CLI: only prod is checked
	_, err := apply.Apply(b.Ctx, apply.Params{Plan: p, Store: b.Store, Engine: b.Engine, Parser: b.Parser,
		ProjectDir: b.Dir, Clock: clockwork.NewFakeClockAt(clock0), Logger: quiet, EnvironmentTTL: config.DefaultEnvironmentTTL})
	require.NoError(t, err)
}

// exampleWithDev deploys the example project to prod, then a breaking
// change of demo.daily_revenue (a new column, biggest) to dev.
func exampleWithDev(t *testing.T) *executetest.Bundle {
	t.Helper()
	b := executetest.Setup(t, true, nil)
	deployExample(t, b, "p1", plan.Prod)
	file := filepath.Join(b.Dir, "models", "daily_revenue.sql")
	src, err := os.ReadFile(file)
	require.NoError(t, err)
	edited := strings.Replace(string(src), "sum(e.amount) AS revenue", "sum(e.amount) AS revenue,\n  max(e.amount) AS biggest", 1)
	require.NotEqual(t, string(src), edited)
	require.NoError(t, os.WriteFile(file, []byte(edited), 0o644))
	deployExample(t, b, "d1", "dev")
	return b
}

func tableExists(t *testing.T, b *executetest.Bundle, schema, name string) bool {
	t.Helper()
	ok, err := b.Engine.TableExists(b.Ctx, warehouse.Table{Schema: schema, Name: name})
	require.NoError(t, err)
	return ok
}

// Scenario: dev is re-promoted between the janitor's read of it (expired)
// and its removal. The removal, pinned to the generation read, fails; the
// janitor leaves dev, its views, its view schema and its tables alone and
// reports it skipped.
func TestJanitorLeavesAnEnvironmentPromotedMeanwhile(t *testing.T) {
	t.Parallel()
	b := exampleWithDev(t)
	devSnaps, _ := b.Served(t, "dev")
	ctx := b.Ctx
	after := clock0.Add(2 * week)
	rep, err := janitor.Run(ctx, &backend.Backend{Store: b.Store, Engine: b.Engine}, after, janitor.Options{Grace: janitor.DefaultGrace,
		Log: quiet,
		BeforeRemove: func(ctx context.Context, e *state.Environment) error {
			// Another deploy re-promotes dev (the same plan content, a
			// new plan id), extending its expiry.
			_, err := b.Store.Promote(ctx, state.PromoteParams{Environment: e.Name, ExpectedPlanID: e.PlanID,
				PlanID: e.PlanID, Snapshots: e.Snapshots, ExpiresAt: after.Add(week), Now: after})
			return err
		}})
	require.NoError(t, err)
	require.Empty(t, rep.Environments)
	require.Empty(t, rep.Views)
	require.Empty(t, rep.Schemas)
	require.Contains(t, rep.Skipped, "dev")
	require.NotContains(t, rep.Tables, "gapless__demo.demo__daily_revenue__"+devSnaps["demo.daily_revenue"].Version)

	dev, err := b.Store.GetEnvironment(ctx, "dev")
	require.NoError(t, err)
	require.Equal(t, int64(2), dev.Generation)
	require.Equal(t, after.Add(week), dev.ExpiresAt)
	res, err := b.Engine.Query(ctx, "SELECT max(biggest)::DOUBLE FROM demo__dev.daily_revenue")
	require.NoError(t, err)
	require.Equal(t, 9.0, res.Rows[0][0])
}

// Scenario: the janitor stops half-way through removing an expired dev (it
// is killed after dev's row was deleted, before dev's views were dropped).
// The next janitor finds the removal it left unfinished, drops dev's views
// and view schema, and says so; the one after that has nothing left to do.
func TestJanitorFinishesARemovalLeftHalfDone(t *testing.T) {
	t.Parallel()
	b := exampleWithDev(t)
	require.True(t, tableExists(t, b, "demo__dev", "daily_revenue"))

	ctx := b.Ctx
	be := &backend.Backend{Store: b.Store, Engine: b.Engine}
	after := clock0.Add(2 * week)
	killed := errors.New("killed")
	_, err := janitor.Run(ctx, be, after, janitor.Options{Grace: janitor.DefaultGrace, Log: quiet,
		AfterRemove: func(context.Context, *state.Environment) error { return killed }})
	require.ErrorIs(t, err, killed)
	_, err = b.Store.GetEnvironment(ctx, "dev")
	require.ErrorIs(t, err, state.ErrNotFound, "dev's row is gone")
	require.True(t, tableExists(t, b, "demo__dev", "daily_revenue"), "its views are still there")

	opts := janitor.Options{Grace: janitor.DefaultGrace, SnapshotTTL: config.DefaultSnapshotTTL, Log: quiet}
	rep, err := janitor.Run(ctx, be, after.Add(time.Hour), opts)
	require.NoError(t, err)
	require.Equal(t, []string{"dev"}, rep.Resumed)
	require.Contains(t, rep.Views, "demo__dev.daily_revenue")
	require.Contains(t, rep.Schemas, "demo__dev")
	require.False(t, tableExists(t, b, "demo__dev", "daily_revenue"))
	require.Equal(t, int64(5), b.Count(t, "demo.daily_revenue"), "prod untouched")

	again, err := janitor.Run(ctx, be, after.Add(2*time.Hour), opts)
	require.NoError(t, err)
	require.Empty(t, again.Resumed)
	require.Empty(t, again.Views)
}
