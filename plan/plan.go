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
	"github.com/gapless-dev/gapless/promotion"
	"github.com/gapless-dev/gapless/snapshot"
	"github.com/gapless-dev/gapless/state"
)

// FileKind marks a gapless plan file; any other value is a foreign file.
const FileKind = "gapless.plan"

// FormatVersion is the plan format this build writes. It reads every
// format from OldestFormat to FormatVersion; a plan with any other format is
// refused with a reason rather than misread.
//
//   - 1: the first format.
//   - 2: adds each change's reasons and header diff, the operator's category
//     choices (Options.Categories) and the versions the plan reuses
//     (Reuses). A format-1 plan reads as a plan without them; an older
//     gapless refuses a format-2 plan by its format instead of misreading
//     the choices it does not know.
//
// A plan saved in a state store is written at StoredFormat (3) instead,
// which names its snapshots by key; Decode refuses it (it is not a file),
// DecodeStored reads every format.
const FormatVersion = 2

// OldestFormat is the oldest plan format this build reads.
const OldestFormat = 1

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
	// Reuses lists the new versions whose work, within the plan's bounds,
	// state already held at build time (another environment, or an earlier
	// plan, built it): for the report, since that work is not in Backfills.
	Reuses []Reuse `json:"reuses,omitempty"`
	// Empty is the work an empty backfill (Options.EmptyBackfill) records
	// as done without computing it: per new version, the ranges to record
	// (for a kind built whole, the range it records). RecordEmpty writes
	// them; the rows are not there, by the operator's choice.
	Empty []Backfill `json:"empty_backfills,omitempty"`
	// Waits lists the new versions whose work the plan holds back because
	// a source upstream has not published that far (see SourceWait): they
	// are computed by the scheduler once it has.
	Waits []SourceWait `json:"waits,omitempty"`

	// Checksum is a SHA-256 over the plan's JSON with Checksum empty. A
	// hand-edited or truncated plan fails Decode.
	Checksum string `json:"checksum"`

	// keys are the snapshot keys of a StoredFormat plan DecodeStored read,
	// until ResolveSnapshots reads its Snapshots (nil otherwise).
	keys []state.SnapshotKey
	// base is the saved plan a StoredFormat plan changes ("" when whole).
	base string
}

// Expected is the environment state a plan was built against.
type Expected struct {
	PlanID     string `json:"plan_id"`    // "" when the environment did not exist
	Generation int64  `json:"generation"` // 0 when the environment did not exist
}

// Options are the operator's choices, kept so that a replan can repeat them.
//
// The zero value is the safe path: promotion runs the no-gap check.
// Skipping it takes an explicit AllowGaps, which the plan records and which
// is refused for prod (CheckOptions).
type Options struct {
	Start        time.Time
	End          time.Time
	ForwardOnly  bool
	SkipBackfill bool
	// AllowGaps skips the no-gap check at promotion: the environment may
	// be promoted with a gap. Never allowed for prod.
	AllowGaps bool
	Restate   []string
	Select    []string
	// Policy is what promotion does when the incumbent advanced after the
	// plan was built, with its bounds; apply may override it.
	Policy promotion.Policy
	// Categories are the operator's category choices by model name
	// (--category): kept so that a replan makes the same ones.
	Categories map[string]snapshot.Choice
	// BackfillModels restricts the backfill to these models and their
	// upstream models (--backfill-model, development environments only,
	// see CheckOptions): every other model keeps what the environment
	// serves, so nothing unbackfilled is promoted (Assemble).
	BackfillModels []string
	// EmptyBackfill records the missing intervals as covered without
	// computing them (--empty-backfill): the plan's work goes to
	// Plan.Empty instead of Plan.Backfills, and RecordEmpty writes it, with
	// one state.EventEmptyBackfill history event per model.
	EmptyBackfill bool
}

// Checks reports whether promotion runs the no-gap check: always, unless
// the plan allows gaps.
func (o Options) Checks() bool { return !o.AllowGaps }

// optionsFile is Options as plan files hold them, in every format: the
// check is recorded as "no_gaps": true and a plan that allows gaps records
// none. Options stays its own wire type so that the Go zero value (check)
// and the file's absent key (no check, as every plan file has meant) can
// differ, and a decoded file re-encodes to its own bytes (its checksum).
type optionsFile struct {
	Start        time.Time                  `json:"start,omitzero"`
	End          time.Time                  `json:"end,omitzero"`
	ForwardOnly  bool                       `json:"forward_only,omitempty"`
	SkipBackfill bool                       `json:"skip_backfill,omitempty"`
	NoGaps       bool                       `json:"no_gaps,omitempty"`
	Restate      []string                   `json:"restate,omitempty"`
	Select       []string                   `json:"select,omitempty"`
	Policy       promotion.Policy           `json:"policy,omitzero"`
	Categories   map[string]snapshot.Choice `json:"categories,omitempty"`
	// BackfillModels and EmptyBackfill are absent unless set, so a plan
	// without them encodes as before.
	BackfillModels []string `json:"backfill_models,omitempty"`
	EmptyBackfill  bool     `json:"empty_backfill,omitempty"`
}

// MarshalJSON writes o as plan files hold it (optionsFile).
func (o Options) MarshalJSON() ([]byte, error) {
	return json.Marshal(optionsFile{Start: o.Start, End: o.End, ForwardOnly: o.ForwardOnly, SkipBackfill: o.SkipBackfill,
		NoGaps: !o.AllowGaps, Restate: o.Restate, Select: o.Select, Policy: o.Policy, Categories: o.Categories,
		BackfillModels: o.BackfillModels, EmptyBackfill: o.EmptyBackfill})
}

// UnmarshalJSON reads o from a plan file (optionsFile): a file without
// "no_gaps": true allows gaps, as it always has. Unknown keys are refused,
// as everywhere in a plan file.
func (o *Options) UnmarshalJSON(b []byte) error {
	var f optionsFile
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return fmt.Errorf("options: %w", err)
	}
	*o = Options{Start: f.Start, End: f.End, ForwardOnly: f.ForwardOnly, SkipBackfill: f.SkipBackfill,
		AllowGaps: !f.NoGaps, Restate: f.Restate, Select: f.Select, Policy: f.Policy, Categories: f.Categories,
		BackfillModels: f.BackfillModels, EmptyBackfill: f.EmptyBackfill}
	return nil
}

// ErrGapsInProd is wrapped by CheckOptions when a prod plan allows gaps.
var ErrGapsInProd = errors.New("prod always runs the no-gap check at promotion")

// ErrBackfillModelInProd is wrapped by CheckOptions when a prod plan
// restricts its backfill (Options.BackfillModels), as SQLMesh refuses it.
var ErrBackfillModelInProd = errors.New("--backfill-model is only for development environments")

// CheckOptions refuses options an environment may not have: allowing gaps
// (Options.AllowGaps) or restricting the backfill (Options.BackfillModels)
// in prod, and an empty backfill with a skipped one. Build and apply both
// call it, so no prod plan is built or promoted without the no-gap check.
func CheckOptions(env string, o Options) error {
	if env == Prod && o.AllowGaps {
		return fmt.Errorf("plan for %s allows gaps: %w", env, ErrGapsInProd)
	}
	if env == Prod && len(o.BackfillModels) > 0 {
		return fmt.Errorf("plan for %s: %w (SQLMesh refuses it too): prod serves every model it changes, backfilled", env, ErrBackfillModelInProd)
	}
	if o.EmptyBackfill && o.SkipBackfill {
		return fmt.Errorf("plan for %s: an empty backfill records the missing intervals, a skipped one does not: choose one", env)
	}
	return nil
}

// Change is one model's categorised change.
type Change struct {
	Name     string            `json:"name"`
	Category snapshot.Category `json:"category"`
	// Reason says why the model is in its category ("column revenue
	// changes", "reads demo.x, which changes breakingly", ...).
	Reason      string `json:"reason,omitempty"`
	ForwardOnly bool   `json:"forward_only,omitempty"`
	// ForwardOnlyReason says why the change is forward-only.
	ForwardOnlyReason string `json:"forward_only_reason,omitempty"`
	MetadataChanged   bool   `json:"metadata_changed,omitempty"`
	// Chosen is the operator's choice for the model (--category), and
	// AutoCategory the category gapless found itself.
	Chosen              snapshot.Choice   `json:"chosen,omitempty"`
	AutoCategory        snapshot.Category `json:"auto_category,omitempty"`
	PreviousFingerprint string            `json:"previous_fingerprint,omitempty"`
	PreviousVersion     string            `json:"previous_version,omitempty"`
	Fingerprint         string            `json:"fingerprint,omitempty"`
	Version             string            `json:"version,omitempty"`
	// Diff is a unified diff of the query for direct changes.
	Diff string `json:"diff,omitempty"`
	// HeaderDiff is a unified diff of the MODEL (...) header, as it takes
	// effect (defaults applied), when it changed.
	HeaderDiff string `json:"header_diff,omitempty"`
}

// Reuse is a new version whose work the plan finds, at build time, already
// done in part or in whole: its table and interval record exist because
// another environment (or an earlier plan) built the same version.
type Reuse struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	// Covered is what state held of the plan's window for the version
	// (for a kind built whole, its whole range).
	Covered interval.Set `json:"covered"`
	// Complete: nothing is left to compute, and the plan has no backfill
	// for the version; otherwise its backfill is only what is missing.
	Complete bool `json:"complete,omitempty"`
	// BuiltBy names the other environments that served the version at
	// build time, sorted; empty when none does (an earlier plan built it).
	BuiltBy []string `json:"built_by,omitempty"`
}

// SourceWait is a new version whose work waits on sources: Held is what the
// plan would have computed and left out (for a kind built whole, Whole
// instead), and Sources the upstream sources that do not cover it, with
// how far each is complete (zero: not landed yet).
type SourceWait struct {
	Name    string         `json:"name"`
	Version string         `json:"version"`
	Held    interval.Set   `json:"held"`
	Whole   bool           `json:"whole,omitempty"`
	Sources []WaitedSource `json:"sources"`
}

// WaitedSource is one source a SourceWait waits on.
type WaitedSource struct {
	Name string `json:"name"`
	// CompleteThrough is the end of what the source has published; zero
	// when it has not landed yet.
	CompleteThrough time.Time `json:"complete_through,omitzero"`
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
	if !p.Resolved() {
		return nil, fmt.Errorf("encoding plan %s: its snapshots are not resolved (ResolveSnapshots)", p.ID)
	}
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
// ErrInvalidPlan, anything that is not an intact plan file of a format
// from OldestFormat to FormatVersion (a StoredFormat payload, which names
// its snapshots instead of holding them, is refused as such: see
// DecodeStored).
func Decode(b []byte) (*Plan, error) {
	format, err := peekFormat(b)
	if err != nil {
		return nil, err
	}
	switch {
	case format == StoredFormat:
		return nil, fmt.Errorf("%w: format %d is a plan saved in a state store, which names its snapshots instead of holding them, not a plan file; write a plan file with `gapless plan --out`",
			ErrInvalidPlan, format)
	case format > FormatVersion:
		return nil, fmt.Errorf("%w: format %d was written by a newer gapless (this one reads formats %d to %d); apply it with that gapless, or build the plan again with this one",
			ErrInvalidPlan, format, OldestFormat, FormatVersion)
	case format < OldestFormat:
		return nil, fmt.Errorf("%w: format %d, this gapless reads formats %d to %d; build a new plan", ErrInvalidPlan, format, OldestFormat, FormatVersion)
	}
	var p Plan
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidPlan, err)
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
	if err := checkDecoded(&p); err != nil {
		return nil, err
	}
	return &p, nil
}

// peekFormat reads a payload's kind and format, refusing a foreign one.
func peekFormat(b []byte) (int, error) {
	var head struct {
		Kind   string `json:"kind"`
		Format int    `json:"format"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return 0, fmt.Errorf("%w: not JSON: %w", ErrInvalidPlan, err)
	}
	if head.Kind != FileKind {
		return 0, fmt.Errorf("%w: kind is %q, want %q (this is not a gapless plan)", ErrInvalidPlan, head.Kind, FileKind)
	}
	return head.Format, nil
}

// checkDecoded refuses a decoded plan without the fields every plan has.
func checkDecoded(p *Plan) error {
	switch {
	case p.ID == "":
		return fmt.Errorf("%w: no id", ErrInvalidPlan)
	case p.Environment == "":
		return fmt.Errorf("%w: no environment", ErrInvalidPlan)
	case p.ExecutionTime.IsZero():
		return fmt.Errorf("%w: no execution time", ErrInvalidPlan)
	}
	return nil
}

func checksum(p *Plan) (string, error) {
	b, err := json.Marshal(p)
	if err != nil {
		return "", fmt.Errorf("encoding plan %s for its checksum: %w", p.ID, err)
	}
	return checksumOf(b), nil
}

func checksumOf(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
