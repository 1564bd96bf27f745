package etcd

import (
	"math"
	"slices"
	"strings"
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/electkit/election"
	"github.com/electkit/election/internal/record"
)

// The candidate ahead sorts after: higher priority first, then earlier
// arrival; the lease and nonce only break ties.
func TestQueueKeyOrder(t *testing.T) {
	l := newLayout("/svc")
	// In the order they must be served.
	want := []string{
		l.queueKey(math.MaxInt64, 1000, 1, 1),
		l.queueKey(5, 10, 7, 1),
		l.queueKey(5, 11, 3, 1),
		l.queueKey(0, 1, 9, 1),
		l.queueKey(0, 2, 9, 1),
		l.queueKey(-1, 1, 1, 1),
		l.queueKey(math.MinInt64, 1, 1, 1),
	}
	got := slices.Clone(want)
	slices.Sort(got)
	slices.Reverse(got)
	if !slices.Equal(got, want) {
		t.Errorf("served in key order %q, want %q", got, want)
	}
	for _, k := range want {
		if !strings.HasPrefix(k, l.queue) || k >= l.queueEnd {
			t.Errorf("%q outside the queue's range [%q, %q)", k, l.queue, l.queueEnd)
		}
		if _, err := l.queueLease(k); err != nil {
			t.Errorf("queueLease(%q): %v", k, err)
		}
	}
	if l.queueEnd >= l.leader {
		t.Errorf("the queue's range ends at %q, after the leader key %q: a watch up to the leader key would cover more than the queue", l.queueEnd, l.leader)
	}
	for _, bad := range []string{"/svc/_c/x", "/svc/_c/" + strings.Repeat("g", queueKeyLen), "/other/_c/" + strings.Repeat("0", queueKeyLen)} {
		if _, err := l.queueLease(bad); err == nil {
			t.Errorf("queueLease(%q) accepted", bad)
		}
	}
}

func TestDecodeLeader(t *testing.T) {
	l := newLayout("/svc")
	o := election.DefaultOptions()
	o.ID = "a"
	q := l.queueKey(0, 5, 0x42, 1)
	good := &mvccpb.KeyValue{Key: []byte(l.leader), Lease: 0x42, CreateRevision: 9, Value: record.EncodeLeader(o, []byte("v"), q)}
	ld, key, err := l.decodeLeader(good, 9)
	if err != nil || ld.ID != "a" || ld.Token != 9 || key != q {
		t.Fatalf("decodeLeader(good) = %v, %q, %v", ld, key, err)
	}
	for _, tc := range []struct {
		name string
		kv   *mvccpb.KeyValue
		want string
	}{
		{"no lease", &mvccpb.KeyValue{Key: []byte(l.leader), CreateRevision: 9, Value: good.Value}, "no lease"},
		{"not a record", &mvccpb.KeyValue{Key: []byte(l.leader), Lease: 0x42, CreateRevision: 9, Value: []byte("x")}, "value"},
		{"no queue key", &mvccpb.KeyValue{Key: []byte(l.leader), Lease: 0x42, CreateRevision: 9, Value: record.Encode(o, nil)}, "queue key"},
		{"other lease", &mvccpb.KeyValue{Key: []byte(l.leader), Lease: 0x43, CreateRevision: 9, Value: good.Value}, "holds lease"},
		{"below a seen token", &mvccpb.KeyValue{Key: []byte(l.leader), Lease: 0x42, CreateRevision: 8, Value: good.Value}, "below"},
	} {
		if _, _, err := l.decodeLeader(tc.kv, 9); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: decodeLeader = %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
}
