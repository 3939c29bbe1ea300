package execute

import (
	"fmt"

	"github.com/gapless-dev/gapless/interval"
)

// BatchError is a batch that failed: its rows were rolled back and its
// interval was not recorded. Err is the warehouse's error (usually a
// *warehouse.Error) or the rendering error. When Err is a *StatementError
// for a post-statement, the rows were written before it failed: they stay,
// unrecorded, until the interval is computed again (see runStatements).
type BatchError struct {
	Model    string
	Version  string
	Interval interval.Range // zero for a kind built whole
	SQL      string
	Err      error
}

func (e *BatchError) Error() string {
	where := "building it whole"
	if !e.Interval.Empty() {
		where = "interval " + e.Interval.String()
	}
	return fmt.Sprintf("model %s (version %s), %s: %v", e.Model, e.Version, where, e.Err)
}

func (e *BatchError) Unwrap() error { return e.Err }
