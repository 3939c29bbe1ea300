package warehouse

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Exactly-once ingestion: the warehouse is the arbiter.
//
// A source (raw.events) is served by a view that reads the physical table
// of one generation; a rebuild builds the next generation's table beside it
// in chunks, catches it up with the live batches, and swaps the view to it.
// Every step is ONE warehouse transaction holding the fence check, the data
// write and the step's marker, so that the state store (which cannot commit
// with the warehouse) can always be repaired from what the warehouse holds.
//
// Per warehouse, schema IngestSchema holds two tables, created idempotently
// by the first step:
//
//	fences  (source PRIMARY KEY, planned_generation, serving_generation, updated_at)
//	markers (source, generation, kind, idx, rows, applied_at,
//	         PRIMARY KEY (source, generation, kind, idx))
//
// Invariants every Ingester keeps:
//   - a step whose marker exists writes nothing and returns
//     ErrAlreadyApplied, also when a concurrent applier of the same step
//     committed first (DuckDB fails the loser at COMMIT, PostgreSQL makes
//     it wait and find the marker: both are ErrAlreadyApplied);
//   - only the planned generation writes chunks or swaps, and only the
//     serving generation (or the planned one, catching up before its swap)
//     takes live batches: any other step returns ErrFenced, writing
//     nothing;
//   - a generation's batches apply in order: batch n needs batch n-1's
//     marker, or n-1 is the last batch its snapshot covers (Covered);
//   - a swap refuses with ErrBehind unless the new generation has applied
//     every batch the serving one has, and it drops nothing: the old
//     generation's table stays (the janitor removes it), and the view that
//     serves the source is repointed in the same transaction, keeping the
//     views that read it (PostgreSQL re-creates dependents if it must).

// IngestSchema is the schema of the fence and marker tables.
const IngestSchema = "gapless__ingest"

// IngestStep is what one ApplyIngest does.
type IngestStep string

const (
	// StepFence moves the source's planned generation from From to
	// Generation (a compare-and-swap): planning a generation retires the
	// one planned before. With From 0 it creates the source's fence
	// (nothing planned or served yet). Covered is the last batch seq the
	// new generation's snapshot holds (0: none).
	StepFence IngestStep = "fence"
	// StepChunk writes chunk Index of Generation's snapshot into Table:
	// chunk 0 creates (or re-creates, after a crash) the table from the
	// rows, later chunks add theirs. Fence: planned = Generation.
	StepChunk IngestStep = "chunk"
	// StepBatch applies live batch Index onto Generation's Table by Apply.
	// Fence: serving = Generation, or with CatchUp planned = Generation.
	StepBatch IngestStep = "batch"
	// StepSwap makes Generation serve: View reads Table, the fence's
	// serving generation becomes Generation. Fence: planned = Generation;
	// every chunk 0..Chunks-1 applied; caught up with the serving one.
	StepSwap IngestStep = "swap"
)

// Marker kinds, as stored in the markers table.
const (
	MarkerChunk   = "chunk"
	MarkerBatch   = "batch"
	MarkerSwap    = "swap"
	MarkerCovered = "covered"
)

// IngestApply is how a batch changes the table (source.Apply's values).
type IngestApply string

const (
	IngestAppend  IngestApply = "append"  // rows are added
	IngestUpsert  IngestApply = "upsert"  // rows replace those of the same Key
	IngestReplace IngestApply = "replace" // the rows replace the whole table
)

// FileFormat is the format of staged files.
type FileFormat string

const (
	FormatParquet FileFormat = "parquet"
	FormatCSV     FileFormat = "csv"    // with a header line
	FormatJSON    FileFormat = "ndjson" // newline-delimited JSON
)

// StagedFiles are the rows of a step: local files of one format, read in
// the order given, columns matched by name (union by name).
type StagedFiles struct {
	Format FileFormat
	Paths  []string
}

// IngestParams is one ingestion step.
type IngestParams struct {
	Source     string
	Step       IngestStep
	Generation int64
	// From is the planned generation StepFence expects (0: no fence yet).
	From int64
	// Covered is, for StepFence, the last batch seq the new generation's
	// snapshot already holds: its first live batch is Covered+1.
	Covered int64
	// Index is the chunk index (from 0) or the batch seq (from 1).
	Index int64
	// Chunks is, for StepSwap, how many chunks the snapshot has: each must
	// be applied.
	Chunks int64
	// CatchUp fences a StepBatch on the planned generation instead of the
	// serving one: the catch-up of a table not serving yet.
	CatchUp bool
	// Table is the generation's physical table.
	Table Table
	// View is, for StepSwap, the table name models read (raw.events).
	View Table
	// Files are the step's rows (StepChunk, StepBatch).
	Files StagedFiles
	// Apply and Key say how a batch changes Table; chunks after the first
	// append, or upsert by Key when Apply is IngestUpsert.
	Apply IngestApply
	Key   []string
	// Pin, when positive, skips the staged rows of a StepBatch whose
	// PositionColumn is at most Pin: the generation's snapshot, pinned at
	// that position, holds them already (a batch straddling the pin). The
	// files must then have PositionColumn.
	Pin int64
	// Skip makes a StepBatch a skip: the same fence and in-order checks
	// and the batch's marker (0 rows), in one transaction, but no data and
	// no Files (a skip names none). It keeps the order when the batch's
	// staged file is gone for good: the batch after it applies next.
	Skip bool
	// TimeColumn, for a StepChunk or StepBatch, is the source's
	// time_column: the result then reports its least and greatest value
	// over the rows the step wrote, and how many of them are older than
	// LateBefore (when not zero), computed in the step's transaction from
	// the rows written, so that the ingest pass keeps a source's watermark
	// without reading its table. The staged rows must hold the column.
	TimeColumn string
	LateBefore time.Time
}

// PositionColumn is the column of staged rows that holds their position
// in the source's total order.
const PositionColumn = "_gapless_pos"

// IngestResult is what a committed step did.
type IngestResult struct {
	Rows int64 // rows written (inserted, or upserted)
	// MinTime and MaxTime are, with IngestParams.TimeColumn, the least and
	// greatest time of the rows written (zero: no row written holds one);
	// Late is how many rows written are older than LateBefore.
	MinTime, MaxTime time.Time
	Late             int64
	// Replaced is, for an upsert, how many rows of the table the step
	// replaced (deleted by key before inserting the staged rows): the
	// times of the table's other rows are then all a caller knows of it.
	Replaced int64
}

// IngestMarker is one applied step.
type IngestMarker struct {
	Generation int64
	Kind       string
	Index      int64
	Rows       int64
	AppliedAt  time.Time
}

// IngestState is what the warehouse holds of a source: its fence and its
// markers, the evidence the state store is repaired from after a crash.
type IngestState struct {
	Exists            bool // false: no fence yet (nothing planned)
	PlannedGeneration int64
	ServingGeneration int64          // 0: nothing serves yet
	Markers           []IngestMarker // ordered by generation, kind, index
}

// Ingester is implemented by the engines that land sources (both
// warehouse/duckdb and warehouse/postgres). It is an interface of its own,
// beside Engine, so that the model-running code and its test doubles keep
// depending on Engine alone, and the ingest worker asks for exactly what it
// uses.
type Ingester interface {
	// ApplyIngest runs one step in one transaction: the fence check, the
	// data write, the marker, and for a swap the view repoint. Outcomes:
	// nil (committed); ErrAlreadyApplied, ErrFenced, ErrBehind or
	// ErrOutOfOrder (nothing written); any other *Error (nothing
	// written).
	ApplyIngest(ctx context.Context, p IngestParams) (IngestResult, error)
	// IngestState reads the source's fence and markers.
	IngestState(ctx context.Context, source string) (IngestState, error)
}

// Marker returns the kind and index of the marker p's step writes ("" for
// StepFence, which writes the covered marker (MarkerCovered, Covered) of
// the new generation beside its compare-and-swap).
func (p IngestParams) Marker() (kind string, index int64) {
	switch p.Step {
	case StepChunk:
		return MarkerChunk, p.Index
	case StepBatch:
		return MarkerBatch, p.Index
	case StepSwap:
		return MarkerSwap, 0
	}
	return "", 0
}

// Validate refuses parameters that make no sense for p.Step, wrapping
// ErrInvalidArgument. It does not check names: the engine does, by its own
// rules.
func (p IngestParams) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidArgument, fmt.Sprintf(format, args...))
	}
	if p.Source == "" {
		return bad("ingest step has no source")
	}
	if p.TimeColumn != "" && p.Step != StepChunk && p.Step != StepBatch {
		return bad("a time column (%q) is for chunks and batches only", p.TimeColumn)
	}
	if p.Pin < 0 || (p.Pin > 0 && p.Step != StepBatch) {
		return bad("a pin (%d) is for live batches only, and not negative", p.Pin)
	}
	if p.Generation < 1 {
		return bad("generation must be at least 1, got %d", p.Generation)
	}
	if p.Skip {
		return p.validateSkip()
	}
	files := func() error {
		switch p.Files.Format {
		case FormatParquet, FormatCSV, FormatJSON:
		default:
			return bad("staged file format %q is not one of parquet, csv, ndjson", p.Files.Format)
		}
		if len(p.Files.Paths) == 0 {
			return bad("%s %d of generation %d names no staged file", p.Step, p.Index, p.Generation)
		}
		for _, f := range p.Files.Paths {
			if f == "" || strings.ContainsRune(f, 0) || !utf8.ValidString(f) {
				return bad("staged file path %q is empty, holds a NUL byte or is not UTF-8", f)
			}
		}
		return nil
	}
	switch p.Step {
	case StepFence:
		if p.From < 0 || p.From >= p.Generation {
			return bad("fencing generation %d from %d: the new generation must be greater than the old", p.Generation, p.From)
		}
		if p.Covered < 0 {
			return bad("covered batch seq must not be negative, got %d", p.Covered)
		}
		return nil
	case StepChunk:
		if p.Index < 0 {
			return bad("chunk index must not be negative, got %d", p.Index)
		}
		return files()
	case StepBatch:
		if p.Index < 1 {
			return bad("batch seq must be at least 1, got %d", p.Index)
		}
		switch p.Apply {
		case IngestAppend, IngestReplace:
		case IngestUpsert:
			if len(p.Key) == 0 {
				return bad("an upsert needs at least one key column")
			}
		default:
			return bad("apply %q is not one of append, upsert, replace", p.Apply)
		}
		return files()
	case StepSwap:
		if p.Chunks < 1 {
			return bad("a swap needs the number of chunks of the snapshot, got %d", p.Chunks)
		}
		return nil
	}
	return bad("ingest step %q is not one of fence, chunk, batch, swap", p.Step)
}

// validateSkip refuses a skip that is not a plain batch (see
// IngestParams.Skip), wrapping ErrInvalidArgument.
func (p IngestParams) validateSkip() error {
	switch {
	case p.Step != StepBatch:
		return fmt.Errorf("%w: a skip is a batch step, not a %s", ErrInvalidArgument, p.Step)
	case p.Index < 1:
		return fmt.Errorf("%w: batch seq must be at least 1, got %d", ErrInvalidArgument, p.Index)
	case len(p.Files.Paths) > 0:
		return fmt.Errorf("%w: skip of batch %d of generation %d names staged files; a skip writes no rows", ErrInvalidArgument, p.Index, p.Generation)
	case p.Pin != 0:
		return fmt.Errorf("%w: skip of batch %d of generation %d has a pin; a skip writes no rows", ErrInvalidArgument, p.Index, p.Generation)
	}
	return nil
}

// Describe names the step for messages: "events generation 2 batch 7".
func (p IngestParams) Describe() string {
	s := fmt.Sprintf("%s generation %d %s", p.Source, p.Generation, p.Step)
	switch p.Step {
	case StepChunk, StepBatch:
		s += fmt.Sprintf(" %d", p.Index)
	case StepFence:
		s += fmt.Sprintf(" from %d", p.From)
	}
	if p.Skip {
		s += " (skip)"
	}
	return s
}

// DuckDBSelect renders a DuckDB query of f's rows: every column, columns
// of several files united by name, without the rows at or below pin (by
// PositionColumn) when pin is positive. Both engines read staged files
// with DuckDB (PostgreSQL through an embedded in-memory one). Paths are
// rendered as string literals, quotes doubled; Validate has refused NUL
// bytes and invalid UTF-8.
func (f StagedFiles) DuckDBSelect(pin int64) string {
	q := "SELECT * FROM " + f.scan()
	if pin > 0 {
		q += " WHERE \"" + PositionColumn + "\" > " + strconv.FormatInt(pin, 10)
	}
	return q
}

func (f StagedFiles) scan() string {
	lits := make([]string, len(f.Paths))
	for i, p := range f.Paths {
		lits[i] = "'" + strings.ReplaceAll(p, "'", "''") + "'"
	}
	list := "[" + strings.Join(lits, ", ") + "]"
	switch f.Format {
	case FormatCSV:
		return "read_csv(" + list + ", header = true, union_by_name = true)"
	case FormatJSON:
		return "read_json(" + list + ", format = 'newline_delimited', union_by_name = true)"
	}
	return "read_parquet(" + list + ", union_by_name = true)"
}

// GenerationDropper is implemented by the engines that land sources (both
// warehouse/duckdb and warehouse/postgres): the janitor removes what a
// retired generation left with it. It is an interface of its own, beside
// Ingester, so that the ingest worker cannot drop anything.
type GenerationDropper interface {
	// DropGeneration drops generation p.Generation's table p.Table and
	// deletes its markers, in one transaction that holds the source's
	// fence: when the fence's planned or serving generation is
	// p.Generation, it refuses with ErrFenced, writing nothing (the fence
	// still needs those markers, and a swap may still make that table
	// serve). Dropping what is gone already (no table, no markers) is a
	// no-op.
	DropGeneration(ctx context.Context, p DropGenerationParams) (DropGenerationResult, error)
}

// DropGenerationParams are the parameters of DropGeneration.
type DropGenerationParams struct {
	Source     string
	Generation int64
	// Table is the generation's physical table.
	Table Table
}

// DropGenerationResult is what DropGeneration removed.
type DropGenerationResult struct {
	TableDropped bool
	Markers      int64 // markers deleted
}

// Validate refuses parameters that name no generation, wrapping
// ErrInvalidArgument.
func (p DropGenerationParams) Validate() error {
	if p.Source == "" {
		return fmt.Errorf("%w: dropping a generation of no source", ErrInvalidArgument)
	}
	if p.Generation < 1 {
		return fmt.Errorf("%w: generation must be at least 1, got %d", ErrInvalidArgument, p.Generation)
	}
	return nil
}
