package kubesuite_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/electkit/election"
	"github.com/electkit/election/internal/rig/kubetest"
)

// TestRequestTransfer: an Elector that does not campaign (another
// process's, as elect transfer's) asks the leader, through the Lease, to
// hand over to a named waiting candidate, then to the best one; a target
// that does not wait gets ErrNoCandidate and the leader keeps leading.
func TestRequestTransfer(t *testing.T) {
	server(t)
	ctx := context.Background()
	name := leaseName(t)
	_, ta := lead(t, name, election.WithID("a"))
	b := newOursOpts(t, name, kubetest.AdminToken, election.WithID("b"), election.WithPriority(1))
	c := newOursOpts(t, name, kubetest.AdminToken, election.WithID("c"), election.WithPriority(5))
	wb, wc := make(chan won, 1), make(chan won, 1)
	go func() { term, err := b.Campaign(ctx); wb <- won{term, err, time.Now()} }()
	go func() { term, err := c.Campaign(ctx); wc <- won{term, err, time.Now()} }()
	o := newOursOpts(t, name, kubetest.AdminToken, election.WithID("o"))
	deadline := time.Now().Add(patience)
	for {
		cs, err := election.Candidates(ctx, o)
		if err == nil && len(cs) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("candidates %v, %v; want c and b waiting", cs, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	rctx, cancel := context.WithTimeout(ctx, patience)
	defer cancel()
	if _, err := election.RequestTransfer(rctx, o, "nobody"); !errors.Is(err, election.ErrNoCandidate) {
		t.Errorf("RequestTransfer to a candidate that does not wait = %v; want ErrNoCandidate", err)
	}
	if err := ta.Err(); err != nil {
		t.Fatalf("the leader's Term ended: %v", err)
	}
	l, err := election.RequestTransfer(rctx, o, "b")
	if err != nil || l.ID != "b" {
		t.Fatalf("RequestTransfer to b = %v, %v", l, err)
	}
	if err := ta.Err(); !errors.Is(err, election.ErrTransferred) {
		t.Errorf("the old leader's Term ended with %v; want ErrTransferred", err)
	}
	r := awaitWon(t, wb, patience, "b after the request")
	if r.term.Token() != l.Token {
		t.Errorf("RequestTransfer returned token %d, b's Term has %d", l.Token, r.term.Token())
	}
	l, err = election.RequestTransfer(rctx, o, "")
	if err != nil || l.ID != "c" {
		t.Fatalf("RequestTransfer to the best = %v, %v", l, err)
	}
	awaitWon(t, wc, patience, "c after the request")
}
