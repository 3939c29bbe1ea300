// Package snapshot turns a model into a snapshot: the model at a fingerprint,
// with a version that decides which physical table it shares.
//
// It also categorises what changed between two sets of snapshots (breaking,
// non-breaking, metadata-only, indirect, forward-only) and applies SQLMesh's
// version-reuse rules to the result. It is plain Go: the SQL-aware parts
// (canonical query text, "only projections were added") arrive as inputs.
package snapshot

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"time"

	"github.com/gapless-dev/gapless/model"
)

// hashLen is the number of hex digits kept from a SHA-256: 64 bits, ample to
// tell the versions of one model apart, short enough for a table name.
const hashLen = 16

// Fingerprint identifies a model's content. Two snapshots with equal
// fingerprints are the same snapshot.
type Fingerprint struct {
	// DataHash covers everything that decides the rows of the model's table:
	// the canonical query, the kind and its physical parameters, declared
	// columns, seed content, dialect, interval unit and time column format.
	DataHash string `json:"data_hash"`
	// MetadataHash covers what does not change rows: schedule, owner,
	// description, tags, grain, start/end, lookback, batch size, flags.
	MetadataHash string `json:"metadata_hash"`
	// ParentDataHash and ParentMetadataHash combine the parents' own data
	// (respectively metadata) hashes, transitively.
	ParentDataHash     string `json:"parent_data_hash"`
	ParentMetadataHash string `json:"parent_metadata_hash"`
}

// String returns one hash over the whole fingerprint.
func (f Fingerprint) String() string {
	return hashOf(f)
}

// dataParts is hashed into DataHash. Field order is part of the hash: append
// new fields at the end, and only with a zero value that marshals the same
// as before (omitempty), or every version changes.
type dataParts struct {
	Query        string         `json:"query"`
	Kind         model.Kind     `json:"kind"`
	TimeColumn   string         `json:"time_column,omitempty"`
	UniqueKey    []string       `json:"unique_key,omitempty"`
	Columns      []model.Column `json:"columns,omitempty"`
	SeedHash     string         `json:"seed_hash,omitempty"`
	Dialect      model.Dialect  `json:"dialect"`
	IntervalUnit string         `json:"interval_unit"`
	// TimeFormat is how a string time column spells time: it decides which
	// rows each interval holds.
	TimeFormat string `json:"time_format,omitempty"`
	// Pre and Post are the statements run before and after the query (a
	// SET, a UDF, a grant): they can change the rows written. Their text
	// only, not where it stands in the file.
	Pre  []string `json:"pre_statements,omitempty"`
	Post []string `json:"post_statements,omitempty"`
	// Stamp is SQLMesh's stamp: written only to force a new version.
	Stamp string `json:"stamp,omitempty"`
	// SCD is an SCD type 2 kind's properties (its column names, time type,
	// hard deletes, checked columns: all decide the history's rows, data
	// in SQLMesh too); InsertOverwrite is INCREMENTAL_UNMANAGED's. The
	// partitions INCREMENTAL_BY_PARTITION replaces are partitioned_by, data
	// already (the table's layout). forward_only stays metadata.
	SCD             *model.SCDType2 `json:"scd,omitempty"`
	InsertOverwrite bool            `json:"insert_overwrite,omitempty"`
	// Layout is the physical table's partitioned_by, clustered_by,
	// physical_properties and formats: they change the table gapless
	// makes (data, as in SQLMesh); nil when none is written.
	Layout *layoutPart `json:"layout,omitempty"`
}

// metadataParts is hashed into MetadataHash; the same rule as dataParts
// applies to its field order.
type metadataParts struct {
	Cron          string   `json:"cron"`
	Start         string   `json:"start,omitempty"`
	End           string   `json:"end,omitempty"`
	Lookback      int      `json:"lookback,omitempty"`
	BatchSize     int      `json:"batch_size,omitempty"`
	BatchConc     int      `json:"batch_concurrency,omitempty"`
	ForwardOnly   bool     `json:"forward_only,omitempty"`
	AllowPartials bool     `json:"allow_partials,omitempty"`
	Enabled       bool     `json:"enabled"`
	Owner         string   `json:"owner,omitempty"`
	Description   string   `json:"description,omitempty"`
	Tags          []string `json:"tags,omitempty"`
	Grain         []string `json:"grain,omitempty"`
	// Source marks a source's stand-in: a metadata fact (no row changes
	// with it), but one a run reads from the stored snapshot, so it must
	// change the fingerprint when an EXTERNAL table becomes a source.
	Source bool `json:"source,omitempty"`
	// Audits are the audits a model runs and the inline ones it defines:
	// metadata, as in SQLMesh (they decide what is promoted, not what rows
	// are written), but a run audits with the stored snapshot's, so a
	// change must reach the snapshot. Positions are left out.
	Audits       []auditPart `json:"audits,omitempty"`
	InlineAudits []auditPart `json:"inline_audits,omitempty"`
	// CronTZ and Signals decide when intervals are computed, not what
	// they hold (metadata, as in SQLMesh); a run reads them from the
	// stored snapshot. Signals are "name(source)", in the order written.
	CronTZ  string   `json:"cron_tz,omitempty"`
	Signals []string `json:"signals,omitempty"`
	// Descriptions are the column descriptions ([column, text]; from
	// column_descriptions or the query's inline comments, which the
	// canonical query drops): comments only, so a change re-registers
	// them and rebuilds nothing.
	Descriptions [][]string `json:"column_descriptions,omitempty"`
	// OnVirtualUpdate are the on-virtual-update statements' texts: run
	// when a view is repointed, they change no row (metadata, as in
	// SQLMesh), but the promotion runs the stored snapshot's.
	OnVirtualUpdate []string `json:"on_virtual_update,omitempty"`
}

// auditPart is an audit call (Name and Args) or an inline definition
// (Name, Args as its defaults, Query, Blocking, Skip, Dialect), without
// positions.
type auditPart struct {
	Name     string     `json:"name"`
	Args     [][]string `json:"args,omitempty"`
	Query    string     `json:"query,omitempty"`
	Blocking bool       `json:"blocking,omitempty"`
	Skip     bool       `json:"skip,omitempty"`
	Dialect  string     `json:"dialect,omitempty"`
}

// Input is what a snapshot is computed from: a parsed model plus the facts
// that need I/O or a SQL parser to obtain.
type Input struct {
	Model *model.Model
	// Canonical is the query after a round trip through the dialect's
	// parser, so whitespace, comments and keyword case do not change it.
	// Empty for kinds without a query.
	Canonical string
	// SeedHash is a hash of a SEED model's CSV content; empty otherwise.
	SeedHash string
	// Refs is every place the model's query names a table, as the parser
	// found them (see Snapshot.Refs); nil when not known. Not hashed.
	Refs []TableRef
}

func dataHash(in Input) string { return hashOf(dataPartsOf(in)) }

// dataPartsOf is what dataHash hashes.
func dataPartsOf(in Input) dataParts {
	m := in.Model
	key := slices.Clone(m.UniqueKey)
	return dataParts{
		Query:           in.Canonical,
		Kind:            m.Kind,
		TimeColumn:      m.TimeColumn,
		UniqueKey:       key,
		Columns:         m.Columns,
		SeedHash:        in.SeedHash,
		Dialect:         m.Dialect,
		IntervalUnit:    string(m.IntervalUnit),
		TimeFormat:      m.TimeColumnFormat,
		Pre:             statementTexts(m.PreStatements),
		Post:            statementTexts(m.PostStatements),
		Stamp:           m.Stamp,
		SCD:             scdPart(m),
		InsertOverwrite: m.InsertOverwrite,
		Layout:          layoutOf(m),
	}
}

// layoutPart is what layoutOf keeps of a model's physical layout.
type layoutPart struct {
	PartitionedBy []string   `json:"partitioned_by,omitempty"`
	ClusteredBy   []string   `json:"clustered_by,omitempty"`
	Properties    [][]string `json:"properties,omitempty"`
	TableFormat   string     `json:"table_format,omitempty"`
	StorageFormat string     `json:"storage_format,omitempty"`
}

// layoutOf is m's physical layout, properties as [key, value] without
// positions; nil when m writes none.
func layoutOf(m *model.Model) *layoutPart {
	l := layoutPart{PartitionedBy: m.PartitionedBy, ClusteredBy: m.ClusteredBy,
		TableFormat: m.TableFormat, StorageFormat: m.StorageFormat}
	for _, p := range m.PhysicalProperties {
		l.Properties = append(l.Properties, []string{p.Key, p.Value})
	}
	if len(l.PartitionedBy)+len(l.ClusteredBy)+len(l.Properties) == 0 && l.TableFormat == "" && l.StorageFormat == "" {
		return nil
	}
	return &l
}

// descriptionParts is each column description as [column, text], nil for
// none.
func descriptionParts(m *model.Model) [][]string {
	var out [][]string
	for _, d := range m.Descriptions() {
		out = append(out, []string{d.Column, d.Text})
	}
	return out
}

// scdPart is m's SCD type 2 properties, nil for other kinds.
func scdPart(m *model.Model) *model.SCDType2 {
	if !m.Kind.IsSCDType2() {
		return nil
	}
	s := m.SCD
	return &s
}

// statementTexts is the SQL of each statement, nil for none.
func statementTexts(stmts []model.Statement) []string {
	var out []string
	for _, st := range stmts {
		out = append(out, st.SQL)
	}
	return out
}

// argPairs is each argument as [name, SQL], nil for none.
func argPairs(args []model.AuditArg) [][]string {
	var out [][]string
	for _, a := range args {
		out = append(out, []string{a.Name, a.SQL})
	}
	return out
}

func metadataHash(m *model.Model) string { return hashOf(metadataPartsOf(m)) }

// metadataPartsOf is what metadataHash hashes.
func metadataPartsOf(m *model.Model) metadataParts {
	tags := slices.Clone(m.Tags)
	slices.Sort(tags)
	return metadataParts{
		Cron:          m.Cron,
		Start:         timeKey(m.Start),
		End:           timeKey(m.End),
		Lookback:      m.Lookback,
		BatchSize:     m.BatchSize,
		BatchConc:     m.BatchConcurrency,
		ForwardOnly:   m.ForwardOnly,
		AllowPartials: m.AllowPartials,
		Enabled:       m.Enabled,
		Owner:         m.Owner,
		Description:   m.Description,
		Tags:          tags,
		Grain:         m.Grain,
		Source:        m.Source,
		Audits:        auditRefParts(m.Audits),
		InlineAudits:  auditDefParts(m.InlineAudits),
		CronTZ:        m.CronTZ,
		Signals:       signalParts(m.Signals),
		Descriptions:  descriptionParts(m),

		// SQLMesh's on_virtual_update statements: metadata.
		OnVirtualUpdate: statementTexts(m.OnVirtualUpdate),
	}
}

func auditRefParts(refs []model.AuditRef) []auditPart {
	var out []auditPart
	for _, r := range refs {
		out = append(out, auditPart{Name: r.Name, Args: argPairs(r.Args)})
	}
	return out
}

func auditDefParts(defs []model.AuditDef) []auditPart {
	var out []auditPart
	for _, d := range defs {
		out = append(out, auditPart{Name: d.Name, Args: argPairs(d.Defaults), Query: d.Query,
			Blocking: d.Blocking, Skip: d.Skip, Dialect: string(d.Dialect)})
	}
	return out
}

func timeKey(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// hashOf hashes the JSON encoding of v. Struct fields marshal in declaration
// order and map keys sorted, so equal values always hash equal.
func hashOf(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		// Only plain data types reach here; a failure is a programming error.
		panic("snapshot: hashing unmarshalable value: " + err.Error())
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])[:hashLen]
}

// signalParts is each signal as "name(source)", nil for none.
func signalParts(sigs []model.Signal) []string {
	var out []string
	for _, sg := range sigs {
		out = append(out, sg.Name+"("+sg.Source+")")
	}
	return out
}
