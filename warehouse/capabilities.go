package warehouse

import "fmt"

// Capabilities is what an engine guarantees where engines differ. Every
// engine declares its own (Engine.Capabilities), gapless acts on the
// declaration (promotion, plan output, ingestion), and the conformance
// suite asserts the guarantee declared: the strong one where an engine
// claims it, the weaker stated one elsewhere, never a skip.
type Capabilities struct {
	// AtomicViews says CreateOrReplaceViews changes every view of a batch
	// in one transaction: a reader sees all old definitions or all new
	// ones, and a failure changes nothing (DuckDB, PostgreSQL).
	//
	// Without it (Trino: no multi-statement transactions) the engine keeps
	// the weaker ViewsInOrder guarantee: it first checks the whole batch
	// (names, duplicates, a table holding a view's name, each query binds),
	// and a batch that fails a check changes nothing; then it replaces the
	// views one at a time, each replace atomic, in the order given. A
	// reader may meanwhile see a prefix of the batch new and the rest old,
	// never a missing view; a failure part-way leaves that prefix new and
	// returns a *PartialViewsError; re-running the same batch completes it.
	AtomicViews bool
	// CaseSensitiveNames says names that differ only in case are different
	// objects and round-trip as written (DuckDB keeps the case it was
	// given, PostgreSQL quoted names). Without it the engine folds every
	// name to lower case (Trino), so "MixedCase" and "mixedcase" name one
	// object and Columns returns the folded name.
	CaseSensitiveNames bool
	// Ingest says the engine implements Ingester: each ingestion step is
	// one transaction holding the fence check, the data write and the
	// marker, which is what lands a source exactly once. Without it
	// gapless refuses to ingest into the warehouse, naming the engine.
	Ingest bool
}

// Promotion describes how an engine with these capabilities changes an
// environment's views, for plan output and the README's table of engines.
func (c Capabilities) Promotion() string {
	if c.AtomicViews {
		return "atomic: every view of the environment changes in one transaction"
	}
	return "one view at a time: every view is checked first, then repointed one by one in a fixed order; " +
		"readers may briefly see some views new and others old"
}

// PartialViewsError is returned by CreateOrReplaceViews on an engine
// without Capabilities.AtomicViews when a replace failed after the checks
// passed: Done views (a prefix of the batch, in order) are new, Failed is
// the view whose replace failed, and the rest are unchanged. Re-running
// the same batch completes it.
type PartialViewsError struct {
	Done   []Table
	Failed Table
	Err    error
}

func (e *PartialViewsError) Error() string {
	return fmt.Sprintf("replacing view %s after %d view(s) of the batch were already replaced (re-run the promotion to finish it): %v",
		e.Failed, len(e.Done), e.Err)
}

func (e *PartialViewsError) Unwrap() error { return e.Err }
