package etcd

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unsafe"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

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
		if !strings.HasPrefix(k, l.queue()) || k >= l.queueEnd() {
			t.Errorf("%q outside the queue's range [%q, %q)", k, l.queue(), l.queueEnd())
		}
		if _, err := l.queueLease(k); err != nil {
			t.Errorf("queueLease(%q): %v", k, err)
		}
	}
	if lk := l.leaderKey(3, want[0]); !strings.HasPrefix(lk, l.leader()) || lk >= l.leadEnd() || l.leadEnd() >= l.request() {
		t.Errorf("leadership key %q outside [%q, %q), or that range reaches the request key %q", lk, l.leader(), l.leadEnd(), l.request())
	}
	if l.leaderKey(3, want[0]) >= l.leaderKey(4, want[0]) {
		t.Errorf("leadership keys do not sort in the order of the revisions that name them")
	}
	if l.queueEnd() >= l.leader() {
		t.Errorf("the queue's range ends at %q, after the leader key %q: a watch up to the leader key would cover more than the queue", l.queueEnd(), l.leader())
	}
	for _, bad := range []string{"/svc/_c/x", "/svc/_c/" + strings.Repeat("g", queueKeyLen), "/other/_c/" + strings.Repeat("0", queueKeyLen)} {
		if _, err := l.queueLease(bad); err == nil {
			t.Errorf("queueLease(%q) accepted", bad)
		}
	}
}

// A hand-over's mark sorts after its candidate's queue key, before any
// other queue key above it, and inside the range of the watch of the
// candidate behind only if that watch runs past the candidate's key and
// its mark (it ends at after(key)); reads above a candidate begin past
// its mark, and a read drops the marks of the keys it holds.
func TestMarkKeyOrder(t *testing.T) {
	l := newLayout("/svc")
	below, k, above := l.queueKey(0, 12, 7, 1), l.queueKey(0, 11, 3, 1), l.queueKey(0, 11, 3, 2)
	m := l.markKey(k)
	for _, c := range []struct {
		lo, hi string
	}{{below, k}, {k, after(k)}, {after(k), m}, {m, past(k)}, {past(k), above}} {
		if c.lo >= c.hi {
			t.Errorf("%q does not sort before %q", c.lo, c.hi)
		}
	}
	if !l.isMark(m) || l.isMark(k) || l.isMark(k+"/x") || l.isMark("/svc/_c/x/h") {
		t.Errorf("isMark: %q %v, %q %v", m, l.isMark(m), k, l.isMark(k))
	}
	if _, err := l.queueLease(m); err == nil {
		t.Errorf("queueLease accepted the mark %q", m)
	}
	kv := func(key string) *mvccpb.KeyValue { return &mvccpb.KeyValue{Key: []byte(key), Lease: 3} }
	keysOf := func(kvs []*mvccpb.KeyValue) (out []string) {
		for _, kv := range kvs {
			out = append(out, string(kv.Key))
		}
		return out
	}
	for _, c := range []struct {
		in, want []string
	}{
		{[]string{k, m, above}, []string{k, above}},
		{[]string{below, k, m}, []string{below, k}},
		{[]string{m, above}, []string{m, above}}, // its key is gone: the mark holds its place until its lease ends
		{[]string{below, k, above}, []string{below, k}},
		{nil, nil},
	} {
		var in []*mvccpb.KeyValue
		for _, key := range c.in {
			in = append(in, kv(key))
		}
		if got := keysOf(l.dropMarks(in, 2)); !slices.Equal(got, c.want) {
			t.Errorf("dropMarks(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	h1, l1, ok1 := l.rank(k)
	h2, l2, ok2 := l.rank(past(k))
	if !ok1 || !ok2 || h1 != h2 || l1 != l2 {
		t.Errorf("rank(past(%q)) differs from the key's", k)
	}
}

func TestDecodeLeader(t *testing.T) {
	l := newLayout("/svc")
	o := election.DefaultOptions()
	o.ID = "a"
	q := l.queueKey(0, 5, 0x42, 1)
	lk := l.leaderKey(5, q)
	good := &mvccpb.KeyValue{Key: []byte(lk), Lease: 0x42, CreateRevision: 9, Value: record.EncodeLeader(o, []byte("v"), q)}
	ld, key, err := l.decodeLeader(good, 9)
	if err != nil || ld.ID != "a" || ld.Token != 9 || key != q {
		t.Fatalf("decodeLeader(good) = %v, %q, %v", ld, key, err)
	}
	for _, tc := range []struct {
		name string
		kv   *mvccpb.KeyValue
		want string
	}{
		{"no lease", &mvccpb.KeyValue{Key: []byte(lk), CreateRevision: 9, Value: good.Value}, "no lease"},
		{"not a record", &mvccpb.KeyValue{Key: []byte(lk), Lease: 0x42, CreateRevision: 9, Value: []byte("x")}, "value"},
		{"no queue key", &mvccpb.KeyValue{Key: []byte(lk), Lease: 0x42, CreateRevision: 9, Value: record.Encode(o, nil)}, "queue key"},
		{"other lease", &mvccpb.KeyValue{Key: []byte(lk), Lease: 0x43, CreateRevision: 9, Value: good.Value}, "holds lease"},
		{"not a leadership key's name", &mvccpb.KeyValue{Key: []byte(l.leader() + "x"), Lease: 0x42, CreateRevision: 9, Value: good.Value}, "name is not"},
		{"named for another lease", &mvccpb.KeyValue{Key: []byte(l.leaderKey(5, l.queueKey(0, 5, 0x43, 1))), Lease: 0x42, CreateRevision: 9, Value: good.Value}, "named for lease"},
		{"named for another candidacy", &mvccpb.KeyValue{Key: []byte(l.leaderKey(5, l.queueKey(0, 5, 0x42, 2))), Lease: 0x42, CreateRevision: 9, Value: good.Value}, "does not carry"},
		{"below a seen token", &mvccpb.KeyValue{Key: []byte(lk), Lease: 0x42, CreateRevision: 8, Value: good.Value}, "below"},
	} {
		if _, _, err := l.decodeLeader(tc.kv, 9); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: decodeLeader = %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
}

// The windows above a key cover the rest of the queue, each key above in
// exactly one of them, growing from 16 ranks to the queue's end.
func TestWindowsAboveAKey(t *testing.T) {
	l := newLayout("/svc")
	for _, k := range []string{
		l.queueKey(0, 1000, 7, 1),
		l.queueKey(0, math.MaxInt64, 7, 1),
		l.queueKey(math.MinInt64, 1, 7, 1),
		l.queueKey(math.MaxInt64, 0, 7, 1), // the top rank: one window
	} {
		from := after(k)
		ends := l.windows(from)
		if len(ends) == 0 || ends[len(ends)-1] != l.queueEnd() || len(ends) > 1+len(windowBits) {
			t.Fatalf("windows(%q) = %q: want at most %d ends, the last the queue's end", k, ends, 1+len(windowBits))
		}
		if got := l.firstWindow(from); got != ends[0] {
			t.Fatalf("firstWindow(%q) = %q, want windows' first, %q", k, got, ends[0])
		}
		if got := l.createWindow(from); got != ends[0] && (len(ends) < 2 || got != ends[1] || ends[1] == l.queueEnd()) {
			t.Fatalf("createWindow(%q) = %q, want the end of windows' first or second (not the queue's end), of %q", k, got, ends)
		}
		lo := from
		for _, hi := range ends {
			if hi <= lo {
				t.Fatalf("windows(%q): %q does not grow past %q", k, hi, lo)
			}
			lo = hi
		}
		// Keys above k land in the window their distance says.
		above := []string{
			l.queueKey(0, 999, 7, 1),
			l.queueKey(0, 1, 7, 1),
			l.queueKey(1, 5, 7, 1),
			l.queueKey(math.MaxInt64, 0, 7, 1),
		}
		for _, a := range above {
			if a <= from {
				continue
			}
			if !slices.ContainsFunc(ends, func(e string) bool { return a < e }) {
				t.Errorf("key %q above %q is in no window %q", a, k, ends)
			}
		}
	}
	k := l.queueKey(0, 100000, 7, 1)
	ends := l.windows(after(k))
	if near := l.queueKey(0, 99999, 7, 1); near >= ends[0] {
		t.Errorf("the key just ahead, %q, is not in the first window (ending %q)", near, ends[0])
	}
	// A create reads arrivals up to 255 revisions ahead, and no further.
	if in, out := l.queueKey(0, 100000-255, 7, 1), l.queueKey(0, 100000-256, 7, 1); in >= l.createWindow(after(k)) || out < l.createWindow(after(k)) {
		t.Errorf("createWindow(%q) = %q: want %q in it and %q not", k, l.createWindow(after(k)), in, out)
	}
	if first := after(l.queueKey(0, 1, 7, 1)); l.createWindow(first) != l.firstWindow(first) {
		t.Errorf("createWindow above the first arrival = %q, want the first window alone, %q", l.createWindow(first), l.firstWindow(first))
	}
	if got := l.createWindow(l.queue() + "garbage\x00"); got != l.queueEnd() {
		t.Errorf("createWindow above a key without a rank = %q, want the queue's end", got)
	}
	// Window i spans up to 2^windowBits[i] ranks above the key: a key
	// 70,000 arrivals ahead is in the first that reaches that far.
	i := 0
	for 1<<windowBits[i] <= 70000 {
		i++
	}
	if far := l.queueKey(0, 100000-70000, 7, 1); i == 0 || far < ends[i-1] || far >= ends[i] {
		t.Errorf("a key 70,000 arrivals ahead, %q, is not in window %d [%q, %q)", far, i, ends[i-1], ends[i])
	}
	if got := l.windows(l.queue() + "garbage\x00"); !slices.Equal(got, []string{l.queueEnd()}) {
		t.Errorf("windows above a key without a rank = %q, want the one window up to the queue's end", got)
	}
}

// The windows below a key cover the queue below it, nearest first, each
// key below in exactly one of them, the last from the queue's beginning;
// the arrival windows stop at the first past the latest possible arrival.
func TestWindowsBelowAKey(t *testing.T) {
	l := newLayout("/svc")
	for _, k := range []string{
		l.queueKey(0, 1000, 7, 1),
		l.queueKey(0, 1, 7, 1),
		l.queueKey(math.MaxInt64, 5, 7, 1),
		l.queueKey(math.MinInt64, 1<<40, 7, 1), // the bottom priority: only later arrivals below
	} {
		starts := l.windowsBelow(k, len(windowBits))
		if len(starts) == 0 || starts[len(starts)-1] != l.queue() || len(starts) > 1+len(windowBits) {
			t.Fatalf("windowsBelow(%q) = %q: want at most %d starts, the last the queue's beginning", k, starts, 1+len(windowBits))
		}
		hi := k
		for _, lo := range starts {
			if lo >= hi {
				t.Fatalf("windowsBelow(%q): %q does not go below %q", k, lo, hi)
			}
			hi = lo
		}
		below := []string{
			l.queueKey(0, 1001, 7, 1),
			l.queueKey(0, 1<<30, 7, 1),
			l.queueKey(-1, 5, 7, 1),
			l.queueKey(math.MinInt64, 1<<41, 7, 1),
		}
		for _, b := range below {
			if b >= k {
				continue
			}
			if !slices.ContainsFunc(starts, func(s string) bool { return b >= s }) {
				t.Errorf("key %q below %q is in no window %q", b, k, starts)
			}
		}
	}
	k := l.queueKey(0, 100000, 7, 1)
	starts := l.windowsBelow(k, 2)
	if near := l.queueKey(0, 100001, 7, 1); near < starts[0] || near >= k {
		t.Errorf("the key just behind, %q, is not in the first window (from %q)", near, starts[0])
	}
	if len(starts) != 3 || starts[2] != l.queue() {
		t.Errorf("windowsBelow(%q, 2) = %q: want two starts and the queue's beginning", k, starts)
	}
	// A key 70,000 arrivals behind is in the first window that reaches
	// that far.
	all := l.windowsBelow(k, len(windowBits))
	i := 0
	for 1<<windowBits[i] <= 70000 {
		i++
	}
	if far := l.queueKey(0, 100000+70000, 7, 1); far >= all[i-1] || far < all[i] {
		t.Errorf("a key 70,000 arrivals behind, %q, is not in window %d [%q, %q)", far, i, all[i], all[i-1])
	}
	if got := l.windowsBelow(l.queue()+"garbage", 2); !slices.Equal(got, []string{l.queue()}) {
		t.Errorf("windows below a key without a rank = %q, want the one window from the queue's beginning", got)
	}
}

// The names are formatted by hand (no fmt on a release's path): they are
// what fmt's %016x and %08x write.
func TestNamesMatchFmt(t *testing.T) {
	l := newLayout("/svc/x")
	rng := rand.New(rand.NewPCG(3, 4))
	for range 1000 {
		p, seq, lease, nonce := rng.Int64()-rng.Int64(), rng.Int64(), clientv3.LeaseID(rng.Int64()), rng.Uint32()
		q := l.queueKey(p, seq, lease, nonce)
		if want := fmt.Sprintf("%s%016x%016x-%016x-%08x", l.queue(), uint64(p)^(1<<63), ^uint64(seq), uint64(lease), nonce); q != want {
			t.Fatalf("queueKey = %q, want %q", q, want)
		}
		rev := rng.Int64()
		if got, want := l.leaderKey(rev, q), fmt.Sprintf("%s%016x%s", l.leader(), uint64(rev), q[len(l.queue())+32:]); got != want {
			t.Fatalf("leaderKey = %q, want %q", got, want)
		}
		if got, want := l.leaderAt(rev), fmt.Sprintf("%s%016x", l.leader(), uint64(rev)); got != want {
			t.Fatalf("leaderAt = %q, want %q", got, want)
		}
		if got, err := l.queueLease(q); err != nil || got != int64(lease) {
			t.Fatalf("queueLease(%q) = %d, %v", q, got, err)
		}
		if got, err := l.leaderLease(l.leaderKey(rev, q)); err != nil || got != int64(lease) {
			t.Fatalf("leaderLease = %d, %v", got, err)
		}
	}
	for _, bad := range []string{"0000000000000000000000000000000A-0000000000000001-00000001", "000000000000000000000000000000g0-0000000000000001-00000001", "00000000000000000000000000000000-000000000000000F-00000001"} {
		if _, err := l.queueLease(l.queue() + bad); err == nil {
			t.Errorf("queueLease(%q) took a name that is not lower-case hex", bad)
		}
	}
}

func TestIsLeaderKey(t *testing.T) {
	l := newLayout("/svc/x")
	q := l.queueKey(3, 77, 0xabc, 9)
	if !l.isLeaderKey(l.leaderKey(77, q), 77, q) {
		t.Error("isLeaderKey refused leaderKey's own name")
	}
	other := l.queueKey(3, 77, 0xabd, 9)
	for _, k := range []string{l.leaderKey(78, q), l.leaderKey(77, other), l.leaderKey(77, q) + "x", "/svc/y/" + l.leaderKey(77, q)[len("/svc/x/"):], "", q} {
		if l.isLeaderKey(k, 77, q) {
			t.Errorf("isLeaderKey(%q) = true", k)
		}
	}
}

func TestPrefixOfName(t *testing.T) {
	l := newLayout("/svc/x")
	for key, want := range map[string]string{"/svc/x/_c/k": "_c/k", "/svc/x/": ""} {
		if got, ok := l.cutPrefix(key); !ok || got != want {
			t.Errorf("cutPrefix(%q) = %q, %v; want %q, true", key, got, ok, want)
		}
	}
	for _, key := range []string{"/svc/x", "/svc/xy/_c/k", "/svc/y/_c/k", "", "/svc"} {
		if got, ok := l.cutPrefix(key); ok {
			t.Errorf("cutPrefix(%q) = %q, true; want false", key, got)
		}
	}
	q := l.queueKey(3, 77, 0xabc, 9)
	if got := l.queueIn(q); got != l.queue() || unsafe.StringData(got) != unsafe.StringData(q) {
		t.Errorf("queueIn(%q) = %q, not %q in the key's own memory", q, got, l.queue())
	}
	for _, key := range []string{"/svc/y/_c/" + q[len("/svc/x/_c/"):], "/svc/x/_l/0", ""} {
		if got := l.queueIn(key); got != l.queue() {
			t.Errorf("queueIn(%q) = %q; want %q", key, got, l.queue())
		}
	}
	if got := (&Elector{lay: newLayout("/svc/x")}).Name(); got != "/svc/x" {
		t.Errorf("Name() = %q", got)
	}
}

// A create reads the first window above its key, or the second when the
// first is empty: a nested transaction, whose response createAbove reads
// either way; above the first arrival, where the first window is all
// there is of the priority, a plain read of it.
func TestCreateAbove(t *testing.T) {
	e := &Elector{lay: newLayout("/svc")}
	from := past(e.lay.queueKey(0, 1000, 7, 1))
	op := e.createAboveOp(from)
	tx := op.GetRequestTxn()
	if tx == nil || len(tx.Compare) != 1 || len(tx.Success) != 1 || len(tx.Failure) != 1 {
		t.Fatalf("createAboveOp = %v, want a nested transaction", op)
	}
	if r := tx.Success[0].GetRequestRange(); r == nil || string(r.Key) != e.lay.firstWindow(from) || string(r.RangeEnd) != e.lay.createWindow(from) {
		t.Errorf("with the first window empty it reads %v, want the second", tx.Success[0])
	}
	if r := tx.Failure[0].GetRequestRange(); r == nil || string(r.Key) != from || string(r.RangeEnd) != e.lay.firstWindow(from) {
		t.Errorf("otherwise it reads %v, want the first window", tx.Failure[0])
	}
	kv := &mvccpb.KeyValue{Key: []byte(e.lay.queueKey(0, 900, 8, 1))}
	rng := &pb.ResponseOp{Response: &pb.ResponseOp_ResponseRange{ResponseRange: &pb.RangeResponse{Kvs: []*mvccpb.KeyValue{kv}}}}
	for _, succeeded := range []bool{true, false} {
		r := &pb.ResponseOp{Response: &pb.ResponseOp_ResponseTxn{ResponseTxn: &pb.TxnResponse{Succeeded: succeeded, Responses: []*pb.ResponseOp{rng}}}}
		if kvs, last := e.createAbove(r, from); len(kvs) != 1 || kvs[0] != kv || last {
			t.Errorf("createAbove (first window empty %t) = %v, %t; want the key read, not the last window", succeeded, kvs, last)
		}
	}
	first := after(e.lay.queueKey(0, 1, 7, 1))
	if op := e.createAboveOp(first); op.GetRequestRange() == nil {
		t.Errorf("createAboveOp above the first arrival = %v, want a plain read", op)
	}
	if kvs, _ := e.createAbove(rng, first); len(kvs) != 1 {
		t.Errorf("createAbove of a plain read = %v", kvs)
	}
}
