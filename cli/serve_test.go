package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/codehost/githubfake"
)

// serveRepo is the repository the serve tests' App is installed on.
const serveRepo = "acme/analytics"

// runServeRefused runs `gapless serve` in-process in dir with a context
// already cancelled: a serve that refuses to start answers as it would
// anyway, and one that wrongly gets past its checks stops at once instead
// of serving forever.
func runServeRefused(t *testing.T, dir string) result {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	var out, errb bytes.Buffer
	code := Run(ctx, []string{"serve", "--listen", "127.0.0.1:0"}, Env{
		Stdout: &out, Stderr: &errb,
		Clock: clockwork.NewFakeClockAt(time.Date(2024, 3, 1, 10, 30, 0, 0, time.UTC)),
		Getwd: func() (string, error) { return dir, nil },
	})
	return result{code, out.String(), errb.String()}
}

// serveProject writes gapless.yaml (state and warehouse, then body) into a
// fresh folder and returns it.
func serveProject(t *testing.T, body string) string {
	t.Helper()
	dir := t.TempDir()
	yaml := "state: sqlite://.gapless/state.db\nwarehouse: 'duckdb://:memory:'\n" + body
	require.NoError(t, os.WriteFile(filepath.Join(dir, "gapless.yaml"), []byte(yaml), 0o644))
	return dir
}

// skipIfSet skips t when one of vars is set in this environment: the
// expectation is about it being unset.
func skipIfSet(t *testing.T, vars ...string) {
	t.Helper()
	for _, v := range vars {
		if os.Getenv(v) != "" {
			t.Skipf("${%s} is set in this environment; the test needs it unset", v)
		}
	}
}

func TestServeRefusesToStartWithoutWhatItNeeds(t *testing.T) {
	t.Parallel()
	const leaked = "s3cret-never-shown"
	tests := []struct {
		name, scenario string
		yaml           string
		// unset are the variables that must not be set for the case to
		// hold (the github keys read them when absent).
		unset []string
		want  []string
	}{
		{
			name:     "no webhook secret",
			scenario: "an operator forgets the webhook secret: serve would accept deliveries it cannot verify, so it refuses to start and names the key and the variable it reads",
			yaml:     "github:\n  app_id: 7\n  private_key_file: app.pem\n  repositories: [" + serveRepo + "]\n",
			unset:    []string{"GAPLESS_WEBHOOK_SECRET"},
			want:     []string{"github.webhook_secret: gapless serve requires it: set it in the github block, or set ${GAPLESS_WEBHOOK_SECRET}"},
		},
		{
			name:     "webhook secret variable unset",
			scenario: "gapless.yaml reads the secret from ${GAPLESS_WEBHOOK_SECRET}, which the deployment forgot to set: the error says where and which variable",
			yaml:     "github:\n  app_id: 7\n  private_key_file: app.pem\n  webhook_secret: ${GAPLESS_WEBHOOK_SECRET}\n  repositories: [" + serveRepo + "]\n",
			unset:    []string{"GAPLESS_WEBHOOK_SECRET"},
			want:     []string{"gapless.yaml:6:19: github.webhook_secret: gapless serve requires it, and ${GAPLESS_WEBHOOK_SECRET} is not set"},
		},
		{
			name:     "empty webhook secret",
			scenario: "the secret is written empty: no secret at all",
			yaml:     "github:\n  app_id: 7\n  private_key_file: app.pem\n  webhook_secret: ''\n  repositories: [" + serveRepo + "]\n",
			want:     []string{"github.webhook_secret: gapless serve requires it, and it is empty"},
		},
		{
			name:     "no github block",
			scenario: "a project without a github: block",
			yaml:     "",
			want:     []string{"has no github: block; gapless serve needs one"},
		},
		{
			name:     "no repositories",
			scenario: "no repository allowed: every delivery would be refused, so serve refuses to start",
			yaml:     "github:\n  app_id: 7\n  private_key_file: app.pem\n  webhook_secret: " + leaked + "\n",
			want:     []string{"github.repositories: gapless serve requires it"},
		},
		{
			name:     "no App and no token",
			scenario: "a secret and repositories but no way to authenticate to GitHub (token written empty, so a ${GITHUB_TOKEN} in this environment does not count)",
			yaml:     "github:\n  token: ''\n  webhook_secret: " + leaked + "\n  repositories: [" + serveRepo + "]\n",
			unset:    []string{"GAPLESS_GITHUB_APP_ID", "GAPLESS_GITHUB_KEY_FILE"},
			want:     []string{"github.app_id: gapless serve requires it"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// Scenario: tc.scenario. serve exits 2 (a usage error) with one
			// line naming what is missing, and never the secret.
			skipIfSet(t, tc.unset...)
			dir := serveProject(t, tc.yaml)
			r := runServeRefused(t, dir)
			require.Equal(t, ExitUsage, r.code, "%s\nstderr: %s", tc.scenario, r.stderr)
			require.True(t, strings.HasPrefix(r.stderr, "gapless: "), r.stderr)
			for _, w := range tc.want {
				require.Contains(t, r.stderr, w)
			}
			require.Equal(t, 1, strings.Count(r.stderr, "\n"), "one line: %s", r.stderr)
			require.NotContains(t, r.stderr, leaked)
			require.NotContains(t, r.stdout, "Serving")
			require.NoDirExists(t, filepath.Join(dir, ".gapless"), "nothing was opened")
		})
	}
}

func TestServeStopsGracefullyOnSIGTERM(t *testing.T) {
	t.Parallel()
	// Scenario: an operator runs `gapless serve` as a process (App key
	// from a file, the webhook secret from ${GAPLESS_WEBHOOK_SECRET})
	// against GitHub (the fake). It prints where it listens; /healthz
	// answers; a signed delivery is accepted and a forged one refused, and
	// /metrics shows both and the queue's jobs. On SIGTERM (a deploy, a
	// scale-down) it stops taking deliveries, lets its jobs finish, says
	// "Stopped." and exits 0; the secret appears nowhere in its output.
	const whSecret = "whsec-process-test"
	fake := githubfake.NewT(t, githubfake.Options{})
	fake.CreateRepo(serveRepo, "main")
	head := fake.Commit(serveRepo, "main", map[string]string{"gapless.yaml": "model_defaults:\n  dialect: duckdb\n"}, "initial")
	dir := serveProject(t, fmt.Sprintf("github:\n  app_id: %d\n  private_key_file: app.pem\n  webhook_secret: ${GAPLESS_WEBHOOK_SECRET}\n  repositories: [%s]\n  api_url: %s\n",
		fake.AppID(), serveRepo, fake.URL()))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "app.pem"), fake.AppPrivateKeyPEM(), 0o600))

	cmd := binaryCommand(t, "serve", "--listen", "127.0.0.1:0", "--grace", "20s", "--log-level", "info")
	cmd.Dir = dir
	cmd.Env = append(cmd.Env, "GAPLESS_WEBHOOK_SECRET="+whSecret)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	exited := false
	t.Cleanup(func() {
		if !exited {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	lines := make(chan string, 16)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()

	var first string
	select {
	case l, ok := <-lines:
		require.True(t, ok, "serve exited before it served; stderr:\n%s", &stderr)
		first = l
	case <-time.After(60 * time.Second):
		t.Fatal("serve did not say where it listens within a minute")
	}
	m := regexp.MustCompile(`^Serving the GitHub App for \[acme/analytics\] on (\S+) \(webhook: POST /webhook\)\.$`).FindStringSubmatch(first)
	require.NotNil(t, m, "first line: %q", first)
	base := "http://" + m[1]

	client := &http.Client{Transport: &http.Transport{}, Timeout: 30 * time.Second}
	t.Cleanup(client.CloseIdleConnections)
	get := func(path string) (int, string) {
		resp, err := client.Get(base + path)
		require.NoError(t, err)
		defer func() { require.NoError(t, resp.Body.Close()) }()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(b)
	}
	code, body := get("/healthz")
	require.Equal(t, http.StatusOK, code, body)
	var health struct {
		Status       string   `json:"status"`
		Repositories []string `json:"repositories"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &health))
	require.Equal(t, "ok", health.Status)
	require.Equal(t, []string{serveRepo}, health.Repositories)

	fake.SetWebhook(base+"/webhook", []byte(whSecret))
	push := map[string]any{
		"ref": "refs/heads/feature", "before": strings.Repeat("0", 40), "after": head,
		"repository": map[string]any{"full_name": serveRepo}, "sender": map[string]any{"login": "alice"},
	}
	status, err := fake.Deliver("push", push)
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, status)
	status, err = fake.DeliverTampered("push", push, githubfake.TamperBadSignature)
	require.NoError(t, err)
	require.Equal(t, http.StatusUnauthorized, status)

	code, body = get("/metrics")
	require.Equal(t, http.StatusOK, code)
	samples := metricSamples(t, body)
	require.Equal(t, 1.0, samples[`gapless_webhook_deliveries_total{outcome="accepted"}`])
	require.Equal(t, 1.0, samples[`gapless_webhook_deliveries_total{outcome="invalid_signature"}`])
	jobs := 0.0
	for k, v := range samples {
		if strings.HasPrefix(k, `gapless_queue_jobs{kind="gapless_delivery",`) {
			jobs += v
		}
	}
	require.Equal(t, 1.0, jobs, "the accepted delivery's job is in gapless_queue_jobs:\n%s", body)
	require.Contains(t, samples, "gapless_github_ratelimit_remaining")
	require.Contains(t, samples, "go_goroutines", "the Go runtime's metrics too")

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	var rest []string
	for l := range lines { // until serve closes stdout
		rest = append(rest, l)
	}
	err = cmd.Wait()
	exited = true
	require.NoError(t, err, "a graceful stop exits 0; stderr:\n%s", &stderr)
	require.NotEmpty(t, rest)
	require.Equal(t, "Stopped.", rest[len(rest)-1], "stdout after the first line: %q", rest)
	require.NotContains(t, stderr.String(), whSecret, "the secret is never logged")
	require.Contains(t, stderr.String(), "stopping")
}

// metricSamples reads Prometheus's text format into value by
// "name{labels}" as written.
func metricSamples(t *testing.T, text string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for line := range strings.SplitSeq(text, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		require.Positive(t, i, "a sample line without a value: %q", line)
		v, err := strconv.ParseFloat(line[i+1:], 64)
		require.NoError(t, err, "sample line %q", line)
		out[line[:i]] = v
	}
	return out
}
