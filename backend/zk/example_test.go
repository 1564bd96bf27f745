package zk_test

import (
	"context"
	"log"
	"time"

	gozk "github.com/go-zookeeper/zk"

	"github.com/electkit/election"
	"github.com/electkit/election/backend/zk"
)

// Dial connects (and owns the connection); the leader fences its writes
// to ZooKeeper with Fence in a Multi.
func Example() {
	ctx := context.Background()
	e, err := zk.Dial(ctx, zk.DialConfig{Servers: []string{"127.0.0.1:2181"}}, "/services/scheduler",
		election.WithID("sched-1"), election.WithTTL(10*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer e.Close()
	t, err := e.Campaign(ctx)
	if err != nil {
		log.Fatal(err)
	}
	check, err := e.Fence(t)
	if err != nil {
		log.Fatal(err)
	}
	_ = check // conn.Multi(check, &gozk.SetDataRequest{…}): commits only while t is current
}

// New shares a connection, and so a session, among many Electors. Their
// TTL is the session timeout the server granted the connection.
func ExampleNew() {
	conn, _, err := gozk.Connect([]string{"127.0.0.1:2181"}, 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	for _, shard := range []string{"/shards/0", "/shards/1"} {
		e, err := zk.New(conn, shard, election.WithID("node-a"))
		if err != nil {
			log.Fatal(err)
		}
		defer e.Close()
	}
}
