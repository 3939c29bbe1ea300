package cli

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/backend"
	"github.com/gapless-dev/gapless/config"
	"github.com/gapless-dev/gapless/lease"
	"github.com/gapless-dev/gapless/state"
)

// Scenario: `gapless run` finds demo.events's version leased by another
// process and defers it, exit 0, saying what it deferred, which process
// holds the lease (owner, PID, host) and until when. First the holder is a
// scheduler on another host (never known gone from here), then this very
// test process (alive): both are deferred and neither lease is taken. Once
// the lease is released, the next run computes the five hours.
func TestRunDefersALiveHoldersLeaseAndNamesIt(t *testing.T) {
	t.Parallel()
	dir := initProject(t)
	mustRun(t, dir, "plan", "--auto-apply", "--execution-time", t0)
	ctx := context.Background()
	cfg, err := config.Load(dir)
	require.NoError(t, err)
	b, err := backend.Open(ctx, cfg, backend.Options{StateOnly: true})
	require.NoError(t, err)
	defer b.Close()
	version := statusOf(t, dir, "--execution-time", t1)["demo.events"].Version
	key := lease.VersionKey(state.VersionKey{Name: "demo.events", Version: version})
	due := "[2024-01-02T00:00:00Z, 2024-01-02T05:00:00Z)" // one range of the set "{...}"

	for _, h := range []struct {
		owner  string
		holder state.LeaseHolder
	}{
		{"scheduler", state.LeaseHolder{Host: "ci-elsewhere", PID: 4242, Start: "linux:boot:pid:[1]:99"}},
		{"deploy 7f3a", lease.Self()},
	} {
		// The run takes its leases on the real clock.
		l, err := b.Store.AcquireLease(ctx, state.AcquireLeaseParams{Key: key, Owner: h.owner, Holder: h.holder, TTL: time.Hour, Now: time.Now()})
		require.NoError(t, err)
		out := mustRun(t, dir, "run", "--execution-time", t1)
		want := fmt.Sprintf("  demo.events %s: deferred {%s}: its lease is held by %s (pid %d on %s) until %s;",
			version, due, h.owner, h.holder.PID, h.holder.Host, l.ExpiresAt.UTC().Format(time.RFC3339))
		require.Contains(t, out, want)
		require.Contains(t, out, "a later run computes it once the holder releases the lease, or after "+l.ExpiresAt.UTC().Format(time.RFC3339)+" if it stops renewing it")
		got, err := b.Store.GetLease(ctx, key)
		require.NoError(t, err)
		require.Equal(t, l.Token, got.Token, "the run took a live holder's lease")
		require.Equal(t, []string{due}, statusOf(t, dir, "--execution-time", t1)["demo.events"].Missing)
		require.NoError(t, b.Store.ReleaseLease(ctx, state.ReleaseLeaseParams{Key: key, Token: l.Token}))
	}

	out := mustRun(t, dir, "run", "--execution-time", t1)
	require.NotContains(t, out, "deferred")
	require.Empty(t, statusOf(t, dir, "--execution-time", t1)["demo.events"].Missing)
}
