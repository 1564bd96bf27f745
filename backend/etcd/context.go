package etcd

import (
	"context"
	"slices"
	"time"
)

// A candidacy is the context of its own goroutines' requests and waits:
// done once it halts. A context.WithCancel of its own would cost each
// candidacy a context, its channel, and the map of children that every
// request made under it leaves behind (the context package never shrinks
// it), for as long as the candidacy lasts; a process may hold thousands
// of idle ones. A candidacy makes its channel at the first Done, and a
// context derived from it hangs on its halt hooks (AfterFunc, which the
// context package uses for a parent that has it), a slice emptied as
// they go. A request sent alone gets a context of its own, hung there
// the same way (limiter.sendAlone): the client wraps the context it is
// given before gRPC derives the request's, and the context package
// watches a parent it cannot see through with a goroutine.

var _ context.Context = (*candidacy)(nil)

// ctx is c as a context.
func (c *candidacy) ctx() context.Context { return c }

// Deadline implements context.Context: a candidacy has none.
func (c *candidacy) Deadline() (time.Time, bool) { return time.Time{}, false }

// Value implements context.Context: a candidacy carries no values.
func (c *candidacy) Value(any) any { return nil }

// Done implements context.Context: closed once c halts.
func (c *candidacy) Done() <-chan struct{} {
	c.hookMu.Lock()
	defer c.hookMu.Unlock()
	if c.done == nil {
		c.done = make(chan struct{})
		if c.halted {
			close(c.done)
		}
	}
	return c.done
}

// Err implements context.Context: context.Canceled once c halts.
func (c *candidacy) Err() error {
	c.hookMu.Lock()
	defer c.hookMu.Unlock()
	if c.halted {
		return context.Canceled
	}
	return nil
}

// AfterFunc arranges for f to run once c halts, in a goroutine of its
// own if c has halted already; stop undoes it if f has not run yet,
// reporting whether it did. The context package calls it for each
// context derived from c.
func (c *candidacy) AfterFunc(f func()) (stop func() bool) {
	stop, ok := c.addHook(f)
	if !ok {
		go f()
	}
	return stop
}

// addHook adds f to c's halt hooks and returns what removes it again
// (reporting whether it was still there), or false, adding nothing, if
// c has halted already: the caller runs f itself.
func (c *candidacy) addHook(f func()) (stop func() bool, ok bool) {
	c.hookMu.Lock()
	defer c.hookMu.Unlock()
	if c.halted {
		return func() bool { return false }, false
	}
	h := &f
	c.hooks = append(c.hooks, h)
	return func() bool {
		c.hookMu.Lock()
		defer c.hookMu.Unlock()
		return c.dropHook(h)
	}, true
}

// dropHook removes h from c's halt hooks, and reports whether it was
// there; c.hookMu is held. slices.Delete clears the freed slot, so the
// backing array keeps no func (and what it holds) alive; an empty list
// lets its array go.
func (c *candidacy) dropHook(h *func()) bool {
	i := slices.Index(c.hooks, h)
	if i < 0 {
		return false
	}
	c.hooks = slices.Delete(c.hooks, i, i+1)
	if len(c.hooks) == 0 {
		c.hooks = nil
	}
	return true
}
