package githubfake

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/gapless-dev/gapless/codehost"
)

// checkRunRequest is the body of POST and PATCH check-runs.
type checkRunRequest struct {
	Name        *string `json:"name"`
	HeadSHA     *string `json:"head_sha"`
	DetailsURL  *string `json:"details_url"`
	ExternalID  *string `json:"external_id"`
	Status      *string `json:"status"`
	Conclusion  *string `json:"conclusion"`
	StartedAt   *string `json:"started_at"`
	CompletedAt *string `json:"completed_at"`
	Output      *struct {
		Title   *string `json:"title"`
		Summary *string `json:"summary"`
		Text    *string `json:"text"`
	} `json:"output"`
}

// The statuses and conclusions an App may set. GitHub documents more
// statuses (waiting, requested, pending) that "only GitHub Actions can
// set", and the conclusion stale that only GitHub sets.
var (
	appStatuses    = map[string]bool{"queued": true, "in_progress": true, "completed": true}
	appConclusions = map[string]bool{
		"action_required": true, "cancelled": true, "failure": true, "neutral": true,
		"success": true, "skipped": true, "timed_out": true,
	}
)

// maxOutputBytes: a check run's output.summary and output.text are refused
// past 65535 (docs: "Maximum length: 65535 characters"). GitHub counts
// bytes, not characters ("summary exceeds a maximum bytesize of 65535",
// github/docs#35252), so the fake does too: multi-byte text hits the limit
// sooner.
const maxOutputBytes = codehost.MaxBodyLength

// applyCheckRun validates a create or update and applies it to cr. It
// answers 422 as GitHub does and returns false when the request is
// refused; cr is then unchanged.
func (c *call) applyCheckRun(cr *checkRun, req *checkRunRequest, creating bool) bool {
	next := *cr
	if req.Name != nil {
		if *req.Name == "" {
			c.errorf(http.StatusUnprocessableEntity, "Invalid request.\n\n\"name\" wasn't supplied.")
			return false
		}
		next.name = *req.Name
	}
	if req.DetailsURL != nil {
		next.detailsURL = *req.DetailsURL
	}
	if req.ExternalID != nil {
		next.externalID = *req.ExternalID
	}
	if req.Status != nil {
		if !appStatuses[*req.Status] {
			c.errorf(http.StatusUnprocessableEntity, fmt.Sprintf(
				"Invalid request.\n\nFor 'properties/status', %q is not one of [\"queued\", \"in_progress\", \"completed\"].", *req.Status))
			return false
		}
		next.status = *req.Status
		if next.status != "completed" {
			next.conclusion, next.completedAt = "", time.Time{}
		}
	}
	if req.Conclusion != nil {
		if !appConclusions[*req.Conclusion] {
			c.errorf(http.StatusUnprocessableEntity, fmt.Sprintf(
				"Invalid request.\n\nFor 'properties/conclusion', %q is not one of [\"action_required\", \"cancelled\", \"failure\", \"neutral\", \"success\", \"skipped\", \"timed_out\"].", *req.Conclusion))
			return false
		}
		// "Providing conclusion will automatically set the status
		// parameter to completed."
		next.conclusion = *req.Conclusion
		next.status = "completed"
	}
	if next.status == "" {
		next.status = "queued"
	}
	parse := func(field string, v *string) (time.Time, bool) {
		t, err := time.Parse(time.RFC3339, *v)
		if err != nil {
			c.errorf(http.StatusUnprocessableEntity, fmt.Sprintf("Invalid request.\n\nFor 'properties/%s', %q is not a date-time.", field, *v))
			return time.Time{}, false
		}
		return t.UTC().Truncate(time.Second), true
	}
	if req.StartedAt != nil {
		t, ok := parse("started_at", req.StartedAt)
		if !ok {
			return false
		}
		next.startedAt = t
	}
	if req.CompletedAt != nil {
		t, ok := parse("completed_at", req.CompletedAt)
		if !ok {
			return false
		}
		next.completedAt = t
		if next.conclusion == "" {
			c.errorf(http.StatusUnprocessableEntity, "Invalid request.\n\n\"conclusion\" wasn't supplied.")
			return false
		}
		next.status = "completed"
	}
	// conclusion is "Required if you provide completed_at or a status of
	// completed".
	if next.status == "completed" && next.conclusion == "" {
		c.errorf(http.StatusUnprocessableEntity, "Invalid request.\n\n\"conclusion\" wasn't supplied.")
		return false
	}
	if next.status == "completed" && next.completedAt.IsZero() {
		next.completedAt = c.f.now()
	}
	if next.startedAt.IsZero() {
		next.startedAt = c.f.now()
	}
	if o := req.Output; o != nil {
		if o.Title == nil && (creating || !next.hasOutput) {
			c.errorf(http.StatusUnprocessableEntity, "Invalid request.\n\n\"title\" wasn't supplied.")
			return false
		}
		if o.Summary == nil && (creating || !next.hasOutput) {
			c.errorf(http.StatusUnprocessableEntity, "Invalid request.\n\n\"summary\" wasn't supplied.")
			return false
		}
		if o.Summary != nil && len(*o.Summary) > maxOutputBytes {
			c.invalid("CheckRun", "custom", "summary", fmt.Sprintf("summary exceeds a maximum bytesize of %d", maxOutputBytes))
			return false
		}
		if o.Text != nil && len(*o.Text) > maxOutputBytes {
			c.invalid("CheckRun", "custom", "text", fmt.Sprintf("text exceeds a maximum bytesize of %d", maxOutputBytes))
			return false
		}
		next.hasOutput = true
		if o.Title != nil {
			next.title = *o.Title
		}
		if o.Summary != nil {
			next.summary = *o.Summary
		}
		if o.Text != nil {
			next.text = *o.Text
		}
	}
	*cr = next
	return true
}

// createCheckRun answers POST /repos/{owner}/{repo}/check-runs with 201
// and the run. The run belongs to the caller's App (app.slug): the fake
// App for an installation token, GitHub Actions for a GITHUB_TOKEN-like
// PersonalToken. head_sha must be a commit of the repository (422 "No
// commit found for SHA" otherwise). GitHub keeps every run created, even
// several per (head_sha, name): upserting is the caller's job.
func (f *Fake) createCheckRun(c *call) {
	var req checkRunRequest
	if !c.decode(&req) {
		return
	}
	r := c.repo
	if req.Name == nil || *req.Name == "" {
		c.errorf(http.StatusUnprocessableEntity, "Invalid request.\n\n\"name\" wasn't supplied.")
		return
	}
	if req.HeadSHA == nil || *req.HeadSHA == "" {
		c.errorf(http.StatusUnprocessableEntity, "Invalid request.\n\n\"head_sha\" wasn't supplied.")
		return
	}
	if r.commits[*req.HeadSHA] == nil {
		c.errorf(http.StatusUnprocessableEntity, "No commit found for SHA: "+*req.HeadSHA)
		return
	}
	cr := &checkRun{headSHA: *req.HeadSHA, appID: c.actor.appID, appSlug: c.actor.appSlug}
	if !c.applyCheckRun(cr, &req, true) {
		return
	}
	cr.id = f.nextID("check")
	cr.suiteID = f.suiteID(r, cr.appID, cr.headSHA)
	r.checkRuns = append(r.checkRuns, cr)
	f.logCheckRun(r, cr, true)
	c.status, c.out = http.StatusCreated, f.checkRunJSON(r, cr)
}

// suiteID is the check suite of an App's runs on a commit: one per (App,
// head).
func (f *Fake) suiteID(r *repo, appID int64, head string) int64 {
	for _, cr := range r.checkRuns {
		if cr.appID == appID && cr.headSHA == head {
			return cr.suiteID
		}
	}
	return f.nextID("suite")
}

// findCheckRun resolves {id} within the call's repository; false answers
// 404.
func (c *call) findCheckRun() (*checkRun, bool) {
	id, err := strconv.ParseInt(c.param("id"), 10, 64)
	if err == nil {
		for _, cr := range c.repo.checkRuns {
			if cr.id == id {
				return cr, true
			}
		}
	}
	c.errorf(http.StatusNotFound, notFoundMessage)
	return nil, false
}

// updateCheckRun answers PATCH /repos/{owner}/{repo}/check-runs/{id}: the
// fields given change, with the same validation as a create. Only the App
// that created a run may update it (403 otherwise, the fake's reading of
// GitHub's "Resource not accessible by integration").
func (f *Fake) updateCheckRun(c *call) {
	cr, ok := c.findCheckRun()
	if !ok {
		return
	}
	var req checkRunRequest
	if !c.decode(&req) {
		return
	}
	if cr.appID != c.actor.appID {
		c.errorf(http.StatusForbidden, resourceNotAccessible)
		return
	}
	if c.lose {
		c.status, c.out = http.StatusOK, f.checkRunJSON(c.repo, cr)
		return
	}
	if !c.applyCheckRun(cr, &req, false) {
		return
	}
	f.logCheckRun(c.repo, cr, false)
	c.status, c.out = http.StatusOK, f.checkRunJSON(c.repo, cr)
}

// getCheckRun answers GET /repos/{owner}/{repo}/check-runs/{id}.
func (f *Fake) getCheckRun(c *call) {
	cr, ok := c.findCheckRun()
	if !ok {
		return
	}
	c.status, c.out = http.StatusOK, f.checkRunJSON(c.repo, cr)
}

// listCheckRuns answers GET /repos/{owner}/{repo}/commits/{ref}/check-runs
// with {total_count, check_runs}, ascending by id, paged with a Link
// header. check_name, status and app_id filter; filter=latest (the
// default) keeps only each App's newest run of each name, filter=all every
// run. An unknown ref is 422 "No commit found for SHA".
func (f *Fake) listCheckRuns(c *call) {
	r := c.repo
	sha := r.resolveRef(c.param("ref"))
	if sha == "" {
		c.errorf(http.StatusUnprocessableEntity, "No commit found for SHA: "+c.param("ref"))
		return
	}
	q := c.r.URL.Query()
	filter := q.Get("filter")
	if filter == "" {
		filter = "latest"
	}
	if filter != "latest" && filter != "all" {
		c.errorf(http.StatusUnprocessableEntity, fmt.Sprintf("Invalid request.\n\nFor 'filter', %q is not one of [\"latest\", \"all\"].", filter))
		return
	}
	name, status := q.Get("check_name"), q.Get("status")
	var appID int64
	if v := q.Get("app_id"); v != "" {
		id, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			c.errorf(http.StatusUnprocessableEntity, "Invalid request.\n\nFor 'app_id', "+strconv.Quote(v)+" is not an integer.")
			return
		}
		appID = id
	}
	newest := map[string]int64{} // app/name -> newest id
	for _, cr := range r.checkRuns {
		if cr.headSHA == sha {
			k := fmt.Sprintf("%d/%s", cr.appID, cr.name)
			if cr.id > newest[k] {
				newest[k] = cr.id
			}
		}
	}
	var runs []*checkRun
	for _, cr := range r.checkRuns {
		if cr.headSHA != sha || (name != "" && cr.name != name) || (status != "" && cr.status != status) ||
			(appID != 0 && cr.appID != appID) {
			continue
		}
		if filter == "latest" && newest[fmt.Sprintf("%d/%s", cr.appID, cr.name)] != cr.id {
			continue
		}
		runs = append(runs, cr)
	}
	pg := parsePage(q)
	lo, hi := pg.window(len(runs))
	items := make([]json.RawMessage, 0, hi-lo)
	for _, cr := range runs[lo:hi] {
		items = append(items, f.checkRunJSON(r, cr))
	}
	c.link(pg, len(runs))
	c.json(http.StatusOK, struct {
		TotalCount int               `json:"total_count"`
		CheckRuns  []json.RawMessage `json:"check_runs"`
	}{len(runs), items})
}

// CheckRunChange is one check run created or updated through the API, as
// it stood after the change.
type CheckRunChange struct {
	At      time.Time // on the fake clock
	Repo    string
	Created bool
	Run     codehost.CheckRun
}

// logCheckRun records a change. Call with f.mu held.
func (f *Fake) logCheckRun(r *repo, cr *checkRun, created bool) {
	f.checkLog = append(f.checkLog, CheckRunChange{At: f.clock.Now(), Repo: r.full(), Created: created, Run: toCheckRun(cr)})
}

// CheckRunLog returns every check-run change made through the API, in
// order: what the oracle "was a merge possible at time t" replays.
func (f *Fake) CheckRunLog() []CheckRunChange {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]CheckRunChange(nil), f.checkLog...)
}

func toCheckRun(cr *checkRun) codehost.CheckRun {
	return codehost.CheckRun{
		ID:          cr.id,
		HeadSHA:     cr.headSHA,
		Name:        cr.name,
		ExternalID:  cr.externalID,
		DetailsURL:  cr.detailsURL,
		Status:      codehost.CheckStatus(cr.status),
		Conclusion:  codehost.Conclusion(cr.conclusion),
		Title:       cr.title,
		Summary:     cr.summary,
		Text:        cr.text,
		StartedAt:   cr.startedAt,
		CompletedAt: cr.completedAt,
		AppSlug:     cr.appSlug,
	}
}
