package etcd

import (
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/electkit/election"
	"github.com/electkit/election/internal/record"
)

// checked returns the Compares of a release's hand-over (handOverOps)
// whose key or range holds key.
func checked(op *pb.RequestOp, key string) []*pb.Compare {
	var out []*pb.Compare
	for _, c := range op.GetRequestTxn().Compare {
		switch {
		case c.RangeEnd == nil && string(c.Key) == key,
			c.RangeEnd != nil && string(c.Key) <= key && key < string(c.RangeEnd):
			out = append(out, c)
		}
	}
	return out
}

// A release's hand-over compares no key a past handover left: etcd keeps
// every deleted key in its index until a compaction, and a range Compare
// visits each (BENCHMARKS.md, 2026-11-30). It still compares every key
// that would make the hand-over wrong.
func TestHandOverComparesNoPast(t *testing.T) {
	l := newLayout("/svc")
	e := &Elector{lay: l}
	const seq, lease, token = 1000, 0x42, 5000
	c := &candidacy{key: l.queueKey(0, seq, lease, 1), seq: seq}
	lkey := l.leaderKey(seq, c.key)
	o := election.DefaultOptions()
	o.ID = "b"
	skey := l.queueKey(0, seq+10, lease+1, 1)
	succ := &mvccpb.KeyValue{Key: []byte(skey), Lease: lease + 1, CreateRevision: seq + 11, ModRevision: seq + 11, Value: record.Encode(o, nil)}

	// What past handovers left: the queue keys of earlier leaders of c's
	// priority (earlier arrivals: above c's key), their marks, and their
	// leadership keys (named for those arrivals: before c's).
	var past []string
	for _, a := range []int64{1, 500, seq - 1} {
		q := l.queueKey(0, a, lease+2, 7)
		past = append(past, q, l.markKey(q), l.leaderKey(a, q))
	}
	// What must fail the hand-over: a higher priority queued above c (it
	// leads next), a candidate between c and succ (it is next), a
	// leadership key after c's (an earlier version's reservation), a
	// pending hand-over of an earlier version, and succ's key put again.
	must := []string{
		l.queueKey(1, seq+500, lease+3, 1), l.queueKey(1<<40, 1, lease+3, 1),
		l.queueKey(0, seq+5, lease+3, 1),
		l.leaderKey(seq+20, skey), l.leaderKey(seq, c.key) + "x",
		l.transfer(), skey, lkey,
	}

	op, ok := e.handOverOps(c, lkey, token, true, succ)
	if !ok {
		t.Fatal("handOverOps refused a successor of this package")
	}
	for _, k := range past {
		if cs := checked(op, k); len(cs) > 0 {
			t.Errorf("a headed leader's release compares %s, a key past handovers left: %v", k, cs)
		}
	}
	for _, k := range must {
		if len(checked(op, k)) == 0 {
			t.Errorf("the release does not compare %s", k)
		}
	}
	// The successor learns from its mark that it heads the queue.
	then := op.GetRequestTxn().Success
	if m := then[1].GetRequestPut(); m == nil || string(m.Key) != l.markKey(skey) || !markHead(m.Value) {
		t.Errorf("the hand-over's second put = %v, want %s saying its candidate heads the queue", then[1], l.markKey(skey))
	}

	// A Term a Transfer began may have candidates of its priority above
	// it: its release compares the whole queue above, past keys and all.
	op, _ = e.handOverOps(c, lkey, token, false, succ)
	if len(checked(op, l.queueKey(0, seq-1, lease+2, 7))) == 0 {
		t.Error("a release not headed does not compare the queue of its priority above it")
	}
	for _, k := range must {
		if len(checked(op, k)) == 0 {
			t.Errorf("a release not headed does not compare %s", k)
		}
	}
}

// The first key past a priority's queue keys: after every key of that
// priority and its marks, at or before every key of the next.
func TestPriorityEnd(t *testing.T) {
	l := newLayout("/svc")
	for _, p := range []int64{-1 << 63, -1, 0, 1, 1<<63 - 1} {
		q := l.queueKey(p, 5, 0x42, 1)
		end := l.priorityEnd(q)
		for _, k := range []string{q, l.markKey(q), l.queueKey(p, 0, 1<<63-1, 1<<32-1), l.markKey(l.queueKey(p, 0, 1<<63-1, 1<<32-1))} {
			if k >= end {
				t.Errorf("priority %d: %s is not before priorityEnd %s", p, k, end)
			}
		}
		if p < 1<<63-1 {
			if k := l.queueKey(p+1, -1, 0, 0); k < end {
				t.Errorf("priority %d: the next priority's key %s is before priorityEnd %s", p, k, end)
			}
		}
		if end > l.queueEnd() {
			t.Errorf("priority %d: priorityEnd %s is past the queue's end", p, end)
		}
	}
	if got := l.priorityEnd("/svc/_c/x"); got != past("/svc/_c/x") {
		t.Errorf("priorityEnd of a key that is not a queue key = %q", got)
	}
}

func markHead(data []byte) bool {
	_, head := record.Mark(data)
	return head
}
