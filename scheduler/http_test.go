package scheduler_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/execute/executetest"
	"github.com/gapless-dev/gapless/scheduler"
)

// get fetches url and returns the status and body.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

// scrape returns the daemon's /metrics page.
func scrape(t *testing.T, d *daemon) string {
	t.Helper()
	srv := httptest.NewServer(d.Handler())
	defer srv.Close()
	code, body := get(t, srv.URL+"/metrics")
	require.Equal(t, http.StatusOK, code)
	return body
}

// Scenario: /healthz answers 200 before the first tick (last_tick null)
// and after it (ticks counted, last_tick the clock's time); /metrics
// exposes the tick, run, interval and lag metrics under their stable names.
func TestHealthzAndMetrics(t *testing.T) {
	t.Parallel()
	b := executetest.Setup(t, false, pair())
	deploy(t, b, "p1", at(2024, 1, 1, 10))
	clk := clockwork.NewFakeClockAt(at(2024, 1, 1, 11))
	d := newDaemon(t, b, "d1", clk, nil)
	srv := httptest.NewServer(d.Handler())
	defer srv.Close()

	code, body := get(t, srv.URL+"/healthz")
	require.Equal(t, http.StatusOK, code)
	var h scheduler.Health
	require.NoError(t, json.Unmarshal([]byte(body), &h))
	require.Equal(t, "ok", h.Status)
	require.Zero(t, h.Ticks)
	require.Nil(t, h.LastTick)
	require.JSONEq(t, `{"status":"ok","ticks":0,"last_tick":null,"envs":["prod"]}`, body)

	_, err := d.Tick(b.Ctx)
	require.NoError(t, err)
	code, body = get(t, srv.URL+"/healthz")
	require.Equal(t, http.StatusOK, code)
	require.NoError(t, json.Unmarshal([]byte(body), &h))
	require.Equal(t, int64(1), h.Ticks)
	require.NotNil(t, h.LastTick)
	require.Equal(t, at(2024, 1, 1, 11), *h.LastTick)
	require.Empty(t, h.LastError)

	code, body = get(t, srv.URL+"/metrics")
	require.Equal(t, http.StatusOK, code)
	for _, want := range []string{
		"gapless_scheduler_ticks_total 1",
		`gapless_scheduler_runs_total{env="prod",outcome="ok"} 1`,
		`gapless_scheduler_intervals_total{env="prod"} 2`,
		`gapless_scheduler_lag_seconds{env="prod"} 0`,
		"gapless_scheduler_lease_losses_total 0",
	} {
		require.Contains(t, body, want)
	}
}

// Scenario: Serve listens (port 0), answers /healthz, and shuts down when
// its context ends, returning nil.
func TestServeShutsDownWithItsContext(t *testing.T) {
	t.Parallel()
	b := executetest.Setup(t, false, pair())
	d := newDaemon(t, b, "d1", clockwork.NewFakeClockAt(at(2024, 1, 1, 11)), nil)
	ctx, cancel := context.WithCancel(b.Ctx)
	addrs := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() { done <- d.Serve(ctx, "127.0.0.1:0", func(a net.Addr) { addrs <- a }) }()
	addr := <-addrs
	code, _ := get(t, "http://"+addr.String()+"/healthz")
	require.Equal(t, http.StatusOK, code)
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after its context ended")
	}

	err := d.Serve(b.Ctx, "127.0.0.1:-1", nil)
	require.ErrorContains(t, err, "listening on 127.0.0.1:-1")
}
