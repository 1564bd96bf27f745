// Command quickstart keeps one leader among the replicas of a service, on
// etcd. Start two or three copies with different -id: one leads and works,
// writing each job with its fencing token; after -jobs jobs it steps down
// and a waiting copy takes over at once. Ctrl-C stops a copy.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"log"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/electkit/election"
	"github.com/electkit/election/backend/etcd"
)

func main() {
	if err := run(); err != nil && !errors.Is(err, context.Canceled) { // Canceled: a signal
		log.Fatal(err)
	}
}

func run() error {
	host, _ := os.Hostname()
	id := flag.String("id", host, "this replica's ID in the election")
	endpoints := flag.String("endpoints", cmp.Or(os.Getenv("ETCD_ENDPOINTS"), "127.0.0.1:2379"),
		"etcd's endpoints, comma-separated (default from ETCD_ENDPOINTS)")
	jobs := flag.Int("jobs", 10, "jobs a leader does before it steps down (0: never)")
	flag.Parse()

	// Ctrl-C or SIGTERM ends ctx: the work stops, then the next replica leads.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	cli, err := clientv3.New(clientv3.Config{Endpoints: strings.Split(*endpoints, ","), DialTimeout: 5 * time.Second})
	if err != nil {
		return err
	}
	defer cli.Close()

	e, err := etcd.New(cli, "/services/demo", election.WithID(*id))
	if err != nil {
		return err // an *election.OptionError names the value it refused
	}
	defer e.Close() // resigns if still leading

	return election.Run(ctx, e, election.Callbacks{
		OnElected: func(ctx context.Context, t *election.Term) {
			log.Printf("%s leads, token %d", *id, t.Token())
			tick := time.NewTicker(200 * time.Millisecond)
			defer tick.Stop()
			for job := 1; ; job++ {
				select {
				case <-ctx.Done(): // the leadership ended, or Run is stopping
					return
				case <-tick.C:
				}
				write(t.Token(), job)
				if job == *jobs {
					log.Printf("%s steps down after %d jobs", *id, job)
					// With OnElected's own ctx: hands over at once, returns nil.
					if err := e.Resign(ctx); err != nil {
						log.Print(err)
					}
					return // Run calls OnDemoted, then campaigns again
				}
			}
		},
		OnDemoted: func(t *election.Term) { log.Printf("%s no longer leads: %v", *id, t.Err()) },
	})
}

// write stands for a write to a store the replicas share, which should refuse
// a token below the highest it has seen: a stale leader's write then fails.
func write(token uint64, job int) {
	log.Printf("job %d written with token %d", job, token)
}
