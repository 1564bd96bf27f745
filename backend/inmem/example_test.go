package inmem_test

import (
	"context"
	"fmt"
	"time"

	"github.com/electkit/election"
	"github.com/electkit/election/backend/inmem"
)

// Three members of a bully cluster in this process: a leads; b and c
// queue; a hands its leadership to c, passing over b, whose priority is
// higher.
func Example() {
	c, err := inmem.NewCluster(inmem.Bully)
	if err != nil {
		panic(err)
	}
	defer c.Close()
	ctx := context.Background()
	join := func(id string, priority int64) *inmem.Elector {
		e, err := c.Join(election.WithID(id), election.WithPriority(priority))
		if err != nil {
			panic(err)
		}
		return e
	}
	a, b, cc := join("a", 0), join("b", 2), join("c", 1)
	t, err := a.Campaign(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("leader:", t.Leader().ID)
	terms := make(chan *election.Term, 2)
	for _, e := range []*inmem.Elector{b, cc} {
		go func() {
			if t, err := e.Campaign(ctx); err == nil {
				terms <- t
			}
		}()
	}
	for {
		if ws, _ := a.Candidates(ctx); len(ws) == 2 {
			fmt.Println("waiting:", ws[0].ID, ws[1].ID)
			break
		}
		time.Sleep(time.Millisecond) // until both have queued
	}
	if err := election.Transfer(ctx, a, t, "c", election.KeepLeading); err != nil {
		panic(err)
	}
	fmt.Println("after the transfer:", (<-terms).Leader().ID, "— the old Term:", t.Err())
	// Output:
	// leader: a
	// waiting: b c
	// after the transfer: c — the old Term: election: transferred to c
}
