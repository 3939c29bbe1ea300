package prplan

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/gapless-dev/gapless/config"
	"github.com/gapless-dev/gapless/project"
)

// Limits of a checkout: a commit whose project folder holds more is
// refused rather than filling the disk.
const (
	MaxCheckoutBytes = 1 << 30
	MaxCheckoutFiles = 100_000
)

// ErrBadCheckout is wrapped by Checkout's refusals of a tree (no project
// at projectDir, a path or link leaving it, too large).
var ErrBadCheckout = errors.New("cannot check the project out")

// Checkout writes the project folder projectDir ("" or "." for the
// repository's root; slash-separated, relative) of files, a commit's tree
// as codehost.Host.Files returns it, into a new temporary folder, at the
// same path, and returns the project's root inside it and a cleanup that
// removes the folder. Only the project folder is written: a project reads
// nothing outside it.
//
// It refuses, naming the path in the repository and writing nothing: a
// projectDir that is absolute or leaves the repository, a tree without
// gapless.yaml or models/ in projectDir, an entry whose name would leave
// the folder, a symbolic link that the tree cannot resolve to a regular
// file inside it (a link is written as a copy of its target, never as a
// link), and more than MaxCheckoutFiles files or MaxCheckoutBytes bytes.
func Checkout(files fs.FS, projectDir string) (root string, cleanup func(), err error) {
	dir, err := cleanProjectDir(projectDir)
	if err != nil {
		return "", nil, err
	}
	for _, want := range []struct {
		name string
		dir  bool
	}{{config.FileName, false}, {project.ModelsDir, true}} {
		p := path.Join(dir, want.name)
		st, err := fs.Stat(files, p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return "", nil, fmt.Errorf("%w: the commit has no %s (github.project_dir is %q)", ErrBadCheckout, p, dirOrDot(projectDir))
		case err != nil:
			return "", nil, fmt.Errorf("checking the commit for %s: %w", p, err)
		case want.dir && !st.IsDir():
			return "", nil, fmt.Errorf("%w: %s is not a folder", ErrBadCheckout, p)
		case !want.dir && !st.Mode().IsRegular():
			return "", nil, fmt.Errorf("%w: %s is not a file", ErrBadCheckout, p)
		}
	}
	tmp, err := os.MkdirTemp("", "gapless-pr-")
	if err != nil {
		return "", nil, fmt.Errorf("making a folder to check the project out in: %w", err)
	}
	cleanup = func() { _ = os.RemoveAll(tmp) } // a leftover temporary folder harms nothing
	if err := writeTree(files, dir, tmp); err != nil {
		cleanup()
		return "", nil, err
	}
	return filepath.Join(tmp, filepath.FromSlash(dir)), cleanup, nil
}

// cleanProjectDir is projectDir cleaned, "." for the root; an absolute one,
// or one that leaves the repository, is refused.
func cleanProjectDir(projectDir string) (string, error) {
	d := strings.ReplaceAll(strings.TrimSpace(projectDir), `\`, "/")
	if d == "" {
		return ".", nil
	}
	if path.IsAbs(d) || filepath.IsAbs(d) || hasDotDot(d) {
		return "", fmt.Errorf("%w: project folder %q must be relative to the repository's root, inside it", ErrBadCheckout, projectDir)
	}
	return path.Clean(d), nil
}

// hasDotDot reports whether a slash-separated path has a ".." element.
func hasDotDot(p string) bool {
	for _, e := range strings.Split(p, "/") {
		if e == ".." {
			return true
		}
	}
	return false
}

func dirOrDot(d string) string {
	if d == "" {
		return "."
	}
	return d
}

// writeTree copies the folder dir of files into tmp at the same path.
func writeTree(files fs.FS, dir, tmp string) error {
	var count, total int64
	top := true // the first call is dir itself, whose name is its path's
	return fs.WalkDir(files, dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("reading the commit at %s: %w", p, err)
		}
		entry := !top
		top = false
		if entry && (d.Name() == "." || d.Name() == ".." || strings.ContainsAny(d.Name(), `/\`)) {
			return fmt.Errorf("%w: the tree lists an entry named %q, which leaves its folder", ErrBadCheckout, d.Name())
		}
		if !fs.ValidPath(p) || hasDotDot(p) {
			return fmt.Errorf("%w: %q is not a path inside the repository", ErrBadCheckout, p)
		}
		dst := filepath.Join(tmp, filepath.FromSlash(p))
		switch mode := d.Type(); {
		case d.IsDir():
			if err := os.MkdirAll(dst, 0o755); err != nil {
				return fmt.Errorf("checking out %s: %w", p, err)
			}
			return nil
		case mode.IsRegular(), mode&fs.ModeSymlink != 0:
		default:
			return fmt.Errorf("%w: %s is neither a file nor a folder (%s)", ErrBadCheckout, p, mode)
		}
		if count++; count > MaxCheckoutFiles {
			return fmt.Errorf("%w: the project folder holds more than %d files", ErrBadCheckout, MaxCheckoutFiles)
		}
		n, err := copyFile(files, p, dst, MaxCheckoutBytes-total)
		total += n
		return err
	})
}

// copyFile writes the regular file p of files (a link is resolved by
// files, which keeps it inside the tree) to dst, at most limit bytes.
func copyFile(files fs.FS, p, dst string, limit int64) (int64, error) {
	in, err := files.Open(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrInvalid) {
			return 0, fmt.Errorf("%w: %s is a link to nothing inside the repository", ErrBadCheckout, p)
		}
		return 0, fmt.Errorf("reading the commit's %s: %w", p, err)
	}
	defer func() { _ = in.Close() }() // read only
	st, err := in.Stat()
	if err != nil {
		return 0, fmt.Errorf("reading the commit's %s: %w", p, err)
	}
	if !st.Mode().IsRegular() {
		return 0, fmt.Errorf("%w: %s is a link to something other than a file", ErrBadCheckout, p)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return 0, fmt.Errorf("checking out %s: %w", p, err)
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return 0, fmt.Errorf("checking out %s: %w", p, err)
	}
	n, err := io.Copy(out, io.LimitReader(in, limit+1))
	cerr := out.Close()
	if err == nil && n > limit {
		return n, fmt.Errorf("%w: the project folder holds more than %d bytes", ErrBadCheckout, int64(MaxCheckoutBytes))
	}
	if err := errors.Join(err, cerr); err != nil {
		return n, fmt.Errorf("checking out %s: %w", p, err)
	}
	return n, nil
}
