// Package connector is the interface every source connector implements
// (files now; queues, CDC and table formats later): the discovery half of
// ingestion. A connector finds what is new at the source and says how to
// read a consistent snapshot of it; it writes nothing. The ingest worker
// stages what Discover returns (state.BatchQueue.StageBatches), plans builds
// from Snapshot, and applies the batches' locations to the warehouse.
//
// Positions are a total order per source chosen by the connector (a file
// ordinal, a stream sequence, an LSN). A batch covers the positions
// [From, To); batches are returned in position order, each starting where
// the previous one ends, the first at the end of the last staged batch.
package connector

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/gapless-dev/gapless/state"
)

// ErrNotConsistent is returned by Snapshot while no consistent position
// exists to pin (a replace run is still arriving): the worker defers the
// build to a later pass.
var ErrNotConsistent = errors.New("source has no consistent snapshot yet")

// ErrPinInvalid is wrapped by the error of SnapshotAt when the pin is no
// longer a valid snapshot of the source: a replace run staged after it
// replaces what it pinned, or the queue no longer holds the batches it
// covers. The build pinned there cannot resume: the worker retires it,
// naming the error, and plans anew.
var ErrPinInvalid = errors.New("the pin is no longer a valid snapshot of the source")

// ErrEscapes is wrapped by the error of a definition whose glob reaches
// outside the project.
var ErrEscapes = errors.New("path leaves the project")

// Queue is the part of the state store a connector reads: the source's
// staged batches, which are where its positions are recorded.
type Queue interface {
	ListBatches(ctx context.Context, p state.ListBatchesParams) ([]state.Batch, error)
}

// Discovery is what one Discover pass found.
type Discovery struct {
	// Batches are new since the queue's last staged batch, to stage in one
	// StageBatches call, in position order (Seq and StagedAt unset).
	Batches []state.Batch
	// Vanished are locations of staged batches that are gone from the
	// source, by position; a skipped batch (state.Batch.SkippedAt) is not
	// among them. The worker parks the source NEEDS_RESYNC naming
	// them when a generation still needs them.
	Vanished []string
}

// Chunk is one unit of a build: the locations it loads, in position
// order, covering the positions [From, To).
type Chunk struct {
	Index     int
	From, To  int64
	Locations []string
}

// Snapshot is a consistent view of the source for a build.
type Snapshot struct {
	// Pin is the position the build is as of: every staged batch with
	// To <= Pin is covered by Chunks; later batches (From >= Pin) are the
	// live batches the build catches up on.
	Pin int64
	// PinLabel is the connector's words for the pin, for humans.
	PinLabel string
	// Chunks cover what is live as of Pin, in position order; empty for a
	// source with nothing yet.
	Chunks []Chunk
}

// Connector is the discovery half of one source's connector.
//
// Invariant kept by every implementation: a position, once staged, keeps
// its batch: Discover derives what is already taken from the queue, so
// passes, restarts and several processes never renumber or re-stage what
// is staged.
type Connector interface {
	// Source is the name of the source the connector reads.
	Source() string
	// Discover returns what is new since the queue's last staged batch,
	// and the staged locations that vanished. It is side-effect free
	// toward the state store: staging is the caller's.
	Discover(ctx context.Context, q Queue) (Discovery, error)
	// Snapshot returns a consistent snapshot as of the queue's staged
	// batches, or an error wrapping ErrNotConsistent, or a
	// *VanishedError when a location the snapshot needs is gone. A
	// skipped batch (state.Batch.SkippedAt) is left out of every snapshot:
	// not loaded, not vanished. With a
	// *VanishedError it also returns the snapshot of what still exists,
	// without the vanished locations: a build the user asked for after
	// the loss (a resync) rebuilds from it; any other caller fails closed.
	Snapshot(ctx context.Context, q Queue) (Snapshot, error)
	// SnapshotAt returns the snapshot Snapshot returned when the queue's
	// staged batches ended at pin: the same Pin, PinLabel and Chunks,
	// computed from the staged batches up to pin alone, so that a build
	// left in flight (by a crash, or by another process) resumes at its
	// own pin however many batches were staged since; those are its live
	// batches, caught up on after its chunks. It fails wrapping
	// ErrPinInvalid, saying why, when pin is no longer a valid snapshot
	// (a replace run staged after pin replaces it; the queue no longer
	// holds the batches it covers), and is a *VanishedError, returned
	// with the snapshot of what still exists, when a location it needs is
	// gone. What arrives after pin (a replace run still arriving
	// included) never changes the snapshot at pin.
	SnapshotAt(ctx context.Context, q Queue, pin int64) (Snapshot, error)
}

// VanishedError is a snapshot that needs locations gone from the source.
type VanishedError struct {
	Source    string
	Locations []string
}

func (e *VanishedError) Error() string {
	return fmt.Sprintf("source %s: %s vanished before it was read", e.Source, strings.Join(e.Locations, ", "))
}

// Staged lists every batch of source in the queue, in Seq order.
func Staged(ctx context.Context, q Queue, source string) ([]state.Batch, error) {
	bs, err := q.ListBatches(ctx, state.ListBatchesParams{Source: source})
	if err != nil {
		return nil, fmt.Errorf("source %s: listing staged batches: %w", source, err)
	}
	return bs, nil
}
