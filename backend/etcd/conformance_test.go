package etcd_test

import (
	"net/url"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/electkit/election"
	"github.com/electkit/election/backend/etcd"
	"github.com/electkit/election/electiontest"
)

func startEtcd(t testing.TB) []string {
	t.Helper()
	cfg := embed.NewConfig()
	cfg.Dir = t.TempDir()
	u, _ := url.Parse("http://127.0.0.1:0")
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*u}, []url.URL{*u}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*u}, []url.URL{*u}
	cfg.InitialCluster = cfg.Name + "=http://127.0.0.1:0"
	cfg.TickMs, cfg.ElectionMs = 50, 500
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		t.Fatal("etcd not ready")
	}
	return []string{"http://" + e.Clients[0].Addr().String()}
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
