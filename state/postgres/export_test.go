package postgres

// SetAfterFenceHook makes s call fn inside every fenced interval write,
// right after the fence check passed and before anything is written, so a
// test can act while the write's transaction holds its fence. Not safe to
// call while s is in use.
func SetAfterFenceHook(s *Store, fn func()) { s.afterFence = fn }
