// Package githubfake is a stateful, in-memory GitHub for tests, served over
// net/http/httptest and speaking GitHub's REST wire format (JSON shaped by
// go-github v88's types, GitHub's status codes, headers and error bodies).
//
// It is the GitHub that gapless's tests talk to: the go-github client of
// codehost/github talks to URL(), and webhooks go to the URL given to
// SetWebhook. It is faithful where real GitHub surprises people, and each
// such rule says in its doc comment which documented behaviour it follows:
//
//   - the per-issue comments list is oldest first (ascending id) and ignores
//     sort and direction; it pages by per_page (at most 100) with an RFC 5988
//     Link header;
//   - comment bodies over 65535 characters and check-run summaries or texts
//     over 65535 bytes get 422;
//   - check runs are per head SHA and name and remember the App that made
//     them; branch protection requires check names, and MergeAllowed answers
//     as the merge button would (neutral and skipped pass);
//   - a SHA-pinned merge answers 409 when the head moved and 405 when the
//     pull request cannot be merged;
//   - the App's JWT is verified against the App's key and installation
//     tokens expire on the fake's clock;
//   - webhooks are signed (X-Hub-Signature-256 and the legacy SHA-1 header),
//     and can be sent tampered, oversized or replayed;
//   - routes fail on demand, GitHub can be down, requests can be slow on the
//     fake clock, and every request is logged.
//
// The fake is safe for concurrent use: one mutex guards its state, and no
// webhook is delivered while it is held.
package githubfake

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// Options configure a Fake.
type Options struct {
	// Clock is the fake's clock: timestamps, installation-token expiry,
	// rate-limit windows and Latency waits run on it. Nil: the real clock.
	Clock clockwork.Clock
	// LazyMergeability: a pull request's mergeable stays null (and its
	// merge_commit_sha empty, its mergeable_state "unknown") after a change
	// until SettleMergeability is called, as GitHub computes the test merge
	// asynchronously. Default false: computed at once.
	LazyMergeability bool
	// NoAPIEvents: changes made through the REST API (a comment posted or
	// edited, a merge) deliver no webhooks. By default they do, as GitHub
	// does: a bot's own comment comes back to it as issue_comment
	// "created". Those deliveries are asynchronous (GitHub sends them after
	// answering the request); Flush waits for them.
	NoAPIEvents bool
}

// The App the fake plays.
const (
	defaultAppID   int64 = 424242
	defaultAppSlug       = "gapless-test"
	// actionsAppID and actionsAppSlug are GitHub Actions' App, the one a
	// GITHUB_TOKEN (a PersonalToken here) acts as when it creates check runs.
	actionsAppID   int64 = 15368
	actionsAppSlug       = "github-actions"
)

// Fake is an in-memory GitHub. Make one with New or NewT.
type Fake struct {
	opts    Options
	clock   clockwork.Clock
	srv     *httptest.Server
	t       testing.TB
	key     *rsa.PrivateKey
	keyPEM  []byte
	appID   int64
	appSlug string
	routes  map[string]*route // by canonical name ("GET /repos/...")

	mu            sync.Mutex
	repos         map[string]*repo // by lower-case "owner/name"
	installations map[string]int64 // by lower-case owner
	creds         map[string]*credential
	ids           map[string]int64 // per-kind id counters
	seq           int64            // commit sequence, for distinct SHAs
	rate          map[string]*rateWindow
	rateLimit     int
	faults        []*fault
	down          bool
	latency       map[string]time.Duration
	log           []Request
	checkLog      []CheckRunChange
	archives      map[string]archiveGrant
	misuse        []error

	// Webhook delivery: its own lock, never held with mu.
	dmu        sync.Mutex
	dcond      *sync.Cond
	hookURL    string
	hookSecret []byte
	queue      []*outgoing
	inflight   int
	closed     bool
	deliveries []Delivery
	workerDone chan struct{}
	httpc      *http.Client
	// stop is closed by Close: requests waiting out a Latency give up, so
	// the server can shut down.
	stop chan struct{}
}

// appKey is the App's RSA key, made once per process and shared by every
// Fake: generating a 2048-bit key costs about 0.1 s under the race
// detector, too much for each test.
var appKey = sync.OnceValues(func() (*rsa.PrivateKey, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, fmt.Errorf("githubfake: generating the App's RSA key: %w", err)
	}
	return key, nil
})

// New starts a fake GitHub on a loopback httptest server. Close it when done.
func New(opts Options) (*Fake, error) {
	key, err := appKey()
	if err != nil {
		return nil, err
	}
	clock := opts.Clock
	if clock == nil {
		clock = clockwork.NewRealClock()
	}
	f := &Fake{
		opts:    opts,
		clock:   clock,
		key:     key,
		keyPEM:  pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}),
		appID:   defaultAppID,
		appSlug: defaultAppSlug,

		repos:         map[string]*repo{},
		installations: map[string]int64{},
		creds:         map[string]*credential{},
		ids:           map[string]int64{},
		rate:          map[string]*rateWindow{},
		latency:       map[string]time.Duration{},
		archives:      map[string]archiveGrant{},

		workerDone: make(chan struct{}),
		stop:       make(chan struct{}),
		httpc:      &http.Client{Timeout: 30 * time.Second},
	}
	f.dcond = sync.NewCond(&f.dmu)
	mux, routes := f.buildMux()
	f.routes = routes
	f.srv = httptest.NewServer(mux)
	go f.deliveryWorker()
	return f, nil
}

// NewT is New for a test: it fails t when the fake cannot start, closes the
// fake when t ends, and reports misuse of the control methods (an unknown
// repository, a missing pull request) as t.Errorf.
func NewT(t testing.TB, opts Options) *Fake {
	t.Helper()
	f, err := New(opts)
	if err != nil {
		t.Fatalf("githubfake.New: %v", err)
	}
	f.t = t
	t.Cleanup(f.Close)
	return f
}

// Close stops the server and the webhook sender. Deliveries still queued
// are dropped; requests waiting out a Latency answer 503.
func (f *Fake) Close() {
	f.dmu.Lock()
	already := f.closed
	f.closed = true
	f.dcond.Broadcast()
	f.dmu.Unlock()
	if already {
		return
	}
	close(f.stop)
	<-f.workerDone
	f.srv.Close()
	f.httpc.CloseIdleConnections()
}

// URL is the API's base URL, with a trailing slash (as go-github's
// WithURLs wants it), e.g. "http://127.0.0.1:41234/".
func (f *Fake) URL() string { return f.srv.URL + "/" }

// Clock is the fake's clock.
func (f *Fake) Clock() clockwork.Clock { return f.clock }

// AppID is the id of the GitHub App the fake plays (the JWT's iss).
func (f *Fake) AppID() int64 { return f.appID }

// AppSlug is the App's slug; its check runs carry it as app.slug and its
// comments are authored by "<slug>[bot]".
func (f *Fake) AppSlug() string { return f.appSlug }

// AppBotLogin is the login the App's installation tokens act as.
func (f *Fake) AppBotLogin() string { return f.appSlug + "[bot]" }

// AppPrivateKeyPEM is the App's private key (PKCS#1 PEM), as GitHub hands
// it out: what ghinstallation signs JWTs with.
func (f *Fake) AppPrivateKeyPEM() []byte {
	out := make([]byte, len(f.keyPEM))
	copy(out, f.keyPEM)
	return out
}

// Err returns the misuse of control methods recorded so far (a fake made
// with New has no test to report to), or nil.
func (f *Fake) Err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return errors.Join(f.misuse...)
}

// misusef records a control method called wrongly: t.Errorf under NewT,
// kept for Err otherwise. Never a panic. Call with f.mu held.
func (f *Fake) misusef(format string, args ...any) {
	err := fmt.Errorf("githubfake: "+format, args...)
	f.misuse = append(f.misuse, err)
	if f.t != nil {
		f.t.Helper()
		f.t.Errorf("%v", err)
	}
}

// now is the fake clock's time, in UTC, to the second (GitHub's timestamps
// have no fraction).
func (f *Fake) now() time.Time { return f.clock.Now().UTC().Truncate(time.Second) }

// nextID hands out ids per kind (comments, check runs, ...), each kind
// ascending from its own large base as GitHub's ids look.
func (f *Fake) nextID(kind string) int64 {
	bases := map[string]int64{
		"repo": 700000001, "pull": 1800000001, "comment": 2100000001,
		"check": 30000000001, "reaction": 250000001, "installation": 50000001,
		"user": 9000001, "suite": 27000000001, "hook": 480000001,
	}
	if _, ok := f.ids[kind]; !ok {
		f.ids[kind] = bases[kind]
		if f.ids[kind] == 0 {
			f.ids[kind] = 1
		}
		return f.ids[kind]
	}
	f.ids[kind]++
	return f.ids[kind]
}

// repoKey is a repository's map key: GitHub's names are case-insensitive.
func repoKey(full string) string { return strings.ToLower(full) }

// lookupRepo finds a repository by "owner/name". Call with f.mu held.
func (f *Fake) lookupRepo(full string) *repo { return f.repos[repoKey(full)] }

// mustRepo is lookupRepo for control methods: misuse when absent.
func (f *Fake) mustRepo(full string) *repo {
	r := f.lookupRepo(full)
	if r == nil {
		f.misusef("no repository %q (CreateRepo it first)", full)
	}
	return r
}

// mustPull finds a pull request for a control method: misuse when absent.
func (f *Fake) mustPull(full string, n int) (*repo, *pull) {
	r := f.mustRepo(full)
	if r == nil {
		return nil, nil
	}
	p := r.prs[n]
	if p == nil {
		f.misusef("no pull request %s#%d", full, n)
		return nil, nil
	}
	return r, p
}

var timeZero time.Time

func itoa(n int) string     { return strconv.Itoa(n) }
func itoa64(n int64) string { return strconv.FormatInt(n, 10) }
