package githubfake_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/codehost/githubfake"
)

const testRepo = "acme/warehouse"

// start is when every test's fake clock begins.
var start = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// setup starts a fake on a fake clock with testRepo created, and a raw
// HTTP client holding a personal token.
func setup(t *testing.T, opts githubfake.Options) (*githubfake.Fake, *clockwork.FakeClock, *api) {
	t.Helper()
	clock := clockwork.NewFakeClockAt(start)
	if opts.Clock == nil {
		opts.Clock = clock
	}
	f := githubfake.NewT(t, opts)
	f.CreateRepo(testRepo, "main")
	return f, clock, &api{t: t, f: f, token: f.PersonalToken("ci-bot")}
}

// api is a raw HTTP client of the fake: no library between the test and
// the wire.
type api struct {
	t     *testing.T
	f     *githubfake.Fake
	token string
}

// noRedirects is an HTTP client that shows a 302 instead of following it.
var noRedirects = &http.Client{
	Timeout:       30 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// reply is a response already read and closed.
type reply struct {
	StatusCode int
	Header     http.Header
}

// do sends a request (path relative to the API root, body marshalled as
// JSON unless nil) and returns the response and its body.
func (a *api) do(method, path string, body any) (*reply, []byte) {
	a.t.Helper()
	return a.doAuth(method, path, body, "token "+a.token)
}

func (a *api) doAuth(method, path string, body any, authorization string) (*reply, []byte) {
	a.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(a.t, err)
		rd = bytes.NewReader(b)
	}
	url := path
	if !strings.HasPrefix(path, "http") {
		url = a.f.URL() + strings.TrimPrefix(path, "/")
	}
	req, err := http.NewRequest(method, url, rd)
	require.NoError(a.t, err)
	req.Header.Set("Accept", "application/vnd.github+json")
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	resp, err := noRedirects.Do(req)
	require.NoError(a.t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(a.t, err)
	return &reply{StatusCode: resp.StatusCode, Header: resp.Header}, out
}

// decode unmarshals a JSON body.
func decode[T any](t *testing.T, body []byte) T {
	t.Helper()
	var v T
	require.NoError(t, json.Unmarshal(body, &v), "body: %s", body)
	return v
}

// object is a JSON object as read off the wire.
type object = map[string]any

// receiver is a webhook endpoint that records what it is sent and answers
// status.
type receiver struct {
	mu     sync.Mutex
	got    []received
	status int
}

type received struct {
	header http.Header
	body   []byte
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	rc.got = append(rc.got, received{header: r.Header.Clone(), body: body})
	status := rc.status
	rc.mu.Unlock()
	if status == 0 {
		status = http.StatusAccepted
	}
	w.WriteHeader(status)
}

func (rc *receiver) all() []received {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]received(nil), rc.got...)
}

// openPR makes branch "feature" with files and opens a pull request from
// it into main.
func openPR(f *githubfake.Fake, files map[string]string) int {
	f.Commit(testRepo, "feature", files, "change models")
	return f.OpenPR(testRepo, githubfake.PRSpec{Title: "Change models", Author: "alice", Head: "feature", Base: "main"})
}
