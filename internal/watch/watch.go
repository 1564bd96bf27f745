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

// Feed is a backend's Observe side: a Board filled by one watcher
// goroutine of the backend's, started by the first Stream, and read by
// every stream. Streams wait until the watcher's first Set, so that the
// first value they send is the store's state, not an empty board.
type Feed struct {
	board     *Board
	ready     chan struct{}
	readyOnce sync.Once
	mu        sync.Mutex
	started   bool
}

// NewFeed returns a Feed whose watcher has not started.
func NewFeed() *Feed { return &Feed{board: NewBoard(), ready: make(chan struct{})} }

// Set publishes l, the state the watcher read; the first call makes the
// Feed ready.
func (f *Feed) Set(l election.Leader) {
	f.board.Set(l)
	f.readyOnce.Do(func() { close(f.ready) })
}

// Stream starts watcher on its own goroutine (counted in wg) unless it
// runs, and returns a stream of the Feed as Board.StreamWhen does. The
// caller must not call it once it has begun waiting on wg.
func (f *Feed) Stream(ctx context.Context, stop <-chan struct{}, wg *sync.WaitGroup, watcher func()) <-chan election.Leader {
	f.mu.Lock()
	if !f.started {
		f.started = true
		wg.Add(1)
		go func() {
			defer wg.Done()
			watcher()
		}()
	}
	f.mu.Unlock()
	return f.board.StreamWhen(f.ready, ctx, stop, wg)
}

// Closed returns a closed stream: Observe's answer once its Elector is
// closed.
func Closed() <-chan election.Leader {
	ch := make(chan election.Leader)
	close(ch)
	return ch
}
