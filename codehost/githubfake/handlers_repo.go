package githubfake

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	gh "github.com/google/go-github/v88/github"

	"github.com/gapless-dev/gapless/codehost"
)

// getApp answers GET /app (JWT): the App itself.
func (f *Fake) getApp(c *call) { c.json(http.StatusOK, f.appObject()) }

// getRepoInstallation answers GET /repos/{owner}/{repo}/installation
// (JWT): the installation that covers the repository.
func (f *Fake) getRepoInstallation(c *call) {
	owner := strings.ToLower(c.repo.owner)
	c.json(http.StatusOK, f.installation(f.installations[owner], c.repo.owner, false))
}

// createAccessToken answers POST /app/installations/{id}/access_tokens
// (JWT) with 201 {token, expires_at, permissions, repository_selection}:
// a token valid for one hour on the fake clock.
func (f *Fake) createAccessToken(c *call) {
	id, err := strconv.ParseInt(c.param("id"), 10, 64)
	if err != nil {
		c.errorf(http.StatusNotFound, notFoundMessage)
		return
	}
	tok, expires, err := f.mintInstallationToken(id)
	if err != nil {
		c.errorf(http.StatusNotFound, notFoundMessage)
		return
	}
	c.json(http.StatusCreated, struct {
		*gh.InstallationToken
		RepositorySelection string `json:"repository_selection"`
	}{
		InstallationToken: &gh.InstallationToken{
			Token: gh.Ptr(tok), ExpiresAt: ts(expires), Permissions: f.permissions(),
		},
		RepositorySelection: "all",
	})
}

// getRepo answers GET /repos/{owner}/{repo}.
func (f *Fake) getRepo(c *call) { c.json(http.StatusOK, f.repository(c.repo)) }

// getCommit answers GET /repos/{owner}/{repo}/commits/{ref}; an unknown
// ref is 422 "No commit found for SHA: <ref>", as GitHub answers.
func (f *Fake) getCommit(c *call) {
	r := c.repo
	sha := r.resolveRef(c.param("ref"))
	if sha == "" {
		c.errorf(http.StatusUnprocessableEntity, "No commit found for SHA: "+c.param("ref"))
		return
	}
	cm := r.commits[sha]
	author := &gh.CommitAuthor{Name: gh.Ptr(cm.author), Email: gh.Ptr(cm.author + "@users.noreply.invalid"), Date: ts(cm.at)}
	parents := make([]*gh.Commit, 0, len(cm.parents))
	for _, p := range cm.parents {
		parents = append(parents, &gh.Commit{SHA: gh.Ptr(p), URL: gh.Ptr(f.apiURL(r, "/commits/"+p))})
	}
	c.json(http.StatusOK, &gh.RepositoryCommit{
		SHA:    gh.Ptr(sha),
		NodeID: gh.Ptr(nodeID("Commit", int64(len(sha)))),
		Commit: &gh.Commit{
			Message: gh.Ptr(cm.message), Author: author, Committer: author,
			Tree: &gh.Tree{SHA: gh.Ptr(sha)}, URL: gh.Ptr(f.apiURL(r, "/git/commits/"+sha)),
		},
		Parents: parents,
		HTMLURL: gh.Ptr(f.htmlURL(r, "/commit/"+sha)),
		URL:     gh.Ptr(f.apiURL(r, "/commits/"+sha)),
	})
}

// tarballLink answers GET /repos/{owner}/{repo}/tarball/{ref} with 302 and
// a Location on the fake's own codeload route, carrying a token valid for
// five minutes on the fake clock (GitHub: "this link is temporary and
// expires after five minutes" for a private repository).
func (f *Fake) tarballLink(c *call) {
	r := c.repo
	sha := r.resolveRef(c.param("ref"))
	if sha == "" {
		c.errorf(http.StatusNotFound, notFoundMessage)
		return
	}
	tok := randomHex(16)
	f.archives[tok] = archiveGrant{repo: repoKey(r.full()), sha: sha, expires: f.clock.Now().Add(archiveTTL)}
	c.status = http.StatusFound
	c.header.Set("Location", fmt.Sprintf("%s_codeload/%s/%s/legacy.tar.gz/%s?token=%s", f.URL(), r.owner, r.name, sha, tok))
	c.header.Set("Content-Type", "text/html;charset=utf-8")
}

// archiveGrant is one tarball link's token.
type archiveGrant struct {
	repo, sha string
	expires   time.Time
}

// codeload serves a tarball link: the commit's tree as GitHub's
// legacy.tar.gz, or a plain 404 when the token is unknown, expired or for
// another archive. It needs no Authorization header, like codeload.
func (f *Fake) codeload(c *call) {
	g, ok := f.archives[c.r.URL.Query().Get("token")]
	r := f.lookupRepo(c.param("owner") + "/" + c.param("repo"))
	if !ok || r == nil || g.repo != repoKey(r.full()) || g.sha != c.param("ref") || !f.clock.Now().Before(g.expires) {
		c.status, c.out = http.StatusNotFound, []byte("404: Not Found")
		c.header.Set("Content-Type", "text/plain; charset=utf-8")
		return
	}
	cm := r.commits[g.sha]
	body, err := r.tarball(cm)
	if err != nil {
		c.errorf(http.StatusInternalServerError, err.Error())
		return
	}
	c.status, c.out = http.StatusOK, body
	c.header.Set("Content-Type", "application/x-gzip")
	c.header.Set("Content-Disposition", fmt.Sprintf("attachment; filename=%s-%s-%s.tar.gz", r.owner, r.name, g.sha[:7]))
}

// getPermission answers GET
// /repos/{owner}/{repo}/collaborators/{user}/permission:
// {permission, role_name, user}. As GitHub documents, permission carries
// the legacy roles admin, write, read and none: maintain maps to write and
// triage to read, while role_name keeps the full role.
func (f *Fake) getPermission(c *call) {
	login := c.param("user")
	p := c.repo.perms[strings.ToLower(login)]
	if p == "" {
		p = codehost.PermissionNone
		if strings.EqualFold(login, c.repo.owner) {
			p = codehost.PermissionAdmin
		}
	}
	legacy := string(p)
	switch p {
	case codehost.PermissionMaintain:
		legacy = "write"
	case codehost.PermissionTriage:
		legacy = "read"
	}
	c.json(http.StatusOK, &gh.RepositoryPermissionLevel{
		Permission: gh.Ptr(legacy),
		RoleName:   gh.Ptr(string(p)),
		User:       f.user(login, ""),
	})
}

// requiredChecks renders a branch's required status checks as branch
// protection does: contexts (the deprecated list) and checks, each with
// app_id null (any App may provide it).
func (f *Fake) requiredChecks(r *repo, branch string, names []string) *gh.RequiredStatusChecks {
	contexts := append([]string{}, names...)
	checks := make([]*gh.RequiredStatusCheck, 0, len(names))
	for _, n := range names {
		checks = append(checks, &gh.RequiredStatusCheck{Context: n})
	}
	base := f.apiURL(r, "/branches/"+branch+"/protection/required_status_checks")
	return &gh.RequiredStatusChecks{
		Strict:      false,
		Contexts:    &contexts,
		Checks:      &checks,
		URL:         gh.Ptr(base),
		ContextsURL: gh.Ptr(base + "/contexts"),
	}
}

// getProtection answers GET /repos/{owner}/{repo}/branches/{branch}/protection:
// the protection with its required_status_checks {strict, contexts,
// checks: [{context, app_id}]}, or 404 "Branch not protected".
func (f *Fake) getProtection(c *call) {
	r := c.repo
	branch := c.param("branch")
	if _, ok := r.branches[branch]; !ok {
		c.errorf(http.StatusNotFound, "Branch not found")
		return
	}
	names, ok := r.protected[branch]
	if !ok {
		c.errorf(http.StatusNotFound, "Branch not protected")
		return
	}
	body := withNulls(&gh.Protection{
		URL:                  gh.Ptr(f.apiURL(r, "/branches/"+branch+"/protection")),
		RequiredStatusChecks: f.requiredChecks(r, branch, names),
		EnforceAdmins:        &gh.AdminEnforcement{Enabled: false, URL: gh.Ptr(f.apiURL(r, "/branches/"+branch+"/protection/enforce_admins"))},
		RequireLinearHistory: &gh.RequireLinearHistory{Enabled: false},
		AllowForcePushes:     &gh.AllowForcePushes{Enabled: false},
		AllowDeletions:       &gh.AllowDeletions{Enabled: false},
	})
	c.status, c.out = http.StatusOK, body
}

// getBranch answers GET /repos/{owner}/{repo}/branches/{branch}: its head
// and, when protected, protection.required_status_checks.
func (f *Fake) getBranch(c *call) {
	r := c.repo
	branch := c.param("branch")
	sha, ok := r.branches[branch]
	if !ok {
		c.errorf(http.StatusNotFound, "Branch not found")
		return
	}
	names, protected := r.protected[branch]
	out := struct {
		Name          string               `json:"name"`
		Commit        *gh.RepositoryCommit `json:"commit"`
		Protected     bool                 `json:"protected"`
		Protection    map[string]any       `json:"protection"`
		ProtectionURL string               `json:"protection_url"`
	}{
		Name:          branch,
		Commit:        &gh.RepositoryCommit{SHA: gh.Ptr(sha), URL: gh.Ptr(f.apiURL(r, "/commits/"+sha))},
		Protected:     protected,
		ProtectionURL: f.apiURL(r, "/branches/"+branch+"/protection"),
	}
	checks := map[string]any{"enforcement_level": "off", "contexts": []string{}, "checks": []any{}}
	if protected {
		list := make([]map[string]any, 0, len(names))
		for _, n := range names {
			list = append(list, map[string]any{"context": n, "app_id": nil})
		}
		checks = map[string]any{"enforcement_level": "non_admins", "contexts": append([]string{}, names...), "checks": list}
	}
	out.Protection = map[string]any{"enabled": protected, "required_status_checks": checks}
	c.json(http.StatusOK, out)
}
