// Package watch holds the current leader of an election as a backend sees
// it, and streams it to observers with the semantics of Elector.Observe:
// the current state first, then every change; a slow reader skips
// intermediate values but always gets the newest.
package watch

import (
	"context"
	"sync"

	"github.com/electkit/election"
)

// Board is the current leader plus a channel closed on each change.
type Board struct {
	mu      sync.Mutex
	cur     election.Leader
	changed chan struct{}
}

// NewBoard returns a Board whose current leader is none.
func NewBoard() *Board { return &Board{changed: make(chan struct{})} }

// Set publishes l. It reports whether l differs from the current leader.
func (b *Board) Set(l election.Leader) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cur.Equal(l) {
		return false
	}
	b.cur = l
	close(b.changed)
	b.changed = make(chan struct{})
	return true
}

// Get returns the current leader and a channel closed when it changes.
func (b *Board) Get() (election.Leader, <-chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.cur, b.changed
}

// Stream sends the current leader, then each change, on the returned
// channel until ctx ends or stop is closed; then it closes the channel. Its
// goroutine is counted in wg.
func (b *Board) Stream(ctx context.Context, stop <-chan struct{}, wg *sync.WaitGroup) <-chan election.Leader {
	return b.StreamWhen(nil, ctx, stop, wg)
}

// StreamWhen is Stream, except that it first waits until ready is closed
// (a nil ready is closed already): a board that is not yet filled from
// the store has no current leader to report.
func (b *Board) StreamWhen(ready <-chan struct{}, ctx context.Context, stop <-chan struct{}, wg *sync.WaitGroup) <-chan election.Leader {
	out := make(chan election.Leader)
	select {
	case <-stop:
		close(out)
		return out
	default:
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(out)
		if ready != nil {
			select {
			case <-ready:
			case <-ctx.Done():
				return
			case <-stop:
				return
			}
		}
		var last election.Leader
		sent := false
		for {
			cur, changed := b.Get()
			if !sent || !cur.Equal(last) {
				v := cur
				v.Value = append([]byte(nil), cur.Value...) // each reader its own copy
				select {
				case out <- v:
					last, sent = cur, true
				case <-changed: // newer value: offer that one instead
					continue
				case <-ctx.Done():
					return
				case <-stop:
					return
				}
			}
			select {
			case <-changed:
			case <-ctx.Done():
				return
			case <-stop:
				return
			}
		}
	}()
	return out
}
