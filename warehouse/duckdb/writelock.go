package duckdb

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/gapless-dev/gapless/warehouse"
)

// writeLock orders the writes to one database. A write is either exclusive
// (DDL, merges, rebuilds, views, and anything run through Query that is not
// a read) or a range write (InsertInterval: it deletes and inserts the rows
// of one time range of one table, and nothing else; a first build's append
// into a table empty as made, which inserts into one table and holds all
// of it: see lockTable).
//
// Invariant: an exclusive write runs alone. Range writes run together only
// when they touch different tables or disjoint ranges of one table, which
// DuckDB's optimistic concurrency lets commit side by side: their DELETEs
// never touch the same row, and appends to one table do not conflict. Two
// range writes of overlapping ranges of one table take turns, so neither
// fails on a conflict and neither can see a state without the other's rows
// while both claim them; so a range write that finds its range empty may
// insert without a DELETE, since no other write can fill the range before
// it commits. An exclusive write that waits keeps new range
// writes from starting, so a stream of range writes cannot starve it.
//
// Waiting honours the context; a free lock is taken even with a context
// already done, so the outcome does not depend on a race between the two.
type writeLock struct {
	mu        sync.Mutex
	exclusive bool
	waiting   int    // exclusive writes waiting
	spans     []span // range writes running
	// wake is closed, and replaced, whenever the lock is released or an
	// exclusive writer stops waiting, so that waiters retry.
	wake chan struct{}
	// onBlock is called, outside mu, each time a writer is about to block;
	// tests use it to know that a writer waits without sleeping.
	onBlock func(what string)
}

// span is the part of a table a range write holds: [start, end) of its
// time column.
type span struct {
	table      string // tableKey
	start, end time.Time
}

func newWriteLock() *writeLock { return &writeLock{wake: make(chan struct{})} }

// broadcast wakes every waiter. l.mu must be held.
func (l *writeLock) broadcast() {
	close(l.wake)
	l.wake = make(chan struct{})
}

// wait runs try under l.mu until it succeeds or ctx is done. onGiveUp, when
// set, runs under l.mu when the wait ends without success.
func (l *writeLock) wait(ctx context.Context, what string, try func() bool, onGiveUp func()) error {
	for {
		l.mu.Lock()
		if try() {
			l.mu.Unlock()
			return nil
		}
		wake, onBlock := l.wake, l.onBlock
		l.mu.Unlock()
		if onBlock != nil {
			onBlock(what)
		}
		select {
		case <-wake:
		case <-ctx.Done():
			l.mu.Lock()
			// A release may have landed between the check and ctx: try once
			// more, so that a free lock is never given up.
			ok := try()
			if !ok && onGiveUp != nil {
				onGiveUp()
			}
			l.mu.Unlock()
			if ok {
				return nil
			}
			return fmt.Errorf("waiting for the database's write lock (%s): %w", what, ctx.Err())
		}
	}
}

// lockExclusive waits until no other write runs and takes the lock alone.
func (l *writeLock) lockExclusive(ctx context.Context) error {
	l.mu.Lock()
	l.waiting++
	l.mu.Unlock()
	return l.wait(ctx, "exclusive", func() bool {
		if l.exclusive || len(l.spans) > 0 {
			return false
		}
		l.waiting--
		l.exclusive = true
		return true
	}, func() {
		l.waiting--
		l.broadcast() // range writes held back for this waiter may go
	})
}

// unlockExclusive releases what lockExclusive took.
func (l *writeLock) unlockExclusive() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.exclusive = false
	l.broadcast()
}

// lockRange waits until no exclusive write runs or waits and no range write
// of an overlapping range of t runs, then holds [start, end) of t. The
// returned function releases it.
func (l *writeLock) lockRange(ctx context.Context, t warehouse.Table, start, end time.Time) (func(), error) {
	sp := span{table: tableKey(t), start: start, end: end}
	err := l.wait(ctx, "range of "+t.String(), func() bool {
		if l.exclusive || l.waiting > 0 {
			return false
		}
		for _, o := range l.spans {
			if o.table == sp.table && o.start.Before(sp.end) && sp.start.Before(o.end) {
				return false
			}
		}
		l.spans = append(l.spans, sp)
		return true
	}, nil)
	if err != nil {
		return nil, err
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			for i, o := range l.spans {
				if o == sp {
					l.spans = append(l.spans[:i], l.spans[i+1:]...)
					break
				}
			}
			l.broadcast()
		})
	}, nil
}

// endOfTime ends the span lockTable holds: after every time a range write
// can name.
var endOfTime = time.Unix(1<<62, 0)

// lockTable is lockRange of all of t: it waits until no exclusive write
// runs or waits and no range write of t runs, and keeps range writes of t
// from starting until it is released, while writes of other tables run.
func (l *writeLock) lockTable(ctx context.Context, t warehouse.Table) (func(), error) {
	return l.lockRange(ctx, t, time.Time{}, endOfTime)
}
