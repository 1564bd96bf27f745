package etcd

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"strconv"
	"strings"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/electkit/election"
	"github.com/electkit/election/internal/record"
)

// Key layout. Under the election's name N there are two kinds of key, both
// bound to a candidate's session lease:
//
//	N/_l/<revision>-<lease>-<nonce>               {"v":1,"id":"sched-1","priority":0,"value":"…","key":"N/_c/…"}
//	N/_r                                          {"v":1,"to":"sched-2","token":1234,"by":"ops-1"} (a transfer request)
//	N/_t                                          N/_c/… (a pending hand-over of earlier versions)
//	N/_c/<priority><arrival>-<lease>-<nonce>      {"v":1,"id":"sched-1","priority":0,"value":"…"}
//	N/_c/<priority><arrival>-<lease>-<nonce>/h    {"v":1,"id":"sched-1","priority":0,"value":"…","key":"N/_l/…","head":true} (a hand-over's mark)
//
// N/_l/… are the leadership keys: the leader's, and, beside it, the
// reservation of the candidate next in line that earlier versions of
// this package made (honoured: its candidate leads when the leader's key
// goes). Each is named with a store revision at or above the create
// revision of every leadership key there when it is made (16 hex
// digits), then the lease and nonce of its candidate's queue key, so
// their names sort in the order they were created; its create revision is
// its token. The leader is the first: a candidate leads while its key is
// the first under N/_l/, and Leader and Observe read the first alone. A
// leadership key is created by the candidate at the head of the queue, in
// a transaction that also checks that the candidate's queue key exists
// under its lease, that nothing is queued above it and that no
// leadership key exists (a claim); or by the leader's release, for the
// candidate just below the leader (its successor, succ.go), in the
// transaction that deletes the leader's keys. A newcomer of higher
// priority deletes a reservation of lower priority in the transaction
// that creates its queue key, so the highest priority still leads next.
//
// A hand-over (Transfer, preemption, and a release to the successor) is
// one transaction of the leader's: it deletes its leadership key, its
// queue key and any reservation, and
// creates the target's leadership key under the target's lease, named
// with the target's arrival (handedKey: the name the target would give
// it, so that the target finds it its own, and its release deletes it),
// and puts the target's mark (markKey: its queue key's name plus "/h")
// under its lease, with its record naming that leadership key: the event
// of that put on the target's watch tells it that it leads, and no other
// candidate's watch holds the mark. A release's mark says "head": its
// target was next in line, so it heads the queue, and no candidate of its
// priority can queue above it while it leads (the create's Compares); its
// own release then compares only the priorities above (succ.go). A
// Transfer's or a preemption's mark does not. The target reads its key once its
// Term has begun, and ends the Term if it is not there. The mark goes
// with the target's queue key. Reads of the queue pass over marks.
//
// N/_t was the hand-over of earlier versions of this package: the leader
// deleted the leadership keys and put N/_t, naming the target's queue
// key, under the target's lease, and only the target could then create a
// leadership key, deleting N/_t in the same transaction. Candidates still honour it.
//
// N/_r is a request to the leader at the token it names to transfer
// (RequestTransfer), put by any client; the leader's watch covers it (its
// range runs from its queue key to N/_r), and it answers a request it
// cannot honour by putting the reason into the key. Requests to an
// earlier token are ignored.
//
// N/_c/… is the queue. A queue key's name sorts so that the candidate
// ahead sorts after: <priority> is the priority with its sign bit flipped
// (16 hex digits: higher priority, larger), <arrival> the bitwise
// complement of the store's revision read just before the key was written
// (16 hex digits: earlier, larger), then the session's lease and a nonce
// of the session (16 and 8 hex digits) that keep several candidacies on
// one lease apart. So "the candidate just ahead of mine" is the smallest
// key above mine, and "anyone ahead" the same read coming back empty, both
// read window by window (windows, nested below). The queue decides only
// who tries N/_l/ next; the leadership keys alone carry safety and the
// token.
//
// Segments of election names that begin with "_" are reserved for these
// keys (New refuses them), so that no election's keys fall into another's.
//
// No read of these keys is keys-only. The checks above compare each key's
// lease (a queue key put again without its lease, by an operator or a
// second program, must not pass for a candidate), and etcd v3.7 answers a
// keys-only range from its in-memory index, which holds no leases: every
// key's Lease comes back 0 (v3.6 read it from the stored value). The reads
// are bounded instead: one key, or two of a window.

// leaderDir, requestName, transferName, queueDir: the suffixes of the
// leadership keys' directory, the transfer request key, the hand-over key
// and the queue.
const (
	leaderDir    = "_l/"
	requestName  = "_r"
	transferName = "_t"
	queueDir     = "_c/"
)

// queueKeyLen is the length of a queue key's name after the queue's
// directory: 32 hex digits of rank, "-", 16 of lease, "-", 8 of nonce.
const queueKeyLen = 32 + 1 + 16 + 1 + 8

// layout holds the keys of one election. Only the name is kept, the
// string New was given: the other names are made when a request needs
// them, since a process may hold an Elector (and so a layout) for each of
// thousands of elections. Every key is under the prefix N + "/".
type layout struct {
	name string // N
}

func newLayout(name string) layout { return layout{name: name} }

// prefixLen is the length of the prefix N + "/".
func (l layout) prefixLen() int { return len(l.name) + 1 }

// cutPrefix returns key without the prefix N + "/", and whether key has it.
func (l layout) cutPrefix(key string) (string, bool) {
	if len(key) < l.prefixLen() || key[:len(l.name)] != l.name || key[len(l.name)] != '/' {
		return key, false
	}
	return key[l.prefixLen():], true
}

// appendPrefix appends N + "/" to b.
func (l layout) appendPrefix(b []byte) []byte { return append(append(b, l.name...), '/') }

// leader is N/_l/: the leadership keys' directory.
func (l layout) leader() string { return l.name + "/" + leaderDir }

// leadEnd is the end of its range: N/_l0.
func (l layout) leadEnd() string { return l.name + "/" + leaderDir[:len(leaderDir)-1] + "0" }

// request is N/_r.
func (l layout) request() string { return l.name + "/" + requestName }

// transfer is N/_t.
func (l layout) transfer() string { return l.name + "/" + transferName }

// queue is N/_c/: the queue's directory.
func (l layout) queue() string { return l.name + "/" + queueDir }

// queueIn is queue(), N/_c/, as the start of qkey, a queue key of the
// election: a leader's watch, which starts there, keeps no name of its own.
func (l layout) queueIn(qkey string) string {
	if n := l.prefixLen() + len(queueDir); len(qkey) >= n && qkey[l.prefixLen():n] == queueDir {
		if _, ok := l.cutPrefix(qkey); ok {
			return qkey[:n]
		}
	}
	return l.queue()
}

// queueEnd is the end of the queue's range: N/_c0.
func (l layout) queueEnd() string { return l.name + "/" + queueDir[:len(queueDir)-1] + "0" }

// queueKey names a candidacy's queue key.
func (l layout) queueKey(priority, seq int64, lease clientv3.LeaseID, nonce uint32) string {
	b := make([]byte, 0, l.prefixLen()+len(queueDir)+queueKeyLen)
	b = append(l.appendPrefix(b), queueDir...)
	b = appendHex(b, uint64(priority)^(1<<63), 16)
	b = appendHex(b, ^uint64(seq), 16)
	b = appendHex(append(b, '-'), uint64(lease), 16)
	b = appendHex(append(b, '-'), uint64(nonce), 8)
	return string(b)
}

// appendHex appends u as n lower-case hex digits, zero-padded (the low
// n*4 bits of u): fmt's %0<n>x, without fmt on a release's path.
func appendHex(b []byte, u uint64, n int) []byte {
	const digits = "0123456789abcdef"
	for i := n - 1; i >= 0; i-- {
		b = append(b, digits[(u>>(4*uint(i)))&0xf])
	}
	return b
}

// lowerHex reports whether s is lower-case hex digits only.
func lowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// leaderKey names the leadership key of the candidacy whose queue key is
// qkey, created at (or after) revision rev: the names of leadership keys
// sort in the order they were created, as long as each is named with a
// revision at or above the create revision of every one that exists then.
func (l layout) leaderKey(rev int64, qkey string) string {
	tail := qkey[l.prefixLen()+len(queueDir)+32:]
	b := make([]byte, 0, l.prefixLen()+len(leaderDir)+16+len(tail))
	b = append(l.appendPrefix(b), leaderDir...)
	return string(append(appendHex(b, uint64(rev), 16), tail...))
}

// leaderAt is the first name a leadership key named for revision rev can
// have: every leadership key named for rev or later sorts at or after it.
func (l layout) leaderAt(rev int64) string {
	b := make([]byte, 0, l.prefixLen()+len(leaderDir)+16)
	b = append(l.appendPrefix(b), leaderDir...)
	return string(appendHex(b, uint64(rev), 16))
}

// leaderLease returns the lease a leadership key's name carries, or an
// error saying why key is not a leadership key of this layout.
func (l layout) leaderLease(key string) (int64, error) {
	s, ok := strings.CutPrefix(key, l.leader())
	if !ok || len(s) != 16+1+16+1+8 || s[16] != '-' || s[33] != '-' {
		return 0, fmt.Errorf("name is not %s<16 hex>-<16 hex lease>-<8 hex nonce>", l.leader())
	}
	if !lowerHex(s[:16]) || !lowerHex(s[17:33]) || !lowerHex(s[34:]) {
		return 0, fmt.Errorf("name is not %s<16 hex>-<16 hex lease>-<8 hex nonce>", l.leader())
	}
	id, _ := strconv.ParseUint(s[17:33], 16, 64)
	return int64(id), nil
}

// handedKey names the leadership key a hand-over (Transfer, preemption)
// creates for the candidate whose queue key is qkey: the one that
// candidate would create itself, named with its arrival (a revision below
// any the hand-over can have), so that the candidate finds it as its own
// and its release deletes it even before it took it.
func (l layout) handedKey(qkey string) (string, error) {
	if _, err := l.queueLease(qkey); err != nil {
		return "", err
	}
	s := qkey[len(l.queue()):]
	arrival, _ := strconv.ParseUint(s[16:32], 16, 64) // checked by queueLease
	return l.leaderKey(int64(^arrival), qkey), nil
}

// leadersOp reads the first two leadership keys: the leader's, then any
// after it (a reservation of an earlier version of this package).
func (l layout) leadersOp(o ...opOption) *pb.RequestOp {
	return opGet(l.leader(), append([]opOption{withRange(l.leadEnd()), withLimit(2)}, o...)...)
}

// noLeader is a Compare that holds when no leadership key exists.
func (l layout) noLeader() *pb.Compare { return emptyIn(l.leader(), l.leadEnd()) }

// queueLease returns the lease a queue key's name carries, or an error
// saying why key is not a queue key of this layout.
func (l layout) queueLease(key string) (int64, error) {
	s, ok := strings.CutPrefix(key, l.queue())
	if !ok || len(s) != queueKeyLen || s[32] != '-' || s[49] != '-' {
		return 0, fmt.Errorf("name is not %s<32 hex>-<16 hex lease>-<8 hex nonce>", l.queue())
	}
	if !lowerHex(s[:32]) || !lowerHex(s[33:49]) || !lowerHex(s[50:]) {
		return 0, fmt.Errorf("name is not %s<32 hex>-<16 hex lease>-<8 hex nonce>", l.queue())
	}
	id, _ := strconv.ParseUint(s[33:49], 16, 64)
	return int64(id), nil
}

// queuePriority returns the priority a queue key's name carries.
func (l layout) queuePriority(key string) (int64, bool) {
	s, ok := strings.CutPrefix(key, l.queue())
	if !ok || len(s) < 16 {
		return 0, false
	}
	u, err := strconv.ParseUint(s[:16], 16, 64)
	if err != nil {
		return 0, false
	}
	return int64(u ^ (1 << 63)), true
}

// after returns the first key after key.
func after(key string) string { return key + "\x00" }

// markSuffix ends a hand-over's mark: the key a hand-over (a release to
// the successor, Transfer, preemption) puts beside its target's queue
// key, under the target's lease, with a record naming the leadership key
// it created for the target.
const markSuffix = "/h"

// markKey names the hand-over mark of the candidate whose queue key is
// qkey. It sorts after qkey and before every other queue key above it:
// inside the watch of that candidate, which runs from its own key up, and
// outside the watch of the candidate behind it, which ends just past
// qkey. So a hand-over wakes its target alone (P9).
func (l layout) markKey(qkey string) string { return qkey + markSuffix }

// past returns the first key past qkey and its mark: reads and compares
// of what is queued above a candidate begin there.
func past(qkey string) string { return qkey + "0" }

// priorityEnd returns the first key past the queue keys of qkey's
// priority: the queue keys of higher priorities begin there.
func (l layout) priorityEnd(qkey string) string {
	if _, err := l.queueLease(qkey); err != nil {
		return past(qkey)
	}
	return clientv3.GetPrefixRangeEnd(qkey[:len(l.queue())+16])
}

// pastKey is past for a key of the queue that may not be a queue key of
// this layout (garbage a read passes over): after it, for such a key, as
// "<queue><32 hex>" + "0" would pass over the queue keys of that rank.
func (l layout) pastKey(key string) string {
	if _, err := l.queueLease(key); err != nil {
		return after(key)
	}
	return past(key)
}

// isMark reports whether key is a hand-over mark of the queue (a queue
// key's name with markSuffix).
func (l layout) isMark(key string) bool {
	q, ok := strings.CutSuffix(key, markSuffix)
	if !ok {
		return false
	}
	_, err := l.queueLease(q)
	return err == nil
}

// dropMarks returns kvs, keys read in order up a range of the queue,
// without the mark of any queue key among them, at most n: a mark
// sorts just after its candidate's key and is not a candidate. A mark
// whose queue key is not there (gone, with the mark's lease not yet
// expired) stays: it holds its place as any leased key does.
func (l layout) dropMarks(kvs []*mvccpb.KeyValue, n int) []*mvccpb.KeyValue {
	out := kvs[:0:0]
	for i, kv := range kvs {
		if i > 0 && string(kv.Key) == l.markKey(string(kvs[i-1].Key)) {
			continue
		}
		out = append(out, kv)
	}
	if len(out) > n {
		out = out[:n]
	}
	return out
}

// newLeaseID draws the ID of a session's lease. The client chooses it
// (etcd takes any positive ID it does not hold yet), so that a grant whose
// reply was lost can still be revoked by its ID instead of lingering for a
// TTL; a clash with a live lease is refused by etcd and drawn again.
func newLeaseID() clientv3.LeaseID {
	for {
		if id := rand.Int64(); id > 0 {
			return clientv3.LeaseID(id)
		}
	}
}

// grant grants lease id with ttl seconds and returns the revision of the
// store when etcd applied it.
func grant(ctx context.Context, cli *clientv3.Client, id clientv3.LeaseID, ttl int64) (int64, error) {
	resp, err := pb.NewLeaseClient(cli.ActiveConnection()).LeaseGrant(ctx, &pb.LeaseGrantRequest{TTL: ttl, ID: int64(id)})
	if err != nil {
		return 0, rpctypes.Error(err)
	}
	if resp.Error != "" {
		return 0, errors.New(resp.Error)
	}
	return resp.Header.GetRevision(), nil
}

// decodeLeader checks kv, the leader key, and returns the leader it names
// (Token = its create revision) and the queue key it stands for, or an
// error saying what is wrong with it. A token below floor, the highest
// already seen lead, fails: tokens only grow, so it is a key another
// client attached a lease to after it was created.
func (l layout) decodeLeader(kv *mvccpb.KeyValue, floor uint64) (election.Leader, string, error) {
	if kv.Lease == 0 {
		return election.Leader{}, "", errors.New("has no lease")
	}
	if kv.CreateRevision <= 0 {
		return election.Leader{}, "", fmt.Errorf("create revision %d", kv.CreateRevision)
	}
	ld, err := record.Decode(kv.Value)
	if err != nil {
		return election.Leader{}, "", fmt.Errorf("value: %w", err)
	}
	nameLease, err := l.leaderLease(string(kv.Key))
	if err != nil {
		return election.Leader{}, "", err
	}
	if nameLease != kv.Lease {
		return election.Leader{}, "", fmt.Errorf("is named for lease %016x, but holds lease %016x", uint64(nameLease), uint64(kv.Lease))
	}
	key := record.Key(kv.Value)
	lease, err := l.queueLease(key)
	if err != nil {
		return election.Leader{}, "", fmt.Errorf("the queue key it names, %q: %w", key, err)
	}
	if lease != kv.Lease {
		return election.Leader{}, "", fmt.Errorf("names queue key %s of lease %016x, but holds lease %016x", key, uint64(lease), uint64(kv.Lease))
	}
	if string(kv.Key)[len(l.leader())+16:] != key[len(l.queue())+32:] {
		return election.Leader{}, "", fmt.Errorf("names queue key %s, whose lease and nonce its name does not carry", key)
	}
	ld.Token = uint64(kv.CreateRevision)
	if ld.Token < floor {
		return election.Leader{}, "", fmt.Errorf("its token %d is below %d, which already led this election: its lease was attached after it was created", ld.Token, floor)
	}
	return ld, key, nil
}

// MalformedKeyError reports a key of the election that is not what this
// package writes there. It wraps ErrMalformedKey and election.ErrNoLeader:
// such a key never leads.
type MalformedKeyError struct {
	Key            string
	CreateRevision int64
	Lease          int64
	Reason         string
}

func (e *MalformedKeyError) Error() string {
	return fmt.Sprintf("etcd election: malformed key %q (create revision %d, lease %x): %s; no leader until it is deleted or its lease expires",
		e.Key, e.CreateRevision, e.Lease, e.Reason)
}

// Unwrap returns ErrMalformedKey and election.ErrNoLeader.
func (e *MalformedKeyError) Unwrap() []error {
	return []error{ErrMalformedKey, election.ErrNoLeader}
}

func malformed(kv *mvccpb.KeyValue, err error) *MalformedKeyError {
	return &MalformedKeyError{Key: string(kv.Key), CreateRevision: kv.CreateRevision, Lease: kv.Lease, Reason: err.Error()}
}

// Reading above a key. etcd answers a range with a limit by visiting every
// key of the range in its index, to count them (RangeResponse.Count), and a
// range Compare by reading every key of the range with its value: so a
// read of "the key just above mine" over the rest of the queue costs
// O(keys above), and N registrations O(N²). The queue is read instead in
// windows of growing width above the key, each inside a nested transaction
// that goes on to the next window only if this one is empty: the read
// costs the keys of the first non-empty window and O(log N) for each
// empty one, whatever the queue's length.

// windowBits: window i spans 2^windowBits[i] ranks above the key, the
// last window ending at the queue's end. Over arrivals (ranks below 2^36)
// each window is 16 times wider than the one before, so the first
// non-empty one holds few keys more than 16 times the gap below it (a step
// of 4,096 there read tens of thousands of keys, values and all, in a
// queue of 100,000: a profile of the member showed its Compares taking a
// third of its time); beyond, where only priorities differ, 4,096 times.
// A read walks at most 17 windows, and the arrival windows stop at the
// first that reaches past the earliest arrival of the key's priority (a
// key that arrived at revision 50,000 walks 5 of them, then the
// priorities'): transactions stay small (a claim is a write, etcd logs a
// slow request whole, and keeps its log in memory).
var windowBits = func() []int {
	var b []int
	for i := 4; i <= 36; i += 4 {
		b = append(b, i)
	}
	for i := 48; i < 128; i += 12 {
		b = append(b, i)
	}
	return b
}()

// windows returns the ends of the windows above from (past a queue key:
// past), the last being the queue's end. A key whose name does not carry
// a rank gets the one window up to the queue's end.
func (l layout) windows(from string) []string {
	return l.windowEnds(from, len(windowBits))
}

// firstWindow returns windows(from)[0], the end of the first window.
func (l layout) firstWindow(from string) string {
	return l.windowEnds(from, 1)[0]
}

// createWindow returns the end of the windows a queue key's create reads
// above from (createAboveOp): the second window's (arrivals up to 2^8
// revisions earlier), or the first's when that reaches past the last
// arrival of from's priority (the next window is then of other
// priorities). A burst of elections started at once spreads the arrivals
// of one election's candidates over tens to hundreds of revisions: the
// first window alone most often held none of them, and each such
// candidate read the queue again (look).
func (l layout) createWindow(from string) string {
	ends := l.windowEnds(from, 2)
	if len(ends) == 3 {
		return ends[1]
	}
	return ends[0]
}

// rank parses the rank a queue key (or a key past one) is named for: its
// 32 hex digits after the queue's directory, as 128 bits (hi, lo). ok is
// false for a key whose name does not carry one.
func (l layout) rank(key string) (hi, lo uint64, ok bool) {
	s, ok := strings.CutPrefix(key, l.queue())
	if !ok || len(s) < 32 {
		return 0, 0, false
	}
	hi, err1 := strconv.ParseUint(s[:16], 16, 64)
	lo, err2 := strconv.ParseUint(s[16:32], 16, 64)
	return hi, lo, err1 == nil && err2 == nil
}

// windowEnds returns the ends of the first n windows above from that end
// before the queue's end, then the queue's end.
func (l layout) windowEnds(from string, n int) []string {
	hi, lo, ok := l.rank(from)
	if !ok {
		return []string{l.queueEnd()}
	}
	var ends []string
	carried := false // an arrival window reached past the last arrival of from's priority
	for _, b := range windowBits[:n] {
		// rank + 2^b, as 128 bits (hi, lo); stop at overflow.
		h, lw := hi, lo
		if b < 64 {
			if carried {
				// The next priority's ranks up to this end are of
				// arrivals no revision reaches: nothing but garbage
				// can lie there, so the window joins the next one.
				continue
			}
			var carry uint64
			lw, carry = bits.Add64(lo, 1<<b, 0)
			h, carry = bits.Add64(hi, 0, carry)
			if carry != 0 {
				break
			}
			carried = h != hi
		} else {
			var carry uint64
			h, carry = bits.Add64(hi, 1<<(b-64), 0)
			if carry != 0 {
				break
			}
		}
		ends = append(ends, fmt.Sprintf("%s%016x%016x", l.queue(), h, lw))
	}
	return append(ends, l.queueEnd())
}

// emptyIn is a Compare that holds when no key lies in [lo, hi).
func emptyIn(lo, hi string) *pb.Compare {
	return cmpRange(cmpCreate(lo, 0), hi)
}

// nested builds the transactions that walk the windows above from: the
// window [lo, hi) is compared empty, and then the next window's
// transaction runs, or, after the last, then(); otherwise orElse(lo, hi).
func (l layout) nested(from string, then func() []*pb.RequestOp, orElse func(lo, hi string) []*pb.RequestOp) *pb.RequestOp {
	ends := l.windows(from)
	var build func(i int, lo string) *pb.RequestOp
	build = func(i int, lo string) *pb.RequestOp {
		hi := ends[i]
		var next []*pb.RequestOp
		if i+1 < len(ends) {
			next = []*pb.RequestOp{build(i+1, hi)}
		} else {
			next = then()
		}
		return opTxn([]*pb.Compare{emptyIn(lo, hi)}, next, orElse(lo, hi))
	}
	return build(0, from)
}

// firstAndRest is a transaction that runs then if nothing lies above from
// (past a queue key: past), compared in two windows: the first window
// above from, and the rest of the queue. It is the claim a queue key's
// create carries when the arrival read found no leader: there the queue
// above is short (a new election; the first arrivals of a burst, whose
// claims stop at a first window that holds the others), and the claim is
// in every such create's log entry, which etcd keeps in memory — eleven
// windows were three quarters of a burst's create, two are a fifth. A
// newcomer to a long queue whose leader's key is gone (its candidate next
// in line not yet there) reads the keys above it once, values and all.
func (l layout) firstAndRest(from string, then *pb.RequestOp) *pb.RequestOp {
	first := l.firstWindow(from)
	if first == l.queueEnd() {
		return opTxn([]*pb.Compare{emptyIn(from, first)}, []*pb.RequestOp{then}, nil)
	}
	rest := opTxn([]*pb.Compare{emptyIn(first, l.queueEnd())}, []*pb.RequestOp{then}, nil)
	return opTxn([]*pb.Compare{emptyIn(from, first)}, []*pb.RequestOp{rest}, nil)
}

// aboveOp reads up to aboveLimit keys of the first non-empty window
// above from; see readAbove.
func (l layout) aboveOp(from string, serializable bool) *pb.RequestOp {
	return l.nested(from, func() []*pb.RequestOp { return nil }, func(lo, hi string) []*pb.RequestOp {
		o := []opOption{withRange(hi), withLimit(aboveLimit)}
		if serializable {
			o = append(o, withSerializable())
		}
		return []*pb.RequestOp{opGet(lo, o...)}
	})
}

// readAbove returns what aboveOp read over n windows: up to aboveLimit keys
// (a mark among them, which the caller drops: dropMarks), the
// first of them the key just above from, and whether the window they came
// from is the last, up to the queue's end (so that one key alone heads the
// queue; no key at all: nothing is queued above from).
func readAbove(r *pb.ResponseOp, n int) (kvs []*mvccpb.KeyValue, last bool) {
	for i := 0; ; i++ {
		t := r.GetResponseTxn()
		if t == nil || len(t.Responses) == 0 {
			return nil, true
		}
		if !t.Succeeded {
			return t.Responses[0].GetResponseRange().GetKvs(), i == n-1
		}
		r = t.Responses[0]
	}
}

// walkNested follows a response of nested down to the branch that ran
// last: the responses of then() (claimed true), or of orElse for the
// window at depth.
func walkNested(r *pb.ResponseOp) (rs []*pb.ResponseOp, claimed bool, depth int) {
	for ; ; depth++ {
		t := r.GetResponseTxn()
		if t == nil {
			return nil, false, depth
		}
		if !t.Succeeded {
			return t.Responses, false, depth
		}
		if len(t.Responses) != 1 || t.Responses[0].GetResponseTxn() == nil {
			return t.Responses, true, depth
		}
		r = t.Responses[0]
	}
}

// lkeyOf names c's leadership key: the one it creates when it claims, or
// a hand-over creates for it, named for its arrival either way. It is
// made when needed: an idle waiter keeps no copy.
func (e *Elector) lkeyOf(c *candidacy) string { return e.lay.leaderKey(c.seq, c.key) }

// isLeaderKey reports whether key is leaderKey(rev, qkey), without
// making that name: a leader's guard asks it of every event it sees.
func (l layout) isLeaderKey(key string, rev int64, qkey string) bool {
	head := l.prefixLen() + len(leaderDir)
	tail := qkey[l.prefixLen()+len(queueDir)+32:]
	if len(key) != head+16+len(tail) || key[:len(l.name)] != l.name || key[len(l.name)] != '/' || key[l.prefixLen():head] != leaderDir || key[head+16:] != tail {
		return false
	}
	var hex [16]byte
	return string(appendHex(hex[:0], uint64(rev), 16)) == key[head:head+16]
}
