package election_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/electkit/election"
	"github.com/electkit/election/backend/inmem"
)

// The examples run on backend/inmem, the in-process election; with a
// server-backed election only the constructor changes (etcd.New, zk.New).

// cluster starts an in-process election on the ring algorithm and joins the
// given members to it.
func cluster(ids ...string) (*inmem.Cluster, []*inmem.Elector) {
	c, err := inmem.NewCluster(inmem.Ring)
	if err != nil {
		panic(err)
	}
	var es []*inmem.Elector
	for _, id := range ids {
		e, err := c.Join(election.WithID(id), election.WithTTL(c.Timing().LeaseTTL),
			election.WithValue([]byte(id+".internal:5432")))
		if err != nil {
			panic(err)
		}
		es = append(es, e)
	}
	return c, es
}

// Two candidates: the first leads, resigns, and the second takes over with a
// larger fencing token.
func Example_campaignAndResign() {
	c, es := cluster("a", "b")
	defer c.Close()
	a, b := es[0], es[1]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	ta, _ := a.Campaign(ctx)
	fmt.Println("leader:", ta.Leader().ID)

	next := make(chan *election.Term, 1)
	go func() {
		tb, _ := b.Campaign(ctx) // waits behind a
		next <- tb
	}()
	_ = a.Resign(ctx)
	fmt.Println("a's term ended:", ta.Err())
	tb := <-next
	fmt.Println("leader:", tb.Leader().ID, "token grew:", tb.Token() > ta.Token())
	// Output:
	// leader: a
	// a's term ended: election: resigned
	// leader: b token grew: true
}

// Run campaigns and calls OnElected; when its own ctx ends, OnElected's ctx
// ends first, and Run resigns once OnElected has returned, then calls
// OnDemoted.
func ExampleRun() {
	c, es := cluster("worker-1")
	defer c.Close()

	ctx, stop := context.WithCancel(context.Background())
	err := election.Run(ctx, es[0], election.Callbacks{
		OnElected: func(ctx context.Context, t *election.Term) {
			fmt.Println("elected:", t.Leader().ID)
			stop()       // the application decides to shut down...
			<-ctx.Done() // ...the work stops; then Run resigns
		},
		OnDemoted: func(t *election.Term) {
			fmt.Println("demoted:", t.Err())
		},
	})
	fmt.Println("Run returned:", err)
	// Output:
	// elected: worker-1
	// demoted: election: resigned
	// Run returned: context canceled
}

// OnElected steps down with e.Resign and its own ctx: Resign returns nil,
// the next candidate leads at once, and OnDemoted follows OnElected's
// return. Run would campaign again after its backoff; this program leaves
// the election instead, by ending Run's ctx.
func ExampleRun_stepDown() {
	c, es := cluster("worker-1", "worker-2")
	defer c.Close()
	e, other := es[0], es[1]
	ctx, leave := context.WithCancel(context.Background())
	next := make(chan *election.Term, 1)
	err := election.Run(ctx, e, election.Callbacks{
		OnElected: func(ctx context.Context, t *election.Term) {
			fmt.Println("elected:", t.Leader().ID)
			go func() {
				t, _ := other.Campaign(context.Background())
				next <- t
			}()
			fmt.Println("stepping down:", e.Resign(ctx))
			<-ctx.Done()
		},
		OnDemoted: func(t *election.Term) {
			fmt.Println("demoted:", t.Err())
			leave()
		},
	})
	fmt.Println("Run returned:", err)
	fmt.Println("leader:", (<-next).Leader().ID)
	// Output:
	// elected: worker-1
	// stepping down: <nil>
	// demoted: election: resigned
	// Run returned: context canceled
	// leader: worker-2
}

// A follower watches who leads, e.g. to forward requests to the leader's
// address carried in its Value.
func ExampleElector_Observe() {
	c, es := cluster("db-1", "db-2")
	defer c.Close()
	leader, follower := es[0], es[1]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	changes := follower.Observe(ctx)
	fmt.Println("now:", <-changes) // the current state comes first
	t, _ := leader.Campaign(ctx)
	l := <-changes
	fmt.Printf("leader %s at %s\n", l.ID, l.Value)
	_ = leader.Resign(ctx)
	fmt.Println("now:", <-changes, t.Err() != nil)
	// Output:
	// now: none
	// leader db-1 at db-1.internal:5432
	// now: none true
}

// A refused option names the field and the value.
func ExampleNewOptions() {
	_, err := election.NewOptions(election.WithTTL(50 * time.Millisecond))
	fmt.Println(err)
	fmt.Println(errors.Is(err, election.ErrInvalidOption))
	// Output:
	// election: invalid option TTL = 50ms: must be between 1s and 10m0s
	// true
}
