package github

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io/fs"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/codehost"
)

type entry struct {
	name, body, link string
	typ              byte
}

func tarball(t *testing.T, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	require.NoError(t, tw.WriteHeader(&tar.Header{Typeflag: tar.TypeXGlobalHeader, Name: "pax_global_header",
		PAXRecords: map[string]string{"comment": "0123456789abcdef0123456789abcdef01234567"}}))
	for _, e := range entries {
		typ := e.typ
		if typ == 0 {
			typ = tar.TypeReg
		}
		h := &tar.Header{Typeflag: typ, Name: e.name, Mode: 0o644, Size: int64(len(e.body)), Linkname: e.link}
		if typ != tar.TypeReg {
			h.Size = 0
		}
		if typ == tar.TypeDir {
			h.Mode = 0o755
		}
		require.NoError(t, tw.WriteHeader(h))
		if typ == tar.TypeReg {
			_, err := tw.Write([]byte(e.body))
			require.NoError(t, err)
		}
	}
	require.NoError(t, tw.Close())
	require.NoError(t, zw.Close())
	return buf.Bytes()
}

func TestUntarStripsTheTopFolder(t *testing.T) {
	data := tarball(t,
		entry{name: "acme-repo-0123456/", typ: tar.TypeDir},
		entry{name: "acme-repo-0123456/gapless.yaml", body: "name: x\n"},
		entry{name: "acme-repo-0123456/models/", typ: tar.TypeDir},
		entry{name: "acme-repo-0123456/models/a.sql", body: "select 1"},
		entry{name: "acme-repo-0123456/empty/", typ: tar.TypeDir},
		entry{name: "acme-repo-0123456/link.sql", typ: tar.TypeSymlink, link: "models/a.sql"},
		entry{name: "acme-repo-0123456/chain.sql", typ: tar.TypeSymlink, link: "link.sql"},
		entry{name: "acme-repo-0123456/outside", typ: tar.TypeSymlink, link: "../../etc/passwd"},
		entry{name: "acme-repo-0123456/abs", typ: tar.TypeSymlink, link: "/etc/passwd"},
		entry{name: "acme-repo-0123456/loop1", typ: tar.TypeSymlink, link: "loop2"},
		entry{name: "acme-repo-0123456/loop2", typ: tar.TypeSymlink, link: "loop1"},
		entry{name: "acme-repo-0123456/dirlink", typ: tar.TypeSymlink, link: "models"},
	)
	files, err := untar(bytes.NewReader(data), 1<<20)
	require.NoError(t, err)
	b, err := fs.ReadFile(files, "gapless.yaml")
	require.NoError(t, err)
	require.Equal(t, "name: x\n", string(b))
	b, err = fs.ReadFile(files, "models/a.sql")
	require.NoError(t, err)
	require.Equal(t, "select 1", string(b))
	for _, p := range []string{"link.sql", "chain.sql"} {
		b, err = fs.ReadFile(files, p)
		require.NoError(t, err, p)
		require.Equal(t, "select 1", string(b), "a link to a file in the tree reads as the file")
	}
	for _, p := range []string{"outside", "abs", "loop1", "loop2", "dirlink", "acme-repo-0123456", "pax_global_header"} {
		_, err = fs.Stat(files, p)
		require.ErrorIs(t, err, fs.ErrNotExist, p)
	}
	info, err := fs.Stat(files, "empty")
	require.NoError(t, err)
	require.True(t, info.IsDir())
}

func TestUntarRefusesPathsOutOfTheTree(t *testing.T) {
	for _, name := range []string{"top/../../evil", "/etc/passwd", "top/a/../../../x", `top\..\x`} {
		_, err := untar(bytes.NewReader(tarball(t, entry{name: name, body: "x"})), 1<<20)
		require.ErrorIs(t, err, codehost.ErrInvalid, name)
	}
}

func TestUntarCapsTheSize(t *testing.T) {
	data := tarball(t,
		entry{name: "top/a", body: strings.Repeat("a", 600)},
		entry{name: "top/b", body: strings.Repeat("b", 600)},
	)
	_, err := untar(bytes.NewReader(data), 1000)
	require.ErrorIs(t, err, codehost.ErrInvalid)
	require.ErrorContains(t, err, "more than 1000 bytes")

	files, err := untar(bytes.NewReader(data), 1200)
	require.NoError(t, err, "exactly the cap fits")
	require.Len(t, files, 2)
}

func TestUntarRefusesWhatIsNoTarball(t *testing.T) {
	_, err := untar(strings.NewReader("not gzip"), 1<<20)
	require.Error(t, err)
	_, err = untar(strings.NewReader(""), 1<<20)
	require.ErrorIs(t, err, codehost.ErrUnavailable)
}
