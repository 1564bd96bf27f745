package etcd

import (
	"context"
	"errors"
	"fmt"
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
//	N/_l                                          {"v":1,"id":"sched-1","priority":0,"value":"…","key":"N/_c/…"}
//	N/_c/<priority><arrival>-<lease>-<nonce>      {"v":1,"id":"sched-1","priority":0,"value":"…"}
//
// N/_l is the leader key. It is created only if absent, by the candidate
// at the head of the queue, in a transaction that also checks that the
// candidate's queue key exists under its lease and that nothing is queued
// above it; its create revision is the token. Leadership is exactly that
// key: Leader and Observe read it alone.
//
// N/_c/… is the queue. A queue key's name sorts so that the candidate
// ahead sorts after: <priority> is the priority with its sign bit flipped
// (16 hex digits: higher priority, larger), <arrival> the bitwise
// complement of the store's revision read just before the key was written
// (16 hex digits: earlier, larger), then the session's lease and a nonce
// of the session (16 and 8 hex digits) that keep several candidacies on
// one lease apart. So "the candidate just ahead of mine" is the smallest
// key above mine, and "anyone ahead" the same read coming back empty: both
// are key-ascending ranges with a limit, which etcd answers in O(log N)
// (any other sort order, or a revision filter, makes etcd read the whole
// range). The queue decides only who tries N/_l next; N/_l alone carries
// safety and the token.
//
// Segments of election names that begin with "_" are reserved for these
// keys (New refuses them), so that no election's keys fall into another's.

// leaderName, queueDir: the suffixes of the leader key and the queue.
const (
	leaderName = "_l"
	queueDir   = "_c/"
)

// queueKeyLen is the length of a queue key's name after the queue's
// directory: 32 hex digits of rank, "-", 16 of lease, "-", 8 of nonce.
const queueKeyLen = 32 + 1 + 16 + 1 + 8

// layout holds the keys of one election.
type layout struct {
	prefix   string // N + "/"
	leader   string // N/_l
	queue    string // N/_c/
	queueEnd string // the end of the queue's range: N/_c0
}

func newLayout(name string) layout {
	p := name + "/"
	return layout{prefix: p, leader: p + leaderName, queue: p + queueDir, queueEnd: p + queueDir[:len(queueDir)-1] + "0"}
}

// queueKey names a candidacy's queue key.
func (l layout) queueKey(priority, seq int64, lease clientv3.LeaseID, nonce uint32) string {
	return fmt.Sprintf("%s%016x%016x-%016x-%08x", l.queue, uint64(priority)^(1<<63), ^uint64(seq), uint64(lease), nonce)
}

// queueLease returns the lease a queue key's name carries, or an error
// saying why key is not a queue key of this layout.
func (l layout) queueLease(key string) (int64, error) {
	s, ok := strings.CutPrefix(key, l.queue)
	if !ok || len(s) != queueKeyLen || s[32] != '-' || s[49] != '-' {
		return 0, fmt.Errorf("name is not %s<32 hex>-<16 hex lease>-<8 hex nonce>", l.queue)
	}
	for _, part := range []string{s[:16], s[16:32], s[33:49], s[50:]} {
		if _, err := strconv.ParseUint(part, 16, 64); err != nil || part != strings.ToLower(part) {
			return 0, fmt.Errorf("name is not %s<32 hex>-<16 hex lease>-<8 hex nonce>", l.queue)
		}
	}
	id, _ := strconv.ParseUint(s[33:49], 16, 64)
	return int64(id), nil
}

// after returns the first key after key.
func after(key string) string { return key + "\x00" }

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
	key := record.Key(kv.Value)
	lease, err := l.queueLease(key)
	if err != nil {
		return election.Leader{}, "", fmt.Errorf("the queue key it names, %q: %w", key, err)
	}
	if lease != kv.Lease {
		return election.Leader{}, "", fmt.Errorf("names queue key %s of lease %016x, but holds lease %016x", key, uint64(lease), uint64(kv.Lease))
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
