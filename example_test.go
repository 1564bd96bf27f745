package election_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/electkit/election"
	"github.com/electkit/election/internal/refbackend"
)

// The examples run on the library's in-process reference backend; with a
// real backend only the constructor changes (etcd.New, zk.New).

// Two candidates: the first leads, resigns, and the second takes over with a
// larger fencing token.
func Example_campaignAndResign() {
	store := refbackend.NewStore(refbackend.Bugs{})
	a, _ := store.NewElector(election.WithID("a"), election.WithTTL(2*time.Second))
	b, _ := store.NewElector(election.WithID("b"), election.WithTTL(2*time.Second))
	defer a.Close()
	defer b.Close()
	ctx := context.Background()

	ta, _ := a.Campaign(ctx)
	fmt.Println("leader:", ta.Leader().ID, "token:", ta.Token())

	next := make(chan *election.Term)
	go func() {
		tb, _ := b.Campaign(ctx) // waits behind a
		next <- tb
	}()
	_ = a.Resign(ctx)
	fmt.Println("a's term ended:", ta.Err())
	tb := <-next
	fmt.Println("leader:", tb.Leader().ID, "token:", tb.Token())
	// Output:
	// leader: a token: 1
	// a's term ended: election: resigned
	// leader: b token: 2
}

// Run campaigns, calls OnElected with the term's context, and when its own
// ctx ends resigns and calls OnDemoted.
func ExampleRun() {
	store := refbackend.NewStore(refbackend.Bugs{})
	e, _ := store.NewElector(election.WithID("worker-1"), election.WithTTL(2*time.Second))
	defer e.Close()

	ctx, stop := context.WithCancel(context.Background())
	err := election.Run(ctx, e, election.Callbacks{
		OnElected: func(ctx context.Context, t *election.Term) {
			fmt.Println("elected with token", t.Token())
			stop()       // the application decides to shut down...
			<-ctx.Done() // ...and Run resigns, which ends the term
		},
		OnDemoted: func(t *election.Term) {
			fmt.Println("demoted:", t.Err())
		},
	})
	fmt.Println("Run returned:", err)
	// Output:
	// elected with token 1
	// demoted: election: resigned
	// Run returned: context canceled
}

// A follower watches who leads, e.g. to forward requests to the leader's
// address carried in its Value.
func ExampleElector_Observe() {
	store := refbackend.NewStore(refbackend.Bugs{})
	leader, _ := store.NewElector(election.WithID("db-1"), election.WithValue([]byte("10.0.0.1:5432")), election.WithTTL(2*time.Second))
	follower, _ := store.NewElector(election.WithID("db-2"), election.WithTTL(2*time.Second))
	defer leader.Close()
	defer follower.Close()
	ctx, cancel := context.WithCancel(context.Background())
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
	// leader db-1 at 10.0.0.1:5432
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
