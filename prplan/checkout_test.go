package prplan_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/prplan"
)

// Scenario: Checkout writes the project folder of a commit's tree into a
// temporary folder, at its path in the repository, and nothing else; a
// link inside the tree is written as a copy of its target; cleanup removes
// the folder.
func TestCheckoutWritesTheProjectFolder(t *testing.T) {
	t.Parallel()
	files := repo()
	files["analytics/models/nested/deep.sql"] = &fstest.MapFile{Data: []byte("MODEL (name demo.deep, kind VIEW);\nSELECT 1 AS x\n")}
	files["analytics/models/linked.sql"] = &fstest.MapFile{Data: []byte("nested/deep.sql"), Mode: fs.ModeSymlink}
	root, cleanup, err := prplan.Checkout(files, "analytics/")
	require.NoError(t, err)
	require.Equal(t, "analytics", filepath.Base(root))
	for _, rel := range []string{"gapless.yaml", "models/events.sql", "models/nested/deep.sql"} {
		got, err := os.ReadFile(filepath.Join(root, rel))
		require.NoError(t, err, rel)
		require.Equal(t, files["analytics/"+rel].Data, got, rel)
	}
	st, err := os.Lstat(filepath.Join(root, "models", "linked.sql"))
	require.NoError(t, err)
	require.True(t, st.Mode().IsRegular(), "a link is written as a copy, never as a link")
	got, err := os.ReadFile(filepath.Join(root, "models", "linked.sql"))
	require.NoError(t, err)
	require.Equal(t, files["analytics/models/nested/deep.sql"].Data, got)
	_, err = os.Stat(filepath.Join(filepath.Dir(root), "README.md"))
	require.ErrorIs(t, err, fs.ErrNotExist, "only the project folder is written")

	cleanup()
	_, err = os.Stat(filepath.Dir(root))
	require.ErrorIs(t, err, fs.ErrNotExist, "cleanup removes the whole checkout")

	// The repository's root as the project.
	rootFiles := fstest.MapFS{"gapless.yaml": {Data: []byte("{}\n")}, "models/a.sql": {Data: []byte("x")}}
	for _, dir := range []string{"", ".", "./"} {
		root, cleanup, err := prplan.Checkout(rootFiles, dir)
		require.NoError(t, err, dir)
		_, err = os.Stat(filepath.Join(root, "models", "a.sql"))
		require.NoError(t, err, dir)
		cleanup()
	}
}

// dirFS is a tree whose listing of one folder also names extra entries,
// as a malicious or broken archive might.
type dirFS struct {
	fstest.MapFS
	dir   string
	extra []string
}

func (d dirFS) ReadDir(name string) ([]fs.DirEntry, error) {
	out, err := d.MapFS.ReadDir(name)
	if err != nil || name != d.dir {
		return out, err
	}
	for _, e := range d.extra {
		out = append(out, fakeEntry(e))
	}
	return out, nil
}

type fakeEntry string

func (e fakeEntry) Name() string               { return string(e) }
func (e fakeEntry) IsDir() bool                { return false }
func (e fakeEntry) Type() fs.FileMode          { return 0 }
func (e fakeEntry) Info() (fs.FileInfo, error) { return fakeInfo(e), nil }

type fakeInfo string

func (i fakeInfo) Name() string       { return string(i) }
func (i fakeInfo) Size() int64        { return 0 }
func (i fakeInfo) Mode() fs.FileMode  { return 0 }
func (i fakeInfo) ModTime() time.Time { return time.Time{} }
func (i fakeInfo) IsDir() bool        { return false }
func (i fakeInfo) Sys() any           { return nil }

// Scenario: Checkout refuses, naming the path and leaving nothing behind, a
// project folder outside the repository, a tree without gapless.yaml or
// models/, entries whose names leave the folder, and links out of the tree.
func TestCheckoutRefuses(t *testing.T) {
	// Not parallel: it points TMPDIR at its own folder, to see that a
	// refusal leaves no folder behind.
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	for _, tt := range []struct {
		name  string
		files fs.FS
		dir   string
		want  string
	}{
		{"parent folder", repo(), "../analytics", `project folder "../analytics" must be relative to the repository's root, inside it`},
		{"dot-dot inside", repo(), "analytics/../../x", `project folder "analytics/../../x" must be relative`},
		{"absolute", repo(), "/analytics", `project folder "/analytics" must be relative`},
		{"no gapless.yaml", without(repo(), "analytics/gapless.yaml"), "analytics", `the commit has no analytics/gapless.yaml (github.project_dir is "analytics")`},
		{"wrong project dir", repo(), "", `the commit has no gapless.yaml (github.project_dir is ".")`},
		{"no models", fstest.MapFS{"analytics/gapless.yaml": {Data: []byte("{}")}}, "analytics", "the commit has no analytics/models"},
		{"gapless.yaml is a folder", fstest.MapFS{"analytics/gapless.yaml/x": {}, "analytics/models/a.sql": {}}, "analytics", "analytics/gapless.yaml is not a file"},
		{"dot-dot entry", dirFS{repo(), "analytics/models", []string{".."}}, "analytics", `the tree lists an entry named "..", which leaves its folder`},
		{"entry with a slash", dirFS{repo(), "analytics/models", []string{"../../escape.sql"}}, "analytics", `the tree lists an entry named "../../escape.sql", which leaves its folder`},
		{"link out of the tree", with(repo(), "analytics/models/evil.sql", &fstest.MapFile{Data: []byte("../../../../etc/passwd"), Mode: fs.ModeSymlink}),
			"analytics", "analytics/models/evil.sql is a link to nothing inside the repository"},
		{"link to a folder", with(repo(), "analytics/models/dir.sql", &fstest.MapFile{Data: []byte("../models"), Mode: fs.ModeSymlink}),
			"analytics", "analytics/models/dir.sql is a link to something other than a file"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			root, cleanup, err := prplan.Checkout(tt.files, tt.dir)
			require.ErrorIs(t, err, prplan.ErrBadCheckout)
			require.ErrorContains(t, err, tt.want)
			require.Empty(t, root)
			require.Nil(t, cleanup)
			left, err := os.ReadDir(tmp)
			require.NoError(t, err)
			require.Empty(t, left, "a refused checkout leaves nothing behind")
		})
	}
}

func without(m fstest.MapFS, name string) fstest.MapFS {
	delete(m, name)
	return m
}

func with(m fstest.MapFS, name string, f *fstest.MapFile) fstest.MapFS {
	m[name] = f
	return m
}
