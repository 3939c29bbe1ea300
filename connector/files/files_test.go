package files_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/connector"
	"github.com/gapless-dev/gapless/connector/files"
	"github.com/gapless-dev/gapless/internal/pgtest"
	"github.com/gapless-dev/gapless/source"
	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/state/postgres"
	"github.com/gapless-dev/gapless/state/sqlite"
)

const src = "raw.events"

var epoch = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// stores opens each real state store with src registered.
func stores(t *testing.T) map[string]state.Store {
	t.Helper()
	ctx := t.Context()
	lite, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "state.db"))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, lite.Close()) })
	pg, err := postgres.Open(ctx, pgtest.NewDatabase(t))
	require.NoError(t, err)
	t.Cleanup(func() { pg.Close() })
	out := map[string]state.Store{"sqlite": lite, "postgres": pg}
	for _, st := range out {
		_, err := st.EnsureSources(ctx, state.EnsureSourcesParams{Sources: []state.SourceDefinition{{Name: src, Connector: "files", DefinitionHash: "h"}}, Now: epoch})
		require.NoError(t, err)
	}
	return out
}

// def is a files source landing landing/*.csv, with runs under
// landing/full/*/ (written with the trailing slash of the README).
func def(settle time.Duration) *source.Definition {
	return &source.Definition{Name: src, File: "sources/events.yaml", Connector: source.ConnectorFiles,
		Files: &source.Files{Path: "landing/*.csv", Settle: settle, ReplaceRuns: "landing/full/*/"}}
}

func newConn(t *testing.T, root string, d *source.Definition, clk clockwork.Clock) *files.Connector {
	t.Helper()
	c, err := files.New(d, files.Options{Root: root, Clock: clk, ChunkFiles: 2})
	require.NoError(t, err)
	return c
}

// write writes a file under root at mtime.
func write(t *testing.T, root, rel, body string, mtime time.Time) {
	t.Helper()
	p := filepath.Join(root, filepath.FromSlash(rel))
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
	require.NoError(t, os.Chtimes(p, mtime, mtime))
}

// pass discovers and stages, returning the staged batches of this pass.
func pass(t *testing.T, ctx context.Context, c connector.Connector, st state.Store) connector.Discovery {
	t.Helper()
	d, err := c.Discover(ctx, st)
	require.NoError(t, err)
	if len(d.Batches) > 0 {
		_, err := st.StageBatches(ctx, state.StageBatchesParams{Source: src, Batches: d.Batches, Now: epoch})
		require.NoError(t, err)
	}
	return d
}

type placed struct {
	From     int64
	Kind     state.BatchKind
	Location string
}

func positions(bs []state.Batch) []placed {
	out := []placed{}
	for _, b := range bs {
		out = append(out, placed{b.From, b.Kind, b.Location})
	}
	return out
}

func listAll(t *testing.T, st state.Store) []state.Batch {
	t.Helper()
	bs, err := st.ListBatches(t.Context(), state.ListBatchesParams{Source: src})
	require.NoError(t, err)
	return bs
}

// Scenario: b.csv and a.csv land together, then c.csv, then 0.csv (a name
// before all others). Each pass takes the new files in name order after
// what is staged: positions 0 a, 1 b, 2 c, 3 0 — arrival order first, name
// order within one arrival. A second connector over the same store (a
// restart) stages nothing, and when a new file lands it continues at 4.
func TestArrivalThenNameOrderAndRestartKeepsPositions(t *testing.T) {
	t.Parallel()
	for name, st := range stores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			root := t.TempDir()
			clk := clockwork.NewFakeClockAt(epoch)
			c := newConn(t, root, def(0), clk)
			write(t, root, "landing/b.csv", "x", epoch)
			write(t, root, "landing/a.csv", "x", epoch)
			write(t, root, "landing/notes.txt", "x", epoch) // not matched
			pass(t, ctx, c, st)
			write(t, root, "landing/c.csv", "x", epoch)
			pass(t, ctx, c, st)
			write(t, root, "landing/0.csv", "x", epoch)
			pass(t, ctx, c, st)
			want := []placed{{0, state.BatchAppend, "landing/a.csv"}, {1, state.BatchAppend, "landing/b.csv"},
				{2, state.BatchAppend, "landing/c.csv"}, {3, state.BatchAppend, "landing/0.csv"}}
			require.Equal(t, want, positions(listAll(t, st)))

			again := newConn(t, root, def(0), clk)
			d, err := again.Discover(ctx, st)
			require.NoError(t, err)
			require.Empty(t, d.Batches, "a restarted connector re-stages nothing")
			require.Empty(t, d.Vanished)
			write(t, root, "landing/d.csv", "x", epoch)
			require.Equal(t, []placed{{4, state.BatchAppend, "landing/d.csv"}}, positions(pass(t, ctx, again, st).Batches))
		})
	}
}

// Scenario: with settle 30s, a file is not taken when first seen; it is
// rewritten 20s later (its size changes), so the settle period starts
// again; it is taken only once unchanged for 30s on the fake clock.
func TestSettleWaitsForAnUnchangedFile(t *testing.T) {
	t.Parallel()
	for name, st := range stores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			root := t.TempDir()
			clk := clockwork.NewFakeClockAt(epoch)
			c := newConn(t, root, def(30*time.Second), clk)
			write(t, root, "landing/a.csv", "x", epoch)
			require.Empty(t, pass(t, ctx, c, st).Batches, "just seen")
			clk.Advance(20 * time.Second)
			write(t, root, "landing/a.csv", "xy", epoch.Add(20*time.Second))
			require.Empty(t, pass(t, ctx, c, st).Batches, "changed: settles again")
			clk.Advance(29 * time.Second)
			require.Empty(t, pass(t, ctx, c, st).Batches, "unchanged for 29s only")
			clk.Advance(time.Second)
			require.Equal(t, []placed{{0, state.BatchAppend, "landing/a.csv"}}, positions(pass(t, ctx, c, st).Batches))
		})
	}
}

// Scenario: a one-shot process sees each file once. old.csv was last
// written a settle period ago and is taken at first sight; new.csv was
// written just now and waits; future.csv carries a time ahead of the
// clock and waits a whole settle period from now, not from its time.
func TestSettleCountsFromTheLastWrite(t *testing.T) {
	t.Parallel()
	for name, st := range stores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			root := t.TempDir()
			clk := clockwork.NewFakeClockAt(epoch.Add(time.Minute))
			c := newConn(t, root, def(30*time.Second), clk)
			write(t, root, "landing/old.csv", "x", epoch.Add(30*time.Second))
			write(t, root, "landing/new.csv", "x", epoch.Add(time.Minute))
			write(t, root, "landing/future.csv", "x", epoch.Add(time.Hour))
			require.Equal(t, []placed{{0, state.BatchAppend, "landing/old.csv"}}, positions(pass(t, ctx, c, st).Batches))
			clk.Advance(29 * time.Second)
			require.Empty(t, pass(t, ctx, c, st).Batches, "new.csv and future.csv are 29s old")
			clk.Advance(time.Second)
			require.Equal(t, []placed{{1, state.BatchAppend, "landing/future.csv"}, {2, state.BatchAppend, "landing/new.csv"}}, positions(pass(t, ctx, c, st).Batches))
		})
	}
}

// Scenario: a.csv is staged; a replace run full/r1 arrives in part (two
// files, no _SUCCESS): nothing of it is staged and the snapshot is not
// consistent. _SUCCESS lands: the run is staged as replace_head,
// replace_final at positions 1, 2 after a.csv, and the snapshot pins 3 with
// only the run's files live (a.csv is replaced). A later append b.csv is
// live after the run.
func TestReplaceRunIncompleteThenComplete(t *testing.T) {
	t.Parallel()
	for name, st := range stores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			root := t.TempDir()
			c := newConn(t, root, def(0), clockwork.NewFakeClockAt(epoch))
			write(t, root, "landing/a.csv", "x", epoch)
			pass(t, ctx, c, st)
			snap, err := c.Snapshot(ctx, st)
			require.NoError(t, err)
			require.Equal(t, int64(1), snap.Pin)
			require.Equal(t, []connector.Chunk{{Index: 0, From: 0, To: 1, Locations: []string{"landing/a.csv"}}}, snap.Chunks)

			write(t, root, "landing/full/r1/part-1.csv", "x", epoch)
			write(t, root, "landing/full/r1/part-0.csv", "x", epoch)
			require.Empty(t, pass(t, ctx, c, st).Batches, "a run without _SUCCESS is not taken")
			_, err = c.Snapshot(ctx, st)
			require.ErrorIs(t, err, connector.ErrNotConsistent)
			require.ErrorContains(t, err, "landing/full/r1")

			write(t, root, "landing/full/r1/_SUCCESS", "", epoch)
			got := pass(t, ctx, c, st).Batches
			require.Equal(t, []placed{{1, state.BatchReplaceHead, "landing/full/r1/part-0.csv"}, {2, state.BatchReplaceFinal, "landing/full/r1/part-1.csv"}}, positions(got))
			require.Equal(t, "landing/full/r1", got[0].ReplaceRun)
			require.Equal(t, "landing/full/r1", got[1].ReplaceRun)

			write(t, root, "landing/b.csv", "x", epoch)
			pass(t, ctx, c, st)
			snap, err = c.Snapshot(ctx, st)
			require.NoError(t, err)
			require.Equal(t, int64(4), snap.Pin)
			require.Equal(t, []connector.Chunk{
				{Index: 0, From: 1, To: 3, Locations: []string{"landing/full/r1/part-0.csv", "landing/full/r1/part-1.csv"}},
				{Index: 1, From: 3, To: 4, Locations: []string{"landing/b.csv"}},
			}, snap.Chunks)
			d, err := newConn(t, root, def(0), clockwork.NewFakeClockAt(epoch)).Discover(ctx, st)
			require.NoError(t, err)
			require.Empty(t, d.Batches, "a restart re-stages no run")
		})
	}
}

// Scenario: a staged file is deleted before a build read it: Discover
// reports it as vanished, and Snapshot refuses with a VanishedError naming
// it, returning beside it the snapshot of what still exists (b.csv alone,
// pinned where the queue ends).
func TestVanishedFileIsReported(t *testing.T) {
	t.Parallel()
	for name, st := range stores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			root := t.TempDir()
			c := newConn(t, root, def(0), clockwork.NewFakeClockAt(epoch))
			write(t, root, "landing/a.csv", "x", epoch)
			write(t, root, "landing/b.csv", "x", epoch)
			pass(t, ctx, c, st)
			require.NoError(t, os.Remove(filepath.Join(root, "landing", "a.csv")))
			d, err := c.Discover(ctx, st)
			require.NoError(t, err)
			require.Empty(t, d.Batches)
			require.Equal(t, []string{"landing/a.csv"}, d.Vanished)
			snap, err := c.Snapshot(ctx, st)
			var ve *connector.VanishedError
			require.True(t, errors.As(err, &ve), "%v", err)
			require.Equal(t, []string{"landing/a.csv"}, ve.Locations)
			require.ErrorContains(t, err, "source raw.events: landing/a.csv vanished")
			require.Equal(t, int64(2), snap.Pin)
			require.Len(t, snap.Chunks, 1)
			require.Equal(t, []string{"landing/b.csv"}, snap.Chunks[0].Locations)
		})
	}
}

// Scenario: a definition whose path or replace_runs glob leaves the
// project (or is absolute) is refused, naming the source file and key.
func TestGlobThatEscapesIsRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ path, runs, key string }{
		{"../elsewhere/*.csv", "", "files.path"},
		{"landing/../../x/*.csv", "", "files.path"},
		{"/tmp/*.csv", "", "files.path"},
		{"landing/*.csv", "../full/*", "files.replace_runs"},
	} {
		d := def(0)
		d.Files.Path, d.Files.ReplaceRuns = tc.path, tc.runs
		_, err := files.New(d, files.Options{Root: t.TempDir()})
		require.ErrorIs(t, err, connector.ErrEscapes, tc.path)
		require.ErrorContains(t, err, "sources/events.yaml: source raw.events: "+tc.key)
	}
}

// Scenario: a symlink in the landing folder that points outside the
// project is not taken; one pointing inside is.
func TestSymlinkOutOfTheProjectIsSkipped(t *testing.T) {
	t.Parallel()
	root, outside := t.TempDir(), t.TempDir()
	write(t, root, "data/in.csv", "x", epoch)
	write(t, outside, "out.csv", "x", epoch)
	require.NoError(t, os.MkdirAll(filepath.Join(root, "landing"), 0o755))
	require.NoError(t, os.Symlink(filepath.Join(outside, "out.csv"), filepath.Join(root, "landing", "out.csv")))
	require.NoError(t, os.Symlink(filepath.Join(root, "data", "in.csv"), filepath.Join(root, "landing", "in.csv")))
	c := newConn(t, root, def(0), clockwork.NewFakeClockAt(epoch))
	d, err := c.Discover(t.Context(), emptyQueue{})
	require.NoError(t, err)
	require.Equal(t, []placed{{0, state.BatchAppend, "landing/in.csv"}}, positions(d.Batches))
}

type emptyQueue struct{}

func (emptyQueue) ListBatches(context.Context, state.ListBatchesParams) ([]state.Batch, error) {
	return nil, nil
}

// Scenario: two ingest processes watch one landing folder over one store.
// The second (settle 1m) sees b.csv a pass before a.csv lands; the first
// (settle 0) then stages a, b at 0, 1 in name order. The second, having
// read the queue before that staging, proposes b at 0: the store refuses
// it, staging nothing, and the second's next pass, derived from the queue,
// stages nothing: every file keeps the one position first staged.
func TestTwoProcessesNeverRenumber(t *testing.T) {
	t.Parallel()
	for name, st := range stores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			root := t.TempDir()
			one := newConn(t, root, def(0), clockwork.NewFakeClockAt(epoch))
			clkTwo := clockwork.NewFakeClockAt(epoch)
			two := newConn(t, root, def(time.Minute), clkTwo)
			write(t, root, "landing/b.csv", "x", epoch)
			require.Empty(t, pass(t, ctx, two, st).Batches, "two sees b, not settled")
			// a.csv is written as two next looks: settled for one (0s),
			// just written for two.
			write(t, root, "landing/a.csv", "x", epoch.Add(time.Minute))
			pass(t, ctx, one, st)
			want := []placed{{0, state.BatchAppend, "landing/a.csv"}, {1, state.BatchAppend, "landing/b.csv"}}
			require.Equal(t, want, positions(listAll(t, st)))

			clkTwo.Advance(time.Minute)
			stale, err := two.Discover(ctx, emptyQueue{}) // the queue as two read it before one staged
			require.NoError(t, err)
			require.Equal(t, []placed{{0, state.BatchAppend, "landing/b.csv"}}, positions(stale.Batches))
			_, err = st.StageBatches(ctx, state.StageBatchesParams{Source: src, Batches: stale.Batches, Now: epoch})
			require.Error(t, err, "a stale numbering is refused")
			require.Equal(t, want, positions(listAll(t, st)))

			clkTwo.Advance(time.Minute)
			require.Empty(t, pass(t, ctx, two, st).Batches)
			require.Equal(t, want, positions(listAll(t, st)))
		})
	}
}

// Scenario: old.csv, then a replace run r1 (two files), then a.csv, b.csv,
// c.csv are staged; a build pins the snapshot at 6 (three chunks: r1's
// files, a and b, c; old.csv is replaced). d.csv, e.csv land and a replace
// run r2 starts arriving (part-0.csv, no _SUCCESS): Snapshot refuses, but
// SnapshotAt the old pin returns exactly the old snapshot, label included,
// also from a second connector (a restart). A pin at r1's end holds r1
// alone; one inside r1, or past the queue, is refused with ErrPinInvalid.
// Then r2 completes and is staged after the pin: SnapshotAt refuses with
// ErrPinInvalid naming it.
func TestSnapshotAtKeepsThePinWhileAppendsArrive(t *testing.T) {
	t.Parallel()
	for name, st := range stores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			root := t.TempDir()
			c := newConn(t, root, def(0), clockwork.NewFakeClockAt(epoch))
			write(t, root, "landing/full/r1/part-0.csv", "x", epoch)
			write(t, root, "landing/full/r1/part-1.csv", "x", epoch)
			write(t, root, "landing/full/r1/_SUCCESS", "", epoch)
			write(t, root, "landing/old.csv", "x", epoch)
			pass(t, ctx, c, st) // old at 0 is replaced by r1 at 1, 2
			write(t, root, "landing/a.csv", "x", epoch)
			write(t, root, "landing/b.csv", "x", epoch)
			write(t, root, "landing/c.csv", "x", epoch)
			pass(t, ctx, c, st)
			want, err := c.Snapshot(ctx, st)
			require.NoError(t, err)
			require.Equal(t, int64(6), want.Pin)
			require.Len(t, want.Chunks, 3)

			write(t, root, "landing/d.csv", "x", epoch)
			write(t, root, "landing/e.csv", "x", epoch)
			write(t, root, "landing/full/r2/part-0.csv", "x", epoch)
			pass(t, ctx, c, st)
			_, err = c.Snapshot(ctx, st)
			require.ErrorIs(t, err, connector.ErrNotConsistent, "r2 is arriving")
			for _, conn := range []*files.Connector{c, newConn(t, root, def(0), clockwork.NewFakeClockAt(epoch))} {
				got, err := conn.SnapshotAt(ctx, st, want.Pin)
				require.NoError(t, err)
				require.Equal(t, want, got)
			}
			at3, err := c.SnapshotAt(ctx, st, 3)
			require.NoError(t, err)
			require.Equal(t, []connector.Chunk{{Index: 0, From: 1, To: 3, Locations: []string{"landing/full/r1/part-0.csv", "landing/full/r1/part-1.csv"}}}, at3.Chunks)
			_, err = c.SnapshotAt(ctx, st, 2)
			require.ErrorIs(t, err, connector.ErrPinInvalid, "a pin inside r1")
			_, err = c.SnapshotAt(ctx, st, 9)
			require.ErrorIs(t, err, connector.ErrPinInvalid, "a pin past the queue")
			require.ErrorContains(t, err, "the queue ends at position 8")

			write(t, root, "landing/full/r2/_SUCCESS", "", epoch)
			pass(t, ctx, c, st)
			_, err = c.SnapshotAt(ctx, st, want.Pin)
			require.ErrorIs(t, err, connector.ErrPinInvalid)
			require.ErrorContains(t, err, "source raw.events: snapshot at position 6: replace run landing/full/r2, staged after it, replaces what it holds")
		})
	}
}

// Scenario: a file live at a pin is deleted: SnapshotAt is a
// VanishedError naming it, with the snapshot of what still exists; a file
// staged after the pin vanishing does not concern it.
func TestSnapshotAtReportsAVanishedFile(t *testing.T) {
	t.Parallel()
	for name, st := range stores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			root := t.TempDir()
			c := newConn(t, root, def(0), clockwork.NewFakeClockAt(epoch))
			write(t, root, "landing/a.csv", "x", epoch)
			write(t, root, "landing/b.csv", "x", epoch)
			pass(t, ctx, c, st)
			write(t, root, "landing/c.csv", "x", epoch)
			pass(t, ctx, c, st)
			require.NoError(t, os.Remove(filepath.Join(root, "landing", "c.csv")))
			snap, err := c.SnapshotAt(ctx, st, 2)
			require.NoError(t, err, "c.csv is after the pin")
			require.Equal(t, []string{"landing/a.csv", "landing/b.csv"}, snap.Chunks[0].Locations)

			require.NoError(t, os.Remove(filepath.Join(root, "landing", "a.csv")))
			snap, err = c.SnapshotAt(ctx, st, 2)
			var ve *connector.VanishedError
			require.True(t, errors.As(err, &ve), "%v", err)
			require.Equal(t, []string{"landing/a.csv"}, ve.Locations)
			require.Equal(t, int64(2), snap.Pin)
			require.Equal(t, []string{"landing/b.csv"}, snap.Chunks[0].Locations)
		})
	}
}

// Scenario: a.csv, b.csv, c.csv are staged and a build pins 3; the queue
// then loses a.csv's batch (pruned): SnapshotAt 3 can no longer recompute
// the snapshot and refuses with ErrPinInvalid, saying which positions are
// missing, rather than return a snapshot without a.csv.
func TestSnapshotAtRefusesAPrunedQueue(t *testing.T) {
	t.Parallel()
	for name, st := range stores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			root := t.TempDir()
			c := newConn(t, root, def(0), clockwork.NewFakeClockAt(epoch))
			for _, f := range []string{"a", "b", "c"} {
				write(t, root, "landing/"+f+".csv", "x", epoch)
			}
			pass(t, ctx, c, st)
			_, err := c.SnapshotAt(ctx, st, 3)
			require.NoError(t, err)
			n, err := st.PruneBatches(ctx, state.PruneBatchesParams{Source: src, BelowSeq: 2})
			require.NoError(t, err)
			require.Equal(t, int64(1), n)
			_, err = c.SnapshotAt(ctx, st, 3)
			require.ErrorIs(t, err, connector.ErrPinInvalid)
			require.ErrorContains(t, err, "snapshot at position 3: the queue no longer holds positions 0 to 1")
		})
	}
}

// Scenario: a.csv, b.csv and c.csv are staged; b.csv is removed and its
// batch recorded skipped (state.RecordSkipped on a generation in flight).
// Discover no longer reports it vanished, and Snapshot and SnapshotAt
// leave it out, with no *VanishedError: the snapshot holds a.csv and
// c.csv, pinned at the queue's end. Removing a.csv, not skipped, is still
// reported vanished.
func TestSkippedBatchIsLeftOutOfSnapshots(t *testing.T) {
	t.Parallel()
	for name, st := range stores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			root := t.TempDir()
			c := newConn(t, root, def(0), clockwork.NewFakeClockAt(epoch))
			for _, f := range []string{"a", "b", "c"} {
				write(t, root, "landing/"+f+".csv", "x", epoch)
			}
			pass(t, ctx, c, st)
			g, err := st.PlanGeneration(ctx, state.PlanGenerationParams{Source: src, Kind: state.GenerationBackfill, Now: epoch})
			require.NoError(t, err)
			require.NoError(t, os.Remove(filepath.Join(root, "landing", "b.csv")))
			_, err = st.RecordSkipped(ctx, state.RecordSkippedParams{Source: src, Generation: g.Generation, Seq: 2,
				Reason: "landing/b.csv was removed", Now: epoch})
			require.NoError(t, err)

			d, err := c.Discover(ctx, st)
			require.NoError(t, err)
			require.Empty(t, d.Vanished, "a skipped batch is not vanished")
			snap, err := c.Snapshot(ctx, st)
			require.NoError(t, err)
			require.Equal(t, int64(3), snap.Pin)
			require.Len(t, snap.Chunks, 1)
			require.Equal(t, []string{"landing/a.csv", "landing/c.csv"}, snap.Chunks[0].Locations)
			at, err := c.SnapshotAt(ctx, st, 3)
			require.NoError(t, err)
			require.Equal(t, snap, at)

			require.NoError(t, os.Remove(filepath.Join(root, "landing", "a.csv")))
			_, err = c.Snapshot(ctx, st)
			var ve *connector.VanishedError
			require.True(t, errors.As(err, &ve), "%v", err)
			require.Equal(t, []string{"landing/a.csv"}, ve.Locations)
		})
	}
}
