package etcd_test

import (
	"context"
	"log"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/electkit/election"
	"github.com/electkit/election/backend/etcd"
)

// A candidate campaigns, writes with its token fenced by Fence, and
// hands its leadership to another candidate before it is drained.
func Example() {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"127.0.0.1:2379"}, DialTimeout: 5 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()
	e, err := etcd.New(cli, "/services/scheduler",
		election.WithID("sched-1"), election.WithValue([]byte("10.0.0.7:8080")),
		election.WithTTL(5*time.Second), election.WithPriority(1))
	if err != nil {
		log.Fatal(err)
	}
	defer e.Close()
	ctx := context.Background()
	t, err := e.Campaign(ctx)
	if err != nil {
		log.Fatal(err)
	}
	// A write that commits only while this Term is current.
	cmp, err := e.Fence(t)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := cli.Txn(t.Context()).If(cmp).Then(clientv3.OpPut("/jobs/42/owner", "sched-1")).Commit(); err != nil {
		log.Print(err)
	}
	// Before maintenance: hand the leadership to sched-2, at once.
	if err := election.Transfer(ctx, e, t, "sched-2", election.KeepLeading); err != nil {
		log.Print(err)
	}
}

// A process with a leader per shard shares one lease among its Electors.
func ExampleNewSession() {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"127.0.0.1:2379"}, DialTimeout: 5 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()
	ctx := context.Background()
	s, err := etcd.NewSession(ctx, cli, election.WithTTL(10*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	for _, shard := range []string{"/shards/0", "/shards/1", "/shards/2"} {
		e, err := etcd.NewWithSession(s, shard, election.WithID("node-a"))
		if err != nil {
			log.Fatal(err)
		}
		defer e.Close()
		go election.Run(ctx, e, election.Callbacks{ //nolint:errcheck // until ctx ends
			OnElected: func(ctx context.Context, t *election.Term) { <-ctx.Done() },
		})
	}
}
