package github

import (
	"encoding/json"
	"errors"
	"fmt"

	gh "github.com/google/go-github/v88/github"

	"github.com/gapless-dev/gapless/codehost"
)

// ParseWebhook turns a delivery's body into a codehost.Event. It does not
// verify the delivery: the caller calls codehost.VerifySignature first.
//
// Every event gets Kind (eventType), DeliveryID, and, when the payload
// carries them, Action, Repo, InstallationID and Sender. pull_request adds
// Number and PR; issue_comment adds Number, Comment and OnPR; push adds Ref
// and After; check_run and check_suite (a re-run asked for) add After (the
// head) and Number (the first pull request GitHub lists, 0 when none). A body that is not a JSON object is an error naming the
// event; an unknown event type is not (the caller ignores what it does not
// handle).
func ParseWebhook(eventType, deliveryID string, body []byte) (codehost.Event, error) {
	if eventType == "" {
		return codehost.Event{}, errors.New("github: webhook: the event type (X-GitHub-Event) is empty")
	}
	ev := codehost.Event{Kind: eventType, DeliveryID: deliveryID}
	var common struct {
		Action     string `json:"action"`
		Repository *struct {
			FullName string `json:"full_name"`
		} `json:"repository"`
		Installation *struct {
			ID int64 `json:"id"`
		} `json:"installation"`
		Sender *struct {
			Login string `json:"login"`
		} `json:"sender"`
	}
	if err := json.Unmarshal(body, &common); err != nil {
		return codehost.Event{}, fmt.Errorf("github: webhook: the %s delivery %q is not a JSON object: %w", eventType, deliveryID, err)
	}
	ev.Action = common.Action
	if common.Repository != nil {
		ev.Repo = common.Repository.FullName
	}
	if common.Installation != nil {
		ev.InstallationID = common.Installation.ID
	}
	if common.Sender != nil {
		ev.Sender = common.Sender.Login
	}

	switch eventType {
	case "pull_request":
		var p gh.PullRequestEvent
		if err := json.Unmarshal(body, &p); err != nil {
			return codehost.Event{}, fmt.Errorf("github: webhook: the pull_request delivery %q: %w", deliveryID, err)
		}
		if p.PullRequest == nil {
			return codehost.Event{}, fmt.Errorf("github: webhook: the pull_request delivery %q carries no pull_request", deliveryID)
		}
		ev.Number = p.GetNumber()
		if ev.Number == 0 {
			ev.Number = p.PullRequest.GetNumber()
		}
		ev.PR = toPR(ev.Repo, p.PullRequest)
	case "issue_comment":
		var p gh.IssueCommentEvent
		if err := json.Unmarshal(body, &p); err != nil {
			return codehost.Event{}, fmt.Errorf("github: webhook: the issue_comment delivery %q: %w", deliveryID, err)
		}
		if p.Issue == nil || p.Comment == nil {
			return codehost.Event{}, fmt.Errorf("github: webhook: the issue_comment delivery %q carries no issue or comment", deliveryID)
		}
		ev.Number = p.Issue.GetNumber()
		ev.OnPR = p.Issue.IsPullRequest()
		c := toComment(p.Comment)
		ev.Comment = &c
	case "push":
		var p gh.PushEvent
		if err := json.Unmarshal(body, &p); err != nil {
			return codehost.Event{}, fmt.Errorf("github: webhook: the push delivery %q: %w", deliveryID, err)
		}
		ev.Ref = p.GetRef()
		ev.After = p.GetAfter()
	case "check_run":
		// A person pressed "Re-run" on one of the App's check runs
		// (action rerequested): After is the run's head and Number the
		// first pull request GitHub lists for it.
		var p gh.CheckRunEvent
		if err := json.Unmarshal(body, &p); err != nil {
			return codehost.Event{}, fmt.Errorf("github: webhook: the check_run delivery %q: %w", deliveryID, err)
		}
		if p.CheckRun == nil {
			return codehost.Event{}, fmt.Errorf("github: webhook: the check_run delivery %q carries no check_run", deliveryID)
		}
		ev.After = p.CheckRun.GetHeadSHA()
		if prs := p.CheckRun.PullRequests; len(prs) > 0 {
			ev.Number = prs[0].GetNumber()
		}
	case "check_suite":
		// "Re-run all checks" (action rerequested).
		var p gh.CheckSuiteEvent
		if err := json.Unmarshal(body, &p); err != nil {
			return codehost.Event{}, fmt.Errorf("github: webhook: the check_suite delivery %q: %w", deliveryID, err)
		}
		if p.CheckSuite == nil {
			return codehost.Event{}, fmt.Errorf("github: webhook: the check_suite delivery %q carries no check_suite", deliveryID)
		}
		ev.After = p.CheckSuite.GetHeadSHA()
		if prs := p.CheckSuite.PullRequests; len(prs) > 0 {
			ev.Number = prs[0].GetNumber()
		}
	}
	return ev, nil
}
