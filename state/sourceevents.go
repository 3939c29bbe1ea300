package state

import "slices"

// SourceEventKinds returns the kinds of the sources' history events, the
// closed set the source store and the ingest worker write (EventSource*),
// in the order of their declaration. A new source event kind is added here
// with its constant: tests of the ingest paths check that every source
// event they find is of one of these kinds.
func SourceEventKinds() []string {
	return slices.Clone(sourceEventKinds)
}

var sourceEventKinds = []string{
	EventSourceRegistered, EventSourcePlanned, EventSourcePlanDeferred, EventSourcePinned, EventSourceSwapped,
	EventSourceRetired, EventSourceResyncRequest, EventSourceNeedsResync, EventSourceUnparked, EventSourceRemoved,
	EventSourceBatchSkipped,
}
