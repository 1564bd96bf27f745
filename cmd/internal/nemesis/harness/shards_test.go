package harness

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/electkit/election"
	"github.com/electkit/election/backend"
)

// Every fourth candidate from c2 is shard-heavy, and on a session too;
// its side elections have valid, distinct names under one prefix.
func TestShardKinds(t *testing.T) {
	var sharded []string
	for _, id := range []string{"c1", "c2", "c3", "c4", "c5", "c6", "c7", "c8", "c10", "x2"} {
		if Sharded(id) {
			sharded = append(sharded, id)
			if !OnSession(id) {
				t.Errorf("%s is shard-heavy but not on a session", id)
			}
		}
	}
	if got := strings.Join(sharded, ","); got != "c2,c6,c10" {
		t.Errorf("shard-heavy candidates %s, want c2,c6,c10", got)
	}
	names := sideNames(CandidateConfig{Name: etcdElection, Shards: 50})
	seen := map[string]bool{}
	for _, n := range names {
		if err := backend.ValidateName(n); err != nil {
			t.Errorf("side election %q: %v", n, err)
		}
		if seen[n] || !strings.HasPrefix(n, etcdElection+ShardSuffix+"/") {
			t.Errorf("side election %q: repeated, or not under %s%s/", n, etcdElection, ShardSuffix)
		}
		seen[n] = true
	}
	if len(seen) != 50 {
		t.Errorf("%d side elections, want 50", len(seen))
	}
	if got := sideNames(CandidateConfig{Name: etcdElection}); len(got) != 1 || got[0] != etcdElection+SideSuffix {
		t.Errorf("without Shards: side elections %q, want the one %s%s", got, etcdElection, SideSuffix)
	}
}

// closer is an Elector whose Close returns once release is closed.
type closer struct {
	election.Elector
	release chan struct{}
}

func (c closer) Close() error { <-c.release; return nil }

// closeAll closes every Elector at once, and gives up on one that does
// not return within its bound.
func TestCloseAllBound(t *testing.T) {
	open, stuck := make(chan struct{}), make(chan struct{})
	close(open)
	defer close(stuck)
	es := []election.Elector{closer{release: open}, closer{release: open}}
	if err := closeAll(es, time.Minute); err != nil {
		t.Errorf("closeAll of Electors that close: %v", err)
	}
	es = append(es, closer{release: stuck})
	if err := closeAll(es, 10*time.Millisecond); err == nil {
		t.Errorf("closeAll with one Close that never returns: nil error")
	}
}

func TestShardVerdict(t *testing.T) {
	s := &shardCheck{note: "no shard-heavy candidate runs at the end"}
	if v := s.verdict(); !v.OK || !strings.Contains(v.Detail, "not looked at") {
		t.Errorf("nothing looked at: %v", v)
	}
	s = &shardCheck{checked: true, others: 50}
	s.stopped("c2", nil)
	if v := s.verdict(); !v.OK {
		t.Errorf("all led, ended cleanly: %v", v)
	}
	s.missing = []string{"/e-shard/007: no leader"}
	if v := s.verdict(); v.OK || !strings.Contains(v.Detail, "/e-shard/007") {
		t.Errorf("one without a leader: %v", v)
	}
	s.missing = nil
	s.stopped("c6", errors.New("did not exit within 15s of SIGTERM: killed"))
	if v := s.verdict(); v.OK || !strings.Contains(v.Detail, "c6") {
		t.Errorf("one killed at the end: %v", v)
	}
}
