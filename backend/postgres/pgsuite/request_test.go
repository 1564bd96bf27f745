package pgsuite_test

import (
	"context"
	"errors"
	"testing"

	"github.com/electkit/election"
	"github.com/electkit/election/internal/rig/pgtest"
)

// A candidate that does not lead asks the leader, through the database,
// to hand its leadership to a named waiter: the leader's Term ends with
// ErrTransferred and the target leads. A target that does not wait is
// answered with ErrNoCandidate, and the leader keeps leading.
func TestRequestTransfer(t *testing.T) {
	srv := pgtest.Start(t)
	name := newName(t)
	ts := &terms{t: t}
	a := candidate(t, srv, name, "", "", election.WithID("a"))
	b := candidate(t, srv, name, "", "", election.WithID("b"), election.WithPriority(1))
	c := candidate(t, srv, name, "", "", election.WithID("c"), election.WithPriority(5))
	o := candidate(t, srv, name, "", "", election.WithID("o"))
	ta := ts.lead(a)
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	rb := ts.async(ctx, b)
	rc := ts.async(ctx, c)
	waitQueued(t, a.Elector, "c", "b")
	if _, err := election.RequestTransfer(ctx, o, "nobody"); !errors.Is(err, election.ErrNoCandidate) {
		t.Errorf("RequestTransfer to a candidate that does not wait = %v, want ErrNoCandidate", err)
	}
	if err := ta.Err(); err != nil {
		t.Fatalf("the leader's Term ended after a request it could not honour: %v", err)
	}
	l, err := election.RequestTransfer(ctx, o, "b")
	if err != nil || l.ID != "b" {
		t.Fatalf("RequestTransfer to b = %v, %v", l, err)
	}
	if !errors.Is(ta.Err(), election.ErrTransferred) {
		t.Errorf("the old leader's Term ended with %v, want ErrTransferred", ta.Err())
	}
	tb := await(t, rb, patience, "the transfer's target")
	if tb.Token() <= ta.Token() {
		t.Errorf("token %d, not above %d", tb.Token(), ta.Token())
	}
	// To the first in line.
	l, err = election.RequestTransfer(ctx, o, "")
	if err != nil || l.ID != "c" {
		t.Fatalf("RequestTransfer to the first in line = %v, %v; want c", l, err)
	}
	await(t, rc, patience, "the first in line")
}
