package zk

import (
	"context"
	"testing"
	"time"

	"github.com/electkit/election/internal/clock"
)

// A confirmation stands for a sync only for its own session, sent after
// the bound asked for; a later one replaces it, an earlier one does not;
// a sync in flight is waited for, unless the candidacy stops first.
func TestConfirmation(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	defer clock.Set(func() time.Time { return now })()
	w := &connWatch{}
	none := func(sid int64, notBefore time.Time, why string) {
		t.Helper()
		if at, ch := w.confirmation(sid, notBefore); !at.IsZero() || ch != nil {
			t.Errorf("%s: confirmation(%#x, %v) = %v, %v; want none", why, sid, notBefore, at, ch)
		}
	}
	is := func(sid int64, notBefore, want time.Time, why string) {
		t.Helper()
		if at, ch := w.confirmation(sid, notBefore); !at.Equal(want) || ch != nil {
			t.Errorf("%s: confirmation(%#x, %v) = %v, %v; want %v", why, sid, notBefore, at, ch, want)
		}
	}
	none(7, now.Add(-time.Second), "before any")
	w.confirm(7, now.Add(-500*time.Millisecond))
	is(7, now.Add(-time.Second), now.Add(-500*time.Millisecond), "fresh")
	none(8, now.Add(-time.Second), "another session's")
	none(0, now.Add(-time.Second), "no session")
	none(7, now.Add(-100*time.Millisecond), "stale")
	w.confirm(7, now.Add(-900*time.Millisecond))
	is(7, now.Add(-time.Second), now.Add(-500*time.Millisecond), "an older one does not replace it")
	w.confirm(8, now.Add(-800*time.Millisecond))
	none(7, now.Add(-time.Second), "the session changed")
	is(8, now.Add(-time.Second), now.Add(-800*time.Millisecond), "the new session's")

	// A sync in flight: waited for.
	done := make(chan struct{})
	w.syncing, w.syncSid, w.syncSent = done, 8, now.Add(-10*time.Millisecond)
	if at, ch := w.confirmation(8, now.Add(-100*time.Millisecond)); !at.IsZero() || ch == nil {
		t.Fatalf("with a sync in flight: %v, %v; want its channel", at, ch)
	}
	none(9, now.Add(-100*time.Millisecond), "another session's sync in flight")
	go func() {
		w.confirm(8, now.Add(-10*time.Millisecond))
		w.mu.Lock()
		w.syncing = nil
		w.mu.Unlock()
		close(done)
	}()
	if at := w.confirmed(context.Background(), nil, nil, 8, now.Add(-100*time.Millisecond)); !at.Equal(now.Add(-10 * time.Millisecond)) {
		t.Errorf("confirmed after the sync in flight = %v; want its send time %v", at, now.Add(-10*time.Millisecond))
	}

	// The candidacy stops while the sync is in flight: no confirmation.
	w.syncing, w.syncSid, w.syncSent = make(chan struct{}), 8, now.Add(-time.Millisecond)
	stop := make(chan struct{})
	close(stop)
	if at := w.confirmed(context.Background(), stop, nil, 8, now.Add(-5*time.Millisecond)); !at.IsZero() {
		t.Errorf("confirmed after stop = %v; want none", at)
	}
}
