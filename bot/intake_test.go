package bot_test

import (
	"bufio"
	"bytes"
	"crypto/hmac"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/bot"
	"github.com/gapless-dev/gapless/codehost"
	"github.com/gapless-dev/gapless/codehost/github"
	"github.com/gapless-dev/gapless/codehost/githubfake"
	"github.com/gapless-dev/gapless/queue"
	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/state/sqlite"
)

// foreignRepo is a repository the App may be installed on but gapless.yaml
// does not allow.
const foreignRepo = "evil/other"

// webhookRig is the webhook intake alone, as OpenServer wires it, on a
// real SQLite state store and a real (insert-only) River queue on a
// SQLite file of its own.
type webhookRig struct {
	t     testing.TB
	in    *bot.Intake
	store state.Store
	q     *queue.Queue
	reg   *prometheus.Registry
	// pr is a pull_request "opened" payload of an allowed repository, as
	// GitHub sends it; foreign is one of foreignRepo.
	pr, foreign []byte
}

// newWebhookRig makes an intake verifying with key (none when empty) and
// refusing bodies over maxBytes (the default when 0), allowing repoName.
func newWebhookRig(t testing.TB, key []byte, maxBytes int64) *webhookRig {
	t.Helper()
	ctx := t.Context()
	dir := t.TempDir()
	store, err := sqlite.Open(ctx, filepath.Join(dir, "state.db"))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, store.Close()) })
	db, err := queue.OpenSQLite(filepath.Join(dir, bot.QueueFile))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, db.Close()) })
	q, err := queue.Open(ctx, queue.Config{SQLite: db})
	require.NoError(t, err)

	reg := prometheus.NewRegistry()
	rig := &webhookRig{t: t, store: store, q: q, reg: reg}
	rig.in = &bot.Intake{
		Secret: key, MaxBytes: maxBytes,
		Allowed: func(repo string) bool { return strings.EqualFold(repo, repoName) },
		Parse:   github.ParseWebhook, Store: store, Queue: q,
		Clock: clockwork.NewFakeClockAt(t0), Metrics: bot.NewMetrics(reg, q.Counts),
	}
	rig.pr, rig.foreign = prPayloads(t)
	return rig
}

// prPayloads returns pull_request "opened" payloads the fake GitHub
// builds (its wire format), for repoName and foreignRepo; built once.
func prPayloads(t testing.TB) (allowed, foreign []byte) {
	t.Helper()
	p, err := prPayloadsOnce()
	require.NoError(t, err)
	return p[0], p[1]
}

var prPayloadsOnce = sync.OnceValues(func() ([2][]byte, error) {
	fake, err := githubfake.New(githubfake.Options{Clock: clockwork.NewFakeClockAt(t0)})
	if err != nil {
		return [2][]byte{}, err
	}
	defer fake.Close()
	for _, r := range []string{repoName, foreignRepo} {
		fake.CreateRepo(r, "main")
		fake.Commit(r, "feature", map[string]string{"README.md": "# change\n"}, "a change")
		fake.OpenPR(r, githubfake.PRSpec{Title: "change", Author: writer, Head: "feature", Base: "main"})
	}
	out := [2][]byte{fake.PullRequestPayload(repoName, 1, "opened"), fake.PullRequestPayload(foreignRepo, 1, "opened")}
	return out, fake.Err()
})

// hookDelivery is one request to the intake.
type hookDelivery struct {
	event, id string
	body      []byte
	// header adds or overrides headers; an empty value deletes one.
	header map[string]string
	// contentLength, when set, is the request's declared length
	// (-1: unknown, as a chunked body).
	contentLength int64
	// reader replaces the body's reader (to watch how much is read).
	reader io.Reader
}

// signedDelivery is a delivery of body as GitHub sends it: signed with
// key in both headers, with an id and an event.
func signedDelivery(key []byte, event, id string, body []byte) hookDelivery {
	return hookDelivery{event: event, id: id, body: body, header: map[string]string{
		codehost.SignatureHeader: codehost.Sign(key, body),
		"X-Hub-Signature":        sha1Signature(key, body),
	}}
}

// sha1Signature is GitHub's legacy X-Hub-Signature value.
func sha1Signature(key, body []byte) string {
	mac := hmac.New(sha1.New, key)
	mac.Write(body)
	return "sha1=" + hex.EncodeToString(mac.Sum(nil))
}

// post sends d to the intake and returns its answer.
func (r *webhookRig) post(d hookDelivery) *httptest.ResponseRecorder {
	r.t.Helper()
	var body io.Reader = bytes.NewReader(d.body)
	if d.reader != nil {
		body = d.reader
	}
	req := httptest.NewRequestWithContext(r.t.Context(), http.MethodPost, "/webhook", body)
	if d.contentLength != 0 {
		req.ContentLength = d.contentLength
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "GitHub-Hookshot/test")
	if d.event != "" {
		req.Header.Set("X-GitHub-Event", d.event)
	}
	if d.id != "" {
		req.Header.Set("X-GitHub-Delivery", d.id)
	}
	for k, v := range d.header {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	rec := httptest.NewRecorder()
	r.in.ServeHTTP(rec, req)
	return rec
}

// deliveries returns the deliveries the store recorded.
func (r *webhookRig) deliveries() []state.Delivery {
	r.t.Helper()
	ds, err := r.store.ListDeliveries(r.t.Context(), state.ListDeliveriesParams{Limit: 1000})
	require.NoError(r.t, err)
	return ds
}

// jobs returns every job in the queue.
func (r *webhookRig) jobs() []queue.JobRow {
	r.t.Helper()
	js, err := r.q.Jobs(r.t.Context(), queue.JobFilter{Limit: 1000})
	require.NoError(r.t, err)
	return js
}

// requireNothingKept asserts that no delivery was recorded and no job
// enqueued.
func (r *webhookRig) requireNothingKept(msgAndArgs ...any) {
	r.t.Helper()
	require.Empty(r.t, r.deliveries(), msgAndArgs...)
	require.Empty(r.t, r.jobs(), msgAndArgs...)
}

// outcomes returns gapless_webhook_deliveries_total by outcome.
func (r *webhookRig) outcomes() map[string]float64 {
	r.t.Helper()
	return outcomesOf(scrapeMetrics(r.t, r.reg))
}

// outcomesOf picks gapless_webhook_deliveries_total by outcome out of
// a scrape.
func outcomesOf(samples map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for _, o := range bot.DeliveryOutcomes {
		out[o] = samples[`gapless_webhook_deliveries_total{outcome="`+o+`"}`]
	}
	return out
}

// scrapeMetrics renders g as /metrics does and returns every sample by its
// name and labels as the text format writes them, e.g.
// gapless_webhook_deliveries_total{outcome="accepted"}.
func scrapeMetrics(t testing.TB, g prometheus.Gatherer) map[string]float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(g, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	return parseExposition(t, rec.Body.String())
}

// parseExposition reads Prometheus's text format: each sample line is
// "name{labels} value" (label values may hold spaces, the value does
// not).
func parseExposition(t testing.TB, text string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		require.Positive(t, i, "a sample line without a value: %q", line)
		v, err := strconv.ParseFloat(line[i+1:], 64)
		require.NoError(t, err, "sample line %q", line)
		out[line[:i]] = v
	}
	require.NoError(t, sc.Err())
	return out
}

func TestIntakeAcceptsASignedDeliveryOnce(t *testing.T) {
	t.Parallel()
	// Scenario: GitHub delivers a signed pull_request "opened". The intake
	// answers 202 at once, records the delivery and enqueues one job
	// carrying the parsed event. The same delivery again (GitHub's
	// "Redeliver", or an attacker replaying a captured request with its
	// valid signature) is answered 200 "duplicate" and enqueues nothing.
	r := newWebhookRig(t, []byte(secret), 0)
	d := signedDelivery([]byte(secret), "pull_request", "d-1", r.pr)

	rec := r.post(d)
	require.Equal(t, http.StatusAccepted, rec.Code, rec.Body.String())
	ds := r.deliveries()
	require.Len(t, ds, 1)
	require.Equal(t, "d-1", ds[0].ID)
	require.Equal(t, "pull_request", ds[0].Event)
	require.Equal(t, "opened", ds[0].Action)
	require.Equal(t, repoName, ds[0].Repo)
	require.Equal(t, state.DeliveryReceived, ds[0].Status)
	jobs := r.jobs()
	require.Len(t, jobs, 1)
	require.Equal(t, bot.KindDelivery, jobs[0].Kind)
	var args bot.DeliveryJob
	require.NoError(t, json.Unmarshal(jobs[0].Args, &args))
	require.Equal(t, "d-1", args.Event.DeliveryID)
	require.Equal(t, 1, args.Event.Number)
	require.NotNil(t, args.Event.PR)

	rec = r.post(d)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	require.Contains(t, rec.Body.String(), "received before")
	require.Len(t, r.jobs(), 1, "a replay enqueues no second job")
	require.Len(t, r.deliveries(), 1)
	got := r.outcomes()
	require.Equal(t, 1.0, got[bot.OutcomeAccepted])
	require.Equal(t, 1.0, got[bot.OutcomeDuplicate])

	// Scenario: another captured delivery is replayed eight times at once
	// (GitHub's retry racing an attacker's replay). Exactly one is
	// accepted and enqueued; the others are duplicates.
	d = signedDelivery([]byte(secret), "pull_request", "d-race", r.pr)
	codes := make([]int, 8)
	var wg sync.WaitGroup
	for i := range codes {
		wg.Go(func() { codes[i] = r.post(d).Code })
	}
	wg.Wait()
	accepted, dup := 0, 0
	for _, c := range codes {
		switch c {
		case http.StatusAccepted:
			accepted++
		case http.StatusOK:
			dup++
		}
	}
	require.Equal(t, 1, accepted, "codes %v", codes)
	require.Equal(t, 7, dup, "codes %v", codes)
	require.Len(t, r.jobs(), 2)
	require.Len(t, r.deliveries(), 2)
	got = r.outcomes()
	require.Equal(t, 2.0, got[bot.OutcomeAccepted])
	require.Equal(t, 8.0, got[bot.OutcomeDuplicate])
}

func TestIntakeRefusesUnverifiedDeliveries(t *testing.T) {
	t.Parallel()
	other := []byte(secret + "-not-the-secret")
	tests := []struct {
		name string
		// scenario says who sends this and why it must be refused.
		scenario string
		mutate   func(d *hookDelivery, body []byte)
	}{
		{"bad HMAC", "an attacker who does not know the secret signs with another one",
			func(d *hookDelivery, body []byte) {
				d.header[codehost.SignatureHeader] = codehost.Sign(other, body)
				d.header["X-Hub-Signature"] = sha1Signature(other, body)
			}},
		{"no signature", "a sender that signs nothing (a webhook configured without a secret)",
			func(d *hookDelivery, _ []byte) {
				d.header[codehost.SignatureHeader] = ""
				d.header["X-Hub-Signature"] = ""
			}},
		{"SHA-1 only", "only the legacy X-Hub-Signature, correct for the secret: SHA-1 is never accepted",
			func(d *hookDelivery, _ []byte) { d.header[codehost.SignatureHeader] = "" }},
		{"SHA-1 value in the SHA-256 header", "the SHA-1 signature moved into X-Hub-Signature-256",
			func(d *hookDelivery, body []byte) {
				d.header[codehost.SignatureHeader] = sha1Signature([]byte(secret), body)
			}},
		{"signature of another body", "a valid signature captured from one delivery, sent with another body",
			func(d *hookDelivery, body []byte) {
				d.header[codehost.SignatureHeader] = codehost.Sign([]byte(secret), append(append([]byte(nil), body...), ' '))
			}},
		{"truncated signature", "a signature cut short (a prefix match must not pass)",
			func(d *hookDelivery, _ []byte) {
				d.header[codehost.SignatureHeader] = d.header[codehost.SignatureHeader][:len("sha256=")+32]
			}},
		{"not hex", "a signature of the right length that is not hex",
			func(d *hookDelivery, _ []byte) {
				d.header[codehost.SignatureHeader] = "sha256=" + strings.Repeat("zz", 32)
			}},
		{"bare prefix", "the algorithm prefix and nothing else",
			func(d *hookDelivery, _ []byte) { d.header[codehost.SignatureHeader] = "sha256=" }},
	}
	// One intake for every case: a refusal leaves nothing behind, so each
	// case sees an empty store and queue.
	r := newWebhookRig(t, []byte(secret), 0)
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Scenario: tc.scenario. The intake answers 401 before it parses
			// anything: nothing is recorded, nothing enqueued, and the
			// delivery is counted as invalid_signature.
			d := signedDelivery([]byte(secret), "pull_request", "d-"+strings.ReplaceAll(tc.name, " ", "-"), r.pr)
			tc.mutate(&d, r.pr)
			rec := r.post(d)
			require.Equal(t, http.StatusUnauthorized, rec.Code, "%s: %s", tc.scenario, rec.Body.String())
			require.NotContains(t, rec.Body.String(), secret, "the answer never says the secret")
			r.requireNothingKept(tc.scenario)
			require.Equal(t, float64(i+1), r.outcomes()[bot.OutcomeInvalidSignature])
		})
	}
	// The same deliveries signed correctly are then accepted: no id was
	// burnt by a refusal.
	for _, tc := range tests {
		rec := r.post(signedDelivery([]byte(secret), "pull_request", "d-"+strings.ReplaceAll(tc.name, " ", "-"), r.pr))
		require.Equal(t, http.StatusAccepted, rec.Code, "%s: %s", tc.name, rec.Body.String())
	}
	require.Len(t, r.jobs(), len(tests))
}

func TestIntakeWithoutASecretVerifiesNothing(t *testing.T) {
	t.Parallel()
	// Scenario: an intake assembled without a secret (serve refuses to
	// start so, but the intake must not rely on that). Every delivery is
	// refused with 401, even one "signed" with the empty key or carrying
	// no signature at all: verification never passes open.
	r := newWebhookRig(t, nil, 0)
	for i, key := range [][]byte{nil, {}} {
		r.in.Secret = key
		for _, d := range []hookDelivery{
			signedDelivery(nil, "pull_request", "d-empty-key", r.pr),
			{event: "pull_request", id: "d-unsigned", body: r.pr},
			signedDelivery([]byte(secret), "pull_request", "d-some-key", r.pr),
			signedDelivery(nil, "ping", "d-ping", []byte(`{"zen":"hi"}`)),
		} {
			rec := r.post(d)
			require.Equal(t, http.StatusUnauthorized, rec.Code, "%s: %s", d.id, rec.Body.String())
			require.Contains(t, rec.Body.String(), "no webhook secret")
		}
		r.requireNothingKept()
		require.Equal(t, float64(4*(i+1)), r.outcomes()[bot.OutcomeInvalidSignature])
	}
}

// countingBody is an endless body that counts what was read of it.
type countingBody struct {
	mu sync.Mutex
	n  int64
}

func (c *countingBody) Read(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range p {
		p[i] = ' '
	}
	c.n += int64(len(p))
	return len(p), nil
}

func (c *countingBody) read() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// paddedJSON is the JSON object body with whitespace before its closing brace
// to size bytes: the same JSON, bigger.
func paddedJSON(body []byte, size int) []byte {
	out := append([]byte(nil), body[:len(body)-1]...)
	out = append(out, bytes.Repeat([]byte(" "), size-len(body))...)
	return append(out, '}')
}

func TestIntakeRefusesOversizedBodiesUnread(t *testing.T) {
	t.Parallel()
	// Scenario: a sender posts a body over the limit (a flood, or a huge
	// payload). The intake answers 413 and reads none of a body whose
	// Content-Length is over the limit, and at most one byte past the
	// limit of a body of unknown length (chunked): an oversized body costs
	// the server neither memory nor the time to read it, and nothing is
	// verified, recorded or enqueued.
	r := newWebhookRig(t, []byte(secret), 0)
	limit := len(r.pr) + 1024
	r.in.MaxBytes = int64(limit)

	declared := &countingBody{}
	d := signedDelivery([]byte(secret), "pull_request", "d-declared", r.pr)
	d.reader, d.contentLength = declared, 1<<30
	rec := r.post(d)
	require.Equal(t, http.StatusRequestEntityTooLarge, rec.Code, rec.Body.String())
	require.Zero(t, declared.read(), "a body declared over the limit is answered from its Content-Length, unread")

	chunked := &countingBody{}
	d = signedDelivery([]byte(secret), "pull_request", "d-chunked", r.pr)
	d.reader, d.contentLength = chunked, -1
	rec = r.post(d)
	require.Equal(t, http.StatusRequestEntityTooLarge, rec.Code, rec.Body.String())
	require.LessOrEqual(t, chunked.read(), int64(limit+1), "a body of unknown length is read to the limit and no further")

	// A correctly signed body one byte over the limit, declared honestly.
	rec = r.post(signedDelivery([]byte(secret), "pull_request", "d-big", paddedJSON(r.pr, limit+1)))
	require.Equal(t, http.StatusRequestEntityTooLarge, rec.Code, rec.Body.String())

	r.requireNothingKept()
	require.Equal(t, 3.0, r.outcomes()[bot.OutcomeTooLarge])
	require.Zero(t, r.outcomes()[bot.OutcomeInvalidSignature], "the size is refused before the signature is looked at")

	// A body of exactly the limit is read and accepted.
	rec = r.post(signedDelivery([]byte(secret), "pull_request", "d-exact", paddedJSON(r.pr, limit)))
	require.Equal(t, http.StatusAccepted, rec.Code, rec.Body.String())
}

func TestIntakeRefusesMalformedDeliveries(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, scenario string
		d              func(r *webhookRig) hookDelivery
		status         int
		outcome        string
	}{
		{"no delivery id", "a signed delivery without X-GitHub-Delivery: it cannot be deduplicated, so it is refused (400)",
			func(r *webhookRig) hookDelivery { return signedDelivery([]byte(secret), "pull_request", "", r.pr) },
			http.StatusBadRequest, bot.OutcomeBadRequest},
		{"no event", "a signed delivery without X-GitHub-Event (400)",
			func(r *webhookRig) hookDelivery { return signedDelivery([]byte(secret), "", "d-no-event", r.pr) },
			http.StatusBadRequest, bot.OutcomeBadRequest},
		{"not JSON", "a signed body that is not a JSON object (400, never a panic)",
			func(r *webhookRig) hookDelivery {
				return signedDelivery([]byte(secret), "pull_request", "d-not-json", []byte("{not json"))
			},
			http.StatusBadRequest, bot.OutcomeBadRequest},
		{"unknown repository", "a signed delivery for a repository off github.repositories (the App installed on another repository): 403, counted as repo_not_allowed",
			func(r *webhookRig) hookDelivery {
				return signedDelivery([]byte(secret), "pull_request", "d-foreign", r.foreign)
			},
			http.StatusForbidden, bot.OutcomeRepoNotAllowed},
		{"no repository", "a signed push that names no repository at all: 403",
			func(r *webhookRig) hookDelivery {
				return signedDelivery([]byte(secret), "push", "d-no-repo", []byte(`{"ref":"refs/heads/main","after":"abc"}`))
			},
			http.StatusForbidden, bot.OutcomeRepoNotAllowed},
		{"ping", "GitHub's ping when the webhook is created: answered 200 and ignored",
			func(r *webhookRig) hookDelivery {
				return signedDelivery([]byte(secret), "ping", "d-ping", []byte(`{"zen":"Keep it logically awesome.","hook_id":1}`))
			},
			http.StatusOK, bot.OutcomeIgnored},
		{"other event", "an event gapless does not act on (star): answered 200 and ignored",
			func(r *webhookRig) hookDelivery {
				return signedDelivery([]byte(secret), "star", "d-star", r.pr)
			},
			http.StatusOK, bot.OutcomeIgnored},
	}
	r := newWebhookRig(t, []byte(secret), 0)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Scenario: tc.scenario. Nothing is recorded or enqueued, and
			// the delivery is counted under its outcome only.
			before := r.outcomes()
			rec := r.post(tc.d(r))
			require.Equal(t, tc.status, rec.Code, "%s: %s", tc.scenario, rec.Body.String())
			r.requireNothingKept(tc.scenario)
			got := r.outcomes()
			for _, o := range bot.DeliveryOutcomes {
				want := before[o]
				if o == tc.outcome {
					want++
				}
				require.Equal(t, want, got[o], "outcome %s", o)
			}
		})
	}
}

func TestIntakeChecksTheSignatureBeforeTheAllowlist(t *testing.T) {
	t.Parallel()
	// Scenario: an attacker probes which repositories gapless serves by
	// posting unsigned deliveries for them. Every one is answered 401,
	// allowed or not: nothing about the allowlist is said before the
	// signature is proven.
	r := newWebhookRig(t, []byte(secret), 0)
	for i, body := range [][]byte{r.pr, r.foreign} {
		rec := r.post(hookDelivery{event: "pull_request", id: "probe-" + strconv.Itoa(i), body: body})
		require.Equal(t, http.StatusUnauthorized, rec.Code, rec.Body.String())
		require.NotContains(t, rec.Body.String(), "repositor")
	}
	r.requireNothingKept()
}

func TestScenarioTamperedDeliveriesThroughServe(t *testing.T) {
	t.Parallel()
	// Scenario: gapless serve runs behind its real HTTP server, and the
	// fake GitHub (or someone pretending to be it) sends spoiled
	// deliveries: signed under another secret, unsigned, SHA-1 only,
	// oversized (25 MiB, and one byte past serve's own limit), without a
	// delivery id, and for a repository off the allowlist. Each gets its
	// status (401, 401, 401, 413, 413, 400, 403) and leaves no delivery and
	// no job behind. Then a good delivery is accepted, and its redelivery
	// answered 200 without a second job.
	h := newHarness(t, options{})
	hook := h.url + "/webhook"
	// The pull requests are set up quietly, into a branch that is not
	// prod's, so that the bot has no work of its own (the reconcile job
	// plans open pull requests into main, and its comments come back as
	// deliveries): the deliveries below are all there is.
	h.fake.SetWebhook("", nil)
	h.fake.Commit(repoName, "develop", map[string]string{"NOTES.md": "develop\n"}, "develop")
	h.fake.Commit(repoName, "labels", map[string]string{"NOTES.md": "notes\n"}, "notes")
	n := h.fake.OpenPR(repoName, githubfake.PRSpec{Title: "labels", Author: writer, Head: "labels", Base: "develop"})
	h.fake.CreateRepo(foreignRepo, "main")
	h.fake.Commit(foreignRepo, "x", map[string]string{"a.txt": "a\n"}, "x")
	foreignN := h.fake.OpenPR(foreignRepo, githubfake.PRSpec{Head: "x", Base: "main"})
	h.fake.SetWebhook(hook, []byte(secret))
	// "labeled" needs no work: the deliveries are what is under test.
	payload := h.fake.PullRequestPayload(repoName, n, "labeled")
	foreign := h.fake.PullRequestPayload(foreignRepo, foreignN, "labeled")

	deliveryJobs := func() int {
		jobs, err := h.srv.Queue.Jobs(h.ctx, queue.JobFilter{Kinds: []string{bot.KindDelivery}, Limit: 1000})
		require.NoError(t, err)
		return len(jobs)
	}
	recorded := func() int {
		ds, err := h.store.ListDeliveries(h.ctx, state.ListDeliveriesParams{Limit: 1000})
		require.NoError(t, err)
		return len(ds)
	}
	jobsBefore, recordedBefore := deliveryJobs(), recorded()

	for _, tc := range []struct {
		name   string
		send   func() (int, error)
		status int
	}{
		{"bad signature", func() (int, error) {
			return h.fake.DeliverTampered("pull_request", payload, githubfake.TamperBadSignature)
		}, http.StatusUnauthorized},
		{"no signature", func() (int, error) {
			return h.fake.DeliverTampered("pull_request", payload, githubfake.TamperNoSignature)
		}, http.StatusUnauthorized},
		{"SHA-1 only", func() (int, error) {
			return h.fake.DeliverTampered("pull_request", payload, githubfake.TamperSHA1Only)
		}, http.StatusUnauthorized},
		{"oversized 25 MiB", func() (int, error) {
			return h.fake.DeliverTampered("pull_request", payload, githubfake.TamperOversized)
		}, http.StatusRequestEntityTooLarge},
		{"one byte over the limit", func() (int, error) {
			return h.fake.DeliverOversized("pull_request", payload, bot.DefaultMaxWebhookBytes+1)
		}, http.StatusRequestEntityTooLarge},
		{"no delivery id", func() (int, error) {
			return h.fake.DeliverTampered("pull_request", payload, githubfake.TamperNoDeliveryID)
		}, http.StatusBadRequest},
		{"unknown repository", func() (int, error) { return h.fake.Deliver("pull_request", foreign) }, http.StatusForbidden},
	} {
		status, err := tc.send()
		require.NoError(t, err, tc.name)
		require.Equal(t, tc.status, status, tc.name)
		require.Equal(t, recordedBefore, recorded(), "%s: nothing recorded", tc.name)
		require.Equal(t, jobsBefore, deliveryJobs(), "%s: nothing enqueued", tc.name)
	}

	status, err := h.fake.Deliver("pull_request", payload)
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, status)
	ds := h.fake.Deliveries()
	id := ds[len(ds)-1].ID
	require.NotEmpty(t, id)
	status, err = h.fake.Redeliver(id)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status, "a redelivery is a duplicate")
	h.idle()
	require.Equal(t, jobsBefore+1, deliveryJobs(), "one job for the delivery and none for its redelivery")
	require.Equal(t, recordedBefore+1, recorded())
	d, err := h.store.ListDeliveries(h.ctx, state.ListDeliveriesParams{Limit: 1})
	require.NoError(t, err)
	require.Equal(t, id, d[0].ID)
	require.Equal(t, state.DeliveryIgnored, d[0].Status, "the job ran: pull_request labeled needs nothing")
}
