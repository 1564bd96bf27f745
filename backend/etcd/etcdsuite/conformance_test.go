package etcdsuite_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/electkit/election"
	"github.com/electkit/election/backend/etcd"
	"github.com/electkit/election/electiontest"
	"github.com/electkit/election/internal/rig/faultproxy"
)

// etcdElection is one election of the conformance suite: each candidate
// has its own client through its own TCP proxy (a plain byte pipe), so that
// Silence can drop the member's replies to that candidate alone.
type etcdElection struct {
	session bool   // each candidate on a shared Session of its client
	addr    string // the member's client address, host:port
	name    string
	admin   *clientv3.Client // another client of the store, for Evict
	mu      sync.Mutex
	clis    map[election.Elector]*clientv3.Client
	px      map[election.Elector]*faultproxy.Proxy
}

func (x *etcdElection) Candidate(t *testing.T, opts ...election.Option) election.Elector {
	px := faultproxy.New(t, x.addr)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"http://" + px.Addr}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() }) // before the proxy closes
	var e *etcd.Elector
	if x.session {
		ttl := election.Options{TTL: 2 * time.Second}
		for _, o := range opts {
			o(&ttl) // the session takes the TTL the suite asks of the candidate
		}
		s, err := etcd.NewSession(context.Background(), cli, election.WithTTL(ttl.TTL))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		e, err = etcd.NewWithSession(s, x.name, opts...)
		if err != nil {
			t.Fatal(err)
		}
	} else {
		e, err = etcd.New(cli, x.name, append([]election.Option{election.WithTTL(2 * time.Second)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
	}
	x.mu.Lock()
	x.clis[e], x.px[e] = cli, px
	x.mu.Unlock()
	return e
}

func (x *etcdElection) Crash(t *testing.T, e election.Elector) {
	x.mu.Lock()
	cli := x.clis[e]
	x.mu.Unlock()
	cli.Close()
}

// Silence drops the member's replies to e: requests arrive and are carried
// out, no answer comes back.
func (x *etcdElection) Silence(t *testing.T, e election.Elector) func() {
	x.mu.Lock()
	px := x.px[e]
	x.mu.Unlock()
	px.CutReplies()
	return func() {
		// The proxy dropped bytes of a stream: what is still open
		// would never parse again, so it is closed and the client
		// reconnects, as after a network fault that long.
		px.Heal()
		px.Reset()
	}
}

// Evict deletes the leader's key with another client, as etcdctl del does.
func (x *etcdElection) Evict(t *testing.T, e election.Elector, term *election.Term) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := x.admin.Get(ctx, x.name+"/", clientv3.WithPrefix())
	if err != nil {
		t.Fatalf("Evict: %v", err)
	}
	for _, kv := range resp.Kvs {
		if uint64(kv.CreateRevision) == term.Token() {
			if _, err := x.admin.Delete(ctx, string(kv.Key)); err != nil {
				t.Fatalf("Evict: deleting %s: %v", kv.Key, err)
			}
			return
		}
	}
	t.Fatalf("Evict: no key of %s under %s/ has create revision %d", e.(*etcd.Elector).ID(), x.name, term.Token())
}

func TestConformance(t *testing.T) { conformance(t, false) }

// Every candidate on a Session of its own client, shared with nothing
// else: the Session's renewal loop, hooks and loss carry the contract.
func TestConformanceOnSession(t *testing.T) { conformance(t, true) }

func conformance(t *testing.T, session bool) {
	eps := startEtcd(t)
	admin := newClient(t, eps)
	electiontest.Run(t, electiontest.Harness{
		NewElection: func(t *testing.T) electiontest.Election {
			return &etcdElection{session: session, addr: strings.TrimPrefix(eps[0], "http://"), name: "/conformance/" + t.Name(), admin: admin,
				clis: map[election.Elector]*clientv3.Client{}, px: map[election.Elector]*faultproxy.Proxy{}}
		},
		Failover:  2*time.Second + time.Second,
		Handovers: 30,
		Named: func(t *testing.T, name string, opts ...election.Option) (election.Elector, error) {
			cli := newClient(t, eps)
			var e *etcd.Elector
			var err error
			if session {
				s := newSession(t, cli)
				e, err = etcd.NewWithSession(s, name, opts...)
			} else {
				e, err = etcd.New(cli, name, append([]election.Option{election.WithTTL(2 * time.Second)}, opts...)...)
			}
			if err != nil {
				return nil, err // not a nil *etcd.Elector in an interface
			}
			return e, nil
		},
	})
}
