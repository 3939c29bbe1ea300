package githubfake

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	gh "github.com/google/go-github/v88/github"

	"github.com/gapless-dev/gapless/codehost"
)

// commentTooLong is GitHub's refusal of a long comment body, verbatim. Its
// message names 65536, yet the fake refuses from 65536 characters on
// (codehost.MaxBodyLength is the longest it takes): one character stricter
// than GitHub's words, so code keeping to MaxBodyLength passes on both.
const commentTooLong = "Body is too long (maximum is 65536 characters)"

// listComments answers GET /repos/{owner}/{repo}/issues/{n}/comments. As
// GitHub documents, "Issue comments are ordered by ascending ID": the list
// is oldest first and ignores sort and direction (they belong to the
// repository-wide list). It honours since (comments updated at or after
// it), per_page (default 30, at most 100) and page, with a Link header.
func (f *Fake) listComments(c *call) {
	n, ok := c.number()
	if !ok {
		return
	}
	r := c.repo
	if r.prs[n] == nil {
		c.errorf(http.StatusNotFound, notFoundMessage)
		return
	}
	q := c.r.URL.Query()
	var since time.Time
	if v := q.Get("since"); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			c.invalid("IssueComment", "invalid", "since", "since is not a valid ISO 8601 timestamp")
			return
		}
		since = t
	}
	var list []*comment
	for _, cm := range r.comments {
		if cm.number == n && !cm.updatedAt.Before(since) {
			list = append(list, cm)
		}
	}
	pg := parsePage(q)
	lo, hi := pg.window(len(list))
	items := make([]*gh.IssueComment, 0, hi-lo)
	for _, cm := range list[lo:hi] {
		items = append(items, f.issueComment(r, cm))
	}
	c.link(pg, len(list))
	c.json(http.StatusOK, items)
}

// commentBody reads {body} and validates it as GitHub does: required, at
// most codehost.MaxBodyLength characters (422 otherwise).
func (c *call) commentBody() (string, bool) {
	var req struct {
		Body *string `json:"body"`
	}
	if !c.decode(&req) {
		return "", false
	}
	if req.Body == nil || *req.Body == "" {
		c.invalid("IssueComment", "missing_field", "body", "body wasn't supplied")
		return "", false
	}
	if utf8.RuneCountInString(*req.Body) > codehost.MaxBodyLength {
		c.invalid("IssueComment", "unprocessable", "data", commentTooLong)
		return "", false
	}
	return *req.Body, true
}

// createComment answers POST /repos/{owner}/{repo}/issues/{n}/comments
// with 201 and the comment, authored by the caller ("<slug>[bot]" for the
// App). Unless NoAPIEvents, GitHub's issue_comment "created" follows, even
// for the App's own comment.
func (f *Fake) createComment(c *call) {
	n, ok := c.number()
	if !ok {
		return
	}
	r := c.repo
	if r.prs[n] == nil {
		c.errorf(http.StatusNotFound, notFoundMessage)
		return
	}
	body, ok := c.commentBody()
	if !ok {
		return
	}
	cm := f.addComment(r, n, c.actor.login, c.actor.userType, body)
	if !f.opts.NoAPIEvents {
		c.events = append(c.events, f.issueCommentEventOut(r, cm, "created", c.actor.login, c.actor.userType, nil))
	}
	c.json(http.StatusCreated, f.issueComment(r, cm))
}

// addComment stores a new comment. Call with f.mu held.
func (f *Fake) addComment(r *repo, n int, author, authorType, body string) *comment {
	now := f.now()
	cm := &comment{id: f.nextID("comment"), number: n, body: body, author: author, authorType: authorType, createdAt: now, updatedAt: now}
	r.comments = append(r.comments, cm)
	if p := r.prs[n]; p != nil {
		p.updatedAt = now
	}
	return cm
}

// findComment resolves {id} within the call's repository; false answers
// 404.
func (c *call) findComment() (*comment, bool) {
	id, err := strconv.ParseInt(c.param("id"), 10, 64)
	if err == nil {
		for _, cm := range c.repo.comments {
			if cm.id == id {
				return cm, true
			}
		}
	}
	c.errorf(http.StatusNotFound, notFoundMessage)
	return nil, false
}

// getComment answers GET /repos/{owner}/{repo}/issues/comments/{id}.
func (f *Fake) getComment(c *call) {
	cm, ok := c.findComment()
	if !ok {
		return
	}
	c.json(http.StatusOK, f.issueComment(c.repo, cm))
}

// editComment answers PATCH /repos/{owner}/{repo}/issues/comments/{id}:
// the body is replaced and updated_at moves to now on the fake clock.
// Unless NoAPIEvents, issue_comment "edited" follows with changes.body.from.
func (f *Fake) editComment(c *call) {
	cm, ok := c.findComment()
	if !ok {
		return
	}
	body, ok := c.commentBody()
	if !ok {
		return
	}
	old := cm.body
	cm.body = body
	cm.updatedAt = f.now()
	if !f.opts.NoAPIEvents {
		changes := &gh.EditChange{Body: &gh.EditBody{From: gh.Ptr(old)}}
		c.events = append(c.events, f.issueCommentEventOut(c.repo, cm, "edited", c.actor.login, c.actor.userType, changes))
	}
	c.json(http.StatusOK, f.issueComment(c.repo, cm))
}

// reactionContents are the reactions GitHub takes.
var reactionContents = map[string]bool{
	"+1": true, "-1": true, "laugh": true, "confused": true, "heart": true, "hooray": true, "rocket": true, "eyes": true,
}

// createReaction answers POST
// /repos/{owner}/{repo}/issues/comments/{id}/reactions {content}: 201 with
// the new reaction, or 200 with the existing one when the caller already
// reacted so ("Using a status of 200 OK means that you already added the
// reaction type to this issue comment"); 422 for an unknown content.
func (f *Fake) createReaction(c *call) {
	cm, ok := c.findComment()
	if !ok {
		return
	}
	var req struct {
		Content *string `json:"content"`
	}
	if !c.decode(&req) {
		return
	}
	if req.Content == nil || !reactionContents[*req.Content] {
		c.invalid("Reaction", "invalid", "content", "content is not included in the list")
		return
	}
	for _, re := range cm.reactions {
		if re.content == *req.Content && re.user == c.actor.login {
			c.json(http.StatusOK, f.reactionObject(re))
			return
		}
	}
	re := &reaction{id: f.nextID("reaction"), content: *req.Content, user: c.actor.login, userType: c.actor.userType, createdAt: f.now()}
	cm.reactions = append(cm.reactions, re)
	c.json(http.StatusCreated, f.reactionObject(re))
}

func (f *Fake) reactionObject(re *reaction) json.RawMessage {
	return withNulls(&gh.Reaction{
		ID:        gh.Ptr(re.id),
		NodeID:    gh.Ptr(nodeID("Reaction", re.id)),
		User:      f.user(re.user, re.userType),
		Content:   gh.Ptr(re.content),
		CreatedAt: ts(re.createdAt),
	})
}
