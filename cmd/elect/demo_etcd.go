package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/electkit/election"
	"github.com/electkit/election/backend/etcd"
	"github.com/electkit/election/internal/rig/embedetcd"
)

// etcdDemo runs the story on an etcd member embedded in this process, in a
// temporary directory removed by Close: one clientv3 client per candidate,
// each dialing through a link the demo can cut, so that a crash is the
// candidate going silent without a Resign: its lease runs out on the store.
type etcdDemo struct {
	srv *embedetcd.Server
	ttl time.Duration

	mu   sync.Mutex
	clis map[election.Elector]*etcdLink
}

// etcdLink is a candidate's cuttable dialer and the client dialing through
// it.
type etcdLink struct {
	demoLink
	cli *clientv3.Client
}

func openEtcd(_ context.Context, cfg demoConfig) (demoBackend, error) {
	srv, err := embedetcd.Start(embedetcd.Config{})
	if err != nil {
		return nil, fmt.Errorf("starting the embedded etcd: %w", err)
	}
	return &etcdDemo{srv: srv, ttl: cfg.TTL, clis: map[election.Elector]*etcdLink{}}, nil
}

func (d *etcdDemo) Name() string { return "etcd" }

func (d *etcdDemo) Describe() string {
	return fmt.Sprintf("an embedded etcd at %s, lease TTL %v", d.srv.Endpoints()[0], d.ttl)
}

func (d *etcdDemo) Candidate(_ context.Context, id string, opts ...election.Option) (election.Elector, error) {
	l := &etcdLink{}
	cli, err := clientv3.New(clientv3.Config{Endpoints: d.srv.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithContextDialer(l.dialGRPC)}})
	if err != nil {
		return nil, err
	}
	e, err := etcd.New(cli, "/elect/demo", append([]election.Option{election.WithID(id), election.WithTTL(d.ttl)}, opts...)...)
	if err != nil {
		cli.Close()
		return nil, err
	}
	d.mu.Lock()
	l.cli = cli
	d.clis[e] = l
	d.mu.Unlock()
	return e, nil
}

func (d *etcdDemo) Crash(e election.Elector) error {
	d.mu.Lock()
	l, ok := d.clis[e]
	d.mu.Unlock()
	if !ok {
		return fmt.Errorf("etcd demo: %T is not a candidate of this demo", e)
	}
	l.cut()
	return nil
}

func (d *etcdDemo) Close() error {
	d.mu.Lock()
	var errs []error
	for _, l := range d.clis {
		l.cut()
		if err := l.cli.Close(); err != nil && !errors.Is(err, context.Canceled) {
			errs = append(errs, err)
		}
	}
	d.clis = nil
	d.mu.Unlock()
	return errors.Join(append(errs, d.srv.Close())...)
}
