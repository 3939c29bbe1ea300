// Package plan holds the plan: data, not a process. A plan is built against
// an environment at an execution time, records what it expects to replace,
// and is serialised to JSON with a format version so it can be applied
// later, possibly on another machine.
//
// Invariant (design, invariant 5): a plan keeps its bounds. Everything a
// plan will compute is written in it; applying it may skip work that is
// already done, but never widens a range.
package plan

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/policy"
	"github.com/gapless-dev/gapless/snapshot"
	"github.com/gapless-dev/gapless/state"
)

// FileKind marks a gapless plan file; any other value is a foreign file.
const FileKind = "gapless.plan"

// FormatVersion is the plan format this build writes and reads. A plan with
// another format is refused with a reason rather than misread.
const FormatVersion = 1

// ErrInvalidPlan is wrapped by every Decode failure: a foreign file, an
// unknown format version, a checksum mismatch, or missing fields.
var ErrInvalidPlan = errors.New("invalid plan file")

// Plan is a deploy of one environment.
type Plan struct {
	Kind          string    `json:"kind"`
	Format        int       `json:"format"`
	ID            string    `json:"id"`
	Environment   string    `json:"environment"`
	ExecutionTime time.Time `json:"execution_time"`
	CreatedAt     time.Time `json:"created_at"`

	// Expected is what the plan replaces: the environment's plan id and
	// generation when it was built. Promotion is a compare-and-swap on it.
	Expected Expected `json:"expected"`
	Options  Options  `json:"options"`

	// Snapshots is every snapshot the environment serves once the plan is
	// applied, in topological order.
	Snapshots []*snapshot.Snapshot `json:"snapshots"`
	// Changes lists every model that is added, removed or changed.
	Changes []Change `json:"changes"`
	// Backfills is the work the plan does: per new version, the intervals to
	// compute (never more, invariant 5).
	Backfills []Backfill `json:"backfills"`
	// Incumbents records, for each model whose version the plan replaces,
	// the snapshot the environment served at build time and its frontier.
	Incumbents []Incumbent `json:"incumbents"`

	// Checksum is a SHA-256 over the plan's JSON with Checksum empty. A
	// hand-edited or truncated plan fails Decode.
	Checksum string `json:"checksum"`
}

// Expected is the environment state a plan was built against.
type Expected struct {
	PlanID     string `json:"plan_id"`    // "" when the environment did not exist
	Generation int64  `json:"generation"` // 0 when the environment did not exist
}

// Options are the operator's choices, kept so that a replan can repeat them.
type Options struct {
	Start        time.Time `json:"start,omitzero"`
	End          time.Time `json:"end,omitzero"`
	ForwardOnly  bool      `json:"forward_only,omitempty"`
	SkipBackfill bool      `json:"skip_backfill,omitempty"`
	NoGaps       bool      `json:"no_gaps,omitempty"`
	Restate      []string  `json:"restate,omitempty"`
	Select       []string  `json:"select,omitempty"`
	// Policy is what promotion does when the incumbent advanced after the
	// plan was built, with its bounds; apply may override it.
	Policy policy.Policy `json:"policy,omitzero"`
}

// Change is one model's categorised change.
type Change struct {
	Name                string            `json:"name"`
	Category            snapshot.Category `json:"category"`
	ForwardOnly         bool              `json:"forward_only,omitempty"`
	MetadataChanged     bool              `json:"metadata_changed,omitempty"`
	PreviousFingerprint string            `json:"previous_fingerprint,omitempty"`
	PreviousVersion     string            `json:"previous_version,omitempty"`
	Fingerprint         string            `json:"fingerprint,omitempty"`
	Version             string            `json:"version,omitempty"`
	// Diff is a unified diff of the query for direct changes.
	Diff string `json:"diff,omitempty"`
}

// Backfill is the work for one new version.
type Backfill struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	// Ranges to compute, merged. Empty for kinds that are built whole
	// (FULL, SEED, VIEW), where Whole is set instead.
	Ranges  interval.Set `json:"ranges"`
	Buckets int          `json:"buckets"`
	Whole   bool         `json:"whole,omitempty"`
	// End is the exclusive bound the plan computed up to, for the report:
	// the incumbent's frontier at build time for a replaced model in prod,
	// capped at the execution time's due bound.
	End time.Time `json:"end,omitzero"`
}

// Incumbent is a replaced model's snapshot and frontier at build time.
type Incumbent struct {
	Name     string            `json:"name"`
	Snapshot state.SnapshotRef `json:"snapshot"`
	Frontier time.Time         `json:"frontier,omitzero"` // zero: no intervals
}

// Encode returns the plan as indented JSON with Kind, Format and Checksum
// set. The checksum covers every other byte of meaning.
func Encode(p *Plan) ([]byte, error) {
	c := *p
	c.Kind, c.Format, c.Checksum = FileKind, FormatVersion, ""
	sum, err := checksum(&c)
	if err != nil {
		return nil, err
	}
	c.Checksum = sum
	b, err := json.MarshalIndent(&c, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding plan %s: %w", p.ID, err)
	}
	return append(b, '\n'), nil
}

// Decode parses a plan file and refuses, with a reason wrapping
// ErrInvalidPlan, anything that is not an intact plan of this format.
func Decode(b []byte) (*Plan, error) {
	var head struct {
		Kind   string `json:"kind"`
		Format int    `json:"format"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return nil, fmt.Errorf("%w: not JSON: %v", ErrInvalidPlan, err)
	}
	if head.Kind != FileKind {
		return nil, fmt.Errorf("%w: kind is %q, want %q (this is not a gapless plan)", ErrInvalidPlan, head.Kind, FileKind)
	}
	if head.Format != FormatVersion {
		return nil, fmt.Errorf("%w: format %d, this gapless reads format %d", ErrInvalidPlan, head.Format, FormatVersion)
	}
	var p Plan
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidPlan, err)
	}
	want := p.Checksum
	p.Checksum = ""
	got, err := checksum(&p)
	if err != nil {
		return nil, err
	}
	if want != got {
		return nil, fmt.Errorf("%w: checksum mismatch (the file was edited or truncated); build a new plan", ErrInvalidPlan)
	}
	p.Checksum = want
	switch {
	case p.ID == "":
		return nil, fmt.Errorf("%w: no id", ErrInvalidPlan)
	case p.Environment == "":
		return nil, fmt.Errorf("%w: no environment", ErrInvalidPlan)
	case p.ExecutionTime.IsZero():
		return nil, fmt.Errorf("%w: no execution time", ErrInvalidPlan)
	}
	return &p, nil
}

func checksum(p *Plan) (string, error) {
	b, err := json.Marshal(p)
	if err != nil {
		return "", fmt.Errorf("encoding plan %s for its checksum: %w", p.ID, err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}
