package etcd

import (
	"context"
	"slices"
	"sync"
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
	var ok bool
	c.hooks, ok = withoutHook(c.hooks, h)
	return ok
}

// withoutHook returns hooks without h, and whether h was there.
func withoutHook(hooks []*func(), h *func()) ([]*func(), bool) {
	i := slices.Index(hooks, h)
	if i < 0 {
		return hooks, false
	}
	hooks = slices.Delete(hooks, i, i+1)
	if len(hooks) == 0 {
		hooks = nil
	}
	return hooks, true
}

// A stopCtx is the context of a queue call (Elector.queue): its caller's
// context, with a stop of its own (Close, the candidacy's halt). A
// context.WithCancel of the caller's would put a child in the map of
// children of the caller's context for the length of the call: a sharded
// service starts thousands of Campaign calls under one context at once,
// and the context package never shrinks that map (60 bytes per Campaign
// call, kept for as long as the caller's context lives). A stopCtx puts
// nothing there while it waits in the client's limiter: that wait
// selects on the caller's Done channel itself (doneOf). What derives a
// context from it, or asks for its Done, registers with the caller's
// context then, for as long as that lasts: a request sent alone (at most
// the limiter's slots at once), a retry's pause, a lease's grant.
type stopCtx struct {
	context.Context // the caller's: its Deadline, Values and end

	mu      sync.Mutex
	stopped bool
	done    chan struct{} // made by the first Done
	closed  bool          // done is closed
	unwatch func() bool   // forgets the caller's end, watched for done
	hooks   []*func()     // what stop calls (AfterFunc, doneOf)
}

func newStopCtx(parent context.Context) *stopCtx { return &stopCtx{Context: parent} }

// Err implements context.Context: the caller's context's error once it
// is done, else context.Canceled once stopped.
func (s *stopCtx) Err() error {
	if err := s.Context.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	stopped := s.stopped
	s.mu.Unlock()
	if stopped {
		return context.Canceled
	}
	return nil
}

// Done implements context.Context: closed once stopped or once the
// caller's context is done.
func (s *stopCtx) Done() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done == nil {
		s.done = make(chan struct{})
		if s.stopped {
			s.closed = true
			close(s.done)
		} else {
			s.unwatch = context.AfterFunc(s.Context, s.closeDone)
		}
	}
	return s.done
}

// closeDone closes done, once.
func (s *stopCtx) closeDone() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closed = true
		close(s.done)
	}
}

// AfterFunc arranges for f to run once s is stopped or the caller's
// context is done, whichever comes first, once; stop undoes it if f has
// not run, reporting whether it had not. The context package calls it
// for each context derived from s.
func (s *stopCtx) AfterFunc(f func()) (stop func() bool) {
	var once sync.Once
	run := func() { once.Do(f) }
	h, ok := s.addHook(run)
	if !ok {
		go run()
		return noStop
	}
	unwatch := context.AfterFunc(s.Context, func() {
		if s.dropHook(h) {
			run()
		}
	})
	return func() bool {
		unwatch()
		return s.dropHook(h)
	}
}

// addHook adds f to what stop calls, or reports false if s has stopped.
func (s *stopCtx) addHook(f func()) (*func(), bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return nil, false
	}
	h := &f
	s.hooks = append(s.hooks, h)
	return h, true
}

// dropHook removes h, reporting whether it was there (not yet called).
func (s *stopCtx) dropHook(h *func()) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ok bool
	s.hooks, ok = withoutHook(s.hooks, h)
	return ok
}

// stop stops s: Err is context.Canceled from now on, Done is closed, and
// each hook is called. It forgets the caller's context, which it no
// longer watches. Calling it again does nothing.
func (s *stopCtx) stop() {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return
	}
	s.stopped = true
	if s.done != nil && !s.closed {
		s.closed = true
		close(s.done)
	}
	hooks, unwatch := s.hooks, s.unwatch
	s.hooks, s.unwatch = nil, nil
	s.mu.Unlock()
	if unwatch != nil {
		unwatch()
	}
	for _, h := range hooks {
		(*h)()
	}
}
