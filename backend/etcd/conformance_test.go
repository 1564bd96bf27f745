package etcd_test

import (
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/electkit/election"
	"github.com/electkit/election/backend/etcd"
	"github.com/electkit/election/electiontest"
	"github.com/electkit/election/internal/embedetcd"
	"github.com/electkit/election/internal/etcdtest"
)

func startEtcd(t testing.TB) []string {
	t.Helper()
	return etcdtest.New(t, embedetcd.Config{}).Endpoints()
}

type etcdElection struct {
	eps  []string
	name string
	clis map[election.Elector]*clientv3.Client
}

func (x *etcdElection) Candidate(t *testing.T, opts ...election.Option) election.Elector {
	cli, err := clientv3.New(clientv3.Config{Endpoints: x.eps, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	e, err := etcd.New(cli, x.name, append([]election.Option{election.WithTTL(2 * time.Second)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	x.clis[e] = cli
	return e
}

func (x *etcdElection) Crash(t *testing.T, e election.Elector) {
	x.clis[e].Close()
}

func TestConformance(t *testing.T) {
	eps := startEtcd(t)
	n := 0
	electiontest.Run(t, electiontest.Harness{
		NewElection: func(t *testing.T) electiontest.Election {
			n++
			return &etcdElection{eps: eps, name: "/conformance/" + t.Name(), clis: map[election.Elector]*clientv3.Client{}}
		},
		Failover:  2*time.Second + time.Second,
		Handovers: 30,
	})
}
