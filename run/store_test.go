package run_test

import (
	"github.com/gapless-dev/gapless/run"
	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/state/postgres"
	"github.com/gapless-dev/gapless/state/sqlite"
)

// Both state stores, and so every state.Store, are a run.Reader: this
// fails to compile if NextDue asks for a method a store does not have.
var (
	_ run.Reader = (*sqlite.Store)(nil)
	_ run.Reader = (*postgres.Store)(nil)
	_ run.Reader = state.Store(nil)
)
