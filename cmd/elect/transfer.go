package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/electkit/election"
	"github.com/electkit/election/backend"
)

// exitNotMoved is elect transfer's exit code when the leader found no such
// waiting candidate and keeps leading.
const exitNotMoved = 4

func transferCommand() *command {
	return &command{
		name:     "transfer",
		summary:  "move an election's leadership to a chosen candidate, or to the best waiting one",
		synopsis: "--name NAME [--to ID] [--endpoints LIST] [flags]",
		about: `Asks the election's current leader, wherever it runs, to hand its
leadership to the waiting candidate --to names, or, without --to, to the
best waiting one (the highest priority, then the longest waiting): what an
operator does before draining the leader's node. The request goes through
the store; the leader's process (an elect run, or any program on this
library's etcd backend) ends its Term and hands over in one write, and the
target leads at once, with a higher fencing token, ahead of every other
candidate. elect transfer prints the new leader as elect leader does.

The leader's Term ends before the target can lead. Under elect run, the
old leader's CMD then gets SIGTERM at once and SIGKILL after that elect
run's --grace (sooner if its lease deadline comes first), as for any
leadership that ends without elect asking; the target leads meanwhile, and
the old CMD's fencing token is stale. To have the old CMD gone before the
next leader starts, send the leader's elect SIGTERM instead: it stops CMD,
then resigns, and the next candidate in order takes over.

Exit codes: 0 the leadership moved (the new leader is printed), 3 the
election has no leader, 4 the leader has no such waiting candidate and
keeps leading, 1 the transfer failed (the target did not take over, or the
leader did not answer within two lease windows), 2 bad command line.`,
		example: `elect transfer --name /services/scheduler --to sched-2
elect transfer --name /services/scheduler --json   # to the best waiting candidate`,
		setup: func(f *flagSet) func(context.Context, io.Writer) error {
			ef := defineElectionFlags(f, false, true)
			var to string
			var asJSON bool
			f.String(&to, "to", "ID", "", "the ID of the waiting candidate to lead next (default: the best waiting one)")
			f.Bool(&asJSON, "json", false, "print the new leader as a JSON object")
			return func(ctx context.Context, w io.Writer) error {
				if _, err := ef.check(f, false); err != nil {
					return err
				}
				if to != "" {
					if err := backend.ValidateID(to); err != nil {
						return f.Bad("to", "%v", reason(err))
					}
				}
				ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
				defer stop()
				e, closeAll, err := ef.open(ctx, f, []election.Option{election.WithLogger(warnLogger(f.stderr))})
				if err != nil {
					return err
				}
				defer closeAll()
				l, err := election.RequestTransfer(ctx, e, to)
				switch {
				case errors.Is(err, election.ErrNoLeader):
					return &exitError{code: exitNoLeader, err: err}
				case errors.Is(err, election.ErrNoCandidate):
					return &exitError{code: exitNotMoved, err: err}
				case errors.Is(err, errors.ErrUnsupported):
					return fmt.Errorf("--backend %s cannot take transfer requests: %w", ef.backend, err)
				case err != nil:
					return err
				}
				return writeLeader(w, asJSON, view{waiting: -1}, l)
			}
		},
	}
}
