package githubfake

import (
	"net/http"
	"net/url"
	"time"
)

// AnyRoute matches every route in Fail and Latency.
const AnyRoute = "*"

// fault is one Fail: the next n requests of route answer status.
type fault struct {
	route  string
	status int
	left   int
	// lost: the request is answered 200 with the resource as it stands,
	// and nothing changes (LoseCheckRunUpdates).
	lost bool
}

// LoseCheckRunUpdates makes the next n check-run updates (PATCH
// /repos/{owner}/{repo}/check-runs/{id}) answer 200 with the check run as
// it stands, changing nothing: a write GitHub acknowledged that a reader
// does not see (another writer won, or a replica lags). Only a read-back
// tells it from a write that landed. Queued with Fail's faults, in order.
func (f *Fake) LoseCheckRunUpdates(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if n > 0 {
		f.faults = append(f.faults, &fault{route: RouteUpdateCheckRun, status: http.StatusOK, left: n, lost: true})
	}
}

// Fail makes the next n requests matching route (a Route* name such as
// "PATCH /repos/{owner}/{repo}/check-runs/{id}", or AnyRoute) answer
// status before anything else happens (nothing is changed), with GitHub's
// error JSON:
//
//   - 403 and 429: the secondary-rate-limit body (its documentation_url
//     ends in "secondary-rate-limits", what go-github reads as an
//     AbuseRateLimitError) and Retry-After: 1, as GitHub answers when a
//     secondary limit is hit (docs: Rate limits for the REST API);
//   - 5xx: a plain {"message": "<status text>"} error;
//   - anything else: {"message": "<status text>"}.
//
// Faults queue: Fail(r, 502, 1) then Fail(r, 429, 1) answers 502 and then
// 429. An unknown route is misuse.
func (f *Fake) Fail(route string, status int, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if route != AnyRoute && f.routes[route] == nil {
		f.misusef("Fail: unknown route %q (use a Route* constant)", route)
		return
	}
	if n <= 0 {
		return
	}
	f.faults = append(f.faults, &fault{route: route, status: status, left: n})
}

// takeFault consumes the first queued fault matching route. Call with
// f.mu held.
func (f *Fake) takeFault(route string) *fault {
	for i, fl := range f.faults {
		if fl.route != route && fl.route != AnyRoute {
			continue
		}
		fl.left--
		if fl.left <= 0 {
			f.faults = append(f.faults[:i], f.faults[i+1:]...)
		}
		return fl
	}
	return nil
}

// faultResponse writes an injected fault's answer.
func (f *Fake) faultResponse(c *call, status int, reqID string) {
	switch {
	case status == http.StatusForbidden || status == http.StatusTooManyRequests:
		c.errorDoc(status, "You have exceeded a secondary rate limit. Please wait a few minutes before you try again. "+
			"If you reach out to GitHub Support for help, please include the request ID "+reqID+".", secondaryRateLimitDocs)
		c.header.Set("Retry-After", "1")
	default:
		text := http.StatusText(status)
		if text == "" {
			text = "Error"
		}
		c.errorf(status, text)
	}
}

// Down makes every API request answer 503 while down is true (GitHub is
// down); webhooks the control methods cause are still delivered.
func (f *Fake) Down(down bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down = down
}

// Latency makes every request matching route (or AnyRoute) wait d on the
// fake clock before it is handled: with a fake clock the request completes
// only after the test advances the clock by d (each waiting request is one
// waiter for BlockUntilContext). d <= 0 removes it. A client that gives up
// while waiting changes nothing.
func (f *Fake) Latency(route string, d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if route != AnyRoute && f.routes[route] == nil {
		f.misusef("Latency: unknown route %q (use a Route* constant)", route)
		return
	}
	if d <= 0 {
		delete(f.latency, route)
		return
	}
	f.latency[route] = d
}

// latencyFor is the wait of a route: its own, else AnyRoute's. Call with
// f.mu held.
func (f *Fake) latencyFor(route string) time.Duration {
	if d, ok := f.latency[route]; ok && route != "" {
		return d
	}
	return f.latency[AnyRoute]
}

// Request is one logged API request.
type Request struct {
	Method string
	Path   string
	// Route is the Route* name it matched; empty for an unknown route.
	Route  string
	Query  url.Values
	Status int
	// At is when it arrived, on the fake clock.
	At   time.Time
	Body []byte
	// Actor is the login it authenticated as ("<slug>[bot]" for the App),
	// empty when it did not.
	Actor     string
	RequestID string
}

// Log returns every request answered so far, in the order answered.
func (f *Fake) Log() []Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Request(nil), f.log...)
}

// Requests returns the logged requests that matched route.
func (f *Fake) Requests(route string) []Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []Request
	for _, r := range f.log {
		if r.Route == route {
			out = append(out, r)
		}
	}
	return out
}
