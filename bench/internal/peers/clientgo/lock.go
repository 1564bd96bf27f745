package clientgo

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	rl "k8s.io/client-go/tools/leaderelection/resourcelock"
)

// leases is the resource the lock's errors name, so that client-go's
// apierrors.IsNotFound and IsConflict recognise them as a Lease's.
var leases = schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}

// etcdLock is a resourcelock.Interface on one etcd key: the analogue of
// client-go's LeaseLock, with the key's mod revision in the role of the
// Lease's resourceVersion. Get reads the record; Create writes it only if
// the key does not exist; Update writes it only if the key's mod revision is
// still the one this lock last read or wrote, and reports a Conflict
// otherwise — the optimistic concurrency an API server gives a Lease.
//
// Each call is bounded by timeout, as the REST client of
// resourcelock.NewFromKubeconfig is (RenewDeadline/2, at least 1 s).
type etcdLock struct {
	cli      *clientv3.Client
	key      string
	identity string
	timeout  time.Duration

	mu     sync.Mutex
	modRev int64 // of the record last read or written; 0 = none yet

	// seen, when set (by tests, before the first Campaign), is called with
	// the holder of every record Get reads.
	seen func(holder string)
}

// record is the stored form of a LeaderElectionRecord. Its times keep
// nanoseconds (a Lease's renewTime is a MicroTime): a renewal always changes
// the bytes, which is how client-go tells that the holder is alive.
type record struct {
	HolderIdentity       string    `json:"holderIdentity"`
	LeaseDurationSeconds int       `json:"leaseDurationSeconds"`
	AcquireTime          time.Time `json:"acquireTime"`
	RenewTime            time.Time `json:"renewTime"`
	LeaderTransitions    int       `json:"leaderTransitions"`
}

func toRecord(ler rl.LeaderElectionRecord) record {
	return record{
		HolderIdentity:       ler.HolderIdentity,
		LeaseDurationSeconds: ler.LeaseDurationSeconds,
		AcquireTime:          ler.AcquireTime.Time,
		RenewTime:            ler.RenewTime.Time,
		LeaderTransitions:    ler.LeaderTransitions,
	}
}

func (r record) ler() *rl.LeaderElectionRecord {
	return &rl.LeaderElectionRecord{
		HolderIdentity:       r.HolderIdentity,
		LeaseDurationSeconds: r.LeaseDurationSeconds,
		AcquireTime:          metav1.NewTime(r.AcquireTime),
		RenewTime:            metav1.NewTime(r.RenewTime),
		LeaderTransitions:    r.LeaderTransitions,
	}
}

// Get returns the record and its stored bytes, or a NotFound error.
func (l *etcdLock) Get(ctx context.Context) (*rl.LeaderElectionRecord, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	resp, err := l.cli.Get(ctx, l.key)
	if err != nil {
		return nil, nil, err
	}
	if len(resp.Kvs) == 0 {
		return nil, nil, apierrors.NewNotFound(leases, l.key)
	}
	kv := resp.Kvs[0]
	var r record
	if err := json.Unmarshal(kv.Value, &r); err != nil {
		return nil, nil, fmt.Errorf("clientgo: record at %q: %w", l.key, err)
	}
	l.setModRev(kv.ModRevision)
	if l.seen != nil {
		l.seen(r.HolderIdentity)
	}
	return r.ler(), kv.Value, nil
}

// Create writes the record if the key does not exist.
func (l *etcdLock) Create(ctx context.Context, ler rl.LeaderElectionRecord) error {
	val, err := json.Marshal(toRecord(ler))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	resp, err := l.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(l.key), "=", 0)).
		Then(clientv3.OpPut(l.key, string(val))).
		Commit()
	if err != nil {
		return err
	}
	if !resp.Succeeded {
		return apierrors.NewAlreadyExists(leases, l.key)
	}
	l.setModRev(resp.Header.Revision)
	return nil
}

// Update writes the record if nobody wrote it since this lock last read or
// wrote it.
func (l *etcdLock) Update(ctx context.Context, ler rl.LeaderElectionRecord) error {
	rev := l.getModRev()
	if rev == 0 {
		return fmt.Errorf("clientgo: record at %q not read yet, call Get or Create first", l.key)
	}
	val, err := json.Marshal(toRecord(ler))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	resp, err := l.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(l.key), "=", rev)).
		Then(clientv3.OpPut(l.key, string(val))).
		Commit()
	if err != nil {
		return err
	}
	if !resp.Succeeded {
		return apierrors.NewConflict(leases, l.key, fmt.Errorf("mod revision is no longer %d", rev))
	}
	l.setModRev(resp.Header.Revision)
	return nil
}

// RecordEvent does nothing: there is no event sink.
func (l *etcdLock) RecordEvent(string) {}

// Identity is the candidate's ID.
func (l *etcdLock) Identity() string { return l.identity }

// Describe names the key.
func (l *etcdLock) Describe() string { return "etcd key " + l.key }

func (l *etcdLock) setModRev(rev int64) {
	l.mu.Lock()
	l.modRev = rev
	l.mu.Unlock()
}

func (l *etcdLock) getModRev() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.modRev
}

var _ rl.Interface = (*etcdLock)(nil)
