package kubesuite_test

import (
	"context"
	"testing"
	"time"

	"github.com/electkit/election"
)

// TestServerRestart: the API server stops and starts again (a rolling
// upgrade, a crash) while one candidate leads and another waits. The
// leader's Term either outlives the outage (a renewal after the restart
// succeeds) or ends by its deadline; the waiter never leads while it is
// valid; afterwards the election goes on (watches re-established, a
// Resign hands over).
func TestServerRestart(t *testing.T) {
	s := server(t)
	name := leaseName(t)
	renewed := make(chan election.Renewal, 64)
	a, ta := lead(t, name, election.WithTTL(20*time.Second), election.WithAfterRenew(func(r election.Renewal) {
		select {
		case renewed <- r:
		default:
		}
	}))
	b := newOursOpts(t, name, "admin-token", election.WithTTL(20*time.Second))
	wb := make(chan won, 1)
	go func() {
		term, err := b.Campaign(context.Background())
		wb <- won{term, err, time.Now()}
	}()
	if err := s.Restart(); err != nil {
		t.Fatalf("restarting the API server: %v", err)
	}
	restarted := time.Now()
	for {
		select {
		case r := <-renewed:
			if r.Err != nil || !r.Sent.After(restarted) {
				continue
			}
		case <-ta.Done():
			t.Logf("the Term ended during the outage: %v", ta.Err())
		case w := <-wb:
			t.Fatalf("the waiter's Campaign returned while the leader's Term is valid: %v, %v", w.term, w.err)
		case <-time.After(2 * patience):
			t.Fatalf("no renewal after the restart within %v, and the Term still valid", 2*patience)
		}
		break
	}
	if ta.Err() == nil {
		if err := a.Resign(context.Background()); err != nil {
			t.Fatalf("Resign after the restart: %v", err)
		}
	}
	select {
	case w := <-wb:
		if w.err != nil {
			t.Fatalf("the waiter after the restart: %v", w.err)
		}
		if w.term.Token() <= ta.Token() {
			t.Errorf("token %d after %d", w.term.Token(), ta.Token())
		}
	case <-time.After(20*time.Second + patience):
		t.Fatalf("the waiter did not lead after the restart")
	}
}
