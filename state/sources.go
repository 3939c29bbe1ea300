package state

import (
	"context"
	"errors"
	"time"
)

// Sentinel errors of the sources state machine. Implementations wrap them
// with context; callers branch with errors.Is.
var (
	// ErrBuildInFlight: PlanGeneration found another build of the source in
	// flight (a backfill or a replace run): one build per source at a time.
	// The caller defers to a later tick.
	ErrBuildInFlight = errors.New("a build of the source is in flight")
	// ErrConflictingGeneration: a transition named a generation (or
	// expected building and serving generations) that is no longer the
	// source's: another actor moved it. Nothing was written.
	ErrConflictingGeneration = errors.New("conflicting source generation")
	// ErrSourceParked: PlanGeneration on a source parked NEEDS_RESYNC,
	// without AllowParked. A resync (RequestBuild) clears the park.
	ErrSourceParked = errors.New("source is parked (NEEDS_RESYNC)")
)

// SourceState is the state a source is displayed in, derived from its
// generations and flags by DeriveSourceState; it is never stored.
type SourceState string

// The source states (the seed's, done right).
const (
	SourcePendingBackfill SourceState = "PENDING_BACKFILL"
	SourceBackfilling     SourceState = "BACKFILLING"
	SourcePrimed          SourceState = "PRIMED"
	SourceNeedsResync     SourceState = "NEEDS_RESYNC"
)

// DeriveSourceState returns the displayed state of a source from what is
// stored of it: building (0: no build in flight), serving (0: nothing served
// yet), whether a build is requested, and the parked reason ("" when not
// parked). The first rule that holds wins:
//
//   - parked: NEEDS_RESYNC (it serves what it served, but cannot be kept
//     complete until a resync or a replace run rebuilds it);
//   - a build in flight: BACKFILLING;
//   - nothing served yet, or a build requested: PENDING_BACKFILL;
//   - otherwise PRIMED: a generation serves and no build is owed.
//
// The state is only for display and metrics: whether models may read the
// source is decided by serving > 0 (PRIMED at least once), and every
// transition is pinned to generations, never to this value.
func DeriveSourceState(building, serving int64, buildRequested bool, parkedReason string) SourceState {
	switch {
	case parkedReason != "":
		return SourceNeedsResync
	case building != 0:
		return SourceBackfilling
	case serving == 0 || buildRequested:
		return SourcePendingBackfill
	default:
		return SourcePrimed
	}
}

// GenerationKind is how a generation is built.
type GenerationKind string

// The generation kinds.
const (
	// GenerationBackfill loads the source as of a pinned position, in
	// chunks, then catches up on the live batches after it.
	GenerationBackfill GenerationKind = "backfill"
	// GenerationReplace is a replace run (a folder of files with _SUCCESS,
	// a truncate): its batches are the generation's chunks, and its pin is
	// known only once its final batch has arrived.
	GenerationReplace GenerationKind = "replace"
)

// GenerationStatus is where a generation is in its life.
type GenerationStatus string

// The generation statuses. A generation is building from PlanGeneration
// until RecordSwap (swapped) or RetireGeneration (retired); a swapped
// generation is retired (reason RetiredReplaced) when a later one swaps in,
// and a removed source's generations are retired (RetiredRemoved). Retired
// is final.
const (
	GenerationBuilding GenerationStatus = "building"
	GenerationSwapped  GenerationStatus = "swapped"
	GenerationRetired  GenerationStatus = "retired"
)

// Retired reasons the store itself writes.
const (
	// RetiredReplaced: a later generation swapped in.
	RetiredReplaced = "replaced"
	// RetiredRemoved: the source was removed (RemoveSource).
	RetiredRemoved = "removed"
)

// Generation is one full build of a source's table: a number that only
// grows per source and is never reused, with its own physical table.
type Generation struct {
	Source     string         `json:"source"`
	Generation int64          `json:"generation"`
	Kind       GenerationKind `json:"kind"`
	// Pin is the source position the generation is built as of; nil while
	// a replace run is still arriving (see PinGeneration).
	Pin *int64 `json:"pin,omitempty"`
	// PinLabel is the connector's words for the pin (an LSN, a stream
	// sequence, a file ordinal, a Delta version), for humans.
	PinLabel      string           `json:"pin_label,omitempty"`
	Chunks        int              `json:"chunks"`
	Status        GenerationStatus `json:"status"`
	RetiredReason string           `json:"retired_reason,omitempty"`
	CreatedAt     time.Time        `json:"created_at"`
	SwappedAt     time.Time        `json:"swapped_at,omitzero"`
	RetiredAt     time.Time        `json:"retired_at,omitzero"`
	// AppliedSeq is the last live batch Seq the generation's table holds:
	// the batches its snapshot covered, then those applied onto it in Seq
	// order (RecordApplied). It is a cache of the warehouse's markers,
	// which are the arbiter: written after the warehouse commits, it may
	// lag them after a crash (an ingest pass heals it), never lead them.
	AppliedSeq int64 `json:"applied_seq,omitempty"`
	// ChunksApplied is how many of the generation's chunks its table holds
	// (RecordApplied, in chunk order): the progress of a build in flight,
	// a cache of the warehouse's chunk markers like AppliedSeq.
	ChunksApplied int `json:"chunks_applied,omitempty"`
	// Times is the least and greatest time_column value the generation's
	// table holds as of an applied seq (nil: not known), which the ingest
	// pass keeps the source's watermark from without reading the table
	// (RecordApplied with Times).
	Times *GenerationTimes `json:"-"`
}

// GenerationTimes is what a generation's table holds of its source's
// time_column as of applied seq Seq: the least and greatest value (zero:
// no row holds one), at microsecond precision.
type GenerationTimes struct {
	Seq      int64
	Min, Max time.Time
}

// SourceBlock is a staged batch that failed to apply, holding back the
// later ones of its source (RecordBlocked); RecordApplied clears it once
// the batch applies. One per source: a pass stops a source at its first
// failing batch.
type SourceBlock struct {
	// Generation is the generation the batch failed on (the serving one
	// for a live batch, the building one for a catch-up).
	Generation int64  `json:"generation"`
	Seq        int64  `json:"seq"`
	Location   string `json:"location"`
	// Reason is the last failure's error, naming the file.
	Reason        string    `json:"reason"`
	FirstFailedAt time.Time `json:"first_failed_at"`
	LastFailedAt  time.Time `json:"last_failed_at"`
	// Attempts counts the failures recorded of the batch since the first.
	Attempts int `json:"attempts"`
}

// Source is a source's state-store record: which generation builds, which
// serves, and the flags its displayed state derives from.
//
// Invariants the stores keep: Building is 0 or the one generation whose
// status is building; Serving is 0 or a swapped generation; both are at
// most LastGeneration, and Building > Serving; LastGeneration never
// decreases, also across RemoveSource, so a generation number is never
// issued twice for one name.
type Source struct {
	Name           string `json:"name"`
	Connector      string `json:"connector"`
	DefinitionHash string `json:"definition_hash"`
	// Building is the generation in flight; 0: none.
	Building int64 `json:"building,omitempty"`
	// Serving is the generation the source's view serves; 0: none yet.
	Serving int64 `json:"serving,omitempty"`
	// LastGeneration is the highest generation ever issued for the name.
	LastGeneration int64 `json:"last_generation"`
	// LastSeq is the highest batch Seq ever staged for the source (0:
	// none). A source whose serving generation's AppliedSeq reaches it,
	// with no build owed or in flight, has nothing to land.
	LastSeq        int64 `json:"last_seq,omitempty"`
	BuildRequested bool  `json:"build_requested,omitempty"`
	// ParkedReason is why the source is NEEDS_RESYNC; "" when it is not.
	ParkedReason string    `json:"parked_reason,omitempty"`
	RegisteredAt time.Time `json:"registered_at"`
	UpdatedAt    time.Time `json:"updated_at"`
	// RemovedAt is when RemoveSource removed the source; zero while it is
	// defined. A removed source is kept as a tombstone (its generations and
	// LastGeneration stay) until EnsureSources defines it again.
	RemovedAt time.Time `json:"removed_at,omitzero"`
	// Blocked is the batch that fails and holds back the later ones; nil
	// when none does, or when it failed on a generation that is no longer
	// the building or the serving one (retired: the block went with it).
	Blocked *SourceBlock `json:"blocked,omitempty"`
	// LateRows is the running total of rows applied older than the
	// watermark already published when they arrived (AddLateRows).
	LateRows int64 `json:"late_rows,omitempty"`
	// Generations are every generation ever issued to the name, by number.
	Generations []Generation `json:"generations,omitempty"`
}

// State returns the source's displayed state (see DeriveSourceState).
func (s *Source) State() SourceState {
	return DeriveSourceState(s.Building, s.Serving, s.BuildRequested, s.ParkedReason)
}

// SourceDefinition is what EnsureSources registers of a source definition.
type SourceDefinition struct {
	Name      string
	Connector string
	// DefinitionHash identifies the definition's content; a change is
	// recorded but rebuilds nothing.
	DefinitionHash string
}

// EnsureSourcesParams are the parameters of EnsureSources.
type EnsureSourcesParams struct {
	Sources []SourceDefinition
	Now     time.Time
}

// PlanGenerationParams are the parameters of PlanGeneration.
type PlanGenerationParams struct {
	Source string
	Kind   GenerationKind
	// Pin is the position the build is pinned to; nil for a replace run
	// whose final batch has not arrived, or a backfill a resync planned,
	// which the ingest pass that builds it pins (PinGeneration).
	Pin      *int64
	PinLabel string
	Chunks   int
	// AllowParked plans on a parked source (a replace run, which rebuilds
	// the table from scratch, heals it); otherwise a parked source refuses
	// with ErrSourceParked.
	AllowParked bool
	// KeepRequested leaves the source's build request as it is instead of
	// clearing it: the generation planned is not the build asked for (a
	// replace run planned while a resync is owed, which is built after
	// it). Kept in the planning transaction, the request survives a crash
	// right after it.
	KeepRequested bool
	Now           time.Time
}

// PinGenerationParams are the parameters of PinGeneration.
type PinGenerationParams struct {
	Source     string
	Generation int64
	Pin        int64
	PinLabel   string
	Chunks     int
	Now        time.Time
}

// RetireGenerationParams are the parameters of RetireGeneration.
type RetireGenerationParams struct {
	Source     string
	Generation int64
	Reason     string // required
	Now        time.Time
}

// RecordSwapParams are the parameters of RecordSwap.
type RecordSwapParams struct {
	Source     string
	Generation int64
	Now        time.Time
}

// RecordAppliedParams are the parameters of RecordApplied.
type RecordAppliedParams struct {
	Source     string
	Generation int64
	// Seq is the last live batch Seq the generation's table now holds.
	Seq int64
	// Chunks, when above 0, is how many of the generation's chunks its
	// table now holds (at most Generation.Chunks).
	Chunks int
	// Times, when not nil, is what the table holds of the time_column as
	// of applied seq Times.Seq (at most the applied seq): it replaces the
	// generation's Times when their Seq is behind (forward only, like the
	// applied seq).
	Times *GenerationTimes
}

// RecordBlockedParams are the parameters of RecordBlocked.
type RecordBlockedParams struct {
	Source     string
	Generation int64
	Seq        int64
	Location   string // required
	Reason     string // required: the failure, naming the file
	Now        time.Time
}

// RecordSkippedParams are the parameters of RecordSkipped.
type RecordSkippedParams struct {
	Source     string
	Generation int64 // the generation whose table holds the skip's marker
	Seq        int64
	Reason     string // required: why, naming the file (the event's reason)
	Now        time.Time
}

// AddLateRowsParams are the parameters of AddLateRows.
type AddLateRowsParams struct {
	Source     string
	Generation int64 // the generation the rows were applied to
	Rows       int64
}

// RequestBuildParams are the parameters of RequestBuild.
type RequestBuildParams struct {
	Source string
	// Retire, when not 0, is the building generation the caller read: it is
	// retired in the same transaction (a resync), or, when it is no longer
	// the building one, nothing is written (ErrConflictingGeneration).
	Retire int64
	Reason string // required: why the build is requested
	Now    time.Time
}

// SourceExpectation pins a transition that does not name one generation to
// the building and serving generations the caller read.
type SourceExpectation struct {
	Building int64 // 0: none
	Serving  int64 // 0: none
}

// ParkSourceParams are the parameters of ParkSource.
type ParkSourceParams struct {
	Source string
	Expect SourceExpectation
	Reason string // required
	Now    time.Time
}

// UnparkSourceParams are the parameters of UnparkSource.
type UnparkSourceParams struct {
	Source string
	Expect SourceExpectation
	Now    time.Time
}

// RemoveSourceParams are the parameters of RemoveSource.
type RemoveSourceParams struct {
	Source string
	Expect SourceExpectation
	Now    time.Time
}

// SourceFilter selects sources for ListSources; zero fields do not filter.
type SourceFilter struct {
	Names          []string
	IncludeRemoved bool
}

// Event kinds of the sources state machine. Their Model is the source's
// name, their Data a SourceEventData.
const (
	EventSourceRegistered    = "source_registered"
	EventSourcePlanned       = "source_planned"
	EventSourcePlanDeferred  = "source_plan_deferred"
	EventSourcePinned        = "source_pinned"
	EventSourceSwapped       = "source_swapped"
	EventSourceRetired       = "source_retired"
	EventSourceResyncRequest = "source_resync_requested"
	EventSourceNeedsResync   = "source_needs_resync"
	EventSourceUnparked      = "source_unparked"
	EventSourceRemoved       = "source_removed"
	// EventSourceBatchSkipped is written by RecordSkipped, in the
	// transaction that marks the batch skipped, when the ingest pass skips
	// the blocked batch whose staged file was removed: Data names the
	// generation, the seq and the file.
	EventSourceBatchSkipped = "source_batch_skipped"
)

// Reasons of source events the store writes itself: of source_registered
// (a new name, a name removed and defined again, a changed definition) and
// of source_plan_deferred. Retire, resync and park events carry the
// caller's reason.
const (
	ReasonSourceNew           = "new"
	ReasonSourceDefinedAgain  = "defined_again"
	ReasonSourceChanged       = "changed"
	ReasonSourceBuildInFlight = "build_in_flight"
)

// SourceEventData is the Data of the source events.
type SourceEventData struct {
	// Generation is the generation the transition moved (planned, pinned,
	// swapped, retired); for source_plan_deferred, the one in flight.
	Generation int64          `json:"generation,omitempty"`
	Kind       GenerationKind `json:"kind,omitempty"`
	Pin        *int64         `json:"pin,omitempty"`
	PinLabel   string         `json:"pin_label,omitempty"`
	Chunks     int            `json:"chunks,omitempty"`
	// Replaced is, for source_swapped, the generation that served before.
	Replaced int64 `json:"replaced,omitempty"`
	// Building and Serving are the source's generations after the
	// transition.
	Building int64 `json:"building,omitempty"`
	Serving  int64 `json:"serving,omitempty"`
	// Seq and Location are, for source_batch_skipped, the batch skipped
	// and its staged file.
	Seq      int64  `json:"seq,omitempty"`
	Location string `json:"location,omitempty"`
}

// SourceStore is the part of the Store that keeps the sources state
// machine. Every transition runs in one store transaction, is a
// compare-and-swap on the generation the caller has evidence for (design
// invariant 1), refuses with a typed error having written nothing, and
// appends its history event (Model: the source) in the same transaction.
// A source that does not exist, or is removed, is ErrNotFound.
type SourceStore interface {
	// EnsureSources registers definitions: a new name (or one removed and
	// defined again) gets a row with a build requested, a changed hash is
	// recorded; each with a source_registered event. Registering what is
	// registered writes nothing. It returns the sources, by name.
	EnsureSources(ctx context.Context, p EnsureSourcesParams) ([]*Source, error)
	// PlanGeneration issues generation LastGeneration+1 as the building
	// one, only while none is in flight (the one-build-per-source CAS), and
	// clears the build request unless KeepRequested: ErrBuildInFlight
	// otherwise, in which case it appends one source_plan_deferred event
	// per in-flight generation and changes nothing else. A parked source
	// refuses with ErrSourceParked unless AllowParked.
	PlanGeneration(ctx context.Context, p PlanGenerationParams) (Generation, error)
	// PinGeneration records the pin of the building generation p.Generation
	// that has none yet (a replace run whose final batch arrived):
	// ErrConflictingGeneration otherwise.
	PinGeneration(ctx context.Context, p PinGenerationParams) (Generation, error)
	// RetireGeneration retires p.Generation only if it is the building one
	// (ErrConflictingGeneration otherwise), and requests a build: a retired
	// build is still owed.
	RetireGeneration(ctx context.Context, p RetireGenerationParams) (*Source, error)
	// RecordSwap records that p.Generation now serves (the swap committed
	// in the warehouse), only if it is the building generation and still
	// building (the seed's bug 1: a retired generation's late promotion is
	// refused with ErrConflictingGeneration and changes nothing). The
	// generation that served before is retired (RetiredReplaced) and the
	// park is cleared: a swapped generation is complete. Recording the swap
	// of the generation that already serves is a no-op (a replay).
	RecordSwap(ctx context.Context, p RecordSwapParams) (*Source, error)
	// RecordApplied records that generation p.Generation of the source holds
	// every live batch up to p.Seq (Generation.AppliedSeq), a
	// compare-and-swap pinned to {source, generation} that only moves
	// forward: a p.Seq at or below the recorded one is a no-op that returns
	// the generation as stored (so concurrent recorders end at the
	// greatest), a retired or unknown generation is refused with
	// ErrConflictingGeneration, and a Seq never staged is refused. It
	// appends no event: it is a cache of the warehouse's markers.
	//
	// With p.Chunks it moves the generation's ChunksApplied forward the same
	// way (a count above the generation's Chunks is refused). When the seq
	// reaches the source's blocked batch (Source.Blocked) on that
	// generation, the block is cleared in the same transaction.
	RecordApplied(ctx context.Context, p RecordAppliedParams) (Generation, error)
	// RecordBlocked records that batch p.Seq failed on generation
	// p.Generation, a compare-and-swap pinned to {source, generation}: a
	// retired or unknown generation is refused with
	// ErrConflictingGeneration, and a seq the generation already holds, or
	// never staged, is refused. The same seq failing again keeps its first
	// failure's time and counts one more attempt; another seq replaces the
	// block. It appends no event (the pass logs the failure).
	RecordBlocked(ctx context.Context, p RecordBlockedParams) (SourceBlock, error)
	// RecordSkipped records that batch p.Seq is skipped (Batch.SkippedAt):
	// its staged data is gone and generation p.Generation's table holds its
	// marker and no row of it. In one transaction, pinned to {source,
	// generation, seq} like RecordApplied (a retired or unknown generation
	// is refused with ErrConflictingGeneration, a seq never staged or no
	// longer in the queue is refused), it marks the batch, moves the
	// generation's applied seq forward to p.Seq (clearing the block as
	// RecordApplied does) and appends EventSourceBatchSkipped. Marking is
	// forward only: a batch already skipped keeps its SkippedAt and gets no
	// second event (a replay, or another generation skipping it too), only
	// the applied seq moves.
	RecordSkipped(ctx context.Context, p RecordSkippedParams) (Batch, error)
	// AddLateRows adds p.Rows to the source's LateRows and returns the new
	// total, pinned to {source, generation} like RecordBlocked (the rows
	// were applied to a generation that is not retired). Rows below 0 are
	// refused.
	AddLateRows(ctx context.Context, p AddLateRowsParams) (int64, error)
	// RequestBuild requests a build (a resync) and clears the park, and
	// with p.Retire retires that building generation in the same
	// transaction.
	RequestBuild(ctx context.Context, p RequestBuildParams) (*Source, error)
	// ParkSource parks the source NEEDS_RESYNC, pinned to p.Expect; it
	// keeps serving what it serves. Parking again with the same reason
	// writes nothing.
	ParkSource(ctx context.Context, p ParkSourceParams) (*Source, error)
	// UnparkSource clears the park, pinned to p.Expect; a source not
	// parked is left as it is.
	UnparkSource(ctx context.Context, p UnparkSourceParams) (*Source, error)
	// RemoveSource removes the source, pinned to p.Expect: its building and
	// serving generations are retired (RetiredRemoved), its staged batches
	// deleted, and it is kept as a tombstone whose LastGeneration (and
	// highest batch Seq) a later EnsureSources continues from.
	RemoveSource(ctx context.Context, p RemoveSourceParams) (*Source, error)
	// GetSource returns the named source with its generations, removed or
	// not, or ErrNotFound.
	GetSource(ctx context.Context, name string) (*Source, error)
	// ListSources returns the sources matching f, by name, with their
	// generations.
	ListSources(ctx context.Context, f SourceFilter) ([]*Source, error)
}

// BatchKind is what a staged live batch does to the source's table.
type BatchKind string

// The batch kinds. A replace run's batches (head, tail..., final) are a
// generation of kind replace: they build a new table, never the serving one.
const (
	BatchAppend       BatchKind = "append"
	BatchUpsert       BatchKind = "upsert"
	BatchDelete       BatchKind = "delete"
	BatchReplaceHead  BatchKind = "replace_head"
	BatchReplaceTail  BatchKind = "replace_tail"
	BatchReplaceFinal BatchKind = "replace_final"
)

// Batch is one staged unit of a source's live data: the source positions
// [From, To) it covers, in the live queue at Seq.
type Batch struct {
	Source string `json:"source"`
	// Seq is the batch's place in the source's queue, assigned by
	// StageBatches: 1, 2, ... in staging order, which is position order.
	Seq  int64     `json:"seq"`
	From int64     `json:"from"`
	To   int64     `json:"to"`
	Kind BatchKind `json:"kind"`
	// ReplaceRun names the replace run a replace_* batch belongs to.
	ReplaceRun string `json:"replace_run,omitempty"`
	// Location is where the staged data is (a file, a folder of files).
	Location string `json:"location"`
	Rows     int64  `json:"rows"`
	// MinTime and MaxTime bound the batch's time_column; zero when unknown.
	MinTime  time.Time `json:"min_time,omitzero"`
	MaxTime  time.Time `json:"max_time,omitzero"`
	StagedAt time.Time `json:"staged_at"`
	// SkippedAt is when the batch was skipped (RecordSkipped): its staged
	// data is gone for good and no generation holds a row of it, so a
	// snapshot leaves it out; zero: not skipped. Once set it never changes.
	SkippedAt time.Time `json:"skipped_at,omitzero"`
}

// StageBatchesParams are the parameters of StageBatches.
type StageBatchesParams struct {
	Source string
	// Batches in position order; Seq and StagedAt are assigned.
	Batches []Batch
	Now     time.Time
}

// ListBatchesParams are the parameters of ListBatches.
type ListBatchesParams struct {
	Source   string
	AfterSeq int64
	Limit    int // 0: no limit; negative is an error
}

// PruneBatchesParams are the parameters of PruneBatches.
type PruneBatchesParams struct {
	Source   string
	BelowSeq int64 // batches with Seq < BelowSeq are deleted
}

// BatchQueue is the part of the Store that keeps the sources' live queue.
type BatchQueue interface {
	// StageBatches appends batches to the source's queue in one
	// transaction, assigning each the next Seq. It is idempotent by
	// position: a batch whose From is already staged with the same To,
	// Kind, ReplaceRun and Location is the staged one (returned, not
	// staged twice); with anything else, or a From before the end of the
	// last staged batch, the whole call is refused, staging nothing. Each
	// batch needs From < To and a Location. An unknown or removed source
	// is ErrNotFound.
	StageBatches(ctx context.Context, p StageBatchesParams) ([]Batch, error)
	// ListBatches returns the source's batches with Seq > AfterSeq, in Seq
	// order, at most Limit.
	ListBatches(ctx context.Context, p ListBatchesParams) ([]Batch, error)
	// PruneBatches deletes the source's batches below BelowSeq and returns
	// how many it deleted. Seqs are never reused: later batches continue
	// after the highest Seq ever staged.
	PruneBatches(ctx context.Context, p PruneBatchesParams) (int64, error)
}
