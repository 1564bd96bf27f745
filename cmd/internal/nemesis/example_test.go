package nemesis_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/electkit/election/cmd/internal/nemesis"
	"github.com/electkit/election/internal/mono"
)

// A candidate process reports its Term and writes to the fenced register
// under the Term's token; the run's history is then checked.
func Example() {
	reg, err := nemesis.NewRegister(true)
	if err != nil {
		log.Fatal(err)
	}
	defer reg.Close()
	start := mono.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// In the candidate process, for the Term with token 7:
	c := nemesis.DialRegister(reg.Addr(), "a", 0)
	defer c.Close()
	now := mono.Now()
	if err := c.Report(ctx, nemesis.Event{Kind: nemesis.Elected, Token: 7, At: now, Deadline: now + int64(time.Second)}); err != nil {
		log.Fatal(err)
	}
	call := mono.Now() // right after checking that the Term is valid
	ok, err := c.Write(ctx, 7, "hello", call)
	fmt.Println("write with token 7 accepted:", ok, err)
	if err := c.Report(ctx, nemesis.Event{Kind: nemesis.Demoted, Token: 7, At: mono.Now()}); err != nil {
		log.Fatal(err)
	}

	h := &nemesis.History{
		Backend: "example", Fenced: true,
		Start: start, End: mono.Now(),
		Writes: reg.Writes(), Events: reg.Events(),
	}
	r := nemesis.Check(h, nemesis.CheckOptions{})
	for _, v := range r.Verdicts {
		fmt.Println(v.Name, v.OK)
	}
	// Output:
	// write with token 7 accepted: true <nil>
	// linearizable true
	// P3 valid terms true
	// P3 writes in terms true
	// P1/P2 tokens true
	// P5 callbacks true
}
