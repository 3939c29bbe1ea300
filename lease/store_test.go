package lease_test

import (
	"github.com/gapless-dev/gapless/lease"
	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/state/postgres"
	"github.com/gapless-dev/gapless/state/sqlite"
)

// Both state stores, and so every state.Store, are a lease.Store: this
// fails to compile if lease asks for a method a store does not have.
var (
	_ lease.Store = (*sqlite.Store)(nil)
	_ lease.Store = (*postgres.Store)(nil)
	_ lease.Store = state.Store(nil)
)
