package trino

import (
	"context"
	"slices"
	"sync"
)

// nameLocks are mutexes by name (a folded table or schema name), created on
// demand and forgotten when nobody holds or waits for them. Waiting obeys
// the context.
type nameLocks struct {
	mu sync.Mutex
	m  map[string]*nameLock
}

type nameLock struct {
	ch   chan struct{} // holds one token while the lock is held
	refs int           // holders and waiters
}

// lock takes the locks of keys (duplicates ignored) in sorted order, so
// that two callers taking overlapping sets never wait for each other in a
// cycle, and returns the function that releases them. On a cancelled
// context it releases what it took and returns the context's error.
func (l *nameLocks) lock(ctx context.Context, keys ...string) (func(), error) {
	keys = slices.Clone(keys)
	slices.Sort(keys)
	keys = slices.Compact(keys)
	taken := make([]string, 0, len(keys))
	release := func() {
		for i := len(taken) - 1; i >= 0; i-- {
			l.release(taken[i])
		}
	}
	for _, k := range keys {
		nl := l.ref(k)
		select {
		case nl.ch <- struct{}{}:
			taken = append(taken, k)
		case <-ctx.Done():
			l.unref(k)
			release()
			return nil, ctx.Err()
		}
	}
	return release, nil
}

func (l *nameLocks) ref(k string) *nameLock {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[string]*nameLock{}
	}
	nl := l.m[k]
	if nl == nil {
		nl = &nameLock{ch: make(chan struct{}, 1)}
		l.m[k] = nl
	}
	nl.refs++
	return nl
}

func (l *nameLocks) unref(k string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	nl := l.m[k]
	nl.refs--
	if nl.refs == 0 {
		delete(l.m, k)
	}
}

func (l *nameLocks) release(k string) {
	l.mu.Lock()
	nl := l.m[k]
	l.mu.Unlock()
	<-nl.ch
	l.unref(k)
}
