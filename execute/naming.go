// Package execute runs one piece of work for one snapshot: it renders the
// model's SQL against the physical tables of a target snapshot set, writes
// the rows with the warehouse engine, and records the computed intervals in
// the state store — strictly after the rows have committed.
//
// Invariants:
//   - an interval is recorded (state.Store.AddIntervals) only after the
//     warehouse statement that wrote its rows has committed, so the state
//     never claims rows the warehouse does not hold;
//   - a failed batch records nothing and is returned as a *BatchError
//     naming the model, the interval and the SQL;
//   - re-running an interval replaces exactly its rows (InsertInterval and
//     MergeByKey are idempotent per interval), so retries never duplicate.
package execute

import (
	"github.com/gapless-dev/gapless/snapshot"
	"github.com/gapless-dev/gapless/warehouse"
)

// ProdEnvironment is the environment served by views named <schema>.<table>
// (snapshot.Prod).
const ProdEnvironment = snapshot.Prod

// Every name built here fits in snapshot.MaxIdentBytes (63) bytes on every
// engine, so PostgreSQL never truncates one and DuckDB and PostgreSQL
// deployments use the same names: generated names longer than that (physical
// schemas and tables, environment schemas) are shortened by
// snapshot.FitIdent to a readable prefix, "_" and a hash of the full name;
// names within the limit are unchanged. The names users query — a model's
// schema (the prod view schema) and table (the view name) — are never
// rewritten: model.ParseFile refuses a model whose schema or table is longer.

// PhysicalTable is the table (or, for VIEW models, the view) holding the
// rows of s's version: gapless__<schema>.<schema>__<table>__<version>, each
// part through snapshot.FitIdent. Snapshots sharing a version share it.
func PhysicalTable(s *snapshot.Snapshot) warehouse.Table {
	return warehouse.Table{Schema: s.PhysicalSchema(), Name: s.PhysicalTable()}
}

// ViewSchema is the schema holding environment env's views of models in
// schema: snapshot.EnvironmentSchema, beside the environment-name rule
// that keeps it unambiguous.
func ViewSchema(schema, env string) string { return snapshot.EnvironmentSchema(schema, env) }

// ViewTable is the view through which environment env serves s:
// <schema>.<table> in prod, <schema>__<env>.<table> elsewhere.
func ViewTable(s *snapshot.Snapshot, env string) warehouse.Table {
	return warehouse.Table{Schema: ViewSchema(s.Model.Schema(), env), Name: s.Model.Table()}
}
