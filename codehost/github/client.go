// Package github is the GitHub implementation of codehost.Host, on
// go-github (v88) and ghinstallation (the App's JWT).
//
// It authenticates as a GitHub App (an installation token per repository,
// found with GET /repos/{owner}/{repo}/installation, cached and fetched
// again a minute before it expires on the injected clock) or with a plain
// token (GitHub Actions' GITHUB_TOKEN, or a personal token). Every list is
// read across all its pages, 100 a page. Transient failures (5xx, 429,
// rate limits, timeouts, connection errors) are retried with exponential
// backoff beneath go-github, honouring Retry-After; what stays failed wraps
// codehost.ErrUnavailable, and every other refusal the codehost sentinel
// its status means (see Error). Credentials never appear in errors or logs.
package github

import (
	"context"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/bradleyfalzon/ghinstallation/v2"
	gh "github.com/google/go-github/v88/github"
	"github.com/jonboulle/clockwork"

	"github.com/gapless-dev/gapless/codehost"
	"github.com/gapless-dev/gapless/internal/logkey"
)

// DefaultAPIURL is github.com's REST API.
const DefaultAPIURL = "https://api.github.com/"

// DefaultMaxFilesBytes caps the unpacked size of a commit's files.
const DefaultMaxFilesBytes int64 = 200 << 20

// Config configures a Client. Exactly one of App (AppID with PrivateKey)
// or Token is set.
type Config struct {
	// APIURL is the REST API's base: "" for https://api.github.com/, or
	// GitHub Enterprise Server's https://ghe.example.com/api/v3/. It is
	// used as given (a fake served at its root works).
	APIURL string

	// AppID and PrivateKey (PEM) authenticate as a GitHub App: each
	// repository's installation token is found with
	// GET /repos/{owner}/{repo}/installation, cached, and fetched again a
	// minute before it expires.
	AppID      int64
	PrivateKey []byte
	// InstallationID, when set, is the installation used for every
	// repository (no lookup).
	InstallationID int64

	// Token is a plain token (GitHub Actions' GITHUB_TOKEN, or a personal
	// token), used when AppID is 0.
	Token string

	// HTTPClient's transport (and timeout) carry the requests; nil is
	// http.DefaultTransport with no timeout.
	HTTPClient *http.Client

	// MaxAttempts (default 6) bounds the attempts of one request; the
	// waits between them grow from BaseDelay (500ms) doubling up to
	// MaxDelay (20s). Retry-After is honoured, and a primary rate limit's
	// X-RateLimit-Reset when it comes within MaxDelay; a longer wait is
	// not waited but returned as an error wrapping ErrUnavailable.
	MaxAttempts int
	BaseDelay   time.Duration
	MaxDelay    time.Duration
	// RequestTimeout bounds how long one attempt waits for its response's
	// headers, on Clock (default 30s); an attempt that times out is
	// retried like a connection error. A body (a tarball) then reads
	// under the caller's context alone.
	RequestTimeout time.Duration
	// Wait waits d or until ctx ends; nil is a real timer.
	Wait func(ctx context.Context, d time.Duration) error
	// Clock tells the time for token expiry and rate-limit resets; nil is
	// the real clock.
	Clock clockwork.Clock

	// MaxFilesBytes caps the unpacked size of Files (default 200 MiB).
	MaxFilesBytes int64

	// Observe, when set, is called once per HTTP request made, retries
	// included (serve turns it into metrics).
	Observe func(Call)
	// Logger receives retries and token refreshes at debug level; nil
	// discards.
	Logger *slog.Logger
}

// Client is a codehost.Host on GitHub's REST API. It is safe for
// concurrent use.
type Client struct {
	cfg      Config
	clock    clockwork.Clock
	log      *slog.Logger
	base     *url.URL
	bare     http.RoundTripper // retries and observes; no credentials
	timeout  time.Duration
	maxFiles int64

	// Token mode.
	tokenGH *gh.Client

	// App mode.
	appGH   *gh.Client // authenticated with the App's JWT
	mu      sync.Mutex
	repoIns map[string]int64     // lower-cased owner/name -> installation
	insts   map[int64]*gh.Client // installation -> its client
	slug    string               // the App's slug, once read
}

var _ codehost.Host = (*Client)(nil)

// New validates cfg and returns a Client. It makes no request.
func New(cfg Config) (*Client, error) {
	app := cfg.AppID != 0 || len(cfg.PrivateKey) > 0 || cfg.InstallationID != 0
	switch {
	case app && cfg.Token != "":
		return nil, errors.New("github: configure either an App (app id and private key) or a token, not both")
	case app && cfg.AppID <= 0:
		return nil, errors.New("github: an App needs its app id")
	case app && len(cfg.PrivateKey) == 0:
		return nil, errors.New("github: an App needs its private key")
	case !app && cfg.Token == "":
		return nil, errors.New("github: no credentials: configure an App (app id and private key) or a token")
	}
	if cfg.InstallationID < 0 {
		return nil, errors.New("github: the installation id must be positive")
	}
	if cfg.MaxAttempts < 0 || cfg.BaseDelay < 0 || cfg.MaxDelay < 0 || cfg.MaxFilesBytes < 0 || cfg.RequestTimeout < 0 {
		return nil, errors.New("github: retry settings and the files cap must not be negative")
	}
	if cfg.MaxAttempts == 0 {
		cfg.MaxAttempts = 6
	}
	if cfg.BaseDelay == 0 {
		cfg.BaseDelay = 500 * time.Millisecond
	}
	if cfg.MaxDelay == 0 {
		cfg.MaxDelay = 20 * time.Second
	}
	if cfg.MaxFilesBytes == 0 {
		cfg.MaxFilesBytes = DefaultMaxFilesBytes
	}
	if cfg.RequestTimeout == 0 {
		cfg.RequestTimeout = 30 * time.Second
	}
	if cfg.Wait == nil {
		cfg.Wait = realWait
	}
	c := &Client{cfg: cfg, clock: cfg.Clock, log: cfg.Logger, maxFiles: cfg.MaxFilesBytes,
		repoIns: map[string]int64{}, insts: map[int64]*gh.Client{}}
	if c.clock == nil {
		c.clock = clockwork.NewRealClock()
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}

	raw := cfg.APIURL
	if raw == "" {
		raw = DefaultAPIURL
	}
	if !strings.HasSuffix(raw, "/") {
		raw += "/"
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("github: the API URL %q is not an http(s) URL", cfg.APIURL)
	}
	c.base = u

	baseTr := http.DefaultTransport
	if cfg.HTTPClient != nil {
		if cfg.HTTPClient.Transport != nil {
			baseTr = cfg.HTTPClient.Transport
		}
		c.timeout = cfg.HTTPClient.Timeout
	}
	c.bare = &retryTransport{base: baseTr, basePath: u.Path, clock: c.clock, wait: cfg.Wait,
		maxAttempts: cfg.MaxAttempts, baseDelay: cfg.BaseDelay, maxDelay: cfg.MaxDelay,
		headerTimeout: cfg.RequestTimeout, observe: cfg.Observe, log: c.log}

	if !app {
		c.tokenGH, err = c.newGH(&authTransport{apiHost: u.Host, next: c.bare, token: staticToken(cfg.Token)})
		if err != nil {
			return nil, err
		}
		return c, nil
	}

	if err := checkPrivateKey(cfg.PrivateKey); err != nil {
		return nil, err
	}
	atr, err := ghinstallation.NewAppsTransport(c.bare, cfg.AppID, cfg.PrivateKey)
	if err != nil {
		// ghinstallation's text says only that parsing failed; never echo
		// the key.
		return nil, errors.New("github: the App's private key is not a valid RSA private key in PEM")
	}
	atr.BaseURL = strings.TrimSuffix(u.String(), "/")
	c.appGH, err = c.newGH(&appOnlyTransport{apiHost: u.Host, apps: atr, next: c.bare})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// checkPrivateKey refuses a key that is not an RSA private key in PEM,
// naming what is wrong and never the key.
func checkPrivateKey(key []byte) error {
	block, _ := pem.Decode(key)
	if block == nil {
		return errors.New("github: the App's private key is not PEM (expected -----BEGIN RSA PRIVATE KEY-----)")
	}
	if _, err := x509.ParsePKCS1PrivateKey(block.Bytes); err == nil {
		return nil
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return fmt.Errorf("github: the App's private key is not a PKCS#1 or PKCS#8 private key (PEM block %q)", block.Type)
	}
	if _, ok := k.(*rsa.PrivateKey); !ok {
		return errors.New("github: the App's private key is not an RSA key (GitHub Apps sign with RS256)")
	}
	return nil
}

// appOnlyTransport signs requests to the API host with the App's JWT and
// sends any other host's requests bare.
type appOnlyTransport struct {
	apiHost string
	apps    *ghinstallation.AppsTransport
	next    http.RoundTripper
}

// RoundTrip implements http.RoundTripper.
func (t *appOnlyTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !strings.EqualFold(req.URL.Host, t.apiHost) {
		return t.next.RoundTrip(req)
	}
	// ghinstallation's AppsTransport sets headers on the request it is
	// given; give it a copy (the RoundTripper contract).
	return t.apps.RoundTrip(req.Clone(req.Context()))
}

func (c *Client) newGH(tr http.RoundTripper) (*gh.Client, error) {
	base := c.base.String()
	opts := []gh.ClientOptionsFunc{
		gh.WithHTTPClient(&http.Client{Transport: tr, Timeout: c.timeout}),
		gh.WithURLs(&base, &base),
		// go-github's own rate-limit memory refuses calls on the wall
		// clock; the retry transport handles limits on the injected one.
		gh.WithDisableRateLimitCheck(),
		gh.WithUserAgent("gapless"),
	}
	g, err := gh.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("github: making the API client: %w", err)
	}
	return g, nil
}

// installationTokens caches one installation's token and fetches a new one
// (with the App's JWT) when none is cached or the cached one is within a
// minute of its expiry on the client's clock.
type installationTokens struct {
	c       *Client
	id      int64
	mu      sync.Mutex
	tok     string
	expires time.Time
}

func (s *installationTokens) token(ctx context.Context) (string, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tok != "" && s.c.clock.Now().Before(s.expires.Add(-time.Minute)) {
		return s.tok, false, nil
	}
	ctx = withRoute(ctx, RouteInstallationToken)
	t, resp, err := s.c.appGH.Apps.CreateInstallationToken(ctx, s.id, nil)
	if err != nil {
		e := classify(ctx, s.c.clock.Now(), RouteInstallationToken, "", resp, err)
		if errors.Is(e, codehost.ErrNotFound) && s.c.cfg.InstallationID == 0 {
			// Uninstalled (or reinstalled under a new id): look the
			// repositories up again next time.
			s.c.forgetInstallation(s.id)
		}
		return "", false, e
	}
	if t.GetToken() == "" {
		return "", false, &Error{Route: RouteInstallationToken, Message: "the answer carried no token", Kind: codehost.ErrUnavailable}
	}
	s.tok, s.expires = t.GetToken(), t.GetExpiresAt().Time
	if s.expires.IsZero() {
		s.expires = s.c.clock.Now().Add(time.Hour)
	}
	s.c.log.DebugContext(ctx, "github: installation token fetched", logkey.Route, RouteInstallationToken)
	return s.tok, true, nil
}

func (s *installationTokens) invalidate(tok string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tok == tok {
		s.tok = ""
	}
}

// splitRepo splits owner/name, refusing anything else.
func splitRepo(route, repo string) (string, string, error) {
	owner, name, ok := strings.Cut(repo, "/")
	if !ok || owner == "" || name == "" || strings.Contains(name, "/") ||
		strings.ContainsAny(repo, " ?#%\\") || strings.Contains(repo, "..") {
		return "", "", refuse(route, repo, "the repository %q is not owner/name", repo)
	}
	return owner, name, nil
}

// forRepo returns the API client for a repository: the token client, or
// its installation's (looked up once and cached).
func (c *Client) forRepo(ctx context.Context, route, repo string) (*gh.Client, error) {
	owner, name, err := splitRepo(route, repo)
	if err != nil {
		return nil, err
	}
	if c.tokenGH != nil {
		return c.tokenGH, nil
	}
	key := strings.ToLower(repo)
	c.mu.Lock()
	id, ok := c.repoIns[key]
	if !ok && c.cfg.InstallationID != 0 {
		id, ok = c.cfg.InstallationID, true
	}
	c.mu.Unlock()
	if !ok {
		ctx := withRoute(ctx, RouteRepoInstallation)
		inst, resp, err := c.appGH.Apps.GetRepositoryInstallation(ctx, owner, name)
		if err != nil {
			e := classify(ctx, c.clock.Now(), RouteRepoInstallation, repo, resp, err)
			if errors.Is(e, codehost.ErrNotFound) {
				return nil, fmt.Errorf("github: the App is not installed on %s, or the repository does not exist: %w", repo, e)
			}
			return nil, e
		}
		if inst.GetID() == 0 {
			return nil, &Error{Route: RouteRepoInstallation, Repo: repo, Message: "the answer carried no installation id", Kind: codehost.ErrUnavailable}
		}
		id = inst.GetID()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.repoIns[key] = id
	if g, ok := c.insts[id]; ok {
		return g, nil
	}
	tokens := &installationTokens{c: c, id: id}
	g, err := c.newGH(&authTransport{apiHost: c.base.Host, next: c.bare, token: tokens})
	if err != nil {
		return nil, err
	}
	c.insts[id] = g
	return g, nil
}

// forgetInstallation drops an installation and the repositories found on
// it from the caches.
func (c *Client) forgetInstallation(id int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.insts, id)
	for repo, iid := range c.repoIns {
		if iid == id {
			delete(c.repoIns, repo)
		}
	}
}

// AppSlug returns the App's slug (GET /app, read once); "" in token mode.
func (c *Client) AppSlug(ctx context.Context) (string, error) {
	if c.appGH == nil {
		return "", nil
	}
	c.mu.Lock()
	slug := c.slug
	c.mu.Unlock()
	if slug != "" {
		return slug, nil
	}
	ctx = withRoute(ctx, RouteApp)
	app, resp, err := c.appGH.Apps.Get(ctx, "")
	if err != nil {
		return "", classify(ctx, c.clock.Now(), RouteApp, "", resp, err)
	}
	if app.GetSlug() == "" {
		return "", &Error{Route: RouteApp, Message: "the answer carried no slug", Kind: codehost.ErrUnavailable}
	}
	c.mu.Lock()
	c.slug = app.GetSlug()
	c.mu.Unlock()
	return app.GetSlug(), nil
}

// do runs one API call (its retries happen beneath go-github) and
// classifies its error.
func (c *Client) do(ctx context.Context, route, repo string, call func(ctx context.Context) (*gh.Response, error)) error {
	ctx = withRoute(ctx, route)
	resp, err := call(ctx)
	return classify(ctx, c.clock.Now(), route, repo, resp, err)
}

// pages reads every page of a list, 100 a page, following the
// Link rel="next" page numbers until there is none.
func pages[T any](ctx context.Context, c *Client, route, repo string, list func(ctx context.Context, opt gh.ListOptions) ([]T, *gh.Response, error)) ([]T, error) {
	var all []T
	seen := map[int]bool{}
	opt := gh.ListOptions{PerPage: 100, Page: 1}
	for {
		var items []T
		var next int
		err := c.do(ctx, route, repo, func(ctx context.Context) (*gh.Response, error) {
			got, resp, err := list(ctx, opt)
			items = got
			if resp != nil {
				next = resp.NextPage
			}
			return resp, err
		})
		if err != nil {
			return nil, err
		}
		all = append(all, items...)
		seen[opt.Page] = true
		if next == 0 {
			return all, nil
		}
		if seen[next] {
			return nil, &Error{Route: route, Repo: repo, Message: fmt.Sprintf("the pages loop: page %d links back to page %d", opt.Page, next), Kind: codehost.ErrUnavailable}
		}
		opt.Page = next
	}
}
