package sqlite

import (
	"encoding/json"
	"fmt"

	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/state/internal/storekit"
)

// checkRanges refuses, rather than lets the microsecond encoding round, a
// boundary that is not a whole microsecond or that does not fit in int64
// microseconds (see storekit.CheckMicros).
func checkRanges(s interval.Set) error { return storekit.CheckMicros(s) }

// checkKey refuses an interval key with an empty part.
func checkKey(k state.VersionKey) error {
	if k.Name == "" || k.Version == "" {
		return fmt.Errorf("interval key %+v: name and version are required", k)
	}
	return nil
}

// optionalJSON returns raw as text for a nullable JSON column: nil when
// empty, an error when it is not valid JSON.
func optionalJSON(what string, raw json.RawMessage) (any, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	if !json.Valid(raw) {
		return nil, fmt.Errorf("%s is not valid JSON", what)
	}
	return string(raw), nil
}

// rawJSON turns a nullable JSON column back into a RawMessage.
func rawJSON(s *string) json.RawMessage {
	if s == nil {
		return nil
	}
	return json.RawMessage(*s)
}

// errNoNow is returned when a time-dependent method is called without Now:
// state.ErrNoNow, so that callers can test for it with errors.Is.
var errNoNow = state.ErrNoNow
