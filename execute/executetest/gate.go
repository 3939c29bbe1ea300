package executetest

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/gapless-dev/gapless/warehouse"
)

// Gate is a warehouse engine (a real one underneath) that counts how many
// InsertInterval calls are in flight at once. With Want above one, each
// call waits, before it writes, until Want of them are in flight together:
// work that never runs Want batches at once stalls on it until its
// context's deadline, so finishing proves the batches overlapped.
type Gate struct {
	warehouse.Engine
	want     atomic.Int32
	inFlight atomic.Int32
	most     atomic.Int32
	calls    atomic.Int32
	mu       sync.Mutex
	open     chan struct{}
}

// NewGate wraps e; want <= 1 lets every call through at once.
func NewGate(e warehouse.Engine, want int) *Gate {
	g := &Gate{Engine: e}
	g.SetWant(want)
	return g
}

// SetWant resets the gate to wait for want calls at once.
func (g *Gate) SetWant(want int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.want.Store(int32(want))
	g.open = make(chan struct{})
	if want <= 1 {
		close(g.open)
	}
	g.most.Store(0)
	g.calls.Store(0)
}

// Calls is how many InsertInterval calls were made since the last SetWant.
func (g *Gate) Calls() int { return int(g.calls.Load()) }

// Most is the most calls seen in flight at once since the last SetWant.
func (g *Gate) Most() int { return int(g.most.Load()) }

// InsertInterval waits at the gate, then writes through the real engine.
func (g *Gate) InsertInterval(ctx context.Context, p warehouse.InsertIntervalParams) (int64, error) {
	g.calls.Add(1)
	n := g.inFlight.Add(1)
	defer g.inFlight.Add(-1)
	for m := g.most.Load(); n > m && !g.most.CompareAndSwap(m, n); m = g.most.Load() {
	}
	g.mu.Lock()
	open := g.open
	if n >= g.want.Load() {
		select {
		case <-open:
		default:
			close(open)
		}
	}
	g.mu.Unlock()
	select {
	case <-open:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	return g.Engine.InsertInterval(ctx, p)
}
