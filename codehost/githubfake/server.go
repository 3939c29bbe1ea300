package githubfake

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The routes the fake serves, named as GitHub's REST docs name them (with
// {n} for a pull request or issue number, {id} for any other id): the
// names Fail, Latency, Requests and Request.Route use.
const (
	RouteApp                   = "GET /app"
	RouteRepoInstallation      = "GET /repos/{owner}/{repo}/installation"
	RouteAccessToken           = "POST /app/installations/{id}/access_tokens"
	RouteRepo                  = "GET /repos/{owner}/{repo}"
	RouteGetPull               = "GET /repos/{owner}/{repo}/pulls/{n}"
	RouteListPulls             = "GET /repos/{owner}/{repo}/pulls"
	RouteMergePull             = "PUT /repos/{owner}/{repo}/pulls/{n}/merge"
	RouteTarball               = "GET /repos/{owner}/{repo}/tarball/{ref}"
	RouteCodeload              = "GET /_codeload/{owner}/{repo}/legacy.tar.gz/{ref}"
	RouteGetCommit             = "GET /repos/{owner}/{repo}/commits/{ref}"
	RouteCreateCheckRun        = "POST /repos/{owner}/{repo}/check-runs"
	RouteUpdateCheckRun        = "PATCH /repos/{owner}/{repo}/check-runs/{id}"
	RouteGetCheckRun           = "GET /repos/{owner}/{repo}/check-runs/{id}"
	RouteListCheckRunsForRef   = "GET /repos/{owner}/{repo}/commits/{ref}/check-runs"
	RouteListComments          = "GET /repos/{owner}/{repo}/issues/{n}/comments"
	RouteCreateComment         = "POST /repos/{owner}/{repo}/issues/{n}/comments"
	RouteGetComment            = "GET /repos/{owner}/{repo}/issues/comments/{id}"
	RouteEditComment           = "PATCH /repos/{owner}/{repo}/issues/comments/{id}"
	RouteCreateCommentReaction = "POST /repos/{owner}/{repo}/issues/comments/{id}/reactions"
	RoutePermission            = "GET /repos/{owner}/{repo}/collaborators/{user}/permission"
	RouteBranch                = "GET /repos/{owner}/{repo}/branches/{branch}"
	RouteBranchProtection      = "GET /repos/{owner}/{repo}/branches/{branch}/protection"
)

// Wire constants of GitHub's REST API.
const (
	docsBase                  = "https://docs.github.com/rest"
	secondaryRateLimitDocs    = "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits"
	primaryRateLimitDocs      = "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-rate-limits"
	protectedBranchesHelp     = "https://docs.github.com/articles/about-protected-branches"
	githubMediaType           = "github.v3; format=json"
	githubAPIVersion          = "2022-11-28"
	contentTypeJSON           = "application/json; charset=utf-8"
	mergeNotMergeable         = "Pull Request is not mergeable"
	mergeHeadModified         = "Head branch was modified. Review and try the merge again."
	notFoundMessage           = "Not Found"
	serviceUnavailableMessage = "Service Unavailable"
	resourceNotAccessible     = "Resource not accessible by integration"
	defaultPerPage            = 30
	maxPerPage                = 100
	maxRequestBody            = 32 << 20
)

// authMode is how a route authenticates.
type authMode int

const (
	authToken authMode = iota // an installation or personal token
	authJWT                   // the App's JWT
	authArc                   // an archive link's token in the query
)

// route is one REST route.
type route struct {
	name   string // "METHOD /canonical/path"
	method string
	path   string // canonical path with {wildcards}
	// rest: the last wildcard takes the rest of the path (a ref with
	// slashes).
	rest bool
	// muxPath is the ServeMux pattern it is registered under when it
	// differs from path (two canonical paths that ServeMux finds in
	// conflict share one and are told apart here).
	muxPath string
	auth    authMode
	doc     string // documentation_url of its errors
	h       func(*call)
}

// call is one request being answered.
type call struct {
	f      *Fake
	r      *http.Request
	rt     *route
	params map[string]string
	body   []byte
	actor  *actor
	repo   *repo

	status int
	header http.Header
	out    []byte
	events []*outgoing
	// lose: answer as if the write landed, and change nothing.
	lose bool
}

func (c *call) param(name string) string { return c.params[name] }

// json answers status with v as JSON.
func (c *call) json(status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		c.errorf(http.StatusInternalServerError, "githubfake: encoding the response: "+err.Error())
		return
	}
	c.status, c.out = status, b
}

// errorBody is GitHub's error JSON.
type errorBody struct {
	Message          string       `json:"message"`
	Errors           []fieldError `json:"errors,omitempty"`
	DocumentationURL string       `json:"documentation_url"`
	Status           string       `json:"status"`
}

type fieldError struct {
	Resource string `json:"resource"`
	Code     string `json:"code"`
	Field    string `json:"field"`
	Message  string `json:"message"`
}

// errorf answers status with GitHub's error JSON:
// {"message", "documentation_url", "status"}.
func (c *call) errorf(status int, message string) {
	doc := docsBase
	if c.rt != nil && c.rt.doc != "" {
		doc = c.rt.doc
	}
	c.errorDoc(status, message, doc)
}

func (c *call) errorDoc(status int, message, doc string) {
	b, _ := json.Marshal(errorBody{Message: message, DocumentationURL: doc, Status: strconv.Itoa(status)})
	c.status, c.out = status, b
}

// invalid answers 422 "Validation Failed" with one field error, GitHub's
// shape for a refused field.
func (c *call) invalid(resource, code, field, message string) {
	doc := docsBase
	if c.rt != nil && c.rt.doc != "" {
		doc = c.rt.doc
	}
	b, _ := json.Marshal(errorBody{
		Message:          "Validation Failed",
		Errors:           []fieldError{{Resource: resource, Code: code, Field: field, Message: message}},
		DocumentationURL: doc,
		Status:           "422",
	})
	c.status, c.out = http.StatusUnprocessableEntity, b
}

// decode reads the request body as JSON into v; on malformed JSON it
// answers 400 "Problems parsing JSON" as GitHub does and returns false.
func (c *call) decode(v any) bool {
	if len(strings.TrimSpace(string(c.body))) == 0 {
		return true
	}
	if err := json.Unmarshal(c.body, v); err != nil {
		c.errorf(http.StatusBadRequest, "Problems parsing JSON")
		return false
	}
	return true
}

// routeTable lists every route the fake serves.
func (f *Fake) routeTable() []*route {
	const (
		pulls    = docsBase + "/pulls/pulls"
		checks   = docsBase + "/checks/runs"
		comments = docsBase + "/issues/comments"
	)
	issuesMux := "/repos/{owner}/{repo}/issues/{a}/{b}"
	return []*route{
		{name: RouteApp, auth: authJWT, doc: docsBase + "/apps/apps#get-the-authenticated-app", h: f.getApp},
		{name: RouteRepoInstallation, auth: authJWT, doc: docsBase + "/apps/apps#get-a-repository-installation-for-the-authenticated-app", h: f.getRepoInstallation},
		{name: RouteAccessToken, auth: authJWT, doc: docsBase + "/apps/apps#create-an-installation-access-token-for-an-app", h: f.createAccessToken},
		{name: RouteRepo, doc: docsBase + "/repos/repos#get-a-repository", h: f.getRepo},
		{name: RouteGetPull, doc: pulls + "#get-a-pull-request", h: f.getPull},
		{name: RouteListPulls, doc: pulls + "#list-pull-requests", h: f.listPulls},
		{name: RouteMergePull, doc: pulls + "#merge-a-pull-request", h: f.mergePull},
		{name: RouteTarball, rest: true, doc: docsBase + "/repos/contents#download-a-repository-archive-tar", h: f.tarballLink},
		{name: RouteCodeload, rest: true, auth: authArc, h: f.codeload},
		{name: RouteGetCommit, doc: docsBase + "/commits/commits#get-a-commit", h: f.getCommit},
		{name: RouteCreateCheckRun, doc: checks + "#create-a-check-run", h: f.createCheckRun},
		{name: RouteUpdateCheckRun, doc: checks + "#update-a-check-run", h: f.updateCheckRun},
		{name: RouteGetCheckRun, doc: checks + "#get-a-check-run", h: f.getCheckRun},
		{name: RouteListCheckRunsForRef, doc: checks + "#list-check-runs-for-a-git-reference", h: f.listCheckRuns},
		{name: RouteListComments, muxPath: issuesMux, doc: comments + "#list-issue-comments", h: f.listComments},
		{name: RouteCreateComment, muxPath: issuesMux, doc: comments + "#create-an-issue-comment", h: f.createComment},
		{name: RouteGetComment, muxPath: issuesMux, doc: comments + "#get-an-issue-comment", h: f.getComment},
		{name: RouteEditComment, muxPath: issuesMux, doc: comments + "#update-an-issue-comment", h: f.editComment},
		{name: RouteCreateCommentReaction, doc: docsBase + "/reactions/reactions#create-reaction-for-an-issue-comment", h: f.createReaction},
		{name: RoutePermission, doc: docsBase + "/collaborators/collaborators#get-repository-permissions-for-a-user", h: f.getPermission},
		{name: RouteBranch, doc: docsBase + "/branches/branches#get-a-branch", h: f.getBranch},
		{name: RouteBranchProtection, doc: docsBase + "/branches/branch-protection#get-branch-protection", h: f.getProtection},
	}
}

// buildMux registers the routes on a ServeMux (Go 1.22 patterns, without
// methods: a known path with another method answers GitHub's 404, not
// ServeMux's 405) and returns it with the routes by name.
func (f *Fake) buildMux() (*http.ServeMux, map[string]*route) {
	byName := map[string]*route{}
	byMux := map[string][]*route{}
	var order []string
	for _, rt := range f.routeTable() {
		rt.method, rt.path, _ = strings.Cut(rt.name, " ")
		byName[rt.name] = rt
		mp := rt.muxPath
		if mp == "" {
			mp = rt.path
			if rt.rest {
				mp = strings.TrimSuffix(mp, "}") + "...}"
			}
		}
		if _, seen := byMux[mp]; !seen {
			order = append(order, mp)
		}
		byMux[mp] = append(byMux[mp], rt)
	}
	mux := http.NewServeMux()
	for _, mp := range order {
		candidates := byMux[mp]
		// At the first segment where two paths differ, a literal wins
		// over a wildcard: issues/comments/{id} before issues/{n}/comments.
		sort.SliceStable(candidates, func(i, j int) bool {
			return literalFirst(candidates[i].path, candidates[j].path)
		})
		mux.HandleFunc(mp, func(w http.ResponseWriter, r *http.Request) { f.dispatch(candidates, w, r) })
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { f.serve(nil, nil, w, r) })
	return mux, byName
}

// literalFirst reports whether path a has a literal segment where b first
// has a wildcard.
func literalFirst(a, b string) bool {
	as, bs := strings.Split(a, "/"), strings.Split(b, "/")
	for i := 0; i < len(as) && i < len(bs); i++ {
		aw, bw := strings.HasPrefix(as[i], "{"), strings.HasPrefix(bs[i], "{")
		if aw != bw {
			return bw
		}
	}
	return false
}

// dispatch picks the candidate route whose method and canonical path
// match the request; none is GitHub's 404.
func (f *Fake) dispatch(candidates []*route, w http.ResponseWriter, r *http.Request) {
	segs := strings.Split(r.URL.EscapedPath(), "/")
	for _, rt := range candidates {
		if rt.method != r.Method {
			continue
		}
		if params, ok := matchPath(rt, segs); ok {
			f.serve(rt, params, w, r)
			return
		}
	}
	f.serve(nil, nil, w, r)
}

// matchPath matches escaped path segments against a route's canonical
// path and returns its wildcards, unescaped.
func matchPath(rt *route, segs []string) (map[string]string, bool) {
	pat := strings.Split(rt.path, "/")
	if len(segs) < len(pat) || (!rt.rest && len(segs) != len(pat)) {
		return nil, false
	}
	params := map[string]string{}
	for i, p := range pat {
		if strings.HasPrefix(p, "{") && strings.HasSuffix(p, "}") {
			raw := segs[i]
			if rt.rest && i == len(pat)-1 {
				raw = strings.Join(segs[i:], "/")
			}
			v, err := url.PathUnescape(raw)
			if err != nil || v == "" {
				return nil, false
			}
			params[p[1:len(p)-1]] = v
			continue
		}
		if p != segs[i] {
			return nil, false
		}
	}
	return params, true
}

// serve answers one request: GitHub down, latency, injected faults,
// authentication, the rate limit, then the route's handler, and logs it.
// rt is nil for an unknown route.
func (f *Fake) serve(rt *route, params map[string]string, w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxRequestBody))
	if err != nil {
		body = nil
	}
	c := &call{f: f, r: r, rt: rt, params: params, body: body, header: http.Header{}}
	reqID := fmt.Sprintf("%s:%s:%s:%s:%s", strings.ToUpper(randomHex(2)), strings.ToUpper(randomHex(3)),
		strings.ToUpper(randomHex(3)), strings.ToUpper(randomHex(3)), strings.ToUpper(randomHex(4)))
	name := ""
	if rt != nil {
		name = rt.name
	}

	f.mu.Lock()
	arrived := f.clock.Now()
	down := f.down
	delay := f.latencyFor(name)
	f.mu.Unlock()

	var rate map[string]string
	switch {
	case down:
		c.errorf(http.StatusServiceUnavailable, serviceUnavailableMessage)
	default:
		if delay > 0 && !f.wait(r, delay) {
			// The client gave up, or the fake closed, while it was slow.
			c.errorf(http.StatusServiceUnavailable, "githubfake: the request was abandoned during its injected latency")
			break
		}
		f.mu.Lock()
		rate = f.handle(c, reqID)
		f.mu.Unlock()
	}
	if rate == nil {
		f.mu.Lock()
		rate, _ = f.peekRate("anonymous", 60)
		f.mu.Unlock()
	}

	f.mu.Lock()
	login := ""
	if c.actor != nil {
		login = c.actor.login
	}
	f.log = append(f.log, Request{
		Method: r.Method, Path: r.URL.Path, Route: name, Query: r.URL.Query(),
		Status: c.status, At: arrived, Body: body, Actor: login, RequestID: reqID,
	})
	f.mu.Unlock()
	f.enqueue(c.events)

	h := w.Header()
	for k, v := range rate {
		h.Set(k, v)
	}
	h.Set("X-GitHub-Request-Id", reqID)
	h.Set("X-GitHub-Media-Type", githubMediaType)
	h.Set("X-GitHub-Api-Version-Selected", githubAPIVersion)
	if h.Get("Content-Type") == "" && c.header.Get("Content-Type") == "" {
		h.Set("Content-Type", contentTypeJSON)
	}
	for k, vs := range c.header {
		h[k] = vs
	}
	if c.out != nil && c.status != http.StatusFound {
		h.Set("Content-Length", strconv.Itoa(len(c.out)))
	}
	w.WriteHeader(c.status)
	if c.out != nil {
		_, _ = w.Write(c.out)
	}
}

// wait blocks for d on the fake clock; false when the client goes away or
// the fake closes first.
func (f *Fake) wait(r *http.Request, d time.Duration) bool {
	timer := f.clock.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.Chan():
		return true
	case <-r.Context().Done():
		return false
	case <-f.stop:
		return false
	}
}

// handle runs the faults, authentication, rate limit and handler of a
// request and returns its rate-limit headers. Call with f.mu held.
func (f *Fake) handle(c *call, reqID string) map[string]string {
	rt := c.rt
	if rt == nil {
		c.errorDoc(http.StatusNotFound, notFoundMessage, docsBase)
		return nil
	}
	if fl := f.takeFault(rt.name); fl != nil && !fl.lost {
		f.faultResponse(c, fl.status, reqID)
		return nil
	} else if fl != nil {
		// A lost update: the handler answers as it would, changing
		// nothing (see LoseCheckRunUpdates).
		c.lose = true
	}
	var rate map[string]string
	switch rt.auth {
	case authArc:
		rate, _ = f.peekRate("anonymous", 60)
	default:
		a, err := f.authenticate(c.r.Header.Get("Authorization"), rt.auth == authJWT)
		if err != nil {
			c.errorf(http.StatusUnauthorized, err.Error())
			rate, _ = f.countRate("anonymous", 60)
			return rate
		}
		c.actor = a
		var over bool
		rate, over = f.countRate(a.bucket, a.limit)
		if over {
			c.errorDoc(http.StatusForbidden, rateLimitMessage(a), primaryRateLimitDocs)
			return rate
		}
	}
	if owner, ok := c.params["owner"]; ok && rt.auth != authArc {
		r := f.lookupRepo(owner + "/" + c.params["repo"])
		if r == nil || (c.actor != nil && !f.canAccess(c.actor, r)) {
			c.errorf(http.StatusNotFound, notFoundMessage)
			return rate
		}
		c.repo = r
	}
	rt.h(c)
	if c.status == 0 {
		c.errorf(http.StatusInternalServerError, "githubfake: the handler of "+rt.name+" answered nothing")
	}
	return rate
}

// peekRate returns a bucket's rate-limit headers without counting.
func (f *Fake) peekRate(bucket string, limit int) (map[string]string, bool) {
	if f.rateLimit > 0 {
		limit = f.rateLimit
	}
	now := f.clock.Now()
	used, reset := 0, now.Add(time.Hour).Truncate(time.Second)
	if w := f.rate[bucket]; w != nil && now.Before(w.reset) {
		used, reset = w.used, w.reset
	}
	remaining := limit - used
	if remaining < 0 {
		remaining = 0
	}
	return map[string]string{
		"X-RateLimit-Limit":     strconv.Itoa(limit),
		"X-RateLimit-Remaining": strconv.Itoa(remaining),
		"X-RateLimit-Used":      strconv.Itoa(used),
		"X-RateLimit-Reset":     strconv.FormatInt(reset.Unix(), 10),
		"X-RateLimit-Resource":  "core",
	}, remaining == 0
}

// page is a parsed per_page/page pair.
type page struct{ perPage, page int }

// parsePage reads per_page (default 30, at most 100, as GitHub clamps it)
// and page (default 1).
func parsePage(q url.Values) page {
	p := page{perPage: defaultPerPage, page: 1}
	if v, err := strconv.Atoi(q.Get("per_page")); err == nil && v > 0 {
		p.perPage = v
	}
	if p.perPage > maxPerPage {
		p.perPage = maxPerPage
	}
	if v, err := strconv.Atoi(q.Get("page")); err == nil && v > 0 {
		p.page = v
	}
	return p
}

// window returns the [lo, hi) slice bounds of the page within total items.
func (p page) window(total int) (int, int) {
	lo := (p.page - 1) * p.perPage
	if lo > total {
		lo = total
	}
	hi := lo + p.perPage
	if hi > total {
		hi = total
	}
	return lo, hi
}

// link sets GitHub's RFC 5988 Link header for a paged list of total items:
// rel="prev", "next", "last", "first" in that order, each present only
// when it applies (no prev or first on page 1, no next or last on the last
// page), and none at all when everything fits on one page. Each URL is the
// request's with page set, the other query parameters kept in their order.
// (docs: Using pagination in the REST API.)
func (c *call) link(p page, total int) {
	last := (total + p.perPage - 1) / p.perPage
	if last < 1 {
		last = 1
	}
	if last == 1 && p.page == 1 {
		return
	}
	base := strings.TrimSuffix(c.f.URL(), "/") + c.r.URL.EscapedPath()
	at := func(n int) string {
		parts := []string{}
		replaced := false
		for _, kv := range strings.Split(c.r.URL.RawQuery, "&") {
			if kv == "" {
				continue
			}
			if k, _, _ := strings.Cut(kv, "="); k == "page" {
				if !replaced {
					parts = append(parts, "page="+strconv.Itoa(n))
					replaced = true
				}
				continue
			}
			parts = append(parts, kv)
		}
		if !replaced {
			parts = append(parts, "page="+strconv.Itoa(n))
		}
		return fmt.Sprintf("<%s?%s>", base, strings.Join(parts, "&"))
	}
	var rels []string
	if p.page > 1 {
		prev := p.page - 1
		if prev > last {
			prev = last
		}
		rels = append(rels, at(prev)+`; rel="prev"`)
	}
	if p.page < last {
		rels = append(rels, at(p.page+1)+`; rel="next"`, at(last)+`; rel="last"`)
	}
	if p.page > 1 {
		rels = append(rels, at(1)+`; rel="first"`)
	}
	c.header.Set("Link", strings.Join(rels, ", "))
}
