package kubesuite_test

import (
	"context"
	"testing"
	"time"

	"github.com/electkit/election"
	"github.com/electkit/election/backend/kube"
	"github.com/electkit/election/internal/rig/kubetest"
)

// TestHandoverRequests: a Resign names the head of the waiting candidates
// on its release; the head takes the Lease on the watch event, and the
// other waiters, who see it named, send no request: one list, the
// leader's, per handover, not one per waiter.
func TestHandoverRequests(t *testing.T) {
	server(t)
	ctx := context.Background()
	name := leaseName(t)
	a, ta := lead(t, name, election.WithID("a"))
	long := election.WithTTL(60 * time.Second) // the waiters' records are not renewed during the test
	b := newOursOpts(t, name, kubetest.AdminToken, election.WithID("b"), election.WithPriority(9), long)
	wb := make(chan won, 1)
	go func() { term, err := b.Campaign(ctx); wb <- won{term, err, time.Now()} }()
	cs, n := countingClient(t)
	for _, id := range []string{"c", "d", "e", "f", "g"} {
		e, err := kube.New(cs.CoordinationV1(), ns, name, election.WithID(id), long)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		go func() { _, _ = e.Campaign(ctx) }()
	}
	o := newOursOpts(t, name, kubetest.AdminToken, election.WithID("o"))
	deadline := time.Now().Add(patience)
	for {
		got, err := election.Candidates(ctx, o)
		if err == nil && len(got) == 6 && got[0].ID == "b" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("candidates %v, %v; want b and five more waiting", got, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	obs := o.Observe(ctx)
	before := n.n.Load()
	if err := a.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	r := awaitWon(t, wb, patience, "b after a resigned")
	for l := range obs {
		if l.ID == "b" {
			break
		}
	}
	if d := n.n.Load() - before; d != 0 {
		t.Errorf("the five other waiters sent %d requests on the handover; want none", d)
	}
	if r.term.Token() <= ta.Token() {
		t.Errorf("token %d after %d", r.term.Token(), ta.Token())
	}
}
