package github

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/gapless-dev/gapless/internal/logkey"
)

// Call is one HTTP request the client made (each retry is its own Call),
// as Config.Observe receives it.
type Call struct {
	// Route is the request's route template, e.g.
	// "PATCH /repos/{owner}/{repo}/check-runs/{id}" (see Routes).
	Route string
	// Status is the response's status code, 0 on a transport error.
	Status int
	// Duration is how long the request took, up to its response headers.
	Duration time.Duration
	// RateRemaining and RateLimit are the X-RateLimit-Remaining and
	// X-RateLimit-Limit headers the response carried, -1 when absent.
	RateRemaining, RateLimit int
	// Attempt is the request's attempt number, 1 for the first.
	Attempt int
}

// The route templates the client calls, as Call.Route and Error.Route name
// them. A request whose path matches none (the archive host a tarball
// redirects to) carries the route of the call that made it.
const (
	RouteApp                   = "GET /app"
	RouteRepoInstallation      = "GET /repos/{owner}/{repo}/installation"
	RouteInstallationToken     = "POST /app/installations/{id}/access_tokens"
	RouteRepo                  = "GET /repos/{owner}/{repo}"
	RoutePull                  = "GET /repos/{owner}/{repo}/pulls/{n}"
	RoutePulls                 = "GET /repos/{owner}/{repo}/pulls"
	RouteMerge                 = "PUT /repos/{owner}/{repo}/pulls/{n}/merge"
	RouteTarball               = "GET /repos/{owner}/{repo}/tarball/{ref}"
	RouteCheckRunsForRef       = "GET /repos/{owner}/{repo}/commits/{ref}/check-runs"
	RouteCreateCheckRun        = "POST /repos/{owner}/{repo}/check-runs"
	RouteUpdateCheckRun        = "PATCH /repos/{owner}/{repo}/check-runs/{id}"
	RouteBranchProtection      = "GET /repos/{owner}/{repo}/branches/{branch}/protection"
	RouteIssueComments         = "GET /repos/{owner}/{repo}/issues/{n}/comments"
	RouteCreateIssueComment    = "POST /repos/{owner}/{repo}/issues/{n}/comments"
	RouteEditIssueComment      = "PATCH /repos/{owner}/{repo}/issues/comments/{id}"
	RouteIssueCommentReactions = "POST /repos/{owner}/{repo}/issues/comments/{id}/reactions"
	RoutePermission            = "GET /repos/{owner}/{repo}/collaborators/{user}/permission"
)

// Routes lists every route template the client calls.
var Routes = []string{
	RouteApp, RouteRepoInstallation, RouteInstallationToken, RouteRepo, RoutePull, RoutePulls,
	RouteMerge, RouteTarball, RouteCheckRunsForRef, RouteCreateCheckRun, RouteUpdateCheckRun,
	RouteBranchProtection, RouteIssueComments, RouteCreateIssueComment, RouteEditIssueComment,
	RouteIssueCommentReactions, RoutePermission,
}

type routeKey struct{}

// withRoute records the route of the call a request belongs to, for the
// requests whose path names no known route (a redirect's target).
func withRoute(ctx context.Context, route string) context.Context {
	return context.WithValue(ctx, routeKey{}, route)
}

// routeOf returns the route template of a request: the known route its
// method and path (relative to the API base path) match, else the route of
// the call it belongs to, else its method and "(other)".
func routeOf(req *http.Request, basePath string) string {
	p := req.URL.EscapedPath()
	if rel, ok := strings.CutPrefix(p, strings.TrimSuffix(basePath, "/")); ok {
		p = rel
	}
	segs := strings.Split(strings.Trim(p, "/"), "/")
	for _, r := range Routes {
		method, tmpl, _ := strings.Cut(r, " ")
		if method != req.Method {
			continue
		}
		tsegs := strings.Split(strings.Trim(tmpl, "/"), "/")
		if len(tsegs) != len(segs) {
			continue
		}
		match := true
		for i, t := range tsegs {
			if strings.HasPrefix(t, "{") {
				if segs[i] == "" {
					match = false
					break
				}
				continue
			}
			if t != segs[i] {
				match = false
				break
			}
		}
		if match {
			return r
		}
	}
	if r, ok := req.Context().Value(routeKey{}).(string); ok {
		return r
	}
	return req.Method + " (other)"
}

// retryTransport sends each request, observes it, and retries what GitHub
// or the network failed transiently: 5xx, 429, rate limits (primary only
// when they reset within maxDelay), timeouts and connection errors. It
// hands the last response (or error) up when the attempts run out or the
// answer is determinate, so go-github turns it into an error the client
// classifies with the same rules (classify).
type retryTransport struct {
	base        http.RoundTripper
	basePath    string
	clock       clockwork.Clock
	wait        func(ctx context.Context, d time.Duration) error
	maxAttempts int
	baseDelay   time.Duration
	maxDelay    time.Duration
	// headerTimeout bounds how long one attempt waits for its response's
	// headers (on the clock); an attempt that times out is retried.
	headerTimeout time.Duration
	observe       func(Call)
	log           *slog.Logger
}

// RoundTrip implements http.RoundTripper.
func (t *retryTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	route := routeOf(req, t.basePath)
	for attempt := 1; ; attempt++ {
		r := req
		if attempt > 1 {
			r = req.Clone(ctx)
			if req.Body != nil && req.Body != http.NoBody {
				body, err := req.GetBody()
				if err != nil {
					return nil, fmt.Errorf("replaying the request body of %s: %w", route, err)
				}
				r.Body = body
			}
		}
		start := t.clock.Now()
		resp, timedOut, err := t.attempt(r)
		call := Call{Route: route, Duration: t.clock.Since(start), RateRemaining: -1, RateLimit: -1, Attempt: attempt}
		if resp != nil {
			call.Status = resp.StatusCode
			call.RateRemaining = headerInt(resp.Header, "X-RateLimit-Remaining")
			call.RateLimit = headerInt(resp.Header, "X-RateLimit-Limit")
		}
		if t.observe != nil {
			t.observe(call)
		}

		var v verdict
		if err != nil {
			if ctx.Err() != nil {
				return nil, err
			}
			v = verdict{retry: timedOut || transientNetError(err), wait: -1, reason: "transport error"}
			if timedOut {
				v.reason = "no answer in time"
				err = fmt.Errorf("%s: no response headers within %s: %w", route, t.headerTimeout, err)
			}
		} else {
			v = t.judge(resp)
		}
		if !v.retry {
			return resp, err
		}
		canReplay := req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
		if attempt >= t.maxAttempts || !canReplay {
			return resp, err
		}
		d := v.wait
		if d < 0 {
			d = backoff(t.baseDelay, t.maxDelay, attempt)
		}
		if resp != nil {
			// Drain a little so the connection can be reused, then let go.
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			_ = resp.Body.Close()
		}
		t.log.DebugContext(ctx, "github: retrying",
			logkey.Route, route, logkey.Status, call.Status, logkey.Attempt, attempt,
			logkey.Reason, v.reason, logkey.DurationMS, d.Milliseconds())
		if werr := t.wait(ctx, d); werr != nil {
			return nil, werr
		}
	}
}

// attempt sends one request, cancelling it when its response's headers do
// not come within headerTimeout; the body, once headers came, reads under
// the caller's context alone.
func (t *retryTransport) attempt(r *http.Request) (*http.Response, bool, error) {
	if t.headerTimeout <= 0 {
		resp, err := t.base.RoundTrip(r)
		return resp, false, err
	}
	ctx, cancel := context.WithCancel(r.Context())
	var mu sync.Mutex
	fired := false
	timer := t.clock.AfterFunc(t.headerTimeout, func() {
		mu.Lock()
		fired = true
		mu.Unlock()
		cancel()
	})
	resp, err := t.base.RoundTrip(r.WithContext(ctx))
	timer.Stop()
	mu.Lock()
	timedOut := fired
	mu.Unlock()
	if timedOut && r.Context().Err() == nil {
		// Abandoned: whatever came too late is dropped.
		if resp != nil {
			_ = resp.Body.Close()
		}
		cancel()
		if err == nil {
			err = context.DeadlineExceeded
		}
		return nil, true, err
	}
	if err != nil || resp == nil {
		cancel()
		return resp, false, err
	}
	resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
	return resp, false, nil
}

// cancelOnClose releases an attempt's context when its body is closed.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c *cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.cancel()
	return err
}

// verdict is what retryTransport makes of one answer.
type verdict struct {
	retry  bool
	wait   time.Duration // < 0: exponential backoff
	reason string
}

// judge decides whether a response is worth another attempt, and after how
// long. It buffers the body of a 403 or 429 to read GitHub's message, and
// puts it back.
func (t *retryTransport) judge(resp *http.Response) verdict {
	switch {
	case resp.StatusCode >= 500:
		if ra, ok := retryAfter(resp.Header, t.clock.Now()); ok {
			if ra > t.maxDelay {
				return verdict{}
			}
			return verdict{retry: true, wait: ra, reason: "server error, Retry-After"}
		}
		return verdict{retry: true, wait: -1, reason: "server error"}
	case resp.StatusCode == http.StatusForbidden || resp.StatusCode == http.StatusTooManyRequests:
		msg := peekMessage(resp)
		limited, reset, ok := rateLimit(resp.StatusCode, resp.Header, msg)
		if !limited {
			return verdict{}
		}
		if ra, has := retryAfter(resp.Header, t.clock.Now()); has {
			if ra > t.maxDelay {
				return verdict{}
			}
			return verdict{retry: true, wait: ra, reason: "rate limited, Retry-After"}
		}
		if ok { // a primary limit: wait for its reset when it comes soon enough
			d := reset.Sub(t.clock.Now())
			if d > t.maxDelay {
				return verdict{}
			}
			if d < 0 {
				d = 0
			}
			return verdict{retry: true, wait: d, reason: "primary rate limit"}
		}
		return verdict{retry: true, wait: -1, reason: "rate limited"}
	}
	return verdict{}
}

// rateLimit reports whether a 403 or 429 is a rate limit rather than a
// refusal, and for a primary limit (X-RateLimit-Remaining: 0) when it
// resets (ok false when the header is missing).
func rateLimit(status int, h http.Header, message string) (limited bool, reset time.Time, ok bool) {
	if status != http.StatusForbidden && status != http.StatusTooManyRequests {
		return false, time.Time{}, false
	}
	if h.Get("X-RateLimit-Remaining") == "0" {
		if s, err := strconv.ParseInt(h.Get("X-RateLimit-Reset"), 10, 64); err == nil {
			return true, time.Unix(s, 0), true
		}
		return true, time.Time{}, false
	}
	if status == http.StatusTooManyRequests || h.Get("Retry-After") != "" {
		return true, time.Time{}, false
	}
	m := strings.ToLower(message)
	return strings.Contains(m, "secondary rate limit") || strings.Contains(m, "abuse detection"), time.Time{}, false
}

// retryAfter parses a Retry-After header (seconds or an HTTP date).
func retryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if s, err := strconv.Atoi(v); err == nil && s >= 0 {
		return time.Duration(s) * time.Second, true
	}
	if at, err := http.ParseTime(v); err == nil {
		d := at.Sub(now)
		if d < 0 {
			d = 0
		}
		return d, true
	}
	return 0, false
}

// peekMessage reads GitHub's JSON error message of a response and puts the
// body back for go-github.
func peekMessage(resp *http.Response) string {
	if resp.Body == nil {
		return ""
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	_ = resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(data))
	if err != nil {
		return ""
	}
	var e struct {
		Message          string `json:"message"`
		DocumentationURL string `json:"documentation_url"`
	}
	if json.Unmarshal(data, &e) != nil {
		return string(data)
	}
	if strings.HasSuffix(e.DocumentationURL, "secondary-rate-limits") || strings.HasSuffix(e.DocumentationURL, "#abuse-rate-limits") {
		return e.Message + " (secondary rate limit)"
	}
	return e.Message
}

// transientNetError reports whether a transport error is worth another
// attempt: a timeout, a refused or reset connection, an unexpected EOF.
func transientNetError(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	var oe *net.OpError
	if errors.As(err, &oe) {
		return true
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return true
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return transientNetError(ue.Err)
	}
	// A closed idle connection, an HTTP/2 stream reset and their kin come
	// as plain errors from net/http; retrying them is what GitHub's own
	// clients do.
	s := err.Error()
	return strings.Contains(s, "connection reset") || strings.Contains(s, "broken pipe") ||
		strings.Contains(s, "server closed") || strings.Contains(s, "connection refused")
}

// backoff is baseDelay doubled per attempt after the first, capped at
// maxDelay.
func backoff(base, max time.Duration, attempt int) time.Duration {
	d := base
	for i := 1; i < attempt && d < max; i++ {
		d *= 2
	}
	if d > max {
		d = max
	}
	return d
}

func headerInt(h http.Header, key string) int {
	v := h.Get(key)
	if v == "" {
		return -1
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return -1
	}
	return n
}

// realWait waits d on a real timer, or until ctx ends.
func realWait(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// authTransport adds credentials to the requests for the API host, and
// sends those for any other host (the archive host a tarball redirects to,
// whose URL carries its own token) without them, so a credential never
// leaves the API host.
type authTransport struct {
	apiHost string
	next    http.RoundTripper
	token   tokenSource
}

// tokenSource gives the credential for a request; fresh says it was just
// fetched (a 401 on a fresh token is final).
type tokenSource interface {
	token(ctx context.Context) (tok string, fresh bool, err error)
	invalidate(tok string)
}

// RoundTrip implements http.RoundTripper.
func (t *authTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !strings.EqualFold(req.URL.Host, t.apiHost) {
		r := req.Clone(req.Context())
		r.Header.Del("Authorization")
		return t.next.RoundTrip(r)
	}
	for try := 0; ; try++ {
		tok, fresh, err := t.token.token(req.Context())
		if err != nil {
			if req.Body != nil {
				_ = req.Body.Close()
			}
			return nil, err
		}
		r := req.Clone(req.Context())
		if try > 0 && req.Body != nil && req.Body != http.NoBody {
			if req.GetBody == nil {
				return nil, errors.New("replaying a request body after a refused token: the request cannot be replayed")
			}
			b, err := req.GetBody()
			if err != nil {
				return nil, fmt.Errorf("replaying a request body after a refused token: %w", err)
			}
			r.Body = b
		}
		r.Header.Set("Authorization", "token "+tok)
		resp, err := t.next.RoundTrip(r)
		if err != nil || resp.StatusCode != http.StatusUnauthorized || fresh || try > 0 {
			return resp, err
		}
		// A cached token the host no longer accepts (revoked, or expired by
		// the host's clock before ours): drop it and try once with a new one.
		t.token.invalidate(tok)
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		_ = resp.Body.Close()
		if req.Body != nil && req.Body != http.NoBody && req.GetBody == nil {
			return nil, errors.New("the host refused a cached token and the request cannot be replayed")
		}
	}
}

// staticToken is a plain token (GITHUB_TOKEN or a personal token).
type staticToken string

func (s staticToken) token(context.Context) (string, bool, error) { return string(s), true, nil }
func (s staticToken) invalidate(string)                           {}
