package project

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/gob"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"

	"github.com/gapless-dev/gapless/sqlparse"
)

// CacheDir is the folder, inside a project, that holds gapless's caches:
// files gapless can always make again, kept out of version control with
// the rest of .gapless/ (the default SQLite state lives there too).
const CacheDir = ".gapless/cache"

// queryCacheFile is the parse cache's file name in CacheDir.
const queryCacheFile = "queries"

// queryCacheFormat is the parse cache's format version, part of every
// file's identity: bump it when Query or the encoding changes.
const queryCacheFormat = 2

// queryCacheMagic opens every parse cache file.
const queryCacheMagic = "gapless query cache\n"

// QueryCache remembers what parsing each model's query gave (its Query)
// across processes, so that loading a project parses only the queries that
// changed: DuckDB's parser is most of what loading costs (about 0.1 ms a
// query, seconds for 10,000 models), and `gapless models`, `plan` and
// `render` load the whole project.
//
// Invariant: a cached Query is used only for exactly the text it was parsed
// from (entries are keyed by the SHA-256 of the parser's input) and only by
// the build of gapless that parsed it (the file carries the identity of the
// executable, its build information and the format version: any other
// build ignores the file and rewrites it). A file that does not decode,
// fails its checksum or holds an entry that does not fit its text is
// ignored the same way, never trusted: the cache can make loading faster,
// never different.
//
// The file is written whole, to a temporary file renamed over it, so that
// concurrent processes each read some complete file and the last writer
// wins. It holds the entries of the last load only, so it stays the size of
// the project.
//
// A QueryCache is safe for concurrent use. A nil *QueryCache caches
// nothing.
type QueryCache struct {
	path     string
	identity string

	mu      sync.Mutex
	stored  map[[sha256.Size]byte]Query // what the file held
	used    map[[sha256.Size]byte]Query // what this load looked up or parsed
	stats   CacheStats
	rewrite bool // the file is missing, ignored or holds an entry that did not fit
}

// CacheStats is what a QueryCache did: hits and misses of one load, why the
// file was ignored (Ignored, nil when it was used or absent), whether it
// was written, and why writing failed (SaveErr).
type CacheStats struct {
	Hits, Misses int
	Ignored      error
	Saved        bool
	SaveErr      error
}

// cacheFile is the encoded body of a parse cache file.
type cacheFile struct {
	Entries []cacheEntry
}

type cacheEntry struct {
	Key   [sha256.Size]byte
	Query Query
}

// OpenQueryCache reads the parse cache of the project at dir
// (dir/.gapless/cache/queries). It never fails: a missing, unreadable,
// corrupt or stale file yields an empty cache that Save rewrites, the
// reason in Stats().Ignored. It returns nil, a cache that caches nothing,
// when this process cannot tell which build of gapless it is.
func OpenQueryCache(dir string) *QueryCache {
	id, err := buildIdentity()
	if err != nil {
		return nil
	}
	return openQueryCache(filepath.Join(dir, CacheDir, queryCacheFile), id)
}

// openQueryCache is OpenQueryCache of the file at path for the build
// identity id.
func openQueryCache(path, id string) *QueryCache {
	c := &QueryCache{path: path, identity: id, stored: map[[sha256.Size]byte]Query{}, used: map[[sha256.Size]byte]Query{}}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		c.rewrite = true
		return c
	}
	if err == nil {
		err = c.decode(b)
	}
	if err != nil {
		c.stored = map[[sha256.Size]byte]Query{}
		c.stats.Ignored = fmt.Errorf("parse cache %s: %w", path, err)
		c.rewrite = true
	}
	return c
}

// header is the first lines of c's file: the magic, the format and the
// build identity.
func (c *QueryCache) header() string {
	return fmt.Sprintf("%sformat %d\n%s\n", queryCacheMagic, queryCacheFormat, c.identity)
}

// decode reads a cache file: its header must be c's, and its body must
// match the checksum after the header.
func (c *QueryCache) decode(b []byte) error {
	head := c.header()
	if !bytes.HasPrefix(b, []byte(head)) {
		return errors.New("written by another build of gapless, or not a cache file")
	}
	b = b[len(head):]
	const sumLen = 2*sha256.Size + 1
	if len(b) < sumLen || b[sumLen-1] != '\n' {
		return errors.New("truncated")
	}
	sum := sha256.Sum256(b[sumLen:])
	if hex.EncodeToString(sum[:]) != string(b[:sumLen-1]) {
		return errors.New("checksum mismatch")
	}
	var f cacheFile
	if err := gob.NewDecoder(bytes.NewReader(b[sumLen:])).Decode(&f); err != nil {
		return fmt.Errorf("decoding: %w", err)
	}
	for _, e := range f.Entries {
		c.stored[e.Key] = e.Query
	}
	return nil
}

// lookup returns the Query parsed from src, if the cache holds one that
// fits src (see fits).
func (c *QueryCache) lookup(src string) (Query, bool) {
	if c == nil {
		return Query{}, false
	}
	key := sha256.Sum256([]byte(src))
	c.mu.Lock()
	defer c.mu.Unlock()
	q, ok := c.stored[key]
	if ok && !fits(q, src) {
		ok = false
		c.rewrite = true
	}
	if !ok {
		c.stats.Misses++
		return Query{}, false
	}
	c.stats.Hits++
	c.used[key] = q
	return q, true
}

// fits reports whether q could have been parsed from src: a canonical form,
// and table references with names and offsets inside src. It guards against
// an entry a checksum cannot catch (a bug in an older format).
func fits(q Query, src string) bool {
	if q.Canonical == "" {
		return false
	}
	for _, refs := range [][]sqlparse.TableRef{q.Tables, q.Occurrences} {
		for _, t := range refs {
			if t.Name == "" || t.Offset < -1 || t.Offset > len(src) {
				return false
			}
		}
	}
	return len(q.Occurrences) >= len(q.Tables)
}

// store records that src parsed to q.
func (c *QueryCache) store(src string, q Query) {
	if c == nil {
		return
	}
	key := sha256.Sum256([]byte(src))
	c.mu.Lock()
	defer c.mu.Unlock()
	c.used[key] = q
}

// Stats returns what the cache did so far.
func (c *QueryCache) Stats() CacheStats {
	if c == nil {
		return CacheStats{}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stats
}

// save writes the entries this load used, when they differ from the file's
// (something was parsed, an entry was dropped or the file was ignored),
// to a temporary file in the cache folder renamed over the cache file. A
// failure is recorded in Stats().SaveErr, never returned: the cache is
// only ever an optimisation.
func (c *QueryCache) save() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.rewrite && len(c.used) == len(c.stored) && c.stats.Misses == 0 {
		return
	}
	if err := c.write(); err != nil {
		c.stats.SaveErr = fmt.Errorf("writing the parse cache %s: %w", c.path, err)
		return
	}
	c.stats.Saved = true
}

func (c *QueryCache) write() (err error) {
	f := cacheFile{Entries: make([]cacheEntry, 0, len(c.used))}
	for k, q := range c.used {
		f.Entries = append(f.Entries, cacheEntry{Key: k, Query: q})
	}
	var body bytes.Buffer
	if err := gob.NewEncoder(&body).Encode(&f); err != nil {
		return err
	}
	sum := sha256.Sum256(body.Bytes())
	dir := filepath.Dir(c.path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, queryCacheFile+".*.tmp")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = os.Remove(tmp.Name())
		}
	}()
	w := bufio.NewWriter(tmp)
	_, _ = w.WriteString(c.header())
	_, _ = w.WriteString(hex.EncodeToString(sum[:]) + "\n")
	_, _ = w.Write(body.Bytes())
	if err := errors.Join(w.Flush(), tmp.Chmod(0o644), tmp.Close()); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), c.path)
}

// buildIdentity names this build of gapless: the executable's path, size
// and modification time (a rebuilt binary is another build, whatever its
// version says), and its build information (module versions, DuckDB's
// among them, and VCS revision). Computed once per process.
var buildIdentity = sync.OnceValues(func() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	if exe, err = filepath.EvalSymlinks(exe); err != nil {
		return "", err
	}
	st, err := os.Stat(exe)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%d\n%d\n", exe, st.Size(), st.ModTime().UnixNano())
	if bi, ok := debug.ReadBuildInfo(); ok {
		fmt.Fprintln(h, bi.String())
	}
	return hex.EncodeToString(h.Sum(nil)), nil
})

// Query is what a project keeps of a model's parsed query: the tables it
// reads (its dependencies; offsets into the text given to the parser) and
// its canonical form (what its fingerprint hashes). It is what the parse
// cache stores. The rest of a sqlparse.Query (projections, and the parse
// tree that change classification compares) is parsed again by whoever
// needs it, from the snapshot's canonical query.
type Query struct {
	Tables []sqlparse.TableRef
	// Occurrences is every place the query names a table (offsets as
	// Tables'), which a snapshot keeps so that executing it needs no parse
	// (snapshot.Snapshot.Refs).
	Occurrences []sqlparse.TableRef
	Canonical   string
}
