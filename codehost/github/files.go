package github

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"path"
	"strings"
	"testing/fstest"

	"github.com/gapless-dev/gapless/codehost"
)

// Files returns the files of a commit, read from its tarball
// (GET /repos/{owner}/{repo}/tarball/{sha}, following GitHub's redirect to
// the archive host without sending it the API credential), unpacked in
// memory with the archive's top folder stripped, so the tree is rooted at
// the repository's root.
//
// An entry with an absolute path or a ".." element refuses the whole
// archive (ErrInvalid), as does an archive that unpacks to more than
// Config.MaxFilesBytes. A symbolic link (or hard link) to a file inside
// the tree reads as that file; one to a folder, outside the tree, dangling
// or looping is left out. Empty folders are kept.
func (c *Client) Files(ctx context.Context, repo, sha string) (fs.FS, error) {
	route := RouteTarball
	if sha == "" || strings.ContainsAny(sha, " /\\?#") || strings.Contains(sha, "..") {
		return nil, refuse(route, repo, "the commit %q is not a SHA", sha)
	}
	g, err := c.forRepo(ctx, route, repo)
	if err != nil {
		return nil, err
	}
	owner, name, _ := splitRepo(route, repo)
	ctx = withRoute(ctx, route)
	req, err := g.NewRequest(ctx, "GET", fmt.Sprintf("repos/%s/%s/tarball/%s", url.PathEscape(owner), url.PathEscape(name), url.PathEscape(sha)), nil)
	if err != nil {
		return nil, refuse(route, repo, "building the request: %v", err)
	}
	resp, err := g.BareDo(req)
	if err != nil {
		return nil, classify(ctx, c.clock.Now(), route, repo, resp, err)
	}
	files, err := untar(resp.Body, c.maxFiles)
	_ = resp.Body.Close() // everything needed was read (or the error says why not)
	if err != nil {
		var e *Error
		if errors.As(err, &e) {
			e.Route, e.Repo = route, repo
			e.Message = fmt.Sprintf("the tarball of %s: %s", sha, e.Message)
			return nil, e
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("github: %s on %s: %w", route, repo, ctx.Err())
		}
		// A broken stream mid-download: the host did not answer usefully.
		return nil, &Error{Route: route, Repo: repo, Message: fmt.Sprintf("reading the tarball of %s: %s", sha, describeErr(err)), Kind: codehost.ErrUnavailable, cause: err}
	}
	return files, nil
}

func describeErr(err error) string {
	s, _ := describe(err)
	return s
}

// capReader fails a read past its limit with an *Error naming the cap.
type capReader struct {
	r     io.Reader
	left  int64
	limit int64
}

func (c *capReader) Read(p []byte) (int, error) {
	if c.left <= 0 {
		return 0, &Error{Message: fmt.Sprintf("unpacks to more than %d bytes (the files cap)", c.limit), Kind: codehost.ErrInvalid}
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	return n, err
}

// untar unpacks a gzip'd tarball of a GitHub commit into a MapFS, top
// folder stripped. maxBytes caps the files' total size, and the unpacked
// stream (headers and padding included) at twice that plus 1 MiB.
func untar(r io.Reader, maxBytes int64) (fstest.MapFS, error) {
	zr, err := gzip.NewReader(r)
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &Error{Message: "is empty", Kind: codehost.ErrUnavailable}
		}
		return nil, err
	}
	defer func() { _ = zr.Close() }() // its checksum error, if any, surfaced through Read
	tr := tar.NewReader(&capReader{r: zr, left: 2*maxBytes + 1<<20, limit: maxBytes})
	files := fstest.MapFS{}
	links := map[string]string{} // tree path -> target tree path
	var total int64
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		if hdr.Typeflag == tar.TypeXGlobalHeader || hdr.Typeflag == tar.TypeXHeader {
			continue
		}
		rel, ok, err := treePath(hdr.Name)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		switch hdr.Typeflag {
		case tar.TypeReg, tar.TypeRegA: //nolint:staticcheck // TypeRegA is deprecated but old archives still carry it
			if hdr.Size < 0 {
				return nil, &Error{Message: fmt.Sprintf("entry %q has a negative size", rel), Kind: codehost.ErrInvalid}
			}
			total += hdr.Size
			if total > maxBytes {
				return nil, &Error{Message: fmt.Sprintf("unpacks to more than %d bytes (the files cap)", maxBytes), Kind: codehost.ErrInvalid}
			}
			data, err := io.ReadAll(io.LimitReader(tr, hdr.Size))
			if err != nil {
				return nil, err
			}
			files[rel] = &fstest.MapFile{Data: data, Mode: fs.FileMode(hdr.Mode).Perm(), ModTime: hdr.ModTime}
			delete(links, rel)
		case tar.TypeDir:
			files[rel] = &fstest.MapFile{Mode: fs.ModeDir | 0o755, ModTime: hdr.ModTime}
		case tar.TypeSymlink:
			if path.IsAbs(hdr.Linkname) {
				continue // points outside the tree
			}
			links[rel] = path.Join(path.Dir(rel), hdr.Linkname)
			delete(files, rel)
		case tar.TypeLink:
			target, ok, err := treePath(hdr.Linkname)
			if err != nil || !ok {
				continue
			}
			links[rel] = target
			delete(files, rel)
		}
	}
	// Resolve links to files inside the tree, a bounded number of hops.
	for rel, target := range links {
		for hop := 0; hop < 40; hop++ {
			if target == ".." || strings.HasPrefix(target, "../") || !fs.ValidPath(target) {
				break
			}
			if f, ok := files[target]; ok {
				if f.Mode.IsRegular() {
					files[rel] = &fstest.MapFile{Data: f.Data, Mode: f.Mode, ModTime: f.ModTime}
				}
				break
			}
			next, ok := links[target]
			if !ok {
				break
			}
			target = next
		}
	}
	return files, nil
}

// treePath maps an archive entry's name ("owner-repo-sha/dir/file") to its
// path in the tree ("dir/file"); ok is false for the top folder itself. An
// absolute name or a ".." element is refused.
func treePath(name string) (string, bool, error) {
	if strings.HasPrefix(name, "/") || strings.Contains(name, "\\") {
		return "", false, &Error{Message: fmt.Sprintf("entry %q has an absolute or unsafe path", name), Kind: codehost.ErrInvalid}
	}
	for _, el := range strings.Split(name, "/") {
		if el == ".." {
			return "", false, &Error{Message: fmt.Sprintf("entry %q climbs out of the tree (..)", name), Kind: codehost.ErrInvalid}
		}
	}
	_, rel, found := strings.Cut(strings.TrimPrefix(name, "./"), "/")
	rel = strings.TrimSuffix(rel, "/")
	if !found || rel == "" || rel == "." {
		return "", false, nil
	}
	rel = path.Clean(rel)
	if !fs.ValidPath(rel) {
		return "", false, &Error{Message: fmt.Sprintf("entry %q is not a valid path", name), Kind: codehost.ErrInvalid}
	}
	return rel, true, nil
}
