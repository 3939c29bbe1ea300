// Package examples embeds the example projects, so that `gapless init` can
// write one without the source tree at hand.
package examples

import (
	"embed"
	"io/fs"
)

// Only the project's own files: a warehouse.duckdb left by a local run
// must never be embedded.
//
//go:embed quickstart/gapless.yaml quickstart/models quickstart/seeds quickstart/sources quickstart/landing
var files embed.FS

// Quickstart is the runnable example project (DuckDB warehouse, SQLite
// state): a SEED CSV, an hourly incremental model over generated events, a
// daily rollup of it, a FULL model and a VIEW, and a source (raw.orders)
// with three CSV files landed and an hourly model reading it. Paths are
// relative to the project root (gapless.yaml, models/..., seeds/...,
// sources/..., landing/...).
func Quickstart() fs.FS {
	sub, err := fs.Sub(files, "quickstart")
	if err != nil {
		panic("examples: quickstart is not embedded: " + err.Error()) // impossible: checked at build time
	}
	return sub
}
