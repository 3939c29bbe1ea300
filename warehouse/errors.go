package warehouse

import "errors"

// The errors every engine returns, wrapped inside its *Error, for the
// same mistakes: test with errors.Is whatever the engine. The conformance
// suite (warehousetest) asserts them on every engine. An engine's own
// failures (a server error, a DuckDB catalog error) stay wrapped beside
// them for errors.As.
var (
	// ErrInvalidIdentifier: an empty, non-UTF-8, NUL-containing or (where
	// the engine bounds it) too long schema, table or column name. Nothing
	// was sent to the engine.
	ErrInvalidIdentifier = errors.New("invalid identifier")
	// ErrInvalidType: a column type that is not exactly one type name.
	// Nothing was sent to the engine.
	ErrInvalidType = errors.New("invalid column type")
	// ErrInvalidArgument: parameters that make no sense (End before Start,
	// no key columns, a key or time column the table lacks, a row whose
	// width differs from its column list, an empty query, …).
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrNotFound: the table or view does not exist.
	ErrNotFound = errors.New("table or view does not exist")
	// ErrNotATable: the object exists but is a view (or another kind of
	// relation) where a table is required.
	ErrNotATable = errors.New("not a table")
	// ErrUnsupportedTimeColumn: InsertInterval's time column has a type the
	// engine cannot bound an interval of.
	ErrUnsupportedTimeColumn = errors.New("time column must be timestamp, timestamptz or date")
	// ErrDuplicateKey: MergeByKey's query returned two rows with one key
	// (NULLs counting as equal); nothing was changed.
	ErrDuplicateKey = errors.New("merge query returns a key more than once")
	// ErrDependentObject: ReplaceTable found an object depending on the
	// table that the engine cannot rebuild (a materialized view, say);
	// nothing was changed.
	ErrDependentObject = errors.New("an object the engine cannot rebuild depends on the table")
	// ErrLocked: another process holds the warehouse (an embedded engine's
	// database file), beyond the wait the caller allowed.
	ErrLocked = errors.New("warehouse database file is locked by another process")
)

// The outcomes of Ingester.ApplyIngest besides success, wrapped inside
// the engine's *Error (errors.Is), the same on every engine.
var (
	// ErrAlreadyApplied: the step's marker exists (a replay, or a
	// concurrent applier won): nothing was written.
	ErrAlreadyApplied = errors.New("ingest step already applied")
	// ErrFenced: the fence names another generation (a retired
	// generation's late chunk, swap or batch): nothing was written.
	ErrFenced = errors.New("ingest step fenced: the generation may not write")
	// ErrBehind: a swap found the new generation behind the serving one
	// (it has not applied every batch the serving generation has):
	// nothing was written; catch up and retry.
	ErrBehind = errors.New("generation is behind the serving generation")
	// ErrOutOfOrder: a batch or chunk whose predecessor has no marker:
	// nothing was written.
	ErrOutOfOrder = errors.New("ingest step out of order: its predecessor is not applied")
)
