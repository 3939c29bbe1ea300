package github

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	gh "github.com/google/go-github/v88/github"

	"github.com/gapless-dev/gapless/codehost"
)

// Error is a call the host refused or did not answer. It wraps the
// codehost sentinel its status means (Kind) and the underlying cause.
// Its text names the route, the repository and the status, never a
// credential or a URL (an archive URL carries a token).
type Error struct {
	Route   string // the route template, e.g. "PUT /repos/{owner}/{repo}/pulls/{n}/merge"
	Repo    string // owner/name, "" for App-level calls
	Status  int    // the HTTP status, 0 when no response came
	Message string // GitHub's message, or what went wrong
	// RetryAfter is how long the host asked to wait (Retry-After, or a
	// primary rate limit's reset), 0 when it did not say.
	RetryAfter time.Duration
	// Kind is the codehost sentinel the error wraps.
	Kind  error
	cause error
}

// Error implements error.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("github: ")
	b.WriteString(e.Route)
	if e.Repo != "" {
		b.WriteString(" on ")
		b.WriteString(e.Repo)
	}
	if e.Status != 0 {
		fmt.Fprintf(&b, ": %d %s", e.Status, http.StatusText(e.Status))
	}
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	if e.RetryAfter > 0 {
		fmt.Fprintf(&b, " (retry after %s)", e.RetryAfter.Round(time.Second))
	}
	b.WriteString(" (")
	b.WriteString(strings.TrimPrefix(e.Kind.Error(), "codehost: "))
	b.WriteString(")")
	return b.String()
}

// Unwrap returns the sentinel and the cause.
func (e *Error) Unwrap() []error {
	if e.cause == nil {
		return []error{e.Kind}
	}
	return []error{e.Kind, e.cause}
}

// refuse is an error the client raises before any call: the request is
// invalid as given.
func refuse(route, repo, format string, args ...any) error {
	return &Error{Route: route, Repo: repo, Message: fmt.Sprintf(format, args...), Kind: codehost.ErrInvalid}
}

// classify turns what go-github returned for one call into an *Error
// wrapping the sentinel its status means:
//
//	404, 410 -> ErrNotFound; 409 -> ErrConflict; 405 -> ErrNotMergeable;
//	422 and other 4xx -> ErrInvalid; 401, and 403 that is no rate limit ->
//	ErrUnauthorized; 429, rate limits, 5xx, transport errors and
//	unreadable answers -> ErrUnavailable (the transport already retried
//	them). The caller's own context ending is returned as its error.
func classify(ctx context.Context, now time.Time, route, repo string, resp *gh.Response, err error) error {
	if err == nil {
		return nil
	}
	var own *Error
	if errors.As(err, &own) {
		// Raised beneath go-github (an installation token the App could
		// not get): keep its kind, name this call.
		msg := "the installation token (" + own.Route + ")"
		if own.Status != 0 {
			msg += fmt.Sprintf(" answered %d %s", own.Status, http.StatusText(own.Status))
		}
		if own.Message != "" {
			msg += ": " + own.Message
		}
		return &Error{Route: route, Repo: repo, Message: msg, RetryAfter: own.RetryAfter, Kind: own.Kind, cause: own}
	}
	if ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return fmt.Errorf("github: %s on %s: %w", route, repo, ctx.Err())
	}

	var (
		status  int
		header  http.Header
		message string
	)
	var er *gh.ErrorResponse
	var rl *gh.RateLimitError
	var ab *gh.AbuseRateLimitError
	var rd *gh.RedirectionError
	switch {
	case errors.As(err, &rl):
		status, message = statusOf(rl.Response), rl.Message
		header = headerOf(rl.Response)
	case errors.As(err, &ab):
		status, message = statusOf(ab.Response), ab.Message
		header = headerOf(ab.Response)
	case errors.As(err, &er):
		status, message = statusOf(er.Response), er.Message
		header = headerOf(er.Response)
		if len(er.Errors) > 0 {
			var details []string
			for _, d := range er.Errors {
				s := d.Message
				if s == "" {
					s = strings.TrimSpace(d.Field + " " + d.Code)
				}
				if s != "" {
					details = append(details, s)
				}
			}
			if len(details) > 0 {
				message += " (" + strings.Join(details, "; ") + ")"
			}
		}
	case errors.As(err, &rd):
		status, message = rd.StatusCode, "unexpected redirect"
	default:
		if resp != nil && resp.Response != nil {
			status = resp.StatusCode
			header = resp.Header
		}
		message, err = describe(err)
		if status >= 200 && status < 300 {
			message = "unreadable answer: " + message
			status = 0
		}
	}
	e := &Error{Route: route, Repo: repo, Status: status, Message: message, cause: err}
	if header != nil {
		if ra, ok := retryAfter(header, now); ok {
			e.RetryAfter = ra
		}
	}
	limited, reset, hasReset := false, time.Time{}, false
	if header != nil {
		limited, reset, hasReset = rateLimit(status, header, message)
	}
	if hasReset && e.RetryAfter == 0 {
		if d := reset.Sub(now); d > 0 {
			e.RetryAfter = d
		}
	}
	switch {
	case status == 0:
		e.Kind = codehost.ErrUnavailable
	case limited:
		e.Kind = codehost.ErrUnavailable
	case status == http.StatusNotFound || status == http.StatusGone:
		e.Kind = codehost.ErrNotFound
	case status == http.StatusConflict:
		e.Kind = codehost.ErrConflict
	case status == http.StatusMethodNotAllowed:
		e.Kind = codehost.ErrNotMergeable
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		e.Kind = codehost.ErrUnauthorized
	case status == http.StatusTooManyRequests || status >= 500:
		e.Kind = codehost.ErrUnavailable
	case status >= 400:
		e.Kind = codehost.ErrInvalid
	default:
		e.Kind = codehost.ErrUnavailable
	}
	return e
}

// describe returns an error's text without any URL (a redirect's URL may
// carry a token), and the error to keep as the cause.
func describe(err error) (string, error) {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Op + ": " + ue.Err.Error(), ue.Err
	}
	return err.Error(), err
}

func statusOf(r *http.Response) int {
	if r == nil {
		return 0
	}
	return r.StatusCode
}

func headerOf(r *http.Response) http.Header {
	if r == nil {
		return nil
	}
	return r.Header
}
