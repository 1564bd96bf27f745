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

// Key layout. A candidate's key is the election's prefix followed by its
// lease ID as 16 lower-case hex digits; its value is a small JSON record
// with a format version:
//
//	/services/scheduler/694d8a5bd1f3c40b  {"v":1,"id":"sched-1","priority":0,"value":"MTAuMC4wLjc6ODA4MA=="}
//
// A key is well formed when its name is the prefix plus 16 hex digits that
// equal the key's own lease, the lease is not 0, and the value decodes to a
// version-1 record with a valid ID and a Value within
// election.MaxValueSize. Every key under the prefix is checked whenever it
// is read; see the package doc for what happens to keys that fail.

// newLeaseID draws the ID of a candidacy's lease. The client chooses it
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

// grant grants lease id with the Elector's TTL.
func (e *Elector) grant(ctx context.Context, id clientv3.LeaseID) error {
	resp, err := pb.NewLeaseClient(e.cli.ActiveConnection()).LeaseGrant(ctx, &pb.LeaseGrantRequest{TTL: e.ttlSec, ID: int64(id)})
	if err != nil {
		return rpctypes.Error(err)
	}
	if resp.Error != "" {
		return errors.New(resp.Error)
	}
	return nil
}

// nested reports whether key, under prefix, belongs to an election named
// under this one ("/svc/a" under "/svc"): its name has another "/" after
// the prefix. Candidate keys never do, so each election reads past the
// keys of the elections nested in it, and none blocks another.
func nested(prefix string, key []byte) bool {
	return strings.Contains(string(key[min(len(prefix), len(key)):]), "/")
}

func keyName(prefix string, lease clientv3.LeaseID) string {
	return fmt.Sprintf("%s%016x", prefix, uint64(lease))
}

func encodeRecord(o election.Options, value []byte) string { return string(record.Encode(o, value)) }

// decodeKey checks kv against the key layout and returns the leader it
// names (Token = the key's create revision), or an error saying what is
// wrong with it.
func decodeKey(prefix string, kv *mvccpb.KeyValue) (election.Leader, error) {
	name := string(kv.Key)
	suffix, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return election.Leader{}, fmt.Errorf("not under the prefix %q", prefix)
	}
	if kv.Lease == 0 {
		return election.Leader{}, fmt.Errorf("has no lease")
	}
	if len(suffix) != 16 {
		return election.Leader{}, fmt.Errorf("name does not end in a 16-digit hex lease ID")
	}
	id, err := strconv.ParseUint(suffix, 16, 64)
	if err != nil || suffix != strings.ToLower(suffix) {
		return election.Leader{}, fmt.Errorf("name does not end in a 16-digit hex lease ID")
	}
	if int64(id) != kv.Lease {
		return election.Leader{}, fmt.Errorf("name's lease %016x differs from its lease %016x", id, uint64(kv.Lease))
	}
	if kv.CreateRevision <= 0 {
		return election.Leader{}, fmt.Errorf("create revision %d", kv.CreateRevision)
	}
	l, err := record.Decode(kv.Value)
	if err != nil {
		return election.Leader{}, fmt.Errorf("value: %w", err)
	}
	l.Token = uint64(kv.CreateRevision)
	return l, nil
}

// MalformedKeyError reports a key under the election's prefix that is not a
// candidate key of this package. It wraps ErrMalformedKey and
// election.ErrNoLeader: such a key never leads.
type MalformedKeyError struct {
	Key            string
	CreateRevision int64
	Lease          int64
	Reason         string
}

func (e *MalformedKeyError) Error() string {
	return fmt.Sprintf("etcd election: malformed key %q (create revision %d, lease %x) heads the queue: %s; no leader until it is deleted or its lease expires",
		e.Key, e.CreateRevision, e.Lease, e.Reason)
}

// Unwrap returns ErrMalformedKey and election.ErrNoLeader.
func (e *MalformedKeyError) Unwrap() []error {
	return []error{ErrMalformedKey, election.ErrNoLeader}
}

func malformed(kv *mvccpb.KeyValue, err error) *MalformedKeyError {
	return &MalformedKeyError{Key: string(kv.Key), CreateRevision: kv.CreateRevision, Lease: kv.Lease, Reason: err.Error()}
}

// head picks the leader among kvs (any order): the live key with the lowest
// create revision. Keys without a lease can never expire, so they are
// skipped (reported in skipped); a leased key that is malformed holds its
// place and yields a *MalformedKeyError instead of a leader. So do two
// leased keys that share the lowest create revision: Campaign creates one
// key per transaction, so they were written together by someone else, and
// picking one by name (or by map order) would let observers disagree, or
// show two leaders with one token. Keys of elections nested under this
// one's name are ignored. A key whose token is below floor — the highest
// token already seen lead this election — fails too: tokens only grow, so
// it is a key whose lease was attached after it was created (a plain key
// put under a lease later keeps its old create revision), and letting it
// lead would run the tokens backwards.
func head(prefix string, kvs []*mvccpb.KeyValue, floor uint64) (l election.Leader, bad *MalformedKeyError, skipped []*MalformedKeyError) {
	var first, twin *mvccpb.KeyValue // twin: another leased key with first's create revision
	for _, kv := range kvs {
		if nested(prefix, kv.Key) {
			continue
		}
		if kv.Lease == 0 {
			_, err := decodeKey(prefix, kv)
			skipped = append(skipped, malformed(kv, err))
			continue
		}
		switch {
		case first == nil || kv.CreateRevision < first.CreateRevision:
			first, twin = kv, nil
		case kv.CreateRevision == first.CreateRevision:
			if string(kv.Key) < string(first.Key) {
				first, kv = kv, first
			}
			if twin == nil || string(kv.Key) < string(twin.Key) {
				twin = kv
			}
		}
	}
	if first == nil {
		return election.Leader{}, nil, skipped
	}
	if twin != nil {
		return election.Leader{}, malformed(first, fmt.Errorf("shares its create revision %d with key %q: candidate keys are created one per transaction, so neither leads", first.CreateRevision, twin.Key)), skipped
	}
	l, err := decodeKey(prefix, first)
	if err == nil && l.Token < floor {
		err = fmt.Errorf("its token %d is below %d, which already led this election: its lease was attached after it was created", l.Token, floor)
	}
	if err != nil {
		return election.Leader{}, malformed(first, err), skipped
	}
	return l, nil, skipped
}
