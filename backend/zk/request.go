package zk

import (
	"context"

	"github.com/electkit/election"
)

// do runs op, a blocking request of the ZooKeeper client (which takes no
// context), on its own goroutine and waits for it, for ctx, or for stop
// (nil: never). An abandoned request goes on until the client answers or
// is closed; its result is dropped. The variables op writes may be read
// only when do returned nil (then op has returned); never written after.
func (e *Elector) do(ctx context.Context, stop <-chan struct{}, op func()) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	done := make(chan struct{})
	if !e.ioStart() {
		return election.ErrClosed
	}
	go func() {
		defer e.io.Done()
		defer close(done)
		op()
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-stop:
		return election.ErrClosed
	}
}

// ioStart counts a new request goroutine, unless Close has begun waiting
// for them.
func (e *Elector) ioStart() bool {
	e.ioMu.Lock()
	defer e.ioMu.Unlock()
	if e.ioShut {
		return false
	}
	e.io.Add(1)
	return true
}
