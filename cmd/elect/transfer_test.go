//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/electkit/election"
	"github.com/electkit/election/backend/etcd"
	"github.com/electkit/election/internal/rig/embedetcd"
	"github.com/electkit/election/internal/rig/etcdtest"
)

// elect transfer moves the leadership to the named candidate (exit 0, the
// new leader printed), or to the best waiting one; exits 4 when the
// target is not waiting (the leader keeps leading), 3 with no leader.
func TestTransferCommand(t *testing.T) {
	srv := etcdtest.New(t, embedetcd.Config{})
	ep := srv.Endpoints()[0]
	const name = "/test/transfer"
	if code, _, errOut := elect(t, "transfer", "--endpoints", ep, "--name", name, "--to", "b"); code != exitNoLeader {
		t.Fatalf("transfer with no leader: exit %d (%s), want %d", code, errOut, exitNoLeader)
	}
	if code, _, _ := elect(t, "transfer", "--endpoints", ep, "--name", name, "--to", "b/c"); code != exitUsage {
		t.Errorf("transfer --to b/c: exit %d, want %d", code, exitUsage)
	}
	cli := etcdtest.Client(t, srv.Endpoints())
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	var es []*etcd.Elector
	for i, id := range []string{"a", "b", "c"} {
		e, err := etcd.New(cli, name, election.WithID(id), election.WithPriority(int64(i)), election.WithTTL(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		es = append(es, e)
	}
	ta, err := es[0].Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	terms := make(chan *election.Term, 2)
	for _, e := range es[1:] {
		go func() {
			if t, err := e.Campaign(ctx); err == nil {
				terms <- t
			}
		}()
	}
	waitFor(t, "two candidates to wait", func() bool {
		cs, err := es[0].Candidates(ctx)
		return err == nil && len(cs) == 2
	})
	if code, _, errOut := elect(t, "transfer", "--endpoints", ep, "--name", name, "--to", "nobody"); code != exitNotMoved || !strings.Contains(errOut, `"nobody" is not waiting`) {
		t.Errorf("transfer --to nobody: exit %d, stderr %q; want %d", code, errOut, exitNotMoved)
	}
	if ta.Err() != nil {
		t.Fatalf("the leader stopped after a refused transfer: %v", ta.Err())
	}
	code, out, errOut := elect(t, "transfer", "--endpoints", ep, "--name", name, "--to", "b")
	if code != 0 || !strings.HasPrefix(out, "b  token=") || !strings.Contains(out, "priority=1") {
		t.Fatalf("transfer --to b: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if !errors.Is(ta.Err(), election.ErrTransferred) {
		t.Errorf("the old Term ended with %v, want ErrTransferred", ta.Err())
	}
	if tb := <-terms; tb.Leader().ID != "b" {
		t.Errorf("%s leads after the transfer to b", tb.Leader().ID)
	}
	code, out, errOut = elect(t, "transfer", "--endpoints", ep, "--name", name, "--json")
	if code != 0 || !strings.Contains(out, `"id":"c"`) || !strings.Contains(out, `"priority":2`) {
		t.Fatalf("transfer to the best: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// elect transfer away from an elect run: the old leader's command gets
// SIGTERM, and SIGKILL after that elect run's --grace if it is still
// there; the target's command leads on.
func TestTransferCommandGrace(t *testing.T) {
	srv := etcdtest.New(t, embedetcd.Config{})
	ep := srv.Endpoints()[0]
	for _, exitOnTerm := range []bool{true, false} {
		t.Run(fmt.Sprintf("exitOnTerm=%v", exitOnTerm), func(t *testing.T) {
			name := fmt.Sprintf("/test/transfer-grace-%v", exitOnTerm)
			checkLossGrace(t, ep, name, exitOnTerm, nil, nil, func() {
				code, out, errOut := elect(t, "transfer", "--endpoints", ep, "--name", name, "--to", "b")
				if code != 0 || !strings.HasPrefix(out, "b  token=") {
					t.Fatalf("transfer --to b: exit %d, stdout %q, stderr %q", code, out, errOut)
				}
			})
		})
	}
}
