package warehousetest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gapless-dev/gapless/warehouse"
)

// dialect is the SQL dialect of the engine under test (Engine.Dialect),
// one of duckDB, postgres and trino. The suite writes the SQL all three
// share as it is, and asks the dialect for the few spellings that differ.
// Every method answers for every known dialect; an unknown one is refused
// by dialectOf before any SQL is written.
type dialect string

const (
	duckDB   dialect = "duckdb"
	postgres dialect = "postgres"
	trino    dialect = "trino"
)

// dialectOf returns e's dialect, failing tb naming it when the suite does
// not know it.
func dialectOf(tb testing.TB, e warehouse.Engine) dialect {
	tb.Helper()
	d := dialect(e.Dialect())
	switch d {
	case duckDB, postgres, trino:
		return d
	}
	tb.Fatalf("the engine's dialect %q is unknown to the conformance suite (it knows %q, %q and %q): add its SQL spellings to warehousetest/dialect.go",
		string(d), duckDB, postgres, trino)
	return ""
}

// param is the placeholder of the n-th bound argument (from 1): $n on
// DuckDB and PostgreSQL, ? on Trino (its Go client binds ? only). A query
// with several arguments numbers them in the order they appear.
func (d dialect) param(n int) string {
	if d == trino {
		return "?"
	}
	return fmt.Sprintf("$%d", n)
}

// text is the name of the unbounded text type in a query's casts: TEXT,
// or VARCHAR on Trino, which has no TEXT. (A column type given to
// CreateTable stays TEXT: every engine's CreateTable accepts it.)
func (d dialect) text() string {
	if d == trino {
		return "VARCHAR"
	}
	return "TEXT"
}

// cast renders CAST(expr AS typ), the one cast syntax all three accept
// (never ::), with TEXT spelled as text says. DOUBLE PRECISION, BIGINT,
// INTEGER, DATE, TIMESTAMP, TIMESTAMP WITH TIME ZONE, VARCHAR and
// DECIMAL(p,s) need no translation.
func (d dialect) cast(expr, typ string) string {
	if strings.EqualFold(typ, "TEXT") {
		typ = d.text()
	}
	return "CAST(" + expr + " AS " + typ + ")"
}

// trinoSequenceMax is the most elements Trino's sequence() returns.
const trinoSequenceMax = 10000

// series is a FROM item of one BIGINT-or-INTEGER column g holding every
// integer of [from, to]: generate_series(from, to) AS s(g), or on Trino
// UNNEST(sequence(from, to)) AS s(g). Trino's sequence stops at 10,000
// elements, so a longer series crosses two of them.
func (d dialect) series(from, to int) string {
	if d != trino {
		return fmt.Sprintf("generate_series(%d, %d) AS s(g)", from, to)
	}
	if to-from < trinoSequenceMax {
		return fmt.Sprintf("UNNEST(sequence(%d, %d)) AS s(g)", from, to)
	}
	return fmt.Sprintf("(SELECT hi.h * %[1]d + lo.l AS g FROM UNNEST(sequence(%[2]d, %[3]d)) AS hi(h) CROSS JOIN UNNEST(sequence(0, %[4]d)) AS lo(l)"+
		" WHERE hi.h * %[1]d + lo.l BETWEEN %[5]d AND %[6]d) AS s(g)",
		trinoSequenceMax, floorDiv(from, trinoSequenceMax), floorDiv(to, trinoSequenceMax), trinoSequenceMax-1, from, to)
}

// floorDiv is a / b rounded down (b > 0).
func floorDiv(a, b int) int {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// hourly returns a query of n rows per hour for hours [from, to) of
// 2024-01-01: row i of hour h has ts = h:00 + i*(3600/n) seconds, id =
// h*100+i and v = tag. floor() because DuckDB's / divides integers into
// a fraction and PostgreSQL's and Trino's truncate; INTERVAL 'k' UNIT is
// the interval literal all three read.
func (d dialect) hourly(from, to, n int, tag string) string {
	return fmt.Sprintf(`SELECT %[1]s + CAST(floor(g / %[2]d) AS INTEGER) * INTERVAL '1' HOUR + CAST(g %% %[2]d AS INTEGER) * INTERVAL '%[3]d' SECOND AS ts,
       CAST(floor(g / %[2]d) * 100 + g %% %[2]d AS BIGINT) AS id,
       %[4]s AS v
FROM %[5]s`, timestampLit(ts(0, 0, 0)), n, 3600/n, d.cast("'"+tag+"'", "TEXT"), d.series(from*n, to*n-1))
}

// timestampLit renders t's UTC wall clock as a TIMESTAMP literal, to the
// second, which all three read the same: TIMESTAMP '2024-01-01 01:00:00'.
func timestampLit(t time.Time) string {
	return "TIMESTAMP '" + t.UTC().Format(time.DateTime) + "'"
}

// listObjects is a query of the names of the tables and views of the
// schema bound as its one argument, sorted, from information_schema: on
// Trino that of the session's catalog (the engine's), whose names are
// lower case.
func (d dialect) listObjects() string {
	return "SELECT table_name FROM information_schema.tables WHERE table_schema = " + d.param(1) + " ORDER BY table_name"
}

// listSchemas is a query of the schema named by its one argument, if it
// exists, from information_schema.
func (d dialect) listSchemas() string {
	return "SELECT schema_name FROM information_schema.schemata WHERE schema_name = " + d.param(1)
}
