package bot_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/codehost"
	"github.com/gapless-dev/gapless/queue"
	"github.com/gapless-dev/gapless/state"
)

// How FuzzIntake signs a delivery (its sig argument, modulo sigChoices).
const (
	sigValid      = iota // the HMAC-SHA256 of the body under the secret
	sigNone              // no X-Hub-Signature-256
	sigRaw               // the fuzzer's raw header value
	sigOtherKey          // a valid HMAC under another secret
	sigSHA1Only          // only the SHA-1 X-Hub-Signature, valid
	sigOtherBody         // the valid HMAC of another body
	sigValidUpper        // the valid HMAC in upper-case hex
	sigChoices
)

// fuzzMaxBytes is the intake's body limit under the fuzzer: small, so the
// fuzzer reaches it. The seeds are small too: the fuzzer minimizes every
// new input, and each step of that snapshots the coverage of this whole
// (large) test binary.
const fuzzMaxBytes = 1 << 10

// countingStore is the real state store, counting the intake's calls
// that write a delivery.
type countingStore struct {
	state.CodeHostStore
	writes atomic.Int64
}

func (s *countingStore) RecordDelivery(ctx context.Context, p state.RecordDeliveryParams) (bool, error) {
	s.writes.Add(1)
	return s.CodeHostStore.RecordDelivery(ctx, p)
}

func (s *countingStore) FinishDelivery(ctx context.Context, p state.FinishDeliveryParams) error {
	s.writes.Add(1)
	return s.CodeHostStore.FinishDelivery(ctx, p)
}

// countingQueue is the real queue, counting inserts.
type countingQueue struct {
	queue.Enqueuer
	inserts atomic.Int64
}

func (q *countingQueue) Insert(ctx context.Context, args queue.Args, opts *queue.InsertOpts) (queue.Inserted, error) {
	q.inserts.Add(1)
	return q.Enqueuer.Insert(ctx, args, opts)
}

// FuzzIntake throws arbitrary deliveries (event, delivery id, body and a
// way of signing) at the webhook intake on a real SQLite state store and
// River queue. It keeps the intake's security invariant: never a panic,
// and never a 2xx unless X-Hub-Signature-256 is the valid HMAC-SHA256 of
// the body under the secret (judged here independently of
// codehost.VerifySignature); an unverified delivery is answered 401 (413
// when over the size limit) and reaches neither the store nor the queue.
// (The store and the queue are watched through counting wrappers, not by
// reading them back: a read per input would slow the fuzzer tenfold.)
func FuzzIntake(f *testing.F) {
	r := newWebhookRig(f, []byte(secret), fuzzMaxBytes)
	store := &countingStore{CodeHostStore: r.store}
	q := &countingQueue{Enqueuer: r.q}
	r.in.Store, r.in.Queue = store, q
	small := []byte(`{"action":"opened","number":1,"repository":{"full_name":"acme/analytics"},"pull_request":{"number":1,"state":"open","head":{"sha":"abc","ref":"x"},"base":{"ref":"main","sha":"def"}},"sender":{"login":"alice"}}`)
	foreign := []byte(`{"action":"opened","number":1,"repository":{"full_name":"evil/other"},"pull_request":{"number":1}}`)
	for _, seed := range []struct {
		event, id string
		body      []byte
		sig       uint8
		raw       string
	}{
		{"pull_request", "seed-valid", small, sigValid, ""},
		{"pull_request", "seed-upper", small, sigValidUpper, ""},
		{"pull_request", "seed-foreign", foreign, sigValid, ""},
		{"pull_request", "seed-none", small, sigNone, ""},
		{"pull_request", "seed-other-key", small, sigOtherKey, ""},
		{"pull_request", "seed-sha1", small, sigSHA1Only, ""},
		{"pull_request", "seed-other-body", small, sigOtherBody, ""},
		{"pull_request", "seed-raw-sha1", small, sigRaw, "sha1=0123456789abcdef0123456789abcdef01234567"},
		{"pull_request", "seed-raw-prefix", small, sigRaw, "sha256="},
		{"pull_request", "seed-raw-garbage", small, sigRaw, "sha256=" + strings.Repeat("g", 64)},
		{"pull_request", "seed-raw-spaces", small, sigRaw, " " + codehost.Sign([]byte(secret), small)},
		{"pull_request", "seed-raw-nul", small, sigRaw, codehost.Sign([]byte(secret), small) + "\x00"},
		{"ping", "seed-ping", []byte(`{"zen":"hi"}`), sigValid, ""},
		{"issue_comment", "seed-comment", []byte(`{"action":"created","issue":{"number":1,"pull_request":{}},"comment":{"id":1,"body":"/deploy"},"repository":{"full_name":"acme/analytics"}}`), sigValid, ""},
		{"push", "seed-push", []byte(`{"ref":"refs/heads/main","after":"abc","repository":{"full_name":"ACME/Analytics"}}`), sigValid, ""},
		{"pull_request", "", small, sigValid, ""},
		{"", "seed-no-event", small, sigValid, ""},
		{"pull_request", "seed-not-json", []byte("{not json"), sigValid, ""},
		{"pull_request", "seed-empty", nil, sigValid, ""},
		{"pull_request", "seed-null", []byte("null"), sigValid, ""},
		{"pull_request", "seed-array", []byte(`[1,2]`), sigValid, ""},
		{"pull_request", "seed-big", paddedJSON(small, fuzzMaxBytes+1), sigValid, ""},
	} {
		f.Add(seed.event, seed.id, seed.body, seed.sig, seed.raw)
	}
	key := []byte(secret)
	// The valid seed is accepted: the fuzzer starts from the path that
	// records and enqueues.
	rec := r.post(signedDelivery(key, "pull_request", "seed-check", small))
	require.Equal(f, http.StatusAccepted, rec.Code, rec.Body.String())
	f.Fuzz(func(t *testing.T, event, id string, body []byte, sig uint8, raw string) {
		// Header values reach the handler as they are: control
		// characters included (net/http would refuse some on the wire).
		d := hookDelivery{event: event, id: id, body: body, header: map[string]string{}}
		var header string
		switch sig % sigChoices {
		case sigValid:
			header = codehost.Sign(key, body)
		case sigNone:
		case sigRaw:
			header = raw
		case sigOtherKey:
			header = codehost.Sign(append([]byte("x"), key...), body)
		case sigSHA1Only:
			d.header["X-Hub-Signature"] = sha1Signature(key, body)
		case sigOtherBody:
			header = codehost.Sign(key, append(append([]byte(nil), body...), 'x'))
		case sigValidUpper:
			header = "sha256=" + strings.ToUpper(strings.TrimPrefix(codehost.Sign(key, body), "sha256="))
		}
		if header != "" {
			d.header[codehost.SignatureHeader] = header
		}
		// The rig, reporting to this input's t (f's methods may not be
		// called in the fuzz target).
		r := *r
		r.t = t
		writes, inserts := store.writes.Load(), q.inserts.Load()

		rec := r.post(d)

		require.Less(t, rec.Code, 500, "the store and the queue take every verified delivery: %s", rec.Body.String())
		valid := signatureIsValid(key, body, header)
		if rec.Code >= 200 && rec.Code < 300 {
			require.True(t, valid, "a 2xx (%d %q) for a delivery whose X-Hub-Signature-256 %q is not the body's HMAC", rec.Code, rec.Body.String(), header)
		}
		if !valid {
			want := http.StatusUnauthorized
			if len(body) > fuzzMaxBytes {
				want = http.StatusRequestEntityTooLarge
			}
			require.Equal(t, want, rec.Code, rec.Body.String())
			require.Equal(t, writes, store.writes.Load(), "an unverified delivery never reaches the store")
		}
		switch rec.Code {
		case http.StatusAccepted:
			require.Equal(t, inserts+1, q.inserts.Load(), "a 202 enqueues one job")
		default:
			require.Equal(t, inserts, q.inserts.Load(), "only a 202 enqueues (answered %d)", rec.Code)
		}
	})
}

// signatureIsValid is the oracle: header is "sha256=" and the hex (either
// case) of the HMAC-SHA256 of body under key.
func signatureIsValid(key, body []byte, header string) bool {
	hexsum, ok := strings.CutPrefix(header, "sha256=")
	if !ok {
		return false
	}
	got, err := hex.DecodeString(hexsum)
	if err != nil {
		return false
	}
	mac := hmac.New(sha256.New, key)
	mac.Write(body)
	return hmac.Equal(got, mac.Sum(nil))
}
