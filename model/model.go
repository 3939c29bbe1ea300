// Package model holds the in-memory form of one gapless model file: its
// MODEL (...) header and its query, plus the parser that produces it.
//
// The types here are plain data. They know nothing about a database; the SQL
// body is kept as text and parsed by package sqlparse.
package model

import (
	"time"

	"github.com/gapless-dev/gapless/interval"
)

// Kind is how a model is materialised.
type Kind string

// The model kinds gapless supports; names match SQLMesh's.
const (
	KindIncrementalByTimeRange Kind = "INCREMENTAL_BY_TIME_RANGE"
	KindIncrementalByUniqueKey Kind = "INCREMENTAL_BY_UNIQUE_KEY"
	KindFull                   Kind = "FULL"
	KindView                   Kind = "VIEW"
	KindSeed                   Kind = "SEED"
	KindExternal               Kind = "EXTERNAL"
)

// IsIncremental reports whether k is computed per interval; every other
// kind is built whole. The SCD type 2 kinds, INCREMENTAL_BY_PARTITION and
// INCREMENTAL_UNMANAGED are scheduled as INCREMENTAL_BY_UNIQUE_KEY is: their
// missing intervals run in batches (all at once without batch_size), each
// batch rendered for its range (see execute/kinds.go).
func (k Kind) IsIncremental() bool {
	switch k {
	case KindIncrementalByTimeRange, KindIncrementalByUniqueKey, KindSCDType2ByTime, KindSCDType2ByColumn,
		KindIncrementalByPartition, KindIncrementalUnmanaged:
		return true
	}
	return false
}

// Dialect is the SQL dialect a model's query is written in.
type Dialect string

// Dialects a model may be written in. DuckDB's, PostgreSQL's and Trino's
// are the engines' own and run as written; every other dialect SQLMesh
// accepts (sqlglot's names, see package dialect) is rewritten for the
// project's engine at load, or refused naming what cannot be carried over.
const (
	DialectDuckDB   Dialect = "duckdb"
	DialectPostgres Dialect = "postgres"
	// DialectTrino is Trino's SQL (also Starburst's and Athena's).
	DialectTrino      Dialect = "trino"
	DialectBigQuery   Dialect = "bigquery"
	DialectSnowflake  Dialect = "snowflake"
	DialectSpark      Dialect = "spark"
	DialectDatabricks Dialect = "databricks"
	DialectHive       Dialect = "hive"
	DialectMySQL      Dialect = "mysql"
	DialectRedshift   Dialect = "redshift"
	DialectTSQL       Dialect = "tsql"
)

// Pos is a position in a model file. Line and Col are 1-based; Col counts
// bytes, as editors and compilers conventionally do.
type Pos struct {
	File string
	Line int
	Col  int
}

// Column is a declared column: EXTERNAL models must declare theirs, other
// kinds may.
type Column struct {
	Name string
	Type string
}

// Model is one parsed model file.
//
// Invariants kept by the parser: Name is "schema.table" in lower case; Kind is
// one of the Kind constants; Cron is a valid cron expression; IntervalUnit is
// set (explicit or derived from Cron) and is never coarser than the cron
// unless AllowPartials is set; Query is empty exactly when Kind is EXTERNAL or
// SEED.
type Model struct {
	Name    string // "schema.table", lower case
	Kind    Kind
	Dialect Dialect

	// INCREMENTAL_BY_TIME_RANGE
	TimeColumn string
	// TimeColumnFormat is the format of a string time column, as in
	// time_column (ds, '%Y-%m-%d'); "" when none is written. It is always
	// a valid format (see ParseTimeFormat) fine enough for IntervalUnit. It
	// is used only when the column holds text: a DATE or TIMESTAMP column
	// is compared as time whatever the format says.
	//
	// Fields added to Model after plan format 1 are omitzero: a plan file
	// is checked by re-encoding what it decodes to, so an older file (which
	// lacks them) must re-encode to its own bytes (plan.TestDecodeReadsFormat1).
	TimeColumnFormat string `json:",omitzero"`
	// TimeColumnPos is where the time column's name is written in the
	// header.
	TimeColumnPos Pos `json:",omitzero"`
	Lookback      int // in interval units
	BatchSize     int // intervals per batch; 0 means all at once
	// BatchConcurrency is how many batches of this model may run at once;
	// 0 or 1 means one after another. Batches of one model never read each
	// other (a model cannot read itself), so their order does not matter.
	BatchConcurrency int
	ForwardOnly      bool

	// INCREMENTAL_BY_UNIQUE_KEY, and the SCD type 2 kinds
	UniqueKey []string
	// SCD holds the SCD type 2 kinds' properties (model/kind.go); zero for
	// other kinds.
	SCD SCDType2 `json:",omitzero"`
	// InsertOverwrite is INCREMENTAL_UNMANAGED's insert_overwrite: each run
	// replaces the table with the query's rows instead of appending them.
	InsertOverwrite bool `json:",omitzero"`

	// SEED: path relative to the model file's folder, as written.
	SeedPath string

	// Declared columns (required for EXTERNAL).
	Columns []Column

	Cron                 string
	IntervalUnit         interval.Unit
	IntervalUnitExplicit bool      // true when interval_unit was written in the file
	Start                time.Time // UTC; zero means "no start given"
	End                  time.Time // UTC; zero means open-ended
	AllowPartials        bool
	Enabled              bool

	Owner       string
	Description string
	Tags        []string
	Grain       []string

	// Query is the model's SQL body as written (macros not rendered).
	Query string
	// Path is the file the model was read from; QueryPos is where Query
	// begins in it. Together they let a SQL parse error be reported at the
	// file's line and column.
	Path     string
	QueryPos Pos
	// HeaderPos is where the MODEL keyword is; KindPos is where the kind
	// is written (HeaderPos when the kind is the default).
	HeaderPos Pos
	KindPos   Pos `json:",omitzero"`

	// Source is set on the stand-in of a source (package source): a table
	// gapless lands from outside, declared in sources/, which models read
	// by name. Its Kind is KindExternal, so that planning, fingerprints,
	// deploys and runs treat it as a table gapless never computes; only
	// whether it may be read differs: a model reading it waits until the
	// source has landed (run.DueWork). Path and HeaderPos are then the
	// source file and where its name is written.
	Source bool `json:",omitzero"`

	// PreStatements and PostStatements are the statements written before
	// and after the query, in order, macros (@DEF included) kept as
	// written.
	PreStatements  []Statement `json:",omitzero"`
	PostStatements []Statement `json:",omitzero"`
	// OnVirtualUpdate are the statements written between
	// ON_VIRTUAL_UPDATE_BEGIN; and ON_VIRTUAL_UPDATE_END;: run after an
	// environment's view of the model is (re)pointed, with @this_model
	// the view (see model/statements.go).
	OnVirtualUpdate []Statement `json:",omitzero"`
	// Audits are the audits (...) attribute's calls, in order.
	Audits []AuditRef `json:",omitzero"`
	// InlineAudits are the AUDIT (...) blocks of the model file: audits
	// defined for this model, run when Audits names them (as in SQLMesh).
	InlineAudits []AuditDef `json:",omitzero"`

	// Attributes of SQLMesh's header that gapless honours (see attributes.go).
	// CronTZ is the IANA zone the cron is read in ("" is UTC); intervals
	// stay UTC-aligned. Stamp only changes the version. Signals are the
	// built-in signals the model waits on. Blueprint names the blueprint
	// the model was made from ("" when none).
	CronTZ    string   `json:",omitzero"`
	Stamp     string   `json:",omitzero"`
	Signals   []Signal `json:",omitzero"`
	Blueprint string   `json:",omitzero"`
	// Warnings are the SQLMesh attributes of the file that gapless ignores
	// because they only describe the model; never part of a plan.
	Warnings []Warning `json:"-"`

	// PartitionedBy are the partitioned_by expressions as written (a bare
	// column name folded to lower case, e.g. ds; an expression kept as
	// written, e.g. day(ts)), in order. They shape the physical table where
	// the engine has partitions (Trino Iceberg) and are reported as not
	// applicable elsewhere; INCREMENTAL_BY_PARTITION names its partitions
	// with them.
	PartitionedBy []string `json:",omitzero"`
	// ClusteredBy are the clustered_by expressions, as PartitionedBy.
	ClusteredBy []string `json:",omitzero"`
	// ColumnDescriptions are column_descriptions (col = 'text', ...) in
	// order; ColumnDescriptionsSet says the attribute was written (even
	// empty), which turns off descriptions from query comments (see
	// Model.Descriptions, which callers use).
	ColumnDescriptions    []ColumnDescription `json:",omitzero"`
	ColumnDescriptionsSet bool                `json:",omitzero"`
	// PhysicalProperties are physical_properties (key = value, ...) in
	// order; TableFormat and StorageFormat are table_format and
	// storage_format, lower case. The engine creating the table applies
	// them or refuses them by name (package warehouse).
	PhysicalProperties []Property `json:",omitzero"`
	TableFormat        string     `json:",omitzero"`
	StorageFormat      string     `json:",omitzero"`
}
