package queue

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	sqlitedrv "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// sqliteBusyTimeout is how long a connection waits for another's write lock.
const sqliteBusyTimeout = 10 * time.Second

// OpenSQLite opens (creating it if absent) the queue's SQLite database at
// path: modernc.org/sqlite, WAL, a busy timeout, foreign keys, transactions
// begun IMMEDIATE (a writer takes the lock at BEGIN, so it never fails
// upgrading a read), and one connection, as riversqlite recommends against
// SQLITE_BUSY. Use a file of the queue's own, not the state store's.
func OpenSQLite(path string) (*sql.DB, error) {
	if path == "" {
		return nil, fmt.Errorf("%w: OpenSQLite: empty path", ErrConfig)
	}
	if strings.ContainsRune(path, '?') {
		return nil, fmt.Errorf("%w: OpenSQLite: path %q contains '?'", ErrConfig, path)
	}
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", sqliteBusyTimeout.Milliseconds()))
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "journal_mode(WAL)")
	// NORMAL in WAL mode: a commit survives a crash of the process; a power
	// loss may lose the last commits. Jobs are idempotent and re-derivable
	// from the state store (reconcile), so the queue trades that for speed.
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Set("_txlock", "immediate")
	db, err := sql.Open("sqlite", path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("queue: open sqlite %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	// Two processes opening one fresh file race to switch it to WAL; the
	// loser's first statement may get SQLITE_BUSY without the busy handler.
	// Retry briefly: by then the file is in WAL mode.
	ctx, cancel := context.WithTimeout(context.Background(), sqliteBusyTimeout)
	defer cancel()
	wait := 5 * time.Millisecond
	for {
		err = db.PingContext(ctx)
		var se *sqlitedrv.Error
		if err == nil || !errors.As(err, &se) || se.Code()&0xff != sqlite3.SQLITE_BUSY || ctx.Err() != nil {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
		wait = min(2*wait, 200*time.Millisecond)
	}
	if err != nil {
		return nil, errors.Join(fmt.Errorf("queue: open sqlite %s: %w", path, err), db.Close())
	}
	return db, nil
}
