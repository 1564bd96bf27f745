package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/electkit/election"
	"github.com/electkit/election/backend/etcd"
	"github.com/electkit/election/internal/rig/embedetcd"
)

// store is the election's store as the nemeses see it: its members, its own
// leader, and the faults that need its API.
type store interface {
	addrs() []string                  // each member's client address, host:port
	endpoint(proxyAddr string) string // how a candidate names a proxy
	election() string                 // the election's name or path
	leader() int                      // index of the store's leader member, -1 if none
	isLeader(i int) bool              // member i is running and leads the store
	memberName(i int) string
	stopMember(i int) error
	startMember(i int) error
	// expire ends the session of a waiting candidate other than leaderID,
	// and returns its ID. ok is false where the store has no such API (zk:
	// the harness cuts the candidate off instead).
	expire(ctx context.Context, rng *rand.Rand, leaderID string) (id string, ok bool, err error)
	// garbage writes stray entries under the election prefix and returns
	// what removes them.
	garbage(ctx context.Context, rng *rand.Rand) (remove func(context.Context) error, err error)
	// operator does one thing another client of the store can do to the
	// election (see run.operator), and returns what it did and what undoes
	// it (nil: nothing to undo).
	operator(ctx context.Context, rng *rand.Rand, leaderID string, a *act) (what string, undo func(context.Context) error, err error)
	// credentials returns the user and password candidates log in with;
	// empty where the store has no authentication on.
	credentials() (user, password string)
	// transfer asks the election's leader, through the store, to hand its
	// leadership to the candidate to (election.RequestTransfer).
	transfer(ctx context.Context, to string) (election.Leader, error)
	// peers is the proxies between the store's members.
	peers() *peerNet
	// leaders names the leader of each of the elections, as an observer
	// of each sees it (Elector.Leader); an election whose leader could
	// not be read is missing, err says why.
	leaders(ctx context.Context, names []string) (map[string]sideLeader, error)
	close()
}

// The environment variables that pass a candidate process its etcd
// credentials.
const (
	EnvUser     = "ELECT_NEMESIS_ETCD_USER"
	EnvPassword = "ELECT_NEMESIS_ETCD_PASSWORD"
)

// The etcd users of a run: root (the harness's own client) and the
// candidates', whose role holds read-write on the election prefix (and the
// side election's, CandidateConfig.Session) only, so that the operator
// nemesis can revoke and grant it again.
const (
	rootPassword      = "nemesis-root"
	candidateUser     = "candidate"
	candidatePassword = "nemesis-candidate"
	candidateRole     = candidateUser + "-role"
)

const etcdElection = "/nemesis/election"

type etcdStore struct {
	c    *embedetcd.Cluster
	cli  *clientv3.Client
	pn   *peerNet
	auth bool // candidates log in; only for the operator fault, which revokes their permission
}

// startEtcd starts the cluster; with auth, candidates log in as a user
// whose role holds the election's prefix (what the operator fault revokes).
func startEtcd(dir string, auth bool) (*etcdStore, error) {
	pn := newPeerNet()
	var (
		mu  sync.Mutex
		ids map[string]int // a member's ID in hex: its index; set once all run
	)
	from := etcdFrom(func(hex string) int {
		mu.Lock()
		defer mu.Unlock()
		if i, ok := ids[hex]; ok {
			return i
		}
		return -1
	})
	c, err := embedetcd.StartCluster(3, embedetcd.Config{Dir: dir, TickMs: 50, ElectionMs: 500, ReadyTimeout: time.Minute, BcryptCost: 4,
		PeerFront: func(i int, listen string) (string, error) { return pn.listen(i, listen, from) }})
	if err != nil {
		pn.close()
		return nil, fmt.Errorf("etcd cluster: %w", err)
	}
	mu.Lock()
	ids = map[string]int{}
	for i, m := range c.Members() {
		ids[hexID(m.ID())] = i
	}
	mu.Unlock()
	cfg := clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 5 * time.Second,
		DialKeepAliveTime: time.Second, DialKeepAliveTimeout: time.Second, Logger: zap.NewNop()}
	setup, err := clientv3.New(cfg)
	if err != nil {
		c.Close()
		pn.close()
		return nil, err
	}
	if !auth {
		return &etcdStore{c: c, cli: setup, pn: pn}, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = embedetcd.AddUser(ctx, setup, candidateUser, candidatePassword, etcdElection+"/")
	// The side elections of the candidates on a Session
	// (CandidateConfig.Session, CandidateConfig.Shards).
	for _, side := range []string{etcdElection + SideSuffix + "/", etcdElection + ShardSuffix + "/"} {
		if err == nil {
			_, err = setup.RoleGrantPermission(ctx, candidateRole, side, clientv3.GetPrefixRangeEnd(side), clientv3.PermissionType(clientv3.PermReadWrite))
		}
	}
	if err == nil {
		err = embedetcd.EnableAuth(ctx, setup, rootPassword)
	}
	setup.Close()
	if err != nil {
		c.Close()
		pn.close()
		return nil, fmt.Errorf("etcd auth: %w", err)
	}
	cfg.Username, cfg.Password = "root", rootPassword
	cli, err := clientv3.New(cfg)
	if err != nil {
		c.Close()
		pn.close()
		return nil, err
	}
	return &etcdStore{c: c, cli: cli, pn: pn, auth: true}, nil
}

func (s *etcdStore) credentials() (string, string) {
	if !s.auth {
		return "", ""
	}
	return candidateUser, candidatePassword
}

func (s *etcdStore) addrs() []string {
	var out []string
	for _, ep := range s.c.Endpoints() {
		out = append(out, strings.TrimPrefix(ep, "http://"))
	}
	return out
}

func (s *etcdStore) endpoint(a string) string { return "http://" + a }
func (s *etcdStore) election() string         { return etcdElection }
func (s *etcdStore) leader() int              { return s.c.Leader() }
func (s *etcdStore) isLeader(i int) bool      { return s.c.Members()[i].IsLeader() }
func (s *etcdStore) memberName(i int) string  { return s.c.Members()[i].Name }
func (s *etcdStore) stopMember(i int) error   { s.c.Members()[i].Stop(); return nil }
func (s *etcdStore) startMember(i int) error  { return s.c.Members()[i].Restart() }

func (s *etcdStore) peers() *peerNet { return s.pn }

func (s *etcdStore) close() {
	s.cli.Close()
	s.c.Close()
	s.pn.close()
}

// expire revokes the lease of a queued candidate that does not lead.
func (s *etcdStore) expire(ctx context.Context, rng *rand.Rand, leaderID string) (string, bool, error) {
	resp, err := s.cli.Get(ctx, etcdElection+"/_c/", clientv3.WithPrefix())
	if err != nil {
		return "", true, err
	}
	kvs := resp.Kvs
	sort.Slice(kvs, func(i, j int) bool { return kvs[i].CreateRevision < kvs[j].CreateRevision })
	type waiter struct {
		id    string
		lease clientv3.LeaseID
	}
	var ws []waiter
	for _, kv := range kvs {
		var rec struct {
			ID string `json:"id"`
		}
		if kv.Lease == 0 || strings.HasSuffix(string(kv.Key), "/h") || json.Unmarshal(kv.Value, &rec) != nil || rec.ID == "" || rec.ID == leaderID {
			// (a key ending in /h is a hand-over's mark, the leader's)
			continue
		}
		ws = append(ws, waiter{rec.ID, clientv3.LeaseID(kv.Lease)})
	}
	if len(ws) == 0 {
		return "", true, fmt.Errorf("no waiting candidate's key under %s/", etcdElection)
	}
	w := ws[rng.Intn(len(ws))]
	if _, err := s.cli.Revoke(ctx, w.lease); err != nil {
		return w.id, true, fmt.Errorf("revoking the lease of %s: %w", w.id, err)
	}
	return w.id, true, nil
}

// garbage puts keys that are no candidate's in the election's queue: one
// without a lease at its head, one with a lease at its tail whose value
// is not a record.
func (s *etcdStore) garbage(ctx context.Context, rng *rand.Rand) (func(context.Context) error, error) {
	lease, err := s.cli.Grant(ctx, 30)
	if err != nil {
		return nil, err
	}
	k1 := fmt.Sprintf("%s/_c/ffffffffffffffffffffffffffffffff-garbage-%d", etcdElection, rng.Int63())
	k2 := fmt.Sprintf("%s/_c/%032x-%016x-%08x", etcdElection, 0, int64(lease.ID), rng.Uint32())
	if _, err := s.cli.Put(ctx, k1, "not a record"); err != nil {
		return nil, err
	}
	if _, err := s.cli.Put(ctx, k2, `{"v":7}`, clientv3.WithLease(lease.ID)); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		_, err := s.cli.Delete(ctx, k1)
		if _, rerr := s.cli.Revoke(ctx, lease.ID); err == nil {
			err = rerr
		}
		return err
	}, nil
}

func (s *etcdStore) transfer(ctx context.Context, to string) (election.Leader, error) {
	e, err := etcd.New(s.cli, s.election(), election.WithID("nemesis-operator"))
	if err != nil {
		return election.Leader{}, err
	}
	defer e.Close()
	return election.RequestTransfer(ctx, e, to)
}

func (s *etcdStore) leaders(ctx context.Context, names []string) (map[string]sideLeader, error) {
	out := map[string]sideLeader{}
	for _, name := range names {
		e, err := etcd.New(s.cli, name, election.WithID("nemesis-observer"))
		if err != nil {
			return out, err
		}
		l, err := e.Leader(ctx)
		e.Close()
		if ctx.Err() != nil {
			return out, ctx.Err()
		}
		out[name] = sideLeader{id: l.ID, err: err}
	}
	return out, nil
}
