package githubfake

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	gh "github.com/google/go-github/v88/github"

	"github.com/gapless-dev/gapless/codehost"
)

// ErrNoWebhook is returned by the delivering methods when SetWebhook was
// never called.
var ErrNoWebhook = errors.New("githubfake: no webhook URL is set")

// errClosed is a delivery's error when the fake closed before sending it.
var errClosed = errors.New("githubfake: closed before the delivery was sent")

// Delivery is one webhook delivery attempt.
type Delivery struct {
	ID     string // X-GitHub-Delivery (empty when tampered away)
	Event  string // X-GitHub-Event
	Body   []byte
	Header http.Header // the request's headers as sent
	Status int         // the receiver's answer; 0 when none came
	Err    error       // why no answer came
	// Redelivery: sent by Redeliver (the same id, body and signature).
	Redelivery bool
}

// Tamper is how DeliverTampered spoils a delivery.
type Tamper int

// The tamper modes.
const (
	// TamperNone: a correct delivery.
	TamperNone Tamper = iota
	// TamperBadSignature: both signature headers computed under another
	// secret.
	TamperBadSignature
	// TamperNoSignature: neither signature header.
	TamperNoSignature
	// TamperSHA1Only: only the legacy X-Hub-Signature (HMAC-SHA1), valid.
	TamperSHA1Only
	// TamperOversized: correctly signed, the body padded with whitespace
	// to OversizedBytes (past GitHub's 25 MB payload cap). DeliverOversized
	// takes another size.
	TamperOversized
	// TamperNoDeliveryID: correctly signed, no X-GitHub-Delivery header.
	TamperNoDeliveryID
)

// OversizedBytes is TamperOversized's body size: one byte past the 25 MiB
// GitHub caps webhook payloads at (go-github's maxPayloadSize).
const OversizedBytes = 25<<20 + 1

// hookID is the X-GitHub-Hook-ID of the App's webhook.
const hookID = 480000001

// outgoing is one delivery on its way.
type outgoing struct {
	event      string
	body       []byte
	header     http.Header
	url        string
	redelivery bool
	done       chan struct{} // closed when answered (synchronous senders)
	result     Delivery
}

// SetWebhook points the App's webhook at url, signed with secret (an
// empty secret sends no signature headers, as GitHub does).
func (f *Fake) SetWebhook(url string, secret []byte) {
	f.dmu.Lock()
	defer f.dmu.Unlock()
	f.hookURL = url
	f.hookSecret = append([]byte(nil), secret...)
}

// Deliveries returns every delivery attempted, in order.
func (f *Fake) Deliveries() []Delivery {
	f.dmu.Lock()
	defer f.dmu.Unlock()
	return append([]Delivery(nil), f.deliveries...)
}

// Flush waits until every queued delivery (the asynchronous ones API
// requests cause) has been answered.
func (f *Fake) Flush() {
	f.dmu.Lock()
	defer f.dmu.Unlock()
	for (len(f.queue) > 0 || f.inflight > 0) && !f.closed {
		f.dcond.Wait()
	}
}

// Deliver sends a correctly signed delivery of any payload (marshalled as
// JSON) and returns the receiver's status.
func (f *Fake) Deliver(event string, payload any) (int, error) {
	return f.DeliverTampered(event, payload, TamperNone)
}

// DeliverTampered sends a delivery spoiled as t says and returns the
// receiver's status.
func (f *Fake) DeliverTampered(event string, payload any, t Tamper) (int, error) {
	size := 0
	if t == TamperOversized {
		size = OversizedBytes
	}
	return f.deliverPayload(event, payload, t, size)
}

// DeliverOversized sends a correctly signed delivery whose body is padded
// with JSON whitespace to size bytes.
func (f *Fake) DeliverOversized(event string, payload any, size int) (int, error) {
	return f.deliverPayload(event, payload, TamperNone, size)
}

func (f *Fake) deliverPayload(event string, payload any, t Tamper, size int) (int, error) {
	body, err := json.Marshal(payload)
	if err != nil {
		return 0, fmt.Errorf("githubfake: encoding the %s payload: %w", event, err)
	}
	if size > len(body) && len(body) > 0 && body[len(body)-1] == '}' {
		// Whitespace before the closing brace: still the same JSON. Filled
		// by doubling copies, as large bodies are slow to touch byte by
		// byte under the race detector.
		padded := make([]byte, size)
		n := copy(padded, body[:len(body)-1])
		padded[n] = ' '
		for filled := 1; filled < size-1-n; filled *= 2 {
			copy(padded[n+filled:size-1], padded[n:n+filled])
		}
		padded[size-1] = '}'
		body = padded
	}
	o := &outgoing{event: event, body: body, done: make(chan struct{})}
	if err := f.prepare(o, t); err != nil {
		return 0, err
	}
	f.push(o)
	<-o.done
	return o.result.Status, o.result.Err
}

// Redeliver sends delivery id again: the same id, body and headers
// (signature included), as GitHub's "Redeliver" does. It answers the
// receiver's status.
func (f *Fake) Redeliver(id string) (int, error) {
	f.dmu.Lock()
	var found *Delivery
	for i := range f.deliveries {
		if f.deliveries[i].ID == id && id != "" {
			found = &f.deliveries[i]
			break
		}
	}
	if found == nil {
		f.dmu.Unlock()
		return 0, fmt.Errorf("githubfake: no delivery %q to redeliver", id)
	}
	url := f.hookURL
	o := &outgoing{
		event: found.Event, body: append([]byte(nil), found.Body...), header: found.Header.Clone(),
		url: url, redelivery: true, done: make(chan struct{}),
	}
	f.dmu.Unlock()
	if url == "" {
		return 0, ErrNoWebhook
	}
	f.push(o)
	<-o.done
	return o.result.Status, o.result.Err
}

// prepare addresses and signs a delivery. An empty secret sends no
// signature (GitHub signs only when the webhook has a secret).
func (f *Fake) prepare(o *outgoing, t Tamper) error {
	f.dmu.Lock()
	url, secret := f.hookURL, append([]byte(nil), f.hookSecret...)
	f.dmu.Unlock()
	if url == "" {
		return ErrNoWebhook
	}
	o.url = url
	h := http.Header{}
	h.Set("Accept", "*/*")
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", "GitHub-Hookshot/f0a1b2c")
	h.Set("X-GitHub-Event", o.event)
	h.Set("X-GitHub-Delivery", newDeliveryID())
	h.Set("X-GitHub-Hook-ID", strconv.Itoa(hookID))
	h.Set("X-GitHub-Hook-Installation-Target-ID", strconv.FormatInt(f.appID, 10))
	h.Set("X-GitHub-Hook-Installation-Target-Type", "integration")
	if len(secret) > 0 {
		key := secret
		if t == TamperBadSignature {
			key = append(append([]byte(nil), secret...), "-not-the-secret"...)
		}
		h.Set("X-Hub-Signature", signSHA1(key, o.body))
		h.Set(codehost.SignatureHeader, codehost.Sign(key, o.body))
	}
	switch t {
	case TamperNoSignature:
		h.Del("X-Hub-Signature")
		h.Del(codehost.SignatureHeader)
	case TamperSHA1Only:
		h.Del(codehost.SignatureHeader)
	case TamperNoDeliveryID:
		h.Del("X-GitHub-Delivery")
	}
	o.header = h
	return nil
}

// signSHA1 is the legacy X-Hub-Signature value GitHub still sends.
func signSHA1(secret, body []byte) string {
	mac := hmac.New(sha1.New, secret)
	mac.Write(body)
	return "sha1=" + hex.EncodeToString(mac.Sum(nil))
}

// newDeliveryID is a fresh GUID, the shape of X-GitHub-Delivery.
func newDeliveryID() string {
	b := randomHex(16)
	return b[0:8] + "-" + b[8:12] + "-4" + b[13:16] + "-a" + b[17:20] + "-" + b[20:32]
}

// push queues a prepared delivery for the sender.
func (f *Fake) push(o *outgoing) {
	f.dmu.Lock()
	defer f.dmu.Unlock()
	if f.closed {
		o.result = Delivery{ID: o.header.Get("X-GitHub-Delivery"), Event: o.event, Body: o.body, Header: o.header, Err: errClosed}
		if o.done != nil {
			close(o.done)
		}
		return
	}
	f.queue = append(f.queue, o)
	f.dcond.Broadcast()
}

// enqueue queues the deliveries an API request caused (asynchronous, as
// GitHub sends them after answering). Without a webhook they are dropped.
func (f *Fake) enqueue(events []*outgoing) {
	for _, o := range events {
		if f.prepare(o, TamperNone) != nil {
			continue
		}
		f.push(o)
	}
}

// deliverSync sends the deliveries a control method caused, in order, and
// waits for each answer. Without a webhook they are dropped.
func (f *Fake) deliverSync(events []*outgoing) {
	for _, o := range events {
		o.done = make(chan struct{})
		if f.prepare(o, TamperNone) != nil {
			continue
		}
		f.push(o)
		<-o.done
	}
}

// deliveryWorker sends queued deliveries one at a time, in order, until
// Close.
func (f *Fake) deliveryWorker() {
	defer close(f.workerDone)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		f.dmu.Lock()
		for !f.closed {
			f.dcond.Wait()
		}
		f.dmu.Unlock()
		cancel()
	}()
	for {
		f.dmu.Lock()
		for len(f.queue) == 0 && !f.closed {
			f.dcond.Wait()
		}
		if f.closed {
			for _, o := range f.queue {
				o.result = Delivery{ID: o.header.Get("X-GitHub-Delivery"), Event: o.event, Body: o.body, Header: o.header, Err: errClosed}
				if o.done != nil {
					close(o.done)
				}
			}
			f.queue = nil
			f.dcond.Broadcast()
			f.dmu.Unlock()
			return
		}
		o := f.queue[0]
		f.queue = f.queue[1:]
		f.inflight++
		f.dmu.Unlock()

		status, err := f.post(ctx, o)
		o.result = Delivery{
			ID: o.header.Get("X-GitHub-Delivery"), Event: o.event, Body: o.body, Header: o.header,
			Status: status, Err: err, Redelivery: o.redelivery,
		}

		f.dmu.Lock()
		f.deliveries = append(f.deliveries, o.result)
		f.inflight--
		f.dcond.Broadcast()
		f.dmu.Unlock()
		if o.done != nil {
			close(o.done)
		}
	}
}

// post sends one delivery and returns the receiver's status.
func (f *Fake) post(ctx context.Context, o *outgoing) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, o.url, bytes.NewReader(o.body))
	if err != nil {
		return 0, fmt.Errorf("githubfake: building the %s delivery to %s: %w", o.event, o.url, err)
	}
	req.Header = o.header.Clone()
	resp, err := f.httpc.Do(req)
	if err != nil {
		return 0, fmt.Errorf("githubfake: delivering %s to %s: %w", o.event, o.url, err)
	}
	defer func() { _ = resp.Body.Close() }()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, nil
}

// event builds a delivery of payload (JSON) for event.
func event(kind string, payload any) *outgoing {
	b, err := json.Marshal(payload)
	if err != nil {
		b = []byte(`{}`)
	}
	return &outgoing{event: kind, body: b}
}

// pullRequestEvent builds a pull_request payload as GitHub sends it, with
// the installation, repository and sender. Its pull_request is the REST
// object, except that mergeability is not yet known at delivery time
// (mergeable null, mergeable_state "unknown") for every action but closed.
// Call with f.mu held.
func (f *Fake) pullRequestEvent(r *repo, p *pull, action, sender, senderType, before, after string) json.RawMessage {
	pr := f.pullRequest(r, p)
	if action != "closed" {
		pr.Mergeable = nil
		pr.MergeableState = gh.Ptr("unknown")
		pr.MergeCommitSHA = nil
	}
	ev := &gh.PullRequestEvent{
		Action:       gh.Ptr(action),
		Number:       gh.Ptr(p.number),
		Repo:         f.repository(r),
		Sender:       f.user(sender, senderType),
		Installation: f.installation(f.installations[strings.ToLower(r.owner)], r.owner, true),
	}
	if before != "" {
		ev.Before, ev.After = gh.Ptr(before), gh.Ptr(after)
	}
	b, err := json.Marshal(ev)
	if err != nil {
		return json.RawMessage(`{}`)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return b
	}
	m["pull_request"] = withNulls(pr, "mergeable", "merge_commit_sha", "merged_at", "closed_at", "merged_by")
	out, err := json.Marshal(m)
	if err != nil {
		return b
	}
	return out
}

func (f *Fake) pullRequestEventOut(r *repo, p *pull, action, sender, senderType, before, after string) *outgoing {
	return &outgoing{event: "pull_request", body: f.pullRequestEvent(r, p, action, sender, senderType, before, after)}
}

// issueCommentEvent builds an issue_comment payload: the issue (with
// pull_request links, as a pull request's conversation is an issue), the
// comment, changes for "edited", repository, sender and installation.
// Call with f.mu held.
func (f *Fake) issueCommentEvent(r *repo, cm *comment, action, sender, senderType string, changes *gh.EditChange) *gh.IssueCommentEvent {
	p := r.prs[cm.number]
	issue := &gh.Issue{
		ID:      gh.Ptr(p.id),
		NodeID:  gh.Ptr(nodeID("Issue", p.id)),
		Number:  gh.Ptr(p.number),
		Title:   gh.Ptr(p.title),
		State:   gh.Ptr(p.state),
		User:    f.user(p.author, ""),
		URL:     gh.Ptr(f.apiURL(r, fmt.Sprintf("/issues/%d", p.number))),
		HTMLURL: gh.Ptr(f.htmlURL(r, fmt.Sprintf("/pull/%d", p.number))),
		PullRequestLinks: &gh.PullRequestLinks{
			URL:      gh.Ptr(f.apiURL(r, fmt.Sprintf("/pulls/%d", p.number))),
			HTMLURL:  gh.Ptr(f.htmlURL(r, fmt.Sprintf("/pull/%d", p.number))),
			DiffURL:  gh.Ptr(f.htmlURL(r, fmt.Sprintf("/pull/%d.diff", p.number))),
			PatchURL: gh.Ptr(f.htmlURL(r, fmt.Sprintf("/pull/%d.patch", p.number))),
		},
		CreatedAt: ts(p.createdAt),
		UpdatedAt: ts(p.updatedAt),
	}
	return &gh.IssueCommentEvent{
		Action:       gh.Ptr(action),
		Issue:        issue,
		Comment:      f.issueComment(r, cm),
		Changes:      changes,
		Repo:         f.repository(r),
		Sender:       f.user(sender, senderType),
		Installation: f.installation(f.installations[strings.ToLower(r.owner)], r.owner, true),
	}
}

func (f *Fake) issueCommentEventOut(r *repo, cm *comment, action, sender, senderType string, changes *gh.EditChange) *outgoing {
	return event("issue_comment", f.issueCommentEvent(r, cm, action, sender, senderType, changes))
}

// pushEventOut builds a push payload for one new commit on branch. Call
// with f.mu held.
func (f *Fake) pushEventOut(r *repo, branch, before string, c *commit, pusher string, created bool) *outgoing {
	if before == "" {
		before = strings.Repeat("0", 40)
	}
	var parentFiles map[string]string
	if len(c.parents) > 0 && r.commits[c.parents[0]] != nil {
		parentFiles = r.commits[c.parents[0]].files
	}
	var added, removed, modified []string
	changes := diffTrees(parentFiles, c.files)
	for _, p := range sortedPaths(changesAsFiles(changes)) {
		_, existed := parentFiles[p]
		switch {
		case changes[p].gone:
			removed = append(removed, p)
		case existed:
			modified = append(modified, p)
		default:
			added = append(added, p)
		}
	}
	author := &gh.CommitAuthor{Name: gh.Ptr(c.author), Email: gh.Ptr(c.author + "@users.noreply.invalid"), Login: gh.Ptr(c.author)}
	head := &gh.HeadCommit{
		ID: gh.Ptr(c.sha), TreeID: gh.Ptr(c.sha), Distinct: gh.Ptr(true), Message: gh.Ptr(c.message),
		Timestamp: ts(c.at), URL: gh.Ptr(f.htmlURL(r, "/commit/"+c.sha)), Author: author, Committer: author,
		Added: added, Removed: removed, Modified: modified,
	}
	owner := f.user(r.owner, "Organization")
	ev := &gh.PushEvent{
		Ref:        gh.Ptr("refs/heads/" + branch),
		Before:     gh.Ptr(before),
		After:      gh.Ptr(c.sha),
		Created:    gh.Ptr(created),
		Deleted:    gh.Ptr(false),
		Forced:     gh.Ptr(false),
		Compare:    gh.Ptr(f.htmlURL(r, "/compare/"+before[:12]+"..."+c.sha[:12])),
		Commits:    []*gh.HeadCommit{head},
		HeadCommit: head,
		Repo: &gh.PushEventRepository{
			ID: gh.Ptr(r.id), NodeID: gh.Ptr(nodeID("Repository", r.id)), Name: gh.Ptr(r.name),
			FullName: gh.Ptr(r.full()), Owner: owner, Private: gh.Ptr(true),
			HTMLURL: gh.Ptr(f.htmlURL(r, "")), URL: gh.Ptr(f.apiURL(r, "")),
			DefaultBranch: gh.Ptr(r.defaultBranch), MasterBranch: gh.Ptr(r.defaultBranch),
		},
		Pusher:       &gh.CommitAuthor{Name: gh.Ptr(pusher), Email: gh.Ptr(pusher + "@users.noreply.invalid")},
		Sender:       f.user(pusher, ""),
		Installation: f.installation(f.installations[strings.ToLower(r.owner)], r.owner, true),
	}
	return event("push", ev)
}

func changesAsFiles(ch map[string]change) map[string]string {
	out := make(map[string]string, len(ch))
	for p, c := range ch {
		out[p] = c.content
	}
	return out
}

// PullRequestPayload returns the pull_request payload GitHub would send
// now for a pull request and action (opened, synchronize, closed, ...),
// sent by its author: for DeliverTampered and Deliver. Nil (and misuse)
// when the pull request does not exist.
func (f *Fake) PullRequestPayload(repo string, n int, action string) json.RawMessage {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, p := f.mustPull(repo, n)
	if p == nil {
		return nil
	}
	return f.pullRequestEvent(r, p, action, p.author, "", "", "")
}

// IssueCommentPayload returns the issue_comment payload GitHub would send
// for a comment and action (created, edited), sent by its author. Nil (and
// misuse) when the comment does not exist.
func (f *Fake) IssueCommentPayload(repo string, commentID int64, action string) *gh.IssueCommentEvent {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.mustRepo(repo)
	if r == nil {
		return nil
	}
	for _, cm := range r.comments {
		if cm.id == commentID {
			return f.issueCommentEvent(r, cm, action, cm.author, cm.authorType, nil)
		}
	}
	f.misusef("no comment %d in %s", commentID, repo)
	return nil
}
