package sqlite

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/state"
)

// minMicros and maxMicros bound the instants an int64 of microseconds can
// hold; interval boundaries outside them are refused rather than wrapped.
var (
	minMicros = time.UnixMicro(math.MinInt64 + 1)
	maxMicros = time.UnixMicro(math.MaxInt64)
)

// checkRanges refuses, rather than lets the microsecond encoding round, a
// boundary that is not a whole microsecond or that does not fit in int64
// microseconds: silently widening or narrowing a range would record rows as
// computed that were not, or drop the record of rows that were.
func checkRanges(s interval.Set) error {
	for r := range s.All() {
		for _, t := range [2]time.Time{r.Start, r.End} {
			if t.Nanosecond()%1000 != 0 {
				return fmt.Errorf("interval boundary %s is not a whole microsecond", t.Format(time.RFC3339Nano))
			}
			if t.Before(minMicros) || t.After(maxMicros) {
				return fmt.Errorf("interval boundary %s is out of range", t.Format(time.RFC3339Nano))
			}
		}
	}
	return nil
}

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

// errNoNow is returned when a time-dependent method is called without Now.
var errNoNow = errors.New("now is required (time is injected; it is never read from the clock)")
