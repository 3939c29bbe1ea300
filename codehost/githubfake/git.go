package githubfake

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/gapless-dev/gapless/codehost"
)

// repo is one repository: its commits, branches, pull requests, comments,
// check runs, collaborators and branch protection.
type repo struct {
	id            int64
	owner, name   string
	defaultBranch string
	createdAt     time.Time

	branches map[string]string  // branch -> head sha
	commits  map[string]*commit // by sha
	prs      map[int]*pull
	next     int // the next issue number

	comments  []*comment                     // ascending id
	checkRuns []*checkRun                    // ascending id
	perms     map[string]codehost.Permission // by lower-case login
	protected map[string][]string            // branch -> required check names
	// testMerges remembers each (base, head) test merge, so recomputing an
	// unchanged pull request gives the same merge_commit_sha.
	testMerges map[[2]string]string
}

func (r *repo) full() string { return r.owner + "/" + r.name }

// commit is one commit: its whole tree (path -> content), its parents.
type commit struct {
	sha     string
	parents []string
	files   map[string]string
	message string
	author  string
	at      time.Time
	gen     int // 1 + the highest parent's gen: orders ancestors
}

// pull is one pull request.
type pull struct {
	id                  int64
	number              int
	title, author, body string
	head, base          string // branch names
	headSHA             string
	draft               bool
	state               string // open, closed
	merged              bool
	mergedBy            string
	mergeSHA            string // the merge commit once merged
	createdAt           time.Time
	updatedAt           time.Time
	closedAt, mergedAt  time.Time

	// The test merge, as last computed.
	computed  bool   // false: mergeable is null (LazyMergeability)
	conflict  bool   // head and base changed one file differently
	testMerge string // its sha (empty on a conflict)
	baseSHA   string // the base head it was computed on
	override  *mergeOverride
}

// mergeOverride is what SetMergeable imposed, until the pull request is
// recomputed or the override is cleared.
type mergeOverride struct {
	mergeable *bool
	state     string
}

type comment struct {
	id         int64
	number     int
	body       string
	author     string
	authorType string // User or Bot
	createdAt  time.Time
	updatedAt  time.Time
	reactions  []*reaction
}

type reaction struct {
	id        int64
	content   string
	user      string
	userType  string
	createdAt time.Time
}

type checkRun struct {
	id                     int64
	suiteID                int64
	headSHA, name          string
	externalID, detailsURL string
	status, conclusion     string
	startedAt, completedAt time.Time
	hasOutput              bool
	title, summary, text   string
	appID                  int64
	appSlug                string
}

// newCommit adds a commit whose tree is files (taken, not copied) and
// returns it. Its sha is a SHA-1 over its content, parents and a sequence
// number, so two commits never share one. Call with f.mu held.
func (f *Fake) newCommit(r *repo, parents []string, files map[string]string, message, author string) *commit {
	f.seq++
	h := sha1.New()
	fmt.Fprintf(h, "commit %d\x00%s\x00%s\x00%s\x00", f.seq, r.full(), strings.Join(parents, ","), message)
	paths := sortedPaths(files)
	for _, p := range paths {
		fmt.Fprintf(h, "%s\x00%d\x00%s\x00", p, len(files[p]), files[p])
	}
	c := &commit{
		sha:     hex.EncodeToString(h.Sum(nil)),
		parents: parents,
		files:   files,
		message: message,
		author:  author,
		at:      f.now(),
		gen:     1,
	}
	for _, p := range parents {
		if pc := r.commits[p]; pc != nil && pc.gen+1 > c.gen {
			c.gen = pc.gen + 1
		}
	}
	r.commits[c.sha] = c
	return c
}

func sortedPaths(files map[string]string) []string {
	out := make([]string, 0, len(files))
	for p := range files {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

func copyFiles(in map[string]string) map[string]string {
	out := make(map[string]string, len(in))
	for k, v := range in {
		out[k] = v
	}
	return out
}

// ancestors returns every commit reachable from sha, itself included.
func (r *repo) ancestors(sha string) map[string]bool {
	seen := map[string]bool{}
	stack := []string{sha}
	for len(stack) > 0 {
		s := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[s] || r.commits[s] == nil {
			continue
		}
		seen[s] = true
		stack = append(stack, r.commits[s].parents...)
	}
	return seen
}

// mergeBase is the best common ancestor of a and b: the common ancestor
// with the highest generation (ties broken by sha, so it is
// deterministic). Empty when they share none.
func (r *repo) mergeBase(a, b string) string {
	inA := r.ancestors(a)
	best := ""
	for s := range r.ancestors(b) {
		if !inA[s] {
			continue
		}
		if best == "" || r.commits[s].gen > r.commits[best].gen ||
			(r.commits[s].gen == r.commits[best].gen && s < best) {
			best = s
		}
	}
	return best
}

// change is one path's content after a change; gone means deleted.
type change struct {
	content string
	gone    bool
}

// diffTrees returns the paths whose content differs from old to new.
func diffTrees(oldFiles, newFiles map[string]string) map[string]change {
	out := map[string]change{}
	for p, c := range newFiles {
		if o, ok := oldFiles[p]; !ok || o != c {
			out[p] = change{content: c}
		}
	}
	for p := range oldFiles {
		if _, ok := newFiles[p]; !ok {
			out[p] = change{gone: true}
		}
	}
	return out
}

// threeWay merges head into base as GitHub's test merge does: base's tree
// overlaid with the paths head changed since their merge base. A path
// both sides changed, to different results, is a conflict.
func (r *repo) threeWay(baseSHA, headSHA string) (files map[string]string, conflict bool) {
	base, head := r.commits[baseSHA], r.commits[headSHA]
	var mbFiles map[string]string
	if mb := r.mergeBase(baseSHA, headSHA); mb != "" {
		mbFiles = r.commits[mb].files
	}
	headChanges := diffTrees(mbFiles, head.files)
	baseChanges := diffTrees(mbFiles, base.files)
	files = copyFiles(base.files)
	for p, hc := range headChanges {
		if bc, both := baseChanges[p]; both && bc != hc {
			conflict = true
			continue
		}
		if hc.gone {
			delete(files, p)
		} else {
			files[p] = hc.content
		}
	}
	return files, conflict
}

// recompute refreshes a pull request's test merge against its base's
// current head, clearing any SetMergeable override. Under
// LazyMergeability the result stays hidden (mergeable null) until
// SettleMergeability. Call with f.mu held.
func (f *Fake) recompute(r *repo, p *pull) {
	p.override = nil
	p.computed = false
	p.testMerge = ""
	p.conflict = false
	if p.state != "open" {
		return
	}
	if !f.opts.LazyMergeability {
		f.settle(r, p)
	}
}

// settle computes a pull request's test merge now. Call with f.mu held.
func (f *Fake) settle(r *repo, p *pull) {
	baseSHA := r.branches[p.base]
	p.baseSHA = baseSHA
	p.computed = true
	files, conflict := r.threeWay(baseSHA, p.headSHA)
	p.conflict = conflict
	if conflict {
		p.testMerge = ""
		return
	}
	key := [2]string{baseSHA, p.headSHA}
	if sha, ok := r.testMerges[key]; ok {
		p.testMerge = sha
		return
	}
	msg := fmt.Sprintf("Merge %s into %s", p.headSHA, baseSHA)
	c := f.newCommit(r, []string{baseSHA, p.headSHA}, files, msg, "GitHub")
	r.testMerges[key] = c.sha
	p.testMerge = c.sha
}

// resolveRef turns a ref (a full or abbreviated sha, a branch, or
// refs/heads/<branch>) into a commit sha; empty when it names nothing.
func (r *repo) resolveRef(ref string) string {
	ref = strings.TrimPrefix(ref, "refs/heads/")
	if sha, ok := r.branches[ref]; ok {
		return sha
	}
	if _, ok := r.commits[ref]; ok {
		return ref
	}
	if len(ref) >= 4 && len(ref) < 40 {
		found := ""
		for sha := range r.commits {
			if strings.HasPrefix(sha, strings.ToLower(ref)) {
				if found != "" {
					return "" // ambiguous
				}
				found = sha
			}
		}
		return found
	}
	return ""
}

// tarball builds a commit's tree as GitHub's legacy.tar.gz does (git
// archive): a pax global header whose comment is the commit's sha, then
// every entry under one top folder "<owner>-<repo>-<sha7>/", directories
// before their contents.
func (r *repo) tarball(c *commit) ([]byte, error) {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	top := fmt.Sprintf("%s-%s-%s/", r.owner, r.name, c.sha[:7])
	if err := tw.WriteHeader(&tar.Header{
		Typeflag:   tar.TypeXGlobalHeader,
		Name:       "pax_global_header",
		PAXRecords: map[string]string{"comment": c.sha},
		Format:     tar.FormatPAX,
	}); err != nil {
		return nil, fmt.Errorf("githubfake: writing the tarball's pax header: %w", err)
	}
	dirs := map[string]bool{}
	writeDir := func(name string) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: 0o775, ModTime: c.at})
	}
	if err := writeDir(top); err != nil {
		return nil, fmt.Errorf("githubfake: writing the tarball's top folder: %w", err)
	}
	for _, p := range sortedPaths(c.files) {
		// Parent folders first, each once.
		var parents []string
		for d := path.Dir(p); d != "." && d != "/"; d = path.Dir(d) {
			parents = append([]string{d}, parents...)
		}
		for _, d := range parents {
			if dirs[d] {
				continue
			}
			dirs[d] = true
			if err := writeDir(top + d + "/"); err != nil {
				return nil, fmt.Errorf("githubfake: writing folder %s: %w", d, err)
			}
		}
		body := c.files[p]
		if err := tw.WriteHeader(&tar.Header{
			Typeflag: tar.TypeReg, Name: top + p, Mode: 0o664, Size: int64(len(body)), ModTime: c.at,
		}); err != nil {
			return nil, fmt.Errorf("githubfake: writing %s: %w", p, err)
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			return nil, fmt.Errorf("githubfake: writing %s: %w", p, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("githubfake: closing the tarball: %w", err)
	}
	if err := gz.Close(); err != nil {
		return nil, fmt.Errorf("githubfake: closing the tarball's gzip: %w", err)
	}
	return buf.Bytes(), nil
}
