// Package files is the files connector: a landing folder of Parquet, CSV
// or newline-delimited JSON files, matched by the source's files.path glob
// relative to the project.
//
// Positions. Each file is one position, given the first time it is staged:
// the next position after the queue's last staged batch. A file is taken
// once it has settled (its size and modification time unchanged for
// files.settle, counted from its last write and read from an injected
// clock); the files that settle in one
// pass are taken in the order they were first seen, then by name. What is
// taken is derived from the queue alone (the staged batches' locations and
// the highest To), never from memory, so a second pass, a restart or
// another process over the same store stages nothing twice and renumbers
// nothing; StageBatches being idempotent by position makes two racing
// passes stage one batch. Only the settle observations (first seen, last
// size and time) live in memory: after a restart a file is judged by its
// modification time again, which cannot reorder what is staged.
// Because the queue is the record of what is taken, the queue must keep a
// batch while its file is still in the landing folder: a file whose batch
// was pruned would be taken again. Batches are returned with Rows 0
// (unknown): discovery reads no file.
//
// Replace runs. A folder matched by files.replace_runs holding a _SUCCESS
// file is a replace run: once every file in it has settled, its files
// (regular files directly in it, except those starting with _ or .) are
// staged together, in name order, as replace_head, replace_tail...,
// replace_final batches (a one-file run is a single replace_final) named by
// the folder, and they replace everything before them. Files of a run
// folder are never taken as appends even when files.path matches them.
package files

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/gapless-dev/gapless/connector"
	"github.com/gapless-dev/gapless/internal/logkey"
	"github.com/gapless-dev/gapless/source"
	"github.com/gapless-dev/gapless/state"
)

// Success is the file whose presence completes a replace run.
const Success = "_SUCCESS"

// DefaultChunkFiles is Options.ChunkFiles when not set.
const DefaultChunkFiles = 512

// Options configure a Connector.
type Options struct {
	// Root is the project folder the globs are relative to.
	Root string
	// Clock reads the time for settling; clockwork.NewRealClock() when nil.
	Clock clockwork.Clock
	// ChunkFiles is the most files in one snapshot chunk.
	ChunkFiles int
	// Logger; slog.Default() when nil. Records name the source with
	// logkey.Model, as the state store's source events do.
	Logger *slog.Logger
}

// Connector is the files connector of one source. It is safe for
// concurrent use.
type Connector struct {
	def         *source.Definition
	root        string
	realRoot    string
	pattern     string
	runs        string
	settle      time.Duration
	clock       clockwork.Clock
	chunkFiles  int
	log         *slog.Logger
	mu          sync.Mutex
	seen        map[string]*observation
	seenCounter int64
}

var _ connector.Connector = (*Connector)(nil)

// observation is what was last seen of a file.
type observation struct {
	size    int64
	mtime   time.Time
	since   time.Time // when size and mtime were first seen as they are
	order   int64     // first-seen order
	present bool
}

// New returns the files connector of def. A glob that is absolute or leaves
// the project is refused with an error wrapping connector.ErrEscapes that
// names the source file.
func New(def *source.Definition, opts Options) (*Connector, error) {
	if def == nil || def.Files == nil {
		return nil, fmt.Errorf("files connector: the source has no files block")
	}
	c := &Connector{def: def, root: opts.Root, settle: def.Files.Settle, clock: opts.Clock,
		chunkFiles: opts.ChunkFiles, log: opts.Logger, seen: map[string]*observation{}}
	if c.clock == nil {
		c.clock = clockwork.NewRealClock()
	}
	if c.chunkFiles <= 0 {
		c.chunkFiles = DefaultChunkFiles
	}
	if c.log == nil {
		c.log = slog.Default()
	}
	var err error
	if c.pattern, err = c.glob("files.path", def.Files.Path); err != nil {
		return nil, err
	}
	if def.Files.ReplaceRuns != "" {
		if c.runs, err = c.glob("files.replace_runs", def.Files.ReplaceRuns); err != nil {
			return nil, err
		}
	}
	if c.realRoot, err = filepath.EvalSymlinks(opts.Root); err != nil {
		return nil, fmt.Errorf("%s: source %s: project folder: %w", def.File, def.Name, err)
	}
	return c, nil
}

// glob checks a glob of the definition and returns it cleaned, in slash
// form, relative to the project.
func (c *Connector) glob(key, g string) (string, error) {
	s := filepath.ToSlash(strings.TrimSpace(g))
	clean := path.Clean(s)
	if filepath.IsAbs(g) || path.IsAbs(s) || clean == ".." || strings.HasPrefix(clean, "../") {
		return "", fmt.Errorf("%s: source %s: %s %s: %w", c.def.File, c.def.Name, key, g, connector.ErrEscapes)
	}
	if _, err := path.Match(clean, ""); err != nil {
		return "", fmt.Errorf("%s: source %s: %s %s is not a valid glob: %w", c.def.File, c.def.Name, key, g, err)
	}
	return clean, nil
}

// Source returns the source's name.
func (c *Connector) Source() string { return c.def.Name }

// run is a replace run folder as found on disk.
type run struct {
	dir      string
	files    []string // in name order
	complete bool     // holds _SUCCESS
}

// listing is what one look at the landing folders found.
type listing struct {
	files map[string]fs.FileInfo // append candidates, by slash path
	runs  []run                  // by folder name
}

// list globs the landing folders. Matches that are not regular files, or
// symlinks leading out of the project, are skipped.
func (c *Connector) list() (listing, error) {
	fsys := os.DirFS(c.root)
	l := listing{files: map[string]fs.FileInfo{}}
	inRun := map[string]bool{}
	if c.runs != "" {
		dirs, err := fs.Glob(fsys, c.runs)
		if err != nil {
			return l, fmt.Errorf("%s: source %s: files.replace_runs: %w", c.def.File, c.def.Name, err)
		}
		slices.Sort(dirs)
		for _, d := range dirs {
			ents, err := fs.ReadDir(fsys, d)
			if err != nil {
				continue // not a folder, or gone
			}
			r := run{dir: d}
			for _, e := range ents {
				n := e.Name()
				if n == Success {
					r.complete = true
					continue
				}
				if strings.HasPrefix(n, "_") || strings.HasPrefix(n, ".") || e.IsDir() {
					continue
				}
				r.files = append(r.files, d+"/"+n)
			}
			inRun[d] = true
			l.runs = append(l.runs, r)
		}
	}
	matches, err := fs.Glob(fsys, c.pattern)
	if err != nil {
		return l, fmt.Errorf("%s: source %s: files.path: %w", c.def.File, c.def.Name, err)
	}
	for _, m := range matches {
		if inRun[path.Dir(m)] || strings.HasPrefix(path.Base(m), "_") || strings.HasPrefix(path.Base(m), ".") {
			continue
		}
		info, ok := c.stat(m)
		if ok {
			l.files[m] = info
		}
	}
	return l, nil
}

// stat returns the file's info when it is a regular file inside the
// project (following a symlink only when it stays inside).
func (c *Connector) stat(rel string) (fs.FileInfo, bool) {
	full := filepath.Join(c.root, filepath.FromSlash(rel))
	li, err := os.Lstat(full)
	if err != nil {
		return nil, false
	}
	if li.Mode()&fs.ModeSymlink != 0 {
		real, err := filepath.EvalSymlinks(full)
		if err != nil {
			return nil, false
		}
		if r, err := filepath.Rel(c.realRoot, real); err != nil || r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator)) {
			c.log.Warn("files connector: skipping a symlink that leaves the project", logkey.Model, c.def.Name, logkey.Path, rel)
			return nil, false
		}
	}
	info, err := os.Stat(full)
	if err != nil || !info.Mode().IsRegular() {
		return nil, false
	}
	return info, true
}

// settled records an observation of rel and reports whether it has been
// unchanged for the settle period; it returns the file's first-seen order.
// A file is unchanged since its modification time (its last write), or
// since now when that time is in the future (a skewed clock): so a file
// last written a settle period ago is taken at first sight, which is what
// a one-shot process (`gapless ingest --once`) needs, and a file still
// being written, whose time keeps moving, waits. Caller holds c.mu.
func (c *Connector) settled(rel string, info fs.FileInfo, now time.Time) (bool, int64) {
	since := info.ModTime()
	if since.After(now) {
		since = now
	}
	o := c.seen[rel]
	if o == nil {
		c.seenCounter++
		o = &observation{size: info.Size(), mtime: info.ModTime(), since: since, order: c.seenCounter}
		c.seen[rel] = o
	} else if o.size != info.Size() || !o.mtime.Equal(info.ModTime()) {
		o.size, o.mtime, o.since = info.Size(), info.ModTime(), since
	}
	o.present = true
	return now.Sub(o.since) >= c.settle, o.order
}

// taken is what the queue already holds: staged locations and runs, and
// the next position.
type taken struct {
	locations map[string]bool
	runs      map[string]bool
	next      int64
	batches   []state.Batch
}

func (c *Connector) taken(ctx context.Context, q connector.Queue) (taken, error) {
	bs, err := connector.Staged(ctx, q, c.def.Name)
	if err != nil {
		return taken{}, err
	}
	t := taken{locations: map[string]bool{}, runs: map[string]bool{}, batches: bs}
	for _, b := range bs {
		t.locations[b.Location] = true
		if b.ReplaceRun != "" {
			t.runs[b.ReplaceRun] = true
		}
		t.next = max(t.next, b.To)
	}
	return t, nil
}

// Discover returns the settled files and complete replace runs the queue
// does not hold yet, as batches continuing its positions, and the staged
// locations gone from disk (a skipped batch's is not reported: it is gone
// for good and nothing needs it).
func (c *Connector) Discover(ctx context.Context, q connector.Queue) (connector.Discovery, error) {
	t, err := c.taken(ctx, q)
	if err != nil {
		return connector.Discovery{}, err
	}
	l, err := c.list()
	if err != nil {
		return connector.Discovery{}, err
	}
	now := c.clock.Now()

	type item struct {
		order int64
		name  string
		run   *run
	}
	var items []item
	c.mu.Lock()
	for _, o := range c.seen {
		o.present = false
	}
	names := slices.Sorted(maps.Keys(l.files)) // files seen together get orders in name order
	for _, name := range names {
		info := l.files[name]
		if t.locations[name] {
			continue
		}
		if ok, order := c.settled(name, info, now); ok {
			items = append(items, item{order: order, name: name})
		}
	}
	for i := range l.runs {
		r := &l.runs[i]
		if t.runs[r.dir] || !r.complete || len(r.files) == 0 {
			continue
		}
		ready, order := true, int64(0)
		for _, f := range r.files {
			info, ok := c.stat(f)
			if !ok {
				ready = false
				continue
			}
			ok, o := c.settled(f, info, now)
			ready = ready && ok
			if order == 0 || o < order {
				order = o
			}
		}
		if ready {
			items = append(items, item{order: order, name: r.dir, run: r})
		}
	}
	for name, o := range c.seen {
		if !o.present {
			delete(c.seen, name) // forget files gone before they were taken
		}
	}
	c.mu.Unlock()

	slices.SortFunc(items, func(a, b item) int {
		return cmp.Or(cmp.Compare(a.order, b.order), strings.Compare(a.name, b.name))
	})
	var d connector.Discovery
	pos := t.next
	for _, it := range items {
		if it.run == nil {
			d.Batches = append(d.Batches, state.Batch{Source: c.def.Name, From: pos, To: pos + 1, Kind: state.BatchAppend, Location: it.name})
			pos++
			continue
		}
		for i, f := range it.run.files {
			kind := state.BatchReplaceTail
			switch {
			case i == len(it.run.files)-1:
				kind = state.BatchReplaceFinal
			case i == 0:
				kind = state.BatchReplaceHead
			}
			d.Batches = append(d.Batches, state.Batch{Source: c.def.Name, From: pos, To: pos + 1, Kind: kind, ReplaceRun: it.run.dir, Location: f})
			pos++
		}
	}
	d.Vanished = c.vanished(t.batches, l)
	if len(d.Batches) > 0 {
		c.log.Debug("files connector: discovered", logkey.Model, c.def.Name, logkey.Batches, len(d.Batches))
	}
	return d, nil
}

// vanished returns the locations of staged batches not on disk, by
// position.
func (c *Connector) vanished(bs []state.Batch, l listing) []string {
	var out []string
	for _, b := range bs {
		if !b.SkippedAt.IsZero() {
			continue // skipped: gone for good, and no generation needs it
		}
		if b.ReplaceRun == "" {
			if _, ok := l.files[b.Location]; ok {
				continue
			}
		}
		if _, ok := c.stat(b.Location); !ok {
			out = append(out, b.Location)
		}
	}
	return out
}

// Snapshot returns the live files as of the queue's last staged batch:
// those of the last staged replace run and the appends after it, in
// position order, in chunks of at most ChunkFiles. It wraps
// connector.ErrNotConsistent while a replace run folder exists that is not
// yet complete (no _SUCCESS) or not yet staged, and is a
// *connector.VanishedError, returned with the snapshot of the live files
// that still exist, when a live file is gone.
func (c *Connector) Snapshot(ctx context.Context, q connector.Queue) (connector.Snapshot, error) {
	t, err := c.taken(ctx, q)
	if err != nil {
		return connector.Snapshot{}, err
	}
	l, err := c.list()
	if err != nil {
		return connector.Snapshot{}, err
	}
	for _, r := range l.runs {
		if !t.runs[r.dir] && (!r.complete || len(r.files) > 0) {
			return connector.Snapshot{}, fmt.Errorf("source %s: replace run %s is still arriving: %w", c.def.Name, r.dir, connector.ErrNotConsistent)
		}
	}
	return c.snapshot(t.batches, t.next)
}

// SnapshotAt returns the snapshot Snapshot returned when the queue ended
// at pin: that of the staged batches with To <= pin, chunked alike. It
// wraps connector.ErrPinInvalid when a replace run is staged after pin
// (it replaces what pin holds), when pin is past the queue's end, or when
// the queue no longer holds every batch live at pin (pruned); it is a
// *connector.VanishedError, with the snapshot of what still exists, when a
// file live at pin is gone. Replace run folders on disk not staged yet do
// not concern it: the positions up to pin are fixed.
func (c *Connector) SnapshotAt(ctx context.Context, q connector.Queue, pin int64) (connector.Snapshot, error) {
	t, err := c.taken(ctx, q)
	if err != nil {
		return connector.Snapshot{}, err
	}
	invalid := func(format string, args ...any) (connector.Snapshot, error) {
		return connector.Snapshot{}, fmt.Errorf("source %s: snapshot at position %d: %s: %w",
			c.def.Name, pin, fmt.Sprintf(format, args...), connector.ErrPinInvalid)
	}
	if pin < 0 || pin > t.next {
		return invalid("the queue ends at position %d", t.next)
	}
	var upTo []state.Batch
	for _, b := range t.batches {
		switch {
		case b.To <= pin:
			upTo = append(upTo, b)
		case b.From < pin:
			return invalid("batch %d (%s) straddles it", b.Seq, b.Location)
		case b.ReplaceRun != "":
			return invalid("replace run %s, staged after it, replaces what it holds", b.ReplaceRun)
		}
	}
	if pin > 0 && (len(upTo) == 0 || upTo[len(upTo)-1].To != pin) {
		return invalid("the queue no longer holds the batches before it")
	}
	replaced := false // a replace run among upTo: what precedes it is not live
	for i, b := range upTo {
		if i > 0 && b.From != upTo[i-1].To {
			return invalid("the queue no longer holds positions %d to %d", upTo[i-1].To, b.From)
		}
		replaced = replaced || b.Kind == state.BatchReplaceFinal
	}
	if len(upTo) > 0 && upTo[0].From > 0 && !replaced {
		return invalid("the queue no longer holds positions 0 to %d", upTo[0].From)
	}
	snap, err := c.snapshot(upTo, pin)
	if errors.Is(err, connector.ErrNotConsistent) {
		return invalid("%v", err)
	}
	return snap, err
}

// snapshot is the snapshot pinned at pin of bs, the staged batches before
// pin in Seq order: the files of the last replace run among them and the
// appends after it, in chunks of at most ChunkFiles. It wraps
// connector.ErrNotConsistent when a replace run among them has no final
// batch, and is a *connector.VanishedError, returned with the snapshot of
// the live files that still exist, when a live file is gone. A skipped
// batch (state.Batch.SkippedAt) is left out: neither loaded nor vanished.
// Snapshot and SnapshotAt share it, so that both chunk one pin alike.
func (c *Connector) snapshot(bs []state.Batch, pin int64) (connector.Snapshot, error) {
	live := bs
	for i := len(bs) - 1; i >= 0; i-- {
		if bs[i].Kind == state.BatchReplaceFinal {
			run, j := bs[i].ReplaceRun, i
			for j > 0 && bs[j-1].ReplaceRun == run {
				j--
			}
			live = bs[j:]
			break
		}
	}
	for _, b := range live {
		if b.ReplaceRun != "" && b.Kind != state.BatchReplaceFinal && !slices.ContainsFunc(live, func(x state.Batch) bool {
			return x.ReplaceRun == b.ReplaceRun && x.Kind == state.BatchReplaceFinal
		}) {
			return connector.Snapshot{}, fmt.Errorf("source %s: replace run %s has no final batch staged: %w", c.def.Name, b.ReplaceRun, connector.ErrNotConsistent)
		}
	}
	snap := connector.Snapshot{Pin: pin}
	if len(bs) > 0 {
		snap.PinLabel = fmt.Sprintf("file %d %s", pin-1, bs[len(bs)-1].Location)
	}
	var gone []string
	for _, b := range live {
		if !b.SkippedAt.IsZero() {
			continue // skipped (state.Batch.SkippedAt): no generation holds a row of it
		}
		if _, ok := c.stat(b.Location); !ok {
			gone = append(gone, b.Location)
			continue
		}
		n := len(snap.Chunks)
		if n == 0 || len(snap.Chunks[n-1].Locations) >= c.chunkFiles {
			snap.Chunks = append(snap.Chunks, connector.Chunk{Index: n, From: b.From})
			n++
		}
		ch := &snap.Chunks[n-1]
		ch.Locations = append(ch.Locations, b.Location)
		ch.To = b.To
	}
	if len(gone) > 0 {
		return snap, &connector.VanishedError{Source: c.def.Name, Locations: gone}
	}
	return snap, nil
}
