package apply_test

import (
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/apply"
	"github.com/gapless-dev/gapless/execute/executetest"
	"github.com/gapless-dev/gapless/plan"
)

// Scenario: Params.EnvironmentTTL stamps every promotion of a non-prod
// environment with ExpiresAt = the apply's Now + the TTL, so that a later
// promotion extends it; prod never expires whatever the TTL, and a zero
// TTL means never.
func TestPromotionRecordsExpiry(t *testing.T) {
	t.Parallel()
	b := executetest.Setup(t, true, nil)
	ttl := 7 * 24 * time.Hour
	apply1 := func(id, env string, now time.Time, ttl time.Duration) {
		t.Helper()
		p := b.Plan(t, id, env, at(2024, 1, 3, 0), plan.Options{AllowGaps: env != plan.Prod})
		_, err := apply.Apply(b.Ctx, apply.Params{Plan: p, Store: b.Store, Engine: b.Engine, Parser: b.Parser,
			ProjectDir: b.Dir, Clock: clockwork.NewFakeClockAt(now), Logger: quiet, EnvironmentTTL: ttl})
		require.NoError(t, err)
	}
	apply1("p1", plan.Prod, at(2024, 1, 3, 0), ttl)
	prod, err := b.Store.GetEnvironment(b.Ctx, plan.Prod)
	require.NoError(t, err)
	require.True(t, prod.ExpiresAt.IsZero(), "prod never expires")

	apply1("d1", "dev", at(2024, 1, 3, 1), ttl)
	dev, err := b.Store.GetEnvironment(b.Ctx, "dev")
	require.NoError(t, err)
	require.Equal(t, at(2024, 1, 3, 1).Add(ttl), dev.ExpiresAt.UTC())

	editEvents(t, b, "(epoch(g.ts)::BIGINT / 300) % 7 * 2.5")
	apply1("d2", "dev", at(2024, 1, 5, 0), ttl)
	dev, err = b.Store.GetEnvironment(b.Ctx, "dev")
	require.NoError(t, err)
	require.Equal(t, int64(2), dev.Generation)
	require.Equal(t, at(2024, 1, 5, 0).Add(ttl), dev.ExpiresAt.UTC(), "the second promotion extends it")

	apply1("q1", "qa", at(2024, 1, 5, 0), 0)
	qa, err := b.Store.GetEnvironment(b.Ctx, "qa")
	require.NoError(t, err)
	require.True(t, qa.ExpiresAt.IsZero(), "a zero TTL: never")
}
