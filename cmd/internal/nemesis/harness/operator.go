package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"time"

	gozk "github.com/go-zookeeper/zk"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/electkit/election/cmd/internal/nemesis"
	"github.com/electkit/election/internal/mono"
	"github.com/electkit/election/internal/rig/zktest"
)

// operator: another client of the store does, through the store's normal
// API, what an operator with etcdctl or zkCli can do to the election — the
// action picked by the run's target draws — and undoes it after a while
// where it leaves something behind. The P3 and linearizability checks
// judge what the candidates made of it.
//
// It acts only while a live candidate leads: removing the key of a leader
// whose process was killed is an operator's fast failover, safe because
// that process can no longer act, but the checkers count a killed
// leader's Term valid until its deadline, as they must not know it is
// dead; a paused leader's key removed is the case fencing is for.
func (r *run) operator(ctx context.Context) error {
	// The undo's delay is drawn first, whatever the action and whether
	// one is done: the schedule's draws must not depend on the run.
	d := r.betweenIn(ctx, r.cfg.TTL/2, 2*r.cfg.TTL)
	ev, err := r.awaitLeader(ctx, "", FailoverBound(r.cfg.TTL))
	if err != nil {
		return fmt.Errorf("no live leader: %w", err)
	}
	leader := ev.Candidate
	// Under Config.Rate, no other fault may cut the leader off or pause
	// it while the operator acts, or have done so when it begins: a leader
	// that cannot see its key go keeps a valid Term until its deadline, an
	// overlap no lease can prevent (fencing is for it), not the store
	// event both learn of together that the P3 check's grace is for. Nor
	// may a store fault run: a candidate whose store member is cut off or
	// stopped sees the store's events only once it has moved to another.
	// And neither may have ended less than a TTL ago: a member that
	// rejoins after a partition, or a leader whose connections come back
	// after a cut, delivers a watch event only once it has caught up (a
	// run that let the operator delete the leader's key 25 µs after a
	// partition healed had the old leader hear of it 280 ms later, past
	// its successor's start).
	settle := r.cfg.TTL
	if err := sleep(ctx, r.unsettled(leader, settle)); err != nil {
		return err
	}
	if err := r.holdStore(settle); err != nil {
		return err
	}
	defer r.releaseStoreSettled() // the operator's own actions need no settling
	p, err := r.hold(leader, settle)
	if err != nil {
		return err
	}
	if p != nil {
		defer r.releaseSettled(p)
	}
	// The leader may have been killed, or have lost its leadership, while
	// the operator waited for it to settle: a killed leader's key is a
	// dead process's, whose Term stays valid until its deadline (no one
	// is left to hear of the key's going), and a new leader has not
	// settled. (A seed-25 run let the operator put the key of a leader
	// killed 894 ms before again without its lease; its successor led
	// 465 ms before the dead leader's deadline.)
	if ev, ok := r.reg.Leader(); !ok || ev.Candidate != leader || r.wasKilled(leader) {
		return errBusy
	}
	a := &act{}
	octx, cancel := context.WithTimeout(ctx, 5*time.Second)
	what, undo, err := r.st.operator(octx, r.pickOf(ctx), leader, a)
	cancel()
	start := a.sent
	if start == 0 {
		start = mono.Now() // no request changed the election
	}
	if err != nil {
		if undo != nil {
			uctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			err = errors.Join(err, undo(uctx))
			cancel()
		}
		return fmt.Errorf("%s: %w", what, err)
	}
	if undo == nil {
		d = 0
	} else {
		_ = sleep(ctx, d)
		uctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = undo(uctx)
		cancel()
	}
	r.fault(nemesis.Fault{Kind: Operator, Target: what, Start: start, End: mono.Now(), Acked: a.acked})
	r.logf("operator: %s (leader %q; undone after %v, err %v)", what, leader, d.Round(time.Millisecond), err)
	return nil
}

// act times an operator's request that changes the election: the fault
// begins when it is sent (the reads that find what to change come before,
// and the connection an operator opens), and the store has done it by its
// reply. The P3 check's grace counts from these instants.
type act struct {
	sent, acked int64 // Mono; 0 until do runs
}

// do sends one request that changes the election. Called again (a retry
// on a conflict, which changed nothing), it times the last request.
func (a *act) do(f func() error) error {
	a.sent = mono.Now()
	err := f()
	a.acked = mono.Now()
	return err
}

// etcd's operator actions.
func (s *etcdStore) operator(ctx context.Context, rng *rand.Rand, leaderID string, a *act) (string, func(context.Context) error, error) {
	action := rng.Intn(5)
	if action == 2 || leaderID == "" {
		err := a.do(func() error { _, err := s.cli.Delete(ctx, etcdElection+"/", clientv3.WithPrefix()); return err })
		return "delete the prefix " + etcdElection + "/", nil, err
	}
	if action == 4 {
		// Revoke the candidates' permission on the election's keys, and
		// grant it again.
		undo := func(ctx context.Context) error {
			_, err := s.cli.RoleGrantPermission(ctx, candidateRole, etcdElection+"/",
				clientv3.GetPrefixRangeEnd(etcdElection+"/"), clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		}
		err := a.do(func() error {
			_, err := s.cli.RoleRevokePermission(ctx, candidateRole, etcdElection+"/", clientv3.GetPrefixRangeEnd(etcdElection+"/"))
			return err
		})
		return "revoke the candidates' permission on " + etcdElection + "/", undo, err
	}
	key, queued, lease, value, err := s.keyOf(ctx, leaderID)
	if err != nil {
		return "find the leader's key", nil, err
	}
	switch action {
	case 0:
		if rng.Intn(2) == 0 {
			err := a.do(func() error { _, err := s.cli.Delete(ctx, queued); return err })
			return "delete the leader's queue key " + queued, nil, err
		}
		err := a.do(func() error { _, err := s.cli.Delete(ctx, key); return err })
		return "delete the leader key " + key, nil, err
	case 1:
		err := a.do(func() error { _, err := s.cli.Revoke(ctx, lease); return err })
		return fmt.Sprintf("revoke the leader's lease %016x", int64(lease)), nil, err
	default:
		// Put again without a lease: the key never expires; the undo
		// deletes it if it still has no lease.
		undo := func(ctx context.Context) error {
			_, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.LeaseValue(key), "=", 0)).
				Then(clientv3.OpDelete(key)).Commit()
			return err
		}
		err := a.do(func() error { _, err := s.cli.Put(ctx, key, string(value)); return err })
		return "put the leader's key " + key + " again without its lease", undo, err
	}
}

// keyOf returns the election's leader key if its record names id, the
// queue key it names, their lease and the leader key's value.
func (s *etcdStore) keyOf(ctx context.Context, id string) (key, queued string, lease clientv3.LeaseID, value []byte, err error) {
	resp, err := s.cli.Get(ctx, etcdElection+"/_l/", clientv3.WithPrefix(), clientv3.WithLimit(1))
	if err != nil {
		return "", "", 0, nil, err
	}
	for _, kv := range resp.Kvs {
		key = string(kv.Key)
		var rec struct {
			ID  string `json:"id"`
			Key string `json:"key"`
		}
		if kv.Lease != 0 && json.Unmarshal(kv.Value, &rec) == nil && rec.ID == id {
			return key, rec.Key, clientv3.LeaseID(kv.Lease), kv.Value, nil
		}
	}
	return "", "", 0, nil, fmt.Errorf("the leader key under %s/_l/ is not %s's", etcdElection, id)
}

// ZooKeeper's operator actions.
func (s *zkStore) operator(ctx context.Context, rng *rand.Rand, leaderID string, a *act) (string, func(context.Context) error, error) {
	conn, err := zktest.Connect(s.e.Addrs(), 4*time.Second)
	if err != nil {
		return "connect", nil, err
	}
	action := rng.Intn(4)
	if action == 0 && leaderID == "" {
		action = 1
	}
	switch action {
	case 0:
		node, err := s.nodeOf(conn, leaderID)
		if err == nil {
			err = a.do(func() error { return conn.Delete(node, -1) })
		}
		conn.Close()
		return "delete the leader's node " + node, nil, err
	case 1:
		err := a.do(func() error { return deleteAll(conn, zkElection) })
		conn.Close()
		return "delete the election path " + zkElection + " and its children", nil, err
	case 2:
		// A persistent node named like a candidate's, with sequence 0: it
		// heads the order and never goes on its own.
		name := fmt.Sprintf("%s/_c_%032x-cand-0000000000", zkElection, rng.Uint64())
		err := a.do(func() error {
			_, err := conn.Create(name, []byte(`{"v":1,"id":"operator"}`), 0, gozk.WorldACL(gozk.PermAll))
			return err
		})
		undo := func(ctx context.Context) error {
			defer conn.Close()
			if err := conn.Delete(name, -1); err != nil && !errors.Is(err, gozk.ErrNoNode) {
				return err
			}
			return nil
		}
		return "create a persistent node like a leader's, " + name, undo, err
	default:
		// Only read on the election path for everyone but the operator
		// (a digest identity of its own, so that it can restore the ACL):
		// no candidate can create or delete a node until the undo.
		if err := conn.AddAuth("digest", []byte(operatorUser+":"+operatorPassword)); err != nil {
			conn.Close()
			return "authenticate as " + operatorUser, nil, err
		}
		acl := append(gozk.WorldACL(gozk.PermRead), gozk.DigestACL(gozk.PermAll, operatorUser, operatorPassword)...)
		// The undo also runs when SetACL fails: the request may have
		// been applied with its reply lost.
		undo := func(ctx context.Context) error {
			defer conn.Close()
			_, err := conn.SetACL(zkElection, gozk.WorldACL(gozk.PermAll), -1)
			if errors.Is(err, gozk.ErrNoNode) {
				return nil
			}
			return err
		}
		err := a.do(func() error { _, err := conn.SetACL(zkElection, acl, -1); return err })
		return "make " + zkElection + " read-only (setAcl)", undo, err
	}
}

// The digest identity of the ZooKeeper operator nemesis.
const (
	operatorUser     = "operator"
	operatorPassword = "nemesis-operator"
)

// nodeOf returns the child of the election path whose record names id.
func (s *zkStore) nodeOf(conn *gozk.Conn, id string) (string, error) {
	names, _, err := conn.Children(zkElection)
	if err != nil {
		return "", err
	}
	for _, n := range names {
		if !strings.HasPrefix(n, "_c_") || strings.HasSuffix(n, "-lead") {
			continue // not a candidate node
		}
		data, _, err := conn.Get(zkElection + "/" + n)
		if err != nil {
			continue
		}
		var rec struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(data, &rec) == nil && rec.ID == id {
			return zkElection + "/" + n, nil
		}
	}
	return "", fmt.Errorf("no node of %s under %s", id, zkElection)
}

// deleteAll deletes path and everything under it, as zkCli's deleteall.
func deleteAll(conn *gozk.Conn, path string) error {
	names, _, err := conn.Children(path)
	if errors.Is(err, gozk.ErrNoNode) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, n := range names {
		if err := deleteAll(conn, path+"/"+n); err != nil {
			return err
		}
	}
	if err := conn.Delete(path, -1); err != nil && !errors.Is(err, gozk.ErrNoNode) && !errors.Is(err, gozk.ErrNotEmpty) {
		return err
	}
	return nil
}
