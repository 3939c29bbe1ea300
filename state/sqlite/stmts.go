package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// stmts are the statements a scheduler runs for every model (see
// state/statetest's RunModelStateCalls benchmark): the interval write path
// (a scheduler records every batch through it), including the repair of
// the freshness debts a write completes; the version lease's take, renewal
// and release; the fence checks; the circuit breaker's generation read and
// the read of a model's and its parents' intervals. They are prepared once:
// database/sql keeps one prepared copy per connection and Tx.StmtContext
// reuses it, so SQLite parses each of them once per connection instead of
// at every call.
type stmts struct {
	windowAdd, windowRemove   *sql.Stmt
	deleteRange               *sql.Stmt
	insertRange, moveRangeEnd *sql.Stmt
	recordLastWrite           *sql.Stmt
	leaseFence, fenceBoth     *sql.Stmt
	hasOpenDebt, repairDebts  *sql.Stmt
	acquireLease              *sql.Stmt
	takeOverLease             *sql.Stmt
	renewLease, releaseLease  *sql.Stmt
	generation                *sql.Stmt
	getIntervals              *sql.Stmt
	all                       []*sql.Stmt
}

// prepareStmts prepares the hot statements on db (after migration: they
// name the schema's tables).
func prepareStmts(ctx context.Context, db *sql.DB) (*stmts, error) {
	s := &stmts{}
	for _, p := range []struct {
		dst   **sql.Stmt
		query string
	}{
		{&s.windowAdd, windowQuery(true)},
		{&s.windowRemove, windowQuery(false)},
		{&s.deleteRange, `DELETE FROM intervals WHERE name = ? AND version = ? AND start_us = ?`},
		{&s.insertRange, `INSERT INTO intervals (name, version, start_us, end_us) VALUES (?, ?, ?, ?)`},
		{&s.moveRangeEnd, `UPDATE intervals SET end_us = ? WHERE name = ? AND version = ? AND start_us = ?`},
		{&s.recordLastWrite, recordLastWriteQuery},
		{&s.leaseFence, `SELECT 1 FROM leases WHERE key = ? AND token = ? AND expires_at_us > ?`},
		{&s.fenceBoth, fenceBothQuery},
		{&s.hasOpenDebt, hasOpenDebtQuery},
		{&s.repairDebts, repairDebtsQuery},
		{&s.acquireLease, acquireLeaseQuery},
		{&s.takeOverLease, takeOverLeaseQuery},
		{&s.renewLease, renewLeaseQuery},
		{&s.releaseLease, releaseLeaseQuery},
		{&s.generation, generationQuery},
		{&s.getIntervals, getIntervalsQuery},
	} {
		st, err := db.PrepareContext(ctx, p.query)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("preparing %q: %w", p.query, err), s.close())
		}
		*p.dst = st
		s.all = append(s.all, st)
	}
	return s, nil
}

// close closes every prepared statement.
func (s *stmts) close() error {
	var errs []error
	for _, st := range s.all {
		errs = append(errs, st.Close())
	}
	return errors.Join(errs...)
}
