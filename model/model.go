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
// kind is built whole.
func (k Kind) IsIncremental() bool {
	return k == KindIncrementalByTimeRange || k == KindIncrementalByUniqueKey
}

// Dialect is the SQL dialect a model's query is written in.
type Dialect string

// Supported dialects.
const (
	DialectDuckDB   Dialect = "duckdb"
	DialectPostgres Dialect = "postgres"
	// DialectTrino is Trino's SQL (also Starburst's and Athena's).
	DialectTrino Dialect = "trino"
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

	// INCREMENTAL_BY_UNIQUE_KEY
	UniqueKey []string

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
	// Audits are the audits (...) attribute's calls, in order.
	Audits []AuditRef `json:",omitzero"`
	// InlineAudits are the AUDIT (...) blocks of the model file: audits
	// defined for this model, run when Audits names them (as in SQLMesh).
	InlineAudits []AuditDef `json:",omitzero"`
}
