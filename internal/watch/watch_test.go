package watch

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/electkit/election"
)

func leader(id string, tok uint64) election.Leader { return election.Leader{ID: id, Token: tok} }

func TestStreamFirstValueThenChanges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBoard()
		var wg sync.WaitGroup
		stop := make(chan struct{})
		ch := b.Stream(context.Background(), stop, &wg)
		if v := <-ch; !v.IsZero() {
			t.Fatalf("first value %v, want none", v)
		}
		if !b.Set(leader("a", 1)) {
			t.Fatal("Set of a new leader reported no change")
		}
		if b.Set(leader("a", 1)) {
			t.Fatal("Set of the same leader reported a change")
		}
		if v := <-ch; !v.Equal(leader("a", 1)) {
			t.Fatalf("got %v, want a@1", v)
		}
		close(stop)
		if _, ok := <-ch; ok {
			t.Fatal("stream not closed after stop")
		}
		wg.Wait()
	})
}

// A slow reader skips intermediate values but gets the newest, once.
func TestStreamSlowReaderGetsNewest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBoard()
		b.Set(leader("a", 1))
		var wg sync.WaitGroup
		ctx, cancel := context.WithCancel(context.Background())
		ch := b.Stream(ctx, nil, &wg)
		synctest.Wait() // the stream offers a@1
		for i := uint64(2); i <= 10; i++ {
			b.Set(leader("x", i))
		}
		synctest.Wait()
		if v := <-ch; !v.Equal(leader("x", 10)) {
			t.Fatalf("slow reader got %v, want the newest x@10", v)
		}
		select {
		case v := <-ch:
			t.Fatalf("extra value %v after the newest", v)
		default:
		}
		cancel()
		for range ch {
		}
		wg.Wait()
	})
}

func TestStreamOnStoppedBoardIsClosed(t *testing.T) {
	stop := make(chan struct{})
	close(stop)
	var wg sync.WaitGroup
	if _, ok := <-NewBoard().Stream(context.Background(), stop, &wg); ok {
		t.Fatal("stream of a stopped board delivered a value")
	}
}

// A Feed starts its watcher once, however many streams read it, and a
// stream's first value is the watcher's first Set, never the empty board.
func TestFeedStartsOnceAndWaitsForTheFirstSet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := NewFeed()
		var wg sync.WaitGroup
		stop := make(chan struct{})
		starts := 0
		release := make(chan struct{})
		watcher := func() {
			starts++
			<-release
			f.Set(election.Leader{ID: "a", Token: 1})
			<-stop
		}
		ctx := context.Background()
		s1 := f.Stream(ctx, stop, &wg, watcher)
		s2 := f.Stream(ctx, stop, &wg, watcher)
		synctest.Wait()
		select {
		case l := <-s1:
			t.Fatalf("stream sent %v before the watcher's first Set", l)
		default:
		}
		close(release)
		for _, s := range []<-chan election.Leader{s1, s2} {
			if l := <-s; l.ID != "a" {
				t.Fatalf("first value %v, want a@1", l)
			}
		}
		if starts != 1 {
			t.Fatalf("watcher started %d times, want 1", starts)
		}
		close(stop)
		wg.Wait()
		if _, ok := <-Closed(); ok {
			t.Fatal("Closed() is not closed")
		}
	})
}
