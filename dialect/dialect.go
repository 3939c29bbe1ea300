// Package dialect carries a model's SQL from the dialect it is written in
// (any dialect SQLMesh accepts: BigQuery, Snowflake, Spark, ...) to the
// dialect of the project's engine (DuckDB, PostgreSQL or Trino).
//
// It is not a SQL parser: it tokenizes the query with the source dialect's
// rules for strings, comments and quoted identifiers (Tokenize), then
// rewrites a chosen set of constructs whose spelling differs (Transpile).
// The promise it keeps is the one that matters: a query it returns means
// what the written query means in its own dialect, or Transpile refuses it
// with an *Error naming the construct, the dialects and the position. A
// construct it does not know is passed through as written only when it is
// spelled and behaves the same on the target; the constructs known to
// differ are refused (see the rules in transpile.go).
//
// The engine dialects themselves (duckdb, postgres, trino) are never
// rewritten: a model written in one of them runs as written, on any engine,
// as it did before this package existed.
package dialect

import "slices"

// The engine dialects: the targets Transpile writes.
const (
	DuckDB   = "duckdb"
	Postgres = "postgres"
	Trino    = "trino"
)

// Names are the dialect names a model may declare: sqlglot's (which SQLMesh
// uses to read models), in lower case.
var Names = []string{
	"athena", "bigquery", "clickhouse", "databricks", "doris", "dremio", "drill", "druid", "duckdb",
	"dune", "exasol", "fabric", "hive", "materialize", "mysql", "oracle", "postgres", "presto", "prql",
	"redshift", "risingwave", "singlestore", "snowflake", "spark", "spark2", "sqlite", "starrocks",
	"tableau", "teradata", "trino", "tsql",
}

// Known reports whether name (lower case) is one of Names.
func Known(name string) bool { return slices.Contains(Names, name) }

// Engine reports whether name is an engine dialect, whose SQL is never
// rewritten.
func Engine(name string) bool { return name == DuckDB || name == Postgres || name == Trino }

// traits are a source dialect's lexical rules and the families its
// rewrite rules are keyed on.
type traits struct {
	identQuote    byte // '`' or '"'; tsql also takes [brackets]
	brackets      bool // [identifier] (tsql)
	dqString      bool // "..." is a string literal, not an identifier
	backslash     bool // backslash escapes in quoted strings
	hashComment   bool // # starts a line comment
	bigqueryLex   bool // r'raw', '''triple''' and b'bytes' strings
	dollar        bool // $$...$$ strings
	splitBacktick bool // `a.b.c` is three identifiers (BigQuery)
	// division is what / does to two integers: 'e' gives the exact,
	// fractional result (BigQuery, Snowflake, MySQL, Spark, ..., and
	// DuckDB), 't' truncates (PostgreSQL, Trino, T-SQL, SQLite, ...), and
	// 0 is not known to gapless.
	division byte
	// family names the rule set (bigquery, snowflake, spark, mysql, tsql,
	// clickhouse, postgres, presto, other).
	family string
}

// traitsOf is name's traits; every name in Names has some.
func traitsOf(name string) traits {
	switch name {
	case "bigquery":
		return traits{identQuote: '`', dqString: true, backslash: true, hashComment: true, bigqueryLex: true,
			splitBacktick: true, division: 'e', family: "bigquery"}
	case "spark", "spark2", "hive", "databricks":
		return traits{identQuote: '`', dqString: true, backslash: true, division: 'e', family: "spark"}
	case "mysql", "doris", "starrocks", "singlestore":
		return traits{identQuote: '`', dqString: true, backslash: true, hashComment: true, division: 'e', family: "mysql"}
	case "clickhouse":
		return traits{identQuote: '`', backslash: true, division: 'e', family: "clickhouse"}
	case "tsql", "fabric":
		return traits{identQuote: '"', brackets: true, division: 't', family: "tsql"}
	case "snowflake":
		return traits{identQuote: '"', backslash: true, dollar: true, division: 'e', family: "snowflake"}
	case "postgres", "redshift", "materialize", "risingwave", "duckdb":
		return traits{identQuote: '"', dollar: true, division: 't', family: "postgres"}
	case "trino", "presto", "athena":
		return traits{identQuote: '"', division: 't', family: "presto"}
	case "oracle", "exasol":
		return traits{identQuote: '"', division: 'e', family: "other"}
	case "sqlite", "teradata":
		return traits{identQuote: '"', division: 't', family: "other"}
	}
	return traits{identQuote: '"', family: "other"}
}
