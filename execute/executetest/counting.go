package executetest

import (
	"context"
	"sync/atomic"

	"github.com/gapless-dev/gapless/warehouse"
)

// CountingEngine is a real engine that counts the existence questions it
// is asked: One counts TableExists calls, Many TablesExist calls. Tests use
// it to show a stage asks the catalog once, not once per table.
type CountingEngine struct {
	warehouse.Engine
	One, Many atomic.Int32
}

// TableExists counts the call and asks the engine.
func (c *CountingEngine) TableExists(ctx context.Context, t warehouse.Table) (bool, error) {
	c.One.Add(1)
	return c.Engine.TableExists(ctx, t)
}

// TablesExist counts the call and asks the engine.
func (c *CountingEngine) TablesExist(ctx context.Context, ts []warehouse.Table) ([]bool, error) {
	c.Many.Add(1)
	return c.Engine.TablesExist(ctx, ts)
}
