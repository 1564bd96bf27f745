package harness

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"sync"
	"time"

	gozk "github.com/go-zookeeper/zk"

	"github.com/electkit/election"
	"github.com/electkit/election/backend/zk"
	"github.com/electkit/election/internal/rig/zktest"
)

const zkElection = "/nemesis-election"

type zkStore struct {
	e  *zktest.Ensemble
	pn *peerNet
}

// startZK starts a 3-server ensemble whose servers reach each other's
// quorum and election ports through proxies of the harness, one per pair
// of servers and port.
func startZK(dir string) (*zkStore, error) {
	pn := newPeerNet()
	var mu sync.Mutex
	election := map[[2]int]string{} // from, to: the proxy of from's connections to to's election port
	e, err := zktest.StartEnsembleWith(dir, 3, zktest.EnsembleConfig{Peer: func(from, to int, port, addr string) (string, error) {
		if port == zktest.QuorumPort {
			return pn.listen(to, addr, fixed(from))
		}
		a, err := pn.listen(to, addr, zkElectionPrelude(from, func() string {
			mu.Lock()
			defer mu.Unlock()
			return election[[2]int{to, from}]
		}))
		mu.Lock()
		election[[2]int{from, to}] = a
		mu.Unlock()
		return a, err
	}})
	if err != nil {
		pn.close()
		return nil, fmt.Errorf("ZooKeeper ensemble: %w", err)
	}
	return &zkStore{e: e, pn: pn}, nil
}

func (s *zkStore) peers() *peerNet { return s.pn }

func (s *zkStore) addrs() []string               { return s.e.Addrs() }
func (s *zkStore) endpoint(a string) string      { return a }
func (s *zkStore) election() string              { return zkElection }
func (s *zkStore) memberName(i int) string       { return fmt.Sprintf("zk%d", s.e.Servers[i].ID) }
func (s *zkStore) close()                        { s.e.Stop(); s.pn.close() }
func (s *zkStore) credentials() (string, string) { return "", "" }

func (s *zkStore) leader() int {
	for i := range s.e.Servers {
		if s.isLeader(i) {
			return i
		}
	}
	return -1
}

func (s *zkStore) isLeader(i int) bool {
	m, err := s.e.Servers[i].Mode()
	return err == nil && m == "leader"
}

func (s *zkStore) stopMember(i int) error { s.e.Servers[i].Kill(); return nil }

func (s *zkStore) startMember(i int) error {
	srv := s.e.Servers[i]
	if err := srv.Start(); err != nil {
		return err
	}
	return srv.WaitServing(zktest.StartTimeout)
}

// expire: ZooKeeper has no API to end another client's session; the
// harness cuts the candidate off past its session timeout instead.
func (s *zkStore) expire(context.Context, *rand.Rand, string) (string, bool, error) {
	return "", false, nil
}

// garbage creates children that are no candidate's: a persistent one with
// a foreign name, a persistent one whose name ends in a sequence number,
// and an ephemeral sequential one whose data is not a record.
func (s *zkStore) garbage(ctx context.Context, rng *rand.Rand) (func(context.Context) error, error) {
	conn, err := zktest.Connect(s.e.Addrs(), 4*time.Second)
	if err != nil {
		return nil, err
	}
	var made []string
	create := func(name string, data []byte, flags int32) error {
		p, err := conn.Create(zkElection+"/"+name, data, flags, gozk.WorldACL(gozk.PermAll))
		if errors.Is(err, gozk.ErrNoNode) {
			_, _ = conn.Create(zkElection, nil, 0, gozk.WorldACL(gozk.PermAll))
			p, err = conn.Create(zkElection+"/"+name, data, flags, gozk.WorldACL(gozk.PermAll))
		}
		if err == nil {
			made = append(made, p)
		}
		return err
	}
	n := rng.Int31()
	err = errors.Join(
		create(fmt.Sprintf("garbage-%d", n), []byte("not a record"), 0),
		create(fmt.Sprintf("stray-%010d", n), []byte(`{"v":1,"id":"stray"}`), 0),
		create("junk-", []byte{0xff, 0x00}, gozk.FlagEphemeral|gozk.FlagSequence),
	)
	remove := func(context.Context) error {
		var err error
		for _, p := range made {
			if derr := conn.Delete(p, -1); derr != nil && !errors.Is(derr, gozk.ErrNoNode) {
				err = errors.Join(err, derr)
			}
		}
		conn.Close()
		return err
	}
	if err != nil {
		return remove, err
	}
	return remove, nil
}

func (s *zkStore) transfer(ctx context.Context, to string) (election.Leader, error) {
	e, err := zk.Dial(ctx, zk.DialConfig{Servers: s.addrs()}, s.election(), election.WithID("nemesis-operator"))
	if err != nil {
		return election.Leader{}, err
	}
	defer e.Close()
	return election.RequestTransfer(ctx, e, to)
}

// leaders reads each election's leader through one connection of its own,
// with an Elector of zk.New per election that never campaigns.
func (s *zkStore) leaders(ctx context.Context, names []string) (map[string]sideLeader, error) {
	conn, err := zktest.Connect(s.e.Addrs(), 4*time.Second)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	out := map[string]sideLeader{}
	for _, name := range names {
		e, err := zk.New(conn, name, election.WithID("nemesis-observer"))
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
